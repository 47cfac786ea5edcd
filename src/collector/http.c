// SPDX-License-Identifier: MIT
/*
 * The HTTP side of the collector (default 127.0.0.1:9411) on common/httpd.h:
 * the life of a request.  On its headers it is screened (http_screen.c:
 * framing, Host, Origin), its route looked up in the one table
 * (http_routes.c) and the token checked against the route's scope; a
 * request refused there never has its body kept.  Then its body is
 * collected (bounded by --max-body and --max-memory) and the route's
 * handler answers.
 *
 * One thread per connection: a handler may block on the store (a query,
 * or the writer committing a POST).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/collector_int.h"
#include "collector/http_int.h"
#include "collector/requester.h"
#include "common/err.h"
#include "common/net.h"
#include "common/tls.h"

#define HTTP_CONNS          1024u    /* connections at once */
#define HTTP_PER_IP         64u      /* ... from one address (not loopback) */
#define HTTP_IDLE_S         15u      /* an idle connection is closed after */

struct http_server {
	struct collector *c;
	struct httpd *d;
	int otlp_only;          /* --otlp-http: POST /v1/traces alone */
	int loopback;           /* listens on 127.0.0.0/8 or ::1 */
	char addr[64];
};

/* Per request. */
struct req {
	char *body;
	size_t len, cap;
	size_t said;            /* its Content-Length (0: none) */
	int too_big;
	int answered;           /* a response is queued */
	const struct http_route *route;
	char allow[64];         /* for a 405 */
	unsigned status;        /* refused on its headers: the answer */
	size_t dropped;         /* body bytes read and dropped since */
	char msg[512];
	struct coll_requester who;      /* routes that load probes */
};

const char *http_server_addr(const struct http_server *hs)
{
	return hs->addr;
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
static int answer(struct collector *c, struct http_con *con, struct req *rq)
{
	const char *hname = NULL, *hval = NULL;
	char *body;

	rq->answered = 1;
	if (rq->status == 503) {
		/* busy (--max-memory): the client may send it again shortly */
		hname = "Retry-After";
		hval = "1";
	} else if (rq->status == 405) {
		hname = "Allow";
		hval = rq->allow;
	} else if (rq->status == 401) {
		hname = "WWW-Authenticate";
		hval = "Bearer realm=\"fay\"";
	}
	if (rq->status >= 400 && rq->status < 500)
		M_ADD(c, http_bad_requests, 1);
	body = strdup(rq->msg);
	return body ? reply_hdr(con, rq->status, "text/plain; charset=utf-8", body,
				strlen(body), hname, hval) : HTTPD_NO;
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

/*
 * A route that loads probes (#20): who asks, decided before its body is
 * read (requester.h).  One the requester may not use at all is refused
 * here (403, logged); POST /api/query is admitted by its handler once it
 * knows the query's source.  0 to go on, else the status of the refusal.
 */
static unsigned probe_screen(struct collector *c, struct http_con *con, struct req *rq,
			     const char *url, const char *method)
{
	char what[200], msg[sizeof(rq->msg)];
	unsigned st;

	coll_requester_decide(c, http_con_fd(con), http_header(con, "Authorization"), &rq->who);
	if (rq->route->fn == api_query && rq->who.right != COLL_PROBE_NONE)
		return 0;
	snprintf(what, sizeof(what), "%s %.160s", method, url);
	st = coll_requester_admit(&rq->who, what, -1, true, msg, sizeof(msg));
	if (st)
		refuse(c, rq, st, msg);
	return st;
}

static int on_request(void *cls, struct http_con *con, const char *url, const char *method,
		      const char *upload, size_t *upload_size, void **con_cls)
{
	struct http_server *hs = cls;
	struct collector *c = hs->c;
	struct req *rq = *con_cls;
	char msg[256];

	if (!rq) {
		const char *cl = http_header(con, "Content-Length");
		unsigned st = 0;

		if (!coll_gate_wait(c))
			return HTTPD_NO;	/* stopping, or its start failed */
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return HTTPD_NO;
		*con_cls = rq;
		M_ADD(c, http_requests, 1);
		/* framing, Host, Origin, route, token: all before the body */
		rq->route = http_route_find(url, method, hs->otlp_only, &st, msg, sizeof(msg),
					    rq->allow, sizeof(rq->allow));
		st = http_screen(c, con, url, method, hs->loopback, rq->route ? rq->route->scope :
				 HTTP_OPEN, msg, sizeof(msg)) ? : st;
		if (st) {
			refuse(c, rq, st, msg);
			return st == 400 ? answer(c, con, rq) : HTTPD_YES;
		}
		st = rq->route->scope == COLL_SCOPE_PROBE ? probe_screen(c, con, rq, url, method) : 0;
		if (st)
			return HTTPD_YES;
		if (cl && strtoull(cl, NULL, 10) > c->max_body) {
			snprintf(msg, sizeof(msg), "body: %s bytes, larger than the %zu-byte "
				 "limit (--max-body)\n", cl, c->max_body);
			refuse(c, rq, 413, msg);
		} else if (cl) {
			rq->said = strtoull(cl, NULL, 10);
		}
		return HTTPD_YES;
	}
	if (rq->answered) {
		*upload_size = 0;
		return HTTPD_YES;
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
			return rq->dropped > 2 * c->max_body ? answer(c, con, rq) : HTTPD_YES;
		}
		if (rq->len + *upload_size > rq->cap) {
			size_t need = rq->len + *upload_size, cap = rq->cap ? rq->cap : 16384;
			char *nb;

			while (cap < need)
				cap *= 2;
			/* a body that said its length is held in no more; growing,
			 * the old and the new buffer are both charged (realloc) */
			if (rq->said >= need && rq->said < cap)
				cap = rq->said;
			nb = mem_budget_realloc(&c->mem, rq->body, rq->cap, cap);
			if (!nb && errno == ENOBUFS) {
				M_ADD(c, http_busy, 1);
				snprintf(msg, sizeof(msg), "busy: the collector holds its --max-memory (%llu bytes) of bodies and frames in flight; retry later\n",
					 (unsigned long long)c->mem.max);
				refuse(c, rq, 503, msg);
				rq->dropped += *upload_size;
				*upload_size = 0;
				return HTTPD_YES;
			}
			if (!nb)
				return HTTPD_NO;
			rq->body = nb;
			rq->cap = cap;
		}
		memcpy(rq->body + rq->len, upload, *upload_size);
		rq->len += *upload_size;
		*upload_size = 0;
		return HTTPD_YES;
	}
	if (rq->status)
		return answer(c, con, rq);
	{
		struct http_rq r = {
			.url = url, .method = method,
			.rest = url + strlen(rq->route->path),
			.body = { rq->body, rq->len, rq->too_big },
			.who = &rq->who,
		};

		return rq->route->fn(c, con, &r);
	}
}

static void on_done(void *cls, void *req)
{
	struct http_server *hs = cls;
	struct req *rq = req;

	body_free(hs->c, rq);
	free(rq);
}

struct http_server *http_server_new(struct collector *c, const char *addr, int otlp_only,
				    char *err, size_t errlen)
{
	struct http_server *hs = calloc(1, sizeof(*hs));
	struct httpd_opts o = { 0 };
	char why[320];
	int ret;

	if (!hs)
		return fay_err_ptr(-ENOMEM);
	ret = httpd_load(why, sizeof(why));
	if (ret) {
		snprintf(err, errlen, "%s: %s", addr, why);
		free(hs);
		return fay_err_ptr(ret);
	}
	hs->c = c;
	hs->otlp_only = otlp_only;
	o.fd = net_listen_named(addr, 128, hs->addr, sizeof(hs->addr), err, errlen);
	if (o.fd < 0) {
		ret = o.fd;
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
	o.max_conns = HTTP_CONNS;
	o.per_ip = hs->loopback ? 0u : HTTP_PER_IP;
	o.idle_s = HTTP_IDLE_S;
	o.thread_per_conn = 1;
	o.budget = &c->mem;
	o.conn_mem = coll_conn_mem(c);
	o.busy = &c->m.conn_busy;
	o.tls = c->tls;  /* the agent port's TLS, its client CA where asked */
	o.tls_mutual = !!(c->mtls_ports & (otlp_only ? COLL_PORT_OTLP_HTTP : COLL_PORT_HTTP));
	o.on_request = on_request;
	o.on_done = on_done;
	o.cls = hs;
	hs->d = httpd_start(&o, why, sizeof(why));
	if (!hs->d) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", addr, why);
		free(hs);
		return fay_err_ptr(ret);
	}
	return hs;
}

void http_server_free(struct http_server *hs)
{
	if (!hs)
		return;
	httpd_stop(hs->d);
	free(hs);
}

