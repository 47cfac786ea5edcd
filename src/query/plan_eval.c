// SPDX-License-Identifier: MIT
/*
 * The plan's read side: a column or order-by expression computed from a
 * row's key and merged value (plan_eval()), and the integer operators
 * with BPF's semantics (plan_binop()).
 */
#include <errno.h>
#include <string.h>

#include "query/plan.h"

int64_t plan_binop(enum px_op op, int64_t a, int64_t b)
{
	uint64_t ua = (uint64_t)a, ub = (uint64_t)b;

	switch (op) {
	case PX_ADD: return (int64_t)(ua + ub);
	case PX_SUB: return (int64_t)(ua - ub);
	case PX_MUL: return (int64_t)(ua * ub);
	case PX_DIV: return !b ? 0 : b == -1 ? (int64_t)(0 - ua) : a / b;
	case PX_MOD: return !b ? a : b == -1 ? 0 : a % b;
	case PX_AND: return a & b;
	case PX_OR: return a | b;
	case PX_XOR: return a ^ b;
	case PX_SHL: return (int64_t)(ua << (ub & 63));
	case PX_SHR: return (int64_t)(ua >> (ub & 63));
	case PX_EQ: return a == b;
	case PX_NE: return a != b;
	case PX_LT: return a < b;
	case PX_LE: return a <= b;
	case PX_GT: return a > b;
	case PX_GE: return a >= b;
	case PX_LAND: return a && b;
	case PX_LOR: return a || b;
	default: return 0;
	}
}

int plan_eval(const struct plan *p, const struct pexpr *e, const void *key,
	      const void *value, struct plan_val *out)
{
	struct plan_val a, b;
	int err;

	memset(out, 0, sizeof(*out));
	out->type = VT_INT;
	switch (e->op) {
	case PX_CONST:
		out->i = e->val;
		return 0;
	case PX_STR:
		out->type = VT_STR;
		out->s = e->str;
		out->len = e->len;
		return 0;
	case PX_KEY: {
		const struct plan_key *k;
		const unsigned char *kp;

		if (e->idx < 0 || e->idx >= p->nkeys)
			return -EINVAL;
		k = &p->keys[e->idx];
		kp = (const unsigned char *)key + k->offset;
		if (k->e->type == VT_STR) {
			out->type = VT_STR;
			out->s = (const char *)kp;
			out->len = strnlen(out->s, k->size);
		} else {
			memcpy(&out->i, kp, 8);
		}
		return 0;
	}
	case PX_AGG:
		if (e->idx < 0 || e->idx >= p->naggrs)
			return -EINVAL;
		return aggr_final(&p->aggrs[e->idx].desc,
				  (const char *)value + p->aggrs[e->idx].offset,
				  &out->i);
	case PX_NEG:
	case PX_NOT:
	case PX_BNOT:
		err = plan_eval(p, e->a, key, value, &a);
		if (err)
			return err;
		out->i = e->op == PX_NEG ? (int64_t)(0 - (uint64_t)a.i) :
			 e->op == PX_NOT ? !a.i : ~a.i;
		return 0;
	case PX_STREQ:
	case PX_STRNE:
		err = plan_eval(p, e->a, key, value, &a);
		err = err ? : plan_eval(p, e->b, key, value, &b);
		if (err)
			return err;
		out->i = a.len == b.len && !memcmp(a.s, b.s, a.len);
		if (e->op == PX_STRNE)
			out->i = !out->i;
		return 0;
	default:
		if (e->op < PX_ADD || e->op > PX_LOR)
			return -EINVAL;
		err = plan_eval(p, e->a, key, value, &a);
		err = err ? : plan_eval(p, e->b, key, value, &b);
		if (err)
			return err;
		out->i = plan_binop(e->op, a.i, b.i);
		return 0;
	}
}

/* Is e a time span in ns: a duration, an aggregate of one that keeps its
 * unit (sum, min, max, avg, quantile), or a sum or difference of two? */
static bool is_ns(const struct plan *p, const struct pexpr *e, int depth)
{
	if (!e || depth > 32)
		return false;
	switch (e->op) {
	case PX_FIELD:
		return e->field == F_DURATION;
	case PX_LET:
		return e->idx >= 0 && e->idx < p->nlets && is_ns(p, p->lets[e->idx].e, depth + 1);
	case PX_KEY:
		return e->idx >= 0 && e->idx < p->nkeys && is_ns(p, p->keys[e->idx].e, depth + 1);
	case PX_AGG: {
		const struct plan_aggr *a;

		if (e->idx < 0 || e->idx >= p->naggrs)
			return false;
		a = &p->aggrs[e->idx];
		switch (a->desc.kind) {
		case AGGR_SUM: case AGGR_MIN: case AGGR_MAX: case AGGR_AVG: case AGGR_QUANTILE:
			return is_ns(p, a->arg, depth + 1);
		default:
			return false;
		}
	}
	case PX_ADD: case PX_SUB:
		return is_ns(p, e->a, depth + 1) && is_ns(p, e->b, depth + 1);
	default:
		return false;
	}
}

const char *plan_col_unit(const struct plan *p, int col)
{
	const struct plan_col *c;

	if (col < 0 || col >= p->ncols)
		return NULL;
	c = &p->cols[col];
	if (c->type == VT_INT && is_ns(p, c->e, 0))
		return "ns";
	return NULL;
}
