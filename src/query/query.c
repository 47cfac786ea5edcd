// SPDX-License-Identifier: MIT
/*
 * The query object: source text, arena, AST, first error.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "query/query.h"
#include "query/query_int.h"

struct query *query_new(const char *source, const char *text, size_t len,
			const struct query_opts *opts)
{
	struct query *q;
	struct arena *a;

	if (!source || !text)
		return fay_err_ptr(-EINVAL);
	if (len > QUERY_MAX_TEXT)
		return fay_err_ptr(-E2BIG);
	a = arena_new();
	if (!a)
		return fay_err_ptr(-ENOMEM);
	q = arena_alloc(a, sizeof(*q));
	if (!q)
		goto err_out;
	q->arena = a;
	q->source = arena_strndup(a, source, strlen(source));
	q->text = arena_strndup(a, text, len);
	q->len = len;
	if (!q->source || !q->text)
		goto err_out;
	if (opts && opts->sz >= offsetof(struct query_opts, cluster) + sizeof(opts->cluster))
		q->cluster = opts->cluster;
	if (opts && opts->sz >= offsetof(struct query_opts, tracefs) + sizeof(opts->tracefs) &&
	    opts->tracefs) {
		q->tracefs = arena_strndup(a, opts->tracefs, strlen(opts->tracefs));
		if (!q->tracefs)
			goto err_out;
	}
	return q;

err_out:
	arena_free(a);
	return fay_err_ptr(-ENOMEM);
}

void query_free(struct query *q)
{
	if (q)
		arena_free(q->arena);	/* q itself lives in the arena */
}

struct arena *query_arena(struct query *q)
{
	return q->arena;
}

const char *query_text(const struct query *q)
{
	return q->text;
}

const char *query_tracefs_opt(const struct query *q)
{
	return q->tracefs;
}

const struct ast_query *query_ast(const struct query *q)
{
	return q->ast;
}

const char *query_error(const struct query *q)
{
	return q->err;
}

const char *query_error_msg(const struct query *q)
{
	return q->err_msg;
}

void query_error_pos(const struct query *q, int *line, int *col)
{
	if (line)
		*line = q->err_line;
	if (col)
		*col = q->err_col;
}

/* Source line 'line' (1-based) as [start, start + *len). */
static const char *line_at(const struct query *q, int off, size_t *len)
{
	size_t s = (size_t)off, e;

	if (s > q->len)
		s = q->len;
	while (s > 0 && q->text[s - 1] != '\n')
		s--;
	for (e = s; e < q->len && q->text[e] != '\n'; e++)
		;
	*len = e - s;
	return q->text + s;
}

int query_errorf(struct query *q, const struct loc *loc, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	size_t cap, n = 0, llen = 0;
	const char *line = NULL;
	char *out;

	if (q->err)	/* keep the first error */
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	q->err_msg = arena_strndup(q->arena, msg, strlen(msg));

	if (loc && loc->line > 0)
		line = line_at(q, loc->off, &llen);
	cap = strlen(q->source) + strlen(msg) + 2 * llen + 64;
	out = arena_alloc(q->arena, cap);
	if (!out || !q->err_msg)
		return -ENOMEM;
	if (!line) {
		n = snprintf(out, cap, "%s: error: %s\n", q->source, msg);
	} else {
		q->err_line = loc->line;
		q->err_col = loc->col;
		n = snprintf(out, cap, "%s:%d:%d: error: %s\n", q->source,
			     loc->line, loc->col, msg);
		/* The line, control bytes shown as '?', then a caret under
		 * the column; tabs are kept so the caret lines up. */
		for (size_t i = 0; i < llen && n < cap - 1; i++) {
			unsigned char c = line[i];

			out[n++] = (c == '\t' || (c >= 0x20 && c != 0x7f)) ? c : '?';
		}
		out[n++] = '\n';
		for (int i = 0; i < loc->col - 1 && n < cap - 3; i++)
			out[n++] = (size_t)i < llen && line[i] == '\t' ? '\t' : ' ';
		out[n++] = '^';
		out[n++] = '\n';
		out[n] = '\0';
	}
	q->err = out;
	return -EINVAL;
}
