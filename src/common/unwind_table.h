/* SPDX-License-Identifier: MIT */
/*
 * Unwind tables of a process (issue #27: stacks of code built without
 * frame pointers): what fay builds from the call frame information of the
 * files a process maps (src/probe/unwind.c) and hands the in-process
 * runtime in a sealed memfd (INL_UNWIND), which its stack walker steps by
 * (src/rt/ustack.c).  One blob, read-only, position independent:
 *
 *	struct unw_hdr
 *	struct unw_mod[nmods]	executable mappings, sorted, disjoint
 *	struct unw_row[nrows]	each module's rows, a run sorted by pc
 *
 * A row holds from its pc (the file's virtual address: the process's
 * address minus the module's bias) up to the next row's pc; a module's
 * last row is UNW_NONE.  x86-64 only: CFA = rsp + off or rbp + off, the
 * return address at CFA - 8, rbp saved at CFA + rbp_off or unchanged.
 * Rules the call frame information gives as expressions (PLT entries)
 * are UNW_FP: the walker falls back to frame pointers; a signal frame of
 * x86-64 Linux's layout (glibc's __restore_rt) is UNW_SIGNAL.
 */
#ifndef FAY_COMMON_UNWIND_TABLE_H
#define FAY_COMMON_UNWIND_TABLE_H

#include <stddef.h>
#include <stdint.h>

#define UNW_MAGIC	0x66617975u	/* "fayu" */
#define UNW_VERSION	1
#define UNW_MAX_MODS	512
#define UNW_MAX_ROWS	(8u << 20)

enum unw_kind {
	UNW_NONE = 0,	/* no call frame information here: frame pointers */
	UNW_RSP = 1,	/* CFA = rsp + cfa_off */
	UNW_RBP = 2,	/* CFA = rbp + cfa_off */
	UNW_FP = 3,	/* an expression (PLT): frame pointers */
	UNW_END = 4,	/* the return address is undefined: the outermost frame */
	/* a signal frame (the kernel's, at a handler's return into the
	 * signal trampoline): the interrupted registers saved at sp, rsp at
	 * sp + cfa_off, rip 8 above it, rbp at sp + rbp_off; the next frame
	 * is the interrupted pc itself (not a return address) */
	UNW_SIGNAL = 5,
};

enum unw_rbp {
	UNW_RBP_SAME = 0,	/* the caller's rbp is this frame's */
	UNW_RBP_AT = 1,		/* saved at CFA + rbp_off */
	UNW_RBP_LOST = 2,	/* not recoverable (a register rule, an expression) */
};

struct unw_row {
	uint32_t pc;		/* file virtual address where the row starts */
	int32_t cfa_off;
	int16_t rbp_off;
	uint8_t kind;		/* enum unw_kind */
	uint8_t rbp;		/* enum unw_rbp */
};

struct unw_mod {
	uint64_t lo, hi;	/* the executable mapping in the process: [lo, hi) */
	uint64_t bias;		/* process address - file virtual address */
	uint32_t first, nrows;	/* its rows: rows[first .. first + nrows) */
};

struct unw_hdr {
	uint32_t magic, version;
	uint32_t nmods, nrows;
	uint64_t size;		/* bytes of the whole blob */
};

/*
 * Whether the blob at p (len bytes) is a well-formed table: magic,
 * version, size, counts in bounds, modules sorted and disjoint with rows
 * inside the rows array, each module's rows strictly increasing, known
 * kinds, its last row UNW_NONE.  After it, unw_find() reads nothing
 * outside the blob.  0, or -EINVAL with a reason in why ("module 3:
 * rows not increasing at row 17").
 */
int unw_check(const void *p, size_t len, char *why, size_t whylen);

/*
 * The row that holds pc in the checked blob t, or NULL (pc in no
 * module, or before its first row).  Reads the blob only.
 */
const struct unw_row *unw_find(const struct unw_hdr *t, uint64_t pc);

/*
 * The same, trying *hint first: a module and row from an earlier
 * lookup (of this pc, in this table or another, or any value at all: a
 * hint that does not hold for pc in t is checked in O(1) and ignored).
 * *hint is set to the row found.  For a cache of lookups whose entries
 * may be torn (the runtime's: racy, lock-free): a wrong hint costs a
 * search, never a wrong row.
 */
const struct unw_row *unw_find_hint(const struct unw_hdr *t, uint64_t pc, uint64_t *hint);

#endif
