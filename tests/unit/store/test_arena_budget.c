// SPDX-License-Identifier: MIT
/*
 * An arena with a memory budget (store/span.h, struct zarena .budget):
 * each chunk is taken from the budget before it is allocated, a chunk
 * the budget refuses fails the allocation with ENOMEM and sets over
 * (nothing taken), and zarena_reset() gives back exactly what was taken
 * and clears over, the budget kept for the next use.  Without a budget
 * nothing is counted.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/budget.h"
#include "store/span.h"
#include "test.h"

int main(void)
{
	struct mem_budget b = { .max = 1 << 20 };
	struct zarena a = { .budget = &b };
	struct zarena plain = { 0 };
	uint64_t one;
	void *p;

	p = zarena_alloc(&a, 100);
	ok(p != NULL, "a small allocation from a budget of 1 MiB");
	one = b.used;
	ok(one > 64 * 1024 && one < 65 * 1024, "its chunk (64 KiB and a header) is taken: %llu",
	   (unsigned long long)one);
	is_u64(a.charged, one, "the arena knows what it took");
	ok(zarena_alloc(&a, 1000) != NULL && b.used == one, "a second one from the same chunk takes nothing more");
	p = zarena_alloc(&a, 600 * 1024);
	ok(p != NULL && b.used > one + 600 * 1024, "a 600 KiB one: its own chunk, taken (%llu)",
	   (unsigned long long)b.used);
	memset(p, 1, 600 * 1024);
	errno = 0;
	p = zarena_alloc(&a, 600 * 1024);
	ok(p == NULL && errno == ENOMEM, "another 600 KiB does not fit in 1 MiB: NULL, ENOMEM");
	ok(a.over == 1, "... and over says the budget refused it");
	is_u64(b.refused, 1, "... the refusal counted by the budget");
	ok(b.used == a.charged, "... nothing taken for it");
	ok(zarena_alloc(&a, 100) != NULL, "a small one still fits");
	zarena_reset(&a);
	is_u64(b.used, 0, "reset gives back all it took");
	ok(a.charged == 0 && a.over == 0 && a.budget == &b, "... clears over and keeps the budget");
	ok(zarena_alloc(&a, 900 * 1024) != NULL, "after the reset 900 KiB fits again");
	zarena_reset(&a);
	is_u64(b.used, 0, "... and goes back");
	b.max = 0;      /* no limit, still counted */
	ok(zarena_alloc(&a, 4 << 20) != NULL && b.used > (4 << 20), "a budget of no limit counts 4 MiB");
	zarena_reset(&a);
	is_u64(b.used, 0, "... and gives it back");
	ok(zarena_alloc(&plain, 2 << 20) != NULL && plain.charged == 0 && b.used == 0,
	   "an arena without a budget counts nothing");
	zarena_reset(&plain);
	return test_done();
}
