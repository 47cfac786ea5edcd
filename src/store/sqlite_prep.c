// SPDX-License-Identifier: MIT
/*
 * store__prepare() for SQLite: the part of a batch's write that needs no
 * connection, done on the thread that made the batch (an OTLP, Zipkin or
 * agent connection) instead of the one writer.  Each span's extra blob
 * is encoded (sq_extra_encode()), and its Bloom terms are hashed into 64
 * bytes of its own: the terms of the span that no span before it in the
 * batch gave the same trace (sq_bloom_span_txn() with a term set of the
 * batch).  The writer then binds the blob and ORs the 64 bytes into its
 * trace's filter (sqlite_write.c).
 *
 * The same bits: a trace's filter is the OR of its stored spans' terms.
 * A term left out of a span's bits was given to the same trace by a span
 * before it in the batch, which is stored too: the writer claims a
 * batch's spans in arrival order, so the spans of a trace it drops (the
 * trace holds SQ_NO_LIMIT spans) are the last ones of that trace.
 */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_int.h"
#include "store/store.h"

/* A term set kept in the pool at most this large (slots of 64 bytes: 2
 * MiB).  A batch of 512 SDK-like spans (~7,000 terms) grows its set to
 * 16,384 slots; kept at 8,192 it was freed after every such batch and
 * made again (1 MiB, a mapping of its own: ~250 page faults a request,
 * tests/integration/otlp_pages.sh). */
#define PREP_KEEP_SLOTS 32768u

/* A batch's scratch, from the store's pool (or made), returned to it. */
static struct sq_prep_tmp *tmp_get(struct store_be *st)
{
	struct sq_prep_tmp *t = NULL;

	pthread_mutex_lock(&st->plock);
	if (st->npool)
		t = st->pool[--st->npool];
	pthread_mutex_unlock(&st->plock);
	if (!t)
		t = calloc(1, sizeof(*t));
	return t;
}

static void tmp_free(struct sq_prep_tmp *t)
{
	sq_termset_free(&t->ts);
	free(t->x.p);
	free(t);
}

static void tmp_put(struct store_be *st, struct sq_prep_tmp *t)
{
	if (t->ts.nslot <= PREP_KEEP_SLOTS) {
		pthread_mutex_lock(&st->plock);
		if (st->npool < SQ_PREP_POOL) {
			st->pool[st->npool++] = t;
			t = NULL;
		}
		pthread_mutex_unlock(&st->plock);
	}
	if (t)
		tmp_free(t);
}

void sq_prep_pool_free(struct store_be *st)
{
	while (st->npool)
		tmp_free(st->pool[--st->npool]);
}

/* The index of span i's trace among the batch's traces (slot: nslot
 * entries, 0 empty, else a span's index + 1; *nt traces so far). */
static uint32_t trace_ix(const struct zspan *z, size_t i, uint32_t *slot, uint32_t *tix,
			 size_t nslot, uint32_t *nt)
{
	uint64_t h = (z[i].trace_hi * 0x9e3779b97f4a7c15ull) ^ z[i].trace_lo;
	size_t k;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	for (k = h & (nslot - 1); slot[k]; k = (k + 1) & (nslot - 1)) {
		const struct zspan *o = &z[slot[k] - 1];

		if (o->trace_hi == z[i].trace_hi && o->trace_lo == z[i].trace_lo)
			return tix[slot[k] - 1];
	}
	slot[k] = (uint32_t)i + 1;
	return tix[i] = (*nt)++;
}

int sq__prepare(struct store_be *st, struct store_batch *b, struct zarena *a)
{
	size_t n = b->nspans, nslot = 16;
	struct store_prep *p;
	struct sq_prep_tmp *t;
	uint32_t *slot, *tix, nt = 0;
	int ret = -ENOMEM;

	b->prep = NULL;
	if (n < 2 || n > UINT32_MAX / 2)
		return 0; /* the writer writes one span unprepared */
	while (nslot < 2 * n)
		nslot *= 2;
	p = zarena_alloc(a, sizeof(*p));
	slot = zarena_zalloc(a, nslot * sizeof(*slot));
	tix = zarena_alloc(a, n * sizeof(*tix));
	if (!p || !slot || !tix)
		return -ENOMEM;
	p->spans = b->spans;
	p->n = n;
	p->bloom = zarena_zalloc(a, n * sizeof(*p->bloom));
	p->extra = zarena_alloc(a, n * sizeof(*p->extra));
	p->extra_len = zarena_alloc(a, n * sizeof(*p->extra_len));
	t = tmp_get(st);
	if (!p->bloom || !p->extra || !p->extra_len || !t)
		goto out;
	sq_termset_reset(&t->ts);
	for (size_t i = 0; i < n; i++) {
		const struct zspan *z = &b->spans[i];
		uint8_t *x = NULL;

		sq_bloom_span_txn(&t->ts, trace_ix(b->spans, i, slot, tix, nslot, &nt),
				  p->bloom[i], z);
		if (sq_extra_encode(&t->x, z))
			goto out;
		if (t->x.len) {
			x = zarena_alloc(a, t->x.len);
			if (!x)
				goto out;
			memcpy(x, t->x.p, t->x.len);
		}
		p->extra[i] = x;
		p->extra_len[i] = (uint32_t)t->x.len;
	}
	b->prep = p;
	ret = 0;
out:
	if (t)
		tmp_put(st, t);
	return ret;
}
