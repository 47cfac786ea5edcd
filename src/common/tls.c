// SPDX-License-Identifier: MIT
/*
 * GnuTLS behind common/tls.h, loaded on first use: every gnutls_* call
 * goes through a pointer typed with __typeof__ of the library's own
 * prototype.
 */
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>

#include "common/lazy.h"
#include "common/tls.h"

#define GNUTLS_SONAME  "libgnutls.so.30"
#define GNUTLS_PACKAGE "libgnutls30"

#define TLS_FUNCS(X)							\
	X(gnutls_hash_fast)

static struct { TLS_FUNCS(LAZY_FIELD) } fn;     /* the library's functions */
#define TLS_SYM(f) LAZY_SYM(fn, f)
static const struct lazy_sym syms[] = { TLS_FUNCS(TLS_SYM) };
static struct lazy_lib lib = LAZY_LIB(GNUTLS_SONAME, GNUTLS_PACKAGE, syms);

/* Contract in tls.h. */
int tls_load(char *err, size_t errlen)
{
	return lazy_load(&lib, err, errlen);
}

/* Contract in tls.h. */
int tls_sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char d[32];
	int ret = tls_load(NULL, 0);

	if (ret)
		return ret;
	if (fn.gnutls_hash_fast(GNUTLS_DIG_SHA256, p, n, d) < 0)
		return -EIO;
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	return 0;
}
