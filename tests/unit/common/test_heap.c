// SPDX-License-Identifier: MIT
/* src/common/heap.c: heap_trim_maybe() trims at most once per
 * HEAP_TRIM_NS, one caller per slot when threads race for it; heap_tune()
 * can be called (its effect on RSS is measured by bench/hostile_mem and
 * bench/soak: this tree is built with ASan, whose allocator is not
 * glibc's). */
#include <pthread.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/heap.h"
#include "test.h"

static uint64_t t0;
static int won;

static void *racer(void *arg)
{
	for (int i = 0; i < 1000; i++)
		if (heap_trim_maybe(t0 + 10 * HEAP_TRIM_NS))
			__atomic_add_fetch(&won, 1, __ATOMIC_RELAXED);
	return arg;
}

int main(void)
{
	pthread_t t[4];
	void *p;

	heap_tune(4);
	p = malloc(2u << 20);
	ok(p != NULL, "heap_tune(4): malloc still works (2 MiB)");
	free(p);
	t0 = clock_monotonic_ns();
	ok(heap_trim_maybe(t0) == 1, "the first call trims");
	ok(heap_trim_maybe(t0 + 1) == 0, "one ns later: not again");
	ok(heap_trim_maybe(t0 + HEAP_TRIM_NS - 1) == 0, "nor just before HEAP_TRIM_NS");
	ok(heap_trim_maybe(t0 + HEAP_TRIM_NS) == 1, "at HEAP_TRIM_NS: trims again");
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, racer, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ok(won == 1, "4 threads x 1000 calls at the same later time: one trim (%d)", won);
	return test_done();
}
