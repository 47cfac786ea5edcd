/* SPDX-License-Identifier: MIT */
/*
 * The inside of struct query, shared by the passes in src/query only.
 */
#ifndef FAY_QUERY_QUERY_INT_H
#define FAY_QUERY_QUERY_INT_H

#include "query/query.h"

/* Queries are short; a megabyte is far more than any sane one. */
#define QUERY_MAX_TEXT	(1 << 20)
/* Expression nesting the parser accepts (keeps recursion bounded). */
#define QUERY_MAX_DEPTH	256
/* Aggregates in one query (distinct ones: the same one written twice is
 * one). */
#define QUERY_MAX_AGGRS	64

struct plan;

struct query {
	struct arena *arena;
	const char *source;
	const char *text;
	size_t len;
	const char *tracefs;
	bool cluster;		/* query_opts.cluster */
	struct token *toks;
	int ntoks;
	struct ast_query *ast;
	bool checked;
	struct plan *plan;
	/* tracepoint formats loaded so far */
	struct tp_format **tps;
	int ntps;
	/* first error */
	const char *err, *err_msg;
	int err_line, err_col;
};

#endif
