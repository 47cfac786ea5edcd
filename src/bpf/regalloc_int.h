/* SPDX-License-Identifier: MIT */
/*
 * Private to the lowering of the IR to BPF (src/bpf/regalloc*.c):
 * regalloc.c analyses the program and allocates registers (ir_lower()
 * drives every step), regalloc_emit.c emits the BPF once they are
 * allocated.  Not for users.
 */
#ifndef FAY_BPF_REGALLOC_INT_H
#define FAY_BPF_REGALLOC_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "bpf/ir_int.h"

struct ival {
	ir_reg v;
	int start, end;		/* -1: never appears */
	bool cross;		/* live across a helper call */
	int reg;		/* physical register, or -1 if spilled */
	int slot;		/* spill slot (fp offset) when reg < 0 */
};

struct ra {
	struct ir *ir;
	size_t n;		/* IR instructions */
	int nv;
	size_t words;		/* uint64_t words per live set */
	uint64_t *live;		/* live-in sets, n * words */
	bool *reach;
	int *label_at;		/* label -> IR index */
	struct ival *iv;	/* per vreg */
	int *label_pos;		/* label -> BPF index */
	struct fix { size_t at; int label; } *fixes;
	size_t nfixes;
	int cur;		/* IR index being lowered */
};

/* ---- regalloc_emit.c ---- */

/* Emit the BPF of IR instruction in (a label records its BPF index).
 * Errors (out of memory, an operand out of range) go to ir_fail(). */
void ra_lower_one(struct ra *ra, const struct ir_insn *in);
/* Once every instruction is emitted: turn each recorded jump's label into
 * its offset.  Returns 0, or the error ir_fail() recorded (too far). */
int ra_resolve_jumps(struct ra *ra);

#endif
