/* SPDX-License-Identifier: MIT */
/*
 * How POST /api/query runs a compiled FayQL query: through an engine
 * that streams result lines.  The route (api_query.c) compiles the query
 * (errors at line:col), then picks the first engine that takes it:
 *
 *   1. fay_query_engine_run(), when the query engine (src/query +
 *      src/bpf) defines it: probes on this host.  It is declared weak
 *      here; until it is linked in (cmd_query.c pulls it in once `fay
 *      query` runs queries), the route goes on to 2.
 *   2. none: 501 "query execution not available yet" (the query is
 *      valid: errors in it are still answered 400 at line:col).
 *
 * An engine emits one JSON object per call of emit (no newline; the route
 * frames them as NDJSON, chunked):
 *   {"type":"row","values":[...]}            one row (column order)
 *   {"type":"window","t":MS,"rows":[[...]]}  a window's rows (window DUR)
 *   {"type":"progress", ...}                 anything informative
 * and returns 0 at the end of the query, or -errno with a message in err.
 * emit returns -EPIPE when the client went away: stop then.  *stop is set
 * too; check it between events.
 */
#ifndef FAY_COLLECTOR_QENGINE_H
#define FAY_COLLECTOR_QENGINE_H

#include <stddef.h>

#include "query/plan.h"
#include "query/query.h"

struct store;

typedef int (*qengine_emit_fn)(void *ctx, const char *json, size_t len);

struct qengine_env {
	struct store *store;      /* the collector's store */
	qengine_emit_fn emit;
	void *ctx;
	const volatile int *stop;
};

/* The host query engine, defined by src/query/src/bpf when it exists. */
int fay_query_engine_run(struct query *q, const struct plan *p,
			 const struct qengine_env *env, char *err, size_t errlen)
	__attribute__((weak));

#endif
