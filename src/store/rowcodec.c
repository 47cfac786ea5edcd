// SPDX-License-Identifier: MIT
/*
 * The SQLite store: how a span is laid out in its row, shared by the
 * write path (sqlite.c) and the readers (sqlite_read.c, scan.c).
 *
 * spans.extra holds a span's annotations and tags in a compact binary
 * form instead of JSON text: encoding it is a copy, decoding it is a
 * copy, no JSON is built on ingest nor parsed on reads (the format is
 * documented in schema.sql).  traces.bloom is sqlite_bloom.c's.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_int.h"
#include "store/store.h"

#define EXTRA_FORMAT 1

/* ---- spans.extra -------------------------------------------------------- */

static int buf_room(struct sq_buf *b, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (b->len + n <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + n)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static void put_varint(struct sq_buf *b, uint64_t v)
{
	while (v >= 0x80) {
		b->p[b->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->len++] = (uint8_t)v;
}

static void put_str(struct sq_buf *b, struct zs_str s)
{
	put_varint(b, s.len);
	memcpy(b->p + b->len, s.p, s.len);
	b->len += s.len;
}

int sq_extra_encode(struct sq_buf *b, const struct zspan *z)
{
	size_t need = 1 + 2 * 10;

	b->len = 0;
	if (!z->nannotations && !z->ntags)
		return 0;
	for (uint32_t i = 0; i < z->nannotations; i++)
		need += 2 * 10 + z->annotations[i].value.len;
	for (uint32_t i = 0; i < z->ntags; i++)
		need += 2 * 5 + z->tags[i].key.len + z->tags[i].value.len;
	if (buf_room(b, need))
		return -ENOMEM;
	b->p[b->len++] = EXTRA_FORMAT;
	put_varint(b, z->nannotations);
	for (uint32_t i = 0; i < z->nannotations; i++) {
		put_varint(b, z->annotations[i].ts_us);
		put_str(b, z->annotations[i].value);
	}
	put_varint(b, z->ntags);
	for (uint32_t i = 0; i < z->ntags; i++) {
		put_str(b, z->tags[i].key);
		put_str(b, z->tags[i].value);
	}
	return 0;
}

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t get_varint(struct rd *r)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end)
			break;
		v |= (uint64_t)(*r->p & 0x7f) << shift;
		if (!(*r->p++ & 0x80))
			return v;
	}
	r->bad = 1;
	return 0;
}

static int get_str(struct rd *r, struct zarena *a, struct zs_str *out)
{
	uint64_t n = get_varint(r);

	if (r->bad || n > (uint64_t)(r->end - r->p)) {
		r->bad = 1;
		return 0;
	}
	r->p += n;
	return zarena_str(a, out, (const char *)r->p - n, (size_t)n, 0);
}

int sq_extra_decode(const void *p, size_t n, struct zarena *a, struct zspan *z)
{
	struct rd r = { p, (const uint8_t *)p + n, 0 };
	uint64_t k;

	z->nannotations = z->ntags = 0;
	if (!n)
		return 0;
	if (*r.p++ != EXTRA_FORMAT)
		return -EBADMSG;
	k = get_varint(&r);
	if (r.bad || k > n)
		return -EBADMSG;
	if (k) {
		z->annotations = zarena_alloc(a, sizeof(*z->annotations) * k);
		if (!z->annotations)
			return -ENOMEM;
	}
	for (uint64_t i = 0; i < k && !r.bad; i++) {
		struct zs_annotation *an = &z->annotations[i];

		an->ts_us = get_varint(&r);
		if (get_str(&r, a, &an->value))
			return -ENOMEM;
		z->nannotations++;
	}
	k = get_varint(&r);
	if (r.bad || k > n)
		return -EBADMSG;
	if (k) {
		z->tags = zarena_alloc(a, sizeof(*z->tags) * k);
		if (!z->tags)
			return -ENOMEM;
	}
	for (uint64_t i = 0; i < k && !r.bad; i++) {
		struct zs_tag *t = &z->tags[i];

		if (get_str(&r, a, &t->key) || get_str(&r, a, &t->value))
			return -ENOMEM;
		z->ntags++;
	}
	if (r.bad || r.p != r.end) {
		z->nannotations = z->ntags = 0;
		return -EBADMSG;
	}
	return 0;
}

/* ---- a spans row -------------------------------------------------------- */

int sq_col_str(sqlite3_stmt *s, int i, struct zarena *a, struct zs_str *out)
{
	const unsigned char *t = sqlite3_column_text(s, i);

	if (!t) {
		*out = (struct zs_str){ "", 0 };
		return 0;
	}
	return zarena_str(a, out, (const char *)t, (size_t)sqlite3_column_bytes(s, i), 0);
}

int sq_col_ep(sqlite3_stmt *s, int i, struct zarena *a, struct zs_endpoint *e)
{
	const unsigned char *t;

	memset(e, 0, sizeof(*e));
	if (sq_col_str(s, i, a, &e->service))
		return -ENOMEM;
	if ((t = sqlite3_column_text(s, i + 1)))
		snprintf(e->ipv4, sizeof(e->ipv4), "%s", (const char *)t);
	if ((t = sqlite3_column_text(s, i + 2)))
		snprintf(e->ipv6, sizeof(e->ipv6), "%s", (const char *)t);
	e->port = (uint16_t)sqlite3_column_int(s, i + 3);
	return 0;
}

int sq_row_span(sqlite3_stmt *s, int c, struct zarena *a, struct zspan *z)
{
	const void *x;
	int ret;

	memset(z, 0, sizeof(*z));
	z->id = (uint64_t)sqlite3_column_int64(s, c);
	z->parent_id = (uint64_t)sqlite3_column_int64(s, c + 1);
	z->kind = (uint8_t)sqlite3_column_int(s, c + 2);
	if (z->kind >= SPAN_KIND_MAX)
		z->kind = SPAN_KIND_UNSET;
	if (sq_col_str(s, c + 3, a, &z->name) || sq_col_ep(s, c + 4, a, &z->local) ||
	    sq_col_ep(s, c + 8, a, &z->remote))
		return -ENOMEM;
	z->timestamp_us = (uint64_t)sqlite3_column_int64(s, c + 12);
	z->duration_us = (uint64_t)sqlite3_column_int64(s, c + 13);
	z->shared = (uint8_t)sqlite3_column_int(s, c + 14);
	z->debug = (uint8_t)sqlite3_column_int(s, c + 15);
	x = sqlite3_column_blob(s, c + 16);
	if (x) {
		ret = sq_extra_decode(x, (size_t)sqlite3_column_bytes(s, c + 16), a, z);
		if (ret == -ENOMEM)
			return ret;
		/* -EBADMSG: a damaged blob; keep the span without it */
	}
	zspan_normalize(z);
	return 0;
}
