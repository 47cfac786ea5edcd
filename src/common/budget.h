/* SPDX-License-Identifier: MIT */
/*
 * A memory budget shared by threads: what a process lets untrusted peers
 * make it hold (frames in flight on the agent port, HTTP bodies), so that
 * a thousand slow or hostile connections cannot take more than --max-memory
 * between them.  Lock-free: take() is a compare-and-swap loop.
 *
 *	static struct mem_budget b = { .max = 1 << 30 };
 *	if (mem_budget_take(&b, n)) ... refuse: busy, retry later
 *	... mem_budget_give(&b, n);
 */
#ifndef FAY_COMMON_BUDGET_H
#define FAY_COMMON_BUDGET_H

#include <stddef.h>
#include <stdint.h>

struct mem_budget {
	uint64_t max;		/* bytes; 0: no limit (still counted) */
	uint64_t used;		/* bytes taken now */
	uint64_t peak;		/* the most ever taken at once */
	uint64_t refused;	/* takes refused */
};

/* Take n bytes: 0, or -ENOBUFS (the budget would go over max; nothing
 * taken, refused counted).  b NULL: always 0. */
int mem_budget_take(struct mem_budget *b, size_t n);
/* Take n bytes even past max: for memory already in use that must be
 * counted (the check was made before, with mem_budget_fits()).  b NULL:
 * nothing. */
void mem_budget_charge(struct mem_budget *b, size_t n);
/* Whether n more bytes fit now (1) or not (0: refused counted).  b NULL: 1. */
int mem_budget_fits(struct mem_budget *b, size_t n);
/* Give back n bytes taken before.  b NULL: nothing. */
void mem_budget_give(struct mem_budget *b, size_t n);

#endif
