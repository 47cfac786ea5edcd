// SPDX-License-Identifier: MIT
/* libmicrohttpd loaded on first use: see lazy_mhd.h. */
#define FAY_LAZY_MHD_IMPL
#include <pthread.h>

#include "common/lazy.h"
#include "common/lazy_mhd.h"

struct lazy_mhd lazy_mhd_fn;

#define LAZY_MHD_SYM(f) { #f, (void **)&lazy_mhd_fn.f },
static const struct lazy_sym syms[] = { LAZY_MHD_FUNCS(LAZY_MHD_SYM) };

static struct lazy_lib lib = {
	.soname = LAZY_MHD_SONAME,
	.package = LAZY_MHD_PACKAGE,
	.syms = syms,
	.nsyms = sizeof(syms) / sizeof(syms[0]),
};

static void open_once(void)
{
	lazy_open(&lib);
}

/* Contract in lazy_mhd.h. */
int lazy_mhd_load(char *err, size_t errlen)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, open_once);
	return lazy_result(&lib, err, errlen);
}
