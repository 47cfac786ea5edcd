// SPDX-License-Identifier: MIT
/*
 * The agent's ring cursors (spool.h): the in-memory table (instance, ring
 * -> position, record number, and the newest batch it covers) and the
 * cursor file (state-dir/cursors) it is loaded from and saved to.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/spool_int.h"
#include "common/file_atomic.h"

#define CURSOR_FILE_HEADER  "# fay agent cursors v1"

_Static_assert(sizeof(struct cursor) == 32, "cursor record");

/* ---- cursor table -------------------------------------------------------- */

void cursor_tab_free(struct cursor_tab *t)
{
	if (!t)
		return;
	free(t->v);
	t->v = NULL;
	t->n = t->cap = 0;
}

static struct cursor *tab_find(const struct cursor_tab *t, uint64_t instance,
			       uint32_t ring)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (t->v[i].instance == instance && t->v[i].ring == ring)
			return &t->v[i];
	return NULL;
}

const struct cursor *cursor_tab_get(const struct cursor_tab *t,
				    uint64_t instance, uint32_t ring)
{
	return tab_find(t, instance, ring);
}

int cursor_tab_reserve(struct cursor_tab *t, uint32_t n)
{
	uint32_t cap = t->cap ? t->cap : 16;
	struct cursor *v;

	if (t->n + n <= t->cap)
		return 0;
	while (cap < t->n + n)
		cap *= 2;
	v = realloc(t->v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	t->v = v;
	t->cap = cap;
	return 0;
}

int cursor_tab_set(struct cursor_tab *t, const struct cursor *c)
{
	struct cursor *e = tab_find(t, c->instance, c->ring);

	if (e) {
		if (c->pos > e->pos) {
			e->pos = c->pos;
			e->rec_no = c->rec_no;
		}
		return 0;
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 16;
		struct cursor *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n] = *c;
	t->v[t->n]._pad = 0;
	t->n++;
	return 0;
}

void cursor_tab_forget(struct cursor_tab *t, uint64_t instance)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i < t->n; i++)
		if (t->v[i].instance != instance)
			t->v[j++] = t->v[i];
	t->n = j;
}

int cursor_load(const char *path, struct cursor_tab *t, char *err, size_t errlen)
{
	char line[256];
	unsigned lineno = 0;
	FILE *f;
	int ret = 0;

	t->n = 0;
	t->seq = 0;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, c;
		unsigned ring;
		struct cursor cur = { 0 };
		char extra;

		lineno++;
		if (lineno == 1) {
			if (strncmp(line, CURSOR_FILE_HEADER, strlen(CURSOR_FILE_HEADER))) {
				snprintf(err, errlen, "%s:1: not a cursor file (want \"%s\")",
					 path, CURSOR_FILE_HEADER);
				ret = -EBADMSG;
				break;
			}
			continue;
		}
		if (sscanf(line, "seq %llu %c", &a, &extra) == 1) {
			t->seq = a;
			continue;
		}
		if (sscanf(line, "ring %llx %u %llu %llu %c", &a, &ring, &b, &c, &extra) != 4) {
			snprintf(err, errlen, "%s:%u: cannot parse \"%.*s\" (want \"ring <instance hex> <ring> <pos> <rec_no>\")",
				 path, lineno, (int)strcspn(line, "\n"), line);
			ret = -EBADMSG;
			break;
		}
		cur.instance = a;
		cur.ring = ring;
		cur.pos = b;
		cur.rec_no = c;
		ret = cursor_tab_set(t, &cur);
		if (ret)
			break;
	}
	fclose(f);
	if (ret) {
		t->n = 0;
		t->seq = 0;
	}
	return ret;
}

int cursor_save(const char *path, const struct cursor_tab *t, int sync)
{
	char *buf;
	size_t cap = 128 + (size_t)t->n * 80, len = 0;
	int ret;

	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	len += (size_t)snprintf(buf + len, cap - len, "%s\nseq %" PRIu64 "\n",
				CURSOR_FILE_HEADER, t->seq);
	for (uint32_t i = 0; i < t->n; i++)
		len += (size_t)snprintf(buf + len, cap - len,
					"ring %016" PRIx64 " %u %" PRIu64 " %" PRIu64 "\n",
					t->v[i].instance, t->v[i].ring, t->v[i].pos,
					t->v[i].rec_no);
	ret = file_write_atomic(path, buf, len, 0600, sync ? 0 : FILE_ATOMIC_NOSYNC);
	free(buf);
	return ret;
}
