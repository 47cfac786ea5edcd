// SPDX-License-Identifier: MIT
/*
 * The agent port's listener (wire_server.c serves each connection): one
 * thread accepts through the one accept module (common/accept.h: its
 * admission, budget, TLS and back-off), turns away what is over
 * --max-conns or over --max-conns-per-peer from one address with an
 * ERROR frame naming the limit, and what does not fit in --max-memory
 * (coll_conn_mem(), taken at admission and given back when the connection
 * closes) with "busy", and starts a thread per connection (256 KiB
 * stacks).
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

static void *accept_main(void *arg)
{
	struct wire_server *ws = arg;

	for (;;) {
		struct acc_conn k;
		struct wconn *w;
		pthread_attr_t at;
		pthread_t t;
		char why[160];
		int ret, one = 1;

		ret = acceptor_accept(&ws->acc, &k);
		if (ret < 0) {
			if (ret == -EAGAIN && !__atomic_load_n(&ws->stop, __ATOMIC_RELAXED))
				continue;
			break; /* the listening socket was shut down */
		}
		setsockopt(k.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* An agent whose cable is pulled says nothing: without this
		 * its connection would wait for its next frame forever (and
		 * the agent show up). */
		net_keepalive(k.fd, NET_KEEPALIVE_IDLE_S, NET_KEEPALIVE_INTVL_S, NET_KEEPALIVE_CNT);
		w = calloc(1, sizeof(*w));
		if (!w) {
			refuse(k.fd, "out of memory");
			continue;
		}
		w->ws = ws;
		w->a = k;
		switch (acceptor_admit(&ws->acc, &w->a)) {
		case ACC_IN:
			break;
		case ACC_PEER:
			M_ADD(ws->c, wire_peer_refused, 1);
			snprintf(why, sizeof(why), "too many connections from %s: %u, the collector's --max-conns-per-peer",
				 k.ip, ws->acc.max_per_peer);
			refuse(k.fd, why);
			free(w);
			continue;
		case ACC_FULL:
			snprintf(why, sizeof(why), "too many connections: %u, the collector's --max-conns",
				 ws->acc.max_conns);
			refuse(k.fd, why);
			free(w);
			continue;
		case ACC_STOPPING:
			refuse(k.fd, "collector shutting down");
			free(w);
			continue;
		case ACC_BUSY:  /* counted in conn_busy */
			refuse(k.fd, "busy: the collector holds its --max-memory in connections, "
			       "frames and bodies; retry later");
			free(w);
			continue;
		}
		/* the handshake runs on the TLS thread: fd becomes the
		 * plaintext end of it (tls.h) */
		if (acceptor_tls(&ws->acc, &w->a)) {
			acceptor_leave(&ws->acc, &w->a);
			free(w);
			continue;
		}
		M_ADD(ws->c, wire_connections, 1);
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 256 << 10);
		if (pthread_create(&t, &at, wire_conn_main, w)) {
			acceptor_leave(&ws->acc, &w->a);
			refuse(w->a.fd, "cannot start a thread");
			free(w);
		}
		pthread_attr_destroy(&at);
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
	ws->acc.max_conns = max_conns;
	ws->acc.max_per_peer = max_per_peer;
	ws->acc.budget = &c->mem;
	ws->acc.conn_mem = coll_conn_mem(c);
	ws->acc.busy = &c->m.conn_busy;
	ws->acc.tls = c->tls;
	ws->acc.tls_mutual = !!(c->mtls_ports & COLL_PORT_AGENT);
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
	acceptor_init(&ws->acc);
	ws->acc.fd = net_listen(addr, 128, &actual, err, errlen);
	if (ws->acc.fd < 0) {
		ret = ws->acc.fd;
		goto err_out;
	}
	net_addr_str((struct sockaddr *)&actual, ws->addr, sizeof(ws->addr));
	ret = -pthread_create(&ws->accept_thread, NULL, accept_main, ws);
	if (ret) {
		snprintf(err, errlen, "wire: cannot start a thread: %s", errstr(ret));
		close(ws->acc.fd);
		goto err_out;
	}
	return ws;
err_out:
	acceptor_destroy(&ws->acc);
	free(ws);
	return fay_err_ptr(ret);
}

void wire_server_free(struct wire_server *ws)
{
	if (!ws)
		return;
	__atomic_store_n(&ws->stop, 1, __ATOMIC_RELAXED);
	/* Admit nothing more ("collector shutting down") and wake every
	 * connection thread; each finishes its frame (a batch in the
	 * writer's hands is committed and acknowledged first). */
	acceptor_stop(&ws->acc);
	shutdown(ws->acc.fd, SHUT_RDWR);
	pthread_join(ws->accept_thread, NULL);
	close(ws->acc.fd);
	acceptor_wait_idle(&ws->acc);
	acceptor_destroy(&ws->acc);
	free(ws);
}
