// SPDX-License-Identifier: MIT
/*
 * Code generation of expressions: conditions (compiled to jumps, with
 * && and || short-circuited) and integers (BPF's signed division rules).
 */
#include <string.h>

#include "engine/codegen.h"

/* ---- conditions ------------------------------------------------------------ */

static int negate_jmp(int op)
{
	switch (op) {
	case BPF_JEQ: return BPF_JNE;
	case BPF_JNE: return BPF_JEQ;
	case BPF_JSLT: return BPF_JSGE;
	case BPF_JSGE: return BPF_JSLT;
	case BPF_JSLE: return BPF_JSGT;
	case BPF_JSGT: return BPF_JSLE;
	}
	return op;
}

static int cmp_jmp(enum px_op op)
{
	switch (op) {
	case PX_EQ: return BPF_JEQ;
	case PX_NE: return BPF_JNE;
	case PX_LT: return BPF_JSLT;
	case PX_LE: return BPF_JSLE;
	case PX_GT: return BPF_JSGT;
	case PX_GE: return BPF_JSGE;
	default: return -1;
	}
}

/* A constant (a literal, or - ~ ! of one: "-3" parses as a negation). */
static bool px_const(const struct pexpr *x, int64_t *v)
{
	int64_t a;

	switch (x->op) {
	case PX_CONST:
		*v = x->val;
		return true;
	case PX_NEG:
	case PX_BNOT:
	case PX_NOT:
		if (!px_const(x->a, &a))
			return false;
		*v = x->op == PX_NEG ? (int64_t)(0 - (uint64_t)a) :
		     x->op == PX_BNOT ? ~a : !a;
		return true;
	default:
		return false;
	}
}

/* A second operand: a constant stays an immediate. */
static struct ir_opnd cg_opnd(struct cg *g, const struct pexpr *x)
{
	int64_t v;

	if (px_const(x, &v))
		return IR_I(v);
	return IR_R(cg_int(g, x));
}

/* String (in)equality with a literal: compares the literal's bytes and
 * its NUL, 8 at a time. */
static void cg_streq(struct cg *g, const struct pexpr *x, int label, bool jump_if)
{
	struct ir *ir = g->ir;
	const struct pexpr *s = x->a, *lit = x->b;
	bool want_equal = jump_if == (x->op == PX_STREQ);
	int size = round8(s->size), slot, n = (int)lit->len + 1;
	ir_reg w;

	if (lit->op != PX_STR) {
		cg_qfail(g, x, "internal: a string is compared with a non-literal");
		return;
	}
	if (n > s->size) {		/* cannot be equal */
		if (!want_equal)
			ir_goto(ir, label);
		return;
	}
	if (s->op == PX_FIELD && s->field == F_HOST) {
		/* a constant: decided here, as the stored bytes would be */
		char h[QUERY_STR_MAX + 1] = { 0 };
		bool equal;

		memcpy(h, g->e->host, strnlen(g->e->host, QUERY_STR_MAX));
		equal = !memcmp(h, lit->str, lit->len) && !h[lit->len];
		if (equal == want_equal)
			ir_goto(ir, label);
		return;
	}
	slot = ir_stack_alloc(ir, (unsigned)size, 8);
	cg_str(g, s, slot, size);
	cg_pos(g, x);
	w = ir_vreg(ir);
	{
		int differ = want_equal ? ir_label_new(ir) : label;

		for (int i = 0; i < n; i += 8) {
			uint64_t c = 0, mask = ~0ull;
			int nb = n - i < 8 ? n - i : 8;

			for (int j = 0; j < nb; j++)
				c |= (uint64_t)(unsigned char)(i + j < (int)lit->len ?
							       lit->str[i + j] : 0) << (8 * j);
			ir_load(ir, w, IR_S(slot), i, 8, 0);
			if (nb < 8) {
				mask = (1ull << (8 * nb)) - 1;
				ir_alu(ir, BPF_AND, w, IR_I((int64_t)mask));
			}
			ir_jmp(ir, BPF_JNE, w, IR_I((int64_t)c), differ);
		}
		if (want_equal) {
			ir_goto(ir, label);
			ir_label(ir, differ);
		}
	}
}

/* Jump to label when the truth of x is jump_if; fall through otherwise. */
void cg_cond(struct cg *g, const struct pexpr *x, int label, bool jump_if)
{
	struct ir *ir = g->ir;
	int skip, op;

	switch (x->op) {
	case PX_LAND:
	case PX_LOR: {
		bool is_and = x->op == PX_LAND;

		if (is_and != jump_if) {	/* AND jumping on false, OR on true */
			cg_cond(g, x->a, label, jump_if);
			cg_cond(g, x->b, label, jump_if);
			return;
		}
		skip = ir_label_new(ir);
		cg_cond(g, x->a, skip, !jump_if);
		cg_cond(g, x->b, label, jump_if);
		ir_label(ir, skip);
		return;
	}
	case PX_NOT:
		cg_cond(g, x->a, label, !jump_if);
		return;
	case PX_STREQ:
	case PX_STRNE:
		cg_streq(g, x, label, jump_if);
		return;
	case PX_CONST:
		if (!!x->val == jump_if)
			ir_goto(ir, label);
		return;
	default:
		break;
	}
	op = cmp_jmp(x->op);
	if (op >= 0) {
		ir_reg a = cg_int(g, x->a);
		struct ir_opnd b = cg_opnd(g, x->b);

		cg_pos(g, x);
		ir_jmp(ir, jump_if ? op : negate_jmp(op), a, b, label);
		return;
	}
	{
		ir_reg r = cg_int(g, x);

		ir_jmp(ir, jump_if ? BPF_JNE : BPF_JEQ, r, IR_I(0), label);
	}
}

/* ---- integers ---------------------------------------------------------------- */

/* a = a / b or a % b, signed with BPF's rules (x / 0 = 0, x % 0 = x),
 * on BPF's unsigned division: divide the magnitudes, then fix the sign. */
static void cg_sdiv(struct cg *g, ir_reg a, struct ir_opnd b, bool mod)
{
	struct ir *ir = g->ir;
	ir_reg sa = ir_vreg(ir), sb = ir_vreg(ir), ub;
	bool bpos = b.kind == IR_O_IMM && b.imm > 0;

	ir_mov(ir, sa, IR_R(a));
	ir_alu(ir, BPF_ARSH, sa, IR_I(63));
	ir_alu(ir, BPF_XOR, a, IR_R(sa));
	ir_alu(ir, BPF_SUB, a, IR_R(sa));	/* |a| */
	if (bpos) {
		ir_alu(ir, mod ? BPF_MOD : BPF_DIV, a, b);
		ir_mov(ir, sb, IR_R(sa));
	} else {
		ub = ir_vreg(ir);
		ir_mov(ir, ub, b);
		ir_mov(ir, sb, IR_R(ub));
		ir_alu(ir, BPF_ARSH, sb, IR_I(63));
		ir_alu(ir, BPF_XOR, ub, IR_R(sb));
		ir_alu(ir, BPF_SUB, ub, IR_R(sb));	/* |b| */
		ir_alu(ir, mod ? BPF_MOD : BPF_DIV, a, IR_R(ub));
		if (mod)
			ir_mov(ir, sb, IR_R(sa));	/* sign of the dividend */
		else
			ir_alu(ir, BPF_XOR, sb, IR_R(sa));	/* signs differ */
	}
	ir_alu(ir, BPF_XOR, a, IR_R(sb));
	ir_alu(ir, BPF_SUB, a, IR_R(sb));
}

static ir_reg cg_binop(struct cg *g, const struct pexpr *x)
{
	struct ir *ir = g->ir;
	ir_reg a = cg_int(g, x->a);
	struct ir_opnd b = cg_opnd(g, x->b);
	static const int alu[] = {
		[PX_ADD] = BPF_ADD, [PX_SUB] = BPF_SUB, [PX_MUL] = BPF_MUL,
		[PX_AND] = BPF_AND, [PX_OR] = BPF_OR, [PX_XOR] = BPF_XOR,
		[PX_SHL] = BPF_LSH, [PX_SHR] = BPF_RSH,
	};

	cg_pos(g, x);
	switch (x->op) {
	case PX_DIV:
	case PX_MOD:
		cg_sdiv(g, a, b, x->op == PX_MOD);
		return a;
	case PX_SHL:
	case PX_SHR:
		if (b.kind == IR_O_IMM)
			b.imm &= 63;
		else
			ir_alu(ir, BPF_AND, b.reg, IR_I(63));
		/* fall through */
	default:
		ir_alu(ir, alu[x->op], a, b);
		return a;
	}
}

ir_reg cg_int(struct cg *g, const struct pexpr *x)
{
	struct ir *ir = g->ir;
	ir_reg r;

	int64_t v;

	cg_pos(g, x);
	if (px_const(x, &v))
		return cg_imm(g, v);
	switch (x->op) {
	case PX_FIELD:
		return cg_field(g, x);
	case PX_ARG:
		return cg_arg(g, x->idx, x);
	case PX_SAVED:
		r = ir_vreg(ir);
		ir_mov(ir, r, IR_R(g->saved[x->idx]));
		return r;
	case PX_TPFIELD:
		return cg_tpfield(g, x);
	case PX_LET:
		r = ir_vreg(ir);
		if (g->let_slot[x->idx])
			cg_qfail(g, x, "internal: a string let used as an integer");
		else
			ir_mov(ir, r, IR_R(g->let_reg[x->idx]));
		return r;
	case PX_NEG:
		r = cg_int(g, x->a);
		ir_alu(ir, BPF_NEG, r, IR_I(0));
		return r;
	case PX_BNOT:
		r = cg_int(g, x->a);
		ir_alu(ir, BPF_XOR, r, IR_I(-1));
		return r;
	case PX_ADD: case PX_SUB: case PX_MUL: case PX_DIV: case PX_MOD:
	case PX_AND: case PX_OR: case PX_XOR: case PX_SHL: case PX_SHR:
		return cg_binop(g, x);
	case PX_EQ: case PX_NE: case PX_LT: case PX_LE: case PX_GT: case PX_GE:
	case PX_LAND: case PX_LOR: case PX_NOT: case PX_STREQ: case PX_STRNE: {
		int f = ir_label_new(ir);

		r = ir_vreg(ir);
		ir_mov(ir, r, IR_I(0));
		cg_cond(g, x, f, false);
		ir_mov(ir, r, IR_I(1));
		ir_label(ir, f);
		return r;
	}
	default:
		r = ir_vreg(ir);
		cg_qfail(g, x, "this expression cannot be computed in a probe");
		return r;
	}
}
