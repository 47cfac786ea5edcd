// SPDX-License-Identifier: MIT
/* The one JSON string writer: see json_str.h for the rules. */
#include <stdint.h>

#include "common/json_str.h"
#include "common/utf8.h"

void json_str_put(json_put_fn *put, void *ctx, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t run = 0, i = 0;	/* s[run, i): bytes that pass as they are */

	put(ctx, "\"", 1);
	while (i < len) {
		size_t n;
		char esc[6] = { '\\', 'u', '0', '0', 0, 0 };

		if (u[i] >= 0x20 && u[i] < 0x80 && u[i] != '"' && u[i] != '\\') {
			i++;    /* ASCII that passes: most bytes, no call */
			continue;
		}
		n = utf8_seq_len(u + i, len - i);
		if (n && u[i] >= 0x20 && u[i] != '"' && u[i] != '\\') {
			i += n;
			continue;
		}
		if (i > run)
			put(ctx, s + run, i - run);
		if (u[i] == '"' || u[i] == '\\') {
			esc[1] = (char)u[i];
			put(ctx, esc, 2);
		} else {
			esc[4] = hex[u[i] >> 4];
			esc[5] = hex[u[i] & 15];
			put(ctx, esc, 6);
		}
		run = ++i;
	}
	if (i > run)
		put(ctx, s + run, i - run);
	put(ctx, "\"", 1);
}

int json_str_plain(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < len; i++)
		if (u[i] < 0x20 || u[i] >= 0x80 || u[i] == '"' || u[i] == '\\')
			return 0;
	return 1;
}

static void put_file(void *f, const char *p, size_t n)
{
	fwrite(p, 1, n, f);
}

void json_str(FILE *f, const char *s, size_t len)
{
	json_str_put(put_file, f, s, len);
}
