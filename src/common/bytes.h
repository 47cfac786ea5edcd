/* SPDX-License-Identifier: MIT */
/*
 * Byte buffers for binary encodings: a growable writer and a bounds-checked
 * reader, with LEB128 varints (unsigned, and zigzag for signed values) and
 * little-endian fixed-width integers.
 *
 * The reader never reads past its end: the first failure sets r->err
 * (-EBADMSG) with r->why naming what was being read and at which offset,
 * and every later read returns 0 bytes / zero, so a decoder can read a
 * whole structure and check r->err once (the ply/libbpf habit of one
 * error variable through a chain).
 */
#ifndef FAY_COMMON_BYTES_H
#define FAY_COMMON_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct wbuf {
	unsigned char *p;
	size_t len, cap;
	int err;		/* -ENOMEM once an append failed */
};

struct rbuf {
	const unsigned char *p;
	size_t len, off;
	int err;		/* 0 or -EBADMSG */
	char why[96];		/* "truncated <what> at byte N" */
};

/* wbuf_put()'s slow path: grow (doubling) and append; sets w->err on
 * allocation failure.  Call wbuf_put() instead. */
void wbuf_put_grow(struct wbuf *w, const void *p, size_t n);

/* Append; on allocation failure w->err is set and later appends do
 * nothing.  Free w->p with free() (or wbuf_free).  Inline: encoders call
 * these per field (a ClickHouse row is ~30 of them), so the common case
 * (room left) is a compare and a copy of a known size. */
static inline void wbuf_put(struct wbuf *w, const void *p, size_t n)
{
	if (__builtin_expect(n && n <= w->cap - w->len && !w->err, 1)) {
		__builtin_memcpy(w->p + w->len, p, n);
		w->len += n;
		return;
	}
	wbuf_put_grow(w, p, n);
}

static inline void wbuf_u8(struct wbuf *w, uint8_t v)
{
	wbuf_put(w, &v, 1);
}

static inline void wbuf_le32(struct wbuf *w, uint32_t v)
{
	unsigned char b[4];

	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	wbuf_put(w, b, 4);
}

static inline void wbuf_le64(struct wbuf *w, uint64_t v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	wbuf_put(w, b, 8);
}

/* LEB128 unsigned varint. */
static inline void wbuf_uvar(struct wbuf *w, uint64_t v)
{
	unsigned char b[10];
	size_t n = 0;

	if (v < 0x80) {
		wbuf_u8(w, (uint8_t)v);
		return;
	}
	do {
		b[n] = (unsigned char)(v & 0x7f);
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	wbuf_put(w, b, n);
}

/* Zigzag-encoded signed varint. */
static inline void wbuf_svar(struct wbuf *w, int64_t v)
{
	wbuf_uvar(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* Give the buffer back; w is empty and usable again. */
void wbuf_free(struct wbuf *w);

static inline void rbuf_init(struct rbuf *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->err = 0;
	r->why[0] = '\0';
}

/* Mark r failed (keeps the first reason). what names the item. */
void rbuf_fail(struct rbuf *r, const char *what);
/* Pointer to the next n bytes (and skip them), or NULL (r failed). */
const void *rbuf_get(struct rbuf *r, size_t n, const char *what);
uint8_t rbuf_u8(struct rbuf *r, const char *what);
uint32_t rbuf_le32(struct rbuf *r, const char *what);
uint64_t rbuf_le64(struct rbuf *r, const char *what);
uint64_t rbuf_uvar(struct rbuf *r, const char *what);	/* <= 10 bytes */
int64_t rbuf_svar(struct rbuf *r, const char *what);
/* A varint that must be <= max (a count or a length). */
uint64_t rbuf_uvar_max(struct rbuf *r, uint64_t max, const char *what);
static inline bool rbuf_done(const struct rbuf *r)
{
	return !r->err && r->off == r->len;
}

#endif
