/* SPDX-License-Identifier: MIT */
/*
 * A process's unwind table as the BPF programs read it (issue #27: the
 * kernel's walk of user stacks without frame pointers; the design is in
 * src/probe/README.md "Unwind tables").  The blob unwind_process_memfd()
 * makes (common/unwind_table.h) is repacked at fixed offsets into one
 * value of the map fay_unwind (keyed by tgid), so that the generated
 * program indexes it with masks the verifier can bound and finds a row
 * by a branchless binary search of a fixed number of steps.
 *
 * Unused module slots hold lo = hi = USTK_NOWHERE (above any user
 * address), so a search over all USTK_MODS slots never lands on one.
 */
#ifndef FAY_ENGINE_USTACK_MAP_H
#define FAY_ENGINE_USTACK_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "common/unwind_table.h"

#define USTK_MODS_LOG	6
#define USTK_MODS	(1u << USTK_MODS_LOG)
#define USTK_ROWS_LOG	18
#define USTK_ROWS	(1u << USTK_ROWS_LOG)
#define USTK_PROCS	8			/* processes with a table at once */
#define USTK_NOWHERE	(1ull << 62)	/* an unused module slot's lo, hi */

struct ustk_mod {
	uint64_t lo, hi, bias;
	uint32_t first, nrows;
};

struct ustk_tab {
	uint32_t nmods, nrows;
	uint64_t pad;
	struct ustk_mod mods[USTK_MODS];
	struct unw_row rows[USTK_ROWS];
};

/*
 * Repack the checked blob t (unw_check()) into *v (every byte written).
 * 0, or -E2BIG with a reason in why when it has more than USTK_MODS
 * modules or USTK_ROWS rows (the process is then walked by frame
 * pointers).
 */
int ustk_pack(const struct unw_hdr *t, struct ustk_tab *v, char *why, size_t whylen);

/*
 * The row of pc in the packed table v, found as the generated program
 * finds it (ustk_emit_find() emits this, step for step: the same
 * power-of-two steps, the same comparisons by a shift), or NULL.  The
 * model the unit test compares with unw_find().
 */
const struct unw_row *ustk_find(const struct ustk_tab *v, uint64_t pc);

#endif
