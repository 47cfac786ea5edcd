// SPDX-License-Identifier: MIT
/*
 * The agent side of the collector (TCP, default 127.0.0.1:9410): the
 * protocol of src/common/wire.h, collector half.
 *
 * One thread per agent connection (agents are few and long-lived; a
 * thread blocks on its socket and on its batch's commit, which keeps the
 * "ACK only after COMMIT" rule a straight line of code).  A connection
 * handles one frame at a time: an agent may pipeline batches, the kernel
 * buffers them.  A protocol violation gets an ERROR frame naming it and
 * closes that connection only.  So does a NACK (without the ERROR): the
 * batches an agent pipelined after the NACKed one are never committed, so
 * what this collector committed of a connection is always a prefix of
 * what it was sent, in seq order, and the agent can resend the NACKed
 * batch under its own seq after reconnecting (src/common/wire.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collector/cluster.h"
#include "collector/collector.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/version.h"
#include "common/wire.h"

#define WIRE_MAX_CONNS        1024
#define WIRE_FRAME_TIMEOUT_MS 30000  /* to finish a frame once begun */
#define WIRE_REJECT_LOG_MAX   10     /* rejected-span warnings per connection */

struct wconn {
	struct wire_server *ws;
	int fd;
	char peer[64];
	struct wconn *next, **pprev;
};

struct wire_server {
	struct collector *c;
	int fd;
	char addr[64];
	pthread_t accept_thread;
	pthread_mutex_t lock;
	pthread_cond_t gone;
	struct wconn *conns;
	int nconns;
	int stop;
};

/* Per-connection state. */
struct agent_conn {
	struct wconn *w;
	struct collector *c;
	struct coll_agent *agent;     /* after HELLO */
	char agent_id[33];
	char host[256];
	bool query_role;              /* HELLO role "query": cluster.c serves it */
	bool child_collector;
	unsigned rejected_logged;
	uint8_t *buf;
	size_t cap;
	/* Test point (tests only): FAY_WIRE_TEST_NACK_EVERY=N NACKs every
	 * Nth batch of a connection as if the store had failed. */
	unsigned long test_nack_every, test_nbatches;
};

const char *wire_server_addr(const struct wire_server *ws)
{
	return ws->addr;
}

/* ---- frames ------------------------------------------------------------- */

/* Read n bytes.  Returns 0, 1 at a clean EOF before the first byte when
 * eof_ok, or -errno (-ECONNRESET: EOF inside a frame; -ETIMEDOUT). */
static int read_full(int fd, void *buf, size_t n, int eof_ok, int timeout_ms)
{
	uint8_t *p = buf;
	size_t got = 0;

	while (got < n) {
		ssize_t r;

		if (timeout_ms >= 0) {
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			int pr = poll(&pfd, 1, timeout_ms);

			if (pr < 0 && errno == EINTR)
				continue;
			if (pr == 0)
				return -ETIMEDOUT;
		}
		r = read(fd, p + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return got == 0 && eof_ok ? 1 : -ECONNRESET;
		got += (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int send_frame(struct agent_conn *ac, unsigned type, uint64_t seq,
		      const char *payload)
{
	struct wire_hdr h;
	uint32_t len = payload ? (uint32_t)strlen(payload) : 0;
	int ret;

	wire_hdr_init(&h, type, seq, payload, len);
	ret = write_full(ac->w->fd, &h, sizeof(h));
	if (!ret && len)
		ret = write_full(ac->w->fd, payload, len);
	return ret;
}

/* Send a frame whose payload is the JSON object o (reference taken). */
static int send_json(struct agent_conn *ac, unsigned type, uint64_t seq, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	int ret;

	json_decref(o);
	if (!s)
		return -ENOMEM;
	ret = send_frame(ac, type, seq, s);
	free(s);
	return ret;
}

/* A protocol violation: say what, as an ERROR frame, and make the caller
 * close the connection.  Returns -EPROTO. */
__attribute__((format(printf, 2, 3)))
static int violation(struct agent_conn *ac, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	M_ADD(ac->c, wire_errors, 1);
	pr_warn("wire: %s%s%s: %s; closing the connection", ac->w->peer,
		ac->agent_id[0] ? " agent " : "", ac->agent_id, msg);
	send_json(ac, WIRE_ERROR, 0, json_pack("{ss}", "error", msg));
	return -EPROTO;
}

/* ---- HELLO -------------------------------------------------------------- */

static int ct_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = (unsigned char)(la != lb);

	for (size_t i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return !d;
}

static const char *opt_str(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int on_hello(struct agent_conn *ac, const uint8_t *p, uint32_t len)
{
	struct collector *c = ac->c;
	const char *id, *host, *version, *token;
	json_error_t je;
	uint64_t last_seq;
	json_t *o;
	int ret;

	if (ac->agent)
		return violation(ac, "HELLO: a second HELLO on one connection");
	o = json_loadb((const char *)p, len, 0, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return violation(ac, "HELLO: payload is not a JSON object%s%s",
				 o ? "" : ": ", o ? "" : je.text);
	}
	id = opt_str(o, "agent_id");
	host = opt_str(o, "host");
	version = opt_str(o, "version");
	token = opt_str(o, "token");
	if (!id || strlen(id) != 32 || strspn(id, "0123456789abcdefABCDEF") != 32) {
		json_decref(o);
		return violation(ac, "HELLO: agent_id: must be 32 hex digits");
	}
	if (c->token && (!token || !ct_equal(token, c->token))) {
		json_decref(o);
		return violation(ac, "HELLO: %s token (start the agent with the collector's --token)",
				 token ? "wrong" : "missing");
	}
	for (int i = 0; i < 32; i++)
		ac->agent_id[i] = (char)(id[i] | 0x20); /* lower case */
	ac->agent_id[32] = '\0';
	snprintf(ac->host, sizeof(ac->host), "%s", host ? host : "");
	if (opt_str(o, "role") && !strcmp(opt_str(o, "role"), "query")) {
		/* a query connection (cluster queries): cluster.c serves it */
		ac->query_role = true;
		ac->child_collector = json_is_true(json_object_get(o, "collector"));
		json_decref(o);
		if (!ac->host[0])
			return violation(ac, "HELLO: a query connection needs a host name");
		ret = send_json(ac, WIRE_WELCOME, 0, json_pack("{ss}", "version", FAY_VERSION));
		return ret ? ret : 2;
	}
	ret = ingest_hello(c->ingest, ac->agent_id, host, version, &last_seq);
	if (ret) {
		json_decref(o);
		ac->agent_id[0] = '\0';
		return violation(ac, "HELLO: the store failed: %s", errstr(ret));
	}
	ac->agent = coll_agent_get(c, ac->agent_id);
	if (ac->agent) {
		pthread_mutex_lock(&c->agents_lock);
		snprintf(ac->agent->host, sizeof(ac->agent->host), "%s", ac->host);
		snprintf(ac->agent->version, sizeof(ac->agent->version), "%s",
			 version ? version : "");
		snprintf(ac->agent->peer, sizeof(ac->agent->peer), "%s", ac->w->peer);
		ac->agent->connected++;
		ac->agent->last_seq = last_seq;
		ac->agent->last_seen_us = clock_realtime_ns() / 1000;
		pthread_mutex_unlock(&c->agents_lock);
	}
	M_ADD(c, agents_connected, 1);
	json_decref(o);
	pr_info("wire: agent %s (%s) connected from %s, last committed batch %" PRIu64,
		ac->agent_id, ac->host[0] ? ac->host : "?", ac->w->peer, last_seq);
	return send_json(ac, WIRE_WELCOME, 0, json_pack("{sssI}", "version", FAY_VERSION,
							"last_seq", (json_int_t)last_seq));
}

/* ---- BATCH -------------------------------------------------------------- */

/*
 * Batch seq was not stored: say so, then close the connection (returns 1)
 * so that no batch the agent sent after it is committed before it is.
 */
static int nack(struct agent_conn *ac, uint64_t seq, const char *why)
{
	M_ADD(ac->c, batches_nacked, 1);
	pr_warn("wire: agent %s (%s): BATCH seq %" PRIu64 " not stored: %s; NACK, closing the "
		"connection (later batches on it are not committed)", ac->agent_id, ac->host,
		seq, why);
	send_json(ac, WIRE_NACK, seq, json_pack("{ss}", "error", why));
	return 1;
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static int on_batch(struct agent_conn *ac, const struct wire_hdr *h,
		    const uint8_t *p, uint32_t len)
{
	struct collector *c = ac->c;
	struct zarena a = { 0 };
	struct store_batch b = { 0 };
	struct zspan *spans = NULL;
	struct zs_part *parts = NULL;
	size_t nparts = 0, pcap = 0;
	uint32_t count, off = 4, rejected = 0;
	char err[256];
	int ret;

	if (!ac->agent_id[0])
		return violation(ac, "BATCH seq %" PRIu64 " before HELLO", h->seq);
	if (!h->seq)
		return violation(ac, "BATCH: seq 0 (batch seqs start at 1)");
	if (len < 4)
		return violation(ac, "BATCH seq %" PRIu64 ": %u-byte payload has no span count",
				 h->seq, len);
	count = get_u32(p);
	if (count > (len - 4) / 4)
		return violation(ac, "BATCH seq %" PRIu64 ": span count %u cannot fit in %u bytes",
				 h->seq, count, len);
	spans = zarena_alloc(&a, sizeof(*spans) * (count + 1));
	if (!spans) {
		ret = -ENOMEM;
		goto nack;
	}
	for (uint32_t i = 0; i < count; i++) {
		struct spanrec r;
		uint32_t rl;
		int n;

		if (len - off < 4) {
			zarena_reset(&a);
			return violation(ac, "BATCH seq %" PRIu64 ": span %u: length cut short at byte %u",
					 h->seq, i, off);
		}
		rl = get_u32(p + off);
		off += 4;
		if (rl > len - off) {
			zarena_reset(&a);
			return violation(ac, "BATCH seq %" PRIu64 ": span %u: length %u at byte %u runs past the %u-byte payload",
					 h->seq, i, rl, off - 4, len);
		}
		n = spanrec_decode(p + off, rl, &r, err, sizeof(err));
		if (n >= 0 && (uint32_t)n != rl) {
			snprintf(err, sizeof(err), "span record: %u bytes after its end", rl - (uint32_t)n);
			n = -EBADMSG;
		}
		off += rl;
		if (n < 0) {
			rejected++;
			if (ac->rejected_logged++ < WIRE_REJECT_LOG_MAX)
				pr_warn("wire: agent %s (%s): BATCH seq %" PRIu64 ": span %u rejected: %s",
					ac->agent_id, ac->host, h->seq, i, err);
			continue;
		}
		if (r.f.flags & SPAN_F_PARTIAL)
			ret = zparts_from_rec(&r, &a, &parts, &nparts, &pcap);
		else
			ret = zspan_from_rec(&r, &a, &spans[b.nspans]);
		if (ret < 0)
			goto nack;
		if (!(r.f.flags & SPAN_F_PARTIAL))
			b.nspans++;
	}
	if (off != len) {
		zarena_reset(&a);
		return violation(ac, "BATCH seq %" PRIu64 ": %u bytes after the last of %u spans",
				 h->seq, len - off, count);
	}
	b.agent_id = ac->agent_id;
	b.host = ac->host[0] ? ac->host : NULL;
	b.seq = h->seq;
	b.spans = spans;
	b.parts = parts;
	b.nparts = nparts;
	M_ADD(c, spans_received, count);
	M_ADD(c, spans_rejected, rejected);
	if (ac->test_nack_every && ++ac->test_nbatches % ac->test_nack_every == 0) {
		snprintf(err, sizeof(err), "test point FAY_WIRE_TEST_NACK_EVERY");
		ret = -EAGAIN;
	} else {
		ret = ingest_write(c->ingest, &b, err, sizeof(err));
	}
	zarena_reset(&a);
	if (ret)
		return nack(ac, h->seq, err);
	if (b.duplicate) {
		M_ADD(c, batches_duplicate, 1);
		M_ADD(c, spans_duplicate, count - rejected);
	} else {
		M_ADD(c, batches, 1);
		M_ADD(c, spans_stored, b.stored);
	}
	if (ac->agent) {
		pthread_mutex_lock(&c->agents_lock);
		ac->agent->rejected += rejected;
		ac->agent->last_seen_us = clock_realtime_ns() / 1000;
		if (b.duplicate) {
			ac->agent->duplicates++;
		} else {
			ac->agent->batches++;
			ac->agent->spans += b.stored;
			ac->agent->last_seq = h->seq;
		}
		pthread_mutex_unlock(&c->agents_lock);
	}
	return send_json(ac, WIRE_ACK, h->seq,
			 json_pack("{sIsbsI}", "stored", (json_int_t)b.stored,
				   "duplicate", b.duplicate, "rejected", (json_int_t)rejected));
nack:
	zarena_reset(&a);
	return nack(ac, h->seq, errstr(ret));
}

/* ---- STATS -------------------------------------------------------------- */

static int on_stats(struct agent_conn *ac, const uint8_t *p, uint32_t len)
{
	struct collector *c = ac->c;
	json_error_t je;
	json_t *o;
	char *s;

	if (!ac->agent_id[0])
		return violation(ac, "STATS before HELLO");
	o = json_loadb((const char *)p, len, 0, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return violation(ac, "STATS: payload is not a JSON object%s%s",
				 o ? "" : ": ", o ? "" : je.text);
	}
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return 0;
	if (ingest_stats(c->ingest, ac->agent_id, s))
		pr_warn("wire: agent %s: STATS not stored", ac->agent_id);
	if (ac->agent) {
		pthread_mutex_lock(&c->agents_lock);
		free(ac->agent->stats);
		ac->agent->stats = s;
		ac->agent->last_seen_us = clock_realtime_ns() / 1000;
		pthread_mutex_unlock(&c->agents_lock);
	} else {
		free(s);
	}
	return 0;
}

/* ---- connection loop ---------------------------------------------------- */

static int one_frame(struct agent_conn *ac)
{
	struct wire_hdr h;
	char err[256];
	int ret;

	ret = read_full(ac->w->fd, &h, sizeof(h), 1, -1);
	if (ret)
		return ret > 0 ? 1 : ret;
	if (wire_hdr_check(&h, err, sizeof(err)))
		return violation(ac, "%s", err);
	if (h.len > ac->cap) {
		uint8_t *nb = realloc(ac->buf, h.len);

		if (!nb)
			return violation(ac, "%s payload of %u bytes: out of memory",
					 wire_type_name(h.type), h.len);
		ac->buf = nb;
		ac->cap = h.len;
	}
	ret = read_full(ac->w->fd, ac->buf, h.len, 0, WIRE_FRAME_TIMEOUT_MS);
	if (ret == -ETIMEDOUT)
		return violation(ac, "%s frame: payload not complete after %d s",
				 wire_type_name(h.type), WIRE_FRAME_TIMEOUT_MS / 1000);
	if (ret)
		return ret;
	if (wire_crc_check(&h, ac->buf, err, sizeof(err)))
		return violation(ac, "%s", err);
	switch (h.type) {
	case WIRE_HELLO:
		return on_hello(ac, ac->buf, h.len);
	case WIRE_BATCH:
		return on_batch(ac, &h, ac->buf, h.len);
	case WIRE_STATS:
		return on_stats(ac, ac->buf, h.len);
	case WIRE_ERROR:
		pr_warn("wire: %s agent %s sent ERROR: %.*s", ac->w->peer, ac->agent_id,
			(int)h.len, (const char *)ac->buf);
		return 1;
	default:
		return violation(ac, "unexpected %s frame from an agent", wire_type_name(h.type));
	}
}

static void *conn_main(void *arg)
{
	struct wconn *w = arg;
	struct wire_server *ws = w->ws;
	struct agent_conn ac = { .w = w, .c = ws->c };
	const char *tp = getenv("FAY_WIRE_TEST_NACK_EVERY");
	int ret;

	if (tp)
		ac.test_nack_every = strtoul(tp, NULL, 10);

	do {
		ret = one_frame(&ac);
	} while (!ret);
	if (ret == 2 && ac.query_role) {
		cluster_serve(ws->c->cluster, w->fd, w->peer, ac.host, ac.child_collector);
		ret = 1;
	}
	if (ret < 0 && ret != -EPROTO && ret != -ECONNRESET)
		pr_info("wire: %s agent %s: connection: %s", w->peer, ac.agent_id, errstr(ret));
	if (ac.agent) {
		pthread_mutex_lock(&ws->c->agents_lock);
		ac.agent->connected--;
		pthread_mutex_unlock(&ws->c->agents_lock);
		M_SUB(ws->c, agents_connected, 1);
		pr_info("wire: agent %s (%s) disconnected", ac.agent_id, ac.host);
	}
	free(ac.buf);

	pthread_mutex_lock(&ws->lock);
	*w->pprev = w->next;
	if (w->next)
		w->next->pprev = w->pprev;
	ws->nconns--;
	close(w->fd);
	free(w);
	pthread_cond_broadcast(&ws->gone);
	pthread_mutex_unlock(&ws->lock);
	return NULL;
}

static void refuse(int fd, const char *why)
{
	struct wire_hdr h;
	char msg[160];
	uint32_t n = (uint32_t)snprintf(msg, sizeof(msg), "{\"error\":\"%s\"}", why);

	wire_hdr_init(&h, WIRE_ERROR, 0, msg, n);
	if (write_full(fd, &h, sizeof(h)) == 0)
		write_full(fd, msg, n);
	close(fd);
}

static void *accept_main(void *arg)
{
	struct wire_server *ws = arg;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct wconn *w;
		pthread_attr_t at;
		pthread_t t;
		int fd, one = 1;

		fd = accept4(ws->fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
			    errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				if (errno != EINTR && errno != ECONNABORTED)
					usleep(100000);
				if (!__atomic_load_n(&ws->stop, __ATOMIC_RELAXED))
					continue;
			}
			break; /* the listening socket was shut down */
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_mutex_lock(&ws->lock);
		if (ws->stop || ws->nconns >= WIRE_MAX_CONNS) {
			pthread_mutex_unlock(&ws->lock);
			refuse(fd, ws->stop ? "collector shutting down" : "too many connections");
			continue;
		}
		w = calloc(1, sizeof(*w));
		if (!w) {
			pthread_mutex_unlock(&ws->lock);
			refuse(fd, "out of memory");
			continue;
		}
		w->ws = ws;
		w->fd = fd;
		coll_addr_str((struct sockaddr *)&ss, w->peer, sizeof(w->peer));
		w->next = ws->conns;
		if (w->next)
			w->next->pprev = &w->next;
		w->pprev = &ws->conns;
		ws->conns = w;
		ws->nconns++;
		M_ADD(ws->c, wire_connections, 1);
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 256 << 10);
		if (pthread_create(&t, &at, conn_main, w)) {
			*w->pprev = w->next;
			if (w->next)
				w->next->pprev = w->pprev;
			ws->nconns--;
			pthread_mutex_unlock(&ws->lock);
			free(w);
			refuse(fd, "cannot start a thread");
			pthread_attr_destroy(&at);
			continue;
		}
		pthread_attr_destroy(&at);
		pthread_mutex_unlock(&ws->lock);
	}
	return NULL;
}

struct wire_server *wire_server_new(struct collector *c, const char *addr,
				    char *err, size_t errlen)
{
	struct wire_server *ws = calloc(1, sizeof(*ws));
	struct sockaddr_storage actual;
	int ret;

	if (!ws)
		return fay_err_ptr(-ENOMEM);
	ws->c = c;
	pthread_mutex_init(&ws->lock, NULL);
	pthread_cond_init(&ws->gone, NULL);
	ws->fd = coll_listen(addr, 128, &actual, err, errlen);
	if (ws->fd < 0) {
		ret = ws->fd;
		goto err_out;
	}
	coll_addr_str((struct sockaddr *)&actual, ws->addr, sizeof(ws->addr));
	ret = -pthread_create(&ws->accept_thread, NULL, accept_main, ws);
	if (ret) {
		snprintf(err, errlen, "wire: cannot start a thread: %s", errstr(ret));
		close(ws->fd);
		goto err_out;
	}
	return ws;
err_out:
	pthread_mutex_destroy(&ws->lock);
	pthread_cond_destroy(&ws->gone);
	free(ws);
	return fay_err_ptr(ret);
}

void wire_server_free(struct wire_server *ws)
{
	if (!ws)
		return;
	pthread_mutex_lock(&ws->lock);
	__atomic_store_n(&ws->stop, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ws->lock);
	shutdown(ws->fd, SHUT_RDWR);
	pthread_join(ws->accept_thread, NULL);
	close(ws->fd);
	/* Wake every connection thread; each finishes its frame (a batch in
	 * the writer's hands is committed and acknowledged first). */
	pthread_mutex_lock(&ws->lock);
	for (struct wconn *w = ws->conns; w; w = w->next)
		shutdown(w->fd, SHUT_RD);
	while (ws->nconns)
		pthread_cond_wait(&ws->gone, &ws->lock);
	pthread_mutex_unlock(&ws->lock);
	pthread_mutex_destroy(&ws->lock);
	pthread_cond_destroy(&ws->gone);
	free(ws);
}
