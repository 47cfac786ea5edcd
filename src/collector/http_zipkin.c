// SPDX-License-Identifier: MIT
/*
 * Zipkin's v2 API on the collector's HTTP server (zipkin-server's
 * ZipkinQueryApiV2 and ZipkinHttpCollector: spans as JSON or protobuf,
 * zproto.c), /health and /metrics.  Reads take a store reader from the
 * collector's pool; a POST is stored through the ingest thread and
 * answered 202 only after its COMMIT.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster/standing.h"
#include "collector/capture_rules.h"
#include "collector/collector_int.h"
#include "collector/ext_http.h"
#include "collector/http_int.h"
#include "collector/zjson.h"
#include "collector/zproto.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/version.h"
#include "common/zlib.h"

#define DEFAULT_LOOKBACK_MS 86400000ull  /* Zipkin's zipkin.query.lookback */
#define MAX_LIMIT           100000

/* ---- parameters --------------------------------------------------------- */

/* A lower-cased copy of a name parameter, NULL when absent or empty (or
 * "all" for spanName, as Zipkin).  *mem owns it. */
static const char *name_arg(struct http_con *con, const char *k, char **mem)
{
	const char *v = arg(con, k);

	*mem = NULL;
	if (!v || !*v)
		return NULL;
	*mem = strdup(v);
	if (!*mem)
		return NULL;
	for (char *p = *mem; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	if (!strcmp(k, "spanName") && !strcmp(*mem, "all")) {
		free(*mem);
		*mem = NULL;
	}
	return *mem;
}

/* A positive decimal parameter.  0 absent (v untouched), 1 set, -EINVAL. */
static int num_arg(struct http_con *con, const char *k, uint64_t *v,
		   char *err, size_t errlen, const char *unit)
{
	const char *s = arg(con, k);
	char *end;
	unsigned long long x;

	if (!s)
		return 0;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-' || !x || x > INT64_MAX) {
		snprintf(err, errlen, "%s: '%.40s' is not a positive integer (%s)", k, s, unit);
		return -EINVAL;
	}
	*v = x;
	return 1;
}

/* ---- routes: names ------------------------------------------------------ */

static json_t *names_json(const struct store_names *n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n->n; i++)
		json_array_append_new(a, json_stringn(n->v[i].p, n->v[i].len));
	return a;
}

int http_zipkin_names(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	/* 0 /services, 1 /spans, 2 /remoteServices (of /api/v2) */
	int which = !strcmp(rq->url, "/api/v2/spans") ? 1 :
		    !strcmp(rq->url, "/api/v2/remoteServices") ? 2 : 0;
	struct store_names n = { 0 };
	struct store_reader *r;
	char *svc_mem = NULL;
	const char *svc = NULL;
	int ret;

	if (which) {
		svc = name_arg(con, "serviceName", &svc_mem);
		if (!svc)
			return reply_text(c, con, 400, "serviceName: required\n");
	}
	r = coll_reader_get(c);
	if (!r) {
		free(svc_mem);
		return reply_store_err(c, con, -errno);
	}
	ret = which == 0 ? store__services(r, &n) :
	      which == 1 ? store__span_names(r, svc, &n) :
			   store__remote_services(r, svc, &n);
	coll_reader_put(c, r);
	free(svc_mem);
	if (ret) {
		store_names_free(&n);
		return reply_store_err(c, con, ret);
	}
	json_t *j = names_json(&n);

	store_names_free(&n);
	return reply_json(c, con, j);
}

/* ---- routes: traces ----------------------------------------------------- */

static json_t *traces_json(const struct store_traces *t)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < t->n; i++) {
		if (json_array_append_new(a, zjson_spans(t->v[i].spans, t->v[i].n))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int http_zipkin_traces(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	struct store_query q = { .limit = 10, .lookback_ms = DEFAULT_LOOKBACK_MS };
	struct store_traces t = { 0 };
	char *svc = NULL, *rsvc = NULL, *sname = NULL, *aq = NULL;
	struct store_reader *r;
	uint64_t limit = 10;
	char err[256];
	int res;
	int ret = 0, has_max;

	q.end_ts_ms = clock_realtime_ns() / 1000000;
	q.service = name_arg(con, "serviceName", &svc);
	q.remote_service = name_arg(con, "remoteServiceName", &rsvc);
	q.span_name = name_arg(con, "spanName", &sname);
	if (arg(con, "annotationQuery")) {
		aq = strdup(arg(con, "annotationQuery"));
		if (!aq || store_query_parse_aq(&q, aq, err, sizeof(err))) {
			ret = -EINVAL;
			goto bad;
		}
	}
	if (num_arg(con, "minDuration", &q.min_duration_us, err, sizeof(err), "microseconds") < 0 ||
	    (has_max = num_arg(con, "maxDuration", &q.max_duration_us, err, sizeof(err),
			       "microseconds")) < 0 ||
	    num_arg(con, "endTs", &q.end_ts_ms, err, sizeof(err), "epoch milliseconds") < 0 ||
	    num_arg(con, "lookback", &q.lookback_ms, err, sizeof(err), "milliseconds") < 0 ||
	    num_arg(con, "limit", &limit, err, sizeof(err), "traces") < 0) {
		ret = -EINVAL;
		goto bad;
	}
	if (has_max && !q.min_duration_us) {
		snprintf(err, sizeof(err), "maxDuration is only valid with minDuration");
		ret = -EINVAL;
		goto bad;
	}
	if (has_max && q.max_duration_us < q.min_duration_us) {
		snprintf(err, sizeof(err), "maxDuration < minDuration");
		ret = -EINVAL;
		goto bad;
	}
	q.limit = limit > MAX_LIMIT ? MAX_LIMIT : (unsigned)limit;
	r = coll_reader_get(c);
	if (!r) {
		ret = -errno;
		goto store_err;
	}
	ret = store__traces(r, &q, &t);
	coll_reader_put(c, r);
	if (ret)
		goto store_err;
	res = reply_json(c, con, traces_json(&t));
	goto out;
bad:
	res = reply_text(c, con, 400, "%s\n", err);
	goto out;
store_err:
	res = reply_store_err(c, con, ret);
out:
	store_traces_free(&t);
	free(svc);
	free(rsvc);
	free(sname);
	free(aq);
	return res;
}

/*
 * GET /health: UP (200) while the store answers and its disk is not low;
 * DOWN (503) with the store's reason when it does not (a ClickHouse
 * server down or slow; the agents' batches are NACKed meanwhile and
 * resent once it is back), or with "disk":{"status":"LOW",...} while the
 * store's disk is below its watermark (store.h: new spans are refused
 * until the space is back).
 */
int http_health(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	char why[256] = "";
	int down = store__health(c->store, why, sizeof(why)) != 0;
	json_t *store = json_pack("{ssss}", "backend", store__backend(c->store),
				  "status", down ? "DOWN" : "UP");
	struct store_disk d;
	json_t *disk;

	store__disk(c->store, &d);
	disk = json_pack("{ss}", "status", d.low ? "LOW" : "OK");
	if (disk && d.total) {
		json_object_set_new(disk, "free_bytes", json_integer((json_int_t)d.avail));
		json_object_set_new(disk, "min_free_bytes", json_integer((json_int_t)d.min_free));
	}
	if (disk && d.low)
		json_object_set_new(disk, "error", json_string(d.why));
	if (store && down)
		json_object_set_new(store, "error", json_string(why));
	down |= d.low;
	return reply_json_status(c, con, down ? 503 : 200,
		json_pack("{sssssIsoso}", "status", down ? "DOWN" : "UP",
			  "version", FAY_VERSION, "uptime_s",
			  (json_int_t)((clock_realtime_ns() / 1000 - c->started_us) / 1000000),
			  "store", store, "disk", disk));
}

int http_zipkin_trace(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	const char *id = rq->rest;
	struct store_traces t = { 0 };
	struct store_reader *r;
	uint64_t hi, lo;
	char err[160], hex[33];
	int res;
	int ret;

	if (!*id)
		return reply_text(c, con, 404, "no such route: %s %s\n", rq->method, rq->url);
	if (zjson_trace_id(id, strlen(id), &hi, &lo, err, sizeof(err)))
		return reply_text(c, con, 400, "%s\n", err);
	r = coll_reader_get(c);
	if (!r)
		return reply_store_err(c, con, -errno);
	ret = store__trace(r, hi, lo, &t);
	coll_reader_put(c, r);
	if (ret < 0)
		res = reply_store_err(c, con, ret);
	else if (!ret) {
		spanrec_trace_hex(hi, lo, hex);
		res = reply_text(c, con, 404, "%s not found\n", hex);
	} else {
		res = reply_json(c, con, zjson_spans(t.v[0].spans, t.v[0].n));
	}
	store_traces_free(&t);
	return res;
}

int http_zipkin_trace_many(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	const char *ids = arg(con, "traceIds");
	uint64_t (*v)[2] = NULL;
	struct store_traces t = { 0 };
	struct store_reader *r;
	size_t n = 0, cap = 0;
	char err[200];
	int res;
	int ret = 0;

	if (!ids)
		return reply_text(c, con, 400, "traceIds: required (comma-separated trace ids)\n");
	if (!*ids)
		return reply_text(c, con, 400, "traceIds parameter is empty\n");
	for (const char *p = ids; ; ) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		uint64_t hi, lo;

		if (zjson_trace_id(p, len, &hi, &lo, err, sizeof(err))) {
			free(v);
			return reply_text(c, con, 400, "traceIds: %s\n", err);
		}
		for (size_t i = 0; i < n; i++) {
			if (v[i][0] == hi && v[i][1] == lo) {
				free(v);
				return reply_text(c, con, 400, "redundant traceId: %.*s\n",
						  (int)len, p);
			}
		}
		if (n == cap) {
			void *nv = realloc(v, sizeof(*v) * (cap = cap ? cap * 2 : 16));

			if (!nv) {
				free(v);
				return reply_text(c, con, 500, "out of memory\n");
			}
			v = nv;
		}
		v[n][0] = hi;
		v[n][1] = lo;
		n++;
		if (!e)
			break;
		p = e + 1;
	}
	if (n == 1) {
		free(v);
		return reply_text(c, con, 400,
				  "Use /api/v2/trace/{traceId} endpoint to retrieve a single trace\n");
	}
	r = coll_reader_get(c);
	if (!r) {
		free(v);
		return reply_store_err(c, con, -errno);
	}
	for (size_t i = 0; i < n && ret >= 0; i++)
		ret = store__trace(r, v[i][0], v[i][1], &t);
	coll_reader_put(c, r);
	free(v);
	if (ret < 0)
		res = reply_store_err(c, con, ret);
	else
		res = reply_json(c, con, traces_json(&t));
	store_traces_free(&t);
	return res;
}


/* ---- POST /api/v2/spans ------------------------------------------------- */

int http_zipkin_post(struct collector *c, struct http_con *con, const struct http_rq *r)
{
	const struct http_body *rq = &r->body;
	const char *enc = http_header(con, "Content-Encoding");
	const char *type = http_header(con, "Content-Type");
	struct zarena a = { .budget = &c->mem };    /* the decoded request, charged */
	struct store_batch b = { 0 };
	struct zspan *spans;
	const char *body = rq->p;
	char *plain = NULL;
	size_t len = rq->len, n = 0, charged = 0;
	char err[512];
	int res;
	int ret;

	if (rq->too_big) {
		M_ADD(c, http_spans_dropped, 1);
		return reply_text(c, con, 413, "body: larger than the %zu-byte limit (--max-body)\n",
				  c->max_body);
	}
	if (type && strcasestr(type, "thrift")) {
		M_ADD(c, http_spans_dropped, 1);
		return reply_text(c, con, 415, "Content-Type %s: only JSON (application/json) or "
				  "protobuf (application/x-protobuf) is accepted\n", type);
	}
	if (enc && !strcasecmp(enc, "gzip")) {
		ret = gunzip(&c->mem, rq->p, rq->len, c->max_body, &plain, &len, &charged, err,
			     sizeof(err));
		if (ret == -ENOBUFS) {
			/* like a body that did not fit: busy, retry */
			char *s = NULL;
			int sl = asprintf(&s, "%s\n", err);

			M_ADD(c, http_busy, 1);
			return sl < 0 ? HTTPD_NO : reply_hdr(con, 503, "text/plain; charset=utf-8",
							     s, (size_t)sl, "Retry-After", "1");
		}
		if (ret) {
			M_ADD(c, http_spans_dropped, 1);
			return reply_text(c, con, ret == -E2BIG ? 413 : ret == -ENOMEM ? 500 : 400,
					  "%s\n", err);
		}
		body = plain;
	} else if (enc && strcasecmp(enc, "identity")) {
		M_ADD(c, http_spans_dropped, 1);
		return reply_text(c, con, 415, "Content-Encoding %s: only gzip is accepted\n", enc);
	}
	if (type && strcasestr(type, "protobuf"))
		ret = zproto_parse_spans(body ? body : "", len, &a, &spans, &n, err, sizeof(err));
	else
		ret = zjson_parse_spans(body ? body : "", len, &a, &spans, &n, err, sizeof(err));
	free(plain);
	mem_budget_give(&c->mem, charged);
	if (ret && a.over) {
		/* like a body that did not fit: busy, retry */
		char *s = NULL;
		int sl = asprintf(&s, "the decoded request does not fit in --max-memory (%zu bytes"
				  " decoded so far): retry later\n", a.charged);

		zarena_reset(&a);
		M_ADD(c, http_busy, 1);
		return sl < 0 ? HTTPD_NO : reply_hdr(con, 503, "text/plain; charset=utf-8",
						     s, (size_t)sl, "Retry-After", "1");
	}
	if (ret) {
		M_ADD(c, spans_rejected, n ? n : 1);
		M_ADD(c, http_spans_dropped, n ? n : 1);
		pr_debug("http: POST /api/v2/spans refused: %s", err);
		zarena_reset(&a);
		return reply_text(c, con, ret == -ENOMEM ? 500 : 400, "%s\n", err);
	}
	M_ADD(c, spans_received, n);
	b.spans = spans;
	b.nspans = n;
	(void)store__prepare(c->store, &b, &a); /* else the writer does it */
	ret = n ? ingest_write(c->ingest, &b, err, sizeof(err)) : 0;
	zarena_reset(&a);
	if (ret) {
		/* store down or disk low: the sender may retry */
		char *s = NULL;
		int sl = asprintf(&s, "store: %s\n", err);

		M_ADD(c, http_spans_dropped, n);
		res = sl < 0 ? HTTPD_NO : reply_hdr(con, 503, "text/plain; charset=utf-8", s,
						    (size_t)sl, "Retry-After", "1");
	} else {
		M_ADD(c, spans_stored, b.stored);
		res = reply(con, 202, "text/plain", strdup(""), 0);
	}
	return res;
}

/* ---- /metrics ------------------------------------------------------------ */

int http_metrics(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	char *buf = NULL;
	size_t blen = 0;
	FILE *f = open_memstream(&buf, &blen);

	if (!f)
		return reply_text(c, con, 500, "out of memory\n");
	coll_metrics_write(c, f);
	coll_ext_metrics(c, f);
	standing_metrics(c->standing, f);
	crules_metrics(c->rules, f);
	if (fclose(f)) {
		free(buf);
		return reply_text(c, con, 500, "out of memory\n");
	}
	return reply(con, 200, "text/plain; version=0.0.4; charset=utf-8", buf, blen);
}
