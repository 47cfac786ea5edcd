// SPDX-License-Identifier: MIT
/*
 * FayQL semantic checks, expressions: a type for every expression,
 * constant folding (node_const()), aggregates only where they can run,
 * with constant arguments; function calls and operators.  Names are
 * resolved in sema_names.c, the query's clauses checked in sema.c.
 */
#include <errno.h>
#include <string.h>

#include "common/err.h"
#include "query/query.h"
#include "query/query_int.h"
#include "query/sema_int.h"

static const char *const cx_names[] = {
	[CX_WHERE] = "a where clause", [CX_LET] = "a let",
	[CX_KEY] = "the group key", [CX_SELECT] = "select",
	[CX_ORDER] = "order by", [CX_AGGARG] = "an aggregate's argument",
};

/* The node's source text for messages, shortened. */
const char *sema_text(struct sema *s, const struct node *n)
{
	int len = n->loc.end - n->loc.start;

	if (len > 48)
		return arena_printf(s->a, "%.45s...", s->q->text + n->loc.start);
	return arena_printf(s->a, "%.*s", len, s->q->text + n->loc.start);
}

bool node_const(const struct node *n, int64_t *out)
{
	int64_t a, b;
	uint64_t ua, ub;

	switch (n->kind) {
	case N_INT:
		if (n->ival > INT64_MAX)
			return false;
		*out = (int64_t)n->ival;
		return true;
	case N_UNARY:
		if (!node_const(n->a, &a))
			return false;
		ua = (uint64_t)a;
		*out = n->op == T_MINUS ? (int64_t)(0 - ua) :
		       n->op == T_BANG ? !a : (int64_t)~ua;
		return true;
	case N_BINARY:
		if (!node_const(n->a, &a) || !node_const(n->b, &b))
			return false;
		ua = (uint64_t)a;
		ub = (uint64_t)b;
		switch (n->op) {
		case T_PLUS: *out = (int64_t)(ua + ub); break;
		case T_MINUS: *out = (int64_t)(ua - ub); break;
		case T_STAR: *out = (int64_t)(ua * ub); break;
		/* BPF semantics: x / 0 = 0, x % 0 = x; INT64_MIN / -1 wraps */
		case T_SLASH: *out = !b ? 0 : (b == -1 ? (int64_t)(0 - ua) : a / b); break;
		case T_PERCENT: *out = !b ? a : (b == -1 ? 0 : a % b); break;
		case T_AMP: *out = a & b; break;
		case T_PIPE: *out = a | b; break;
		case T_CARET: *out = a ^ b; break;
		case T_SHL: *out = (int64_t)(ua << (ub & 63)); break;
		case T_SHR: *out = (int64_t)(ua >> (ub & 63)); break;
		case T_EQ: *out = a == b; break;
		case T_NE: *out = a != b; break;
		case T_LT: *out = a < b; break;
		case T_LE: *out = a <= b; break;
		case T_GT: *out = a > b; break;
		case T_GE: *out = a >= b; break;
		case T_ANDAND: *out = a && b; break;
		case T_OROR: *out = a || b; break;
		default: return false;
		}
		return true;
	default:
		return false;
	}
}

/* n must be an integer for 'what'. */
int sema_need_int(struct sema *s, const struct node *n, const char *what)
{
	if (n->type == VT_INT)
		return 0;
	if (n->kind == N_STR)
		return query_errorf(s->q, &n->loc,
				    "a string literal is only allowed in == and != comparisons");
	if (n->type == VT_DIST)
		return query_errorf(s->q, &n->loc,
				    "'%s' is a distribution; it can only be a select column on its own",
				    sema_text(s, n));
	return query_errorf(s->q, &n->loc, "'%s' is a string; %s needs an integer",
			    sema_text(s, n), what);
}

/* n must be a value: an integer or a string that is not a literal. */
int sema_need_value(struct sema *s, const struct node *n, const char *what)
{
	if (n->type == VT_STR && n->kind != N_STR)
		return 0;
	return sema_need_int(s, n, what);
}

void sema_inherit(struct node *n, const struct node *c)
{
	n->needs_exit |= c->needs_exit;
	n->has_aggr |= c->has_aggr;
	n->per_event |= c->per_event;
}

static const char *aggr_usage(enum aggr_kind k)
{
	switch (k) {
	case AGGR_COUNT: return "count() takes no arguments";
	case AGGR_LHIST: return "lhist() takes four arguments: lhist(EXPR, LO, HI, STEP)";
	case AGGR_QUANTILE: return "quantile() takes two arguments: quantile(EXPR, P) with 0 < P < 1";
	default: return NULL;
	}
}

/* Whether two aggregate calls have the same arguments, as written. */
static bool same_args(const struct sema *s, const struct node *x,
		      const struct node *y)
{
	if (x->nargs != y->nargs)
		return false;
	for (int i = 0; i < x->nargs; i++) {
		const struct loc *a = &x->args[i]->loc, *b = &y->args[i]->loc;

		if (a->end - a->start != b->end - b->start ||
		    memcmp(s->q->text + a->start, s->q->text + b->start,
			   a->end - a->start))
			return false;
	}
	return true;
}

static int check_aggr(struct sema *s, struct node *n, enum cx cx, enum aggr_kind k)
{
	static const int arity[AGGR_NKINDS] = {
		[AGGR_COUNT] = 0, [AGGR_SUM] = 1, [AGGR_MIN] = 1, [AGGR_MAX] = 1,
		[AGGR_AVG] = 1, [AGGR_HIST] = 1, [AGGR_LHIST] = 4,
		[AGGR_QUANTILE] = 2, [AGGR_DISTINCT] = 1,
	};
	int64_t c[4] = { 0 };
	double p = 0;
	struct aggr_desc d;

	if (cx == CX_AGGARG)
		return query_errorf(s->q, &n->loc,
				    "aggregates cannot be nested: '%s' is inside another aggregate",
				    sema_text(s, n));
	if (cx != CX_SELECT && cx != CX_ORDER)
		return query_errorf(s->q, &n->loc,
				    "aggregate '%s' is not allowed in %s: aggregates belong in select or order by (where, let and the group key run once per event)",
				    sema_text(s, n), cx_names[cx]);
	if (n->nargs != arity[k]) {
		const char *u = aggr_usage(k);

		if (u)
			return query_errorf(s->q, &n->loc, "%s", u);
		return query_errorf(s->q, &n->loc,
				    "%s() takes one argument: %s(EXPR)",
				    aggr_name(k), aggr_name(k));
	}
	if (arity[k]) {
		struct node *e = n->args[0];

		TRY(sema_check_expr(s, e, CX_AGGARG));
		if (k == AGGR_DISTINCT)
			TRY(sema_need_value(s, e, "distinct()"));
		else
			TRY(sema_need_int(s, e, arena_printf(s->a, "%s()", aggr_name(k))));
		n->needs_exit = e->needs_exit;
	}
	if (k == AGGR_LHIST) {
		static const char *const what[] = { NULL, "LO", "HI", "STEP" };

		for (int i = 1; i < 4; i++) {
			TRY(sema_check_expr(s, n->args[i], CX_AGGARG));
			if (!node_const(n->args[i], &c[i]))
				return query_errorf(s->q, &n->args[i]->loc,
						    "lhist's %s must be a constant integer",
						    what[i]);
		}
		if (c[1] >= c[2])
			return query_errorf(s->q, &n->args[1]->loc,
					    "lhist needs LO < HI (got LO %lld, HI %lld)",
					    (long long)c[1], (long long)c[2]);
		if (c[3] <= 0)
			return query_errorf(s->q, &n->args[3]->loc,
					    "lhist's STEP must be positive (got %lld)",
					    (long long)c[3]);
		if (aggr_desc_init(&d, k, c[1], c[2], c[3], 0))
			return query_errorf(s->q, &n->args[3]->loc,
					    "lhist from %lld to %lld by %lld would need more than %d buckets; use a larger STEP",
					    (long long)c[1], (long long)c[2],
					    (long long)c[3], AGGR_LHIST_MAX);
	} else if (k == AGGR_QUANTILE) {
		struct node *pn = n->args[1];
		int64_t iv;

		if (pn->kind == N_FLOAT)
			p = pn->fval;
		else if (node_const(pn, &iv))
			p = (double)iv;
		else
			return query_errorf(s->q, &pn->loc,
					    "quantile's P must be a constant fraction such as 0.99");
		if (!(p > 0 && p < 1))
			return query_errorf(s->q, &pn->loc,
					    "quantile's P must be between 0 and 1, exclusive (e.g. 0.5, 0.99); got %s",
					    sema_text(s, pn));
		aggr_desc_init(&d, k, 0, 0, 0, p);
	} else {
		aggr_desc_init(&d, k, 0, 0, 0, 0);
	}
	/* The same aggregate written twice (g.count() in select and in
	 * order by, or count() and g.count()) is computed once. */
	for (int i = 0; i < s->naggrs; i++)
		if (s->adesc[i].kind == k && same_args(s, s->aggrs[i], n)) {
			n->sem = S_AGGR;
			n->idx = i;
			n->type = s->aggrs[i]->type;
			n->has_aggr = true;
			n->per_event = false;
			return 0;
		}
	if (s->naggrs == MAX_AGGRS)
		return query_errorf(s->q, &n->loc, "too many aggregates (at most %d)",
				    MAX_AGGRS);
	n->sem = S_AGGR;
	n->idx = s->naggrs;
	s->aggrs[s->naggrs] = n;
	s->adesc[s->naggrs++] = d;
	n->type = k == AGGR_HIST || k == AGGR_LHIST ? VT_DIST : VT_INT;
	n->has_aggr = true;
	n->per_event = false;
	return 0;
}

static const char functions_list[] =
	"str, count, sum, min, max, avg, hist, lhist, quantile, distinct";

static int check_call(struct sema *s, struct node *n, enum cx cx)
{
	const struct ast_query *aq = s->aq;
	int k = aggr_lookup(n->name);

	if (!n->a) {
		if (k >= 0)
			return check_aggr(s, n, cx, k);
		if (!strcmp(n->name, "str")) {
			/* the VM's user-memory reads would read the agent's
			 * own memory: a span has no addresses to follow */
			if (aq->src.kind == SRC_SPANS)
				return query_errorf(s->q, &n->loc,
						    "str() reads a string at an address; spans have none (their strings are fields: %s.name, %s.tag(\"KEY\"))",
						    aq->var, aq->var);
			if (n->nargs != 1)
				return query_errorf(s->q, &n->loc,
						    "str() takes one argument: the address of a string");
			TRY(sema_check_expr(s, n->args[0], cx));
			if (n->args[0]->type == VT_STR && n->args[0]->kind != N_STR)
				return query_errorf(s->q, &n->args[0]->loc,
						    "'%s' is already a string; str() reads a string at an address",
						    sema_text(s, n->args[0]));
			TRY(sema_need_int(s, n->args[0], "str()"));
			sema_inherit(n, n->args[0]);
			n->sem = S_STRREAD;
			n->type = VT_STR;
			n->strsize = QUERY_STR_MAX;
			return 0;
		}
		if (!strcmp(n->name, "arg"))
			return query_errorf(s->q, &n->loc,
					    "arg is a field of the event: write %s.arg(N)",
					    aq->var);
		return query_errorf(s->q, &n->loc, "unknown function '%s' (functions: %s)",
				    n->name, functions_list);
	}
	if (n->a->kind == N_IDENT && !strcmp(n->a->name, aq->var)) {
		if (!strcmp(n->name, "arg"))
			return sema_check_arg(s, n);
		if (!strcmp(n->name, "tag"))
			return sema_check_tag(s, n);
		if (!strcmp(n->name, "kstack") || !strcmp(n->name, "ustack"))
			return sema_check_stack(s, n);
		if (k >= 0)
			return query_errorf(s->q, &n->loc,
					    "aggregates are called on the group (%s.%s(...)) or free (%s(...)), not on the event '%s'",
					    aq->group ? aq->group->into : "g", n->name,
					    n->name, aq->var);
		if (aq->src.kind == SRC_SPANS)
			return query_errorf(s->q, &n->loc,
					    "unknown method '%s' on the span '%s' (it has %s.tag(\"KEY\") and fields)",
					    n->name, aq->var, aq->var);
		return query_errorf(s->q, &n->loc,
				    "unknown method '%s' on the event '%s' (it has %s.arg(N) and fields)",
				    n->name, aq->var, aq->var);
	}
	if (aq->group && n->a->kind == N_IDENT && !strcmp(n->a->name, aq->group->into)) {
		if (k >= 0)
			return check_aggr(s, n, cx, k);
		return query_errorf(s->q, &n->loc,
				    "unknown aggregate '%s' on the group '%s' (aggregates: count, sum, min, max, avg, hist, lhist, quantile, distinct)",
				    n->name, aq->group->into);
	}
	return query_errorf(s->q, &n->loc, "'%s' has no method '%s'",
			    sema_text(s, n->a), n->name);
}

static bool is_cmp(enum tok_kind op)
{
	return op == T_EQ || op == T_NE || op == T_LT || op == T_LE ||
	       op == T_GT || op == T_GE;
}

static int check_binary(struct sema *s, struct node *n, enum cx cx)
{
	struct node *l = n->a, *r = n->b;
	const char *what = arena_printf(s->a, "operator '%s'", op_str(n->op));

	TRY(sema_check_expr(s, l, cx));
	TRY(sema_check_expr(s, r, cx));
	sema_inherit(n, l);
	sema_inherit(n, r);
	n->type = VT_INT;
	if ((l->type == VT_STR || r->type == VT_STR) && is_cmp(n->op)) {
		struct node *lit = l->kind == N_STR ? l : r->kind == N_STR ? r : NULL;
		struct node *val = lit == l ? r : l;

		if (n->op != T_EQ && n->op != T_NE)
			return query_errorf(s->q, &n->loc,
					    "strings compare only with == and !=");
		if (val->type == VT_DIST)
			return sema_need_int(s, val, what);
		if (l->type != r->type) {
			struct node *num = l->type == VT_INT ? l : r;

			return query_errorf(s->q, &num->loc,
					    "cannot compare the integer '%s' with a string: only strings (comm, host, str(...), char[] tracepoint fields) compare with strings",
					    sema_text(s, num));
		}
		if (!lit)
			return query_errorf(s->q, &n->loc,
					    "strings compare only with a string literal, e.g. %s == \"bash\"",
					    sema_text(s, l));
		if (val->kind == N_STR)
			return query_errorf(s->q, &n->loc,
					    "comparing two string literals; compare a field such as %s.comm",
					    s->aq->var);
		if (lit->len >= (size_t)val->strsize)
			return query_errorf(s->q, &lit->loc,
					    "string literal is %zu bytes, longer than '%s' can hold (%d bytes with its NUL)",
					    lit->len, sema_text(s, val), val->strsize);
		return 0;
	}
	TRY(sema_need_int(s, l, what));
	TRY(sema_need_int(s, r, what));
	if (n->op == T_SLASH || n->op == T_PERCENT) {
		int64_t c;

		if (node_const(r, &c) && c == 0)
			return query_errorf(s->q, &r->loc, "division by zero");
	}
	return 0;
}

int sema_check_expr(struct sema *s, struct node *n, enum cx cx)
{
	switch (n->kind) {
	case N_INT:
		if (n->ival > INT64_MAX)
			return query_errorf(s->q, &n->loc,
					    "integer %llu does not fit in a signed 64-bit value",
					    (unsigned long long)n->ival);
		n->type = VT_INT;
		return 0;
	case N_FLOAT:
		return query_errorf(s->q, &n->loc,
				    "a fraction such as %s is only allowed as quantile's P (arithmetic is 64-bit integer)",
				    sema_text(s, n));
	case N_STR:
		n->type = VT_STR;
		n->strsize = (int)n->len + 1;
		return 0;
	case N_IDENT:
		return sema_check_ident(s, n, cx);
	case N_MEMBER:
		return sema_check_member(s, n, cx);
	case N_CALL:
		return check_call(s, n, cx);
	case N_UNARY:
		TRY(sema_check_expr(s, n->a, cx));
		TRY(sema_need_int(s, n->a, arena_printf(s->a, "operator '%s'",
							op_str(n->op))));
		sema_inherit(n, n->a);
		n->type = VT_INT;
		return 0;
	case N_BINARY:
		return check_binary(s, n, cx);
	}
	return -EINVAL;
}
