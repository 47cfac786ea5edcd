// SPDX-License-Identifier: MIT
/*
 * fay's use of zlib (zlib.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "common/budget.h"
#include "common/zlib.h"

uint32_t crc32_of(uint32_t crc, const void *p, size_t len)
{
	const Bytef *b = p;
	uLong c = crc;

	while (len) {	/* (zlib takes an unsigned int at a time) */
		uInt n = len > (1u << 30) ? 1u << 30 : (uInt)len;

		c = crc32(c, b, n);
		b += n;
		len -= n;
	}
	return (uint32_t)c;
}

/* Free what gunzip() holds and give its charge back.  Returns ret. */
static int gunzip_fail(struct mem_budget *b, z_stream *z, char *buf, size_t cap, int ret)
{
	free(buf);
	mem_budget_give(b, cap);
	inflateEnd(z);
	return ret;
}

int gunzip(struct mem_budget *b, const char *in, size_t len, size_t max, char **out,
	   size_t *outlen, size_t *charged, char *err, size_t errlen)
{
	z_stream z = { 0 };
	size_t cap = 0, n = 0, want = len * 4 + 1024;
	char *buf = NULL;
	int zr;

	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		snprintf(err, errlen, "gzip: cannot start inflate");
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	do {
		if (n == cap) {
			char *nb;

			if (buf)
				want = cap * 2;
			if (want > max + 1)
				want = max + 1;
			if (n >= want) {
				snprintf(err, errlen, "body: more than %zu bytes after gzip decoding", max);
				return gunzip_fail(b, &z, buf, cap, -E2BIG);
			}
			/* the old and the new buffer both charged while realloc() copies */
			nb = mem_budget_realloc(b, buf, cap, want);
			if (!nb && errno == ENOBUFS) {
				snprintf(err, errlen, "busy: the collector holds its --max-memory "
					 "(%llu bytes) of bodies and frames in flight, gzip decoded "
					 "ones too; retry later", (unsigned long long)b->max);
				return gunzip_fail(b, &z, buf, cap, -ENOBUFS);
			}
			if (!nb) {
				snprintf(err, errlen, "out of memory");
				return gunzip_fail(b, &z, buf, cap, -ENOMEM);
			}
			buf = nb;
			cap = want;
		}
		z.next_out = (Bytef *)buf + n;
		z.avail_out = (uInt)(cap - n);
		zr = inflate(&z, Z_NO_FLUSH);
		n = cap - z.avail_out;
		if (n > max) {
			snprintf(err, errlen, "body: more than %zu bytes after gzip decoding", max);
			return gunzip_fail(b, &z, buf, cap, -E2BIG);
		}
	} while (zr == Z_OK);
	if (zr != Z_STREAM_END) {
		snprintf(err, errlen, "body: gzip: %s", z.msg ? z.msg :
			 zr == Z_BUF_ERROR ? "truncated stream" : "corrupt stream");
		return gunzip_fail(b, &z, buf, cap, -EINVAL);
	}
	inflateEnd(&z);
	*out = buf;
	*outlen = n;
	*charged = cap;
	return 0;
}
