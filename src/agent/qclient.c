// SPDX-License-Identifier: MIT
/*
 * The agent's query connection (qclient.h).  One thread keeps the
 * connection (connect, HELLO role "query", WELCOME, then frames and a
 * BEAT every second) and starts a runner thread per QUERY; runners send
 * their frames themselves under the send lock.  A runner's stop flag is
 * set by CANCEL, by the loss of the connection and by qclient_stop(); the
 * driver checks it every QRUN_TICK_MS, so probes are detached within
 * that and the time it takes to free the programs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/qclient.h"
#include "agent/ship.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/version.h"
#include "common/wire_cluster.h"
#include "engine/driver.h"
#include "query/partial.h"

#define QC_TICK_MS		100
#define QC_BACKOFF_MIN_MS	100
#define QC_BACKOFF_MAX_MS	5000
#define QC_STREAM_FLUSH		(64u << 10)
#define QC_MAX_QUERIES		64

struct runner {
	struct qclient *c;
	uint32_t qid;
	uint64_t deadline_ns;
	char *text;
	size_t len;
	volatile sig_atomic_t stop;
	int done;			/* the thread has finished (under c->lock) */
	pthread_t thread;
	struct runner *next;
	struct wbuf stream;		/* records not yet sent */
	uint64_t nrecords;
};

struct qclient {
	struct qclient_opts o;
	char host[256], port[32];
	pthread_t thread;
	pthread_mutex_t lock;		/* runners list, fd for senders */
	pthread_mutex_t send_lock;	/* one frame at a time on fd */
	int fd;
	volatile int stop;
	struct runner *runners;
};

/* ---- sending ---------------------------------------------------------------- */

static int send_frame(struct qclient *c, unsigned type, const struct wbuf *w)
{
	int err;

	if (w->err)
		return w->err;
	pthread_mutex_lock(&c->send_lock);
	err = c->fd >= 0 ? wire_send_frame(c->fd, type, 0, w->p, (uint32_t)w->len) : -ENOTCONN;
	pthread_mutex_unlock(&c->send_lock);
	return err;
}

static int send_status(struct runner *r, enum wire_qstate st, const char *text)
{
	struct wire_qstatus s = { .qid = r->qid, .state = st, .text = text,
				  .len = text ? strlen(text) : 0 };
	struct wbuf w = { 0 };
	int err;

	wire_qstatus_encode(&s, &w);
	err = send_frame(r->c, WIRE_QSTATUS, &w);
	wbuf_free(&w);
	return err;
}

/* The head of a PARTIAL for this host. */
static void partial_head(struct runner *r, unsigned flags, uint64_t start, uint64_t end,
			 const uint64_t counters[ENGINE_NCOUNTERS], struct wbuf *w)
{
	struct wire_phost me = { .state = WIRE_HS_ANSWERED };
	struct wire_partial p = {
		.qid = r->qid, .flags = flags, .start_ns = start, .end_ns = end,
		.ncounters = ENGINE_NCOUNTERS, .nhosts = 1, .hosts = &me,
	};

	snprintf(me.name, sizeof(me.name), "%s", r->c->o.host);
	for (int i = 0; i < ENGINE_NCOUNTERS; i++)
		p.counters[i] = counters ? counters[i] : 0;
	wire_partial_encode_head(&p, w);
}

/* ---- the runner's sink -------------------------------------------------- */

static int on_attached(void *ctx, struct engine *e)
{
	struct runner *r = ctx;
	char desc[2048] = "";
	size_t n = 0;

	for (int i = 0; i < engine_nprobes(e) && n < sizeof(desc) - 1; i++)
		n += (size_t)snprintf(desc + n, sizeof(desc) - n, "%s%s", i ? ", " : "",
				      engine_probe_desc(e, i));
	return send_status(r, WIRE_QS_ATTACHED, desc);
}

static int on_result(void *ctx, struct engine *e, const struct engine_result *res,
		     const struct engine_window *win)
{
	struct runner *r = ctx;
	const struct plan *p = engine_plan(e);
	unsigned flags = win->windowed ? WIRE_PF_WINDOW : WIRE_PF_SNAPSHOT;
	struct wbuf w = { 0 };
	int err;

	if (win->final)
		flags |= WIRE_PF_FINAL;
	partial_head(r, flags, win->start_ns, win->end_ns, res->counters, &w);
	partial_shape_encode(p, &w);
	wbuf_uvar(&w, res->nrows);
	for (size_t i = 0; i < res->nrows; i++)
		partial_row_encode(p, res->rows[i].key, res->rows[i].val, &w);
	err = send_frame(r->c, WIRE_PARTIAL, &w);
	wbuf_free(&w);
	return err;
}

/* Send the records gathered so far (and, final, the end of the stream). */
static int flush_stream(struct runner *r, struct engine *e, bool final,
			const uint64_t counters[ENGINE_NCOUNTERS])
{
	const struct plan *p = engine_plan(e);
	struct wbuf w = { 0 };
	uint64_t now = clock_realtime_ns();
	int err;

	if (!r->nrecords && !final)
		return 0;
	partial_head(r, WIRE_PF_STREAM | (final ? WIRE_PF_FINAL : 0), now, now, counters, &w);
	partial_shape_encode(p, &w);
	wbuf_uvar(&w, r->nrecords);
	wbuf_put(&w, r->stream.p, r->stream.len);
	err = r->stream.err ? r->stream.err : send_frame(r->c, WIRE_PARTIAL, &w);
	wbuf_free(&w);
	r->stream.len = 0;
	r->nrecords = 0;
	return err;
}

static int on_record(void *ctx, struct engine *e, const void *rec, size_t size)
{
	struct runner *r = ctx;

	partial_record_encode(engine_plan(e), rec, &r->stream);
	r->nrecords++;
	return r->stream.len >= QC_STREAM_FLUSH ? flush_stream(r, e, false, NULL) : 0;
}

static int on_batch_end(void *ctx, struct engine *e)
{
	return flush_stream(ctx, e, false, NULL);
}

static int on_stream_end(void *ctx, struct engine *e, const uint64_t c[ENGINE_NCOUNTERS])
{
	return flush_stream(ctx, e, true, c);
}

static void *runner_main(void *arg)
{
	struct runner *r = arg;
	struct qclient *c = r->c;
	struct query_opts qo = { .sz = sizeof(qo), .tracefs = c->o.tracefs, .cluster = true };
	struct engine_sink sink = {
		.sz = sizeof(sink), .attached = on_attached, .record = on_record,
		.result = on_result, .batch_end = on_batch_end,
		.stream_end = on_stream_end, .ctx = r,
	};
	struct engine_drive_opts o = {
		.sz = sizeof(o), .stop = &r->stop, .watch_fd = -1, .align = true,
		.raw = true, .snapshot_ns = 1000000000ull, .tick_ms = QC_TICK_MS,
		.deadline_realtime_ns = r->deadline_ns,
		.eo = { .host = c->o.host },
	};
	char why[4096] = "";
	const struct plan *p;
	struct query *q = query_new("<cluster query>", r->text, r->len, &qo);
	int rc;

	o.err = why;
	o.errlen = sizeof(why);
	if (!q) {
		send_status(r, WIRE_QS_FAILED, "out of memory");
		goto out;
	}
	if (query_plan(q, &p)) {
		send_status(r, WIRE_QS_FAILED, query_error(q));
		goto out;
	}
	rc = engine_drive(q, p, &o, &sink);
	if (rc == ENGINE_DRIVE_QUERY || (rc < 0 && query_error(q)))
		send_status(r, WIRE_QS_FAILED, query_error(q));
	else if (rc < 0 && rc != -EPIPE && rc != -ENOTCONN)
		send_status(r, WIRE_QS_FAILED, why[0] ? why : errstr(rc));
	else if (!r->stop)
		send_status(r, WIRE_QS_ENDED, "");
	pr_info("query %" PRIu32 ": %s", r->qid, r->stop ? "cancelled, probes detached" :
		rc ? (why[0] ? why : "failed") : "ended");
out:
	query_free(q);
	pthread_mutex_lock(&c->lock);
	r->done = 1;
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- runners ---------------------------------------------------------------- */

static void runner_free(struct runner *r)
{
	pthread_join(r->thread, NULL);
	wbuf_free(&r->stream);
	free(r->text);
	free(r);
}

/* Join and free finished runners; with all, stop and free every one. */
static void reap(struct qclient *c, bool all)
{
	struct runner **pp = &c->runners, *done = NULL;

	pthread_mutex_lock(&c->lock);
	while (*pp) {
		struct runner *r = *pp;

		if (all)
			r->stop = 1;
		if (all || r->done) {
			*pp = r->next;
			r->next = done;
			done = r;
		} else {
			pp = &r->next;
		}
	}
	pthread_mutex_unlock(&c->lock);
	while (done) {
		struct runner *r = done;

		done = r->next;
		runner_free(r);
	}
}

static void on_query(struct qclient *c, const unsigned char *p, uint32_t len)
{
	struct wire_query wq;
	struct runner *r;
	char why[256];
	int n = 0;

	if (wire_query_decode(p, len, &wq, why, sizeof(why))) {
		pr_warn("collector %s: %s", c->o.collector, why);
		return;
	}
	pthread_mutex_lock(&c->lock);
	for (r = c->runners; r; r = r->next)
		if (r->qid == wq.qid)
			break;
		else
			n++;
	pthread_mutex_unlock(&c->lock);
	if (r)
		return;		/* already running (a resend) */
	r = calloc(1, sizeof(*r));
	if (r)
		r->text = malloc(wq.len + 1);
	if (!r || !r->text || n >= QC_MAX_QUERIES) {
		struct runner tmp = { .c = c, .qid = wq.qid };

		send_status(&tmp, WIRE_QS_FAILED, n >= QC_MAX_QUERIES ?
			    "this agent runs its maximum of 64 queries" : "out of memory");
		if (r)
			free(r->text);
		free(r);
		return;
	}
	memcpy(r->text, wq.text, wq.len);
	r->text[wq.len] = '\0';
	r->len = wq.len;
	r->c = c;
	r->qid = wq.qid;
	r->deadline_ns = wq.deadline_ns;
	if (pthread_create(&r->thread, NULL, runner_main, r)) {
		send_status(r, WIRE_QS_FAILED, "cannot start a thread");
		free(r->text);
		free(r);
		return;
	}
	pthread_mutex_lock(&c->lock);
	r->next = c->runners;
	c->runners = r;
	pthread_mutex_unlock(&c->lock);
	pr_info("query %" PRIu32 " from the collector: %.*s", wq.qid, (int)wq.len, wq.text);
}

static void on_cancel(struct qclient *c, const unsigned char *p, uint32_t len)
{
	uint32_t qid;
	char why[128];

	if (wire_u32_decode(p, len, &qid, why, sizeof(why))) {
		pr_warn("collector %s: %s", c->o.collector, why);
		return;
	}
	pthread_mutex_lock(&c->lock);
	for (struct runner *r = c->runners; r; r = r->next)
		if (r->qid == qid)
			r->stop = 1;
	pthread_mutex_unlock(&c->lock);
}

/* ---- the connection ------------------------------------------------------ */

static int dial(struct qclient *c)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC };
	struct addrinfo *res = NULL;
	int fd, one = 1, err;

	err = getaddrinfo(c->host, c->port, &hints, &res);
	if (err)
		return -EHOSTUNREACH;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return -errno;
	}
	err = connect(fd, res->ai_addr, res->ai_addrlen) ? -errno : 0;
	freeaddrinfo(res);
	if (err == -EINPROGRESS) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		socklen_t sl = sizeof(err);

		err = poll(&pf, 1, 2000) == 1 ? 0 : -ETIMEDOUT;
		if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) == 0)
			err = -err;
	}
	if (err) {
		close(fd);
		return err;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	{
		struct timeval tv = { .tv_sec = 5 };	/* a stuck collector */

		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	return fd;
}

static int hello(struct qclient *c, int fd, unsigned char **buf, size_t *cap)
{
	struct wire_hello m = { .role = "query" };
	struct wire_buf wb = { 0 };
	struct wire_frame f;
	struct wire_error e;
	char why[256];
	int err;

	snprintf(m.agent_id, sizeof(m.agent_id), "%s", c->o.agent_id);
	snprintf(m.host, sizeof(m.host), "%s", c->o.host);
	snprintf(m.version, sizeof(m.version), "%s", FAY_VERSION);
	snprintf(m.token, sizeof(m.token), "%s", c->o.token ? c->o.token : "");
	err = wire_put_hello(&wb, &m);
	err = err ? : wire_buf_send(&wb, fd);
	wire_buf_free(&wb);
	err = err ? : wire_recv_frame(fd, &f.h, buf, cap, 5000, why, sizeof(why));
	if (err)
		return err > 0 ? -ECONNRESET : err;
	f.payload = *buf;
	if (f.h.type == WIRE_ERROR) {
		if (wire_get_error(&f, &e, why, sizeof(why)))
			snprintf(e.error, sizeof(e.error), "(unreadable ERROR: %s)", why);
		pr_warn("collector %s refused the query connection: %s", c->o.collector, e.error);
		return -EACCES;
	}
	return f.h.type == WIRE_WELCOME ? 0 : -EPROTO;
}

/* Serve one connection until it breaks or stop. */
static void serve(struct qclient *c, int fd)
{
	unsigned char *buf = NULL;
	size_t cap = 0;
	uint64_t next_beat = 0;
	int err = hello(c, fd, &buf, &cap);

	if (err) {
		free(buf);
		return;
	}
	pr_info("collector %s: query connection up", c->o.collector);
	pthread_mutex_lock(&c->send_lock);
	c->fd = fd;
	pthread_mutex_unlock(&c->send_lock);
	while (!c->stop) {
		struct wire_hdr h;
		char why[256];
		uint64_t now = clock_monotonic_ns();

		if (now >= next_beat) {
			struct wbuf w = { 0 };

			if (send_frame(c, WIRE_BEAT, &w))
				break;
			next_beat = now + WIRE_BEAT_MS * 1000000ull;
		}
		reap(c, false);
		err = wire_recv_frame(fd, &h, &buf, &cap, QC_TICK_MS * 2, why, sizeof(why));
		if (err == -ETIMEDOUT)
			continue;
		if (err) {
			pr_warn("collector %s: query connection: %s", c->o.collector,
				err > 0 ? "closed" : why[0] ? why : errstr(err));
			break;
		}
		if (h.type == WIRE_QUERY)
			on_query(c, buf, h.len);
		else if (h.type == WIRE_CANCEL)
			on_cancel(c, buf, h.len);
		else if (h.type == WIRE_ERROR) {
			pr_warn("collector %s: %.*s", c->o.collector, (int)h.len, (const char *)buf);
			break;
		}
	}
	/* the collector resends what still runs once we are back */
	reap(c, true);
	pthread_mutex_lock(&c->send_lock);
	c->fd = -1;
	pthread_mutex_unlock(&c->send_lock);
	free(buf);
}

static void *conn_main(void *arg)
{
	struct qclient *c = arg;
	unsigned backoff = QC_BACKOFF_MIN_MS;

	while (!c->stop) {
		int fd = dial(c);

		if (fd >= 0) {
			uint64_t t0 = clock_monotonic_ns();

			serve(c, fd);
			close(fd);
			if (clock_monotonic_ns() - t0 > 10000000000ull)
				backoff = QC_BACKOFF_MIN_MS;	/* it was up a while */
		}
		for (unsigned w = 0; w < backoff && !c->stop; w += 50)
			poll(NULL, 0, 50);
		backoff = backoff * 2 > QC_BACKOFF_MAX_MS ? QC_BACKOFF_MAX_MS : backoff * 2;
	}
	return NULL;
}

struct qclient *qclient_start(const struct qclient_opts *o)
{
	struct qclient *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->o = *o;
	c->fd = -1;
	if (ship_parse_addr(o->collector, c->host, sizeof(c->host), c->port, sizeof(c->port))) {
		free(c);
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	if (pthread_create(&c->thread, NULL, conn_main, c)) {
		free(c);
		errno = EAGAIN;
		return NULL;
	}
	return c;
}

void qclient_stop(struct qclient *c)
{
	if (!c)
		return;
	c->stop = 1;
	pthread_join(c->thread, NULL);
	reap(c, true);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	free(c);
}
