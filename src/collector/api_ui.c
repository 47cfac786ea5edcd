// SPDX-License-Identifier: MIT
/*
 * The JSON API behind the UI's pages:
 *
 *   GET /api/ui/dashboard?window=S&step=S&endTs=MS   latency dashboard
 *   GET /api/ui/thresholds                            the rules
 *   PUT /api/ui/thresholds                            replace (JSON body)
 *   GET /api/ui/hosts                                 agents, up/down, losses
 *   GET /api/v2/dependencies?endTs=MS&lookback=MS     Zipkin's links
 *
 * Bad parameters are answered 400 naming the parameter.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "collector/dashboard.h"
#include "collector/deps.h"
#include "collector/ext_http.h"
#include "collector/http_int.h"
#include "collector/otlp_int.h"
#include "collector/thresholds.h"
#include "common/clock.h"
#include "common/log.h"

#define UP_STALE_US (120ull * 1000000)

/* An optional positive integer parameter.  0 absent, 1 set, -EINVAL. */
static int pos_arg(struct http_con *con, const char *k, uint64_t *v,
		   uint64_t max, char *err, size_t errlen, const char *unit)
{
	const char *s = arg(con, k);
	unsigned long long x;
	char *end;

	if (!s)
		return 0;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-' || !x || x > max) {
		snprintf(err, errlen, "%s: '%.40s' is not an integer between 1 and %" PRIu64 " (%s)",
			 k, s, max, unit);
		return -EINVAL;
	}
	*v = x;
	return 1;
}

int api_dashboard(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	uint64_t window = 600, step = 30, end_ms = clock_realtime_ns() / 1000000;
	struct store_reader *r;
	json_t *th, *j;
	char err[200];
	int ret;

	if (pos_arg(con, "window", &window, 86400, err, sizeof(err), "seconds") < 0 ||
	    pos_arg(con, "step", &step, 3600, err, sizeof(err), "seconds") < 0 ||
	    pos_arg(con, "endTs", &end_ms, INT64_MAX / 1000, err, sizeof(err),
		    "epoch milliseconds") < 0)
		return reply_text(c, con, 400, "%s\n", err);
	if (step > window)
		return reply_text(c, con, 400, "step: %" PRIu64 "s is longer than window %" PRIu64 "s\n",
				  step, window);
	if (window / step > 720)
		return reply_text(c, con, 400, "window/step: at most 720 buckets (window %" PRIu64
				  "s / step %" PRIu64 "s)\n", window, step);
	if (end_ms < window * 1000)
		return reply_text(c, con, 400, "endTs: %" PRIu64 " is before the window starts\n",
				  end_ms);
	th = thresholds_get(c->ext->th);
	r = coll_reader_get(c);
	if (!r) {
		json_decref(th);
		return reply_store_err(c, con, -errno);
	}
	j = dashboard_json(r, end_ms * 1000, window * 1000000, step * 1000000, th, &ret);
	coll_reader_put(c, r);
	if (j)
		json_object_set_new(j, "thresholds", th);
	else
		json_decref(th);
	if (!j)
		return reply_store_err(c, con, ret);
	return reply_json(c, con, j);
}

int api_thresholds(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	const struct http_body *body = &rq->body;
	int put = !strcmp(rq->method, "PUT");
	json_error_t je;
	json_t *doc;
	char err[300];
	int ret;

	if (!put) {
		json_t *j = thresholds_get(c->ext->th);

		if (j)
			json_object_set_new(j, "file", json_string(thresholds_path(c->ext->th)));
		return reply_json(c, con, j);
	}
	if (body->too_big)
		return reply_text(c, con, 413, "body: larger than the %zu-byte limit (--max-body)\n",
				  c->max_body);
	doc = json_loadb(body->p ? body->p : "", body->len, JSON_REJECT_DUPLICATES, &je);
	if (!doc)
		return reply_text(c, con, 400, "body: line %d column %d: %s\n", je.line, je.column,
				  je.text);
	/* The file's own "file" key is what GET adds: ignore it on the way back. */
	json_object_del(doc, "file");
	ret = thresholds_set(c->ext->th, doc, err, sizeof(err));
	json_decref(doc);
	if (ret == -EINVAL)
		return reply_text(c, con, 400, "%s\n", err);
	if (ret)
		return reply_text(c, con, 500, "%s\n", err);
	pr_info("collector: thresholds updated (%s)", thresholds_path(c->ext->th));
	{
		struct http_rq get = *rq;	/* answer what GET would */

		get.method = "GET";
		return api_thresholds(c, con, &get);
	}
}

/* ---- hosts ---------------------------------------------------------------- */

/* Sum of the numbers in STATS.lost (every reason a record was lost). */
static json_int_t lost_total(json_t *stats)
{
	json_t *lost = json_object_get(stats, "lost"), *v;
	json_int_t n = 0;
	const char *k;

	json_object_foreach(lost, k, v)
		if (json_is_integer(v))
			n += json_integer_value(v);
	return n;
}

static json_t *host_json(const char *id, const char *host, const char *version,
			 int connected, const char *peer, uint64_t last_seen_us,
			 uint64_t batches, uint64_t spans, const char *stats_text)
{
	json_t *stats = stats_text ? json_loads(stats_text, 0, NULL) : NULL;
	json_t *probes = json_object_get(stats, "probes");
	uint64_t now = clock_realtime_ns() / 1000;

	if (!json_is_array(probes))
		probes = NULL;
	return json_pack("{s:s, s:s, s:s, s:b, s:i, s:s, s:I, s:I, s:I, s:I, s:O, s:o, s:o}",
			 "id", id, "host", host ? host : "", "version", version ? version : "",
			 "up", connected > 0 && now - last_seen_us < UP_STALE_US,
			 "connections", connected, "peer", peer ? peer : "",
			 "last_seen_ms", (json_int_t)(last_seen_us / 1000),
			 "batches", (json_int_t)batches, "spans", (json_int_t)spans,
			 "lost", stats ? lost_total(stats) : 0,
			 "lost_by_reason", json_object_get(stats, "lost") ?: json_null(),
			 "probes", probes ? json_incref(probes) : json_array(),
			 "stats", stats ? stats : json_null());
}

struct hosts_ctx {
	struct collector *c;
	json_t *a;
};

/* Agents of the store that this collector has not heard from since it
 * started (they show as down, with what they last said). */
static int stored_agent(void *ctx, const struct store_agent *sa)
{
	struct hosts_ctx *h = ctx;
	struct coll_agent *a;

	pthread_mutex_lock(&h->c->agents_lock);
	for (a = h->c->agents; a; a = a->next)
		if (!strcmp(a->id, sa->id))
			break;
	pthread_mutex_unlock(&h->c->agents_lock);
	if (!a)
		json_array_append_new(h->a, host_json(sa->id, sa->host, sa->version, 0, NULL,
						      sa->last_seen_us, sa->batches, sa->spans,
						      sa->stats));
	return 0;
}

int api_hosts(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	struct hosts_ctx h = { c, json_array() };
	struct store_reader *r;
	int ret;

	pthread_mutex_lock(&c->agents_lock);
	for (struct coll_agent *a = c->agents; a; a = a->next) {
		uint64_t seen = a->last_seen_us;

		/* an open connection is up even when it has been quiet */
		if (a->connected)
			seen = clock_realtime_ns() / 1000;
		json_array_append_new(h.a, host_json(a->id, a->host, a->version, a->connected,
						     a->peer, seen, a->batches, a->spans,
						     a->stats));
	}
	pthread_mutex_unlock(&c->agents_lock);
	r = coll_reader_get(c);
	if (!r) {
		json_decref(h.a);
		return reply_store_err(c, con, -errno);
	}
	ret = store__agents(r, stored_agent, &h);
	coll_reader_put(c, r);
	if (ret) {
		json_decref(h.a);
		return reply_store_err(c, con, ret);
	}
	return reply_json(c, con, json_pack("{s:o, s:o, s:I}", "agents", h.a,
		"otlp_senders", otlp_senders_json(c),
		"now_ms", (json_int_t)(clock_realtime_ns() / 1000000)));
}

/* The query connections and what each runs (cluster.h). */
int api_cluster_peers(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	char *s = cluster_peers_json(c->cluster);
	json_t *a = s ? json_loads(s, 0, NULL) : NULL;

	free(s);
	if (!a)
		return reply_text(c, con, 500, "out of memory\n");
	return reply_json(c, con, json_pack("{s:o, s:I}", "peers", a,
		"now_ms", (json_int_t)(clock_realtime_ns() / 1000000)));
}

/* ---- dependencies ---------------------------------------------------------- */

int api_dependencies(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	uint64_t end_ms = 0, lookback = 86400000ull;
	struct store_reader *r;
	char err[200];
	json_t *j;
	int ret;

	if (pos_arg(con, "endTs", &end_ms, INT64_MAX / 1000, err, sizeof(err),
		    "epoch milliseconds") < 0 ||
	    pos_arg(con, "lookback", &lookback, INT64_MAX / 1000, err, sizeof(err),
		    "milliseconds") < 0)
		return reply_text(c, con, 400, "%s\n", err);
	if (!end_ms)
		return reply_text(c, con, 400, "endTs: required (epoch milliseconds)\n");
	if (lookback > end_ms)
		lookback = end_ms;
	r = coll_reader_get(c);
	if (!r)
		return reply_store_err(c, con, -errno);
	/* Zipkin: span timestamps in ms within [endTs - lookback, endTs] */
	j = deps_json(r, (end_ms - lookback) * 1000, end_ms * 1000 + 999, &ret);
	coll_reader_put(c, r);
	if (!j)
		return reply_store_err(c, con, ret);
	return reply_json(c, con, j);
}
