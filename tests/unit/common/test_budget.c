// SPDX-License-Identifier: MIT
/* src/common/budget.c: takes within the limit, refusals counted, the peak,
 * give-backs, fits and charges (connections: checked, then taken), and 4 threads taking and giving at once never exceeding it;
 * a growing buffer charged its peak (old and new held at once) and refused at exactly that boundary. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/budget.h"
#include "test.h"

static struct mem_budget shared = { .max = 1000 };
static uint64_t over;

static void *worker(void *arg)
{
	for (int i = 0; i < 200000; i++) {
		size_t n = 1 + (size_t)(i % 300);

		if (!mem_budget_take(&shared, n)) {
			if (__atomic_load_n(&shared.used, __ATOMIC_RELAXED) > shared.max)
				__atomic_add_fetch(&over, 1, __ATOMIC_RELAXED);
			mem_budget_give(&shared, n);
		}
	}
	return arg;
}

/* A body growing 16 KiB -> 32 KiB -> 64 KiB, as the collector's HTTP and
 * gRPC bodies grow: each step needs the old and the new buffer at once. */
static void grow(void)
{
	struct mem_budget b = { .max = 16384 + 32768 - 1 };
	char *p, *q;

	p = mem_budget_realloc(&b, NULL, 0, 16384);
	ok(p && b.used == 16384 && b.peak == 16384, "first allocation: 16 KiB taken, no transient");
	memset(p, 'x', 16384);
	errno = 0;
	q = mem_budget_realloc(&b, p, 16384, 32768);
	ok(!q && errno == ENOBUFS && b.refused == 1,
	   "16 -> 32 KiB with 48 KiB - 1 of budget: -ENOBUFS (old and new would be held at once)");
	ok(b.used == 16384 && b.peak == 16384 && p[16383] == 'x',
	   "... nothing taken, the old buffer still held and charged");
	b.max = 16384 + 32768;
	q = mem_budget_realloc(&b, p, 16384, 32768);
	ok(q && q[16383] == 'x' && b.used == 32768, "with 48 KiB: grown, the bytes kept, 32 KiB taken after");
	ok(b.peak == 16384 + 32768, "the peak is old + new: %llu (48 KiB)", (unsigned long long)b.peak);
	p = mem_budget_realloc(&b, q, 32768, 65536);
	ok(!p && errno == ENOBUFS && b.used == 32768, "32 -> 64 KiB needs 96 KiB: refused, 32 KiB still taken");
	b.max = 0;
	p = mem_budget_realloc(&b, q, 32768, 65536);
	ok(p && b.used == 65536 && b.peak == 32768 + 65536, "no limit: still the peak counted (96 KiB)");
	q = mem_budget_realloc(NULL, p, 65536, 100);
	ok(q != NULL, "no budget: a plain realloc");
	free(q);
}

int main(void)
{
	struct mem_budget b = { .max = 100 };
	pthread_t t[4];

	ok(mem_budget_take(&b, 60) == 0, "60 of 100: taken");
	ok(mem_budget_take(&b, 50) == -ENOBUFS, "50 more: -ENOBUFS");
	ok(b.used == 60 && b.refused == 1, "nothing taken by the refusal, one refusal counted");
	ok(mem_budget_take(&b, 40) == 0 && b.used == 100 && b.peak == 100, "up to the limit exactly; peak 100");
	mem_budget_give(&b, 100);
	ok(b.used == 0 && b.peak == 100, "all given back; the peak stays");
	ok(mem_budget_take(NULL, 1u << 30) == 0, "no budget: always taken");
	ok(mem_budget_fits(&b, 100) && b.refused == 1, "100 fits an empty 100");
	ok(!mem_budget_fits(&b, 101) && b.refused == 2 && b.used == 0,
	   "101 does not: refusal counted, nothing taken");
	mem_budget_charge(&b, 80);
	mem_budget_charge(&b, 80);
	ok(b.used == 160 && b.peak == 160, "charge: taken even past the limit (memory in use), peak 160");
	ok(mem_budget_take(&b, 1) == -ENOBUFS, "... and takes are refused until it is given back");
	mem_budget_give(&b, 160);
	ok(mem_budget_fits(NULL, 1u << 30), "no budget: always fits");
	b.max = 0;
	ok(mem_budget_take(&b, 1u << 30) == 0 && b.used == 1u << 30, "max 0: no limit, still counted");
	grow();
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ok(over == 0, "4 threads: used never seen over the limit (%llu times)", (unsigned long long)over);
	ok(shared.used == 0 && shared.peak <= shared.max, "4 threads: all given back, peak %llu <= 1000",
	   (unsigned long long)shared.peak);
	return test_done();
}
