// SPDX-License-Identifier: MIT
/*
 * FayQL parser, expressions: precedence climbing over C's binary levels,
 * unary operators, calls, members and parentheses, with the depth and
 * tree-height bounds every later pass relies on.  The query around them:
 * parser.c.
 */
#include <errno.h>
#include <string.h>

#include "common/err.h"
#include "query/parser_int.h"

static struct node *node_new(struct parser *p, enum node_kind kind,
			     const struct loc *loc)
{
	struct node *n = arena_alloc(p->a, sizeof(*n));

	if (n) {
		n->kind = kind;
		n->loc = *loc;
		n->idx = -1;
		n->height = 1;
	}
	return n;
}

/* ---- expressions ----------------------------------------------------- */

static int too_deep(struct parser *p, const struct loc *at)
{
	return query_errorf(p->q, at,
			    "expression nested too deeply (more than %d levels of operators, calls or parentheses; split it with let)",
			    QUERY_MAX_DEPTH);
}

/*
 * Set n->height from its children and refuse a tree taller than
 * QUERY_MAX_DEPTH.  The recursion-depth count in parse_expr/parse_unary
 * bounds the parser itself; this bounds the trees every later pass
 * (sema, plan, codegen, the dumps) walks recursively, which a long
 * left-associative chain such as a + a + ... + a builds without any
 * parser recursion.
 */
static int set_height(struct parser *p, struct node *n)
{
	int h = 0;

	if (n->a && n->a->height > h)
		h = n->a->height;
	if (n->b && n->b->height > h)
		h = n->b->height;
	for (int i = 0; i < n->nargs; i++)
		if (n->args[i]->height > h)
			h = n->args[i]->height;
	n->height = h + 1;
	if (n->height > QUERY_MAX_DEPTH)
		return too_deep(p, &n->loc);
	return 0;
}


static int parse_args(struct parser *p, struct node *call)
{
	struct node *buf[16];
	int n = 0;

	/* '(' already consumed */
	if (!accept(p, T_RPAREN)) {
		for (;;) {
			struct node *e;

			if (n == (int)ARRAY_SIZE(buf))
				return query_errorf(p->q, &p->t->loc,
						    "too many arguments (at most %d)",
						    (int)ARRAY_SIZE(buf));
			TRY(parse_expr(p, &e));
			buf[n++] = e;
			if (accept(p, T_RPAREN))
				break;
			TRY(expect(p, T_COMMA, "',' or ')' in the argument list", NULL));
		}
	}
	call->nargs = n;
	if (n) {
		call->args = arena_alloc(p->a, n * sizeof(*call->args));
		TRYP(call->args);
		memcpy(call->args, buf, n * sizeof(*buf));
	}
	return 0;
}

static int parse_primary(struct parser *p, struct node **out)
{
	const struct token *t = p->t;
	struct node *n = NULL;

	switch (t->kind) {
	case T_INT:
	case T_DURATION:
		next(p);
		TRYP(n = node_new(p, N_INT, &t->loc));
		n->ival = t->ival;
		n->is_dur = t->kind == T_DURATION;
		break;
	case T_FLOAT:
		next(p);
		TRYP(n = node_new(p, N_FLOAT, &t->loc));
		n->fval = t->fval;
		break;
	case T_STRING:
		next(p);
		TRYP(n = node_new(p, N_STR, &t->loc));
		n->str = t->text;
		n->len = t->len;
		break;
	case T_IDENT:
		next(p);
		if (accept(p, T_LPAREN)) {
			TRYP(n = node_new(p, N_CALL, &t->loc));
			n->name = t->text;
			TRY(parse_args(p, n));
		} else {
			TRYP(n = node_new(p, N_IDENT, &t->loc));
			n->name = t->text;
		}
		break;
	case T_LPAREN:
		next(p);
		TRY(parse_expr(p, &n));
		TRY(expect(p, T_RPAREN, "')'", NULL));
		/* the parenthesised span belongs to the expression */
		n->loc.start = t->loc.start;
		break;
	default:
		return expected(p, "an expression");
	}
	n->loc.end = p->prev_end;
	*out = n;
	return n->kind == N_CALL ? set_height(p, n) : 0;
}

static int parse_postfix(struct parser *p, struct node **out)
{
	struct node *n = NULL;

	TRY(parse_primary(p, &n));
	while (accept(p, T_DOT)) {
		const struct token *name = NULL;
		struct node *m;

		/* after '.', a keyword is a name: t.order, t.group, t.from */
		if (p->t->kind != T_IDENT &&
		    !(p->t->kind >= T_FROM && p->t->kind <= T_CATEGORIZE))
			return expected(p, "a field or method name after '.'");
		name = next(p);
		if (accept(p, T_LPAREN)) {
			TRYP(m = node_new(p, N_CALL, &name->loc));
			TRY(parse_args(p, m));
		} else {
			TRYP(m = node_new(p, N_MEMBER, &name->loc));
		}
		m->name = name->text;
		m->a = n;
		m->loc.start = n->loc.start;
		m->loc.end = p->prev_end;
		n = m;
		TRY(set_height(p, n));
	}
	*out = n;
	return 0;
}

static int parse_unary(struct parser *p, struct node **out)
{
	const struct token *t = p->t;
	struct node *n;
	int err;

	if (t->kind != T_MINUS && t->kind != T_BANG && t->kind != T_TILDE &&
	    t->kind != T_PLUS)
		return parse_postfix(p, out);
	if (++p->depth > QUERY_MAX_DEPTH)
		return too_deep(p, &t->loc);
	next(p);
	err = parse_unary(p, &n);
	p->depth--;
	if (err)
		return err;
	if (t->kind == T_PLUS) {
		*out = n;
		return 0;
	}
	TRYP(*out = node_new(p, N_UNARY, &t->loc));
	(*out)->op = t->kind;
	(*out)->a = n;
	(*out)->loc.end = p->prev_end;
	return set_height(p, *out);
}

/* Binary precedence levels, lowest first (C's order). */
static const enum tok_kind levels[][4] = {
	{ T_OROR },
	{ T_ANDAND },
	{ T_PIPE },
	{ T_CARET },
	{ T_AMP },
	{ T_EQ, T_NE },
	{ T_LT, T_LE, T_GT, T_GE },
	{ T_SHL, T_SHR },
	{ T_PLUS, T_MINUS },
	{ T_STAR, T_SLASH, T_PERCENT },
};

static bool at_level(enum tok_kind k, int level)
{
	for (int i = 0; i < 4 && levels[level][i]; i++)
		if (levels[level][i] == k)
			return true;
	return false;
}

static int parse_binary(struct parser *p, int level, struct node **out)
{
	struct node *l, *r, *n;

	if (level == (int)ARRAY_SIZE(levels))
		return parse_unary(p, out);
	TRY(parse_binary(p, level + 1, &l));
	while (at_level(p->t->kind, level)) {
		const struct token *op = next(p);

		TRY(parse_binary(p, level + 1, &r));
		TRYP(n = node_new(p, N_BINARY, &op->loc));
		n->op = op->kind;
		n->a = l;
		n->b = r;
		n->loc.start = l->loc.start;
		n->loc.end = p->prev_end;
		TRY(set_height(p, n));
		l = n;
	}
	*out = l;
	return 0;
}

int parse_expr(struct parser *p, struct node **out)
{
	int err;

	if (++p->depth > QUERY_MAX_DEPTH)
		return too_deep(p, &p->t->loc);
	err = parse_binary(p, 0, out);
	p->depth--;
	return err;
}
