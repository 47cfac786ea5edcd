/* SPDX-License-Identifier: MIT */
/* Internals of the IR shared by ir.c (emission), ir_dump.c (dumps) and
 * regalloc.c, regalloc_emit.c (register allocation, lowering, label
 * resolution).  Not for users. */
#ifndef FAY_BPF_IR_INT_H
#define FAY_BPF_IR_INT_H

#include "bpf/insn.h"
#include "bpf/ir.h"

enum ir_op {
	IRI_ENTRY,		/* dst = r1 (the context) */
	IRI_MOV,		/* dst = a */
	IRI_ALU,		/* dst code= a */
	IRI_LOAD,		/* dst = *(size *)(a + off) */
	IRI_STORE,		/* *(size *)(a + off) = b */
	IRI_JMP,		/* if (a code b) goto label; code BPF_JA: goto */
	IRI_LABEL,
	IRI_CALL,		/* dst = helper code (args) */
	IRI_EXIT,		/* return a */
	IRI_COMMENT,
};

#define IR_MAX_ARGS 5

struct ir_insn {
	enum ir_op op;
	int code;		/* ALU/JMP op, helper id */
	unsigned int size;	/* LOAD/STORE width in bytes */
	unsigned int flags;	/* IR_SIGNED, IR_ALU32 */
	int off;		/* LOAD/STORE displacement */
	int label;		/* JMP target, LABEL id */
	ir_reg dst;
	struct ir_opnd a, b;
	struct ir_opnd args[IR_MAX_ARGS];
	int nargs;
	uint32_t line, col;
	char *comment;
};

struct ir {
	char name[16];
	struct ir_insn *in;
	size_t n, cap;
	int nvregs;
	int nlabels;
	ir_reg ctx;
	int sp;			/* lowest user stack offset (<= 0) */
	uint32_t line, col;
	int err;
	char errmsg[256];

	/* Filled by ir_lower(). */
	bool lowered;
	struct bpf_insn *out;
	size_t nout, capout;
	int *origin;		/* out index -> IR index */
	struct bmap **relo;	/* out index -> map of an ld_imm64, or NULL */
	unsigned int stack_size;
	unsigned int nspilled;
};

/* Remember the first error; later ones are dropped. */
void ir_fail(struct ir *ir, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
