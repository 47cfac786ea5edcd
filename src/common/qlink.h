/* SPDX-License-Identifier: MIT */
/*
 * The lower end of a query connection (wire_cluster.h), shared by the
 * agent (src/agent/qclient.c) and by a collector with --parent
 * (src/cluster/ctree.c): one thread keeps the connection to the upper
 * collector (connect, HELLO with role "query", WELCOME, a BEAT every
 * WIRE_BEAT_MS, reconnect with backoff from 100 ms to 5 s), and starts
 * one runner thread per QUERY; CANCEL, the loss of the connection and
 * qlink_stop() set that runner's stop flag, and the link joins it.
 *
 * A runner does its work (run the query, forward windows) and sends
 * its frames with qlink_send(), which may be called from any thread.
 */
#ifndef FAY_COMMON_QLINK_H
#define FAY_COMMON_QLINK_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/wire_cluster.h"

struct qlink;

/* What a runner gets: the query, and a flag to watch. */
struct qlink_job {
	struct qlink *link;
	uint32_t qid;
	uint64_t deadline_ns, window_ns;	/* as QUERY said */
	const char *text;			/* NUL terminated */
	size_t len;
	volatile sig_atomic_t stop;		/* set: stop, detach, return */
	void *ctx;				/* qlink_opts.ctx */
};

struct tls_conf;

struct qlink_opts {
	const char *upper;	/* host:port of the collector's agent port */
	const char *host;	/* our name in HELLO */
	const char *agent_id;	/* 32 hex digits */
	const char *token;	/* NULL: none */
	struct tls_conf *tls;	/* NULL: plaintext; else TLS, the server checked */
	bool collector;		/* we are a collector (HELLO "collector":true) */
	const char *what;	/* "query connection", for log lines */
	/* Run one query to its end or until job->stop. */
	void (*run)(struct qlink_job *job);
	/* Answer a CAPTURE (the flight recorder, #22), on the link's
	 * thread: fill *res and append its spans to spans (a BATCH
	 * payload, wire_cluster.h).  NULL: this peer does not answer
	 * CAPTUREs (its HELLO does not offer them). */
	void (*capture)(void *ctx, const struct wire_capture *c, struct wire_captured *res,
			struct wbuf *spans);
	/* ctx_size bytes at ctx are copied into the link; job->ctx points
	 * at the copy.  ctx_size 0: ctx is used as is. */
	const void *ctx;
	size_t ctx_size;
	unsigned max_jobs;	/* 0: 64 */
};

/* Start the link's thread.  NULL with errno (EINVAL: a bad address).
 * o and its strings are copied. */
struct qlink *qlink_start(const struct qlink_opts *o);
/* Stop every runner, close, join.  Accepts NULL. */
void qlink_stop(struct qlink *l);

/* The token of the next HELLO (SIGHUP read it again; NULL: none): the
 * connection open now keeps the one it said HELLO with. */
void qlink_set_token(struct qlink *l, const char *token);

/* Send one frame (w's bytes) up; from any thread.  0, -ENOTCONN when the
 * link is down (the frame is dropped: the upper collector resends the
 * query once the link is back), or -errno.  Frees nothing. */
int qlink_send(struct qlink *l, unsigned type, const struct wbuf *w);
/* QSTATUS for job (text may be NULL). */
int qlink_status(struct qlink_job *job, enum wire_qstate st, const char *text);

#endif
