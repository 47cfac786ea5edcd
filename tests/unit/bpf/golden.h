/* SPDX-License-Identifier: MIT */
/* Golden-file comparison for the bpf unit tests: FAY_UPDATE_GOLDEN=1
 * rewrites the expected files instead of comparing. */
#ifndef FAY_TEST_BPF_GOLDEN_H
#define FAY_TEST_BPF_GOLDEN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* tests/unit/bpf/golden/NAME, relative to the source tree. */
static inline void golden_path(char *buf, size_t len, const char *name)
{
	const char *src = __FILE__;
	const char *slash = strrchr(src, '/');

	snprintf(buf, len, "%.*sgolden/%s", slash ? (int)(slash - src + 1) : 0,
		 src, name);
}

static inline char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;
	int c;
	FILE *m;

	if (!f)
		return NULL;
	m = open_memstream(&buf, &len);
	while ((c = fgetc(f)) != EOF)
		fputc(c, m);
	fclose(m);
	fclose(f);
	return buf;
}

/* Compare text with the golden file name; report one test line. */
static inline void golden_check(const char *name, const char *text)
{
	char path[512];
	char *want;

	golden_path(path, sizeof(path), name);
	if (getenv("FAY_UPDATE_GOLDEN")) {
		FILE *f = fopen(path, "w");

		ok(f && fputs(text, f) >= 0, "golden %s rewritten", name);
		if (f)
			fclose(f);
		return;
	}
	want = slurp(path);
	ok(want && !strcmp(want, text), "%s matches golden", name);
	if (want && strcmp(want, text)) {
		printf("# --- want (%s)\n%s# --- got\n%s", path, want, text);
	} else if (!want) {
		printf("# cannot read %s; got:\n%s", path, text);
	}
	free(want);
}

#endif
