// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's rows in RowBinary, the format both ways (inserts
 * and answers): integers little-endian at their width, a Date as UInt16
 * days, a String as a LEB128 length and its bytes, an Array as a LEB128
 * count and its elements.  A Nested column is its parallel arrays.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "store/ch_int.h"

void ch_put_le16(struct wbuf *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	wbuf_put(w, b, 2);
}

void ch_put_str(struct wbuf *w, const char *p, size_t n)
{
	wbuf_uvar(w, n);
	wbuf_put(w, p, n);
}

uint16_t ch_day(uint64_t us)
{
	return (uint16_t)(us / 86400000000ull);
}

void ch_put_ep(struct wbuf *w, const struct zs_endpoint *e)
{
	ch_put_zs(w, e->service);
	ch_put_str(w, e->ipv4, strlen(e->ipv4));
	ch_put_str(w, e->ipv6, strlen(e->ipv6));
	ch_put_le16(w, e->port);
}

void ch_put_span(struct wbuf *w, const struct ch_key *k, const struct zspan *z)
{
	ch_put_le16(w, ch_day(z->timestamp_us ? z->timestamp_us : k->ver));
	wbuf_le64(w, k->trace_hi);
	wbuf_le64(w, k->trace_lo);
	wbuf_le64(w, k->id);
	wbuf_u8(w, k->origin);
	wbuf_le64(w, k->src);
	wbuf_le64(w, k->seq);
	wbuf_le32(w, k->no);
	wbuf_le64(w, k->ver);
	wbuf_le64(w, z->parent_id);
	wbuf_u8(w, z->kind);
	ch_put_zs(w, z->name);
	ch_put_ep(w, &z->local);
	ch_put_ep(w, &z->remote);
	wbuf_le64(w, z->timestamp_us);
	wbuf_le64(w, z->duration_us);
	wbuf_u8(w, z->shared);
	wbuf_u8(w, z->debug);
	wbuf_u8(w, z->error);
	wbuf_uvar(w, z->nannotations);
	for (uint32_t i = 0; i < z->nannotations; i++)
		wbuf_le64(w, z->annotations[i].ts_us);
	wbuf_uvar(w, z->nannotations);
	for (uint32_t i = 0; i < z->nannotations; i++)
		ch_put_zs(w, z->annotations[i].value);
	wbuf_uvar(w, z->ntags);
	for (uint32_t i = 0; i < z->ntags; i++)
		ch_put_zs(w, z->tags[i].key);
	wbuf_uvar(w, z->ntags);
	for (uint32_t i = 0; i < z->ntags; i++)
		ch_put_zs(w, z->tags[i].value);
}

int ch_get_str(struct rbuf *r, struct zarena *a, struct zs_str *out)
{
	uint64_t n = rbuf_uvar_max(r, r->len, "string length");
	const void *p = rbuf_get(r, n, "string");

	if (!p) {
		*out = (struct zs_str){ "", 0 };
		return r->err;
	}
	return zarena_str(a, out, p, n, 0) ? -ENOMEM : 0;
}

/* A String into a fixed char array (an address), cut to fit. */
static void get_fixed(struct rbuf *r, char *out, size_t size)
{
	uint64_t n = rbuf_uvar_max(r, r->len, "string length");
	const void *p = rbuf_get(r, n, "string");

	if (!p || n >= size)
		n = p ? size - 1 : 0;
	if (p)
		memcpy(out, p, n);
	out[n] = '\0';
}

static uint16_t get_le16(struct rbuf *r, const char *what)
{
	const uint8_t *b = rbuf_get(r, 2, what);

	return b ? (uint16_t)(b[0] | b[1] << 8) : 0;
}

int ch_get_ep(struct rbuf *r, struct zarena *a, struct zs_endpoint *e)
{
	int ret = ch_get_str(r, a, &e->service);

	get_fixed(r, e->ipv4, sizeof(e->ipv4));
	get_fixed(r, e->ipv6, sizeof(e->ipv6));
	e->port = get_le16(r, "port");
	return ret;
}

/* The count of an Array column; the arrays of a Nested column agree. */
static uint32_t get_count(struct rbuf *r, uint32_t want)
{
	uint64_t n = rbuf_uvar_max(r, r->len, "array size");

	if (want != UINT32_MAX && n != want)
		rbuf_fail(r, "nested arrays of different sizes");
	return (uint32_t)n;
}

/* The n strings of an Array(String) (its count read already) into the
 * n structs of stride bytes whose first string is at first.  0, -ENOMEM
 * or r->err. */
static int get_strs(struct rbuf *r, struct zarena *a, uint32_t n, struct zs_str *first,
		    size_t stride)
{
	int ret = 0;

	for (uint32_t i = 0; i < n && !r->err && !ret; i++)
		ret = ch_get_str(r, a, (struct zs_str *)((char *)first + i * stride));
	return ret;
}

int ch_get_span(struct rbuf *r, struct zarena *a, struct ch_key *k, struct zspan *z)
{
	uint32_t n;
	int ret = 0;

	memset(z, 0, sizeof(*z));
	k->trace_hi = z->trace_hi = rbuf_le64(r, "trace_hi");
	k->trace_lo = z->trace_lo = rbuf_le64(r, "trace_lo");
	k->id = z->id = rbuf_le64(r, "id");
	k->origin = rbuf_u8(r, "origin");
	k->src = rbuf_le64(r, "src");
	k->seq = rbuf_le64(r, "seq");
	k->no = rbuf_le32(r, "no");
	k->ver = rbuf_le64(r, "ver");
	z->parent_id = rbuf_le64(r, "parent_id");
	z->kind = rbuf_u8(r, "kind");
	ret |= ch_get_str(r, a, &z->name);
	ret |= ch_get_ep(r, a, &z->local);
	ret |= ch_get_ep(r, a, &z->remote);
	z->timestamp_us = rbuf_le64(r, "start_us");
	z->duration_us = rbuf_le64(r, "duration_us");
	z->shared = rbuf_u8(r, "shared");
	z->debug = rbuf_u8(r, "debug");
	z->error = rbuf_u8(r, "error");
	n = get_count(r, UINT32_MAX);
	if (n && !r->err && !(z->annotations = zarena_zalloc(a, n * sizeof(*z->annotations))))
		return -ENOMEM;
	for (uint32_t i = 0; i < n && !r->err; i++)
		z->annotations[i].ts_us = rbuf_le64(r, "annotation time");
	get_count(r, n);
	if (n && !r->err)
		ret |= get_strs(r, a, n, &z->annotations->value, sizeof(*z->annotations));
	z->nannotations = r->err ? 0 : n;
	n = get_count(r, UINT32_MAX);
	if (n && !r->err && !(z->tags = zarena_zalloc(a, n * sizeof(*z->tags))))
		return -ENOMEM;
	if (n && !r->err)
		ret |= get_strs(r, a, n, &z->tags->key, sizeof(*z->tags));
	get_count(r, n);
	if (n && !r->err)
		ret |= get_strs(r, a, n, &z->tags->value, sizeof(*z->tags));
	z->ntags = r->err ? 0 : n;
	if (r->err)
		return r->err;
	return ret ? -ENOMEM : 0;
}

/*
 * MurmurHash64A with seed 0, as ClickHouse's murmurHash2_64(String): the
 * message is read in little-endian 8-byte words, then its 0-7 last bytes;
 * each word is mixed (times M, xor its top bits down, times M) into h.
 */
uint64_t ch_murmur64(const void *p, size_t n)
{
	const uint64_t m = 0xc6a4a7935bd1e995ull;
	const unsigned char *s = p, *end = s + n / 8 * 8;
	uint64_t h = (uint64_t)n * m, k;

	for (; s < end; s += 8) {
		memcpy(&k, s, 8);
		k = le64toh(k) * m;
		k ^= k >> 47;
		h = (h ^ (k * m)) * m;
	}
	if (n & 7) {
		for (size_t i = n & 7; i-- > 0;)
			h ^= (uint64_t)s[i] << (8 * i);
		h *= m;
	}
	h ^= h >> 47;
	h *= m;
	h ^= h >> 47;
	return h;
}
