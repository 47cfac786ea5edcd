// SPDX-License-Identifier: MIT
/*
 * FayQL parser: recursive descent over the token array, one function per
 * rule of the grammar in docs/QUERY.md (DESIGN.md's contract).  Written by
 * hand so every error can say what was expected, and where.  This file:
 * the query (from, the source, where/let, group, select, the options) and
 * query_parse(); expressions are in parser_expr.c.
 */
#include <errno.h>
#include <string.h>

#include "common/err.h"
#include "query/parser_int.h"

/* ---- query ----------------------------------------------------------- */

static int parse_string_arg(struct parser *p, const char *what,
			    const char **s, struct loc *loc)
{
	const struct token *t;

	TRY(expect(p, T_LPAREN, "'('", NULL));
	if (p->t->kind != T_STRING)
		return expected(p, what);
	t = next(p);
	if (memchr(t->text, '\0', t->len))
		return query_errorf(p->q, &t->loc, "%s must not contain NUL bytes",
				    what);
	*s = t->text;
	*loc = t->loc;
	return expect(p, T_RPAREN, "')'", NULL);
}

static int parse_int_arg(struct parser *p, const char *what, int64_t *v,
			 struct loc *loc)
{
	const struct token *t;

	TRY(expect(p, T_LPAREN, "'('", NULL));
	if (p->t->kind != T_INT)
		return expected(p, what);
	t = next(p);
	if (t->ival > INT64_MAX)
		return query_errorf(p->q, &t->loc, "%s is too large", what);
	*v = (int64_t)t->ival;
	*loc = t->loc;
	return expect(p, T_RPAREN, "')'", NULL);
}

static const char sources_list[] =
	"syscall, tracepoint, kernel.function, function, process(PID).function, usdt, spans, profile";

static int parse_source(struct parser *p, struct ast_source *src)
{
	const struct token *t = p->t;

	if (t->kind != T_IDENT)
		return expected(p, "a source such as syscall(\"read\")");
	if (!strcmp(t->text, "cluster") && p->t[1].kind == T_DOT) {
		src->scope = SCOPE_CLUSTER;
		src->scope_loc = t->loc;
		next(p);
		next(p);
	} else if (!strcmp(t->text, "host") && p->t[1].kind == T_LPAREN) {
		src->scope = SCOPE_HOST;
		src->scope_loc = t->loc;
		next(p);
		struct loc l;

		TRY(parse_string_arg(p, "a host name string", &src->scope_host, &l));
		TRY(expect(p, T_DOT, "'.' after host(\"NAME\")", NULL));
	}
	t = p->t;
	if (t->kind != T_IDENT)
		return expected(p, "a source such as syscall(\"read\")");
	next(p);
	src->loc = t->loc;
	if (!strcmp(t->text, "syscall")) {
		src->kind = SRC_SYSCALL;
		return parse_string_arg(p, "a syscall name string such as \"read\"",
					&src->arg, &src->arg_loc);
	}
	if (!strcmp(t->text, "tracepoint")) {
		src->kind = SRC_TRACEPOINT;
		return parse_string_arg(p, "a tracepoint string such as \"sched:sched_switch\"",
					&src->arg, &src->arg_loc);
	}
	if (!strcmp(t->text, "kernel")) {
		src->kind = SRC_KFUNC;
		TRY(expect(p, T_DOT, "'.function' after 'kernel'", NULL));
		if (!is_ident(p, "function"))
			return expected(p, "'function' after 'kernel.'");
		next(p);
		return parse_string_arg(p, "a kernel function name string such as \"vfs_read\"",
					&src->arg, &src->arg_loc);
	}
	if (!strcmp(t->text, "function")) {
		src->kind = SRC_UFUNC;
		return parse_string_arg(p, "a \"BINARY:SYMBOL\" string such as \"libc:read\"",
					&src->arg, &src->arg_loc);
	}
	if (!strcmp(t->text, "process")) {
		src->kind = SRC_PFUNC;
		TRY(parse_int_arg(p, "a process id", &src->num, &src->num_loc));
		TRY(expect(p, T_DOT, "'.function' after process(PID)", NULL));
		if (!is_ident(p, "function"))
			return expected(p, "'function' after 'process(PID).'");
		next(p);
		return parse_string_arg(p, "a symbol name string such as \"handle_request\"",
					&src->arg, &src->arg_loc);
	}
	if (!strcmp(t->text, "usdt")) {
		src->kind = SRC_USDT;
		return parse_string_arg(p, "a \"BINARY:PROVIDER:NAME\" string",
					&src->arg, &src->arg_loc);
	}
	if (!strcmp(t->text, "spans")) {
		src->kind = SRC_SPANS;
		if (p->t->kind == T_LPAREN)
			return parse_string_arg(p, "a service name string",
						&src->arg, &src->arg_loc);
		return 0;
	}
	if (!strcmp(t->text, "profile")) {
		src->kind = SRC_PROFILE;
		return parse_int_arg(p, "a sampling frequency in Hz", &src->num,
				     &src->num_loc);
	}
	return query_errorf(p->q, &t->loc, "unknown source '%s' (sources: %s)",
			    t->text, sources_list);
}

/* '{' IDENT ':' expr (',' IDENT ':' expr)* '}', or one expression. */
static int parse_items(struct parser *p, bool *tuple, struct ast_item **items,
		       int *nitems, const char *what)
{
	struct ast_item buf[64];
	int n = 0;

	if (!accept(p, T_LBRACE)) {
		struct node *e;

		TRY(parse_expr(p, &e));
		TRYP(*items = arena_alloc(p->a, sizeof(**items)));
		(*items)->e = e;
		(*items)->name = arena_strndup(p->a, p->q->text + e->loc.start,
					       e->loc.end - e->loc.start);
		TRYP((*items)->name);
		(*items)->name_loc = e->loc;
		*nitems = 1;
		*tuple = false;
		return 0;
	}
	for (;;) {
		const struct token *name = NULL;

		if (n == (int)ARRAY_SIZE(buf))
			return query_errorf(p->q, &p->t->loc, "too many %s (at most %d)",
					    what, (int)ARRAY_SIZE(buf));
		if (p->t->kind != T_IDENT)
			return expected(p, "a name (NAME: expression)");
		name = next(p);
		TRY(expect(p, T_COLON, "':' after the name (NAME: expression)", NULL));
		buf[n].name = name->text;
		buf[n].name_loc = name->loc;
		buf[n].named = true;
		TRY(parse_expr(p, &buf[n].e));
		n++;
		if (accept(p, T_RBRACE))
			break;
		TRY(expect(p, T_COMMA, "',' or '}'", NULL));
	}
	TRYP(*items = arena_alloc(p->a, n * sizeof(**items)));
	memcpy(*items, buf, n * sizeof(*buf));
	*nitems = n;
	*tuple = true;
	return 0;
}

static int parse_group(struct parser *p, struct ast_query *aq)
{
	struct ast_group *g = arena_alloc(p->a, sizeof(*g));
	const struct token *t;

	TRYP(g);
	g->loc = p->t->loc;
	next(p);	/* group */
	if (p->t->kind != T_IDENT)
		return expected(p, "the range variable after 'group' (group VAR by KEY into NAME)");
	t = next(p);
	g->var = t->text;
	g->var_loc = t->loc;
	TRY(expect(p, T_BY, "'by' (group VAR by KEY into NAME)", NULL));
	TRY(parse_items(p, &g->tuple, &g->keys, &g->nkeys, "group keys"));
	TRY(expect(p, T_INTO, "'into' (group VAR by KEY into NAME)", NULL));
	if (p->t->kind != T_IDENT)
		return expected(p, "a group name after 'into'");
	t = next(p);
	g->into = t->text;
	g->into_loc = t->loc;
	aq->group = g;
	return 0;
}

/* categorize ENTITY by F [, F ...] [using VALUE] into K (after the word) */
static int parse_categorize(struct parser *p, struct ast_option *o)
{
	struct ast_categorize *c;
	const struct token *t;

	TRYP(c = arena_alloc(p->a, sizeof(*c)));
	memset(c, 0, sizeof(*c));
	o->cat = c;
	if (p->t->kind != T_IDENT)
		return expected(p, "a select column after 'categorize' (categorize HOST by FEATURE into K)");
	t = next(p);
	c->entity = t->text;
	c->entity_loc = t->loc;
	TRY(expect(p, T_BY, "'by' (categorize ENTITY by FEATURE into K)", NULL));
	do {
		if (p->t->kind != T_IDENT)
			return expected(p, "a select column after 'by' (the features)");
		if (c->nfeat == QUERY_CAT_MAX_FEATURES)
			return query_errorf(p->q, &p->t->loc,
					    "too many feature columns (at most %d)",
					    QUERY_CAT_MAX_FEATURES);
		t = next(p);
		c->feat[c->nfeat] = t->text;
		c->feat_loc[c->nfeat++] = t->loc;
	} while (accept(p, T_COMMA));
	if (p->t->kind == T_IDENT && !strcmp(p->t->text, "using")) {
		next(p);
		if (p->t->kind != T_IDENT)
			return expected(p, "a select column after 'using' (the value of each feature)");
		t = next(p);
		c->value = t->text;
		c->value_loc = t->loc;
	}
	TRY(expect(p, T_INTO, "'into' (categorize ENTITY by FEATURE into K)", NULL));
	if (p->t->kind == T_IDENT && !strcmp(p->t->text, "auto")) {
		/* k chosen by silhouette (engine/kmeans.h, kmeans_auto()) */
		c->k_loc = next(p)->loc;
		c->k = 0;
		return 0;
	}
	if (p->t->kind != T_INT)
		return expected(p, "the number of categories after 'into' (a number, or auto)");
	t = next(p);
	c->k_loc = t->loc;
	if (t->ival < 1 || t->ival > QUERY_CAT_MAX_K)
		return query_errorf(p->q, &t->loc, "categories must number 1 to %d",
				    QUERY_CAT_MAX_K);
	c->k = (int)t->ival;
	return 0;
}

/* t is the identifier word (a contextual keyword: 'keep' and 'max' stay
 * usable as names elsewhere). */
static bool is_word(const struct token *t, const char *word)
{
	return t->kind == T_IDENT && !strcmp(t->text, word);
}

static int parse_options(struct parser *p, struct ast_query *aq)
{
	struct ast_option buf[16];
	int n = 0;

	for (;;) {
		const struct token *t = p->t;
		struct ast_option *o = &buf[n];

		if (t->kind != T_WINDOW && t->kind != T_FOR &&
		    t->kind != T_ORDER && t->kind != T_LIMIT &&
		    t->kind != T_CATEGORIZE && !is_word(t, "keep"))
			break;
		if (n == (int)ARRAY_SIZE(buf))
			return query_errorf(p->q, &t->loc, "too many options");
		memset(o, 0, sizeof(*o));
		o->loc = t->loc;
		next(p);
		if (t->kind == T_IDENT) {	/* keep DUR [max N] */
			o->kind = O_KEEP;
			if (p->t->kind != T_DURATION)
				return expected(p, "a duration after 'keep' (e.g. keep 30s)");
			o->val = next(p)->ival;
			if (is_word(p->t, "max")) {
				next(p);
				if (p->t->kind != T_INT)
					return expected(p, "an event count after 'max' (e.g. keep 30s max 100000)");
				o->max = next(p)->ival;
			}
			n++;
			continue;
		}
		switch (t->kind) {
		case T_WINDOW:
		case T_FOR:
			o->kind = t->kind == T_WINDOW ? O_WINDOW : O_FOR;
			if (p->t->kind != T_DURATION)
				return expected(p, t->kind == T_WINDOW ?
						"a duration after 'window' (e.g. window 1s)" :
						"a duration after 'for' (e.g. for 5m)");
			o->val = next(p)->ival;
			break;
		case T_ORDER:
			o->kind = O_ORDER;
			TRY(expect(p, T_BY, "'by' after 'order'", NULL));
			TRY(parse_expr(p, &o->e));
			if (accept(p, T_DESC))
				o->desc = true;
			else
				accept(p, T_ASC);
			break;
		case T_CATEGORIZE:
			o->kind = O_CATEGORIZE;
			TRY(parse_categorize(p, o));
			break;
		default:
			o->kind = O_LIMIT;
			if (p->t->kind != T_INT)
				return expected(p, "a row count after 'limit'");
			o->val = next(p)->ival;
			break;
		}
		n++;
	}
	if (n) {
		TRYP(aq->opts = arena_alloc(p->a, n * sizeof(*buf)));
		memcpy(aq->opts, buf, n * sizeof(*buf));
	}
	aq->nopts = n;
	return 0;
}

static int parse_query(struct parser *p, struct ast_query *aq)
{
	struct ast_clause buf[64];
	const struct token *t;
	int n = 0;

	aq->loc = p->t->loc;
	TRY(expect(p, T_FROM, "'from' (a query starts: from VAR in SOURCE)", NULL));
	if (p->t->kind != T_IDENT)
		return expected(p, "a range variable name after 'from'");
	t = next(p);
	aq->var = t->text;
	aq->var_loc = t->loc;
	TRY(expect(p, T_IN, "'in' (from VAR in SOURCE)", NULL));
	TRY(parse_source(p, &aq->src));

	while (p->t->kind == T_WHERE || p->t->kind == T_LET) {
		struct ast_clause *c = &buf[n];

		if (n == (int)ARRAY_SIZE(buf))
			return query_errorf(p->q, &p->t->loc,
					    "too many where/let clauses (at most %d)",
					    (int)ARRAY_SIZE(buf));
		memset(c, 0, sizeof(*c));
		t = next(p);
		c->loc = t->loc;
		if (t->kind == T_WHERE) {
			c->kind = C_WHERE;
		} else {
			const struct token *name = NULL;

			c->kind = C_LET;
			if (p->t->kind != T_IDENT)
				return expected(p, "a name after 'let' (let NAME = expression)");
			name = next(p);
			c->name = name->text;
			c->name_loc = name->loc;
			TRY(expect(p, T_ASSIGN, "'=' (let NAME = expression)", NULL));
		}
		TRY(parse_expr(p, &c->e));
		n++;
	}
	if (n) {
		TRYP(aq->clauses = arena_alloc(p->a, n * sizeof(*buf)));
		memcpy(aq->clauses, buf, n * sizeof(*buf));
	}
	aq->nclauses = n;

	if (p->t->kind == T_GROUP)
		TRY(parse_group(p, aq));
	if (p->t->kind != T_SELECT) {
		if (p->t->kind == T_EOF || p->t->kind == T_WINDOW ||
		    p->t->kind == T_FOR || p->t->kind == T_ORDER ||
		    p->t->kind == T_LIMIT || p->t->kind == T_CATEGORIZE ||
		    is_word(p->t, "keep"))
			return query_errorf(p->q, &p->t->loc,
					    "missing 'select' (a query ends with select EXPR or select { NAME: EXPR, ... })");
		return expected(p, aq->group ? "'select'" :
				"'where', 'let', 'group' or 'select'");
	}
	aq->select_loc = p->t->loc;
	next(p);
	TRY(parse_items(p, &aq->sel_tuple, &aq->cols, &aq->ncols, "select columns"));
	TRY(parse_options(p, aq));
	if (p->t->kind != T_EOF)
		return expected(p, "an option (window, for, order by, limit, categorize, keep) or the end of the query");
	return 0;
}

int query_parse(struct query *q)
{
	struct parser p = { .q = q };
	struct ast_query *aq;
	int err;

	if (q->ast)
		return 0;
	p.a = q->arena;
	err = lex_all(q, q->text, q->len, &q->toks, &q->ntoks);
	if (err)
		return err;
	aq = arena_alloc(q->arena, sizeof(*aq));
	if (!aq)
		return -ENOMEM;
	p.t = q->toks;
	err = parse_query(&p, aq);
	if (err)
		return err;
	q->ast = aq;
	return 0;
}
