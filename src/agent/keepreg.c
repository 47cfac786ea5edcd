// SPDX-License-Identifier: MIT
/*
 * The registry of keep buffers (keepreg.h): a list under one mutex.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/keepreg.h"

struct kentry {
	struct kentry *next;
	uint64_t key;
	struct keepbuf *kb;
	const struct plan *p;
};

/* keepreg_each()'s walk of one buffer: fn with its plan. */
struct walk {
	int (*fn)(void *ctx, const struct plan *p, const void *rec, uint64_t t_ns);
	void *ctx;
	const struct plan *p;
};

static int walk_one(void *ctx, const void *rec, uint64_t t_ns)
{
	struct walk *w = ctx;

	return w->fn(w->ctx, w->p, rec, t_ns);
}

struct keepreg {
	pthread_mutex_t lock;
	struct kentry *head;
};

struct keepreg *keepreg_new(void)
{
	struct keepreg *r = calloc(1, sizeof(*r));

	if (r)
		pthread_mutex_init(&r->lock, NULL);
	return r;
}

void keepreg_free(struct keepreg *r)
{
	if (!r)
		return;
	while (r->head) {
		struct kentry *e = r->head;

		r->head = e->next;
		free(e);
	}
	pthread_mutex_destroy(&r->lock);
	free(r);
}

int keepreg_add(struct keepreg *r, uint64_t key, struct keepbuf *kb, const struct plan *p)
{
	struct kentry *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->key = key;
	e->kb = kb;
	e->p = p;
	pthread_mutex_lock(&r->lock);
	e->next = r->head;
	r->head = e;
	pthread_mutex_unlock(&r->lock);
	return 0;
}

void keepreg_remove(struct keepreg *r, struct keepbuf *kb)
{
	pthread_mutex_lock(&r->lock);
	for (struct kentry **pp = &r->head; *pp; pp = &(*pp)->next)
		if ((*pp)->kb == kb) {
			struct kentry *e = *pp;

			*pp = e->next;
			free(e);
			break;
		}
	pthread_mutex_unlock(&r->lock);
}

/* Add b's counts to a. */
static void sum(struct keepbuf_stats *a, const struct keepbuf_stats *b)
{
	a->cap += b->cap;
	a->bytes += b->bytes;
	a->held += b->held;
	a->added += b->added;
	a->overwritten += b->overwritten;
	a->expired += b->expired;
	if (b->oldest_ns && (!a->oldest_ns || b->oldest_ns < a->oldest_ns))
		a->oldest_ns = b->oldest_ns;
}

int keepreg_each(struct keepreg *r, uint64_t key, uint64_t from_ns, uint64_t to_ns,
		 uint64_t now_ns,
		 int (*fn)(void *ctx, const struct plan *p, const void *rec, uint64_t t_ns),
		 void *ctx, uint64_t *n, struct keepbuf_stats *st)
{
	int nbufs = 0;

	memset(st, 0, sizeof(*st));
	*n = 0;
	pthread_mutex_lock(&r->lock);
	for (struct kentry *e = r->head; e; e = e->next) {
		struct keepbuf_stats one;
		struct walk w = { .fn = fn, .ctx = ctx, .p = e->p };
		uint64_t k = 0;

		if (e->key != key)
			continue;
		nbufs++;
		keepbuf_each(e->kb, from_ns, to_ns, now_ns, walk_one, &w, &k);
		*n += k;
		keepbuf_get_stats(e->kb, now_ns, &one);
		sum(st, &one);
	}
	pthread_mutex_unlock(&r->lock);
	return nbufs;
}

void keepreg_totals(struct keepreg *r, uint64_t now_ns, struct keepbuf_stats *st, int *nbufs)
{
	memset(st, 0, sizeof(*st));
	*nbufs = 0;
	pthread_mutex_lock(&r->lock);
	for (struct kentry *e = r->head; e; e = e->next) {
		struct keepbuf_stats one;

		keepbuf_get_stats(e->kb, now_ns, &one);
		sum(st, &one);
		(*nbufs)++;
	}
	pthread_mutex_unlock(&r->lock);
}
