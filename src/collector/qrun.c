// SPDX-License-Identifier: MIT
/*
 * POST /api/query's engine: runs a planned FayQL query on this host with
 * the engine of src/engine (code generation, load, attach, read) and
 * turns what it yields into the NDJSON lines of qengine.h.
 *
 * It is the loop of `fay query` (engine/session.c) without what does not
 * belong in a server: no signal handlers (the collector owns SIGINT and
 * SIGTERM; a query stops when the HTTP client goes away, *env->stop), no
 * command to start, and output as JSON lines:
 *
 *   streams      {"type":"row","values":[...]} per record ('limit N' rows)
 *   aggregates   {"type":"window","t":MS,"rows":[[...],...],"final":B}
 *                per 'window DUR'; without one, a cumulative snapshot
 *                every second (final: false) so the page fills in while
 *                the query runs, and the final result at the end
 *   always       {"type":"progress","attached":N,"probes":[...]} once
 *                attached, {"type":"dropped",...} when events were lost
 *
 * The query ends at its 'for DUR' (or 'where X.time < now + D'), at
 * 'limit N' for a stream, or when the client leaves.  A verifier
 * rejection comes back as an error at the query's line:col.
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/qengine.h"
#include "common/clock.h"
#include "engine/engine.h"

#define QRUN_SNAPSHOT_NS 1000000000ull
#define QRUN_TICK_MS     100

struct qrun_ctx {
	struct engine *e;
	const struct plan *p;
	const struct qengine_env *env;
	uint64_t rows;
	int werr;
};

/* A JSON object line {"col": v, ...} (the engine's --json output) as the
 * array of its values in column order; new reference or NULL. */
static json_t *values_of(const struct plan *p, const char *line, size_t len)
{
	json_t *o = json_loadb(line, len, 0, NULL), *a;

	if (!o)
		return NULL;
	a = json_array();
	for (int i = 0; a && i < p->ncols; i++) {
		json_t *v = json_object_get(o, p->cols[i].name);

		json_array_append(a, v ? v : json_null());
	}
	json_decref(o);
	return a;
}

static int emit_json(const struct qengine_env *env, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int ret;

	json_decref(j);
	if (!s)
		return -ENOMEM;
	ret = env->emit(env->ctx, s, strlen(s));
	free(s);
	return ret;
}

/* Print with the engine's JSON writer into memory, then hand each line
 * to fn.  0 or -errno. */
static int lines_of(struct qrun_ctx *c, const struct engine_result *res, const void *rec,
		    json_t *rows)
{
	struct engine_out o = { .json = true };
	char *buf = NULL;
	size_t len = 0;
	int ret;

	o.f = open_memstream(&buf, &len);
	if (!o.f)
		return -ENOMEM;
	ret = res ? engine_print_result(c->e, &o, res, 0) : engine_print_record(c->e, &o, rec);
	if (fclose(o.f) && !ret)
		ret = -ENOMEM;
	for (char *l = buf, *nl; !ret && l && *l; l = nl + 1) {
		json_t *v;

		nl = strchr(l, '\n');
		if (!nl)
			break;
		v = values_of(c->p, l, (size_t)(nl - l));
		if (!v) {
			ret = -ENOMEM;
			break;
		}
		if (rows) {
			json_array_append_new(rows, v);
		} else {
			ret = emit_json(c->env, json_pack("{s:s, s:o}", "type", "row", "values", v));
			c->rows++;
		}
	}
	free(buf);
	return ret;
}

static void on_record(void *ctx, const void *rec, size_t size)
{
	struct qrun_ctx *c = ctx;

	if (c->werr || (c->p->limit && c->rows >= c->p->limit))
		return;
	c->werr = lines_of(c, NULL, rec, NULL);
}

/* Read the aggregates (reset: a tumbling window ends) and emit them. */
static int emit_aggregate(struct qrun_ctx *c, bool reset, bool final, uint64_t t_ns)
{
	struct engine_result res = { 0 };
	json_t *rows = json_array();
	int ret;

	if (!rows)
		return -ENOMEM;
	ret = engine_read(c->e, reset, &res);
	if (!ret)
		ret = lines_of(c, &res, NULL, rows);
	engine_result_clear(&res);
	if (ret) {
		json_decref(rows);
		return ret;
	}
	c->rows += json_array_size(rows);
	return emit_json(c->env, json_pack("{s:s, s:I, s:o, s:b}", "type", "window",
		"t", (json_int_t)(t_ns / 1000000), "rows", rows, "final", final));
}

static int emit_dropped(struct qrun_ctx *c)
{
	uint64_t n[ENGINE_NCOUNTERS];
	json_t *o;

	if (engine_counters(c->e, n))
		return 0;
	o = json_object();
	for (int i = 0; o && i < ENGINE_NCOUNTERS; i++)
		if (n[i])
			json_object_set_new(o, engine_counter_desc(i), json_integer((json_int_t)n[i]));
	if (!json_object_size(o)) {
		json_decref(o);
		return 0;
	}
	return emit_json(c->env, json_pack("{s:s, s:o}", "type", "dropped", "counters", o));
}

/* The engine's or the query's message for a failure. */
static void fail_msg(struct query *q, struct engine *e, char *err, size_t errlen)
{
	const char *m = query_error(q) ? query_error(q) : e ? engine_error(e) : "";
	size_t n;

	if (!m || !*m)
		return;
	snprintf(err, errlen, "%s", m);
	n = strlen(err);
	while (n && err[n - 1] == '\n')
		err[--n] = '\0';
}

int fay_query_engine_run(struct query *q, const struct plan *p,
			 const struct qengine_env *env, char *err, size_t errlen)
{
	struct engine_opts eo = { .sz = sizeof(eo) };
	struct qrun_ctx c = { .p = p, .env = env };
	uint64_t start, deadline = 0, next = 0, wstart;
	bool stream = p->mode == PLAN_STREAM;
	json_t *probes;
	int ret;

	c.e = engine_new(q, p, &eo, err, errlen);
	if (!c.e) {
		ret = -errno;
		fail_msg(q, NULL, err, errlen);
		return ret ? ret : -EINVAL;
	}
	ret = engine_load(c.e);
	ret = ret ? : engine_attach(c.e);
	if (ret) {
		fail_msg(q, c.e, err, errlen);
		goto out;
	}
	if (stream)
		engine_set_record_fn(c.e, on_record, &c);
	probes = json_array();
	for (int i = 0; probes && i < engine_nprobes(c.e); i++)
		json_array_append_new(probes, json_string(engine_probe_desc(c.e, i)));
	ret = emit_json(env, json_pack("{s:s, s:i, s:o}", "type", "progress",
				       "attached", engine_nprobes(c.e), "probes", probes));
	start = clock_monotonic_ns();
	wstart = clock_realtime_ns();
	if (p->for_ns)
		deadline = start + p->for_ns;
	if (!stream)
		next = start + (p->window_ns ? p->window_ns : QRUN_SNAPSHOT_NS);
	while (!ret && !*env->stop) {
		int sfd = engine_stream_fd(c.e);
		uint64_t now = clock_monotonic_ns();

		if (deadline && now >= deadline)
			break;
		if (next && now >= next) {
			uint64_t t = wstart;

			if (p->window_ns) {
				wstart = clock_realtime_ns();
				next += p->window_ns;
			} else {
				t = clock_realtime_ns();
				next += QRUN_SNAPSHOT_NS;
			}
			ret = emit_aggregate(&c, p->window_ns > 0, false, t);
			continue;
		}
		if (sfd >= 0) {
			struct pollfd pf = { .fd = sfd, .events = POLLIN };

			if (poll(&pf, 1, QRUN_TICK_MS) > 0)
				engine_consume(c.e);
			ret = c.werr;
			if (p->limit && c.rows >= p->limit)
				break;
		} else {
			poll(NULL, 0, QRUN_TICK_MS);
		}
	}
	if (!ret && !*env->stop) {
		if (stream)
			engine_consume(c.e);
		else
			ret = emit_aggregate(&c, p->window_ns > 0, true,
					     p->window_ns ? wstart : clock_realtime_ns());
		ret = ret ? : c.werr ? : emit_dropped(&c);
	}
	if (ret && ret != -EPIPE && !err[0])
		snprintf(err, errlen, "%s", strerror(-ret));
out:
	engine_free(c.e);
	return *env->stop ? -EPIPE : ret;
}
