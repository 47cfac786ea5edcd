// SPDX-License-Identifier: MIT
/*
 * The span tap (spantap.h): a list of attached spans(...) queries under
 * one lock, each with its context buffer allocated when it attaches, so
 * that a feed on the drain thread allocates nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "agent/spanmerge.h"
#include "agent/spantap.h"
#include "common/atomic.h"
#include "engine/engine.h"
#include "query/spanctx.h"

#define MERGE_CAP 4096

struct sub {
	struct engine *e;
	const struct plan *p;
	unsigned char *ctx;
	bool fed;		/* since the last pass end */
};

struct spantap {
	pthread_mutex_t lock;
	int nsubs;		/* read without the lock by feeds */
	struct sub subs[SPANTAP_MAX_QUERIES];
	struct spanmerge *merge;	/* under the lock */
	uint64_t fed;
};

struct spantap *spantap_new(void)
{
	struct spantap *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->merge = spanmerge_new(MERGE_CAP);
	if (!t->merge) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void spantap_free(struct spantap *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->nsubs; i++)
		free(t->subs[i].ctx);
	spanmerge_free(t->merge);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int spantap_attach(void *tap, struct engine *e)
{
	struct spantap *t = tap;
	const struct plan *p = engine_plan(e);
	unsigned char *ctx = malloc((size_t)p->ctx_size);
	int err = 0;

	if (!ctx)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	if (t->nsubs == SPANTAP_MAX_QUERIES) {
		err = -ENOSPC;
	} else {
		t->subs[t->nsubs] = (struct sub){ .e = e, .p = p, .ctx = ctx };
		WRITE_ONCE(t->nsubs, t->nsubs + 1);
	}
	pthread_mutex_unlock(&t->lock);
	if (err)
		free(ctx);
	return err;
}

void spantap_detach(void *tap, struct engine *e)
{
	struct spantap *t = tap;

	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < t->nsubs; i++) {
		if (t->subs[i].e != e)
			continue;
		free(t->subs[i].ctx);
		t->subs[i] = t->subs[t->nsubs - 1];
		WRITE_ONCE(t->nsubs, t->nsubs - 1);
		break;
	}
	pthread_mutex_unlock(&t->lock);
}

void spantap_feed(struct spantap *t, const struct spanrec *r, const char *proc_service,
		  uint32_t pid, const char *cgroup, const char *container)
{
	struct spanrec whole;

	if (!READ_ONCE(t->nsubs))
		return;
	pthread_mutex_lock(&t->lock);
	if (r->f.flags & SPAN_F_PARTIAL) {
		if (spanmerge_add(t->merge, r, &whole) != 1)
			goto out;
		r = &whole;
	}
	t->fed++;
	for (int i = 0; i < t->nsubs; i++) {
		struct sub *s = &t->subs[i];

		if (!spanctx_match(s->p, r, proc_service))
			continue;
		spanctx_fill(s->p, r, proc_service, pid, cgroup, container, s->ctx);
		engine_span_feed(s->e, s->ctx);
		s->fed = true;
	}
out:
	pthread_mutex_unlock(&t->lock);
}

void spantap_pass_end(struct spantap *t)
{
	if (!READ_ONCE(t->nsubs))
		return;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < t->nsubs; i++) {
		if (t->subs[i].fed)
			engine_span_kick(t->subs[i].e);
		t->subs[i].fed = false;
	}
	pthread_mutex_unlock(&t->lock);
}

void spantap_counts(struct spantap *t, uint64_t *fed, uint64_t *merge_dropped)
{
	pthread_mutex_lock(&t->lock);
	*fed = t->fed;
	*merge_dropped = spanmerge_dropped(t->merge);
	pthread_mutex_unlock(&t->lock);
}
