// SPDX-License-Identifier: MIT
/* Libraries loaded on first use: see lazy.h. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "common/lazy.h"

/* Contract in lazy.h. */
void lazy_open(struct lazy_lib *l)
{
	void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
	const char *why;
	size_t i = 0;

	if (h) {
		for (; i < l->nsyms; i++) {
			dlerror();
			*l->syms[i].slot = dlsym(h, l->syms[i].name);
			if (!*l->syms[i].slot)
				break;
		}
		if (i == l->nsyms) {
			l->ret = 0;
			return;
		}
	}
	why = dlerror();
	snprintf(l->msg, sizeof(l->msg), "cannot load %s (Debian package %s): %s",
		 l->soname, l->package, why ? why : "unknown dynamic loader error");
	l->ret = -ELIBACC;
	while (i--)
		*l->syms[i].slot = NULL;
	if (h)
		dlclose(h);
}

/* Contract in lazy.h. */
int lazy_result(const struct lazy_lib *l, char *err, size_t errlen)
{
	if (l->ret && err && errlen)
		snprintf(err, errlen, "%s", l->msg);
	return l->ret;
}

/* Contract in lazy.h. */
int lazy_load(struct lazy_lib *l, char *err, size_t errlen)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

	pthread_mutex_lock(&lock);
	if (!l->opened)
		lazy_open(l);
	l->opened = 1;
	pthread_mutex_unlock(&lock);
	return lazy_result(l, err, errlen);
}
