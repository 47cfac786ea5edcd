/* SPDX-License-Identifier: MIT */
/*
 * Shared libraries loaded with dlopen() on first use instead of by the
 * dynamic loader at exec.  libcurl and libmicrohttpd pull in ~30 more
 * libraries (gnutls, krb5, ldap, ssh2 ...) whose mapping and relocation
 * cost ~10 ms at every launch, while only `fay traces`, the collector's
 * HTTP server and exporters and the agent's /metrics use them.
 *
 * lazy_curl.h and httpd.c (libmicrohttpd) describe each library as a struct lazy_lib:
 * its SONAME, the Debian package that ships it, and the symbols to resolve
 * into correctly typed function pointers.  lazy_open() fills them in once.
 */
#ifndef FAY_COMMON_LAZY_H
#define FAY_COMMON_LAZY_H

#include <stddef.h>

/* One symbol: its name and the function pointer that receives it. */
struct lazy_sym {
	const char *name;
	void **slot;
};

struct lazy_lib {
	const char *soname;             /* "libcurl.so.4" */
	const char *package;            /* "libcurl4": named in the error */
	const struct lazy_sym *syms;
	size_t nsyms;
	int ret;                        /* lazy_open(): 0 or -ELIBACC */
	char msg[320];                  /* why it failed, dlerror() included */
	int opened;                     /* lazy_load() has run lazy_open() */
};

/*
 * For a wrapper that lists its functions in an X-macro FUNCS(X): a struct
 * of pointers typed as the library's own prototypes,
 *     static struct { FUNCS(LAZY_FIELD) } fn;
 * its symbol table, with #define SYM(f) LAZY_SYM(fn, f),
 *     static const struct lazy_sym syms[] = { FUNCS(SYM) };
 * and the library, static struct lazy_lib lib = LAZY_LIB(SONAME, PKG, syms).
 */
#define LAZY_FIELD(f) __typeof__(f) *f;
#define LAZY_SYM(var, f) { #f, (void **)&(var).f },
#define LAZY_LIB(so, pkg, syms) \
	{ .soname = (so), .package = (pkg), .syms = (syms), .nsyms = sizeof(syms) / sizeof((syms)[0]) }

/*
 * lazy_open(l) the first time (thread-safe: one lock for every library),
 * then lazy_result(l, err, errlen).
 */
int lazy_load(struct lazy_lib *l, char *err, size_t errlen);

/*
 * dlopen() l->soname and resolve every symbol into its slot.  Sets l->ret
 * to 0, or -ELIBACC with l->msg naming the library, its package and
 * dlerror() (on failure no slot is left set).  Not thread-safe: call it
 * once, under pthread_once().
 */
void lazy_open(struct lazy_lib *l);

/* l->ret, copying l->msg into err (when not NULL) on failure. */
int lazy_result(const struct lazy_lib *l, char *err, size_t errlen);

#endif
