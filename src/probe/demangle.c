// SPDX-License-Identifier: MIT
/*
 * The C++ demangler: libiberty's cplus_demangle_v3() (the Itanium ABI
 * only; it allocates with malloc() and answers NULL on failure, where
 * cplus_demangle() would pull in libiberty's aborting xmalloc()).
 */
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "probe/demangle.h"

char *sym_demangle(const char *name, bool params)
{
	size_t n = strcspn(name, "@");
	char *m, *d;

	if (strncmp(name, "_Z", 2))
		return NULL;
	m = strndup(name, n);
	if (!m)
		return NULL;
	d = cplus_demangle_v3(m, DMGL_ANSI | (params ? DMGL_PARAMS : 0));
	free(m);
	return d;
}

const char *sym_spec_colon(const char *spec)
{
	const char *c = NULL;

	for (const char *x = spec; *x; x++)
		if (*x == ':' && x[1] != ':' && (x == spec || x[-1] != ':'))
			c = x;
	return c;
}
