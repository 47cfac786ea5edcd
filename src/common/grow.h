/* SPDX-License-Identifier: MIT */
/*
 * A heap array that grows by doubling, for the places that append to an
 * array of their own (not an arena's: store/span.h has zarena_grow()).
 */
#ifndef FAY_COMMON_GROW_H
#define FAY_COMMON_GROW_H

#include <errno.h>
#include <stdlib.h>

/*
 * Room for element n of the array *v of *cap elements of el bytes: when n
 * is *cap it doubles (first elements when empty).  0, or -ENOMEM with *v
 * and *cap as they were.
 */
static inline int array_grow(void **v, size_t n, size_t *cap, size_t el, size_t first)
{
	size_t c;
	void *p;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : first;
	p = realloc(*v, c * el);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

#endif
