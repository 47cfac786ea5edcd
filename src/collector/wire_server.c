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
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "collector/auth.h"
#include "collector/collector_int.h"
#include "collector/wire_int.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/net.h"
#include "common/version.h"
#include "common/wire.h"

#define WIRE_FRAME_TIMEOUT_MS 30000  /* to send a frame (flush_out) */


/* ---- frames ------------------------------------------------------------- */

/* wire_int.h */
int wire_flush_out(struct agent_conn *ac)
{
	for (;;) {
		struct pollfd pfd = { .fd = ac->w->a.fd, .events = POLLOUT };
		int ret = wire_buf_flush(&ac->out, ac->w->a.fd);

		if (ret != -EAGAIN)
			return ret;
		ret = poll(&pfd, 1, WIRE_FRAME_TIMEOUT_MS);
		if (ret < 0 && errno != EINTR)
			return -errno;
		if (ret == 0)
			return -ETIMEDOUT;
	}
}

/* wire_int.h */
int wire_violation(struct agent_conn *ac, const char *fmt, ...)
{
	struct wire_error e;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e.error, sizeof(e.error), fmt, ap);
	va_end(ap);
	M_ADD(ac->c, wire_errors, 1);
	pr_warn("wire: %s%s%s: %s; closing the connection", ac->w->a.peer,
		ac->agent_id[0] ? " agent " : "", ac->agent_id, e.error);
	if (!wire_put_error(&ac->out, &e))
		wire_flush_out(ac);
	return -EPROTO;
}

/* ---- HELLO -------------------------------------------------------------- */

/* The address part of a peer ("1.2.3.4:5", "[::1]:5"): its length. */
static size_t peer_ip_len(const char *peer)
{
	const char *colon = strrchr(peer, ':');

	return colon ? (size_t)(colon - peer) : strlen(peer);
}

/*
 * Take the agent id for this connection.  Two live connections of one id
 * are two agents sharing it (a cloned state directory, or a client
 * speaking for another agent): their seqs would interleave and the batches
 * of the one behind be acknowledged as duplicates and never stored.  So a
 * second connection is refused (nothing is lost: the refused agent keeps
 * its spool and retries, and both sides log why), unless it is the same
 * agent process reconnecting before the collector saw its old connection
 * die (same HELLO session; for agents that send none, same address): the
 * old one is then shut down.  Returns 0 (the id is this connection's,
 * connected counted), or -EEXIST with err.
 */
static int claim_id(struct agent_conn *ac, char *err, size_t errlen)
{
	struct coll_agent *ag = ac->agent;
	struct collector *c = ac->c;
	size_t n = peer_ip_len(ac->w->a.peer);
	int ret = 0;

	pthread_mutex_lock(&c->agents_lock);
	if (ag->host[0] && strcmp(ag->host, ac->host))
		pr_warn("wire: agent id %s was host \"%s\", now \"%s\" from %s: two agents "
			"with one id? (a cloned state directory)", ac->agent_id, ag->host,
			ac->host, ac->w->a.peer);
	if (ag->connected > 0) {
		int same = ac->session[0] || ag->session[0] ?
			!strcmp(ac->session, ag->session) :
			peer_ip_len(ag->peer) == n && !strncmp(ag->peer, ac->w->a.peer, n);

		if (same) {
			pr_warn("wire: agent %s reconnected from %s while its connection from %s "
				"is open: closing the old one", ac->agent_id, ac->w->a.peer, ag->peer);
			shutdown(ag->conn_fd, SHUT_RDWR);
		} else {
			snprintf(err, errlen, "HELLO: agent id %s is already connected from %s "
				 "(host \"%s\") by another agent process: two agents with "
				 "one id (a cloned state directory? remove agent_id from one "
				 "of them)", ac->agent_id, ag->peer, ag->host);
			ret = -EEXIST;
		}
	}
	if (!ret) {
		ag->connected++;
		ag->conn_fd = ac->w->a.fd;
		memcpy(ag->session, ac->session, sizeof(ag->session));
	}
	pthread_mutex_unlock(&c->agents_lock);
	return ret;
}

static int on_hello(struct agent_conn *ac, const struct wire_frame *f)
{
	struct collector *c = ac->c;
	struct wire_hello m;
	struct wire_welcome wm = { 0 };
	const struct auth_token *tok;
	char err[512];
	uint64_t last_seq;
	int ret;

	if (ac->agent)
		return wire_violation(ac, "HELLO: a second HELLO on one connection");
	if (wire_get_hello(f, &m, err, sizeof(err)))
		return wire_violation(ac, "%s", err);
	if (auth_on(c->auth)) {
		/* an agent, a query connection or a child collector: each
		 * sends spans or results in, so each needs the write scope */
		if (!m.token[0])
			return wire_violation(ac, "HELLO: missing token; this collector needs one with "
					 "the 'write' scope (fay agent --token-file FILE)");
		tok = auth_find(c->auth, m.token, strlen(m.token));
		if (!tok)
			return wire_violation(ac, "HELLO: wrong token: unknown to this collector (fay "
					 "agent --token-file FILE: one of the collector's "
					 "--token-file)");
		if (!(tok->scopes & COLL_SCOPE_WRITE))
			return wire_violation(ac, "HELLO: token%s%s lacks the 'write' scope agents need",
					 tok->name[0] ? " " : "", tok->name);
		/* a child collector's id is random per process: nothing to bind */
		if (m.agent_id[0] && !m.collector && (ret = auth_bind_agent(c->auth, m.agent_id, tok, err,
							    sizeof(err)))) {
			M_ADD(c, agent_id_clashes, 1);
			return wire_violation(ac, "HELLO: %s", err);
		}
	}
	memcpy(ac->agent_id, m.agent_id, sizeof(ac->agent_id));
	snprintf(ac->host, sizeof(ac->host), "%s", m.host);
	/* It goes into logs and the UI: no control characters (a newline
	 * would forge a log line). */
	for (char *p = ac->host; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	memcpy(ac->session, m.session, sizeof(ac->session));
	if (!strcmp(m.role, "query")) {
		/* a query connection (cluster queries): cluster.c serves it */
		ac->query_role = true;
		ac->child_collector = m.collector;
		snprintf(ac->kernel, sizeof(ac->kernel), "%s", m.kernel);
		ac->btf = m.btf;
		ac->capture = m.capture;
		if (!ac->host[0])
			return wire_violation(ac, "HELLO: a query connection needs a host name");
		if (wire_reader_partial(&ac->rd))
			return wire_violation(ac, "HELLO: a query connection sent frames before WELCOME");
		snprintf(wm.version, sizeof(wm.version), "%s", FAY_VERSION);
		ret = wire_put_welcome(&ac->out, &wm);
		ret = ret ? ret : wire_flush_out(ac);
		return ret ? ret : 2;
	}
	if (m.role[0])
		return wire_violation(ac, "HELLO: unknown role \"%s\" (this collector knows \"query\")",
				 m.role);
	ret = ingest_hello(c->ingest, ac->agent_id, ac->host[0] ? ac->host : NULL,
			   m.version[0] ? m.version : NULL, &last_seq);
	if (ret) {
		ac->agent_id[0] = '\0';
		return wire_violation(ac, "HELLO: the store failed: %s", errstr(ret));
	}
	ac->agent = coll_agent_get(c, ac->agent_id);
	if (ac->agent && claim_id(ac, err, sizeof(err))) {
		ac->agent = NULL;
		M_ADD(c, agent_id_clashes, 1);
		return wire_violation(ac, "%s", err);
	}
	ac->hi_seq = last_seq;
	if (ac->agent) {
		pthread_mutex_lock(&c->agents_lock);
		snprintf(ac->agent->host, sizeof(ac->agent->host), "%s", ac->host);
		snprintf(ac->agent->version, sizeof(ac->agent->version), "%s", m.version);
		snprintf(ac->agent->peer, sizeof(ac->agent->peer), "%s", ac->w->a.peer);
		ac->agent->last_seq = last_seq;
		ac->agent->last_seen_us = clock_realtime_ns() / 1000;
		pthread_mutex_unlock(&c->agents_lock);
	}
	M_ADD(c, agents_connected, 1);
	pr_info("wire: agent %s (%s) connected from %s, last committed batch %" PRIu64,
		ac->agent_id, ac->host[0] ? ac->host : "?", ac->w->a.peer, last_seq);
	snprintf(wm.version, sizeof(wm.version), "%s", FAY_VERSION);
	wm.last_seq = last_seq;
	ret = wire_put_welcome(&ac->out, &wm);
	return ret ? ret : wire_flush_out(ac);
}

/* ---- BATCH -------------------------------------------------------------- */

/* wire_int.h */
int wire_nack(struct agent_conn *ac, uint64_t seq, const char *why)
{
	struct wire_nack m = { .seq = seq };

	M_ADD(ac->c, batches_nacked, 1);
	pr_warn("wire: agent %s (%s): BATCH seq %" PRIu64 " not stored: %s; NACK, closing the "
		"connection (later batches on it are not committed)", ac->agent_id, ac->host,
		seq, why);
	snprintf(m.error, sizeof(m.error), "%s", why);
	if (!wire_put_nack(&ac->out, &m))
		wire_flush_out(ac);
	return 1;
}

/* ---- STATS -------------------------------------------------------------- */

static int on_stats(struct agent_conn *ac, const struct wire_frame *f)
{
	struct collector *c = ac->c;
	struct wire_stats m;
	char err[256];

	if (!ac->agent_id[0])
		return wire_violation(ac, "STATS before HELLO");
	if (wire_get_stats(f, &m, err, sizeof(err)))
		return wire_violation(ac, "%s", err);
	if (ingest_stats(c->ingest, ac->agent_id, m.json))
		pr_warn("wire: agent %s: STATS not stored", ac->agent_id);
	if (ac->agent) {
		pthread_mutex_lock(&c->agents_lock);
		free(ac->agent->stats);
		ac->agent->stats = m.json;
		m.json = NULL;
		ac->agent->last_seen_us = clock_realtime_ns() / 1000;
		pthread_mutex_unlock(&c->agents_lock);
	}
	wire_stats_release(&m);
	return 0;
}

/* ---- connection loop ---------------------------------------------------- */

/*
 * How long to wait for the next bytes: a frame once begun must be finished
 * COLL_FRAME_MS after its first byte came, however slowly it trickles;
 * before HELLO a connection has COLL_HELLO_MS in all; between frames an
 * agent that said HELLO may be quiet as long as it likes (-1).  0: the
 * deadline has passed.
 */
static int wait_ms(struct agent_conn *ac)
{
	uint64_t now = clock_monotonic_ns() / 1000000, end = UINT64_MAX;
	bool said_hello = ac->agent || ac->query_role;

	if (wire_reader_partial(&ac->rd)) {
		if (!ac->frame_t0_ms)
			ac->frame_t0_ms = now;
		end = ac->frame_t0_ms + (uint64_t)ac->w->ws->frame_ms;
	} else {
		ac->frame_t0_ms = 0;
	}
	if (!said_hello && ac->t0_ms + (uint64_t)ac->w->ws->hello_ms < end)
		end = ac->t0_ms + (uint64_t)ac->w->ws->hello_ms;
	if (end == UINT64_MAX)
		return -1;
	return now >= end ? 0 : (int)(end - now);
}

/* The next frame: 0 (in f), 1 (the agent closed between frames), or
 * -errno (-EPROTO: a violation, reported). */
static int next_frame(struct agent_conn *ac, struct wire_frame *f)
{
	char err[256];

	if (ac->has_held) {     /* read ahead by wire_on_batch() */
		*f = ac->held;
		ac->has_held = false;
		return 0;
	}
	for (;;) {
		struct pollfd pfd = { .fd = ac->w->a.fd, .events = POLLIN };
		int ret;

		if (ac->held_ret) {
			ret = ac->held_ret;
			ac->held_ret = 0;
			snprintf(err, sizeof(err), "%s", ac->held_err);
		} else {
			ret = wire_read(&ac->rd, ac->w->a.fd, f, err, sizeof(err));
		}

		if (ret == 1)
			return 0;
		if (ret == -ENOTCONN)
			return 1;
		if (ret == -ENOBUFS) {
			M_ADD(ac->c, wire_busy, 1);
			return wire_violation(ac, "busy: %s", err);
		}
		if (ret == -EPROTO && !ac->agent && !ac->query_role)
			return wire_violation(ac, "before HELLO (and its token) a frame is at most "
					 "%u bytes: %s", COLL_PRE_HELLO_MAX, err);
		if (ret == -EPROTO || ret == -EBADMSG || ret == -ENOMEM)
			return wire_violation(ac, "%s", err);
		if (ret < 0)
			return ret;
		ret = poll(&pfd, 1, wait_ms(ac));
		if (ret < 0 && errno != EINTR)
			return -errno;
		if (ret == 0 && wait_ms(ac) == 0) {
			M_ADD(ac->c, wire_timeouts, 1);
			if (wire_reader_partial(&ac->rd))
				return wire_violation(ac, "a frame begun is not complete after %d s (%zu bytes came)",
						 ac->w->ws->frame_ms / 1000, wire_reader_partial(&ac->rd));
			return wire_violation(ac, "no HELLO within %d s of connecting",
					 ac->w->ws->hello_ms / 1000);
		}
	}
}

static int one_frame(struct agent_conn *ac)
{
	struct wire_frame f;
	struct wire_error e;
	char err[256];
	int ret;

	ret = next_frame(ac, &f);
	if (ret)
		return ret;
	switch (f.h.type) {
	case WIRE_HELLO:
		ret = on_hello(ac, &f);
		if (ret >= 0)		/* accepted: its token was checked */
			ac->rd.max_payload = FAY_WIRE_MAX_PAYLOAD;
		return ret;
	case WIRE_BATCH:
		return wire_on_batch(ac, &f);
	case WIRE_STATS:
		return on_stats(ac, &f);
	case WIRE_ERROR:
		if (wire_get_error(&f, &e, err, sizeof(err)))
			snprintf(e.error, sizeof(e.error), "(unreadable: %s)", err);
		pr_warn("wire: %s agent %s sent ERROR: %s", ac->w->a.peer, ac->agent_id, e.error);
		return 1;
	default:
		return wire_violation(ac, "unexpected %s frame from an agent", wire_type_name(f.h.type));
	}
}

void *wire_conn_main(void *arg)
{
	struct wconn *w = arg;
	struct wire_server *ws = w->ws;
	struct agent_conn ac = { .w = w, .c = ws->c };
	const char *tp = getenv("FAY_WIRE_TEST_NACK_EVERY");
	int ret;

	/* until a HELLO is accepted: frames of what a HELLO needs alone */
	wire_reader_init(&ac.rd, COLL_PRE_HELLO_MAX);
	ac.rd.budget = &ws->c->mem;
	ac.t0_ms = clock_monotonic_ns() / 1000000;
	if (tp)
		ac.test_nack_every = strtoul(tp, NULL, 10);

	/* not before the collector is whole; unserved if it stops instead */
	ret = coll_gate_wait(ws->c) ? 0 : -ECONNRESET;
	while (!ret)
		ret = one_frame(&ac);
	if (ret == 2 && ac.query_role) {
		struct cluster_peer_info pi = {
			.host = ac.host, .collector = ac.child_collector,
			.kernel = ac.kernel, .btf = ac.btf, .capture = ac.capture,
		};

		cluster_serve(ws->c->cluster, w->a.fd, w->a.peer, &pi);
		ret = 1;
	}
	if (ret < 0 && ret != -EPROTO && ret != -ECONNRESET)
		pr_info("wire: %s agent %s: connection: %s", w->a.peer, ac.agent_id, errstr(ret));
	if (ac.agent) {
		pthread_mutex_lock(&ws->c->agents_lock);
		ac.agent->connected--;
		pthread_mutex_unlock(&ws->c->agents_lock);
		M_SUB(ws->c, agents_connected, 1);
		pr_info("wire: agent %s (%s) disconnected", ac.agent_id, ac.host);
	}
	wire_reader_free(&ac.rd);
	wire_buf_free(&ac.out);

	acceptor_leave(&ws->acc, &w->a);    /* ws may be gone after this */
	close(w->a.fd);                     /* once out of the list that
					     * acceptor_stop() shuts down */
	free(w);
	return NULL;
}
