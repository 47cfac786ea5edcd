// SPDX-License-Identifier: MIT
#include <errno.h>

#include "common/atomic.h"
#include "common/budget.h"

int mem_budget_take(struct mem_budget *b, size_t n)
{
	uint64_t used, want, peak;

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
	peak = __atomic_load_n(&b->peak, __ATOMIC_RELAXED);
	while (peak < want && !atomic_cas(&b->peak, &peak, want))
		;
	return 0;
}

void mem_budget_give(struct mem_budget *b, size_t n)
{
	if (b && n)
		__atomic_sub_fetch(&b->used, n, __ATOMIC_RELAXED);
}
