// SPDX-License-Identifier: MIT
/*
 * The collector's HTTP answers (http_int.h): plain text, JSON, store
 * errors, with the counters they move; query-string arguments; gzip
 * bodies.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/collector_int.h"
#include "collector/http_int.h"
#include "common/err.h"
#include "common/log.h"

/* ---- responses ---------------------------------------------------------- */

int reply(struct http_con *con, unsigned status,
	  const char *type, char *body, size_t len)
{
	return reply_hdr(con, status, type, body, len, NULL, NULL);
}

int reply_hdr(struct http_con *con, unsigned status, const char *type,
	      char *body, size_t len, const char *hname, const char *hval)
{
	struct http_resp *r = http_resp_buf(body, len, 1);

	if (!r)
		return HTTPD_NO;
	http_resp_header(r, "Content-Type", type);
	if (hname)
		http_resp_header(r, hname, hval);
	if (status == 405 && !(hname && !strcmp(hname, "Allow")))
		http_resp_header(r, "Allow", "GET, HEAD, POST");
	return http_resp_queue(con, status, r);
}

/* A plain-text answer, counted as a bad request when 4xx. */
int reply_text(struct collector *c, struct http_con *con,
	       unsigned status, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return HTTPD_NO;
	if (status >= 400 && status < 500)
		M_ADD(c, http_bad_requests, 1);
	return reply(con, status, "text/plain; charset=utf-8", s, (size_t)n);
}

/* Answer 200 with JSON j (reference taken). */
int reply_json(struct collector *c, struct http_con *con,
	       json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (!s)
		return reply_text(c, con, 500, "out of memory\n");
	return reply(con, 200, "application/json", s, strlen(s));
}

int reply_store_err(struct collector *c, struct http_con *con,
		    int err)
{
	M_ADD(c, store_errors, 1);
	return reply_text(c, con, err == -EBUSY ? 503 : 500, "store: %s\n", errstr(err));
}

/* ---- parameters --------------------------------------------------------- */

const char *arg(struct http_con *con, const char *k)
{
	return http_arg(con, k);
}

/* ---- bodies ------------------------------------------------------------- */

int reply_json_status(struct collector *c, struct http_con *con,
		      unsigned status, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (!s)
		return reply_text(c, con, 500, "out of memory\n");
	if (status >= 400 && status < 500)
		M_ADD(c, http_bad_requests, 1);
	return reply(con, status, "application/json", s, strlen(s));
}
