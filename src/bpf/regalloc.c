// SPDX-License-Identifier: MIT
/*
 * Lowering the IR to BPF: liveness, linear-scan register allocation with
 * spilling, call lowering, late label resolution.
 *
 * Register plan (BPF calling convention: r1-r5 arguments, clobbered by a
 * call with r0; r6-r9 preserved; r10 the read-only frame pointer):
 *   r0, r5   scratch, never hold a virtual register: r0 takes call results
 *            and spilled values, r5 spilled/large second operands.  r5 as a
 *            call's fifth argument is written last, so it is free then too.
 *   r1-r4    virtual registers whose live range crosses no call.
 *   r6-r9    any virtual register; the only home for one that lives
 *            across a call.
 * When the registers run out, the interval ending last is spilled to an
 * 8-byte stack slot below the user's slots for its whole life (Poletto &
 * Sarkar linear scan); each use reloads it into a scratch register.
 *
 * Live ranges are the hull of the instructions where a value is live (from
 * an iterative backward dataflow over the instruction graph), which is
 * exact for the forward-branching code a query compiles to and safe (if
 * pessimistic) with loops.  Unreachable instructions are dropped first:
 * the verifier rejects them.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/ir_int.h"
#include "bpf/load.h"
#include "common/err.h"

#define NPHYS 11
#define SCRATCH0 BPF_REG_0
#define SCRATCH1 BPF_REG_5

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

/* ---- instruction graph -------------------------------------------------- */

static int uses_of(const struct ir_insn *in, ir_reg *u)
{
	int n = 0;

	switch (in->op) {
	case IRI_ALU:
		u[n++] = in->dst;
		/* fall through */
	case IRI_MOV:
	case IRI_LOAD:
	case IRI_EXIT:
		if (in->a.kind == IR_O_REG)
			u[n++] = in->a.reg;
		break;
	case IRI_STORE:
	case IRI_JMP:
		if (in->a.kind == IR_O_REG)
			u[n++] = in->a.reg;
		if (in->b.kind == IR_O_REG)
			u[n++] = in->b.reg;
		break;
	case IRI_CALL:
		for (int i = 0; i < in->nargs; i++)
			if (in->args[i].kind == IR_O_REG)
				u[n++] = in->args[i].reg;
		break;
	default:
		break;
	}
	return n;
}

static ir_reg def_of(const struct ir_insn *in)
{
	switch (in->op) {
	case IRI_ENTRY:
	case IRI_MOV:
	case IRI_ALU:
	case IRI_LOAD:
	case IRI_CALL:
		return in->dst;
	default:
		return IR_NOREG;
	}
}

/* Successors of instruction i: up to two; returns how many. */
static int succs(const struct ra *ra, size_t i, size_t *s)
{
	const struct ir_insn *in = &ra->ir->in[i];
	int n = 0;

	if (in->op == IRI_EXIT)
		return 0;
	if (in->op == IRI_JMP) {
		s[n++] = ra->label_at[in->label];
		if (in->code == BPF_JA)
			return n;
	}
	s[n++] = i + 1;		/* == ra->n: falls off the end */
	return n;
}

static int find_labels(struct ra *ra)
{
	struct ir *ir = ra->ir;

	for (int l = 0; l < ir->nlabels; l++)
		ra->label_at[l] = -1;
	for (size_t i = 0; i < ra->n; i++) {
		const struct ir_insn *in = &ir->in[i];

		if (in->op != IRI_LABEL)
			continue;
		if (ra->label_at[in->label] >= 0) {
			ir_fail(ir, -EINVAL, "label L%d placed twice", in->label);
			return ir->err;
		}
		ra->label_at[in->label] = (int)i;
	}
	for (size_t i = 0; i < ra->n; i++) {
		const struct ir_insn *in = &ir->in[i];

		if (in->op == IRI_JMP && ra->label_at[in->label] < 0) {
			ir_fail(ir, -EINVAL, "jump to L%d, which is never placed",
				in->label);
			return ir->err;
		}
	}
	return 0;
}

/* Mark what is reachable from the entry (depth-first, explicit stack). */
static int find_reachable(struct ra *ra)
{
	size_t *stack = malloc((ra->n + 1) * sizeof(*stack)), sp = 0, s[2];

	if (!stack)
		return -ENOMEM;
	stack[sp++] = 0;
	ra->reach[0] = true;
	while (sp) {
		size_t i = stack[--sp];
		int ns = succs(ra, i, s);

		for (int k = 0; k < ns; k++) {
			if (s[k] >= ra->n) {
				ir_fail(ra->ir, -EINVAL, "the program can run past "
					"its last instruction (missing exit)");
				free(stack);
				return ra->ir->err;
			}
			if (!ra->reach[s[k]]) {
				ra->reach[s[k]] = true;
				stack[sp++] = s[k];
			}
		}
	}
	free(stack);
	return 0;
}

/* ---- liveness ------------------------------------------------------------- */

#define LIVE(ra, i) (&(ra)->live[(size_t)(i) * (ra)->words])

static void set_bit(uint64_t *s, int v) { s[v / 64] |= 1ull << (v % 64); }
static void clr_bit(uint64_t *s, int v) { s[v / 64] &= ~(1ull << (v % 64)); }
static bool has_bit(const uint64_t *s, int v) { return s[v / 64] >> (v % 64) & 1; }

static int liveness(struct ra *ra)
{
	uint64_t *tmp = calloc(ra->words, sizeof(*tmp));
	bool changed = true;

	if (!tmp)
		return -ENOMEM;
	while (changed) {
		changed = false;
		for (size_t i = ra->n; i-- > 0;) {
			const struct ir_insn *in = &ra->ir->in[i];
			size_t s[2];
			ir_reg u[IR_MAX_ARGS + 1], d;
			int ns, nu;

			if (!ra->reach[i])
				continue;
			memset(tmp, 0, ra->words * sizeof(*tmp));
			ns = succs(ra, i, s);
			for (int k = 0; k < ns; k++)
				for (size_t w = 0; w < ra->words; w++)
					tmp[w] |= LIVE(ra, s[k])[w];
			d = def_of(in);
			if (d != IR_NOREG)
				clr_bit(tmp, d);
			nu = uses_of(in, u);
			for (int k = 0; k < nu; k++)
				set_bit(tmp, u[k]);
			if (memcmp(tmp, LIVE(ra, i), ra->words * sizeof(*tmp))) {
				memcpy(LIVE(ra, i), tmp, ra->words * sizeof(*tmp));
				changed = true;
			}
		}
	}
	free(tmp);
	for (int v = 0; v < ra->nv; v++) {
		if (has_bit(LIVE(ra, 0), v)) {
			ir_fail(ra->ir, -EINVAL, "v%d is read before it is written",
				v);
			return ra->ir->err;
		}
	}
	return 0;
}

static void build_intervals(struct ra *ra)
{
	for (int v = 0; v < ra->nv; v++) {
		ra->iv[v] = (struct ival){ .v = v, .start = -1, .end = -1,
					   .reg = -1 };
	}
	for (size_t i = 0; i < ra->n; i++) {
		ir_reg d;

		if (!ra->reach[i])
			continue;
		for (int v = 0; v < ra->nv; v++) {
			if (!has_bit(LIVE(ra, i), v))
				continue;
			if (ra->iv[v].start < 0)
				ra->iv[v].start = (int)i;
			ra->iv[v].end = (int)i;
		}
		d = def_of(&ra->ir->in[i]);
		if (d != IR_NOREG) {
			if (ra->iv[d].start < 0 || ra->iv[d].start > (int)i)
				ra->iv[d].start = (int)i;
			if (ra->iv[d].end < (int)i)
				ra->iv[d].end = (int)i;
		}
	}
	/* A value lives across a call when the call sits strictly inside
	 * its range: defined before, needed after. */
	for (size_t i = 0; i < ra->n; i++) {
		if (!ra->reach[i] || ra->ir->in[i].op != IRI_CALL)
			continue;
		for (int v = 0; v < ra->nv; v++)
			if (ra->iv[v].start < (int)i && (int)i < ra->iv[v].end)
				ra->iv[v].cross = true;
	}
}

/* ---- linear scan ------------------------------------------------------------ */

static const int pool_any[] = { BPF_REG_1, BPF_REG_2, BPF_REG_3, BPF_REG_4,
				BPF_REG_6, BPF_REG_7, BPF_REG_8, BPF_REG_9 };
static const int pool_saved[] = { BPF_REG_6, BPF_REG_7, BPF_REG_8, BPF_REG_9 };

static int by_start(const void *a, const void *b)
{
	const struct ival *x = *(const struct ival *const *)a;
	const struct ival *y = *(const struct ival *const *)b;

	if (x->start != y->start)
		return x->start - y->start;
	return x->v - y->v;
}

static bool reg_allowed(const struct ival *iv, int reg)
{
	return !iv->cross || reg >= BPF_REG_6;
}

static int spill_slot(struct ra *ra)
{
	struct ir *ir = ra->ir;
	int base = ir->sp & ~7;
	int off = base - 8 * (int)(ir->nspilled + 1);

	ir->nspilled++;
	return off;
}

static int linear_scan(struct ra *ra)
{
	struct ival **order = malloc(ra->nv * sizeof(*order));
	struct ival *active[NPHYS] = { 0 };	/* by physical register */
	int cnt = 0;

	if (!order)
		return -ENOMEM;
	for (int v = 0; v < ra->nv; v++)
		if (ra->iv[v].start >= 0)
			order[cnt++] = &ra->iv[v];
	qsort(order, cnt, sizeof(*order), by_start);

	for (int k = 0; k < cnt; k++) {
		struct ival *cur = order[k], *victim = NULL;
		const int *pool = cur->cross ? pool_saved : pool_any;
		int npool = cur->cross ? 4 : 8;

		/* Expire ranges that ended before this one starts. */
		for (int r = 0; r < NPHYS; r++)
			if (active[r] && active[r]->end < cur->start)
				active[r] = NULL;
		for (int p = 0; p < npool; p++) {
			if (!active[pool[p]]) {
				cur->reg = pool[p];
				active[pool[p]] = cur;
				break;
			}
		}
		if (cur->reg >= 0)
			continue;
		/* Full: spill whichever range ends last, cur or an active
		 * one in a register cur may use. */
		for (int p = 0; p < npool; p++) {
			struct ival *a = active[pool[p]];

			if (a && (!victim || a->end > victim->end))
				victim = a;
		}
		if (victim && victim->end > cur->end && reg_allowed(cur, victim->reg)) {
			cur->reg = victim->reg;
			active[cur->reg] = cur;
			victim->reg = -1;
			victim->slot = spill_slot(ra);
		} else {
			cur->slot = spill_slot(ra);
		}
	}
	free(order);
	return 0;
}

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

static void lower_one(struct ra *ra, const struct ir_insn *in)
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

static int resolve_jumps(struct ra *ra)
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

int ir_lower(struct ir *ir)
{
	struct ra ra = { .ir = ir, .n = ir->n, .nv = ir->nvregs };
	int err;

	if (ir->err)
		return ir->err;
	if (ir->lowered)
		return 0;
	ra.words = (ra.nv + 63) / 64;
	ra.live = calloc(ra.n * ra.words + 1, sizeof(*ra.live));
	ra.reach = calloc(ra.n + 1, sizeof(*ra.reach));
	ra.label_at = calloc(ir->nlabels + 1, sizeof(*ra.label_at));
	ra.label_pos = calloc(ir->nlabels + 1, sizeof(*ra.label_pos));
	ra.iv = calloc(ra.nv + 1, sizeof(*ra.iv));
	ra.fixes = calloc(ra.n + 1, sizeof(*ra.fixes));
	if (!ra.live || !ra.reach || !ra.label_at || !ra.label_pos || !ra.iv ||
	    !ra.fixes) {
		ir_fail(ir, -ENOMEM, "out of memory");
		goto out;
	}
	err = find_labels(&ra);
	err = err ? : find_reachable(&ra);
	err = err ? : liveness(&ra);
	if (err) {
		ir_fail(ir, err, "out of memory");
		goto out;
	}
	build_intervals(&ra);
	if (linear_scan(&ra)) {
		ir_fail(ir, -ENOMEM, "out of memory");
		goto out;
	}
	ir->stack_size = (unsigned int)(-(ir->sp & ~7)) + 8 * ir->nspilled;
	if (ir->stack_size > BPF_STACK_MAX) {
		ir_fail(ir, -E2BIG, "the program needs %u bytes of stack (%u of "
			"them for %u spilled values); BPF allows %d",
			ir->stack_size, 8 * ir->nspilled, ir->nspilled,
			BPF_STACK_MAX);
		goto out;
	}
	for (size_t i = 0; i < ra.n && !ir->err; i++) {
		ra.cur = (int)i;
		if (ra.reach[i] || ir->in[i].op == IRI_LABEL)
			lower_one(&ra, &ir->in[i]);
	}
	if (!ir->err)
		resolve_jumps(&ra);
	if (!ir->err)
		ir->lowered = true;
out:
	free(ra.live);
	free(ra.reach);
	free(ra.label_at);
	free(ra.label_pos);
	free(ra.iv);
	free(ra.fixes);
	return ir->err;
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
