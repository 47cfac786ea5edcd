// SPDX-License-Identifier: MIT
/*
 * fay collector --parent HOST:PORT: this collector as an intermediate
 * aggregator (cluster.h).  It keeps a query connection to its parent
 * (common/qlink.c, HELLO with "collector": true) and runs each query the
 * parent sends on its own agents (and child collectors) with
 * cluster_query_run(); what it merged goes up as one PARTIAL per window
 * naming every host under it (cquery_out.c), so the parent merges one
 * partial per subtree and the answer is the same whatever the tree's
 * shape (every merge is associative and commutative).
 *
 * A CAPTURE from the parent (the flight recorder, #22) is made on this
 * collector's own agents (cluster_capture_run()) and answered as one
 * host: the records every agent under it found, in one BATCH payload,
 * their flight buffers' counts summed.  A CAPTURE naming a host (--host
 * H through the tree) asks only that host under this one, and is
 * answered "no such host" (WIRE_CS_NOHOST) when none is.  Hosts under it
 * asked that did not answer make it "missing" (WIRE_CS_MISSING) when no
 * one answered, or mark its answer partial (WIRE_CF_PARTIAL).  It waits
 * CTREE_CAPTURE_NS at most (on the link's thread, which sends no BEAT
 * meanwhile: that plus a beat's interval stays under WIRE_DEAD_MS), so
 * that its answer reaches the parent within the parent's own 5 s.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "common/log.h"
#include "common/qlink.h"
#include "common/rand.h"
#include "engine/driver.h"

#define CTREE_CAPTURE_NS	2000000000ull

/* The link's context: what a job needs. */
struct tctx {
	struct cluster *cl;
	char host[256];
	char id[33];
};

static int no_lines(void *ctx, const char *json, size_t len)
{
	return 0;
}

static void run_job(struct qlink_job *job)
{
	struct tctx *t = job->ctx;
	struct query_opts qo = { .sz = sizeof(qo), .cluster = true };
	struct cluster_qopts co = { .up = job, .all = true };
	struct qengine_env env = { .emit = no_lines, .stop = (const volatile int *)&job->stop };
	const struct plan *p;
	char err[2048] = "";
	struct query *q = engine_plan_text("<cluster query>", job->text, job->len, &qo, &p,
					   err, sizeof(err));
	int ret;

	if (!q) {
		qlink_status(job, WIRE_QS_FAILED, err);
		return;
	}
	ret = cluster_query_run(t->cl, q, p, job->text, &co, &env, err, sizeof(err));
	if (ret && ret != -EPIPE && err[0])
		qlink_status(job, WIRE_QS_FAILED, err);
	query_free(q);
}

/* The parent's CAPTURE c, made on this collector's agents. */
static void tree_capture(void *ctx, const struct wire_capture *c, struct wire_captured *res,
			 struct wbuf *spans)
{
	struct tctx *t = ctx;
	char service[WIRE_SERVICE_MAX + 1], host[WIRE_HOST_MAX + 1];
	struct cluster_capture_req rq = {
		.kind = c->kind, .trace_hi = c->trace_hi, .trace_lo = c->trace_lo,
		.from_ns = c->from_ns, .to_ns = c->to_ns, .timeout_ns = CTREE_CAPTURE_NS,
	};
	struct cluster_capture_res r;
	size_t at = spans->len;
	uint32_t count = 0;
	bool answered = false;
	size_t nohost = 0, missing = 0;

	snprintf(service, sizeof(service), "%.*s", (int)c->service_len,
		 c->service ? c->service : "");
	rq.service = service[0] ? service : NULL;
	snprintf(host, sizeof(host), "%.*s", (int)c->host_len, c->host ? c->host : "");
	rq.host = host[0] ? host : NULL;
	res->state = WIRE_CS_OFF;
	wbuf_le32(spans, 0);		/* the count, set below */
	if (cluster_capture_run(t->cl, &rq, &r)) {
		cluster_capture_res_free(&r);
		return;
	}
	for (size_t i = 0; i < r.n; i++) {
		const struct cluster_capture_host *h = &r.h[i];

		nohost += h->state == CCH_NOHOST;
		missing += h->state == CCH_MISSING || (h->state == CCH_ANSWERED && h->partial);
		if (h->state != CCH_ANSWERED)
			continue;
		answered = true;
		res->held += h->held;
		res->dropped += h->dropped;
		res->lost += h->lost;
		if (h->oldest_ns && (!res->oldest_ns || h->oldest_ns < res->oldest_ns))
			res->oldest_ns = h->oldest_ns;
		if (h->cut)
			res->flags |= WIRE_CF_CUT;
		if (h->len <= 4)
			continue;
		if (spans->len - at + h->len - 4 > WIRE_CAPTURE_MAX) {
			res->flags |= WIRE_CF_CUT;	/* one frame holds no more */
			continue;
		}
		wbuf_put(spans, h->spans + 4, h->len - 4);	/* its records */
		count += h->nspans;
	}
	if (answered)
		res->state = WIRE_CS_ANSWERED;
	else if (missing)	/* asked, silent or gone: not "no flight buffer" */
		res->state = WIRE_CS_MISSING;
	else if (rq.host && nohost == r.n)	/* no member is that host */
		res->state = WIRE_CS_NOHOST;
	if (answered && missing)
		res->flags |= WIRE_CF_PARTIAL;
	if (!spans->err) {
		spans->p[at] = (unsigned char)count;
		spans->p[at + 1] = (unsigned char)(count >> 8);
		spans->p[at + 2] = (unsigned char)(count >> 16);
		spans->p[at + 3] = (unsigned char)(count >> 24);
	}
	pr_info("capture %" PRIu32 " from the parent: %" PRIu32 " spans from %zu hosts",
		c->cid, count, r.n);
	cluster_capture_res_free(&r);
}

struct ctree *ctree_start(struct cluster *cl, const char *parent, const char *host,
			  const char *token, struct tls_conf *tls)
{
	struct tctx t = { .cl = cl };
	struct qlink_opts lo = {
		.upper = parent, .token = token, .tls = tls, .collector = true,
		.what = "link to the parent collector", .run = run_job,
		.capture = tree_capture, .ctx = &t, .ctx_size = sizeof(t),
	};
	uint64_t r[2];

	if (host && *host)
		snprintf(t.host, sizeof(t.host), "%s", host);
	else if (gethostname(t.host, sizeof(t.host) - 1))
		snprintf(t.host, sizeof(t.host), "collector");
	rand_bytes(r, sizeof(r));
	snprintf(t.id, sizeof(t.id), "%016llx%016llx", (unsigned long long)r[0],
		 (unsigned long long)r[1]);
	lo.host = t.host;
	lo.agent_id = t.id;
	return (struct ctree *)qlink_start(&lo);
}

void ctree_stop(struct ctree *t)
{
	qlink_stop((struct qlink *)t);
}
