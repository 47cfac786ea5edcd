// SPDX-License-Identifier: MIT
/* Byte buffers and varints (bytes.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"

void wbuf_put_grow(struct wbuf *w, const void *p, size_t n)
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
