// SPDX-License-Identifier: MIT
/*
 * POST /api/query's engine: a sink of the query driver (engine/driver.h,
 * the same loop as `fay query`) that turns what it yields into the
 * NDJSON lines of qengine.h, written straight from the rows.
 *
 * No signal handlers (the collector owns SIGINT and SIGTERM; a query
 * stops when the HTTP client goes away, *env->stop, checked every
 * QRUN_TICK_MS), no command to start, and output as JSON lines:
 *
 *   streams      {"type":"row","values":[...]} per record ('limit N' rows)
 *   aggregates   {"type":"window","t":MS,"rows":[[...],...],"final":B}
 *                (with 'categorize': "categories" and "changed" too,
 *                engine_print_cats_json())
 *                per 'window DUR'; without one, a cumulative snapshot
 *                every second (final: false) so the page fills in while
 *                the query runs, and the final result at the end
 *   always       {"type":"progress","attached":N,"probes":[...]} once
 *                attached; {"type":"dropped","counters":{...}} after a
 *                window, the final result or a stream's end when events
 *                were lost
 *
 * The query ends at its 'for DUR' (or 'where X.time < now + D'), at
 * 'limit N' for a stream, or when the client leaves.  A verifier
 * rejection comes back as an error at the query's line:col.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_str.h"
#include "engine/driver.h"
#include "engine/qengine.h"

#define QRUN_SNAPSHOT_NS 1000000000ull
#define QRUN_TICK_MS     100

/* One NDJSON object being written (open_memstream), handed to emit. */
struct line {
	char *buf;
	size_t len;
	FILE *f;
};

static int line_open(struct line *l)
{
	memset(l, 0, sizeof(*l));
	l->f = open_memstream(&l->buf, &l->len);
	return l->f ? 0 : -ENOMEM;
}

/* Close l and emit it (unless err); frees l.  Returns err or emit's. */
static int line_emit(const struct qengine_env *env, struct line *l, int err)
{
	if (fclose(l->f) && !err)
		err = -ENOMEM;
	if (!err)
		err = env->emit(env->ctx, l->buf, l->len);
	free(l->buf);
	return err;
}

static int on_attached(void *ctx, struct engine *e)
{
	const struct qengine_env *env = ctx;
	struct line l;
	int err = line_open(&l);

	if (err)
		return err;
	fprintf(l.f, "{\"type\":\"progress\",\"attached\":%d,\"probes\":[",
		engine_nprobes(e));
	for (int i = 0; i < engine_nprobes(e); i++) {
		const char *d = engine_probe_desc(e, i);

		if (i)
			fputc(',', l.f);
		json_str(l.f, d, strlen(d));
	}
	fputs("]}", l.f);
	return line_emit(env, &l, 0);
}

static int on_record(void *ctx, struct engine *e, const void *rec, size_t size)
{
	const struct qengine_env *env = ctx;
	struct line l;
	int err = line_open(&l);

	if (err)
		return err;
	fputs("{\"type\":\"row\",\"values\":", l.f);
	err = engine_print_values(engine_plan(e), l.f, NULL, rec);
	fputc('}', l.f);
	return line_emit(env, &l, err);
}

/* {"type":"dropped","counters":{"<what>":n,...}} when anything was. */
static int emit_dropped(const struct qengine_env *env, const uint64_t c[ENGINE_NCOUNTERS])
{
	struct line l;
	int err, n = 0;

	for (int i = 0; i < ENGINE_NCOUNTERS; i++)
		n += c[i] != 0;
	if (!n)
		return 0;
	err = line_open(&l);
	if (err)
		return err;
	fputs("{\"type\":\"dropped\",\"counters\":{", l.f);
	for (int i = 0, k = 0; i < ENGINE_NCOUNTERS; i++) {
		const char *d = engine_counter_desc(i);

		if (!c[i])
			continue;
		if (k++)
			fputc(',', l.f);
		json_str(l.f, d, strlen(d));
		fprintf(l.f, ":%" PRIu64, c[i]);
	}
	fputs("}}", l.f);
	return line_emit(env, &l, 0);
}

static int on_result(void *ctx, struct engine *e, const struct engine_result *res,
		     const struct engine_window *w)
{
	const struct qengine_env *env = ctx;
	const struct plan *p = engine_plan(e);
	struct line l;
	int err = line_open(&l);

	if (err)
		return err;
	fprintf(l.f, "{\"type\":\"window\",\"t\":%" PRIu64 ",\"rows\":[",
		(w->windowed ? w->start_ns : w->end_ns) / 1000000);
	for (size_t r = 0; !err && r < res->nrows; r++) {
		if (r)
			fputc(',', l.f);
		err = engine_print_values(p, l.f, res->rows[r].key, res->rows[r].val);
	}
	fprintf(l.f, "],\"final\":%s", w->final ? "true" : "false");
	if (res->cats) {
		fputc(',', l.f);
		engine_print_cats_json(res->cats, l.f);
	}
	fputc('}', l.f);
	err = line_emit(env, &l, err);
	/* drop counters: per window, and with the final result */
	if (!err && (w->windowed || w->final))
		err = emit_dropped(env, res->counters);
	return err;
}

static int on_stream_end(void *ctx, struct engine *e, const uint64_t c[ENGINE_NCOUNTERS])
{
	return emit_dropped(ctx, c);
}

int fay_query_engine_run(struct query *q, const struct plan *p,
			 const struct qengine_env *env, char *err, size_t errlen)
{
	struct engine_sink sink = {
		.sz = sizeof(sink), .attached = on_attached, .record = on_record,
		.result = on_result, .stream_end = on_stream_end,
		.ctx = (void *)env,
	};
	struct engine_drive_opts o = {
		.sz = sizeof(o), .stop = env->stop, .watch_fd = -1,
		.snapshot_ns = QRUN_SNAPSHOT_NS, .tick_ms = QRUN_TICK_MS,
		.err = err, .errlen = errlen,
	};
	int ret;

	engine_opts_requester(&o.eo, env->allow_other_users);
	if (env->own_only) {		/* #20: another user's request */
		o.eo.uid = env->uid;
		o.eo.own_uid_only = true;
	}
	ret = engine_drive(q, p, &o, &sink);

	if (ret && query_error(q)) {	/* at the query's line:col */
		size_t n;

		snprintf(err, errlen, "%s", query_error(q));
		n = strlen(err);
		while (n && err[n - 1] == '\n')
			err[--n] = '\0';
	}
	if (ret > 0)
		ret = -EINVAL;
	if (*env->stop)
		return -EPIPE;
	if (ret && ret != -EPIPE && !err[0])
		snprintf(err, errlen, "%s", strerror(-ret));
	return ret;
}
