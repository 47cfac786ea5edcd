// SPDX-License-Identifier: MIT
/* The lower end of a query connection (qlink.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/qlink.h"
#include "common/tls.h"
#include "common/version.h"

#define QL_TICK_MS		100
#define QL_BACKOFF_MIN_MS	100
#define QL_BACKOFF_MAX_MS	5000

struct job {
	struct qlink_job j;
	char *text;
	int done;			/* the runner returned (under lock) */
	pthread_t thread;
	struct job *next;
};

struct qlink {
	struct qlink_opts o;		/* strings point at the copies below */
	char host[256], port[32];
	char upper[300], name[WIRE_HOST_MAX + 1], agent_id[33], token[512];
	pthread_t thread;
	pthread_mutex_t lock;		/* jobs */
	pthread_mutex_t send_lock;	/* fd, one frame at a time */
	int fd;
	volatile int stop;
	struct job *jobs;
	void *ctx;			/* the copy of o.ctx, or o.ctx */
};

void qlink_set_token(struct qlink *l, const char *token)
{
	pthread_mutex_lock(&l->lock);
	snprintf(l->token, sizeof(l->token), "%s", token ? token : "");
	l->o.token = token ? l->token : NULL;
	pthread_mutex_unlock(&l->lock);
}

int qlink_send(struct qlink *l, unsigned type, const struct wbuf *w)
{
	int err;

	if (w->err)
		return w->err;
	pthread_mutex_lock(&l->send_lock);
	err = l->fd >= 0 ? wire_send_frame(l->fd, type, 0, w->p, (uint32_t)w->len) : -ENOTCONN;
	pthread_mutex_unlock(&l->send_lock);
	return err;
}

int qlink_status(struct qlink_job *job, enum wire_qstate st, const char *text)
{
	struct wire_qstatus s = { .qid = job->qid, .state = st, .text = text,
				  .len = text ? strlen(text) : 0 };
	struct wbuf w = { 0 };
	int err;

	wire_qstatus_encode(&s, &w);
	err = qlink_send(job->link, WIRE_QSTATUS, &w);
	wbuf_free(&w);
	return err;
}

static void *job_main(void *arg)
{
	struct job *jb = arg;
	struct qlink *l = jb->j.link;

	l->o.run(&jb->j);
	pthread_mutex_lock(&l->lock);
	jb->done = 1;
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

/* Join and free finished runners; with all, stop and free every one. */
static void reap(struct qlink *l, bool all)
{
	struct job **pp = &l->jobs, *done = NULL;

	pthread_mutex_lock(&l->lock);
	while (*pp) {
		struct job *jb = *pp;

		if (all)
			jb->j.stop = 1;
		if (all || jb->done) {
			*pp = jb->next;
			jb->next = done;
			done = jb;
		} else {
			pp = &jb->next;
		}
	}
	pthread_mutex_unlock(&l->lock);
	while (done) {
		struct job *jb = done;

		done = jb->next;
		pthread_join(jb->thread, NULL);
		free(jb->text);
		free(jb);
	}
}

static void on_query(struct qlink *l, const unsigned char *p, uint32_t len)
{
	struct wire_query wq;
	struct job *jb;
	char why[256];
	unsigned n = 0, max = l->o.max_jobs ? l->o.max_jobs : 64;

	if (wire_query_decode(p, len, &wq, why, sizeof(why))) {
		pr_warn("%s to %s: %s", l->o.what, l->o.upper, why);
		return;
	}
	if (!(wq.flags & WIRE_QF_PROBE)) {
		/* #20: the collector did not vouch for its requester */
		struct qlink_job tmp = { .link = l, .qid = wq.qid };

		snprintf(why, sizeof(why), "refused: the query came without the probe scope "
			 "(its requester at %s held no token with the probe scope and was not "
			 "root there, or the collector predates this check)", l->o.upper);
		pr_warn("query %" PRIu32 " from %s: %s", wq.qid, l->o.upper, why);
		qlink_status(&tmp, WIRE_QS_FAILED, why);
		return;
	}
	pthread_mutex_lock(&l->lock);
	for (jb = l->jobs; jb; jb = jb->next, n++)
		if (jb->j.qid == wq.qid)
			break;
	pthread_mutex_unlock(&l->lock);
	if (jb)
		return;		/* already running (a resend) */
	jb = calloc(1, sizeof(*jb));
	if (jb)
		jb->text = malloc(wq.len + 1);
	if (!jb || !jb->text || n >= max) {
		struct qlink_job tmp = { .link = l, .qid = wq.qid };

		snprintf(why, sizeof(why), n >= max ? "this host runs its maximum of %u queries" :
			 "out of memory", max);
		qlink_status(&tmp, WIRE_QS_FAILED, why);
		if (jb)
			free(jb->text);
		free(jb);
		return;
	}
	memcpy(jb->text, wq.text, wq.len);
	jb->text[wq.len] = '\0';
	jb->j = (struct qlink_job){
		.link = l, .qid = wq.qid, .deadline_ns = wq.deadline_ns,
		.window_ns = wq.window_ns, .text = jb->text, .len = wq.len, .ctx = l->ctx,
	};
	if (pthread_create(&jb->thread, NULL, job_main, jb)) {
		qlink_status(&jb->j, WIRE_QS_FAILED, "cannot start a thread");
		free(jb->text);
		free(jb);
		return;
	}
	pthread_mutex_lock(&l->lock);
	jb->next = l->jobs;
	l->jobs = jb;
	pthread_mutex_unlock(&l->lock);
	pr_info("query %" PRIu32 " from %s: %.*s", wq.qid, l->o.upper, (int)wq.len, wq.text);
}

static void on_cancel(struct qlink *l, const unsigned char *p, uint32_t len)
{
	uint32_t qid;
	char why[128];

	if (wire_u32_decode(p, len, &qid, why, sizeof(why))) {
		pr_warn("%s to %s: %s", l->o.what, l->o.upper, why);
		return;
	}
	pthread_mutex_lock(&l->lock);
	for (struct job *jb = l->jobs; jb; jb = jb->next)
		if (jb->j.qid == qid)
			jb->j.stop = 1;
	pthread_mutex_unlock(&l->lock);
}

/* A CAPTURE: answered at once, on this thread (the flight buffer is in
 * memory: a copy, no I/O). */
static void on_capture(struct qlink *l, const unsigned char *p, uint32_t len)
{
	struct wire_capture c;
	struct wire_captured res = { 0 };
	struct wbuf spans = { 0 }, w = { 0 };
	char why[256];
	int err;

	if (wire_capture_decode(p, len, &c, why, sizeof(why))) {
		pr_warn("%s to %s: %s", l->o.what, l->o.upper, why);
		return;
	}
	res.cid = c.cid;
	l->o.capture(l->ctx, &c, &res, &spans);
	if (spans.err || !spans.len) {
		/* out of memory: answer with no spans rather than not at all */
		wbuf_free(&spans);
		memset(&spans, 0, sizeof(spans));
		wbuf_le32(&spans, 0);
	}
	wire_captured_encode_head(&res, &w);
	wbuf_put(&w, spans.p, spans.len);
	err = qlink_send(l, WIRE_CAPTURED, &w);
	if (err)
		pr_warn("capture %" PRIu32 " from %s: cannot answer: %s", c.cid, l->o.upper,
			strerror(-err));
	wbuf_free(&spans);
	wbuf_free(&w);
}

static int dial(struct qlink *l)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC };
	struct addrinfo *res = NULL;
	struct timeval tv = { .tv_sec = 5 };	/* a stuck collector */
	int fd, one = 1, err;

	if (getaddrinfo(l->host, l->port, &hints, &res))
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
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* a collector gone without a word (a pulled cable) breaks the link */
	net_keepalive(fd, NET_KEEPALIVE_IDLE_S, NET_KEEPALIVE_INTVL_S, NET_KEEPALIVE_CNT);
	if (l->o.tls) {
		char why[512];

		fd = tls_connect(l->o.tls, fd, l->host, why, sizeof(why));
		if (fd < 0) {
			pr_warn("%s to %s: TLS: %s", l->o.what, l->o.upper, why);
			return fd;
		}
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	return fd;
}

static int hello(struct qlink *l, int fd, unsigned char **buf, size_t *cap)
{
	struct wire_hello m = { .role = "query", .collector = l->o.collector, .btf = -1,
				.capture = l->o.capture != NULL };
	struct utsname u;
	struct wire_buf wb = { 0 };
	struct wire_frame f;
	struct wire_error e;
	char why[256];
	int err;

	snprintf(m.agent_id, sizeof(m.agent_id), "%s", l->o.agent_id);
	snprintf(m.host, sizeof(m.host), "%s", l->o.host);
	snprintf(m.version, sizeof(m.version), "%s", FAY_VERSION);
	pthread_mutex_lock(&l->lock);   /* qlink_set_token() */
	snprintf(m.token, sizeof(m.token), "%s", l->o.token ? l->o.token : "");
	pthread_mutex_unlock(&l->lock);
	/* what this host has: the collector lists it with the host */
	if (!uname(&u))
		snprintf(m.kernel, sizeof(m.kernel), "%s", u.release);
	if (!l->o.collector)
		m.btf = !access("/sys/kernel/btf/vmlinux", R_OK);
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
		pr_warn("%s: %s refused it: %s", l->o.what, l->o.upper, e.error);
		return -EACCES;
	}
	return f.h.type == WIRE_WELCOME ? 0 : -EPROTO;
}

/* Serve one connection until it breaks or stop. */
static void serve(struct qlink *l, int fd)
{
	unsigned char *buf = NULL;
	size_t cap = 0;
	uint64_t next_beat = 0;
	int err = hello(l, fd, &buf, &cap);

	if (err) {
		free(buf);
		return;
	}
	pr_info("%s to %s: up", l->o.what, l->o.upper);
	pthread_mutex_lock(&l->send_lock);
	l->fd = fd;
	pthread_mutex_unlock(&l->send_lock);
	while (!l->stop) {
		struct wire_hdr h;
		char why[256];
		uint64_t now = clock_monotonic_ns();

		if (now >= next_beat) {
			struct wbuf w = { 0 };

			if (qlink_send(l, WIRE_BEAT, &w))
				break;
			next_beat = now + WIRE_BEAT_MS * 1000000ull;
		}
		reap(l, false);
		err = wire_recv_frame(fd, &h, &buf, &cap, QL_TICK_MS * 2, why, sizeof(why));
		if (err == -ETIMEDOUT)
			continue;
		if (err) {
			pr_warn("%s to %s: %s", l->o.what, l->o.upper,
				err > 0 ? "closed" : why[0] ? why : strerror(-err));
			break;
		}
		if (h.type == WIRE_QUERY)
			on_query(l, buf, h.len);
		else if (h.type == WIRE_CANCEL)
			on_cancel(l, buf, h.len);
		else if (h.type == WIRE_CAPTURE && l->o.capture)
			on_capture(l, buf, h.len);
		else if (h.type == WIRE_ERROR) {
			pr_warn("%s to %s: %.*s", l->o.what, l->o.upper, (int)h.len,
				(const char *)buf);
			break;
		}
	}
	/* the upper collector resends what still runs once we are back */
	reap(l, true);
	pthread_mutex_lock(&l->send_lock);
	l->fd = -1;
	pthread_mutex_unlock(&l->send_lock);
	free(buf);
}

static void *link_main(void *arg)
{
	struct qlink *l = arg;
	unsigned backoff = QL_BACKOFF_MIN_MS;

	while (!l->stop) {
		int fd = dial(l);

		if (fd >= 0) {
			uint64_t t0 = clock_monotonic_ns();

			serve(l, fd);
			close(fd);
			if (clock_monotonic_ns() - t0 > 10000000000ull)
				backoff = QL_BACKOFF_MIN_MS;	/* it was up a while */
		}
		for (unsigned w = 0; w < backoff && !l->stop; w += 50)
			poll(NULL, 0, 50);
		backoff = backoff * 2 > QL_BACKOFF_MAX_MS ? QL_BACKOFF_MAX_MS : backoff * 2;
	}
	return NULL;
}

struct qlink *qlink_start(const struct qlink_opts *o)
{
	struct qlink *l = calloc(1, sizeof(*l) + o->ctx_size);

	if (!l)
		return NULL;
	l->o = *o;
	snprintf(l->upper, sizeof(l->upper), "%s", o->upper ? o->upper : "");
	snprintf(l->name, sizeof(l->name), "%s", o->host ? o->host : "");
	snprintf(l->agent_id, sizeof(l->agent_id), "%s", o->agent_id ? o->agent_id : "");
	snprintf(l->token, sizeof(l->token), "%s", o->token ? o->token : "");
	l->o.upper = l->upper;
	l->o.host = l->name;
	l->o.agent_id = l->agent_id;
	l->o.token = o->token ? l->token : NULL;
	l->ctx = (void *)o->ctx;
	if (o->ctx_size) {
		l->ctx = l + 1;
		memcpy(l->ctx, o->ctx, o->ctx_size);
	}
	if (!l->o.what)
		l->o.what = "query connection";
	l->fd = -1;
	if (net_split_addr(o->upper, l->host, sizeof(l->host), l->port, sizeof(l->port))) {
		free(l);
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_mutex_init(&l->send_lock, NULL);
	if (pthread_create(&l->thread, NULL, link_main, l)) {
		free(l);
		errno = EAGAIN;
		return NULL;
	}
	return l;
}

void qlink_stop(struct qlink *l)
{
	if (!l)
		return;
	l->stop = 1;
	pthread_join(l->thread, NULL);
	reap(l, true);
	pthread_mutex_destroy(&l->lock);
	pthread_mutex_destroy(&l->send_lock);
	free(l);
}
