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
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "common/log.h"
#include "common/qlink.h"
#include "common/rand.h"
#include "engine/driver.h"

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

struct ctree *ctree_start(struct cluster *cl, const char *parent, const char *host,
			  const char *token, struct tls_conf *tls)
{
	struct tctx t = { .cl = cl };
	struct qlink_opts lo = {
		.upper = parent, .token = token, .tls = tls, .collector = true,
		.what = "link to the parent collector", .run = run_job,
		.ctx = &t, .ctx_size = sizeof(t),
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
