// SPDX-License-Identifier: MIT
/*
 * FayQL semantic checks: resolve every name (fields of the source, lets,
 * the group), give every expression a type (64-bit integer, string,
 * distribution), put aggregates only where they can run, check constant
 * arguments and options, and recognise Fay's time-limit form
 * 'where X.time < now + D'.  Errors point at the AST node.
 */
#include <errno.h>
#include <string.h>

#include "common/err.h"
#include "query/query.h"
#include "query/query_int.h"

#define MAX_AGGRS	QUERY_MAX_AGGRS

enum cx { CX_WHERE, CX_LET, CX_KEY, CX_SELECT, CX_ORDER, CX_AGGARG };

static const char *const cx_names[] = {
	[CX_WHERE] = "a where clause", [CX_LET] = "a let",
	[CX_KEY] = "the group key", [CX_SELECT] = "select",
	[CX_ORDER] = "order by", [CX_AGGARG] = "an aggregate's argument",
};

struct sema {
	struct query *q;
	struct ast_query *aq;
	struct arena *a;
	int nlets;		/* lets visible so far */
	struct node *aggrs[MAX_AGGRS];
	struct aggr_desc adesc[MAX_AGGRS];
	int naggrs;
};

#define TRY(x) do { int _e = (x); if (_e) return _e; } while (0)

#define M(k)		(1u << (k))
#define M_PROBES	(M(SRC_SYSCALL) | M(SRC_TRACEPOINT) | M(SRC_KFUNC) | \
			 M(SRC_UFUNC) | M(SRC_PFUNC) | M(SRC_USDT) | M(SRC_PROFILE))
#define M_EXIT		(M(SRC_SYSCALL) | M(SRC_KFUNC) | M(SRC_UFUNC) | M(SRC_PFUNC))
#define M_ALL		(M_PROBES | M(SRC_SPANS))

static const struct {
	const char *name;
	enum field_id id;
	enum vtype type;
	int strsize;
	unsigned srcs;
} fields[] = {
	{ "time",      F_TIME,      VT_INT, 0, M_ALL },
	{ "pid",       F_PID,       VT_INT, 0, M_ALL },
	{ "tid",       F_TID,       VT_INT, 0, M_PROBES },
	{ "comm",      F_COMM,      VT_STR, QUERY_COMM_LEN, M_PROBES },
	{ "cpu",       F_CPU,       VT_INT, 0, M_PROBES },
	{ "uid",       F_UID,       VT_INT, 0, M_PROBES },
	{ "ret",       F_RET,       VT_INT, 0, M_EXIT },
	{ "duration",  F_DURATION,  VT_INT, 0, M_EXIT | M(SRC_SPANS) },
	{ "host",      F_HOST,      VT_STR, QUERY_STR_MAX, M_ALL },
	{ "name",      F_NAME,      VT_STR, QUERY_STR_MAX, M(SRC_SPANS) },
	{ "service",   F_SERVICE,   VT_STR, QUERY_STR_MAX, M(SRC_SPANS) },
	{ "trace_id",  F_TRACE_ID,  VT_INT, 0, M(SRC_SPANS) | M(SRC_UFUNC) | M(SRC_PFUNC) },
	{ "span_name", F_SPAN_NAME, VT_STR, QUERY_STR_MAX, M(SRC_UFUNC) | M(SRC_PFUNC) },
	{ "span_id",   F_SPAN_ID,   VT_INT, 0, M(SRC_SPANS) },
	{ "parent_id", F_PARENT_ID, VT_INT, 0, M(SRC_SPANS) },
	{ "kind",      F_KIND,      VT_STR, 16, M(SRC_SPANS) },
	{ "error",     F_ERROR,     VT_INT, 0, M(SRC_SPANS) },
};

const char *field_name(enum field_id f)
{
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (fields[i].id == f)
			return fields[i].name;
	return "?";
}

const char *src_kind_name(enum src_kind k)
{
	static const char *const n[] = {
		[SRC_SYSCALL] = "syscall", [SRC_TRACEPOINT] = "tracepoint",
		[SRC_KFUNC] = "kernel.function", [SRC_UFUNC] = "function",
		[SRC_PFUNC] = "process().function", [SRC_USDT] = "usdt",
		[SRC_SPANS] = "spans", [SRC_PROFILE] = "profile",
	};
	return n[k];
}

/* The node's source text for messages, shortened. */
static const char *text(struct sema *s, const struct node *n)
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

static int check_expr(struct sema *s, struct node *n, enum cx cx);

/* n must be an integer for 'what'. */
static int need_int(struct sema *s, const struct node *n, const char *what)
{
	if (n->type == VT_INT)
		return 0;
	if (n->kind == N_STR)
		return query_errorf(s->q, &n->loc,
				    "a string literal is only allowed in == and != comparisons");
	if (n->type == VT_DIST)
		return query_errorf(s->q, &n->loc,
				    "'%s' is a distribution; it can only be a select column on its own",
				    text(s, n));
	return query_errorf(s->q, &n->loc, "'%s' is a string; %s needs an integer",
			    text(s, n), what);
}

/* n must be a value: an integer or a string that is not a literal. */
static int need_value(struct sema *s, const struct node *n, const char *what)
{
	if (n->type == VT_STR && n->kind != N_STR)
		return 0;
	return need_int(s, n, what);
}

static void inherit(struct node *n, const struct node *c)
{
	n->needs_exit |= c->needs_exit;
	n->has_aggr |= c->has_aggr;
	n->per_event |= c->per_event;
}

static int list_fields(struct sema *s, char *buf, size_t cap)
{
	const struct ast_source *src = &s->aq->src;
	size_t n = 0;

	buf[0] = '\0';
	if (src->tp)
		for (int i = 0; i < src->tp->nfields && n < cap; i++)
			if (strncmp(src->tp->fields[i].name, "common_", 7))
				n += snprintf(buf + n, cap - n, "%s, ",
					      src->tp->fields[i].name);
	for (size_t i = 0; i < ARRAY_SIZE(fields) && n < cap; i++) {
		if (!(fields[i].srcs & M(src->kind)) ||
		    (src->tp && tp_field_find(src->tp, fields[i].name)))
			continue;
		n += snprintf(buf + n, cap - n, "%s, ", fields[i].name);
		if (fields[i].id == F_UID && (M(src->kind) & (M_EXIT | M(SRC_USDT))))
			n += snprintf(buf + n, cap - n, "arg(N), ");
	}
	if (n >= 2 && n < cap)
		buf[n - 2] = '\0';
	return 0;
}

static int check_field(struct sema *s, struct node *n)
{
	const struct ast_source *src = &s->aq->src;
	char list[512];

	if (src->tp) {
		const struct tp_field *f = tp_field_find(src->tp, n->name);

		if (f) {
			if (f->is_array)
				return query_errorf(s->q, &n->loc,
						    "tracepoint field '%s' is an array (%s); only integers and char arrays (strings) can be used",
						    f->name, f->ctype);
			/* tp_prog_is_valid_access() refuses the first 8 bytes */
			if (f->offset < 8)
				return query_errorf(s->q, &n->loc,
						    "tracepoint field '%s' (offset %d) is in the record's common header, which the kernel does not let BPF programs read; use %s.pid, %s.tid or %s.comm",
						    f->name, f->offset, s->aq->var, s->aq->var,
						    s->aq->var);
			n->sem = S_TPFIELD;
			n->tpf = f;
			n->per_event = true;
			if (f->is_string) {
				n->type = VT_STR;
				n->strsize = f->data_loc || f->size > QUERY_STR_MAX ?
					     QUERY_STR_MAX : f->size;
			} else {
				n->type = VT_INT;
			}
			return 0;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		if (strcmp(fields[i].name, n->name))
			continue;
		if (!(fields[i].srcs & M(src->kind))) {
			if ((fields[i].srcs & M_EXIT) && !(fields[i].srcs & M(SRC_TRACEPOINT)))
				return query_errorf(s->q, &n->loc,
						    "'%s' needs a source with an exit (syscall, kernel.function, function, process(PID).function); %s has none",
						    n->name, src_kind_name(src->kind));
			list_fields(s, list, sizeof(list));
			return query_errorf(s->q, &n->loc,
					    "field '%s' is not available on %s (fields: %s)",
					    n->name, src_kind_name(src->kind), list);
		}
		n->sem = S_FIELD;
		n->field = fields[i].id;
		n->type = fields[i].type;
		n->strsize = fields[i].strsize;
		n->per_event = true;
		n->needs_exit = n->field == F_RET ||
				(n->field == F_DURATION && src->kind != SRC_SPANS);
		return 0;
	}
	if (!strcmp(n->name, "arg"))
		return query_errorf(s->q, &n->loc, "'arg' takes an index: %s.arg(N)",
				    s->aq->var);
	list_fields(s, list, sizeof(list));
	if (src->tp)
		return query_errorf(s->q, &n->loc,
				    "unknown field '%s' for tracepoint '%s' (fields: %s)",
				    n->name, src->arg, list);
	return query_errorf(s->q, &n->loc, "unknown field '%s' (fields of %s: %s)",
			    n->name, src_kind_name(src->kind), list);
}

static int check_arg(struct sema *s, struct node *n)
{
	const struct ast_source *src = &s->aq->src;
	int64_t i;
	int max = src->kind == SRC_USDT ? 11 : 5;

	switch (src->kind) {
	case SRC_TRACEPOINT: {
		char list[512];

		list_fields(s, list, sizeof(list));
		return query_errorf(s->q, &n->loc,
				    "tracepoints have named fields, not arguments: use %s.NAME (fields: %s)",
				    s->aq->var, list);
	}
	case SRC_PROFILE:
	case SRC_SPANS:
		return query_errorf(s->q, &n->loc, "%s events have no arguments",
				    src_kind_name(src->kind));
	default:
		break;
	}
	if (n->nargs != 1)
		return query_errorf(s->q, &n->loc,
				    "arg() takes one constant index: %s.arg(N)", s->aq->var);
	if (!node_const(n->args[0], &i))
		return query_errorf(s->q, &n->args[0]->loc,
				    "the index of arg() must be a constant integer");
	if (i < 0 || i > max) {
		if (src->kind == SRC_USDT)
			return query_errorf(s->q, &n->args[0]->loc,
					    "arg(%lld) is out of range: USDT probes have at most 12 arguments, arg(0)..arg(11)",
					    (long long)i);
		return query_errorf(s->q, &n->args[0]->loc,
				    "arg(%lld) is out of range: a probe reads the six register arguments arg(0)..arg(5) (the calling convention passes the first six in registers; later ones are on the stack, where probes cannot name them)",
				    (long long)i);
	}
	n->sem = S_ARG;
	n->ival = (uint64_t)i;
	n->type = VT_INT;
	n->per_event = true;
	return 0;
}

/* sp.tag("KEY") of a spans(...) event: a string, "" when absent. */
static int check_tag(struct sema *s, struct node *n)
{
	struct ast_query *aq = s->aq;
	const struct node *k = n->nargs == 1 ? n->args[0] : NULL;
	int i;

	if (aq->src.kind != SRC_SPANS)
		return query_errorf(s->q, &n->loc,
				    "tag() is a method of spans(...) events; %s events have no tags",
				    src_kind_name(aq->src.kind));
	if (!k || k->kind != N_STR)
		return query_errorf(s->q, &n->loc,
				    "tag() takes one constant string: %s.tag(\"KEY\")", aq->var);
	if (!k->len || k->len >= QUERY_STR_MAX || memchr(k->str, '\0', k->len))
		return query_errorf(s->q, &k->loc,
				    "a tag key is 1 to %d bytes, with no NUL", QUERY_STR_MAX - 1);
	for (i = 0; i < aq->ntags; i++)
		if (!strcmp(aq->tags[i], k->str))
			break;
	if (i == aq->ntags) {
		if (aq->ntags == QUERY_MAX_TAGS)
			return query_errorf(s->q, &k->loc,
					    "a query names at most %d tag keys", QUERY_MAX_TAGS);
		aq->tags[aq->ntags++] = k->str;
	}
	n->sem = S_TAG;
	n->idx = i;
	n->type = VT_STR;
	n->strsize = QUERY_STR_MAX;
	n->per_event = true;
	return 0;
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
				    text(s, n));
	if (cx != CX_SELECT && cx != CX_ORDER)
		return query_errorf(s->q, &n->loc,
				    "aggregate '%s' is not allowed in %s: aggregates belong in select or order by (where, let and the group key run once per event)",
				    text(s, n), cx_names[cx]);
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

		TRY(check_expr(s, e, CX_AGGARG));
		if (k == AGGR_DISTINCT)
			TRY(need_value(s, e, "distinct()"));
		else
			TRY(need_int(s, e, arena_printf(s->a, "%s()", aggr_name(k))));
		n->needs_exit = e->needs_exit;
	}
	if (k == AGGR_LHIST) {
		static const char *const what[] = { NULL, "LO", "HI", "STEP" };

		for (int i = 1; i < 4; i++) {
			TRY(check_expr(s, n->args[i], CX_AGGARG));
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
					    text(s, pn));
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
			TRY(check_expr(s, n->args[0], cx));
			if (n->args[0]->type == VT_STR && n->args[0]->kind != N_STR)
				return query_errorf(s->q, &n->args[0]->loc,
						    "'%s' is already a string; str() reads a string at an address",
						    text(s, n->args[0]));
			TRY(need_int(s, n->args[0], "str()"));
			inherit(n, n->args[0]);
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
			return check_arg(s, n);
		if (!strcmp(n->name, "tag"))
			return check_tag(s, n);
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
			    text(s, n->a), n->name);
}

static int check_member(struct sema *s, struct node *n, enum cx cx)
{
	const struct ast_query *aq = s->aq;
	const struct ast_group *g = aq->group;

	if (n->a->kind == N_IDENT && !strcmp(n->a->name, aq->var))
		return check_field(s, n);
	if (g && n->a->kind == N_IDENT && !strcmp(n->a->name, g->into)) {
		if (cx != CX_SELECT && cx != CX_ORDER)
			return query_errorf(s->q, &n->loc,
					    "the group '%s' is only known in select and order by",
					    g->into);
		if (!strcmp(n->name, "key")) {
			if (g->tuple)
				return query_errorf(s->q, &n->loc,
						    "the group key is a tuple; name a part of it: %s.%s",
						    g->into, g->keys[0].name);
			n->sem = S_KEY;
			n->idx = 0;
			n->type = g->keys[0].e->type;
			n->strsize = g->keys[0].e->strsize;
			return 0;
		}
		for (int i = 0; g->tuple && i < g->nkeys; i++)
			if (!strcmp(g->keys[i].name, n->name)) {
				n->sem = S_KEY;
				n->idx = i;
				n->type = g->keys[i].e->type;
				n->strsize = g->keys[i].e->strsize;
				return 0;
			}
		if (aggr_lookup(n->name) >= 0)
			return query_errorf(s->q, &n->loc,
					    "'%s' is an aggregate: call it, %s.%s(...)",
					    n->name, g->into, n->name);
		if (!g->tuple)
			return query_errorf(s->q, &n->loc,
					    "unknown group field '%s' (the group has %s.key and aggregates such as %s.count())",
					    n->name, g->into, g->into);
		char list[256];
		size_t l = 0;

		list[0] = '\0';
		for (int i = 0; i < g->nkeys && l < sizeof(list); i++)
			l += snprintf(list + l, sizeof(list) - l, "%s%s",
				      i ? ", " : "", g->keys[i].name);
		return query_errorf(s->q, &n->loc,
				    "unknown group field '%s' (the key has: %s)",
				    n->name, list);
	}
	if (n->a->kind == N_IDENT)
		TRY(check_expr(s, n->a, cx));	/* reports an unknown name */
	return query_errorf(s->q, &n->loc,
			    "'.%s' applies to the event '%s' or to the group",
			    n->name, aq->var);
}

static int check_ident(struct sema *s, struct node *n, enum cx cx)
{
	const struct ast_query *aq = s->aq;

	for (int i = s->nlets - 1; i >= 0; i--)
		if (!strcmp(aq->lets[i]->name, n->name)) {
			const struct node *e = aq->lets[i]->e;

			n->sem = S_LET;
			n->idx = i;
			n->type = e->type;
			n->strsize = e->strsize;
			n->needs_exit = e->needs_exit;
			n->per_event = true;
			return 0;
		}
	if (!strcmp(n->name, aq->var))
		return query_errorf(s->q, &n->loc,
				    "'%s' is the event; use one of its fields, e.g. %s.pid",
				    n->name, n->name);
	if (aq->group && !strcmp(n->name, aq->group->into) &&
	    (cx == CX_SELECT || cx == CX_ORDER))
		return query_errorf(s->q, &n->loc,
				    "'%s' is the group; use %s.key or an aggregate such as %s.count()",
				    n->name, n->name, n->name);
	if (!strcmp(n->name, "now"))
		return query_errorf(s->q, &n->loc,
				    "'now' is only allowed in a time limit: where %s.time < now + DURATION",
				    aq->var);
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (!strcmp(fields[i].name, n->name))
			return query_errorf(s->q, &n->loc,
					    "unknown name '%s' (did you mean %s.%s?)",
					    n->name, aq->var, n->name);
	return query_errorf(s->q, &n->loc, "unknown name '%s'", n->name);
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

	TRY(check_expr(s, l, cx));
	TRY(check_expr(s, r, cx));
	inherit(n, l);
	inherit(n, r);
	n->type = VT_INT;
	if ((l->type == VT_STR || r->type == VT_STR) && is_cmp(n->op)) {
		struct node *lit = l->kind == N_STR ? l : r->kind == N_STR ? r : NULL;
		struct node *val = lit == l ? r : l;

		if (n->op != T_EQ && n->op != T_NE)
			return query_errorf(s->q, &n->loc,
					    "strings compare only with == and !=");
		if (val->type == VT_DIST)
			return need_int(s, val, what);
		if (l->type != r->type) {
			struct node *num = l->type == VT_INT ? l : r;

			return query_errorf(s->q, &num->loc,
					    "cannot compare the integer '%s' with a string: only strings (comm, host, str(...), char[] tracepoint fields) compare with strings",
					    text(s, num));
		}
		if (!lit)
			return query_errorf(s->q, &n->loc,
					    "strings compare only with a string literal, e.g. %s == \"bash\"",
					    text(s, l));
		if (val->kind == N_STR)
			return query_errorf(s->q, &n->loc,
					    "comparing two string literals; compare a field such as %s.comm",
					    s->aq->var);
		if (lit->len >= (size_t)val->strsize)
			return query_errorf(s->q, &lit->loc,
					    "string literal is %zu bytes, longer than '%s' can hold (%d bytes with its NUL)",
					    lit->len, text(s, val), val->strsize);
		return 0;
	}
	TRY(need_int(s, l, what));
	TRY(need_int(s, r, what));
	if (n->op == T_SLASH || n->op == T_PERCENT) {
		int64_t c;

		if (node_const(r, &c) && c == 0)
			return query_errorf(s->q, &r->loc, "division by zero");
	}
	return 0;
}

static int check_expr(struct sema *s, struct node *n, enum cx cx)
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
				    text(s, n));
	case N_STR:
		n->type = VT_STR;
		n->strsize = (int)n->len + 1;
		return 0;
	case N_IDENT:
		return check_ident(s, n, cx);
	case N_MEMBER:
		return check_member(s, n, cx);
	case N_CALL:
		return check_call(s, n, cx);
	case N_UNARY:
		TRY(check_expr(s, n->a, cx));
		TRY(need_int(s, n->a, arena_printf(s->a, "operator '%s'",
						   op_str(n->op))));
		inherit(n, n->a);
		n->type = VT_INT;
		return 0;
	case N_BINARY:
		return check_binary(s, n, cx);
	}
	return -EINVAL;
}

/* ---- time limit --------------------------------------------------------- */

static bool is_var_time(const struct sema *s, const struct node *n)
{
	return n->kind == N_MEMBER && n->a->kind == N_IDENT &&
	       !strcmp(n->a->name, s->aq->var) && !strcmp(n->name, "time");
}

static bool is_now_plus(const struct node *n, int64_t *d)
{
	return n->kind == N_BINARY && n->op == T_PLUS && n->a->kind == N_IDENT &&
	       !strcmp(n->a->name, "now") && node_const(n->b, d);
}

/* X.time < now + D (or <=, or mirrored): Fay's way to say 'for D'. */
static int check_time_limit(struct sema *s, struct node *n, bool *is)
{
	struct ast_query *aq = s->aq;
	int64_t d;

	*is = false;
	if (n->kind != N_BINARY)
		return 0;
	if (!(((n->op == T_LT || n->op == T_LE) && is_var_time(s, n->a) &&
	       is_now_plus(n->b, &d)) ||
	      ((n->op == T_GT || n->op == T_GE) && is_var_time(s, n->b) &&
	       is_now_plus(n->a, &d))))
		return 0;
	if (d <= 0)
		return query_errorf(s->q, &n->loc,
				    "the time limit must be positive (now + DURATION)");
	if (aq->for_ns)
		return query_errorf(s->q, &n->loc,
				    "the time limit is given twice (first at %d:%d)",
				    aq->for_loc.line, aq->for_loc.col);
	aq->for_ns = (uint64_t)d;
	aq->for_loc = n->loc;
	n->sem = S_NOW;
	n->type = VT_INT;
	*is = true;
	return 0;
}

/* A where condition: each top-level && operand may be the time limit. */
static int check_conjuncts(struct sema *s, struct node *n)
{
	bool is;

	if (n->kind == N_BINARY && n->op == T_ANDAND) {
		TRY(check_conjuncts(s, n->a));
		TRY(check_conjuncts(s, n->b));
		inherit(n, n->a);
		inherit(n, n->b);
		n->type = VT_INT;
		return 0;
	}
	TRY(check_time_limit(s, n, &is));
	if (is)
		return 0;
	TRY(check_expr(s, n, CX_WHERE));
	if (n->type == VT_STR && n->kind != N_STR)
		return query_errorf(s->q, &n->loc,
				    "where needs a condition (an integer), found the string '%s'",
				    text(s, n));
	return need_int(s, n, "a where clause");
}

/* ---- the query ---------------------------------------------------------- */

static bool word_ok(const char *p, size_t len, const char *extra)
{
	if (!len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(p[i] == '_' || (p[i] >= 'a' && p[i] <= 'z') ||
		      (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9') ||
		      (extra && strchr(extra, p[i]))))
			return false;
	return true;
}

static int check_source(struct sema *s)
{
	struct ast_source *src = &s->aq->src;
	const char *a = src->arg, *c1, *c2;
	struct query *q = s->q;

	if (src->scope == SCOPE_HOST && !src->scope_host[0])
		return query_errorf(q, &src->scope_loc, "host(\"\") needs a host name");
	switch (src->kind) {
	case SRC_SYSCALL:
		if (!strcmp(a, "*"))
			break;
		if (!word_ok(a, strlen(a), NULL))
			return query_errorf(q, &src->arg_loc,
					    "bad syscall name \"%s\" (a name such as \"read\", or \"*\" for every syscall)",
					    a);
		if (tp_syscall_known(q, a) == 0)
			return query_errorf(q, &src->arg_loc,
					    "unknown syscall \"%s\" (no tracepoint syscalls:sys_enter_%s)",
					    a, a);
		break;
	case SRC_TRACEPOINT:
		c1 = strchr(a, ':');
		if (!c1 || !word_ok(a, c1 - a, NULL) || !word_ok(c1 + 1, strlen(c1 + 1), NULL))
			return query_errorf(q, &src->arg_loc,
					    "bad tracepoint \"%s\" (write \"SYSTEM:EVENT\", e.g. \"sched:sched_switch\")",
					    a);
		src->part[0] = arena_strndup(s->a, a, c1 - a);
		src->part[1] = c1 + 1;
		if (!src->part[0])
			return -ENOMEM;
		return tp_format_load(q, src->part[0], src->part[1], &src->arg_loc,
				      &src->tp);
	case SRC_KFUNC:
		if (!word_ok(a, strlen(a), "."))
			return query_errorf(q, &src->arg_loc,
					    "bad kernel function name \"%s\"", a);
		src->part[1] = a;
		break;
	case SRC_UFUNC:
	case SRC_PFUNC: {
		const char *slash = strrchr(a, '/');

		c1 = strchr(slash ? slash : a, ':');
		if (src->kind == SRC_PFUNC && src->num <= 0)
			return query_errorf(q, &src->num_loc,
					    "process id must be positive");
		if (!c1 && src->kind == SRC_PFUNC) {
			if (!a[0])
				return query_errorf(q, &src->arg_loc,
						    "empty symbol name");
			src->part[1] = a;	/* in the process's own binary */
			break;
		}
		if (!c1 || c1 == a || !c1[1])
			return query_errorf(q, &src->arg_loc,
					    "expected \"BINARY:SYMBOL\" (e.g. \"libc:read\", \"/usr/bin/app:handle\"), got \"%s\"",
					    a);
		src->part[0] = arena_strndup(s->a, a, c1 - a);
		src->part[1] = c1 + 1;
		if (!src->part[0])
			return -ENOMEM;
		break;
	}
	case SRC_USDT:
		c2 = strrchr(a, ':');
		c1 = c2 ? memrchr(a, ':', c2 - a) : NULL;
		if (!c1 || c1 == a || c2 == c1 + 1 || !c2[1])
			return query_errorf(q, &src->arg_loc,
					    "expected \"BINARY:PROVIDER:NAME\", got \"%s\"", a);
		src->part[0] = arena_strndup(s->a, a, c1 - a);
		src->part[1] = arena_strndup(s->a, c1 + 1, c2 - c1 - 1);
		src->part[2] = c2 + 1;
		if (!src->part[0] || !src->part[1])
			return -ENOMEM;
		break;
	case SRC_PROFILE:
		if (src->num < 1 || src->num > 100000)
			return query_errorf(q, &src->num_loc,
					    "profile frequency must be 1..100000 Hz (got %lld)",
					    (long long)src->num);
		break;
	case SRC_SPANS:
		break;
	}
	return 0;
}

static int check_clauses(struct sema *s)
{
	struct ast_query *aq = s->aq;
	int nlets = 0;

	for (int i = 0; i < aq->nclauses; i++)
		nlets += aq->clauses[i].kind == C_LET;
	aq->lets = arena_alloc(s->a, (nlets ? nlets : 1) * sizeof(*aq->lets));
	if (!aq->lets)
		return -ENOMEM;
	for (int i = 0; i < aq->nclauses; i++) {
		struct ast_clause *c = &aq->clauses[i];

		if (c->kind == C_WHERE) {
			TRY(check_conjuncts(s, c->e));
			c->time_limit = c->e->sem == S_NOW;
			continue;
		}
		if (!strcmp(c->name, aq->var))
			return query_errorf(s->q, &c->name_loc,
					    "let '%s' would hide the range variable", c->name);
		if (!strcmp(c->name, "now"))
			return query_errorf(s->q, &c->name_loc,
					    "'now' is reserved for time limits");
		for (int j = 0; j < s->nlets; j++)
			if (!strcmp(aq->lets[j]->name, c->name))
				return query_errorf(s->q, &c->name_loc,
						    "let '%s' is defined twice (first at %d:%d)",
						    c->name, aq->lets[j]->name_loc.line,
						    aq->lets[j]->name_loc.col);
		TRY(check_expr(s, c->e, CX_LET));
		TRY(need_value(s, c->e, "a let"));
		aq->lets[s->nlets++] = c;
		aq->nlets = s->nlets;
	}
	return 0;
}

static int check_names_unique(struct sema *s, const struct ast_item *items,
			      int n, const char *what)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(items[i].name, items[j].name))
				return query_errorf(s->q, &items[i].name_loc,
						    "duplicate %s name '%s' (first at %d:%d)",
						    what, items[i].name,
						    items[j].name_loc.line,
						    items[j].name_loc.col);
	return 0;
}

static int check_group(struct sema *s)
{
	struct ast_query *aq = s->aq;
	struct ast_group *g = aq->group;

	if (strcmp(g->var, aq->var))
		return query_errorf(s->q, &g->var_loc,
				    "group names '%s', but the range variable is '%s' (group %s by KEY into NAME)",
				    g->var, aq->var, aq->var);
	if (!strcmp(g->into, aq->var))
		return query_errorf(s->q, &g->into_loc,
				    "the group name '%s' is already the range variable",
				    g->into);
	for (int i = 0; i < aq->nlets; i++)
		if (!strcmp(aq->lets[i]->name, g->into))
			return query_errorf(s->q, &g->into_loc,
					    "the group name '%s' is already a let", g->into);
	TRY(check_names_unique(s, g->keys, g->nkeys, "group key"));
	for (int i = 0; i < g->nkeys; i++) {
		TRY(check_expr(s, g->keys[i].e, CX_KEY));
		TRY(need_value(s, g->keys[i].e, "a group key"));
	}
	return 0;
}

/* The first place n reads the event outside an aggregate, or NULL. */
static const struct node *find_event(const struct node *n)
{
	const struct node *r = NULL;

	if (!n || n->sem == S_AGGR)
		return NULL;
	if (n->sem == S_FIELD || n->sem == S_ARG || n->sem == S_TPFIELD ||
	    n->sem == S_LET)
		return n;
	if ((r = find_event(n->a)) || (r = find_event(n->b)))
		return r;
	for (int i = 0; i < n->nargs; i++)
		if ((r = find_event(n->args[i])))
			return r;
	return NULL;
}

static int per_event_error(struct sema *s, const struct node *ev)
{
	const struct ast_group *g = s->aq->group;

	if (g)
		return query_errorf(s->q, &ev->loc,
				    "'%s' is per event, but the query groups: use it in the group key or inside an aggregate such as %s.max(...)",
				    text(s, ev), g->into);
	return query_errorf(s->q, &ev->loc,
			    "'%s' is per event, but this select aggregates: group by it or put it inside an aggregate",
			    text(s, ev));
}

static int check_select(struct sema *s)
{
	struct ast_query *aq = s->aq;

	TRY(check_names_unique(s, aq->cols, aq->ncols, "column"));
	for (int i = 0; i < aq->ncols; i++) {
		struct node *e = aq->cols[i].e;

		TRY(check_expr(s, e, CX_SELECT));
		if (e->type == VT_DIST && e->sem != S_AGGR)
			return need_int(s, e, "select");
		if (e->type != VT_DIST)
			TRY(need_value(s, e, "a select column"));
		aq->aggregating |= e->has_aggr;
	}
	aq->aggregating |= aq->group != NULL;
	for (int i = 0; aq->aggregating && i < aq->ncols; i++) {
		const struct node *ev = find_event(aq->cols[i].e);

		if (ev)
			return per_event_error(s, ev);
	}
	return 0;
}

static int check_options(struct sema *s)
{
	struct ast_query *aq = s->aq;
	const struct ast_option *seen[4] = { NULL };

	for (int i = 0; i < aq->nopts; i++) {
		struct ast_option *o = &aq->opts[i];
		static const char *const names[] = { "window", "for", "order by", "limit" };

		if (seen[o->kind])
			return query_errorf(s->q, &o->loc,
					    "'%s' is given twice (first at %d:%d)",
					    names[o->kind], seen[o->kind]->loc.line,
					    seen[o->kind]->loc.col);
		seen[o->kind] = o;
		switch (o->kind) {
		case O_WINDOW:
			if (!o->val)
				return query_errorf(s->q, &o->loc, "window must be longer than 0");
			if (!aq->aggregating)
				return query_errorf(s->q, &o->loc,
						    "window needs an aggregating select (rows without aggregates are printed as they come)");
			aq->window_ns = o->val;
			break;
		case O_FOR:
			if (!o->val)
				return query_errorf(s->q, &o->loc, "for must be longer than 0");
			if (aq->for_ns)
				return query_errorf(s->q, &o->loc,
						    "the time limit is given twice (first at %d:%d)",
						    aq->for_loc.line, aq->for_loc.col);
			aq->for_ns = o->val;
			aq->for_loc = o->loc;
			break;
		case O_ORDER:
			if (!aq->aggregating)
				return query_errorf(s->q, &o->loc,
						    "order by needs an aggregating select (rows without aggregates are printed as they come)");
			aq->order = o->e;
			aq->order_desc = o->desc;
			if (o->e->kind == N_IDENT && aq->sel_tuple) {
				int c;

				for (c = 0; c < aq->ncols; c++)
					if (!strcmp(aq->cols[c].name, o->e->name))
						break;
				if (c < aq->ncols) {
					o->e->sem = S_COL;
					o->e->idx = c;
					o->e->type = aq->cols[c].e->type;
					if (o->e->type == VT_DIST)
						return query_errorf(s->q, &o->e->loc,
								    "cannot order by '%s': it is a distribution",
								    o->e->name);
					break;
				}
			}
			TRY(check_expr(s, o->e, CX_ORDER));
			TRY(need_value(s, o->e, "order by"));
			if (find_event(o->e))
				return per_event_error(s, find_event(o->e));
			break;
		case O_LIMIT:
			if (!o->val)
				return query_errorf(s->q, &o->loc, "limit must be at least 1");
			aq->limit = o->val;
			aq->has_limit = true;
			break;
		}
	}
	return 0;
}

int query_check(struct query *q)
{
	struct sema *s;
	struct ast_query *aq = q->ast;
	int err;

	if (!aq)
		return -EINVAL;
	if (q->checked)
		return 0;
	s = arena_alloc(q->arena, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->q = q;
	s->aq = aq;
	s->a = q->arena;

	err = check_source(s);
	err = err ? : check_clauses(s);
	err = err ? : (aq->group ? check_group(s) : 0);
	err = err ? : check_select(s);
	err = err ? : check_options(s);
	if (err)
		return err;

	aq->naggrs = s->naggrs;
	aq->aggrs = arena_alloc(q->arena, (s->naggrs + 1) * sizeof(*aq->aggrs));
	aq->adesc = arena_alloc(q->arena, (s->naggrs + 1) * sizeof(*aq->adesc));
	if (!aq->aggrs || !aq->adesc)
		return -ENOMEM;
	memcpy(aq->aggrs, s->aggrs, s->naggrs * sizeof(*aq->aggrs));
	memcpy(aq->adesc, s->adesc, s->naggrs * sizeof(*aq->adesc));
	q->checked = true;
	return 0;
}
