// SPDX-License-Identifier: MIT
/*
 * The agent port's listener (wire_server.c serves each connection): one
 * thread accepts, turns away what is over --max-conns or over
 * --max-conns-per-peer from one address with an ERROR frame naming the
 * limit, and what does not fit in --max-memory (coll_conn_mem(), taken
 * here and given back when the connection closes) with "busy", and starts
 * a thread per connection (256 KiB stacks).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collector/collector_int.h"
#include "collector/wire_int.h"
#include "common/err.h"
#include "common/log.h"
#include "common/net.h"
#include "common/tls.h"
#include "common/wire.h"

const char *wire_server_addr(const struct wire_server *ws)
{
	return ws->addr;
}

/* Turn a connection away with an ERROR frame (best effort: a new
 * socket's buffer takes it at once). */
static void refuse(int fd, const char *why)
{
	struct wire_buf b = { 0 };
	struct wire_error e;

	snprintf(e.error, sizeof(e.error), "%s", why);
	if (!wire_put_error(&b, &e))
		wire_buf_flush(&b, fd);
	wire_buf_free(&b);
	close(fd);
}

/* Connections open from ip (ws->lock held). */
static unsigned peer_count(const struct wire_server *ws, const char *ip)
{
	unsigned n = 0;

	for (const struct wconn *w = ws->conns; w; w = w->next)
		n += !strcmp(w->ip, ip);
	return n;
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
		char ip[64];
		int fd, one = 1;

		fd = net_accept(ws->fd, &ss, &sl);
		if (fd < 0) {
			if (fd == -EAGAIN && !__atomic_load_n(&ws->stop, __ATOMIC_RELAXED))
				continue;
			break; /* the listening socket was shut down */
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* An agent whose cable is pulled says nothing: without this
		 * its connection would wait for its next frame forever (and
		 * the agent show up). */
		net_keepalive(fd, NET_KEEPALIVE_IDLE_S, NET_KEEPALIVE_INTVL_S, NET_KEEPALIVE_CNT);
		net_addr_ip((struct sockaddr *)&ss, ip, sizeof(ip));
		pthread_mutex_lock(&ws->lock);
		if (!ws->stop && ws->nconns < ws->max_conns && ws->max_per_peer &&
		    peer_count(ws, ip) >= ws->max_per_peer) {
			char why[160];

			pthread_mutex_unlock(&ws->lock);
			M_ADD(ws->c, wire_peer_refused, 1);
			snprintf(why, sizeof(why), "too many connections from %s: %u, the collector's --max-conns-per-peer",
				 ip, ws->max_per_peer);
			refuse(fd, why);
			continue;
		}
		if (ws->stop || ws->nconns >= ws->max_conns) {
			char why[96];

			pthread_mutex_unlock(&ws->lock);
			snprintf(why, sizeof(why), "too many connections: %u, the collector's --max-conns",
				 ws->max_conns);
			refuse(fd, ws->stop ? "collector shutting down" : why);
			continue;
		}
		if (mem_budget_take(&ws->c->mem, coll_conn_mem(ws->c))) {
			pthread_mutex_unlock(&ws->lock);
			M_ADD(ws->c, conn_busy, 1);
			refuse(fd, "busy: the collector holds its --max-memory in connections, "
			       "frames and bodies; retry later");
			continue;
		}
		if (ws->c->tls) {
			/* the handshake runs on the TLS thread: fd becomes the
			 * plaintext end of it (tls.h) */
			fd = tls_accept(ws->c->tls, fd, ip, NULL,
					!!(ws->c->mtls_ports & COLL_PORT_AGENT));
			if (fd < 0) {
				pthread_mutex_unlock(&ws->lock);
				mem_budget_give(&ws->c->mem, coll_conn_mem(ws->c));
				continue;
			}
		}
		w = calloc(1, sizeof(*w));
		if (!w) {
			pthread_mutex_unlock(&ws->lock);
			mem_budget_give(&ws->c->mem, coll_conn_mem(ws->c));
			refuse(fd, "out of memory");
			continue;
		}
		w->ws = ws;
		w->fd = fd;
		w->mem = coll_conn_mem(ws->c);
		net_addr_str((struct sockaddr *)&ss, w->peer, sizeof(w->peer));
		snprintf(w->ip, sizeof(w->ip), "%s", ip);
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
		if (pthread_create(&t, &at, wire_conn_main, w)) {
			*w->pprev = w->next;
			if (w->next)
				w->next->pprev = w->pprev;
			ws->nconns--;
			pthread_mutex_unlock(&ws->lock);
			mem_budget_give(&ws->c->mem, w->mem);
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

struct wire_server *wire_server_new(struct collector *c, const char *addr, unsigned max_conns,
				    unsigned max_per_peer, char *err, size_t errlen)
{
	struct wire_server *ws = calloc(1, sizeof(*ws));
	struct sockaddr_storage actual;
	int ret;

	if (!ws)
		return fay_err_ptr(-ENOMEM);
	ws->c = c;
	ws->max_conns = max_conns;
	ws->max_per_peer = max_per_peer;
	ws->hello_ms = COLL_HELLO_MS;
	ws->frame_ms = COLL_FRAME_MS;
	{
		/* test point: FAY_WIRE_TEST_TIMEOUTS=HELLO_MS,FRAME_MS */
		const char *t = getenv("FAY_WIRE_TEST_TIMEOUTS");

		if (t && sscanf(t, "%d,%d", &ws->hello_ms, &ws->frame_ms) != 2) {
			ws->hello_ms = COLL_HELLO_MS;
			ws->frame_ms = COLL_FRAME_MS;
		}
	}
	pthread_mutex_init(&ws->lock, NULL);
	pthread_cond_init(&ws->gone, NULL);
	ws->fd = net_listen(addr, 128, &actual, err, errlen);
	if (ws->fd < 0) {
		ret = ws->fd;
		goto err_out;
	}
	net_addr_str((struct sockaddr *)&actual, ws->addr, sizeof(ws->addr));
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
