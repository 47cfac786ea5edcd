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
 *
 * This file: the analysis, the allocation and ir_lower(), which drives
 * every step; the BPF itself is emitted by regalloc_emit.c (what they
 * share is in regalloc_int.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/regalloc_int.h"
#include "bpf/load.h"
#include "common/err.h"

#define NPHYS 11

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
			ra_lower_one(&ra, &ir->in[i]);
	}
	if (!ir->err)
		ra_resolve_jumps(&ra);
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
