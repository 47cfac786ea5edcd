// SPDX-License-Identifier: MIT
/*
 * A process's unwind table repacked for the BPF programs' walk
 * (ustack_map.h), and the model of their lookup.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/ustack_map.h"

int ustk_pack(const struct unw_hdr *t, struct ustk_tab *v, char *why, size_t whylen)
{
	const struct unw_mod *m = (const struct unw_mod *)(t + 1);
	const struct unw_row *rows = (const struct unw_row *)(m + t->nmods);

	if (t->nmods > USTK_MODS || t->nrows > USTK_ROWS) {
		snprintf(why, whylen, "%u modules, %u rows: more than the kernel walk's %u, %u",
			 t->nmods, t->nrows, USTK_MODS, USTK_ROWS);
		return -E2BIG;
	}
	memset(v, 0, sizeof(*v));
	v->nmods = t->nmods;
	v->nrows = t->nrows;
	for (uint32_t i = 0; i < USTK_MODS; i++) {
		struct ustk_mod *d = &v->mods[i];

		if (i < t->nmods) {
			d->lo = m[i].lo;
			d->hi = m[i].hi;
			d->bias = m[i].bias;
			d->first = m[i].first;
			d->nrows = m[i].nrows;
		} else {
			d->lo = d->hi = USTK_NOWHERE;
		}
	}
	memcpy(v->rows, rows, (size_t)t->nrows * sizeof(*rows));
	return 0;
}

/* 1 when a <= b, for a, b < 2^63, without a jump (as the program does) */
static uint64_t le(uint64_t a, uint64_t b)
{
	return ((b - a) >> 63) ^ 1;
}

const struct unw_row *ustk_find(const struct ustk_tab *v, uint64_t pc)
{
	const struct ustk_mod *m;
	uint64_t i = 0, j, end, fpc;

	if (pc >= USTK_NOWHERE)
		return NULL;
	for (uint64_t step = USTK_MODS / 2; step; step /= 2)
		i += step * le(v->mods[(i + step) & (USTK_MODS - 1)].lo, pc);
	m = &v->mods[i & (USTK_MODS - 1)];
	if (pc < m->lo || pc >= m->hi)
		return NULL;
	fpc = pc - m->bias;
	j = m->first;
	end = (uint64_t)m->first + m->nrows;
	for (uint64_t step = USTK_ROWS / 2; step; step /= 2) {
		uint64_t k = j + step;

		/* k < end, and the row's pc <= fpc */
		j += step * (((k - end) >> 63) & le(v->rows[k & (USTK_ROWS - 1)].pc, fpc));
	}
	if (j >= end || v->rows[j & (USTK_ROWS - 1)].pc > fpc)
		return NULL;
	return &v->rows[j & (USTK_ROWS - 1)];
}
