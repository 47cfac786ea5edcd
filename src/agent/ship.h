/* SPDX-License-Identifier: MIT */
/*
 * The agent's connection to the collector (ship.c).  Driven by the agent's
 * epoll loop: ship_tick() on every tick, ship_event() when the socket is
 * ready, ship_pump() when a new batch reached the spool.
 */
#ifndef FAY_AGENT_SHIP_H
#define FAY_AGENT_SHIP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/spool.h"
#include "common/wire.h"

/* Batches in flight (sent, not yet ACKed): as many as the collector
 * stores in one write (its read-ahead, WIRE_AHEAD_BATCHES in
 * src/collector/wire_batch.c).  With 8, a backlog after an outage was
 * resent 8 batches a store write, and a ClickHouse write costs a fixed
 * ~0.5 s on a loaded machine: 199 spooled batches took over 30 s once
 * ClickHouse was back (#20). */
#define SHIP_WINDOW 32u

enum ship_state {
	SHIP_DOWN = 0,   /* no socket; next attempt at next_try_ns */
	SHIP_CONNECTING, /* non-blocking connect under way */
	SHIP_HELLO,      /* HELLO queued/sent, waiting for WELCOME */
	SHIP_READY,      /* sending batches */
};

struct tls_conf;

struct ship {
	char addr[300], host[256], port[8];
	struct wire_hello hello;
	struct spool *sp;
	uint64_t *next_seq;     /* the agent's; bumped if WELCOME is ahead */
	int epfd;
	void *tag;              /* epoll data.ptr for the socket */

	int fd;
	struct tls_conf *tls;   /* NULL: plaintext; else TLS (set after ship_init) */
	enum ship_state state;
	int out_armed;
	unsigned window;
	unsigned attempt;       /* failed attempts in a row (backoff) */
	int down_logged, welcomed;
	int nacked;             /* a NACK since the last ACK: keep backing off */
	uint64_t next_try_ns, conn_ns, hello_ns;
	uint64_t last_seq;      /* highest batch the collector committed */

	struct wire_reader rx;  /* frames from the collector */
	struct wire_buf tx;     /* control frames */
	int file_fd;            /* the batch frame being sent */
	off_t file_off, file_end;

	uint64_t connects, disconnects, errors;
	uint64_t batches_sent, batches_acked, batches_nacked, batches_duplicate;
	uint64_t spans_acked, spans_rejected, bytes_sent;
	uint64_t id_clashes;    /* WELCOMEs past our seqs: another agent has our id */
};


/* Set up (no connection yet: the first ship_tick() connects).  hello is
 * what every connection starts with (copied).  Returns 0 or -EINVAL (bad
 * address). */
int ship_init(struct ship *s, const char *addr, const struct wire_hello *hello,
	      struct spool *sp, uint64_t *next_seq, int epfd, void *tag);
void ship_free(struct ship *s);

void ship_tick(struct ship *s, uint64_t now);
void ship_event(struct ship *s, uint32_t events, uint64_t now);
void ship_pump(struct ship *s, uint64_t now);
/* Queue a STATS frame (only when connected).  0, -ENOTCONN or -ENOBUFS. */
int ship_send_stats(struct ship *s, const char *json, size_t len, uint64_t now);
/* Nothing left to send and nothing unacknowledged in the spool. */
int ship_idle(const struct ship *s);

#endif
