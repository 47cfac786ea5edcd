/* SPDX-License-Identifier: MIT */
/*
 * GnuTLS, the one TLS library of fay (libmicrohttpd's TLS is GnuTLS too),
 * loaded on first use (common/lazy.h) and wrapped in this file's tls.c
 * alone: no other file includes a GnuTLS header.
 */
#ifndef FAY_COMMON_TLS_H
#define FAY_COMMON_TLS_H

#include <stddef.h>

/*
 * Load libgnutls (once per process).  0, or -ELIBACC with err (when not
 * NULL) naming the library, its package and dlerror().
 */
int tls_load(char *err, size_t errlen);

/* SHA-256 of n bytes at p as 64 hex digits and a NUL in out.  0, or
 * -ELIBACC (GnuTLS cannot be loaded) / -EIO. */
int tls_sha256_hex(const void *p, size_t n, char out[65]);

#endif
