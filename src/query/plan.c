// SPDX-License-Identifier: MIT
/*
 * The planner: a checked AST in, a struct plan (plan.h) out.  Decides the
 * attach points (an exit probe only when ret or duration is used), what
 * the entry record carries to the exit, which where-conjuncts can be
 * decided at entry (so unwanted calls leave no per-thread state), the key
 * and value layouts, and how each column is computed at read time.
 * Expressions become pexpr trees in plan_expr.c; the read side computes
 * them in plan_eval.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/err.h"
#include "query/plan_int.h"
#include "query/spanctx.h"

/* ---- attach points ------------------------------------------------------- */

static void plan_attach_points(struct planner *pl)
{
	const struct ast_source *src = &pl->aq->src;
	struct plan *p = pl->p;
	struct plan_attach *en = &p->entry, *ex = &p->exit;

	en->args_off = en->ret_off = ex->args_off = ex->ret_off = -1;
	switch (src->kind) {
	case SRC_SYSCALL:
		en->kind = ex->kind = PA_TRACEPOINT;
		if (!strcmp(src->arg, "*")) {
			en->sys = ex->sys = "raw_syscalls";
			en->event = "sys_enter";
			ex->event = "sys_exit";
		} else {
			en->sys = ex->sys = "syscalls";
			en->event = arena_printf(pl->a, "sys_enter_%s", src->arg);
			ex->event = arena_printf(pl->a, "sys_exit_%s", src->arg);
		}
		/* both layouts: 8-byte common header, 8-byte id/nr, then
		 * args[6] (enter) or ret (exit) */
		en->args_off = 16;
		ex->ret_off = 16;
		en->user = ex->user = true;
		break;
	case SRC_TRACEPOINT:
		en->kind = PA_TRACEPOINT;
		en->sys = src->part[0];
		en->event = src->part[1];
		break;
	case SRC_KFUNC:
		en->kind = PA_FENTRY;
		ex->kind = PA_FEXIT;
		en->func = ex->func = src->arg;
		break;
	case SRC_UFUNC:
	case SRC_PFUNC:
		en->kind = PA_UPROBE;
		ex->kind = PA_URETPROBE;
		en->binary = ex->binary = src->part[0];
		en->symbol = ex->symbol = src->part[1];
		en->pid = ex->pid = src->kind == SRC_PFUNC ? (int)src->num : 0;
		en->user = ex->user = true;
		break;
	case SRC_USDT:
		en->kind = PA_USDT;
		en->binary = src->part[0];
		en->provider = src->part[1];
		en->name = src->part[2];
		en->user = true;
		break;
	case SRC_PROFILE:
		en->kind = PA_PERF_SAMPLE;
		en->hz = (unsigned)src->num;
		break;
	case SRC_SPANS:
		en->kind = PA_SPANS;
		en->user = true;
		break;
	}
	if (!p->paired) {
		memset(ex, 0, sizeof(*ex));
		ex->kind = PA_NONE;
		ex->args_off = ex->ret_off = -1;
	}
}

/* spans(...): the context layout, a field per tag key the query names. */
static int plan_span_ctx(struct planner *pl)
{
	const struct ast_query *aq = pl->aq;
	struct plan *p = pl->p;

	TRYP(pl->tagf = arena_alloc(pl->a, (aq->ntags + 1) * sizeof(*pl->tagf)));
	for (int i = 0; i < aq->ntags; i++) {
		struct tp_field *f = &pl->tagf[i];

		TRYP(f->name = arena_printf(pl->a, "tag(\"%s\")", aq->tags[i]));
		f->ctype = "char[]";
		f->offset = SPANCTX_FIXED + i * SPANCTX_STR;
		f->size = SPANCTX_STR;
		f->is_string = true;
	}
	p->ntags = aq->ntags;
	p->tags = aq->tags;
	p->ctx_size = (int)spanctx_size(aq->ntags);
	return 0;
}

/* ---- predicates ---------------------------------------------------------- */

static int add_conj(struct planner *pl, struct pexpr **acc, struct pexpr *e)
{
	struct pexpr *and;

	if (!*acc) {
		*acc = e;
		return 0;
	}
	if (++pl->nconj > PLAN_MAX_CONJ)
		return query_errorf(pl->q, &e->loc,
				    "too many where conditions (more than %d joined with && or in where clauses)",
				    PLAN_MAX_CONJ);
	TRYP(and = px_new(pl, PX_LAND, NULL));
	and->loc = (*acc)->loc;
	and->a = *acc;
	and->b = e;
	*acc = and;
	return 0;
}

static int plan_conjuncts(struct planner *pl, const struct node *n)
{
	struct plan *p = pl->p;
	struct pexpr *e;
	int err;

	/* recursion over the && tree: the parser bounded its height */
	if (n->kind == N_BINARY && n->op == T_ANDAND && n->sem == S_NONE) {
		err = plan_conjuncts(pl, n->a);
		return err ? : plan_conjuncts(pl, n->b);
	}
	if (n->sem == S_NOW)	/* the time limit became for_ns */
		return 0;
	if (p->paired && !n->needs_exit) {
		struct pctx cx = { .inline_lets = true };

		err = plan_conv(pl, n, cx, &e);
		return err ? : add_conj(pl, &p->entry_pred, e);
	}
	err = plan_conv(pl, n, (struct pctx){ .at_exit = p->paired }, &e);
	return err ? : add_conj(pl, &p->pred, e);
}

/* ---- layouts ------------------------------------------------------------- */

static int round8(int n)
{
	return (n + 7) & ~7;
}

static int plan_keys(struct planner *pl, struct pctx cx)
{
	const struct ast_group *g = pl->aq->group;
	struct plan *p = pl->p;
	int off = 0, boff = 0, err;

	if (!g)
		return 0;
	TRYP(p->keys = arena_alloc(pl->a, g->nkeys * sizeof(*p->keys)));
	p->nkeys = g->nkeys;
	for (int i = 0; i < g->nkeys; i++) {
		struct plan_key *k = &p->keys[i];
		const struct node *e = g->keys[i].e;

		k->name = g->keys[i].name;
		if (node_is_stack(e)) {
			/* the key itself, never inside an expression */
			TRYP(k->e = px_new(pl, PX_FIELD, e));
			k->e->field = e->field;
			k->e->type = VT_STR;
			k->e->size = e->strsize;
			k->stack = e->field == F_KSTACK ? PSTACK_KERNEL : PSTACK_USER;
			k->depth = (int)e->ival;
			if (k->depth > p->stack_depth)
				p->stack_depth = k->depth;
		} else {
			err = plan_conv(pl, e, cx, &k->e);
			if (err)
				return err;
		}
		k->is_name = px_is_name(p, k->e);
		k->cg = px_cgroup(p, k->e);
		p->cgroups |= k->cg != F_TIME;
		k->offset = off;
		k->size = e->type == VT_STR ? round8(e->strsize) : 8;
		k->bpf_offset = boff;
		k->bpf_size = k->stack == PSTACK_USER ? 16 : k->stack ? 8 : k->size;
		off += k->size;
		boff += k->bpf_size;
	}
	p->key_size = off;
	p->bpf_key_size = boff;
	if (boff > PLAN_KEY_MAX)
		return query_errorf(pl->q, &g->loc,
				    "the group key takes %d bytes; at most %d fit (it is built on the BPF stack)",
				    boff, PLAN_KEY_MAX);
	return 0;
}

/* Do aggregates x and y have the same first argument (as written)? */
static bool same_arg0(const struct planner *pl, const struct node *x,
		      const struct node *y)
{
	const struct loc *a, *b;

	if (!x->nargs || !y->nargs)
		return false;
	a = &x->args[0]->loc;
	b = &y->args[0]->loc;
	return a->end - a->start == b->end - b->start &&
	       !memcmp(pl->q->text + a->start, pl->q->text + b->start,
		       (size_t)(a->end - a->start));
}

/* The first quantile before i of the same expression, or -1. */
static int sketch_owner(const struct planner *pl, int i)
{
	const struct ast_query *aq = pl->aq;

	if (aq->adesc[i].kind != AGGR_QUANTILE)
		return -1;
	for (int j = 0; j < i; j++)
		if (aq->adesc[j].kind == AGGR_QUANTILE && pl->p->aggrs[j].share < 0 &&
		    same_arg0(pl, aq->aggrs[j], aq->aggrs[i]))
			return j;
	return -1;
}

/* The value's size in an error: each aggregate's cost, largest first. */
static int value_too_big(struct planner *pl, int size)
{
	const struct plan *p = pl->p;
	char costs[600];
	size_t n = 0;
	bool done[QUERY_MAX_AGGRS] = { false };

	costs[0] = '\0';
	for (int k = 0; k < p->naggrs && n < sizeof(costs) - 80; k++) {
		int best = -1;

		for (int i = 0; i < p->naggrs; i++)
			if (!done[i] && p->aggrs[i].share < 0 &&
			    (best < 0 || p->aggrs[i].desc.size > p->aggrs[best].desc.size))
				best = i;
		if (best < 0)
			break;
		done[best] = true;
		n += (size_t)snprintf(costs + n, sizeof(costs) - n, "%s%s %zu",
				      n ? ", " : "", p->aggrs[best].text,
				      p->aggrs[best].desc.size);
	}
	return query_errorf(pl->q, &pl->aq->select_loc,
			    "the aggregates take %d bytes per key and CPU; a per-CPU map value holds at most %d (%s; each quantile costs %d bytes, quantiles of one expression share one, distinct %d, hist %d, lhist 8 per bucket + 16, the others 8 or 16)",
			    size, PLAN_VALUE_MAX, costs, AGGR_Q_BUCKETS * 8, AGGR_HLL_M,
			    AGGR_HIST_BUCKETS * 8);
}

static int plan_aggrs(struct planner *pl, struct pctx cx)
{
	const struct ast_query *aq = pl->aq;
	struct plan *p = pl->p;
	int off = 0, err;

	TRYP(p->aggrs = arena_alloc(pl->a, (aq->naggrs + 1) * sizeof(*p->aggrs)));
	p->naggrs = aq->naggrs;
	for (int i = 0; i < aq->naggrs; i++) {
		struct plan_aggr *ag = &p->aggrs[i];
		const struct node *n = aq->aggrs[i];

		ag->desc = aq->adesc[i];
		ag->share = sketch_owner(pl, i);
		if (ag->share >= 0) {
			ag->offset = p->aggrs[ag->share].offset;
		} else {
			ag->offset = off;
			off += round8((int)ag->desc.size);
		}
		ag->text = arena_strndup(pl->a, pl->q->text + n->loc.start,
					 n->loc.end - n->loc.start);
		TRYP(ag->text);
		if (n->nargs) {
			err = plan_conv(pl, n->args[0], cx, &ag->arg);
			if (err)
				return err;
		}
	}
	p->value_size = off;
	if (off > PLAN_VALUE_MAX)
		return value_too_big(pl, off);
	return 0;
}

static int plan_cols(struct planner *pl, struct pctx cx)
{
	const struct ast_query *aq = pl->aq;
	struct plan *p = pl->p;
	struct pctx rd = { .read_side = true };
	int off = 0, err;

	TRYP(p->cols = arena_alloc(pl->a, aq->ncols * sizeof(*p->cols)));
	p->ncols = aq->ncols;
	for (int i = 0; i < aq->ncols; i++) {
		struct plan_col *c = &p->cols[i];
		const struct node *e = aq->cols[i].e;

		c->name = aq->cols[i].name;
		c->type = e->type;
		c->size = e->type == VT_STR ? e->strsize : 8;
		c->aggr = -1;
		c->stack_key = -1;
		if (e->sem == S_KEY && p->mode == PLAN_AGGREGATE && p->keys[e->idx].stack)
			c->stack_key = e->idx;
		if (e->type == VT_DIST) {
			c->aggr = e->idx;
			continue;
		}
		err = plan_conv(pl, e, p->mode == PLAN_STREAM ? cx : rd, &c->e);
		if (err)
			return err;
		if (p->mode == PLAN_STREAM) {
			c->is_name = px_is_name(p, c->e);
			c->cg = px_cgroup(p, c->e);
			p->cgroups |= c->cg != F_TIME;
			c->offset = off;
			off += round8(c->size);
		}
	}
	p->record_size = off;
	if (off > PLAN_RECORD_MAX)
		return query_errorf(pl->q, &aq->select_loc,
				    "a streamed row takes %d bytes; at most %d",
				    off, PLAN_RECORD_MAX);
	return 0;
}

static bool uses_exit(const struct ast_query *aq)
{
	for (int i = 0; i < aq->nclauses; i++)
		if (aq->clauses[i].e->needs_exit)
			return true;
	for (int i = 0; aq->group && i < aq->group->nkeys; i++)
		if (aq->group->keys[i].e->needs_exit)
			return true;
	for (int i = 0; i < aq->naggrs; i++)
		if (aq->aggrs[i]->needs_exit)
			return true;
	for (int i = 0; i < aq->ncols; i++)
		if (aq->cols[i].e->needs_exit)
			return true;
	return false;
}

int query_plan(struct query *q, const struct plan **out)
{
	struct planner pl = { .q = q, .a = q->arena };
	const struct ast_query *aq;
	struct plan *p;
	struct pctx cx;
	int err;

	if (q->plan) {
		*out = q->plan;
		return 0;
	}
	err = query_parse(q);
	err = err ? : query_check(q);
	if (err)
		return err;
	aq = pl.aq = q->ast;

	if (aq->src.scope != SCOPE_LOCAL && !q->cluster)
		return query_errorf(q, &aq->src.scope_loc,
				    "%s queries run through a collector and its agents: fay query --cluster URL 'QUERY'. Drop '%s' to query this host",
				    aq->src.scope == SCOPE_CLUSTER ? "cluster" : "host(...)",
				    aq->src.scope == SCOPE_CLUSTER ? "cluster." : "host(...).");
	if (!(p = arena_alloc(q->arena, sizeof(*p))))
		return -ENOMEM;
	pl.p = p;
	if (aq->src.kind == SRC_SPANS) {
		err = plan_span_ctx(&pl);
		if (err)
			return err;
	}
	p->ast = aq;
	p->source = aq->src.kind;
	p->target = aq->src.arg;
	p->paired = uses_exit(aq);
	plan_attach_points(&pl);
	if (p->paired) {
		p->saved[0].kind = SAVE_TIME;
		p->nsaved = 1;
	}
	cx = (struct pctx){ .at_exit = p->paired };

	/* lets, in order, in the main program */
	if (!(p->lets = arena_alloc(q->arena, (aq->nlets + 1) * sizeof(*p->lets))))
		return -ENOMEM;
	p->nlets = aq->nlets;
	for (int i = 0; i < aq->nlets && !err; i++) {
		p->lets[i].name = aq->lets[i]->name;
		err = plan_conv(&pl, aq->lets[i]->e, cx, &p->lets[i].e);
	}
	for (int i = 0; i < aq->nclauses && !err; i++)
		if (aq->clauses[i].kind == C_WHERE)
			err = plan_conjuncts(&pl, aq->clauses[i].e);

	p->mode = aq->aggregating ? PLAN_AGGREGATE : PLAN_STREAM;
	p->max_entries = PLAN_MAX_ENTRIES;
	err = err ? : plan_keys(&pl, cx);
	err = err ? : plan_aggrs(&pl, cx);
	err = err ? : plan_cols(&pl, cx);
	if (!err && aq->order)
		err = plan_conv(&pl, aq->order, (struct pctx){ .read_side = true }, &p->order);
	if (err)
		return err;
	p->order_desc = aq->order_desc;
	p->window_ns = aq->window_ns;
	p->for_ns = aq->for_ns;
	p->keep_ns = aq->keep_ns;
	p->keep_max = aq->keep_max;
	p->limit = aq->limit;
	p->cat = aq->cat;
	p->saved_size = 8 * p->nsaved;
	q->plan = p;
	*out = p;
	return 0;
}
