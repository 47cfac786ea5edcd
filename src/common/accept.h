/* SPDX-License-Identifier: MIT */
/*
 * The one accept module of fay's servers: the agent wire listener
 * (collector/wire_accept.c), OTLP/gRPC (collector/otlp_grpc_conn.c) and
 * the HTTP server (common/httpd.c).  A listening socket's connections:
 *
 *   - accepted with net_accept()'s back-off (EMFILE and the like pause
 *     instead of spinning), the peer's address as text;
 *   - admitted: at most max_conns open, at most max_per_peer from one
 *     address, and conn_mem bytes of the memory budget taken for each (a
 *     connection that does not fit is refused, counted in *busy);
 *   - given TLS when the listener has it (tls_accept(): the connection
 *     becomes the plaintext end);
 *   - listed until they leave, so the listener can wake them all and wait
 *     for the last one when it stops.
 *
 * What a listener does with a refusal (an ERROR frame, a log line, a
 * close) and with an admitted connection (a thread) stays its own.
 *
 *	struct acceptor a = { .fd = lfd, .max_conns = 256, .budget = &mem,
 *			      .conn_mem = 64 << 10, .tls = tls };
 *	acceptor_init(&a);
 *	for (;;) {
 *		struct acc_conn *k = calloc(1, sizeof(*k));
 *		if (acceptor_accept(&a, k) == 0 && acceptor_admit(&a, k) == ACC_IN &&
 *		    acceptor_tls(&a, k) == 0)
 *			... serve k->fd; then close(k->fd), acceptor_leave(&a, k)
 *	}
 */
#ifndef FAY_COMMON_ACCEPT_H
#define FAY_COMMON_ACCEPT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct mem_budget;
struct tls_conf;

/* One connection (a listener's own connection struct embeds it). */
struct acc_conn {
	int fd;
	char ip[64];                    /* the peer's address without its port */
	char peer[64];                  /* with its port */
	struct sockaddr_storage ss;     /* the peer's address */
	socklen_t sl;
	size_t mem;                     /* taken from the budget at admission */
	struct acc_conn *next, **pprev; /* the acceptor's list, under its lock */
};

struct acceptor {
	/* set by the listener before acceptor_init() */
	int fd;                         /* the listening socket */
	unsigned max_conns;             /* open at once; 0: no limit */
	unsigned max_per_peer;          /* from one address; 0: no limit */
	struct mem_budget *budget;      /* NULL: none */
	size_t conn_mem;                /* taken from it per connection */
	uint64_t *busy;                 /* counts budget refusals (atomic); NULL: none */
	struct tls_conf *tls;           /* NULL: plaintext */
	const char *alpn;               /* TLS: the protocol offered ("h2"), or NULL */
	int tls_mutual;                 /* TLS: the client must show a certificate */
	/* kept here */
	pthread_mutex_t lock;
	pthread_cond_t idle;            /* signalled when n drops to 0 */
	struct acc_conn *conns;         /* under lock */
	unsigned n;                     /* under lock */
	int stop;                       /* under lock: admit nothing more */
};

/* Why a connection was not admitted. */
enum acc_verdict {
	ACC_IN,                 /* admitted: counted, listed, its memory taken */
	ACC_STOPPING,           /* acceptor_stop() was called */
	ACC_FULL,               /* max_conns open */
	ACC_PEER,               /* max_per_peer open from k->ip */
	ACC_BUSY,               /* its memory does not fit the budget (*busy counted) */
};

/* Set up a's lock and list (its options already set). */
void acceptor_init(struct acceptor *a);
/* Free them (no connection left: acceptor_wait_idle() first). */
void acceptor_destroy(struct acceptor *a);

/*
 * Accept one connection on a->fd into k (fd, ss/sl, ip, peer).  0, -EAGAIN
 * when the accept failed in passing (net_accept(): after its back-off when
 * out of descriptors), or another -errno: the listening socket was shut
 * down or closed.
 */
int acceptor_accept(struct acceptor *a, struct acc_conn *k);

/*
 * Admit k (acceptor_accept()'s) or say why not: stopping, max_conns,
 * max_per_peer, then the budget, in that order.  ACC_IN: k is listed and
 * k->mem taken until acceptor_leave().  k->fd is left to the caller
 * either way.
 */
enum acc_verdict acceptor_admit(struct acceptor *a, struct acc_conn *k);

/*
 * The budget alone, for a server that counts its connections itself
 * (libmicrohttpd): whether a->conn_mem fits now (1) or not (0, counted in
 * *busy and as the budget's refusal).
 */
int acceptor_fits(struct acceptor *a);

/*
 * TLS on an admitted k when a has it: k->fd becomes the plaintext end of
 * the session (tls_accept(), the handshake on the TLS thread).  0, or -1:
 * the socket is gone (k->fd -1), the caller calls acceptor_leave().
 * Without TLS: 0, nothing done.
 */
int acceptor_tls(struct acceptor *a, struct acc_conn *k);

/* k leaves: out of the list, its memory back to the budget (k->fd is the
 * caller's; k is not freed). */
void acceptor_leave(struct acceptor *a, struct acc_conn *k);

/* Admit nothing more (ACC_STOPPING) and shut down the reading side of
 * every connection listed (how the listener's threads learn to stop). */
void acceptor_stop(struct acceptor *a);

/* Wait until every connection has left. */
void acceptor_wait_idle(struct acceptor *a);

#endif
