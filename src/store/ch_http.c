// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's client: ClickHouse's HTTP interface through
 * libcurl (loaded lazily, common/lazy_curl.h).  The one file of the store
 * that sees curl.  A statement goes in the request body (or, for an
 * INSERT, in the query parameter with the rows in the body); the server
 * buffers the whole answer (wait_end_of_query=1) so an error mid-query is
 * a non-200 status, never a half answer taken for a whole one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/lazy_curl.h"
#include "store/ch_int.h"

struct ch_conn {
	CURL *curl;
	char *base;            /* http://host:port/?database=db&... */
	long timeout_ms;
	char *qid;             /* ch_conn_query_id(): the query ids' prefix */
	unsigned long nq;      /* ... and the number of the last one */
};

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* "what: why" into err. */
static void set_err(char *err, size_t errlen, const char *what, const char *why)
{
	if (err && errlen)
		snprintf(err, errlen, "%s: %s", what, why);
}

struct ch_conn *ch_conn_new(const char *url, const char *db, unsigned flags,
			    char *err, size_t errlen)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct ch_conn *c;
	size_t n;
	int ret;

	ret = lazy_curl_load(err, errlen);
	if (ret)
		return fay_err_ptr(ret);
	pthread_once(&once, curl_init_once);
	c = calloc(1, sizeof(*c));
	n = strlen(url) + strlen(db) + 128;
	if (!c || !(c->base = malloc(n)) || !(c->curl = curl_easy_init())) {
		set_err(err, errlen, url, "out of memory");
		ch_conn_free(c);
		return fay_err_ptr(-ENOMEM);
	}
	snprintf(c->base, n, "%s/?database=%s&wait_end_of_query=1%s%s", url, db,
		 flags & CH_READONLY ? "&readonly=1" : "",
		 flags & CH_SYNC_INSERT ? "&insert_distributed_sync=1" : "");
	c->timeout_ms = CH_TIMEOUT_MS;
	return c;
}

int ch_conn_setting(struct ch_conn *c, const char *name, const char *value)
{
	size_t n = strlen(c->base) + strlen(name) + strlen(value) + 3;
	char *b = malloc(n);

	if (!b)
		return -ENOMEM;
	snprintf(b, n, "%s&%s=%s", c->base, name, value);
	free(c->base);
	c->base = b;
	return 0;
}

void ch_conn_free(struct ch_conn *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->base);
	free(c->qid);
	free(c);
}

int ch_conn_query_id(struct ch_conn *c, const char *prefix)
{
	char *q = strdup(prefix);

	if (!q)
		return -ENOMEM;
	free(c->qid);
	c->qid = q;
	return 0;
}

void ch_conn_timeout(struct ch_conn *c, long ms)
{
	c->timeout_ms = ms;
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct wbuf *w = arg;

	wbuf_put(w, p, size * n);
	return w->err ? 0 : size * n;
}

/* Percent-encode s onto w (RFC 3986 unreserved characters stay). */
static void url_escape(struct wbuf *w, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-_.~", ch)) {
			wbuf_u8(w, ch);
		} else {
			char e[3] = { '%', hex[ch >> 4], hex[ch & 15] };

			wbuf_put(w, e, 3);
		}
	}
}

static int curl_errno(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
	case CURLE_COULDNT_RESOLVE_HOST: return -EHOSTUNREACH;
	case CURLE_OUT_OF_MEMORY: return -ENOMEM;
	default: return -EIO;
	}
}

/* The first line of a ClickHouse error answer, into err. */
static void server_err(char *err, size_t errlen, long status, const struct wbuf *w)
{
	size_t n = 0;

	while (n < w->len && w->p[n] != '\n' && n < 400)
		n++;
	if (err && errlen)
		snprintf(err, errlen, "HTTP %ld: %.*s", status, (int)n,
			 w->len ? (const char *)w->p : "");
}

/*
 * Does a ClickHouse error answer say its disk is full?  Its own words:
 * NOT_ENOUGH_SPACE (code 243, "Cannot reserve ..., not enough space"), or
 * a write that failed with ENOSPC ("... errno: 28, strerror: No space
 * left on device").  The store's disk watermark takes it as the disk low
 * (store/disk.c).
 */
static int no_space(const struct wbuf *w)
{
	static const char *const says[] = {
		"No space left on device", "not enough space", "NOT_ENOUGH_SPACE",
		"Code: 243,",
	};

	for (size_t i = 0; i < sizeof(says) / sizeof(says[0]); i++)
		if (w->len && memmem(w->p, w->len, says[i], strlen(says[i])))
			return 1;
	return 0;
}

static int perform(struct ch_conn *c, const char *url, const void *body, size_t len,
		   struct wbuf *out, char *err, size_t errlen)
{
	struct wbuf scratch = { 0 };
	struct wbuf *w = out ? out : &scratch;
	long status = 0;
	CURLcode rc;
	int ret = 0;

	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, w);
	rc = curl_easy_perform(c->curl);
	if (rc != CURLE_OK) {
		ret = w->err ? -ENOMEM : curl_errno(rc);
		set_err(err, errlen, "ClickHouse", curl_easy_strerror(rc));
	} else {
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
		if (status != 200) {
			server_err(err, errlen, status, w);
			ret = no_space(w) ? -ENOSPC : -EIO;
		}
	}
	wbuf_free(&scratch);
	return ret;
}

/* c's URL for its next request onto url (with its query id, if any). */
static void base_url(struct ch_conn *c, struct wbuf *url)
{
	wbuf_put(url, c->base, strlen(c->base));
	if (c->qid) {
		char n[32];

		wbuf_put(url, "&query_id=", 10);
		url_escape(url, c->qid);
		snprintf(n, sizeof(n), "-%lu", ++c->nq);
		wbuf_put(url, n, strlen(n));
	}
}

int ch_query(struct ch_conn *c, const char *sql, struct wbuf *out, char *err,
	     size_t errlen)
{
	struct wbuf url = { 0 };
	int ret;

	if (out)
		out->len = 0;
	if (!c->qid)
		return perform(c, c->base, sql, strlen(sql), out, err, errlen);
	base_url(c, &url);
	wbuf_u8(&url, 0);
	ret = url.err ? -ENOMEM : perform(c, (const char *)url.p, sql, strlen(sql), out,
					  err, errlen);
	wbuf_free(&url);
	return ret;
}

int ch_insert(struct ch_conn *c, const char *insert, const void *rows, size_t len,
	      char *err, size_t errlen)
{
	struct wbuf url = { 0 };
	int ret;

	base_url(c, &url);
	wbuf_put(&url, "&query=", 7);
	url_escape(&url, insert);
	wbuf_u8(&url, 0);
	if (url.err) {
		wbuf_free(&url);
		return -ENOMEM;
	}
	ret = perform(c, (const char *)url.p, rows, len, NULL, err, errlen);
	wbuf_free(&url);
	return ret;
}
