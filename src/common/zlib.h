/* SPDX-License-Identifier: MIT */
/*
 * What fay asks of zlib, the one file that includes it (zlib.c): the
 * CRC-32 that guards wire frames and spool files, and the inflation of
 * gzip request bodies inside a memory budget.
 */
#ifndef FAY_COMMON_ZLIB_H
#define FAY_COMMON_ZLIB_H

#include <stddef.h>
#include <stdint.h>

struct mem_budget;

/* The CRC-32 (zlib's, ISO-HDLC) of len bytes at p continued from crc
 * (0 to start): crc32_of(crc32_of(0, a), b) is the CRC of a then b. */
uint32_t crc32_of(uint32_t crc, const void *p, size_t len);

/*
 * Inflate a gzip body into *out (malloc'ed, at most max bytes), its
 * buffer taken from b as it grows (mem_budget_realloc(): old and new
 * charged while one copies): on success *charged bytes of b are held,
 * which the caller gives back with free(*out).  0, or -E2BIG (over max),
 * -ENOBUFS (the buffer did not fit in b: busy), -EINVAL, -ENOMEM with the
 * reason in err, nothing held.  b NULL: nothing charged.
 */
int gunzip(struct mem_budget *b, const char *in, size_t len, size_t max, char **out,
	   size_t *outlen, size_t *charged, char *err, size_t errlen);

#endif
