// SPDX-License-Identifier: MIT
/*
 * The HTTP side of the collector (default 127.0.0.1:9411), on
 * libmicrohttpd (with the route files of http_int.h): Zipkin's v2 API
 * (zipkin-server's ZipkinQueryApiV2 and ZipkinHttpCollector: spans as
 * JSON or protobuf, zproto.c), /health and
 * /metrics.
 *
 * One thread per connection (MHD_USE_THREAD_PER_CONNECTION): a handler may
 * block on the store (a query, or the writer committing a POST).  Reads
 * take a store reader from the collector's pool; a POST is stored through
 * the ingest thread and answered 202 only after its COMMIT.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zlib.h>

#include "collector/collector.h"
#include "collector/http_int.h"
#include "collector/zjson.h"
#include "collector/zproto.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/net.h"
#include "common/version.h"

#define DEFAULT_LOOKBACK_MS 86400000ull  /* Zipkin's zipkin.query.lookback */
#define MAX_LIMIT           100000
#define HTTP_CONNS          1024u    /* connections at once */
#define HTTP_PER_IP         64u      /* ... from one address (not loopback) */
#define HTTP_IDLE_S         15u      /* an idle connection is closed after */

struct http_server {
	struct collector *c;
	struct MHD_Daemon *d;
	int fd;
	int otlp_only;          /* --otlp-http: POST /v1/traces alone */
	int loopback;           /* listens on 127.0.0.0/8 or ::1 */
	char addr[64];
};

/* Per request. */
struct req {
	char *body;
	size_t len, cap;
	int too_big;
	int answered;           /* a response is queued */
	unsigned status;        /* refused on its headers: the answer */
	size_t dropped;         /* body bytes read and dropped since */
	char msg[256];
};

const char *http_server_addr(const struct http_server *hs)
{
	return hs->addr;
}

/* ---- responses ---------------------------------------------------------- */

enum MHD_Result reply(struct MHD_Connection *con, unsigned status,
		      const char *type, char *body, size_t len)
{
	return reply_hdr(con, status, type, body, len, NULL, NULL);
}

enum MHD_Result reply_hdr(struct MHD_Connection *con, unsigned status, const char *type,
			  char *body, size_t len, const char *hname, const char *hval)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	if (hname)
		MHD_add_response_header(r, hname, hval);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET, HEAD, POST");
	ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* A plain-text answer, counted as a bad request when 4xx. */
enum MHD_Result reply_text(struct collector *c, struct MHD_Connection *con,
			   unsigned status, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return MHD_NO;
	if (status >= 400 && status < 500)
		M_ADD(c, http_bad_requests, 1);
	return reply(con, status, "text/plain; charset=utf-8", s, (size_t)n);
}

/* Answer 200 with JSON j (reference taken). */
enum MHD_Result reply_json(struct collector *c, struct MHD_Connection *con,
			   json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (!s)
		return reply_text(c, con, 500, "out of memory\n");
	return reply(con, MHD_HTTP_OK, "application/json", s, strlen(s));
}

enum MHD_Result reply_store_err(struct collector *c, struct MHD_Connection *con,
				int err)
{
	M_ADD(c, store_errors, 1);
	return reply_text(c, con, err == -EBUSY ? 503 : 500, "store: %s\n", errstr(err));
}

/* ---- parameters --------------------------------------------------------- */

const char *arg(struct MHD_Connection *con, const char *k)
{
	return MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, k);
}

/* A lower-cased copy of a name parameter, NULL when absent or empty (or
 * "all" for spanName, as Zipkin).  *mem owns it. */
static const char *name_arg(struct MHD_Connection *con, const char *k, char **mem)
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
static int num_arg(struct MHD_Connection *con, const char *k, uint64_t *v,
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

static enum MHD_Result get_names(struct collector *c, struct MHD_Connection *con,
				 int which)
{
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

static enum MHD_Result get_traces(struct collector *c, struct MHD_Connection *con)
{
	struct store_query q = { .limit = 10, .lookback_ms = DEFAULT_LOOKBACK_MS };
	struct store_traces t = { 0 };
	char *svc = NULL, *rsvc = NULL, *sname = NULL, *aq = NULL;
	struct store_reader *r;
	uint64_t limit = 10;
	char err[256];
	enum MHD_Result res;
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
 * GET /health: UP (200) while the store answers, DOWN (503) with the
 * store's reason when it does not (a ClickHouse server down or slow; the
 * agents' batches are NACKed meanwhile and resent once it is back).
 */
static enum MHD_Result get_health(struct collector *c, struct MHD_Connection *con)
{
	char why[256] = "";
	int down = store__health(c->store, why, sizeof(why)) != 0;
	json_t *store = json_pack("{ssss}", "backend", store__backend(c->store),
				  "status", down ? "DOWN" : "UP");

	if (store && down)
		json_object_set_new(store, "error", json_string(why));
	return reply_json_status(c, con, down ? 503 : 200,
		json_pack("{sssssIso}", "status", down ? "DOWN" : "UP",
			  "version", FAY_VERSION, "uptime_s",
			  (json_int_t)((clock_realtime_ns() / 1000 - c->started_us) / 1000000),
			  "store", store));
}

static enum MHD_Result get_trace(struct collector *c, struct MHD_Connection *con,
				 const char *id)
{
	struct store_traces t = { 0 };
	struct store_reader *r;
	uint64_t hi, lo;
	char err[160], hex[33];
	enum MHD_Result res;
	int ret;

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

static enum MHD_Result get_trace_many(struct collector *c, struct MHD_Connection *con)
{
	const char *ids = arg(con, "traceIds");
	uint64_t (*v)[2] = NULL;
	struct store_traces t = { 0 };
	struct store_reader *r;
	size_t n = 0, cap = 0;
	char err[200];
	enum MHD_Result res;
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

/* Inflate a gzip body into *out (at most max bytes).  0, -E2BIG, -EINVAL. */
int gunzip(const char *in, size_t len, size_t max, char **out, size_t *outlen,
	   char *err, size_t errlen)
{
	z_stream z = { 0 };
	size_t cap = len * 4 + 1024, n = 0;
	char *buf = NULL;
	int zr;

	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		snprintf(err, errlen, "gzip: cannot start inflate");
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	do {
		if (n == cap || !buf) {
			char *nb;

			if (buf)
				cap *= 2;
			if (cap > max + 1)
				cap = max + 1;
			if (buf && n >= cap) {
				free(buf);
				inflateEnd(&z);
				snprintf(err, errlen, "body: more than %zu bytes after gzip decoding", max);
				return -E2BIG;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				inflateEnd(&z);
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			buf = nb;
		}
		z.next_out = (Bytef *)buf + n;
		z.avail_out = (uInt)(cap - n);
		zr = inflate(&z, Z_NO_FLUSH);
		n = cap - z.avail_out;
		if (n > max) {
			free(buf);
			inflateEnd(&z);
			snprintf(err, errlen, "body: more than %zu bytes after gzip decoding", max);
			return -E2BIG;
		}
	} while (zr == Z_OK);
	if (zr != Z_STREAM_END) {
		snprintf(err, errlen, "body: gzip: %s", z.msg ? z.msg :
			 zr == Z_BUF_ERROR ? "truncated stream" : "corrupt stream");
		free(buf);
		inflateEnd(&z);
		return -EINVAL;
	}
	inflateEnd(&z);
	*out = buf;
	*outlen = n;
	return 0;
}

static enum MHD_Result post_spans(struct collector *c, struct MHD_Connection *con,
				  struct req *rq)
{
	const char *enc = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Encoding");
	const char *type = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Type");
	struct zarena a = { 0 };
	struct store_batch b = { 0 };
	struct zspan *spans;
	char *body = rq->body, *plain = NULL;
	size_t len = rq->len, n = 0;
	char err[512];
	enum MHD_Result res;
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
		ret = gunzip(rq->body, rq->len, c->max_body, &plain, &len, err, sizeof(err));
		if (ret) {
			M_ADD(c, http_spans_dropped, 1);
			return reply_text(c, con, ret == -E2BIG ? 413 : 400, "%s\n", err);
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
	ret = n ? ingest_write(c->ingest, &b, err, sizeof(err)) : 0;
	zarena_reset(&a);
	if (ret) {
		M_ADD(c, http_spans_dropped, n);
		res = reply_text(c, con, 503, "store: %s\n", err);
	} else {
		M_ADD(c, spans_stored, b.stored);
		res = reply(con, MHD_HTTP_ACCEPTED, "text/plain", strdup(""), 0);
	}
	return res;
}

/* ---- dispatch ----------------------------------------------------------- */

static enum MHD_Result route(struct collector *c, struct MHD_Connection *con,
			     const char *url, const char *method, struct req *rq)
{
	int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	int post = !strcmp(method, "POST");
	struct http_body body = { rq->body, rq->len, rq->too_big };
	enum MHD_Result ext;

	/* The web UI, its API, /api/query, /v1/traces ... (ext_http.c). */
	if (http_ext_route(c, con, url, method, &body, &ext))
		return ext;
	if (!strcmp(url, "/api/v2/spans")) {
		if (post) {
			if (!http_token_ok(c, con)) {
				M_ADD(c, http_spans_dropped, 1);
				return reply_text(c, con, 401,
					"POST needs 'Authorization: Bearer TOKEN' (the collector runs with --token)\n");
			}
			return post_spans(c, con, rq);
		}
		if (get)
			return get_names(c, con, 1);
	} else if (!post && !get) {
		/* fall through to 405 below when the path exists */
	} else if (!strcmp(url, "/api/v2/services")) {
		if (get)
			return get_names(c, con, 0);
	} else if (!strcmp(url, "/api/v2/remoteServices")) {
		if (get)
			return get_names(c, con, 2);
	} else if (!strcmp(url, "/api/v2/traces")) {
		if (get)
			return get_traces(c, con);
	} else if (!strcmp(url, "/api/v2/traceMany")) {
		if (get)
			return get_trace_many(c, con);
	} else if (!strncmp(url, "/api/v2/trace/", 14) && url[14]) {
		if (get)
			return get_trace(c, con, url + 14);
	} else if (!strcmp(url, "/health")) {
		if (get)
			return get_health(c, con);
	} else if (!strcmp(url, "/metrics")) {
		if (get) {
			size_t len;
			char *s = coll_metrics_text(c, &len);

			if (!s)
				return reply_text(c, con, 500, "out of memory\n");
			return reply(con, 200, "text/plain; version=0.0.4; charset=utf-8", s, len);
		}
	} else {
		return reply_text(c, con, 404, "no such route: %s %s\n", method, url);
	}
	return reply_text(c, con, 405, "%s is not allowed on %s\n", method, url);
}

/*
 * A request refused on its headers (http_screen, or a Content-Length over
 * --max-body) is answered without keeping its body: the body is read and
 * dropped, and the answer sent once it has arrived, so that a client that
 * sends it before reading (curl without Expect: 100-continue) gets the
 * answer instead of a reset.  Past twice --max-body dropped bytes (a
 * chunk of 2^64-1 bytes), or when the framing itself is in doubt (status 400 from
 * http_screen: where the body ends is unknown), it is answered at once and
 * libmicrohttpd closes the connection instead of reading on.
 */
static enum MHD_Result answer(struct collector *c, struct MHD_Connection *con,
			      struct req *rq)
{
	char *body;

	rq->answered = 1;
	if (rq->status != 503)
		return reply_text(c, con, rq->status, "%s", rq->msg);
	/* busy (--max-memory): the client may send it again shortly */
	body = strdup(rq->msg);
	return body ? reply_hdr(con, 503, "text/plain; charset=utf-8", body, strlen(body),
				"Retry-After", "1") : MHD_NO;
}

/* Drop what was received of the body, and its share of --max-memory. */
static void body_free(struct collector *c, struct req *rq)
{
	mem_budget_give(&c->mem, rq->cap);
	free(rq->body);
	rq->body = NULL;
	rq->len = rq->cap = 0;
}

static void refuse(struct collector *c, struct req *rq, unsigned status, const char *msg)
{
	rq->status = status;
	snprintf(rq->msg, sizeof(rq->msg), "%s", msg);
	body_free(c, rq);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct http_server *hs = cls;
	struct collector *c = hs->c;
	struct req *rq = *con_cls;
	char msg[256];

	if (!rq) {
		const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
							     "Content-Length");
		unsigned st;

		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		*con_cls = rq;
		M_ADD(c, http_requests, 1);
		/* framing, Host, Origin, token: all before the body */
		st = http_screen(c, con, url, method, hs->loopback, msg, sizeof(msg));
		if (st) {
			refuse(c, rq, st, msg);
			return st == 400 ? answer(c, con, rq) : MHD_YES;
		}
		if (cl && strtoull(cl, NULL, 10) > c->max_body) {
			snprintf(msg, sizeof(msg), "body: %s bytes, larger than the %zu-byte "
				 "limit (--max-body)\n", cl, c->max_body);
			refuse(c, rq, 413, msg);
		}
		return MHD_YES;
	}
	if (rq->answered) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!rq->status && rq->len + *upload_size > c->max_body) {
			/* a chunked body, or one longer than it said */
			snprintf(msg, sizeof(msg), "body: larger than the %zu-byte limit "
				 "(--max-body)\n", c->max_body);
			refuse(c, rq, 413, msg);
		}
		if (rq->status) {
			rq->dropped += *upload_size;
			*upload_size = 0;
			return rq->dropped > 2 * c->max_body ? answer(c, con, rq) : MHD_YES;
		}
		if (rq->len + *upload_size > rq->cap) {
			size_t cap = rq->cap ? rq->cap : 16384;
			char *nb;

			while (cap < rq->len + *upload_size)
				cap *= 2;
			if (mem_budget_take(&c->mem, cap - rq->cap)) {
				M_ADD(c, http_busy, 1);
				snprintf(msg, sizeof(msg), "busy: the collector holds its --max-memory (%llu bytes) of bodies and frames in flight; retry later\n",
					 (unsigned long long)c->mem.max);
				refuse(c, rq, 503, msg);
				rq->dropped += *upload_size;
				*upload_size = 0;
				return MHD_YES;
			}
			nb = realloc(rq->body, cap);
			if (!nb) {
				mem_budget_give(&c->mem, cap - rq->cap);
				return MHD_NO;
			}
			rq->body = nb;
			rq->cap = cap;
		}
		memcpy(rq->body + rq->len, upload, *upload_size);
		rq->len += *upload_size;
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->status)
		return answer(c, con, rq);
	if (hs->otlp_only) {
		struct http_body body = { rq->body, rq->len, rq->too_big };

		if (strcmp(url, "/v1/traces"))
			return reply_text(c, con, 404, "no such route: %s %s (this is the OTLP/HTTP "
					  "listener, --otlp-http: POST /v1/traces only)\n", method, url);
		if (strcmp(method, "POST"))
			return reply_text(c, con, 405, "%s is not allowed on %s (allowed: POST)\n",
					  method, url);
		return api_otlp(c, con, &body);
	}
	return route(c, con, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *con, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct collector *c = cls;	/* MHD_OPTION_NOTIFY_COMPLETED's */
	struct req *rq = *con_cls;

	if (rq) {
		body_free(c, rq);
		free(rq);
		*con_cls = NULL;
	}
}

struct http_server *http_server_new(struct collector *c, const char *addr, int otlp_only,
				    char *err, size_t errlen)
{
	struct http_server *hs = calloc(1, sizeof(*hs));
	char why[320];
	int ret;

	if (!hs)
		return fay_err_ptr(-ENOMEM);
	ret = lazy_mhd_load(why, sizeof(why));
	if (ret) {
		snprintf(err, errlen, "%s: %s", addr, why);
		free(hs);
		return fay_err_ptr(ret);
	}
	hs->c = c;
	hs->otlp_only = otlp_only;
	hs->fd = net_listen_named(addr, 128, hs->addr, sizeof(hs->addr), err, errlen);
	if (hs->fd < 0) {
		ret = hs->fd;
		free(hs);
		return fay_err_ptr(ret);
	}
	hs->loopback = !strncmp(hs->addr, "127.", 4) || !strncmp(hs->addr, "[::1]", 5);
	/*
	 * poll(), not select(): a collector with 1,000 agents connected holds
	 * descriptors above FD_SETSIZE.  Slowloris: an idle connection is
	 * closed after HTTP_IDLE_S, and on a listener reachable from other
	 * hosts one address holds at most HTTP_PER_IP of the HTTP_CONNS
	 * connections (on loopback every client has the same address).
	 */
	hs->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
				 MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL,
				 0, NULL, NULL, on_request, hs,
				 MHD_OPTION_LISTEN_SOCKET, hs->fd,
				 MHD_OPTION_NOTIFY_COMPLETED, on_completed, c,
				 MHD_OPTION_CONNECTION_LIMIT, HTTP_CONNS,
				 MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				 hs->loopback ? 0u : HTTP_PER_IP,
				 MHD_OPTION_CONNECTION_TIMEOUT, HTTP_IDLE_S,
				 MHD_OPTION_END);
	if (!hs->d) {
		snprintf(err, errlen, "%s: cannot start the HTTP server (libmicrohttpd)", addr);
		close(hs->fd);
		free(hs);
		return fay_err_ptr(-EIO);
	}
	return hs;
}

void http_server_free(struct http_server *hs)
{
	if (!hs)
		return;
	MHD_stop_daemon(hs->d); /* closes the listening socket too */
	free(hs);
}
