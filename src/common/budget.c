// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>

#include "common/atomic.h"
#include "common/budget.h"

/* The most ever taken at once is at least want. */
static void raise_peak(struct mem_budget *b, uint64_t want)
{
	uint64_t peak = __atomic_load_n(&b->peak, __ATOMIC_RELAXED);

	while (peak < want && !atomic_cas(&b->peak, &peak, want))
		;
}

int mem_budget_take(struct mem_budget *b, size_t n)
{
	uint64_t used, want;

	if (!b || !n)
		return 0;
	used = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
	do {
		want = used + n;
		if (b->max && want > b->max) {
			atomic_add(&b->refused, 1);
			return -ENOBUFS;
		}
	} while (!atomic_cas(&b->used, &used, want));
	raise_peak(b, want);
	return 0;
}

void mem_budget_charge(struct mem_budget *b, size_t n)
{
	if (b && n)
		raise_peak(b, __atomic_add_fetch(&b->used, n, __ATOMIC_RELAXED));
}

int mem_budget_fits(struct mem_budget *b, size_t n)
{
	if (!b || !b->max || __atomic_load_n(&b->used, __ATOMIC_RELAXED) + n <= b->max)
		return 1;
	atomic_add(&b->refused, 1);
	return 0;
}

void mem_budget_give(struct mem_budget *b, size_t n)
{
	if (b && n)
		__atomic_sub_fetch(&b->used, n, __ATOMIC_RELAXED);
}

void *mem_budget_realloc(struct mem_budget *b, void *p, size_t cap, size_t newcap)
{
	void *np;

	if (mem_budget_take(b, newcap)) {
		errno = ENOBUFS;
		return NULL;
	}
	np = realloc(p, newcap);
	if (!np) {
		mem_budget_give(b, newcap);
		errno = ENOMEM;
		return NULL;
	}
	mem_budget_give(b, cap);
	return np;
}
