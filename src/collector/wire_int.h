/* SPDX-License-Identifier: MIT */
/*
 * Inside the agent port (wire_server.c: one connection's protocol;
 * wire_accept.c: the listener, admission and the connection list).
 */
#ifndef FAY_COLLECTOR_WIRE_INT_H
#define FAY_COLLECTOR_WIRE_INT_H

#include <pthread.h>

struct collector;
struct wire_server;

struct wconn {
	struct wire_server *ws;
	int fd;
	char peer[64];
	char ip[64];                  /* peer without its port */
	size_t mem;                   /* taken from --max-memory at accept */
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
	unsigned nconns, max_conns, max_per_peer;
	int hello_ms, frame_ms;       /* COLL_HELLO_MS, COLL_FRAME_MS (tests: less) */
	int stop;
};

/* A connection's thread: HELLO, then frames until it closes; then it
 * leaves ws->conns and frees w.  arg: the struct wconn. */
void *wire_conn_main(void *arg);

#endif
