// SPDX-License-Identifier: MIT
/*
 * Emitting BPF from the IR once regalloc.c has allocated the registers
 * (regalloc_int.h): operands, reloads and spills, ALU, loads, stores,
 * jumps, helper calls (their arguments as a parallel move), late jump
 * resolution; and the accessors of the lowered program (ir.h).  r0 and r5
 * are the scratch registers (the register plan is in regalloc.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "bpf/regalloc_int.h"
#include "bpf/load.h"

#define SCRATCH0 BPF_REG_0
#define SCRATCH1 BPF_REG_5

/* ---- emission of BPF ------------------------------------------------------ */

static void out(struct ra *ra, struct bpf_insn insn, struct bmap *map)
{
	struct ir *ir = ra->ir;

	if (ir->err)
		return;
	if (ir->nout == ir->capout) {
		size_t cap = ir->capout ? ir->capout * 2 : 128;
		struct bpf_insn *o = realloc(ir->out, cap * sizeof(*o));
		int *org = o ? realloc(ir->origin, cap * sizeof(*org)) : NULL;
		struct bmap **rl = org ? realloc(ir->relo, cap * sizeof(*rl)) : NULL;

		if (o)
			ir->out = o;
		if (org)
			ir->origin = org;
		if (!rl) {
			ir_fail(ir, -ENOMEM, "out of memory");
			return;
		}
		ir->relo = rl;
		ir->capout = cap;
	}
	ir->out[ir->nout] = insn;
	ir->origin[ir->nout] = ra->cur;
	ir->relo[ir->nout] = map;
	ir->nout++;
}

static bool fits32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

static bool fits16(int64_t v)
{
	return v >= INT16_MIN && v <= INT16_MAX;
}

/* reg = constant, in one instruction when it fits. */
static void out_imm(struct ra *ra, int reg, int64_t v)
{
	if (fits32(v)) {
		out(ra, MOV64_IMM(reg, v), NULL);
	} else {
		out(ra, LD_IMM64_LO(reg, 0, v), NULL);
		out(ra, LD_IMM64_HI(v), NULL);
	}
}

/* Materialise a register, constant, stack address or map into reg. */
static void out_opnd(struct ra *ra, int reg, struct ir_opnd o)
{
	const struct ival *iv;

	switch (o.kind) {
	case IR_O_REG:
		iv = &ra->iv[o.reg];
		if (iv->reg < 0)
			out(ra, LDX_MEM(BPF_DW, reg, BPF_REG_FP, iv->slot), NULL);
		else if (iv->reg != reg)
			out(ra, MOV64_REG(reg, iv->reg), NULL);
		break;
	case IR_O_IMM:
		out_imm(ra, reg, o.imm);
		break;
	case IR_O_STACK:
		out(ra, MOV64_REG(reg, BPF_REG_FP), NULL);
		out(ra, ALU64_IMM(BPF_ADD, reg, o.off), NULL);
		break;
	case IR_O_MAP:
		out(ra, LD_IMM64_LO(reg, BPF_PSEUDO_MAP_FD, -1), o.map);
		out(ra, LD_IMM64_HI(0), NULL);
		break;
	default:
		ir_fail(ra->ir, -EINVAL, "bad operand");
	}
}

/* The register to read virtual register v from: its own, or scratch
 * after a reload. */
static int use_reg(struct ra *ra, ir_reg v, int scratch)
{
	const struct ival *iv = &ra->iv[v];

	if (iv->reg >= 0)
		return iv->reg;
	out(ra, LDX_MEM(BPF_DW, scratch, BPF_REG_FP, iv->slot), NULL);
	return scratch;
}

/* The register to compute v into (r0 when v lives on the stack)... */
static int def_reg(const struct ra *ra, ir_reg v)
{
	return ra->iv[v].reg >= 0 ? ra->iv[v].reg : SCRATCH0;
}

/* ...and the store back to the stack afterwards. */
static void def_done(struct ra *ra, ir_reg v, int reg)
{
	const struct ival *iv = &ra->iv[v];

	if (iv->reg < 0)
		out(ra, STX_MEM(BPF_DW, BPF_REG_FP, reg, iv->slot), NULL);
}

/* A base register and displacement for a load/store address. */
static int mem_base(struct ra *ra, struct ir_opnd base, int *off, int scratch)
{
	int reg = BPF_REG_FP;

	if (base.kind == IR_O_STACK)
		*off += base.off;
	else
		reg = use_reg(ra, base.reg, scratch);
	if (!fits16(*off))
		ir_fail(ra->ir, -EINVAL, "memory offset %d out of range", *off);
	return reg;
}

static void lower_alu(struct ra *ra, const struct ir_insn *in)
{
	int cls = in->flags & IR_ALU32 ? BPF_ALU : BPF_ALU64;
	int d = use_reg(ra, in->dst, SCRATCH0);

	if (in->code == BPF_NEG) {
		out(ra, INSN(cls | BPF_NEG, d, 0, 0, 0), NULL);
	} else if (in->a.kind == IR_O_IMM && fits32(in->a.imm)) {
		out(ra, INSN(cls | in->code | BPF_K, d, 0, 0, in->a.imm), NULL);
	} else {
		int s;

		if (in->a.kind == IR_O_IMM) {
			out_imm(ra, SCRATCH1, in->a.imm);
			s = SCRATCH1;
		} else {
			s = use_reg(ra, in->a.reg, SCRATCH1);
		}
		out(ra, INSN(cls | in->code | BPF_X, d, s, 0, 0), NULL);
	}
	def_done(ra, in->dst, d);
}

static void lower_load(struct ra *ra, const struct ir_insn *in)
{
	int off = in->off;
	int b = mem_base(ra, in->a, &off, SCRATCH1);
	int d = def_reg(ra, in->dst);
	int sh = 64 - 8 * (int)in->size;

	out(ra, LDX_MEM(bpf_size_code(in->size), d, b, off), NULL);
	if ((in->flags & IR_SIGNED) && sh) {
		out(ra, ALU64_IMM(BPF_LSH, d, sh), NULL);
		out(ra, ALU64_IMM(BPF_ARSH, d, sh), NULL);
	}
	def_done(ra, in->dst, d);
}

static void lower_store(struct ra *ra, const struct ir_insn *in)
{
	int off = in->off;
	int b = mem_base(ra, in->a, &off, SCRATCH1);
	int sz = bpf_size_code(in->size);

	if (in->b.kind == IR_O_IMM && fits32(in->b.imm)) {
		out(ra, ST_MEM(sz, b, off, in->b.imm), NULL);
	} else if (in->b.kind == IR_O_IMM) {
		out_imm(ra, SCRATCH0, in->b.imm);
		out(ra, STX_MEM(sz, b, SCRATCH0, off), NULL);
	} else {
		out(ra, STX_MEM(sz, b, use_reg(ra, in->b.reg, SCRATCH0), off), NULL);
	}
}

static void lower_jmp(struct ra *ra, const struct ir_insn *in)
{
	struct fix *f;

	if (in->code == BPF_JA) {
		out(ra, JA(0), NULL);
	} else {
		int a = use_reg(ra, in->a.reg, SCRATCH0);

		if (in->b.kind == IR_O_IMM && fits32(in->b.imm)) {
			out(ra, JMP_IMM(in->code, a, in->b.imm, 0), NULL);
		} else {
			int b;

			if (in->b.kind == IR_O_IMM) {
				out_imm(ra, SCRATCH1, in->b.imm);
				b = SCRATCH1;
			} else {
				b = use_reg(ra, in->b.reg, SCRATCH1);
			}
			out(ra, JMP_REG(in->code, a, b, 0), NULL);
		}
	}
	if (ra->ir->err)
		return;
	f = &ra->fixes[ra->nfixes++];
	f->at = ra->ir->nout - 1;
	f->label = in->label;
}

/*
 * A call: move the arguments into r1..rN (a parallel move: sources may be
 * each other's targets, so order the register-to-register moves and break
 * cycles through r0), then the arguments that read no register, the call,
 * and the result out of r0.
 */
static void lower_call(struct ra *ra, const struct ir_insn *in)
{
	struct { int dst, src; } mv[IR_MAX_ARGS];
	int nmv = 0;

	for (int i = 0; i < in->nargs; i++) {
		const struct ir_opnd *o = &in->args[i];

		if (o->kind == IR_O_REG && ra->iv[o->reg].reg >= 0 &&
		    ra->iv[o->reg].reg != BPF_REG_1 + i) {
			mv[nmv].dst = BPF_REG_1 + i;
			mv[nmv].src = ra->iv[o->reg].reg;
			nmv++;
		}
	}
	while (nmv) {
		int pick = -1;

		for (int m = 0; m < nmv && pick < 0; m++) {
			bool blocked = false;

			for (int k = 0; k < nmv; k++)
				if (k != m && mv[k].src == mv[m].dst)
					blocked = true;
			if (!blocked)
				pick = m;
		}
		if (pick < 0) {
			/* Every target is still needed as a source: a
			 * cycle.  Park one target's value in r0. */
			int d = mv[0].dst;

			out(ra, MOV64_REG(SCRATCH0, d), NULL);
			for (int k = 0; k < nmv; k++)
				if (mv[k].src == d)
					mv[k].src = SCRATCH0;
			continue;
		}
		out(ra, MOV64_REG(mv[pick].dst, mv[pick].src), NULL);
		mv[pick] = mv[--nmv];
	}
	for (int i = 0; i < in->nargs; i++) {
		const struct ir_opnd *o = &in->args[i];

		if (o->kind == IR_O_REG && ra->iv[o->reg].reg >= 0)
			continue;	/* moved above */
		out_opnd(ra, BPF_REG_1 + i, *o);
	}
	out(ra, CALL_HELPER(in->code), NULL);
	if (in->dst != IR_NOREG && ra->iv[in->dst].start >= 0) {
		if (ra->iv[in->dst].reg >= 0)
			out(ra, MOV64_REG(ra->iv[in->dst].reg, BPF_REG_0), NULL);
		else
			def_done(ra, in->dst, BPF_REG_0);
	}
}

void ra_lower_one(struct ra *ra, const struct ir_insn *in)
{
	int d;

	switch (in->op) {
	case IRI_ENTRY:
		/* Nothing to do when the context is never read. */
		if (ra->iv[in->dst].end <= ra->iv[in->dst].start)
			break;
		d = ra->iv[in->dst].reg;
		if (d < 0)
			def_done(ra, in->dst, BPF_REG_1);
		else if (d != BPF_REG_1)
			out(ra, MOV64_REG(d, BPF_REG_1), NULL);
		break;
	case IRI_MOV:
		d = def_reg(ra, in->dst);
		out_opnd(ra, d, in->a);
		def_done(ra, in->dst, d);
		break;
	case IRI_ALU:
		lower_alu(ra, in);
		break;
	case IRI_LOAD:
		lower_load(ra, in);
		break;
	case IRI_STORE:
		lower_store(ra, in);
		break;
	case IRI_JMP:
		lower_jmp(ra, in);
		break;
	case IRI_LABEL:
		ra->label_pos[in->label] = (int)ra->ir->nout;
		break;
	case IRI_CALL:
		lower_call(ra, in);
		break;
	case IRI_EXIT:
		out_opnd(ra, BPF_REG_0, in->a);
		out(ra, EXIT_INSN(), NULL);
		break;
	case IRI_COMMENT:
		break;
	}
}

int ra_resolve_jumps(struct ra *ra)
{
	struct ir *ir = ra->ir;

	for (size_t k = 0; k < ra->nfixes; k++) {
		const struct fix *f = &ra->fixes[k];
		long off = (long)ra->label_pos[f->label] - (long)f->at - 1;

		if (!fits16(off)) {
			ir_fail(ir, -EINVAL, "jump to L%d is too far (%ld insns)",
				f->label, off);
			return ir->err;
		}
		ir->out[f->at].off = (int16_t)off;
	}
	return 0;
}

/* ---- results ---------------------------------------------------------------- */

const struct bpf_insn *ir_insns(const struct ir *ir, size_t *cnt)
{
	*cnt = ir->lowered ? ir->nout : 0;
	return ir->lowered ? ir->out : NULL;
}

int ir_fixup_maps(struct ir *ir)
{
	for (size_t i = 0; i < ir->nout; i++) {
		if (!ir->relo[i])
			continue;
		if (bmap_fd(ir->relo[i]) < 0)
			return -EBADF;
		ir->out[i].imm = bmap_fd(ir->relo[i]);
	}
	return 0;
}

int ir_foreach_map(const struct ir *ir, int (*f)(struct bmap *, void *), void *arg)
{
	for (size_t i = 0; i < ir->nout; i++) {
		bool seen = false;
		int err;

		if (!ir->relo[i])
			continue;
		for (size_t k = 0; k < i && !seen; k++)
			seen = ir->relo[k] == ir->relo[i];
		if (seen)
			continue;
		err = f(ir->relo[i], arg);
		if (err)
			return err;
	}
	return 0;
}

struct bmap *ir_insn_map(const struct ir *ir, size_t idx)
{
	return ir->lowered && idx < ir->nout ? ir->relo[idx] : NULL;
}

int ir_insn_origin(const struct ir *ir, size_t idx, uint32_t *line, uint32_t *col)
{
	const struct ir_insn *in;

	if (!ir->lowered || idx >= ir->nout)
		return -1;
	in = &ir->in[ir->origin[idx]];
	if (line)
		*line = in->line;
	if (col)
		*col = in->col;
	return ir->origin[idx];
}

unsigned int ir_stack_size(const struct ir *ir)
{
	return ir->stack_size;
}

unsigned int ir_nspilled(const struct ir *ir)
{
	return ir->nspilled;
}
