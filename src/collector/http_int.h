/* SPDX-License-Identifier: MIT */
/*
 * Inside the collector's HTTP server:
 *
 *   http.c         the server: a request's life (screen, body, answer)
 *   http_routes.c  the route table: every route, its methods and scope
 *   http_reply.c   the reply helpers and query-string arguments
 *   http_zipkin.c  Zipkin's v2 API, /health, /metrics
 *   http_screen.c  what every request passes before its route
 *
 * and the route files (ui_http.c, api_*.c, otlp_http.c).  libmicrohttpd
 * stays behind common/httpd.h: no file here names one of its types.
 */
#ifndef FAY_COLLECTOR_HTTP_INT_H
#define FAY_COLLECTOR_HTTP_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "collector/auth.h"
#include "collector/collector_int.h"
#include "collector/requester.h"
#include "common/httpd.h"

/* A request body as http.c collected it (NULL/0 when none). */
struct http_body {
	const char *p;
	size_t len;
	int too_big;            /* over --max-body: answer 413 */
};

/* Queue status + body (malloc'ed, always taken) with this Content-Type. */
int reply(struct http_con *con, unsigned status,
	  const char *type, char *body, size_t len);
/* reply() with one more header (hname NULL: none). */
int reply_hdr(struct http_con *con, unsigned status, const char *type,
	      char *body, size_t len, const char *hname, const char *hval);
/* A plain-text answer, counted as a bad request when 4xx. */
__attribute__((format(printf, 4, 5)))
int reply_text(struct collector *c, struct http_con *con,
	       unsigned status, const char *fmt, ...);
/* Answer 200 with JSON j (reference taken; NULL answers 500). */
int reply_json(struct collector *c, struct http_con *con,
	       json_t *j);
/* Answer status with JSON j (reference taken; NULL answers 500); 4xx
 * counts as a bad request (ext_http.c). */
int reply_json_status(struct collector *c, struct http_con *con,
		      unsigned status, json_t *j);
/* 503 for -EBUSY, else 500, naming the error. */
int reply_store_err(struct collector *c, struct http_con *con,
		    int err);
/* A query-string argument, NULL when absent. */
const char *arg(struct http_con *con, const char *k);
/* Scopes a token may carry (auth.h: enum coll_scope); a route
 * needs one of them, or none (HTTP_OPEN). */
#define HTTP_OPEN 0u

/* A request as its handler sees it. */
struct http_rq {
	const char *url, *method;
	const char *rest;               /* after a prefix route's path */
	struct http_body body;
	/* routes that load probes (COLL_SCOPE_PROBE): who asks and what it
	 * may (requester.h); decided on the headers */
	const struct coll_requester *who;
};

typedef int (*http_route_fn)(struct collector *c, struct http_con *con,
			     const struct http_rq *rq);

/* One route: methods ("GET" also answers HEAD), a path (exact, or a
 * prefix followed by at least one byte), the scope it needs, the handler. */
struct http_route {
	const char *methods;            /* "GET POST": space-separated */
	const char *path;
	int prefix;
	unsigned scope;                 /* HTTP_OPEN or one COLL_SCOPE_* */
	http_route_fn fn;
};

/*
 * The route for (url, method) from the one table (http_routes.c); the
 * OTLP/HTTP listener (otlp_only) has only POST /v1/traces.  NULL when
 * none: then *status is 404 or 405 with the reason in msg (for 405 the
 * allowed methods too, in allow).
 */
const struct http_route *http_route_find(const char *url, const char *method, int otlp_only,
					 unsigned *status, char *msg, size_t msglen,
					 char *allow, size_t allowlen);

/* ---- the handlers of the route table ------------------------------------- */

/*
 * The handlers of the route table, each with the signature of
 * http_route_fn (its answer queued, HTTPD_YES or HTTPD_NO).
 */
/* http_zipkin.c: GET /api/v2/services, /api/v2/spans?serviceName=S,
 * /api/v2/remoteServices?serviceName=S */
int http_zipkin_names(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* GET /api/v2/traces?serviceName=...&limit=... (Zipkin's search) */
int http_zipkin_traces(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* GET /api/v2/trace/ID (the rest of the route) */
int http_zipkin_trace(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* GET /api/v2/traceMany?traceIds=A,B */
int http_zipkin_trace_many(struct collector *c, struct http_con *con,
			   const struct http_rq *rq);
/* POST /api/v2/spans: JSON or protobuf, maybe gzip; 202 after the commit */
int http_zipkin_post(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* GET /health: UP (200) or DOWN (503) with the store's reason */
int http_health(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* GET /metrics: Prometheus text */
int http_metrics(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* ui_http.c: any GET no route takes: a UI page or file, else 404. */
int ui_serve(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* api_ui.c: GET /api/ui/dashboard, GET|PUT /api/ui/thresholds,
 * GET /api/ui/hosts, GET /api/cluster/peers, GET /api/v2/dependencies */
int api_dashboard(struct collector *c, struct http_con *con, const struct http_rq *rq);
int api_thresholds(struct collector *c, struct http_con *con, const struct http_rq *rq);
int api_hosts(struct collector *c, struct http_con *con, const struct http_rq *rq);
int api_cluster_peers(struct collector *c, struct http_con *con, const struct http_rq *rq);
int api_dependencies(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* api_query.c: POST /api/query */
int api_query(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* api_standing.c: /api/queries[/NAME[/results]] */
int api_standing(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* api_zipkin.c: GET /api/v2/autocompleteKeys, /api/v2/autocompleteValues?key=K */
int api_autocomplete_keys(struct collector *c, struct http_con *con,
			  const struct http_rq *rq);
int api_autocomplete_values(struct collector *c, struct http_con *con,
			    const struct http_rq *rq);
/* api_sql.c: POST /api/sql[?format=table|json] (fay sql --collector) */
int api_sql(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* api_capture.c: POST /api/captures (fay capture: spans of a trace id or
 * of the last seconds from every agent's flight buffer, stored), GET
 * /api/captures (those made since the start) */
int api_captures(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* api_capture.c: GET/POST /api/captures/rules, DELETE
 * /api/captures/rules/NAME (capture_rules.h) */
int api_capture_rules(struct collector *c, struct http_con *con, const struct http_rq *rq);

struct cluster_capture_req;

/* What triggered a capture by rule (capture_rules.c), for its account. */
struct capture_trigger {
	const char *rule;		/* the rule's name */
	const char *host, *span;	/* the matching span's host and name */
	uint64_t span_end_ns;		/* its end (wall clock) */
	uint64_t matched_ns;		/* when its row reached the collector */
	unsigned follow_ms;		/* how long it follows its trace (0: not) */
};

/* The span records a capture stored (keys: span id, flags, size), so
 * that a later round stores only what is new.  Zero it to start. */
struct capture_seen {
	uint64_t *key;
	size_t n, nsorted, cap;
};
void capture_seen_free(struct capture_seen *s);

/* The captures GET /api/captures lists (and captures.jsonl keeps). */
#define CAPTURES_KEEP	256

/* Append account acc to DIR/captures.jsonl (capture_log.c; a later line
 * of the same id replaces an earlier one), rewriting the file whole when
 * it holds 4 x CAPTURES_KEEP lines.  Under c->captures_lock.  A failure
 * is warned about once, never fatal. */
void caplog_put(struct collector *c, json_t *acc);

/*
 * Make a capture (api_capture.c): ask every agent for what cr names,
 * store the spans found marked fay.capture / .at / .by (by: what asked),
 * add its account to GET /api/captures' list (and DIR/captures.jsonl:
 * caplog_put()) and return it (a new reference; tr: the rule that
 * triggered it, added to the account, with the follow fields when
 * tr->follow_ms), with *status 200, or 503 when some spans could not be
 * stored.  seen: NULL, or filled with what was stored (for
 * capture_follow()).  NULL: out of memory (*status 500).
 */
json_t *capture_make(struct collector *c, const struct cluster_capture_req *cr, const char *by,
		     const struct capture_trigger *tr, struct capture_seen *seen, int *status);

/* A new capture's id ("<ms>-<n>") and its time as RFC 3339 (at), for a
 * capture made now (ns since the epoch). */
void capture_new_id(struct collector *c, uint64_t now, char *id, size_t idlen, char *at,
		    size_t atlen);
/* Add account acc to GET /api/captures' list (newest first, at most
 * CAPTURES_KEEP: the events file of a capture of events that falls off
 * is removed) and to DIR/captures.jsonl; takes captures_lock. */
void capture_list_put(struct collector *c, json_t *acc);
/* An account's name of a host's state s (enum cluster_capture_state:
 * "answered", "missing" ...). */
const char *capture_state_name(int s);
/* Hosts known from their span connections whose query connection did
 * not take part, added to the account's hosts as "not connected" (host:
 * only that one). */
void capture_add_unconnected(struct collector *c, json_t *hosts, const char *host);

/*
 * api_capture_query.c: a capture of a standing query's kept events (#22
 * item 4).  capture_query_post() answers POST /api/captures with
 * {"query":NAME, "last_ms":N, "host":H}; capture_query_make() makes it
 * (by: what asked, NULL: "query NAME last Nms"; nhosts 0: every host,
 * else only hosts[0..nhosts), the others neither counted nor kept) and
 * returns its account (a new reference) with *status 200, or NULL with
 * *status and the reason in err.  The events
 * go to DIR/captures/ID.events.jsonl, read back by GET
 * /api/captures/ID/events (capture_query_events()).
 */
int capture_query_post(struct collector *c, struct http_con *con, json_t *body);
json_t *capture_query_make(struct collector *c, const char *name, uint64_t from_ns,
			   uint64_t to_ns, const char *const *hosts, size_t nhosts, const char *by,
			   int *status, char *err, size_t errlen);
int capture_query_events(struct collector *c, struct http_con *con, const struct http_rq *rq);
/* The file of capture id's events: DIR/ID.events.jsonl (capture_log.c).
 * -ENOENT without a capture directory, -EINVAL for an id that is not
 * digits and one '-'. */
int caplog_events_path(struct collector *c, const char *id, char *out, size_t len);

/*
 * A follow round of capture acc (capture_make()'s account): ask every
 * agent for trace cr again and store the spans not in seen, marked as
 * acc's with a fourth tag, fay.capture.late_ms (ms from the capture to
 * this round); acc counts them (spans_late, last_late_ms, follow_rounds,
 * each host's late; a host that answers now for the first time is
 * counted answered).  last: the final round (following: false).  The
 * account is written to captures.jsonl when it changed.  The number of
 * late spans stored, or -errno.
 */
long capture_follow(struct collector *c, json_t *acc, const struct cluster_capture_req *cr,
		    struct capture_seen *seen, bool last);

/* otlp_http.c: POST /v1/traces */
int api_otlp(struct collector *c, struct http_con *con, const struct http_rq *rq);

/*
 * Screen a request on its headers, before any route or body: framing
 * (request smuggling), Host on a loopback listener (DNS rebinding), Origin
 * of state-changing methods (CSRF), the token and its scope when the
 * route (scope: its table entry's) needs one (see http_screen.c for the
 * rules).  Returns 0 to go on, or the status to answer (400, 401, 403)
 * with the reason in msg.
 */
unsigned http_screen(struct collector *c, struct http_con *con, const char *url,
		     const char *method, int loopback, unsigned scope, char *msg, size_t msglen);

#endif
