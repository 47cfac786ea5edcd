/* SPDX-License-Identifier: MIT */
/*
 * Inside the planner: shared by plan.c (attach points, predicates,
 * layouts, query_plan()) and plan_expr.c (AST expressions to pexpr
 * trees).
 */
#ifndef FAY_QUERY_PLAN_INT_H
#define FAY_QUERY_PLAN_INT_H

#include "query/plan.h"
#include "query/query_int.h"

struct planner {
	struct query *q;
	const struct ast_query *aq;
	struct plan *p;
	struct arena *a;
	int depth;		/* plan_conv() recursion, lets and columns inlined */
	int nodes;		/* pexprs made so far */
	int nconj;		/* where-conjuncts chained with PX_LAND */
	int fail;		/* the error px_new reported, if any */
	struct tp_field *tagf;	/* spans(...): the tag slots of the context */
};

/*
 * Bounds on what the planner builds.  The parser bounds each expression
 * tree (QUERY_MAX_DEPTH), but inlining lets into the entry predicate and
 * columns into order by nests trees into one another, and the where
 * conjuncts are chained: these keep the trees that codegen walks
 * recursively shallow and small whatever the query text.
 */
#define PLAN_MAX_DEPTH	1024
#define PLAN_MAX_NODES	(1 << 16)
#define PLAN_MAX_CONJ	1024
#define PLAN_MAX_CGROUPS 64	/* cgroups one s.container == "X" compares with */

/* Where an expression runs. */
struct pctx {
	bool at_exit;		/* main program of a paired source */
	bool inline_lets;	/* entry_pred: no lets are computed there */
	bool read_side;		/* columns, order by */
};

#define TRYP(x) do { if (!(x)) return pl->fail ? pl->fail : -ENOMEM; } while (0)

/*
 * A new pexpr of op at n's location (n may be NULL), from pl's arena;
 * NULL when the arena is exhausted, or when the query passes
 * PLAN_MAX_NODES (then pl->fail holds the error query_errorf() reported).
 */
struct pexpr *px_new(struct planner *pl, enum px_op op, const struct node *n);
/*
 * n as a pexpr tree into *out, for where cx says it runs (entry, exit,
 * read side), at most PLAN_MAX_DEPTH deep; a paired source's exit
 * program reads entry-time values from the entry record, added to
 * pl->p->saved as needed.  0 or -errno (query_errorf() says what).
 */
int plan_conv(struct planner *pl, const struct node *n, struct pctx cx,
	      struct pexpr **out);

/*
 * The probe's name table for pl's source into pl->p->names, once (the
 * first s.name builds it).  0 or -ENOMEM.
 */
int plan_names_build(struct planner *pl);
/* Is n a stack (s.kstack, s.ustack(N)), which only a group key can be? */
bool node_is_stack(const struct node *n);
/* Is e the probe's name as the probe stores it (s.name, or a let of it)? */
bool px_is_name(const struct plan *p, const struct pexpr *e);
/* F_CGROUP or F_CONTAINER when e (through lets) is that string field,
 * else F_TIME (0). */
enum field_id px_cgroup(const struct plan *p, const struct pexpr *e);

#endif
