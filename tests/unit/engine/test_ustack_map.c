// SPDX-License-Identifier: MIT
/*
 * The unwind table as the BPF programs read it (src/engine/ustack_map.c):
 * this process's table (unwind_process_memfd(), its libc, its own
 * executable) repacked, and the branchless lookup the programs make
 * (ustk_find(), its model) giving the row unw_find() gives at every
 * row's first and last byte, between rows and outside every module;
 * a table larger than the map's bound refused.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "engine/ustack_map.h"
#include "probe/unwind.h"

/* Whether both lookups of pc agree (the same row, or both none) */
static bool agree(const struct unw_hdr *t, const struct ustk_tab *v, uint64_t pc)
{
	const struct unw_row *a = unw_find(t, pc), *b = ustk_find(v, pc);

	if (!a || !b)
		return !a && !b;
	return !memcmp(a, b, sizeof(*a));
}

int main(void)
{
	unsigned nmods, nrows;
	uint64_t sig, checked = 0, bad = 0, badpc = 0;
	char why[256];
	struct stat st;
	struct ustk_tab *v = malloc(sizeof(*v));
	int fd = unwind_process_memfd(getpid(), NULL, &nmods, &nrows, &sig, why, sizeof(why));
	const struct unw_hdr *t;
	const struct unw_mod *m;
	struct unw_hdr big;

	ok(v && fd >= 0, "this process's table: %u modules, %u rows", nmods, nrows);
	if (!v || fd < 0 || fstat(fd, &st))
		return test_done();
	t = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	ok(t != MAP_FAILED && !unw_check(t, (size_t)st.st_size, why, sizeof(why)), "checked");
	if (t == MAP_FAILED)
		return test_done();
	is_int(ustk_pack(t, v, why, sizeof(why)), 0, "packed (%u modules, %u rows)", v->nmods,
	       v->nrows);
	ok(v->mods[USTK_MODS - 1].lo == USTK_NOWHERE, "unused module slots lie nowhere");
	m = (const struct unw_mod *)(t + 1);
	for (uint32_t i = 0; i < t->nmods; i++) {
		const struct unw_row *rows = (const struct unw_row *)(m + t->nmods) + m[i].first;

		for (uint32_t r = 0; r < m[i].nrows; r++) {
			uint64_t a = rows[r].pc + m[i].bias;
			uint64_t pcs[3] = { a, a - 1, a + 1 };

			for (int k = 0; k < 3; k++) {
				checked++;
				if (!agree(t, v, pcs[k]) && !bad++)
					badpc = pcs[k];
			}
		}
		checked += 3;
		bad += !agree(t, v, m[i].lo - 1) + !agree(t, v, m[i].hi) + !agree(t, v, m[i].hi - 1);
	}
	is_u64(bad, 0, "the programs' lookup gives unw_find()'s row at %llu addresses (first "
	       "differing: %#llx)", (unsigned long long)checked, (unsigned long long)badpc);
	ok(checked > 20000, "libc's rows among them");
	ok(ustk_find(v, (uint64_t)(uintptr_t)&st) == NULL, "a stack address: no row");
	ok(ustk_find(v, UINT64_MAX) == NULL && ustk_find(v, 0) == NULL, "0 and ~0: no row");

	big = *t;
	big.nrows = USTK_ROWS + 1;
	is_int(ustk_pack(&big, v, why, sizeof(why)), -E2BIG, "more rows than the bound: refused (%s)",
	       why);
	big = *t;
	big.nmods = USTK_MODS + 1;
	is_int(ustk_pack(&big, v, why, sizeof(why)), -E2BIG, "more modules: refused");
	munmap((void *)t, (size_t)st.st_size);
	close(fd);
	free(v);
	unwind_cache_free();
	return test_done();
}
