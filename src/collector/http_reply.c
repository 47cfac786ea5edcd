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
#include <zlib.h>

#include "collector/collector.h"
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
