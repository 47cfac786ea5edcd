/* SPDX-License-Identifier: MIT */
/* Helpers shared by the benchmarks in bench/. */
#ifndef FAY_BENCH_H
#define FAY_BENCH_H

#include <stdlib.h>

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of n values (n > 0); sorts v in place. */
static inline double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
