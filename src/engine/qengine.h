/* SPDX-License-Identifier: MIT */
/*
 * How POST /api/query runs a compiled FayQL query: through an engine
 * that streams result lines.  The route (api_query.c) compiles the query
 * (errors at line:col) and hands the plan to fay_query_engine_run():
 * src/engine/qrun.c runs it on this host with src/engine (load,
 * attach, read).  A test binary may link its own definition first (the
 * UI test's stand-in, tests/ui/fake_qengine.c): then the archive's qrun.o
 * is not linked.
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
#ifndef FAY_ENGINE_QENGINE_H
#define FAY_ENGINE_QENGINE_H

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
	/* a non-root collector's queries probe every user's processes
	 * (fay collector --allow-other-users) */
	bool allow_other_users;
};

/* Run the query on this host (qrun.c). */
int fay_query_engine_run(struct query *q, const struct plan *p,
			 const struct qengine_env *env, char *err, size_t errlen);

#endif
