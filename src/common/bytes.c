// SPDX-License-Identifier: MIT
/* Byte buffers and varints (bytes.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"

void wbuf_put(struct wbuf *w, const void *p, size_t n)
{
	if (w->err || !n)
		return;
	if (w->len + n > w->cap) {
		size_t nc = w->cap ? w->cap : 256;
		unsigned char *np;

		while (nc < w->len + n)
			nc *= 2;
		np = realloc(w->p, nc);
		if (!np) {
			w->err = -ENOMEM;
			return;
		}
		w->p = np;
		w->cap = nc;
	}
	memcpy(w->p + w->len, p, n);
	w->len += n;
}

void wbuf_u8(struct wbuf *w, uint8_t v)
{
	wbuf_put(w, &v, 1);
}

void wbuf_le32(struct wbuf *w, uint32_t v)
{
	unsigned char b[4];

	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	wbuf_put(w, b, 4);
}

void wbuf_le64(struct wbuf *w, uint64_t v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	wbuf_put(w, b, 8);
}

void wbuf_uvar(struct wbuf *w, uint64_t v)
{
	unsigned char b[10];
	size_t n = 0;

	do {
		b[n] = (unsigned char)(v & 0x7f);
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	wbuf_put(w, b, n);
}

void wbuf_svar(struct wbuf *w, int64_t v)
{
	wbuf_uvar(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void wbuf_free(struct wbuf *w)
{
	free(w->p);
	memset(w, 0, sizeof(*w));
}

void rbuf_fail(struct rbuf *r, const char *what)
{
	if (r->err)
		return;
	r->err = -EBADMSG;
	snprintf(r->why, sizeof(r->why), "bad or truncated %s at byte %zu", what, r->off);
}

const void *rbuf_get(struct rbuf *r, size_t n, const char *what)
{
	const void *p;

	if (r->err)
		return NULL;
	if (n > r->len - r->off) {
		rbuf_fail(r, what);
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

uint8_t rbuf_u8(struct rbuf *r, const char *what)
{
	const unsigned char *p = rbuf_get(r, 1, what);

	return p ? p[0] : 0;
}

static uint64_t get_le(struct rbuf *r, int n, const char *what)
{
	const unsigned char *p = rbuf_get(r, (size_t)n, what);
	uint64_t v = 0;

	for (int i = 0; p && i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

uint32_t rbuf_le32(struct rbuf *r, const char *what)
{
	return (uint32_t)get_le(r, 4, what);
}

uint64_t rbuf_le64(struct rbuf *r, const char *what)
{
	return get_le(r, 8, what);
}

uint64_t rbuf_uvar(struct rbuf *r, const char *what)
{
	uint64_t v = 0;

	for (int i = 0; i < 10; i++) {
		const unsigned char *p = rbuf_get(r, 1, what);

		if (!p)
			return 0;
		if (i == 9 && *p > 1) {		/* more than 64 bits */
			r->off--;
			rbuf_fail(r, what);
			return 0;
		}
		v |= (uint64_t)(*p & 0x7f) << (7 * i);
		if (!(*p & 0x80))
			return v;
	}
	rbuf_fail(r, what);
	return 0;
}

int64_t rbuf_svar(struct rbuf *r, const char *what)
{
	uint64_t u = rbuf_uvar(r, what);

	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

uint64_t rbuf_uvar_max(struct rbuf *r, uint64_t max, const char *what)
{
	size_t at = r->off;
	uint64_t v = rbuf_uvar(r, what);

	if (!r->err && v > max) {
		r->off = at;
		rbuf_fail(r, what);
		return 0;
	}
	return v;
}
