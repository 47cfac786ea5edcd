/* SPDX-License-Identifier: MIT */
/*
 * Inside the agent port (wire_server.c: one connection's protocol;
 * wire_accept.c: the listener, admission and the connection list).
 */
#ifndef FAY_COLLECTOR_WIRE_INT_H
#define FAY_COLLECTOR_WIRE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/accept.h"
#include "common/wire.h"

struct collector;
struct wire_server;

struct wconn {
	struct acc_conn a;            /* fd, peer, ip, its memory (common/accept.h) */
	struct wire_server *ws;
};

struct wire_server {
	struct collector *c;
	char addr[64];
	pthread_t accept_thread;
	struct acceptor acc;          /* the listening socket, --max-conns,
					 --max-conns-per-peer, --max-memory, TLS */
	int hello_ms, frame_ms;       /* COLL_HELLO_MS, COLL_FRAME_MS (tests: less) */
	int stop;                     /* atomic */
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
	char kernel[65];              /* query role: what the host said it has */
	int btf;
	bool capture;                 /* query role: it answers CAPTURE */
	unsigned rejected_logged;
	uint64_t hi_seq;              /* highest seq committed or announced */
	char session[33];             /* HELLO's, "" none */
	struct wire_reader rd;
	struct wire_buf out;
	uint64_t t0_ms;               /* connected (the HELLO deadline) */
	uint64_t frame_t0_ms;         /* the frame begun began (0: none) */
	/* Test point (tests only): FAY_WIRE_TEST_NACK_EVERY=N NACKs every
	 * Nth batch of a connection as if the store had failed. */
	unsigned long test_nack_every, test_nbatches;
	/* wire_batch.c's read-ahead: a frame read and not yet handled
	 * (its payload stays valid: nothing is read before it is), or
	 * wire_read()'s error, for next_frame() to return */
	struct wire_frame held;
	bool has_held;
	int held_ret;
	char held_err[256];
};

/* Send what ac->out holds, waiting for the socket up to the frame
 * timeout.  Returns 0 or -errno. */
int wire_flush_out(struct agent_conn *ac);
/* A protocol violation: say what, as an ERROR frame, and make the caller
 * close the connection.  Returns -EPROTO. */
__attribute__((format(printf, 2, 3)))
int wire_violation(struct agent_conn *ac, const char *fmt, ...);
/* Batch seq was not stored: say so (NACK), then close the connection
 * (returns 1) so that no batch the agent sent after it is committed
 * before it is. */
int wire_nack(struct agent_conn *ac, uint64_t seq, const char *why);
/* A BATCH frame (wire_batch.c): stored with the BATCHes already waiting
 * on the socket behind it, then ACKed one by one.  0 to go on, 1 to
 * close, -errno. */
int wire_on_batch(struct agent_conn *ac, const struct wire_frame *f);

/* A connection's thread: HELLO, then frames until it closes; then it
 * leaves ws->acc (acceptor_leave()) and frees w.  arg: the struct wconn. */
void *wire_conn_main(void *arg);

#endif
