// SPDX-License-Identifier: MIT
/*
 * Unwind tables: the blob's check and its lookup (unwind_table.h).
 * Linked into fay and into the runtime library (whose stack walker
 * calls unw_find() in a probe: no allocation, no libc).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/unwind_table.h"

/* a reason into why, and -EINVAL */
#define BAD(...) (snprintf(why, whylen, __VA_ARGS__), -EINVAL)

/* How many of the n keys (uint64_t or uint32_t, at the start of each
 * stride-byte element of base, sorted) are <= key */
static uint32_t count_le(const void *base, size_t stride, uint32_t n, uint64_t key, bool wide)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const void *e = (const char *)base + (size_t)mid * stride;
		uint64_t k = wide ? *(const uint64_t *)e : *(const uint32_t *)e;

		if (k <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int unw_check(const void *p, size_t len, char *why, size_t whylen)
{
	const struct unw_hdr *h = p;
	const struct unw_mod *m;
	const struct unw_row *r;

	if (len < sizeof(*h) || (uintptr_t)p % 8)
		return BAD("a blob of %zu bytes", len);
	if (h->magic != UNW_MAGIC || h->version != UNW_VERSION)
		return BAD("magic %#x, version %u", h->magic, h->version);
	if (h->nmods > UNW_MAX_MODS || h->nrows > UNW_MAX_ROWS)
		return BAD("%u modules, %u rows", h->nmods, h->nrows);
	if (h->size != len || len != sizeof(*h) + (size_t)h->nmods * sizeof(*m) +
				      (size_t)h->nrows * sizeof(*r))
		return BAD("%zu bytes for %u modules", len, h->nmods);
	m = (const void *)(h + 1);
	r = (const void *)(m + h->nmods);
	for (uint32_t i = 0; i < h->nmods; i++) {
		if (m[i].lo >= m[i].hi || (i && m[i].lo < m[i - 1].hi))
			return BAD("module %u: its range is empty or overlaps", i);
		if (!m[i].nrows || m[i].first > h->nrows || m[i].nrows > h->nrows - m[i].first)
			return BAD("module %u: %u rows out of bounds", i, m[i].nrows);
		for (uint32_t j = m[i].first; j < m[i].first + m[i].nrows; j++) {
			if (r[j].kind > UNW_SIGNAL || r[j].rbp > UNW_RBP_LOST)
				return BAD("module %u: row %u of an unknown kind", i, j);
			if (j > m[i].first && r[j].pc <= r[j - 1].pc)
				return BAD("module %u: rows not increasing at row %u", i, j);
		}
		if (r[m[i].first + m[i].nrows - 1].kind != UNW_NONE)
			return BAD("module %u: its last row (%u) is not an end", i,
				   m[i].first + m[i].nrows - 1);
	}
	return 0;
}

/* Whether hint (unw_find_hint()'s) names the module and row holding pc */
static bool hint_holds(const struct unw_hdr *t, uint64_t pc, uint64_t hint)
{
	const struct unw_mod *m = (const void *)(t + 1);
	const struct unw_row *r = (const void *)(m + t->nmods);
	uint32_t mi = (uint32_t)(hint >> 32), ri = (uint32_t)hint;
	uint64_t v;

	if (mi >= t->nmods || pc < m[mi].lo || pc >= m[mi].hi || ri < m[mi].first ||
	    ri - m[mi].first >= m[mi].nrows)
		return false;
	v = pc - m[mi].bias;
	return v <= UINT32_MAX && r[ri].pc <= v &&
	       (ri + 1 - m[mi].first == m[mi].nrows || r[ri + 1].pc > v);
}

const struct unw_row *unw_find_hint(const struct unw_hdr *t, uint64_t pc, uint64_t *hint)
{
	const struct unw_mod *m = (const void *)(t + 1), *mod;
	const struct unw_row *r = (const void *)(m + t->nmods);
	uint32_t i, mi;
	uint64_t v;

	if (hint_holds(t, pc, *hint))
		return &r[(uint32_t)*hint];
	mi = count_le(m, sizeof(*m), t->nmods, pc, true);	/* lo: first */
	if (!mi || pc >= m[mi - 1].hi)
		return NULL;
	mod = &m[--mi];
	v = pc - mod->bias;
	if (v > UINT32_MAX)
		return NULL;
	i = count_le(r + mod->first, sizeof(*r), mod->nrows, v, false);	/* pc: first */
	if (!i)
		return NULL;
	*hint = (uint64_t)mi << 32 | (mod->first + i - 1);
	return &r[mod->first + i - 1];
}

const struct unw_row *unw_find(const struct unw_hdr *t, uint64_t pc)
{
	uint64_t hint = UINT64_MAX;

	return unw_find_hint(t, pc, &hint);
}
