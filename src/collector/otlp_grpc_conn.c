// SPDX-License-Identifier: MIT
/*
 * OTLP/gRPC's listener (--otlp-grpc, default 127.0.0.1:4317): the accept
 * thread and a thread per connection, which otlp_grpc_serve() in
 * otlp_grpc.c (the one file that includes nghttp2) serves.
 *
 * One thread per connection (like the HTTP server: ingest blocks until
 * the commit); at most GRPC_CONNS connections, GRPC_PER_IP of them from
 * one address on a listener beyond loopback, admitted by the one accept
 * module (common/accept.h: admission, budget, TLS, back-off).  A connection's memory
 * (coll_conn_mem()) and every message body as it grows (a gzip one's
 * decoded bytes too, otlp_ingest()) are taken from --max-memory: a
 * connection that does not fit is closed at accept, a body that does not
 * fit is answered UNAVAILABLE (the client retries).  Every thread polls with a
 * short timeout so that stopping takes at most that long.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "collector/collector_int.h"
#include "collector/otlp_int.h"
#include "common/err.h"
#include "common/log.h"
#include "common/net.h"

#define GRPC_CONNS      256
#define GRPC_PER_IP     64      /* from one address (not on loopback) */

static void *conn_main(void *arg)
{
	struct gconn *k = arg;
	struct otlp_grpc *g = k->g;

	if (coll_gate_wait(g->c))	/* unserved if the collector stops instead */
		otlp_grpc_serve(k);
	acceptor_leave(&g->acc, &k->a);
	close(k->a.fd);
	free(k);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct otlp_grpc *g = arg;

	while (!__atomic_load_n(&g->stop, __ATOMIC_RELAXED)) {
		struct pollfd p = { .fd = g->acc.fd, .events = POLLIN };
		struct timeval tv = { .tv_sec = 10 };
		struct gconn *k;
		enum acc_verdict v;
		pthread_t t;

		if (poll(&p, 1, GRPC_POLL_MS) <= 0)
			continue;
		k = calloc(1, sizeof(*k));
		if (!k) {
			/* the connection waits in the backlog */
			usleep(GRPC_POLL_MS * 1000);
			continue;
		}
		/* out of descriptors, it pauses (poll would say "readable"
		 * again at once: the connection waits in the backlog) */
		if (acceptor_accept(&g->acc, &k->a)) {
			free(k);
			continue;
		}
		k->g = g;
		otlp_addr_str((struct sockaddr *)&k->a.ss, k->peer, sizeof(k->peer));
		v = acceptor_admit(&g->acc, &k->a);
		if (v != ACC_IN) {
			if (v == ACC_FULL || v == ACC_PEER)
				pr_warn("otlp-grpc: %s: %s open; refusing one more", k->peer,
					v == ACC_FULL ? "256 connections (GRPC_CONNS)" :
					"64 connections from that address (GRPC_PER_IP)");
			close(k->a.fd);
			free(k);
			continue;
		}
		/* a peer that stops reading cannot hold a thread in send() forever */
		setsockopt(k->a.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		net_nodelay(k->a.fd);
		/* gRPC over TLS: HTTP/2 by ALPN; fd becomes the plaintext
		 * end (tls.h) */
		if (g->acc.tls && !acceptor_tls(&g->acc, &k->a))
			setsockopt(k->a.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (k->a.fd < 0 || pthread_create(&t, NULL, conn_main, k)) {
			acceptor_leave(&g->acc, &k->a);
			if (k->a.fd >= 0)
				close(k->a.fd);
			free(k);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

struct otlp_grpc *otlp_grpc_new(struct collector *c, const char *addr, char *err, size_t errlen)
{
	struct otlp_grpc *g = calloc(1, sizeof(*g));
	int ret;

	if (!g) {
		snprintf(err, errlen, "out of memory");
		return fay_err_ptr(-ENOMEM);
	}
	g->c = c;
	g->acc.fd = net_listen_named(addr, 128, g->addr, sizeof(g->addr), err, errlen);
	if (g->acc.fd < 0) {
		ret = g->acc.fd;
		free(g);
		return fay_err_ptr(ret);
	}
	g->acc.max_conns = GRPC_CONNS;
	/* from one address, beyond loopback */
	if (strncmp(g->addr, "127.", 4) && strncmp(g->addr, "[::1]", 5))
		g->acc.max_per_peer = GRPC_PER_IP;
	g->acc.budget = &c->mem;
	g->acc.conn_mem = coll_conn_mem(c);
	g->acc.busy = &c->m.conn_busy;
	g->acc.tls = c->tls;
	g->acc.alpn = "h2";
	g->acc.tls_mutual = !!(c->mtls_ports & COLL_PORT_OTLP_GRPC);
	acceptor_init(&g->acc);
	ret = pthread_create(&g->thread, NULL, accept_main, g);
	if (ret) {
		snprintf(err, errlen, "%s: cannot start a thread: %s", addr, errstr(-ret));
		close(g->acc.fd);
		acceptor_destroy(&g->acc);
		free(g);
		return fay_err_ptr(-ret);
	}
	return g;
}

const char *otlp_grpc_addr(const struct otlp_grpc *g)
{
	return g->addr;
}

void otlp_grpc_free(struct otlp_grpc *g)
{
	if (!g)
		return;
	__atomic_store_n(&g->stop, 1, __ATOMIC_RELAXED);
	pthread_join(g->thread, NULL);
	close(g->acc.fd);
	/* each connection's thread sees stop within GRPC_POLL_MS */
	acceptor_wait_idle(&g->acc);
	acceptor_destroy(&g->acc);
	free(g);
}
