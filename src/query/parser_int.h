/* SPDX-License-Identifier: MIT */
/*
 * Private to the FayQL parser (src/query/parser*.c): parser.c parses the
 * query (from, the source, where/let, group, select, the options) and is
 * the entry point, query_parse(); parser_expr.c parses expressions.  Both
 * walk the token array with the cursor below.  Every parse_* function
 * returns 0, or the error query_errorf() recorded (pointing at the token),
 * or -ENOMEM.
 */
#ifndef FAY_QUERY_PARSER_INT_H
#define FAY_QUERY_PARSER_INT_H

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "query/query.h"
#include "query/query_int.h"

struct parser {
	struct query *q;
	struct arena *a;
	const struct token *t;	/* current */
	int prev_end;		/* end offset of the last consumed token */
	int depth;
};

/* Return x's error, if any; TRYP: -ENOMEM when p is NULL. */
#define TRY(x) do { int _e = (x); if (_e) return _e; } while (0)
#define TRYP(p) do { if (!(p)) return -ENOMEM; } while (0)

/* The token cursor, inline in both files. */

/* Consume the current token and return it (T_EOF stays current). */
static inline const struct token *next(struct parser *p)
{
	const struct token *t = p->t;

	p->prev_end = t->loc.end;
	if (t->kind != T_EOF)
		p->t++;
	return t;
}

/* Consume the current token if it is a k; whether it was. */
static inline bool accept(struct parser *p, enum tok_kind k)
{
	if (p->t->kind != k)
		return false;
	next(p);
	return true;
}

/* The error "expected WHAT, found X" at the current token. */
static inline int expected(struct parser *p, const char *what)
{
	const struct token *t = p->t;

	if (t->kind == T_IDENT)
		return query_errorf(p->q, &t->loc, "expected %s, found '%s'",
				    what, t->text);
	return query_errorf(p->q, &t->loc, "expected %s, found %s", what,
			    tok_describe(t->kind));
}

/* Consume a k (storing it in *out when out is not NULL), or the error
 * "expected what" (NULL: the token's own description). */
static inline int expect(struct parser *p, enum tok_kind k, const char *what,
			 const struct token **out)
{
	if (p->t->kind != k)
		return expected(p, what ? what : tok_describe(k));
	if (out)
		*out = p->t;
	next(p);
	return 0;
}

/* Whether the current token is the identifier name. */
static inline bool is_ident(const struct parser *p, const char *name)
{
	return p->t->kind == T_IDENT && !strcmp(p->t->text, name);
}

/* ---- parser_expr.c ---- */

/* An expression (operators by C precedence, unary, calls, members,
 * parentheses) into *out, from the query's arena; nesting and tree height
 * bounded by QUERY_MAX_DEPTH. */
int parse_expr(struct parser *p, struct node **out);

#endif
