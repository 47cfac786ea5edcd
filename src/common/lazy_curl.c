// SPDX-License-Identifier: MIT
/* libcurl loaded on first use: see lazy_curl.h. */
#define FAY_LAZY_CURL_IMPL
#include <pthread.h>

#include "common/lazy.h"
#include "common/lazy_curl.h"

struct lazy_curl lazy_curl_fn;

#define LAZY_CURL_SYM(f) { #f, (void **)&lazy_curl_fn.f },
static const struct lazy_sym syms[] = { LAZY_CURL_FUNCS(LAZY_CURL_SYM) };

static struct lazy_lib lib = {
	.soname = LAZY_CURL_SONAME,
	.package = LAZY_CURL_PACKAGE,
	.syms = syms,
	.nsyms = sizeof(syms) / sizeof(syms[0]),
};

static void open_once(void)
{
	lazy_open(&lib);
}

/* Contract in lazy_curl.h. */
int lazy_curl_load(char *err, size_t errlen)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, open_once);
	return lazy_result(&lib, err, errlen);
}
