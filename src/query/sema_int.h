/* SPDX-License-Identifier: MIT */
/*
 * Private to the semantic checks (src/query/sema*.c): sema.c checks the
 * query's source and clauses, sema_expr.c types expressions, sema_names.c
 * resolves names.  Every check returns 0, or the error query_errorf()
 * recorded (pointing at the node), or -ENOMEM.
 */
#ifndef FAY_QUERY_SEMA_INT_H
#define FAY_QUERY_SEMA_INT_H

#include "query/query.h"
#include "query/query_int.h"

#define MAX_AGGRS	QUERY_MAX_AGGRS

/* Where an expression stands (what it may contain depends on it). */
enum cx { CX_WHERE, CX_LET, CX_KEY, CX_SELECT, CX_ORDER, CX_AGGARG };

/* The state of one query_check() run. */
struct sema {
	struct query *q;
	struct ast_query *aq;
	struct arena *a;
	int nlets;		/* lets visible so far */
	struct node *aggrs[MAX_AGGRS];
	struct aggr_desc adesc[MAX_AGGRS];
	int naggrs;
};

/* Return x's error, if any. */
#define TRY(x) do { int _e = (x); if (_e) return _e; } while (0)

/* ---- sema_expr.c ---- */

/* The node's source text for messages, shortened (in the query's arena). */
const char *sema_text(struct sema *s, const struct node *n);
/* n must be an integer for 'what' (the message names what needs it). */
int sema_need_int(struct sema *s, const struct node *n, const char *what);
/* n must be a value: an integer or a string that is not a literal. */
int sema_need_value(struct sema *s, const struct node *n, const char *what);
/* n takes on its child c's needs_exit, has_aggr and per_event. */
void sema_inherit(struct node *n, const struct node *c);
/* Resolve the names in expression n (used in cx) and type it, recursively. */
int sema_check_expr(struct sema *s, struct node *n, enum cx cx);

/* ---- sema_names.c ---- */

/* X.arg(N) of the event: N a constant the source has (N_CALL node). */
int sema_check_arg(struct sema *s, struct node *n);
/* X.tag("KEY") of a spans(...) event: a string, "" when absent. */
int sema_check_tag(struct sema *s, struct node *n);
/* s.kstack(N), s.ustack(N): the field with a depth (node ival). */
int sema_check_stack(struct sema *s, struct node *n);
/* A member (N_MEMBER): a field of the event, or a part of the group's
 * key (only in select and order by). */
int sema_check_member(struct sema *s, struct node *n, enum cx cx);
/* A name (N_IDENT): a let defined before; anything else is an error
 * that says what the name is. */
int sema_check_ident(struct sema *s, struct node *n, enum cx cx);

#endif
