// SPDX-License-Identifier: MIT
/*
 * The agent's side of cluster queries (qclient.h): the query connection
 * is common/qlink.c; here, what runs a query: the query driver
 * (engine/driver.h) with windows aligned to the wall clock and raw rows,
 * and a sink that sends each window as a PARTIAL (the host's merge of
 * the per-CPU partials), streamed records in batches, and QSTATUS; or, for
 * a query in keep mode ('keep DUR'), that keeps its records in a keep
 * buffer (engine/keepbuf.h, registered in keepreg.h) for a capture by
 * query instead of sending them.  The
 * driver checks the job's stop flag every QC_TICK_MS, so probes are
 * detached within that (and the time it takes to free the programs)
 * after a CANCEL or the loss of the connection.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/flight.h"
#include "agent/keepreg.h"
#include "agent/qclient.h"
#include "agent/spantap.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/qlink.h"
#include "engine/driver.h"
#include "query/partial.h"

#define QC_TICK_MS		100
#define QC_STREAM_FLUSH		(64u << 10)

/* One running query. */
struct runner {
	struct qlink_job *job;
	const char *host;
	struct wbuf stream;		/* records not yet sent */
	uint64_t nrecords;
	struct keepbuf *keep;		/* keep mode: records kept here, not sent */
};

static int send_frame(struct runner *r, unsigned type, const struct wbuf *w)
{
	return qlink_send(r->job->link, type, w);
}

/* The head of a PARTIAL for this host. */
static void partial_head(struct runner *r, unsigned flags, uint64_t start, uint64_t end,
			 const uint64_t counters[ENGINE_NCOUNTERS], struct wbuf *w)
{
	struct wire_phost me = { .state = WIRE_HS_ANSWERED };
	struct wire_partial p = {
		.qid = r->job->qid, .flags = flags, .start_ns = start, .end_ns = end,
		.ncounters = ENGINE_NCOUNTERS, .nhosts = 1, .hosts = &me,
	};

	snprintf(me.name, sizeof(me.name), "%s", r->host);
	for (int i = 0; i < ENGINE_NCOUNTERS; i++)
		p.counters[i] = counters ? counters[i] : 0;
	wire_partial_encode_head(&p, w);
}

/* ---- the runner's sink -------------------------------------------------- */

static int on_attached(void *ctx, struct engine *e)
{
	struct runner *r = ctx;
	char desc[2048] = "";
	size_t n = 0;

	for (int i = 0; i < engine_nprobes(e) && n < sizeof(desc) - 1; i++)
		n += (size_t)snprintf(desc + n, sizeof(desc) - n, "%s%s", i ? ", " : "",
				      engine_probe_desc(e, i));
	/* how a function(...) source runs and why (inline, uprobe: ...) */
	if (engine_note(e)[0] && n < sizeof(desc) - 1)
		snprintf(desc + n, sizeof(desc) - n, "; %s", engine_note(e));
	return qlink_status(r->job, WIRE_QS_ATTACHED, desc);
}

static int on_result(void *ctx, struct engine *e, const struct engine_result *res,
		     const struct engine_window *win)
{
	struct runner *r = ctx;
	const struct plan *p = engine_plan(e);
	unsigned flags = win->windowed ? WIRE_PF_WINDOW : WIRE_PF_SNAPSHOT;
	struct wbuf w = { 0 };
	int err;

	if (win->final)
		flags |= WIRE_PF_FINAL;
	partial_head(r, flags, win->start_ns, win->end_ns, res->counters, &w);
	partial_shape_encode(p, &w);
	wbuf_uvar(&w, res->nrows);
	for (size_t i = 0; i < res->nrows; i++)
		partial_row_encode(p, res->rows[i].key, res->rows[i].val, &w);
	err = send_frame(r, WIRE_PARTIAL, &w);
	wbuf_free(&w);
	return err;
}

/* Send the records gathered so far (and, final, the end of the stream). */
static int flush_stream(struct runner *r, struct engine *e, bool final,
			const uint64_t counters[ENGINE_NCOUNTERS])
{
	const struct plan *p = engine_plan(e);
	struct wbuf w = { 0 };
	uint64_t now = clock_realtime_ns();
	int err;

	if (!r->nrecords && !final)
		return 0;
	partial_head(r, WIRE_PF_STREAM | (final ? WIRE_PF_FINAL : 0), now, now, counters, &w);
	partial_shape_encode(p, &w);
	wbuf_uvar(&w, r->nrecords);
	wbuf_put(&w, r->stream.p, r->stream.len);
	err = r->stream.err ? r->stream.err : send_frame(r, WIRE_PARTIAL, &w);
	wbuf_free(&w);
	r->stream.len = 0;
	r->nrecords = 0;
	return err;
}

static int on_record(void *ctx, struct engine *e, const void *rec, size_t size)
{
	struct runner *r = ctx;

	if (r->keep) {
		keepbuf_add(r->keep, rec, clock_realtime_ns());
		return 0;
	}
	partial_record_encode(engine_plan(e), rec, &r->stream);
	r->nrecords++;
	return r->stream.len >= QC_STREAM_FLUSH ? flush_stream(r, e, false, NULL) : 0;
}

static int on_batch_end(void *ctx, struct engine *e)
{
	return flush_stream(ctx, e, false, NULL);
}

static int on_stream_end(void *ctx, struct engine *e, const uint64_t c[ENGINE_NCOUNTERS])
{
	return flush_stream(ctx, e, true, c);
}

static void run_job(struct qlink_job *job)
{
	const struct qclient_opts *c = job->ctx;
	struct runner rr = { .job = job, .host = c->host }, *r = &rr;
	struct query_opts qo = { .sz = sizeof(qo), .tracefs = c->tracefs, .cluster = true };
	struct engine_sink sink = {
		.sz = sizeof(sink), .attached = on_attached, .record = on_record,
		.result = on_result, .batch_end = on_batch_end,
		.stream_end = on_stream_end, .ctx = r,
	};
	struct engine_drive_opts o = {
		.sz = sizeof(o), .stop = &job->stop, .watch_fd = -1, .align = true,
		.raw = true, .snapshot_ns = 1000000000ull, .tick_ms = QC_TICK_MS,
		.deadline_realtime_ns = job->deadline_ns,
		.eo = { .host = c->host, .inject_lib = c->inject_lib, .no_inject = c->no_inject,
			.cgroup = c->cgroup, .shm_dir = c->shm_dir },
	};
	char why[4096] = "";
	const struct plan *p;
	struct query *q;
	int rc;

	engine_opts_requester(&o.eo, c->allow_other_users);
	q = engine_plan_text("<cluster query>", job->text, job->len, &qo, &p, why,
			     sizeof(why));
	if (!q) {
		qlink_status(job, WIRE_QS_FAILED, why);
		return;
	}
	o.err = why;
	o.errlen = sizeof(why);
	if (p->mode == PLAN_STREAM && p->keep_ns) {
		if (!c->keeps) {
			qlink_status(job, WIRE_QS_FAILED, "keep mode: this agent keeps no events");
			query_free(q);
			return;
		}
		r->keep = keepbuf_new((uint32_t)p->record_size, p->keep_ns, p->keep_max);
		if (!r->keep || keepreg_add(c->keeps, wire_query_key(job->text, job->len), r->keep,
					    p)) {
			qlink_status(job, WIRE_QS_FAILED, "keep mode: out of memory");
			keepbuf_free(r->keep);
			query_free(q);
			return;
		}
	}
	if (c->tap) {		/* spans(...): the drain thread feeds them */
		o.spans_attach = spantap_attach;
		o.spans_detach = spantap_detach;
		o.spans_ctx = c->tap;
	}
	rc = engine_drive(q, p, &o, &sink);
	if (rc == ENGINE_DRIVE_QUERY || (rc < 0 && query_error(q)))
		qlink_status(job, WIRE_QS_FAILED, query_error(q));
	else if (rc < 0 && rc != -EPIPE && rc != -ENOTCONN)
		qlink_status(job, WIRE_QS_FAILED, why[0] ? why : strerror(-rc));
	else if (!job->stop)
		qlink_status(job, WIRE_QS_ENDED, "");
	pr_info("query %" PRIu32 ": %s", job->qid, job->stop ? "cancelled, probes detached" :
		rc ? (why[0] ? why : "failed") : "ended");
	if (r->keep) {
		struct keepbuf_stats ks;

		keepreg_remove(c->keeps, r->keep);
		keepbuf_get_stats(r->keep, clock_realtime_ns(), &ks);
		pr_info("query %" PRIu32 ": keep mode: %" PRIu64 " events kept, %" PRIu64
			" overwritten, %" PRIu64 " older dropped", job->qid, ks.added,
			ks.overwritten, ks.expired);
		keepbuf_free(r->keep);
	}
	wbuf_free(&r->stream);
	query_free(q);
}

/* A capture by query: the events appended to its BATCH payload. */
struct kept_out {
	struct wbuf *w;
	uint32_t n;
	bool cut;
};

/* Overwrite the u32 at w->p + at, little-endian (a length written first
 * as 0); nothing after a failed append. */
static void patch_le32(struct wbuf *w, size_t at, uint32_t v)
{
	if (w->err)
		return;
	for (int i = 0; i < 4; i++)
		w->p[at + i] = (unsigned char)(v >> (8 * i));
}

static int put_kept(void *ctx, const struct plan *p, const void *rec, uint64_t t_ns)
{
	struct kept_out *k = ctx;
	size_t at = k->w->len;
	uint32_t len;

	if (at >= WIRE_CAPTURE_MAX) {	/* the oldest fill the frame */
		k->cut = true;
		return 1;
	}
	wbuf_le32(k->w, 0);
	wbuf_le64(k->w, t_ns);
	partial_record_encode(p, rec, k->w);
	if (k->w->err)
		return 1;
	len = (uint32_t)(k->w->len - at - 4);
	patch_le32(k->w, at, len);
	k->n++;
	return 0;
}

/* A CAPTURE of a query's kept events (kind QUERY): "off" when no query of
 * that key keeps events here. */
static void capture_kept(const struct qclient_opts *o, const struct wire_capture *c,
			 struct wire_captured *res, struct wbuf *out)
{
	struct kept_out k = { .w = out };
	struct keepbuf_stats st;
	uint64_t n = 0;
	int nbufs;

	wbuf_le32(out, 0);
	nbufs = o->keeps ? keepreg_each(o->keeps, c->trace_lo, c->from_ns, c->to_ns,
					clock_realtime_ns(), put_kept, &k, &n, &st) : 0;
	if (!nbufs) {
		res->state = WIRE_CS_OFF;
		return;
	}
	patch_le32(out, 0, k.n);
	res->state = WIRE_CS_ANSWERED;
	res->flags = k.cut ? WIRE_CF_CUT : 0;
	res->held = st.held;
	res->dropped = st.overwritten;
	res->lost = st.overwritten;
	res->oldest_ns = st.oldest_ns;
	pr_info("capture %" PRIu32 ": %" PRIu32 " kept events found, %" PRIu64
		" overwritten before%s", c->cid, k.n, st.overwritten,
		k.cut ? ", cut to one frame" : "");
}

/* A CAPTURE from the collector: the spans of the flight buffer it asks
 * for (flight.h), or "off" without one; or a query's kept events. */
static void on_capture(void *ctx, const struct wire_capture *c, struct wire_captured *res,
		       struct wbuf *spans)
{
	const struct qclient_opts *o = ctx;
	struct flight_stats st;
	long n;
	int cut;

	if (c->kind == WIRE_CK_QUERY) {
		capture_kept(o, c, res, spans);
		return;
	}
	if (!o->flight) {
		res->state = WIRE_CS_OFF;
		wbuf_le32(spans, 0);
		return;
	}
	n = flight_capture(o->flight, c, spans, WIRE_CAPTURE_MAX, &cut, &res->lost, &st);
	res->state = WIRE_CS_ANSWERED;
	res->flags = cut ? WIRE_CF_CUT : 0;
	res->held = st.held;
	res->dropped = st.dropped;
	res->oldest_ns = st.oldest_ns;
	pr_info("capture %" PRIu32 ": %ld spans found (%s), %" PRIu64 " already overwritten%s",
		c->cid, n, c->kind == WIRE_CK_TRACE ? "by trace id" : "by time", res->lost,
		cut ? ", cut to one frame" : "");
}

struct qclient *qclient_start(const struct qclient_opts *o)
{
	struct qlink_opts lo = {
		.upper = o->collector, .host = o->host, .agent_id = o->agent_id,
		.token = o->token, .tls = o->tls, .run = run_job, .ctx = o, .ctx_size = sizeof(*o),
		.capture = on_capture,
	};

	return (struct qclient *)qlink_start(&lo);
}

void qclient_stop(struct qclient *c)
{
	qlink_stop((struct qlink *)c);
}

void qclient_set_token(struct qclient *c, const char *token)
{
	qlink_set_token((struct qlink *)c, token);
}
