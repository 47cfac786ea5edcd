// SPDX-License-Identifier: MIT
/*
 * The keep buffer (keepbuf.h): cap entries of esize bytes, the live ones
 * from position tail to head (absolute counts; entry i at slot i % cap).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/keepbuf.h"

struct keepbuf {
	pthread_mutex_t lock;
	uint32_t recsize;
	size_t esize;			/* u64 time + record, 8-byte aligned */
	uint64_t keep_ns, cap;
	uint64_t head, tail;		/* entries [tail, head) live */
	uint64_t overwritten, expired;
	unsigned char *ents;
};

static unsigned char *ent(struct keepbuf *k, uint64_t i)
{
	return k->ents + (i % k->cap) * k->esize;
}

static uint64_t ent_time(struct keepbuf *k, uint64_t i)
{
	uint64_t t;

	memcpy(&t, ent(k, i), sizeof(t));
	return t;
}

/* Drop what is older than keep_ns at now_ns (lock held). */
static void expire(struct keepbuf *k, uint64_t now_ns)
{
	uint64_t limit = now_ns > k->keep_ns ? now_ns - k->keep_ns : 0;

	while (k->tail < k->head && ent_time(k, k->tail) < limit) {
		k->tail++;
		k->expired++;
	}
}

struct keepbuf *keepbuf_new(uint32_t recsize, uint64_t keep_ns, uint64_t max_events)
{
	struct keepbuf *k;
	size_t esize = (sizeof(uint64_t) + recsize + 7) & ~(size_t)7;
	uint64_t cap = max_events ? max_events : KEEPBUF_DEFAULT_BYTES / esize;

	if (!recsize || !keep_ns) {
		errno = EINVAL;
		return NULL;
	}
	if (cap > KEEPBUF_MAX_BYTES / esize)
		cap = KEEPBUF_MAX_BYTES / esize;
	if (!cap)
		cap = 1;
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->ents = calloc(cap, esize);	/* big: mmap'ed, pages on first write */
	if (!k->ents) {
		free(k);
		return NULL;
	}
	pthread_mutex_init(&k->lock, NULL);
	k->recsize = recsize;
	k->esize = esize;
	k->keep_ns = keep_ns;
	k->cap = cap;
	return k;
}

void keepbuf_free(struct keepbuf *k)
{
	if (!k)
		return;
	pthread_mutex_destroy(&k->lock);
	free(k->ents);
	free(k);
}

void keepbuf_add(struct keepbuf *k, const void *rec, uint64_t now_ns)
{
	unsigned char *e;

	pthread_mutex_lock(&k->lock);
	expire(k, now_ns);
	if (k->head - k->tail == k->cap) {
		k->tail++;
		k->overwritten++;
	}
	e = ent(k, k->head++);
	memcpy(e, &now_ns, sizeof(now_ns));
	memcpy(e + sizeof(now_ns), rec, k->recsize);
	pthread_mutex_unlock(&k->lock);
}

int keepbuf_each(struct keepbuf *k, uint64_t from_ns, uint64_t to_ns, uint64_t now_ns,
		 int (*fn)(void *ctx, const void *rec, uint64_t t_ns), void *ctx,
		 uint64_t *n)
{
	uint64_t calls = 0;
	int rc = 0;

	pthread_mutex_lock(&k->lock);
	expire(k, now_ns);
	for (uint64_t i = k->tail; i < k->head && !rc; i++) {
		uint64_t t = ent_time(k, i);

		if (t < from_ns || t > to_ns)
			continue;
		calls++;
		rc = fn(ctx, ent(k, i) + sizeof(t), t);
	}
	pthread_mutex_unlock(&k->lock);
	if (n)
		*n = calls;
	return rc;
}

void keepbuf_get_stats(struct keepbuf *k, uint64_t now_ns, struct keepbuf_stats *st)
{
	pthread_mutex_lock(&k->lock);
	expire(k, now_ns);
	st->cap = k->cap;
	st->bytes = k->cap * k->esize;
	st->held = k->head - k->tail;
	st->added = k->head;
	st->overwritten = k->overwritten;
	st->expired = k->expired;
	st->oldest_ns = st->held ? ent_time(k, k->tail) : 0;
	pthread_mutex_unlock(&k->lock);
}
