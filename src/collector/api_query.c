// SPDX-License-Identifier: MIT
/*
 * POST /api/query: run a FayQL query and stream its results.
 *
 * Body: the query text (text/plain), or {"query": "...", "grace_ms": N,
 * "format": "table"|"json"|"folded"|"tree", "cluster": true} (application/json;
 * "cluster": run a query without a scope as cluster.X).  The query is
 * compiled first (parse, check, plan):
 *
 *   400 {"error": MSG, "line": L, "col": C, "diagnostic": TEXT}
 *       an error in the query, at line:col (1-based) when it has a place
 *   200 application/x-ndjson, chunked: one JSON object per line,
 *       {"type":"columns","columns":[...],"mode":"stream"|"aggregate",
 *        "window_ms":N}, then the engine's rows/windows as they come, then
 *       {"type":"end","rows":N,"ms":T} (N: streamed rows) or
 *       {"type":"error","error":MSG}
 *       (with "line" and "col" when the verifier refused code of the
 *       query at that place)
 *
 * A query whose source is cluster.X or host("name").X runs on the agents
 * connected to this collector (cluster.h: cquery.c): the same lines, with
 * "engine":"cluster" in the first, each window's "hosts" completeness
 * ("asked", "answered", "late", "missing", "failed"), "provisional" and
 * "amended", and with "format" a "text" member holding what `fay query`
 * prints for it (the table, or JSON lines); a stream's rows followed by
 * {"type":"stream_end",...} with the same completeness, "limited" and
 * "attached_after_end" (hosts whose probes attached after its time ran
 * out); grace_ms is how long a window waits for late hosts (default
 * 1000).
 *
 * The engine runs on a thread of its own and writes lines into a pipe;
 * the connection's thread sends what the pipe holds as HTTP chunks, so
 * rows reach the browser while the query runs.  When the client goes
 * away the pipe breaks, the engine's emit fails with -EPIPE and it stops.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "cluster/standing.h"
#include "collector/ext_http.h"
#include "collector/http_int.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "engine/engine.h"
#include "engine/qengine.h"

#define QUERY_MAX_TEXT (1u << 20)

struct qrun {
	struct collector *c;
	struct query *q;
	const struct plan *p;
	char *text;			/* cluster queries: sent to the agents */
	bool cluster;			/* run on the agents */
	struct cluster_qopts copts;
	int rfd, wfd;
	int client_fd;			/* the HTTP client's socket: gone = stop */
	int slot;			/* in ext->qslots */
	struct coll_requester who;	/* who asks (requester.h) */
	pthread_t thread;
	volatile int stop;
	uint64_t rows, start_ns;
};

/* Write all of iov to fd.  0 or -errno (-EPIPE: the reader left). */
static int write_all(int fd, struct iovec *iov, int n)
{
	while (n) {
		ssize_t w = writev(fd, iov, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (n && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int emit(void *ctx, const char *json, size_t len)
{
	struct qrun *qr = ctx;
	struct iovec iov[2] = { { (void *)json, len }, { (void *)"\n", 1 } };
	int ret;

	if (qr->stop)
		return -EPIPE;
	if (len > 6 && !strncmp(json, "{\"type\":\"row\"", 13))
		qr->rows++;
	ret = write_all(qr->wfd, iov, 2);
	if (ret)
		qr->stop = 1;
	return ret;
}

static int emit_json(struct qrun *qr, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int ret;

	json_decref(j);
	if (!s)
		return -ENOMEM;
	ret = emit(qr, s, strlen(s));
	free(s);
	return ret;
}

static void *run_main(void *arg)
{
	struct qrun *qr = arg;
	struct qengine_env env = {
		.store = qr->c->store, .emit = emit, .ctx = qr, .stop = &qr->stop,
		.allow_other_users = qr->c->allow_other_users,
		.own_only = qr->who.right != COLL_PROBE_ALL, .uid = qr->who.uid,
	};
	char err[512] = "";
	int ret;

	if (qr->cluster)
		ret = cluster_query_run(qr->c->cluster, qr->q, qr->p, qr->text, &qr->copts,
					&env, err, sizeof(err));
	else
		ret = fay_query_engine_run(qr->q, qr->p, &env, err, sizeof(err));
	if (ret && ret != -EPIPE) {
		int line = 0, col = 0;

		if (query_error(qr->q))
			query_error_pos(qr->q, &line, &col);
		emit_json(qr, json_pack("{s:s, s:s, s:i, s:i}", "type", "error", "error",
					query_error_msg(qr->q) ? query_error_msg(qr->q) :
					err[0] ? err : strerror(-ret), "line", line, "col", col));
	}
	else if (!ret)
		emit_json(qr, json_pack("{s:s, s:I, s:I}", "type", "end",
			"rows", (json_int_t)qr->rows,
			"ms", (json_int_t)((clock_monotonic_ns() - qr->start_ns) / 1000000)));
	close(qr->wfd);
	qr->wfd = -1;
	return NULL;
}

static ssize_t read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct qrun *qr = cls;
	ssize_t n;

	/* Wait for a line, and watch the client: one that leaves while no
	 * line is due (a window query between windows) stops the query now,
	 * not at the next line's failed write. */
	for (;;) {
		struct pollfd pf[2] = {
			{ .fd = qr->rfd, .events = POLLIN },
			{ .fd = qr->client_fd, .events = POLLRDHUP },
		};

		if (poll(pf, qr->client_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break;
		if (qr->client_fd >= 0 && (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			qr->stop = 1;
			return HTTP_STREAM_ERROR;
		}
	}
	do
		n = read(qr->rfd, buf, max);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		return n;
	return n == 0 ? HTTP_STREAM_END : HTTP_STREAM_ERROR;
}

/*
 * A slot for a query from client ip: its index, or -1 with the reason in
 * why (QUERY_MAX_PER_CLIENT of this client's, or QUERY_MAX_RUNNING in
 * all, are running: each compiles, loads and holds kernel memory).
 */
static int slot_take(struct coll_ext *e, const char *ip, char *why, size_t len)
{
	int mine = 0, free_slot = -1;

	pthread_mutex_lock(&e->qslots_lock);
	for (int i = 0; i < QUERY_MAX_RUNNING; i++) {
		if (!e->qslots[i][0])
			free_slot = free_slot < 0 ? i : free_slot;
		else
			mine += !strcmp(e->qslots[i], ip);
	}
	if (mine >= QUERY_MAX_PER_CLIENT)
		free_slot = -1, snprintf(why, len, "%d queries from %s are running, the most one client address may run at once; stop one (or wait for it to end)\n",
					 mine, ip);
	else if (free_slot < 0)
		snprintf(why, len, "%d queries are running, the most this collector runs at once; try again later\n",
			 QUERY_MAX_RUNNING);
	else
		snprintf(e->qslots[free_slot], sizeof(e->qslots[free_slot]), "%s", ip);
	pthread_mutex_unlock(&e->qslots_lock);
	return free_slot;
}

static void slot_give(struct coll_ext *e, int slot)
{
	pthread_mutex_lock(&e->qslots_lock);
	e->qslots[slot][0] = '\0';
	pthread_mutex_unlock(&e->qslots_lock);
}

static void free_cb(void *cls)
{
	struct qrun *qr = cls;

	qr->stop = 1;
	close(qr->rfd); /* the engine's next write fails: it stops */
	pthread_join(qr->thread, NULL);
	slot_give(qr->c->ext, qr->slot);
	M_SUB(qr->c, queries_running, 1);
	query_free(qr->q);
	free(qr->text);
	free(qr);
}

/* Options of a JSON body (cluster queries): grace_ms, format, cluster. */
static int body_opts(json_t *j, struct cluster_qopts *o, char *err, size_t errlen)
{
	json_t *g = json_object_get(j, "grace_ms"), *f = json_object_get(j, "format");

	o->all = json_is_true(json_object_get(j, "cluster"));
	if (g && (!json_is_integer(g) || json_integer_value(g) < 0 ||
		  json_integer_value(g) > 600000)) {
		snprintf(err, errlen, "body: grace_ms: an integer from 0 to 600000");
		return -EINVAL;
	}
	if (g)
		o->grace_ns = (uint64_t)json_integer_value(g) * 1000000ull;
	if (f && json_is_string(f) && !strcmp(json_string_value(f), "table"))
		o->text = CQ_TABLE;
	else if (f && json_is_string(f) && !strcmp(json_string_value(f), "json"))
		o->text = CQ_JSON;
	else if (f && json_is_string(f) && !strcmp(json_string_value(f), "folded"))
		o->text = CQ_FOLDED;
	else if (f && json_is_string(f) && !strcmp(json_string_value(f), "tree"))
		o->text = CQ_TREE;
	else if (f && !(json_is_string(f) && !strcmp(json_string_value(f), "values"))) {
		snprintf(err, errlen, "body: format: \"table\", \"json\", \"folded\", \"tree\" or "
			 "\"values\"");
		return -EINVAL;
	}
	return 0;
}

/* The query text of the body: plain text, or {"query": "...", ...}. */
static char *body_text(struct http_con *con, const struct http_body *b,
		       struct cluster_qopts *o, char *err, size_t errlen)
{
	const char *type = http_header(con, "Content-Type");
	json_error_t je;
	json_t *j, *q;
	char *s;

	if (type && strcasestr(type, "json")) {
		j = json_loadb(b->p ? b->p : "", b->len, 0, &je);
		if (!j) {
			snprintf(err, errlen, "body: line %d column %d: %s", je.line, je.column, je.text);
			return NULL;
		}
		q = json_object_get(j, "query");
		if (body_opts(j, o, err, errlen)) {
			json_decref(j);
			return NULL;
		}
		if (!json_is_string(q)) {
			json_decref(j);
			snprintf(err, errlen, "body: expected {\"query\": \"from ...\"}");
			return NULL;
		}
		s = strdup(json_string_value(q));
		json_decref(j);
	} else {
		s = strndup(b->p ? b->p : "", b->len);
	}
	if (!s)
		snprintf(err, errlen, "out of memory");
	else if (!s[strspn(s, " \t\r\n")]) {
		snprintf(err, errlen, "body: empty; send the query text (from X in SOURCE ... select ...)");
		free(s);
		s = NULL;
	}
	return s;
}

int api_query(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	const struct http_body *body = &rq->body;
	struct query_opts opts = { .sz = sizeof(opts), .cluster = true };
	struct cluster_qopts copts = { 0 };
	struct http_resp *resp;
	const struct plan *p = NULL;
	struct qrun *qr = NULL;
	struct query *q;
	int res;
	int fds[2], line = 0, col = 0, ret, slot;
	char err[300], *text;
	json_t *cols, *head;

	M_ADD(c, queries_total, 1);
	if (body->too_big || body->len > QUERY_MAX_TEXT) {
		M_ADD(c, queries_refused, 1);
		return reply_text(c, con, 413, "body: a query is at most %u bytes\n", QUERY_MAX_TEXT);
	}
	text = body_text(con, body, &copts, err, sizeof(err));
	if (!text) {
		M_ADD(c, queries_refused, 1);
		return reply_json_status(c, con, 400, json_pack("{s:s, s:i, s:i}", "error", err,
							      "line", 0, "col", 0));
	}
	opts.tracefs = getenv("FAY_TRACEFS");
	if (opts.tracefs && !*opts.tracefs)
		opts.tracefs = NULL;
	q = query_new("<query>", text, strlen(text), &opts);
	if (!q) {
		free(text);
		return reply_text(c, con, 500, "query: %s\n", strerror(errno));
	}
	ret = query_parse(q);
	ret = ret ? : query_check(q);
	ret = ret ? : query_plan(q, &p);
	if (ret) {
		M_ADD(c, queries_refused, 1);
		if (ret == -ENOMEM) {
			free(text);
			query_free(q);
			return reply_text(c, con, 500, "out of memory\n");
		}
		free(text);
		query_error_pos(q, &line, &col);
		res = reply_json_status(c, con, 400, json_pack("{s:s, s:i, s:i, s:s}",
			"error", query_error_msg(q) ? query_error_msg(q) : "invalid query",
			"line", line, "col", col,
			"diagnostic", query_error(q) ? query_error(q) : ""));
		query_free(q);
		return res;
	}
	if (copts.text == CQ_FOLDED || copts.text == CQ_TREE) {
		char why[512];

		if (engine_folded_check(p, why, sizeof(why))) {
			M_ADD(c, queries_refused, 1);
			free(text);
			query_free(q);
			return reply_json_status(c, con, 400, json_pack("{s:s}", "error", why));
		}
	}
	if ((copts.all || query_ast(q)->src.scope != SCOPE_LOCAL) && p->mode == PLAN_STREAM &&
	    p->keep_ns) {
		/* its events would be kept on every host for no one: a
		 * capture names a standing query */
		M_ADD(c, queries_refused, 1);
		free(text);
		query_free(q);
		return reply_json_status(c, con, 400, json_pack("{s:s}", "error",
			"keep mode on the cluster needs a standing query, so that "
			"its kept events can be asked for: register it with a name "
			"(fay query --cluster URL --keep NAME, or POST /api/queries) "
			"and bring them back with fay capture --query NAME --last DUR"));
	}
	{
		/* #20: may this requester load these probes? (requester.h) */
		bool cluster = copts.all || query_ast(q)->src.scope != SCOPE_LOCAL;
		char msg[512];

		if (coll_requester_admit(rq->who, "POST /api/query", (int)query_ast(q)->src.kind,
					 cluster, msg, sizeof(msg))) {
			M_ADD(c, queries_refused, 1);
			free(text);
			query_free(q);
			return reply_text(c, con, 403, "%s", msg);
		}
	}
	{
		const struct sockaddr *peer = http_peer(con);
		char ip[64] = "?", why[200];

		if (peer)
			net_addr_ip(peer, ip, sizeof(ip));
		slot = slot_take(c->ext, ip, why, sizeof(why));
		if (slot < 0) {
			char *b = strdup(why);

			M_ADD(c, queries_busy, 1);
			free(text);
			query_free(q);
			return b ? reply_hdr(con, 429, "text/plain; charset=utf-8", b, strlen(b),
					     "Retry-After", "5") : HTTPD_NO;
		}
	}
	cols = plan_columns_json(p);
	qr = calloc(1, sizeof(*qr));
	if (!qr || pipe2(fds, O_CLOEXEC)) {
		slot_give(c->ext, slot);
		free(qr);
		free(text);
		json_decref(cols);
		query_free(q);
		return reply_text(c, con, 500, "cannot start the query: %s\n", strerror(errno));
	}
	qr->c = c;
	qr->q = q;
	qr->p = p;
	qr->text = text;
	qr->copts = copts;
	qr->cluster = copts.all || query_ast(q)->src.scope != SCOPE_LOCAL;
	qr->rfd = fds[0];
	qr->wfd = fds[1];
	qr->slot = slot;
	qr->client_fd = http_con_fd(con);
	qr->who = *rq->who;
	qr->start_ns = clock_monotonic_ns();
	head = json_pack("{s:s, s:o, s:s, s:I, s:I, s:s}", "type", "columns", "columns", cols,
			 "mode", p->mode == PLAN_AGGREGATE ? "aggregate" : "stream",
			 "window_ms", (json_int_t)(p->window_ns / 1000000),
			 "for_ms", (json_int_t)(p->for_ns / 1000000),
			 "engine", qr->cluster ? "cluster" : "host");
	if (emit_json(qr, head) || pthread_create(&qr->thread, NULL, run_main, qr)) {
		slot_give(c->ext, slot);
		close(fds[0]);
		close(fds[1]);
		free(qr);
		free(text);
		query_free(q);
		return reply_text(c, con, 500, "cannot start the query\n");
	}
	M_ADD(c, queries_running, 1);
	resp = http_resp_stream(read_cb, qr, free_cb);
	if (!resp) {
		free_cb(qr);
		return HTTPD_NO;
	}
	http_resp_header(resp, "Content-Type", "application/x-ndjson");
	http_resp_header(resp, "Cache-Control", "no-store");
	http_resp_header(resp, "X-Content-Type-Options", "nosniff");
	return http_resp_queue(con, 200, resp);
}
