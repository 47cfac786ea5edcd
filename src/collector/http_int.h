/* SPDX-License-Identifier: MIT */
/*
 * Inside the collector's HTTP server: the reply helpers of http.c, shared
 * with the route files added next to it (ui_http.c: the web UI; api_ui.c:
 * the UI's JSON API; api_query.c: FayQL; otlp.c: OTLP/HTTP ingest).  Only
 * these files include libmicrohttpd (common/lazy_mhd.h: loaded on first use).
 */
#ifndef FAY_COLLECTOR_HTTP_INT_H
#define FAY_COLLECTOR_HTTP_INT_H

#include <jansson.h>
#include <stddef.h>

#include "collector/collector.h"
#include "common/lazy_mhd.h"

/* A request body as http.c collected it (NULL/0 when none). */
struct http_body {
	const char *p;
	size_t len;
	int too_big;            /* over --max-body: answer 413 */
};

/* Queue status + body (malloc'ed, always taken) with this Content-Type. */
enum MHD_Result reply(struct MHD_Connection *con, unsigned status,
		      const char *type, char *body, size_t len);
/* reply() with one more header (hname NULL: none). */
enum MHD_Result reply_hdr(struct MHD_Connection *con, unsigned status, const char *type,
			  char *body, size_t len, const char *hname, const char *hval);
/* A plain-text answer, counted as a bad request when 4xx. */
__attribute__((format(printf, 4, 5)))
enum MHD_Result reply_text(struct collector *c, struct MHD_Connection *con,
			   unsigned status, const char *fmt, ...);
/* Answer 200 with JSON j (reference taken; NULL answers 500). */
enum MHD_Result reply_json(struct collector *c, struct MHD_Connection *con,
			   json_t *j);
/* Answer status with JSON j (reference taken; NULL answers 500); 4xx
 * counts as a bad request (ext_http.c). */
enum MHD_Result reply_json_status(struct collector *c, struct MHD_Connection *con,
				  unsigned status, json_t *j);
/* 503 for -EBUSY, else 500, naming the error. */
enum MHD_Result reply_store_err(struct collector *c, struct MHD_Connection *con,
				int err);
/* A query-string argument, NULL when absent. */
const char *arg(struct MHD_Connection *con, const char *k);
/* Inflate a gzip body into *out (malloc'ed, at most max bytes).
 * 0, -E2BIG, -EINVAL or -ENOMEM with the reason in err. */
int gunzip(const char *in, size_t len, size_t max, char **out, size_t *outlen,
	   char *err, size_t errlen);

/*
 * The routes added around http.c (ext_http.c): the web UI, its API,
 * /api/query, /v1/traces, /api/v2/dependencies, and the extra /metrics
 * lines.  Returns 1 with *res set when the request was answered, 0 when
 * url is none of them (http.c carries on with its own routes).
 */
int http_ext_route(struct collector *c, struct MHD_Connection *con,
		   const char *url, const char *method,
		   const struct http_body *body, enum MHD_Result *res);

/* ---- the handlers behind http_ext_route() -------------------------------- */

/* ui_http.c: an embedded file or the UI page for an SPA path; 0 when url
 * is not the UI's. */
int ui_serve(struct collector *c, struct MHD_Connection *con, const char *url,
	     enum MHD_Result *res);
/* api_ui.c */
enum MHD_Result api_dashboard(struct collector *c, struct MHD_Connection *con);
enum MHD_Result api_thresholds(struct collector *c, struct MHD_Connection *con,
			       int put, const struct http_body *body);
enum MHD_Result api_hosts(struct collector *c, struct MHD_Connection *con);
/* GET /api/cluster/peers: the query connections and the queries each runs. */
enum MHD_Result api_cluster_peers(struct collector *c, struct MHD_Connection *con);
enum MHD_Result api_dependencies(struct collector *c, struct MHD_Connection *con);
/* api_query.c: POST /api/query */
enum MHD_Result api_query(struct collector *c, struct MHD_Connection *con,
			  const struct http_body *body);
/* api_standing.c: /api/queries[/NAME[/results]] (rest: what follows
 * "/api/queries") */
enum MHD_Result api_standing(struct collector *c, struct MHD_Connection *con,
			     const char *rest, const char *method, const struct http_body *body);
/* api_zipkin.c: GET /api/v2/autocompleteKeys, /api/v2/autocompleteValues?key=K */
enum MHD_Result api_autocomplete_keys(struct collector *c, struct MHD_Connection *con);
enum MHD_Result api_autocomplete_values(struct collector *c, struct MHD_Connection *con);
/* api_sql.c: POST /api/sql[?format=table|json] (fay sql --collector) */
enum MHD_Result api_sql(struct collector *c, struct MHD_Connection *con,
			const struct http_body *body);
/* otlp.c: POST /v1/traces */
enum MHD_Result api_otlp(struct collector *c, struct MHD_Connection *con,
			 const struct http_body *body);

/* http_screen.c.  Does the request carry the token (Authorization:
 * Bearer TOKEN, compared in constant time), or is there none (no
 * --token)?  1 or 0. */
int http_token_ok(struct collector *c, struct MHD_Connection *con);
/*
 * Screen a request on its headers, before any route or body: framing
 * (request smuggling), Host on a loopback listener (DNS rebinding), Origin
 * of state-changing methods (CSRF), the token where one is needed (see
 * http_screen.c for the rules).  Returns 0 to go on, or the status to
 * answer (400, 401, 403) with the reason in msg.
 */
unsigned http_screen(struct collector *c, struct MHD_Connection *con, const char *url,
		     const char *method, int loopback, char *msg, size_t msglen);

#endif
