// SPDX-License-Identifier: MIT
/*
 * libfay: the span handle pool, without locks.
 *
 * Handles live in the shm file (so the agent can count spans left open by
 * a process that died).  Each thread keeps up to LIB_CACHE_MAX free
 * indices; it refills and spills LIB_CACHE_BATCH at a time from a global
 * Treiber stack whose 64-bit head holds the top index + 1 and an ABA tag
 * that every successful push or pop increments.  The link of a free
 * handle is its fay_pool_slot._reserved word (index + 1, 0 ends the list).
 * A pop may read the link of a handle another thread just took and is
 * rewriting: the value is then garbage, but the head's tag has moved, so
 * the CAS fails and the pop retries.
 *
 * Handles never used are taken from lib.fresh first-come, so a process
 * that has at most a few spans open at once touches only a few pages of
 * its pool.
 */
#include "lib/libfay.h"

#define HEAD_IDX(h) ((uint32_t)(h))
#define HEAD_TAG(h) ((h) >> 32)

void lib_pool_push(uint32_t idx)
{
	uint64_t old = READ_ONCE(lib.free_head), new;

	do {
		WRITE_ONCE(lib_slot(idx)->_reserved, HEAD_IDX(old));
		new = (HEAD_TAG(old) + 1) << 32 | (idx + 1);
	} while (!atomic_cas(&lib.free_head, &old, new));
}

static int64_t pool_pop(void)
{
	uint64_t old = READ_ONCE(lib.free_head), new;
	uint32_t top;

	do {
		top = HEAD_IDX(old);
		if (!top)
			return -1;
		new = (HEAD_TAG(old) + 1) << 32 |
		      READ_ONCE(lib_slot(top - 1)->_reserved);
	} while (!atomic_cas(&lib.free_head, &old, new));
	return top - 1;
}

/* Take up to n never-used indices; returns the first, *got how many. */
static uint32_t pool_fresh(uint32_t n, uint32_t *got)
{
	uint32_t cur = READ_ONCE(lib.fresh), take;

	do {
		if (cur >= lib.npool) {
			*got = 0;
			return 0;
		}
		take = lib.npool - cur < n ? lib.npool - cur : n;
	} while (!atomic_cas(&lib.fresh, &cur, cur + take));
	*got = take;
	return cur;
}

/* Slow path of lib_pool_get(): refill the thread's cache. */
int64_t lib_pool_refill(void)
{
	uint32_t got, first, i;
	int64_t idx;

	while (lib_t.ncache < LIB_CACHE_BATCH) {
		idx = pool_pop();
		if (idx < 0)
			break;
		lib_t.cache[lib_t.ncache++] = (uint32_t)idx;
	}
	if (!lib_t.ncache) {
		first = pool_fresh(LIB_CACHE_BATCH, &got);
		for (i = got; i > 0; i--)
			lib_t.cache[lib_t.ncache++] = first + i - 1;
	}
	if (!lib_t.ncache)
		return -1;
	return lib_t.cache[--lib_t.ncache];
}

/* Slow path of lib_pool_put(): the cache is full. */
void lib_pool_spill(void)
{
	for (unsigned i = 0; i < LIB_CACHE_BATCH; i++)
		lib_pool_push(lib_t.cache[--lib_t.ncache]);
}

void lib_pool_spill_all(void)
{
	if (!lib.pool) {
		lib_t.ncache = 0;
		return;
	}
	while (lib_t.ncache)
		lib_pool_push(lib_t.cache[--lib_t.ncache]);
}
