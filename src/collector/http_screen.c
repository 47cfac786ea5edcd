// SPDX-License-Identifier: MIT
/*
 * What every HTTP request passes before a route sees it or a byte of its
 * body is read (issue #10): its framing, the Host and Origin it names, and
 * the token.
 *
 * Framing.  A request whose length two parties could read differently is
 * the request-smuggling pattern behind a proxy (RFC 9112 6.3): two
 * different Content-Length values, Content-Length with Transfer-Encoding,
 * a transfer coding other than chunked, whitespace between a field name
 * and its colon ("Transfer-Encoding : chunked", which libmicrohttpd keeps
 * as another field and so reads the body as empty).  All are answered 400
 * and the connection is closed.
 *
 * Host and Origin.  On a loopback listener the Host must be a loopback
 * name or address: a web page whose name resolves to 127.0.0.1 (DNS
 * rebinding) sends its own name.  A request that changes state (any method
 * but GET and HEAD) carrying an Origin must come from this server's own
 * origin (a form or fetch from another site: CSRF).  Both get 403.
 *
 * Token.  With tokens (--token-file, --token), every route with a scope
 * in the route table (http_routes.c) needs a token (Authorization: Bearer
 * T, compared in constant time, auth.c) that has the scope: 401 with
 * WWW-Authenticate without one or with an unknown one, 403 when it lacks
 * the scope.  /health and the web UI's static files need none.  The check
 * is made on the headers, so a body is never read for such a client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collector/auth.h"
#include "collector/http_int.h"

struct framing {
	int ncl, bad_cl, te, te_other, ws_name;
	const char *cl;
	char name[64];
};

static void on_header(void *cls, const char *key, const char *value)
{
	struct framing *f = cls;

	if (strpbrk(key, " \t") && !f->ws_name) {
		f->ws_name = 1;
		snprintf(f->name, sizeof(f->name), "%s", key);
	}
	if (!strcasecmp(key, "Content-Length")) {
		if (!value || !*value || strspn(value, "0123456789") != strlen(value) ||
		    (f->cl && strcmp(f->cl, value)))
			f->bad_cl = 1;
		f->cl = value;
		f->ncl++;
	} else if (!strcasecmp(key, "Transfer-Encoding")) {
		f->te++;
		if (!value || strcasecmp(value, "chunked"))
			f->te_other = 1;
	}
}

/* Is host (a Host field: name or address, maybe with :port) loopback? */
static int host_is_loopback(const char *host)
{
	size_t n;

	if (!strncmp(host, "[::1]", 5))
		return host[5] == '\0' || host[5] == ':';
	n = strcspn(host, ":");
	if (n == 9 && !strncasecmp(host, "localhost", 9))
		return 1;
	if (n < 4 || strncmp(host, "127.", 4))
		return 0;
	/* 127.a.b.c: digits and dots only */
	return strspn(host, "0123456789.") == n;
}

/* Does origin ("scheme://host[:port]") name host (a Host field)? */
static int origin_is(const char *origin, const char *host)
{
	const char *p = strstr(origin, "://");

	return p && (!strncmp(origin, "http://", 7) || !strncmp(origin, "https://", 8)) &&
	       !strcasecmp(p + 3, host);
}

unsigned http_screen(struct collector *c, struct http_con *con, const char *url,
		     const char *method, int loopback, unsigned scope, char *msg, size_t msglen)
{
	int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	const char *host = http_header(con, "Host");
	const char *origin = http_header(con, "Origin");
	struct framing f = { 0 };

	http_headers_each(con, on_header, &f);
	if (f.ws_name) {
		snprintf(msg, msglen, "header name '%s' has whitespace before its colon\n", f.name);
		return 400;
	}
	if (f.bad_cl) {
		snprintf(msg, msglen, "Content-Length given %d times with different values, or "
			 "not a number\n", f.ncl);
		return 400;
	}
	if (f.te && f.ncl) {
		snprintf(msg, msglen, "both Content-Length and Transfer-Encoding\n");
		return 400;
	}
	if (f.te > 1 || f.te_other) {
		snprintf(msg, msglen, "Transfer-Encoding other than one 'chunked'\n");
		return 400;
	}
	if (loopback && host && !host_is_loopback(host)) {
		snprintf(msg, msglen, "Host '%.100s' is not a loopback name or address: this "
			 "server listens on loopback only (DNS rebinding?)\n", host);
		return 403;
	}
	if (!get && origin && (!host || !origin_is(origin, host))) {
		snprintf(msg, msglen, "%s from origin '%.100s' refused: only this server's own "
			 "pages may change state (cross-site request?)\n", method, origin);
		return 403;
	}
	{
		const char *h = http_header(con, "Authorization");
		char what[200];

		snprintf(what, sizeof(what), "%s %.160s", method, url);
		return auth_check_bearer(c->auth, h, h ? strlen(h) : 0, scope, what, NULL, msg,
					 msglen);
	}
}
