// SPDX-License-Identifier: MIT
/*
 * OTLP/gRPC's listener (--otlp-grpc, default 127.0.0.1:4317): the accept
 * thread and a thread per connection, which otlp_grpc_serve() in
 * otlp_grpc.c (the one file that includes nghttp2) serves.
 *
 * One thread per connection (like the HTTP server: ingest blocks until
 * the commit); at most GRPC_CONNS connections, GRPC_PER_IP of them from
 * one address on a listener beyond loopback.  A connection's memory
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
#include "common/tls.h"

#define GRPC_CONNS      256
#define GRPC_PER_IP     64      /* from one address (not on loopback) */

/* k leaves: its memory back to the budget, out of the list, freed. */
static void leave(struct otlp_grpc *g, struct gconn *k)
{
	mem_budget_give(&g->c->mem, k->mem);
	pthread_mutex_lock(&g->lock);
	*k->pprev = k->next;
	if (k->next)
		k->next->pprev = k->pprev;
	free(k);
	if (!--g->nconns)
		pthread_cond_broadcast(&g->idle);
	pthread_mutex_unlock(&g->lock);
}

static void *conn_main(void *arg)
{
	struct gconn *k = arg;

	if (coll_gate_wait(k->g->c))	/* unserved if the collector stops instead */
		otlp_grpc_serve(k);
	close(k->fd);
	leave(k->g, k);
	return NULL;
}

/* Let k in (0: counted, listed, its memory taken) or say why not (-1). */
static int admit(struct otlp_grpc *g, struct gconn *k)
{
	unsigned same = 0;

	pthread_mutex_lock(&g->lock);
	for (const struct gconn *o = g->conns; o && !g->loopback; o = o->next)
		same += !strcmp(o->ip, k->ip);
	if (g->nconns >= GRPC_CONNS || same >= GRPC_PER_IP) {
		pthread_mutex_unlock(&g->lock);
		pr_warn("otlp-grpc: %s: %d connections open (%u from that address); refusing one "
			"more", k->peer, GRPC_CONNS, same);
		return -1;
	}
	k->mem = coll_conn_mem(g->c);
	if (mem_budget_take(&g->c->mem, k->mem)) {
		pthread_mutex_unlock(&g->lock);
		M_ADD(g->c, conn_busy, 1);
		return -1;
	}
	g->nconns++;
	k->next = g->conns;
	if (k->next)
		k->next->pprev = &k->next;
	k->pprev = &g->conns;
	g->conns = k;
	pthread_mutex_unlock(&g->lock);
	return 0;
}

static void *accept_main(void *arg)
{
	struct otlp_grpc *g = arg;

	while (!__atomic_load_n(&g->stop, __ATOMIC_RELAXED)) {
		struct pollfd p = { .fd = g->fd, .events = POLLIN };
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct timeval tv = { .tv_sec = 10 };
		struct gconn *k;
		pthread_t t;
		int fd;

		if (poll(&p, 1, GRPC_POLL_MS) <= 0)
			continue;
		/* out of descriptors, it pauses (poll would say "readable"
		 * again at once: the connection waits in the backlog) */
		fd = net_accept(g->fd, &ss, &sl);
		if (fd < 0)
			continue;
		k = calloc(1, sizeof(*k));
		if (!k) {
			close(fd);
			continue;
		}
		k->g = g;
		net_addr_ip((struct sockaddr *)&ss, k->ip, sizeof(k->ip));
		otlp_addr_str((struct sockaddr *)&ss, k->peer, sizeof(k->peer));
		if (admit(g, k)) {
			close(fd);
			free(k);
			continue;
		}
		/* a peer that stops reading cannot hold a thread in send() forever */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		net_nodelay(fd);
		if (g->c->tls) {
			/* gRPC over TLS: HTTP/2 by ALPN; fd becomes the
			 * plaintext end (tls.h) */
			fd = tls_accept(g->c->tls, fd, k->ip, "h2",
					!!(g->c->mtls_ports & COLL_PORT_OTLP_GRPC));
			if (fd >= 0)
				setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		}
		k->fd = fd;
		if (fd < 0 || pthread_create(&t, NULL, conn_main, k)) {
			if (fd >= 0)
				close(fd);
			leave(g, k);
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
	g->fd = net_listen_named(addr, 128, g->addr, sizeof(g->addr), err, errlen);
	if (g->fd < 0) {
		ret = g->fd;
		free(g);
		return fay_err_ptr(ret);
	}
	g->loopback = !strncmp(g->addr, "127.", 4) || !strncmp(g->addr, "[::1]", 5);
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->idle, NULL);
	ret = pthread_create(&g->thread, NULL, accept_main, g);
	if (ret) {
		snprintf(err, errlen, "%s: cannot start a thread: %s", addr, errstr(-ret));
		close(g->fd);
		pthread_mutex_destroy(&g->lock);
		pthread_cond_destroy(&g->idle);
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
	close(g->fd);
	pthread_mutex_lock(&g->lock);
	while (g->nconns)
		pthread_cond_wait(&g->idle, &g->lock);
	pthread_mutex_unlock(&g->lock);
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->idle);
	free(g);
}
