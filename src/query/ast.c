// SPDX-License-Identifier: MIT
/*
 * AST dumps: text (one node per line, two spaces of indent per level,
 * '@LINE:COL' positions, sema's findings in brackets) and JSON.  Both are
 * stable: golden tests diff them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/json_str.h"
#include "query/query.h"
#include "query/query_int.h"

void dump_cstr(FILE *f, const char *s, size_t len)
{
	fputc('"', f);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = s[i];

		switch (c) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\t': fputs("\\t", f); break;
		case '\r': fputs("\\r", f); break;
		default:
			if (c < 0x20 || c >= 0x7f)
				fprintf(f, "\\x%02x", c);
			else
				fputc(c, f);
		}
	}
	fputc('"', f);
}

static void indent(FILE *f, int d)
{
	for (int i = 0; i < d; i++)
		fputs("  ", f);
}

static void put_loc(FILE *f, const struct loc *l)
{
	fprintf(f, " @%d:%d", l->line, l->col);
}

void dump_dur(FILE *f, uint64_t ns)
{
	static const struct { uint64_t ns; const char *u; } u[] = {
		{ 3600000000000ull, "h" }, { 60000000000ull, "m" },
		{ 1000000000ull, "s" }, { 1000000ull, "ms" }, { 1000ull, "us" },
	};

	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		if (ns && ns % u[i].ns == 0) {
			fprintf(f, "%" PRIu64 "%s", ns / u[i].ns, u[i].u);
			return;
		}
	fprintf(f, "%" PRIu64 "ns", ns);
}

static void put_type(FILE *f, const struct node *n)
{
	switch (n->type) {
	case VT_INT: fputs(" : int", f); break;
	case VT_STR: fprintf(f, " : string[%d]", n->strsize); break;
	case VT_DIST: fputs(" : dist", f); break;
	default: break;
	}
}

static void put_sem(FILE *f, const struct query *q, const struct node *n)
{
	const struct ast_query *aq = q->ast;

	switch (n->sem) {
	case S_FIELD:
		fprintf(f, " [field %s]", field_name(n->field));
		break;
	case S_ARG:
		fprintf(f, " [arg %" PRIu64 "]", n->ival);
		break;
	case S_TPFIELD:
		fprintf(f, " [tpfield %s offset=%d size=%d%s%s]", n->tpf->ctype,
			n->tpf->offset, n->tpf->size,
			n->tpf->is_signed ? " signed" : "",
			n->tpf->data_loc ? " data_loc" : "");
		break;
	case S_LET:
		fprintf(f, " [let %d %s]", n->idx, aq->lets[n->idx]->name);
		break;
	case S_STRREAD:
		fputs(" [read string]", f);
		break;
	case S_KEY:
		fprintf(f, " [key %d]", n->idx);
		break;
	case S_AGGR:
		fprintf(f, " [aggregate %d %s]", n->idx,
			aggr_name(aq->adesc[n->idx].kind));
		break;
	case S_NOW:
		fputs(" [time limit]", f);
		break;
	case S_COL:
		fprintf(f, " [column %d]", n->idx);
		break;
	case S_TAG:
		fprintf(f, " [tag %d \"%s\"]", n->idx, aq->tags[n->idx]);
		break;
	default:
		break;
	}
	if (n->needs_exit)
		fputs(" [exit]", f);
}

static void dump_node(FILE *f, const struct query *q, const struct node *n, int d)
{
	indent(f, d);
	switch (n->kind) {
	case N_INT:
		fprintf(f, "int %" PRIu64, n->ival);
		if (n->is_dur) {
			fputs(" (", f);
			dump_dur(f, n->ival);
			fputs(")", f);
		}
		break;
	case N_FLOAT:
		fprintf(f, "number %g", n->fval);
		break;
	case N_STR:
		fputs("string ", f);
		dump_cstr(f, n->str, n->len);
		break;
	case N_IDENT:
		fprintf(f, "ident %s", n->name);
		break;
	case N_MEMBER:
		if (n->a->kind == N_IDENT)
			fprintf(f, "member %s.%s", n->a->name, n->name);
		else
			fprintf(f, "member .%s", n->name);
		break;
	case N_CALL:
		if (n->a && n->a->kind == N_IDENT)
			fprintf(f, "call %s.%s", n->a->name, n->name);
		else
			fprintf(f, "call %s", n->name);
		break;
	case N_UNARY:
		fprintf(f, "unary %s", op_str(n->op));
		break;
	case N_BINARY:
		fprintf(f, "binary %s", op_str(n->op));
		break;
	}
	put_loc(f, &n->loc);
	put_type(f, n);
	put_sem(f, q, n);
	fputc('\n', f);
	if (n->a && !((n->kind == N_MEMBER || n->kind == N_CALL) &&
		      n->a->kind == N_IDENT))
		dump_node(f, q, n->a, d + 1);
	if (n->b)
		dump_node(f, q, n->b, d + 1);
	for (int i = 0; i < n->nargs; i++)
		dump_node(f, q, n->args[i], d + 1);
}

static void dump_source(FILE *f, const struct ast_source *src)
{
	fprintf(f, "  source %s", src_kind_name(src->kind));
	if (src->arg) {
		fputc(' ', f);
		dump_cstr(f, src->arg, strlen(src->arg));
	}
	if (src->kind == SRC_PFUNC)
		fprintf(f, " pid=%" PRId64, src->num);
	if (src->kind == SRC_PROFILE)
		fprintf(f, " hz=%" PRId64, src->num);
	if (src->scope == SCOPE_CLUSTER)
		fputs(" scope=cluster", f);
	if (src->scope == SCOPE_HOST)
		fprintf(f, " scope=host(%s)", src->scope_host);
	put_loc(f, &src->loc);
	fputc('\n', f);
	if (src->tp)
		fprintf(f, "    tracepoint %s:%s fields=%d\n", src->tp->sys,
			src->tp->event, src->tp->nfields);
}

static void dump_items(FILE *f, const struct query *q, const char *what,
		       const struct ast_item *items, int n)
{
	for (int i = 0; i < n; i++) {
		fprintf(f, "    %s ", what);
		dump_cstr(f, items[i].name, strlen(items[i].name));
		put_loc(f, &items[i].name_loc);
		fputc('\n', f);
		dump_node(f, q, items[i].e, 3);
	}
}

int query_dump_ast(const struct query *q, FILE *f)
{
	const struct ast_query *aq = q->ast;

	if (!aq)
		return -EINVAL;
	fprintf(f, "query");
	put_loc(f, &aq->loc);
	fprintf(f, "\n  from %s", aq->var);
	put_loc(f, &aq->var_loc);
	fputc('\n', f);
	dump_source(f, &aq->src);
	for (int i = 0; i < aq->nclauses; i++) {
		const struct ast_clause *c = &aq->clauses[i];

		if (c->kind == C_WHERE) {
			fputs("  where", f);
			put_loc(f, &c->loc);
		} else {
			fprintf(f, "  let %s", c->name);
			put_loc(f, &c->name_loc);
		}
		fputc('\n', f);
		dump_node(f, q, c->e, 2);
	}
	if (aq->group) {
		const struct ast_group *g = aq->group;

		fprintf(f, "  group %s into %s%s", g->var, g->into,
			g->tuple ? " tuple" : "");
		put_loc(f, &g->loc);
		fputc('\n', f);
		dump_items(f, q, "key", g->keys, g->nkeys);
	}
	fprintf(f, "  select%s", aq->sel_tuple ? " tuple" : "");
	put_loc(f, &aq->select_loc);
	fputc('\n', f);
	dump_items(f, q, "column", aq->cols, aq->ncols);
	for (int i = 0; i < aq->nopts; i++) {
		const struct ast_option *o = &aq->opts[i];

		switch (o->kind) {
		case O_WINDOW:
		case O_FOR:
			fprintf(f, "  %s ", o->kind == O_WINDOW ? "window" : "for");
			dump_dur(f, o->val);
			break;
		case O_ORDER:
			fprintf(f, "  order %s", o->desc ? "desc" : "asc");
			break;
		case O_LIMIT:
			fprintf(f, "  limit %" PRIu64, o->val);
			break;
		case O_KEEP:
			fputs("  keep ", f);
			dump_dur(f, o->val);
			if (o->max)
				fprintf(f, " max %" PRIu64, o->max);
			break;
		case O_CATEGORIZE:
			fprintf(f, "  categorize %s by", o->cat->entity);
			for (int j = 0; j < o->cat->nfeat; j++)
				fprintf(f, "%s %s", j ? "," : "", o->cat->feat[j]);
			if (o->cat->value)
				fprintf(f, " using %s", o->cat->value);
			if (o->cat->k)
				fprintf(f, " into %d", o->cat->k);
			else
				fputs(" into auto", f);
			break;
		}
		put_loc(f, &o->loc);
		fputc('\n', f);
		if (o->e)
			dump_node(f, q, o->e, 2);
	}
	if (q->checked) {
		fprintf(f, "  checked %s aggregates=%d lets=%d",
			aq->aggregating ? "aggregate" : "stream", aq->naggrs,
			aq->nlets);
		if (aq->for_ns) {
			fputs(" for=", f);
			dump_dur(f, aq->for_ns);
		}
		fputc('\n', f);
	}
	return ferror(f) ? -EIO : 0;
}

/* ---- JSON ---------------------------------------------------------------- */

static void jloc(FILE *f, const struct loc *l)
{
	fprintf(f, "\"line\":%d,\"col\":%d", l->line, l->col);
}

static void jkey(FILE *f, const char *k, const char *v)
{
	fprintf(f, ",\"%s\":", k);
	json_str(f, v, strlen(v));
}

static void json_node(FILE *f, const struct query *q, const struct node *n)
{
	static const char *const kinds[] = {
		[N_INT] = "int", [N_FLOAT] = "number", [N_STR] = "string",
		[N_IDENT] = "ident", [N_MEMBER] = "member", [N_CALL] = "call",
		[N_UNARY] = "unary", [N_BINARY] = "binary",
	};
	static const char *const types[] = {
		[VT_NONE] = NULL, [VT_INT] = "int", [VT_STR] = "string",
		[VT_DIST] = "dist",
	};
	static const char *const sems[] = {
		[S_NONE] = NULL, [S_FIELD] = "field", [S_ARG] = "arg",
		[S_TPFIELD] = "tpfield", [S_LET] = "let", [S_STRREAD] = "str",
		[S_KEY] = "key", [S_AGGR] = "aggregate", [S_NOW] = "time_limit",
		[S_COL] = "column", [S_TAG] = "tag",
	};

	fprintf(f, "{\"kind\":\"%s\",", kinds[n->kind]);
	jloc(f, &n->loc);
	switch (n->kind) {
	case N_INT:
		fprintf(f, ",\"value\":%" PRIu64, n->ival);
		if (n->is_dur)
			fputs(",\"duration\":true", f);
		break;
	case N_FLOAT:
		fprintf(f, ",\"value\":%.17g", n->fval);
		break;
	case N_STR:
		fputs(",\"value\":", f);
		json_str(f, n->str, n->len);
		break;
	case N_UNARY:
	case N_BINARY:
		jkey(f, "op", op_str(n->op));
		break;
	default:
		jkey(f, "name", n->name);
		break;
	}
	if (types[n->type])
		jkey(f, "type", types[n->type]);
	if (n->type == VT_STR)
		fprintf(f, ",\"size\":%d", n->strsize);
	if (sems[n->sem]) {
		jkey(f, "means", sems[n->sem]);
		if (n->sem == S_FIELD)
			jkey(f, "field", field_name(n->field));
		else if (n->sem == S_TPFIELD)
			fprintf(f, ",\"offset\":%d,\"bytes\":%d,\"signed\":%s",
				n->tpf->offset, n->tpf->size,
				n->tpf->is_signed ? "true" : "false");
		else if (n->sem == S_ARG)
			fprintf(f, ",\"index\":%" PRIu64, n->ival);
		else if (n->sem != S_STRREAD && n->sem != S_NOW)
			fprintf(f, ",\"index\":%d", n->idx);
	}
	if (n->needs_exit)
		fputs(",\"exit\":true", f);
	if (n->a) {
		fputs(",\"a\":", f);
		json_node(f, q, n->a);
	}
	if (n->b) {
		fputs(",\"b\":", f);
		json_node(f, q, n->b);
	}
	if (n->kind == N_CALL) {
		fputs(",\"args\":[", f);
		for (int i = 0; i < n->nargs; i++) {
			if (i)
				fputc(',', f);
			json_node(f, q, n->args[i]);
		}
		fputc(']', f);
	}
	fputc('}', f);
}

static void json_items(FILE *f, const struct query *q, const struct ast_item *it, int n)
{
	fputc('[', f);
	for (int i = 0; i < n; i++) {
		fprintf(f, "%s{\"name\":", i ? "," : "");
		json_str(f, it[i].name, strlen(it[i].name));
		fprintf(f, ",\"named\":%s,", it[i].named ? "true" : "false");
		jloc(f, &it[i].name_loc);
		fputs(",\"expr\":", f);
		json_node(f, q, it[i].e);
		fputc('}', f);
	}
	fputc(']', f);
}

int query_dump_ast_json(const struct query *q, FILE *f)
{
	const struct ast_query *aq = q->ast;
	const struct ast_source *src;

	if (!aq)
		return -EINVAL;
	src = &aq->src;
	fputs("{\"kind\":\"query\",", f);
	jloc(f, &aq->loc);
	jkey(f, "from", aq->var);
	fputs(",\"source\":{", f);
	jloc(f, &src->loc);
	jkey(f, "kind", src_kind_name(src->kind));
	if (src->arg)
		jkey(f, "target", src->arg);
	if (src->kind == SRC_PFUNC)
		fprintf(f, ",\"pid\":%" PRId64, src->num);
	if (src->kind == SRC_PROFILE)
		fprintf(f, ",\"hz\":%" PRId64, src->num);
	jkey(f, "scope", src->scope == SCOPE_CLUSTER ? "cluster" :
			 src->scope == SCOPE_HOST ? "host" : "local");
	if (src->scope_host)
		jkey(f, "host", src->scope_host);
	fputs("},\"clauses\":[", f);
	for (int i = 0; i < aq->nclauses; i++) {
		const struct ast_clause *c = &aq->clauses[i];

		fprintf(f, "%s{\"kind\":\"%s\",", i ? "," : "",
			c->kind == C_WHERE ? "where" : "let");
		jloc(f, &c->loc);
		if (c->name)
			jkey(f, "name", c->name);
		if (c->time_limit)
			fputs(",\"time_limit\":true", f);
		fputs(",\"expr\":", f);
		json_node(f, q, c->e);
		fputc('}', f);
	}
	fputc(']', f);
	if (aq->group) {
		fputs(",\"group\":{", f);
		jloc(f, &aq->group->loc);
		jkey(f, "var", aq->group->var);
		jkey(f, "into", aq->group->into);
		fprintf(f, ",\"tuple\":%s,\"keys\":", aq->group->tuple ? "true" : "false");
		json_items(f, q, aq->group->keys, aq->group->nkeys);
		fputc('}', f);
	}
	fprintf(f, ",\"select\":{\"tuple\":%s,", aq->sel_tuple ? "true" : "false");
	jloc(f, &aq->select_loc);
	fputs(",\"columns\":", f);
	json_items(f, q, aq->cols, aq->ncols);
	fputs("},\"options\":[", f);
	for (int i = 0; i < aq->nopts; i++) {
		const struct ast_option *o = &aq->opts[i];
		static const char *const names[] = { "window", "for", "order", "limit",
						     "categorize", "keep" };

		fprintf(f, "%s{\"kind\":\"%s\",", i ? "," : "", names[o->kind]);
		jloc(f, &o->loc);
		if (o->kind == O_CATEGORIZE) {
			fputs(",\"entity\":", f);
			json_str(f, o->cat->entity, strlen(o->cat->entity));
			fputs(",\"features\":[", f);
			for (int j = 0; j < o->cat->nfeat; j++) {
				if (j)
					fputc(',', f);
				json_str(f, o->cat->feat[j], strlen(o->cat->feat[j]));
			}
			fputs("],\"using\":", f);
			if (o->cat->value)
				json_str(f, o->cat->value, strlen(o->cat->value));
			else
				fputs("null", f);
			if (o->cat->k)
				fprintf(f, ",\"k\":%d", o->cat->k);
			else
				fputs(",\"k\":\"auto\"", f);
		} else if (o->kind == O_ORDER) {
			fprintf(f, ",\"desc\":%s,\"expr\":", o->desc ? "true" : "false");
			json_node(f, q, o->e);
		} else {
			fprintf(f, ",\"%s\":%" PRIu64, o->kind == O_LIMIT ? "rows" : "ns",
				o->val);
			if (o->kind == O_KEEP && o->max)
				fprintf(f, ",\"max\":%" PRIu64, o->max);
		}
		fputc('}', f);
	}
	fputc(']', f);
	if (q->checked)
		fprintf(f, ",\"aggregating\":%s,\"for_ns\":%" PRIu64,
			aq->aggregating ? "true" : "false", aq->for_ns);
	fputs("}\n", f);
	return ferror(f) ? -EIO : 0;
}
