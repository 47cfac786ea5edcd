// SPDX-License-Identifier: MIT
/* Arena limit and rate-limited trimming of the malloc heap (heap.h). */
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/heap.h"

void heap_tune(int n)
{
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, n);
	if (!getenv("MALLOC_MMAP_THRESHOLD_"))
		mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD);
	if (!getenv("MALLOC_TRIM_THRESHOLD_"))
		mallopt(M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD);
}

int heap_trim_maybe(uint64_t now_ns)
{
	static uint64_t next_ns;
	uint64_t next = __atomic_load_n(&next_ns, __ATOMIC_RELAXED);

	if (now_ns < next)
		return 0;
	/* one caller wins the slot; the others see the new deadline */
	if (!__atomic_compare_exchange_n(&next_ns, &next, now_ns + HEAP_TRIM_NS, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return 0;
	malloc_trim(0);
	return 1;
}
