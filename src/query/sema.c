// SPDX-License-Identifier: MIT
/*
 * FayQL semantic checks: resolve every name (fields of the source, lets,
 * the group), give every expression a type (64-bit integer, string,
 * distribution), put aggregates only where they can run, check constant
 * arguments and options, and recognise Fay's time-limit form
 * 'where X.time < now + D'.  Errors point at the AST node.
 *
 * This file: the source, the clauses, the time limit and query_check();
 * expressions are typed in sema_expr.c, names resolved in sema_names.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/err.h"
#include "query/query.h"
#include "query/query_int.h"
#include "query/sema_int.h"

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
		sema_inherit(n, n->a);
		sema_inherit(n, n->b);
		n->type = VT_INT;
		return 0;
	}
	TRY(check_time_limit(s, n, &is));
	if (is)
		return 0;
	TRY(sema_check_expr(s, n, CX_WHERE));
	if (n->type == VT_STR && n->kind != N_STR)
		return query_errorf(s->q, &n->loc,
				    "where needs a condition (an integer), found the string '%s'",
				    sema_text(s, n));
	return sema_need_int(s, n, "a where clause");
}

/* ---- the query ---------------------------------------------------------- */

/* What a glob may hold besides a name's characters (fnmatch(3)). */
#define GLOB_CHARS "*?[]!^-"

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
		if (!c1 || !word_ok(a, c1 - a, GLOB_CHARS) ||
		    !word_ok(c1 + 1, strlen(c1 + 1), GLOB_CHARS))
			return query_errorf(q, &src->arg_loc,
					    "bad tracepoint \"%s\" (write \"SYSTEM:EVENT\", e.g. \"sched:sched_switch\", or a glob: \"sched:*\", \"syscalls:sys_enter_*\")",
					    a);
		src->part[0] = arena_strndup(s->a, a, c1 - a);
		src->part[1] = c1 + 1;
		if (!src->part[0])
			return -ENOMEM;
		if (strpbrk(a, "*?["))
			return tp_glob_load(q, src, &src->arg_loc);
		return tp_format_load(q, src->part[0], src->part[1], &src->arg_loc,
				      &src->tp);
	case SRC_KFUNC:
		if (!word_ok(a, strlen(a), "." GLOB_CHARS))
			return query_errorf(q, &src->arg_loc,
					    "bad kernel function name \"%s\" (a name such as \"vfs_read\", or a glob: \"vfs_*\", \"*\")",
					    a);
		src->part[1] = a;
		break;
	case SRC_UFUNC:
	case SRC_PFUNC: {
		const char *slash = strrchr(a, '/');

		/* the first colon after the path that is not half of a
		 * C++ "::" ("app:ns::C::f"; "ns::f" alone is a symbol) */
		for (c1 = slash ? slash : a; c1 && (c1 = strchr(c1, ':')); c1 += 2)
			if (c1[1] != ':')
				break;
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
		TRY(sema_check_expr(s, c->e, CX_LET));
		TRY(sema_need_value(s, c->e, "a let"));
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
		TRY(sema_check_expr(s, g->keys[i].e, CX_KEY));
		TRY(sema_need_value(s, g->keys[i].e, "a group key"));
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
				    sema_text(s, ev), g->into);
	return query_errorf(s->q, &ev->loc,
			    "'%s' is per event, but this select aggregates: group by it or put it inside an aggregate",
			    sema_text(s, ev));
}

static int check_select(struct sema *s)
{
	struct ast_query *aq = s->aq;

	TRY(check_names_unique(s, aq->cols, aq->ncols, "column"));
	for (int i = 0; i < aq->ncols; i++) {
		struct node *e = aq->cols[i].e;

		TRY(sema_check_expr(s, e, CX_SELECT));
		if (e->type == VT_DIST && e->sem != S_AGGR)
			return sema_need_int(s, e, "select");
		if (e->type != VT_DIST)
			TRY(sema_need_value(s, e, "a select column"));
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

/* The select column called name, or -1 with an error at loc. */
static int cat_col(struct sema *s, const char *name, const struct loc *loc, const char *role)
{
	struct ast_query *aq = s->aq;

	for (int c = 0; c < aq->ncols; c++)
		if (aq->cols[c].named && !strcmp(aq->cols[c].name, name))
			return c;
	query_errorf(s->q, loc, "categorize: no select column '%s' (the %s is a column of select { NAME: ... })",
		     name, role);
	return -1;
}

/*
 * categorize ENTITY by FEATURE [using VALUE] into K: the pivot form, one
 * row per (entity, feature) pair, FEATURE a column without an aggregate
 * (a group key) and VALUE a number (given, or the one numeric aggregate
 * column); or categorize ENTITY by COL, ... into K: the vector form, one
 * row per entity, each COL a number.
 */
static int check_categorize(struct sema *s, struct ast_option *o)
{
	struct ast_query *aq = s->aq;
	struct ast_categorize *c = o->cat;
	const struct node *fe;

	if (!aq->aggregating || !aq->sel_tuple)
		return query_errorf(s->q, &o->loc,
				    "categorize needs an aggregating select with named columns (select { host: g.host, call: g.call, n: g.count() })");
	if ((c->entity_col = cat_col(s, c->entity, &c->entity_loc, "entity")) < 0)
		return -EINVAL;
	if (aq->cols[c->entity_col].e->has_aggr || aq->cols[c->entity_col].e->type == VT_DIST)
		return query_errorf(s->q, &c->entity_loc,
				    "categorize: the entity '%s' must be a group key, not an aggregate",
				    c->entity);
	for (int j = 0; j < c->nfeat; j++) {
		if ((c->feat_col[j] = cat_col(s, c->feat[j], &c->feat_loc[j], "feature")) < 0)
			return -EINVAL;
		if (c->feat_col[j] == c->entity_col)
			return query_errorf(s->q, &c->feat_loc[j],
					    "categorize: '%s' is the entity; features are other columns",
					    c->feat[j]);
	}
	fe = aq->cols[c->feat_col[0]].e;
	c->pivot = c->nfeat == 1 && !fe->has_aggr && fe->type != VT_DIST;
	c->value_col = -1;
	if (!c->pivot) {
		if (c->value)
			return query_errorf(s->q, &c->value_loc,
					    "categorize: 'using' goes with one feature column that is a group key (categorize host by call using n into 3)");
		for (int j = 0; j < c->nfeat; j++) {
			const struct node *e = aq->cols[c->feat_col[j]].e;

			if (e->type != VT_INT || !e->has_aggr)
				return query_errorf(s->q, &c->feat_loc[j],
						    "categorize: '%s' is not a number computed by an aggregate; give one group-key column (its values are the features) or aggregate columns",
						    c->feat[j]);
		}
		return 0;
	}
	if (c->value) {
		if ((c->value_col = cat_col(s, c->value, &c->value_loc, "value")) < 0)
			return -EINVAL;
	} else {
		for (int i = 0; i < aq->ncols; i++) {
			const struct node *e = aq->cols[i].e;

			if (!e->has_aggr || e->type != VT_INT)
				continue;
			if (c->value_col >= 0)
				return query_errorf(s->q, &c->k_loc,
						    "categorize: which column is the value of a feature, '%s' or '%s'? say 'using NAME'",
						    aq->cols[c->value_col].name, aq->cols[i].name);
			c->value_col = i;
		}
		if (c->value_col < 0)
			return query_errorf(s->q, &o->loc,
					    "categorize: no numeric aggregate column to weigh the features with (e.g. n: g.count())");
	}
	if (aq->cols[c->value_col].e->type != VT_INT || !aq->cols[c->value_col].e->has_aggr)
		return query_errorf(s->q, &c->value_loc,
				    "categorize: the value '%s' must be a number computed by an aggregate",
				    aq->cols[c->value_col].name);
	return 0;
}

static int check_options(struct sema *s)
{
	struct ast_query *aq = s->aq;
	const struct ast_option *seen[6] = { NULL };

	for (int i = 0; i < aq->nopts; i++) {
		struct ast_option *o = &aq->opts[i];
		static const char *const names[] = { "window", "for", "order by", "limit",
						     "categorize", "keep" };

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
			TRY(sema_check_expr(s, o->e, CX_ORDER));
			TRY(sema_need_value(s, o->e, "order by"));
			if (find_event(o->e))
				return per_event_error(s, find_event(o->e));
			break;
		case O_LIMIT:
			if (!o->val)
				return query_errorf(s->q, &o->loc, "limit must be at least 1");
			aq->limit = o->val;
			aq->has_limit = true;
			break;
		case O_CATEGORIZE:
			TRY(check_categorize(s, o));
			aq->cat = o->cat;
			break;
		case O_KEEP:
			if (!o->val)
				return query_errorf(s->q, &o->loc, "keep must be longer than 0");
			if (aq->aggregating)
				return query_errorf(s->q, &o->loc,
						    "keep needs a select without aggregates (events are kept; an aggregate keeps its windows)");
			if (o->max > QUERY_KEEP_EVENTS_MAX)
				return query_errorf(s->q, &o->loc,
						    "keep ... max %" PRIu64 ": at most %u events",
						    o->max, QUERY_KEEP_EVENTS_MAX);
			aq->keep_ns = o->val;
			aq->keep_max = o->max;
			break;
		}
	}
	if (seen[O_KEEP] && seen[O_LIMIT])
		return query_errorf(s->q, &seen[O_KEEP]->loc,
				    "keep and limit do not go together (kept events are not counted; a capture takes the last DUR)");
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
