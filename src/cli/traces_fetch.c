// SPDX-License-Identifier: MIT
/*
 * fay traces: the requests to the collector: its URL, the query string of
 * `ls` and the GET of a JSON answer, with the errors a user sees when the
 * collector is unreachable or answers an error (traces_http.c does the
 * HTTP itself).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/traces.h"
#include "common/lazy_curl.h"

/* The server URL without a trailing '/', with a scheme; malloc'd. */
char *tr_server_url(const char *s)
{
	size_t n = strlen(s);
	char *u;

	while (n && s[n - 1] == '/')
		n--;
	if (strstr(s, "://")) {
		u = strndup(s, n);
	} else if ((u = malloc(n + 8))) {
		memcpy(u, "http://", 7);
		memcpy(u + 7, s, n);
		u[n + 7] = '\0';
	}
	return u;
}

/*
 * GET server + path and parse the JSON answer.  Prints the error and
 * returns the exit status (1, or 2 when the collector calls the request
 * bad) on failure, 0 with *out set on success; *status gets the HTTP status
 * so the caller can treat 404 itself (then *out is NULL).
 */
int tr_fetch_json(const char *server, const char *path, json_t **out,
		  long *status)
{
	struct tr_http_resp r;
	json_error_t je;
	char err[CURL_ERROR_SIZE + 64], *url;
	int ret;

	*out = NULL;
	if (asprintf(&url, "%s%s", server, path) < 0) {
		fprintf(stderr, "error: out of memory\n");
		return 1;
	}
	ret = tr_http_get(url, &r, err, sizeof(err));
	if (ret == -ELIBACC) {
		fprintf(stderr, "error: fay traces: %s\n", err);
		free(url);
		return 1;
	}
	if (ret) {
		fprintf(stderr,
			"error: cannot reach the fay collector at %s: %s\n"
			"  Is `fay collector` running there?  Start it with `fay collector`,\n"
			"  or point --server or FAY_SERVER at the one that runs.\n",
			server, err);
		free(url);
		return ret == -EINVAL ? 2 : 1;
	}
	*status = r.status;
	if (r.status == 404) {
		free(r.body);
		free(url);
		return 0;
	}
	if (r.status != 200) {
		size_t n = strcspn(r.body, "\n");

		fprintf(stderr, "error: the collector at %s answered HTTP %ld for %s%s%.*s\n",
			server, r.status, path, n ? ": " : "", (int)(n > 300 ? 300 : n),
			r.body);
		free(r.body);
		free(url);
		return r.status == 400 ? 2 : 1;
	}
	*out = json_loadb(r.body, r.len, 0, &je);
	if (!*out)
		fprintf(stderr, "error: %s: the answer is not JSON: line %d column %d: %s\n",
			url, je.line, je.column, je.text);
	free(r.body);
	free(url);
	return *out ? 0 : 1;
}

/*
 * s percent-encoded but for RFC 3986's unreserved characters (what
 * curl_easy_escape() does, without loading libcurl); malloc'ed, NULL when
 * out of memory.
 */
static char *url_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *e = malloc(3 * strlen(s) + 1), *p = e;

	for (; e && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
			*p++ = (char)ch;
		} else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	if (e)
		*p = '\0';
	return e;
}

/* Append "&key=value" (value URL-escaped) to *q. */
int tr_add_param(char **q, const char *key, const char *val)
{
	char *e = url_escape(val), *nq;
	int n;

	if (!e)
		return -ENOMEM;
	n = asprintf(&nq, "%s%s%s=%s", *q, strchr(*q, '?') ? "&" : "?", key, e);
	free(e);
	if (n < 0)
		return -ENOMEM;
	free(*q);
	*q = nq;
	return 0;
}
