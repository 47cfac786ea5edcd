// SPDX-License-Identifier: MIT
/*
 * The bounded queue of sealed batches between the drain thread (producer)
 * and the main thread (the spool writer).  One mutex, held only for a few
 * pointer moves; the drain thread never waits on it for anything else:
 * when every buffer is in use it gets NULL and leaves the records in the
 * rings (see drain.c for why that is the right answer).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "agent/batch.h"
#include "agent/bqueue.h"

static void qbatch_free(struct qbatch *b)
{
	wire_batch_free(&b->b);
	free(b->trail);
	free(b);
}

int bqueue_init(struct bqueue *q, uint32_t max)
{
	int ret;

	q->free = q->head = NULL;
	q->tailp = &q->head;
	q->nbufs = q->nqueued = q->hwm = 0;
	q->max = max < 2 ? 2 : max;
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0)
		return -errno;
	ret = -pthread_mutex_init(&q->lock, NULL);
	if (ret) {
		close(q->efd);
		q->efd = -1;
		return ret;
	}
	/* Every buffer now, so that the drain thread never calls malloc
	 * (an mmap for 1 MiB): untouched pages cost address space only. */
	for (uint32_t i = 0; i < q->max; i++) {
		struct qbatch *b = calloc(1, sizeof(*b));

		if (!b || wire_batch_init(&b->b, BATCH_MAX_BYTES, BATCH_MAX_SPANS)) {
			free(b);
			bqueue_free(q);
			return -ENOMEM;
		}
		b->next = q->free;
		q->free = b;
		q->nbufs++;
	}
	return 0;
}

void bqueue_free(struct bqueue *q)
{
	if (!q || q->efd < 0)
		return;
	for (struct qbatch *l[2] = { q->free, q->head }, **pl = l; pl < l + 2; pl++) {
		while (*pl) {
			struct qbatch *b = *pl;

			*pl = b->next;
			qbatch_free(b);
		}
	}
	q->free = q->head = NULL;
	close(q->efd);
	q->efd = -1;
	pthread_mutex_destroy(&q->lock);
}

static void qbatch_reset(struct qbatch *b)
{
	wire_batch_reset(&b->b);
	b->ntrail = 0;
	b->retired = NULL;
	b->next = NULL;
}

struct qbatch *bqueue_get(struct bqueue *q)
{
	struct qbatch *b;

	pthread_mutex_lock(&q->lock);
	b = q->free;
	if (b)
		q->free = b->next;
	pthread_mutex_unlock(&q->lock);
	if (b)
		qbatch_reset(b);
	return b;
}

void bqueue_wake(struct bqueue *q)
{
	uint64_t one = 1;

	if (write(q->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN only: the reader is awake. */
	}
}

void bqueue_push(struct bqueue *q, struct qbatch *b)
{
	b->next = NULL;
	pthread_mutex_lock(&q->lock);
	*q->tailp = b;
	q->tailp = &b->next;
	if (++q->nqueued > q->hwm)
		q->hwm = q->nqueued;
	pthread_mutex_unlock(&q->lock);
	bqueue_wake(q);
}

struct qbatch *bqueue_peek(struct bqueue *q)
{
	struct qbatch *b;

	pthread_mutex_lock(&q->lock);
	b = q->head;
	pthread_mutex_unlock(&q->lock);
	return b;
}

void bqueue_pop(struct bqueue *q)
{
	struct qbatch *b;

	pthread_mutex_lock(&q->lock);
	b = q->head;
	if (b) {
		q->head = b->next;
		if (!q->head)
			q->tailp = &q->head;
		q->nqueued--;
		b->next = q->free;
		q->free = b;
	}
	pthread_mutex_unlock(&q->lock);
}

void bqueue_put_back(struct bqueue *q, struct qbatch *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&q->lock);
	b->next = q->free;
	q->free = b;
	pthread_mutex_unlock(&q->lock);
}

uint32_t bqueue_len(struct bqueue *q)
{
	uint32_t n;

	pthread_mutex_lock(&q->lock);
	n = q->nqueued;
	pthread_mutex_unlock(&q->lock);
	return n;
}
