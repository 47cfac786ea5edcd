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
 *
 * A buffer that grows as bytes arrive grows with mem_budget_realloc().
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
/*
 * Grow a buffer of cap bytes, taken from b, to newcap (> 0) bytes, the
 * charge covering the peak: realloc() may copy, and while it does the old
 * and the new buffer are both resident, so newcap is taken whole before it
 * and cap given back only after.  p NULL and cap 0: a first allocation.
 * Returns the new buffer (p is no longer valid), newcap taken; or NULL
 * with errno ENOBUFS (newcap does not fit next to what is held now: the
 * refusal counted) or ENOMEM, and then p is still valid and cap still
 * taken.  b NULL: a plain realloc().
 */
void *mem_budget_realloc(struct mem_budget *b, void *p, size_t cap, size_t newcap);

#endif
