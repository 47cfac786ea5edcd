/* SPDX-License-Identifier: MIT */
/*
 * The bounded queue of sealed batches between the drain thread and the
 * main thread (bqueue.c).
 */
#ifndef FAY_AGENT_BQUEUE_H
#define FAY_AGENT_BQUEUE_H

#include <pthread.h>
#include <stdint.h>

#include "agent/spool.h"
#include "common/wire.h"

struct proc;

/*
 * A batch drained from the rings and the ring cursors at its end, on its
 * way from the drain thread to the spool writer (the main thread).
 * retired: processes whose last records are in this batch (or earlier
 * ones); their files are removed once it is spooled.
 */
struct qbatch {
	struct qbatch *next;
	struct wire_batch b;
	struct cursor *trail;
	uint32_t ntrail, trail_cap;
	struct proc *retired;   /* linked through proc->dnext */
};

/*
 * max batch buffers, allocated up front; the drain thread takes a free one (never waiting: NULL when all are in use),
 * fills it, and pushes it; the main thread takes them in order, spools
 * them, and gives them back.  efd (an eventfd) is written on every push.
 */
struct bqueue {
	pthread_mutex_t lock;
	struct qbatch *free;
	struct qbatch *head, **tailp;
	uint32_t nbufs, max, nqueued, hwm;
	int efd;
};

/* max buffers of BATCH_MAX_BYTES (at least 2).  Returns 0 or -errno.
 * bqueue_free() accepts a queue whose init failed. */
int bqueue_init(struct bqueue *q, uint32_t max);
void bqueue_free(struct bqueue *q);
/* A free buffer (reset, no trailer, nothing retired), or NULL when all
 * max are in use. */
struct qbatch *bqueue_get(struct bqueue *q);
/* Append a sealed batch and wake the main thread. */
void bqueue_push(struct bqueue *q, struct qbatch *b);
/* Wake the main thread without a batch. */
void bqueue_wake(struct bqueue *q);
/* The oldest pushed batch, still queued (NULL when none). */
struct qbatch *bqueue_peek(struct bqueue *q);
/* Remove the oldest (which bqueue_peek returned) and make it free. */
void bqueue_pop(struct bqueue *q);
/* Give back a buffer that was never pushed. */
void bqueue_put_back(struct bqueue *q, struct qbatch *b);
uint32_t bqueue_len(struct bqueue *q);

#endif
