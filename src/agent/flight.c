// SPDX-License-Identifier: MIT
/*
 * The flight buffer: unsampled spans kept within a memory bound, indexed
 * by trace id (flight.h has the layout and the argument).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/flight.h"
#include "common/grow.h"

#define FL_ALIGN	8u
#define FL_PAD		UINT32_MAX	/* an entry length: skip to the arena's end */

/* An entry's header; the record follows (len bytes), the entry rounded up
 * to FL_ALIGN. */
struct fent {
	uint64_t prev;		/* position + 1 of the previous entry of the
				 * bucket, 0: none */
	uint64_t trace_hi, trace_lo;
	uint64_t start_ns, end_ns;
	uint32_t len;		/* record bytes, or FL_PAD */
	uint32_t _pad;
};

/* A trace some of whose spans were lost (evicted, or too big to keep):
 * a capture of it says how many (its account's "overwritten"). */
struct flost {
	uint64_t trace_hi, trace_lo;
	uint64_t count;		/* 0: the slot is free */
	uint64_t stamp;		/* the buffer's lost count at its last loss:
				 * the set's oldest goes first */
};

#define FL_LOST_WAYS	4u

struct flight {
	pthread_mutex_t lock;
	uint8_t *arena;
	uint64_t cap;		/* arena bytes, a multiple of FL_ALIGN */
	uint64_t head, tail;	/* absolute positions: [tail, head) is alive */
	uint64_t *bucket;	/* position + 1 of the newest entry, 0: none */
	uint32_t nbuckets;	/* a power of two */
	struct flost *lost;	/* nbuckets / 8 sets of FL_LOST_WAYS */
	uint64_t nlost;		/* spans lost (the stamps' clock) */
	struct flight_stats st;
};

static uint64_t ent_size(uint32_t len)
{
	return (sizeof(struct fent) + (uint64_t)len + FL_ALIGN - 1) & ~(uint64_t)(FL_ALIGN - 1);
}

static uint32_t bucket_of(const struct flight *f, uint64_t hi, uint64_t lo)
{
	uint64_t h = (lo ^ (hi * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;

	return (uint32_t)(h >> 32) & (f->nbuckets - 1);
}

static struct fent *ent_at(const struct flight *f, uint64_t pos)
{
	return (struct fent *)(f->arena + pos % f->cap);
}

/* The position after the entry (or padding) at pos. */
static uint64_t ent_next(const struct flight *f, uint64_t pos)
{
	uint64_t room = f->cap - pos % f->cap;
	const struct fent *e;

	if (room < sizeof(struct fent))
		return pos + room;
	e = ent_at(f, pos);
	return e->len == FL_PAD ? pos + room : pos + ent_size(e->len);
}

static int ent_is_span(const struct flight *f, uint64_t pos)
{
	return f->cap - pos % f->cap >= sizeof(struct fent) && ent_at(f, pos)->len != FL_PAD;
}

struct flight *flight_new(uint64_t bytes)
{
	struct flight *f;
	uint32_t nb = 1024;

	if (bytes < FLIGHT_MIN_BYTES) {
		errno = EINVAL;
		return NULL;
	}
	/* about one bucket per 1 KiB: short chains for spans of a few
	 * hundred bytes, the index 1/128 of the bound */
	while ((uint64_t)nb * 2 * 1024 <= bytes && nb < (1u << 30))
		nb *= 2;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->nbuckets = nb;
	/* the index and the lost table come out of the bound */
	f->cap = (bytes - (uint64_t)nb * sizeof(uint64_t) - (uint64_t)nb / 2 * sizeof(struct flost)) &
		 ~(uint64_t)(FL_ALIGN - 1);
	f->bucket = calloc(nb, sizeof(uint64_t));
	f->lost = calloc(nb / 2, sizeof(struct flost));
	f->arena = malloc(f->cap);
	if (!f->bucket || !f->lost || !f->arena) {
		free(f->bucket);
		free(f->lost);
		free(f->arena);
		free(f);
		errno = ENOMEM;
		return NULL;
	}
	f->st.bytes = bytes;
	pthread_mutex_init(&f->lock, NULL);
	return f;
}

void flight_free(struct flight *f)
{
	if (!f)
		return;
	pthread_mutex_destroy(&f->lock);
	free(f->bucket);
	free(f->lost);
	free(f->arena);
	free(f);
}

/* The set of the lost table a trace goes to. */
static struct flost *lost_set(const struct flight *f, uint64_t hi, uint64_t lo)
{
	return f->lost + (bucket_of(f, hi, lo) & (f->nbuckets / 8 - 1)) * FL_LOST_WAYS;
}

/* One more span of trace (hi, lo) lost: counted in its slot, or in the
 * set's least recently lost one (that trace's count is forgotten).  Under
 * the lock. */
static void lost_add(struct flight *f, uint64_t hi, uint64_t lo)
{
	struct flost *set = lost_set(f, hi, lo), *old = set;

	f->nlost++;
	for (unsigned i = 0; i < FL_LOST_WAYS; i++) {
		struct flost *l = &set[i];

		if (l->count && l->trace_hi == hi && l->trace_lo == lo) {
			l->count++;
			l->stamp = f->nlost;
			return;
		}
		if (!l->count || (old->count && l->stamp < old->stamp))
			old = l;
	}
	*old = (struct flost){ .trace_hi = hi, .trace_lo = lo, .count = 1, .stamp = f->nlost };
}

/* Spans of trace (hi, lo) lost so far (as far as the table remembers).
 * Under the lock. */
static uint64_t lost_get(const struct flight *f, uint64_t hi, uint64_t lo)
{
	const struct flost *set = lost_set(f, hi, lo);

	for (unsigned i = 0; i < FL_LOST_WAYS; i++)
		if (set[i].count && set[i].trace_hi == hi && set[i].trace_lo == lo)
			return set[i].count;
	return 0;
}

/* Drop the oldest entry.  Under the lock, with tail < head. */
static void evict_one(struct flight *f)
{
	if (ent_is_span(f, f->tail)) {
		const struct fent *e = ent_at(f, f->tail);

		f->st.dropped++;
		f->st.held--;
		lost_add(f, e->trace_hi, e->trace_lo);
	}
	f->tail = ent_next(f, f->tail);
}

void flight_add(struct flight *f, const void *rec, uint32_t reclen, const struct spanrec *r,
		const struct ep_item *ep, const struct tag_items *tags)
{
	uint64_t len = batch_rec_size(reclen, r, ep, tags), need = ent_size((uint32_t)len);
	uint64_t start, room;
	struct fent *e;
	uint32_t b;

	pthread_mutex_lock(&f->lock);
	if (len >= FL_PAD || need > f->cap / 4) {
		f->st.too_big++;
		lost_add(f, r->f.trace_hi, r->f.trace_lo);
		pthread_mutex_unlock(&f->lock);
		return;
	}
	room = f->cap - f->head % f->cap;
	start = room < need ? f->head + room : f->head;
	while (start + need - f->tail > f->cap)
		evict_one(f);
	if (start != f->head && room >= sizeof(struct fent))
		ent_at(f, f->head)->len = FL_PAD;
	e = ent_at(f, start);
	b = bucket_of(f, r->f.trace_hi, r->f.trace_lo);
	e->prev = f->bucket[b];
	e->trace_hi = r->f.trace_hi;
	e->trace_lo = r->f.trace_lo;
	e->start_ns = r->f.start_ns;
	e->end_ns = r->f.start_ns + r->f.duration_ns;
	e->len = (uint32_t)len;
	e->_pad = 0;
	batch_rec_copy((uint8_t *)(e + 1), rec, reclen, r, ep, tags);
	f->bucket[b] = start + 1;
	f->head = start + need;
	f->st.added++;
	f->st.held++;
	pthread_mutex_unlock(&f->lock);
}

/* Under the lock. */
static void stats_locked(struct flight *f, struct flight_stats *st)
{
	uint64_t pos = f->tail;

	*st = f->st;
	st->used = f->head - f->tail;
	st->oldest_ns = 0;
	while (pos < f->head && !ent_is_span(f, pos))
		pos = ent_next(f, pos);
	if (pos < f->head)
		st->oldest_ns = ent_at(f, pos)->start_ns;
}

void flight_get_stats(struct flight *f, struct flight_stats *st)
{
	pthread_mutex_lock(&f->lock);
	stats_locked(f, st);
	pthread_mutex_unlock(&f->lock);
}

/* Does the entry at pos match a WINDOW capture? */
static int window_match(const struct flight *f, uint64_t pos, const struct wire_capture *c)
{
	const struct fent *e = ent_at(f, pos);
	struct spanrec r;

	if (e->start_ns > c->to_ns || e->end_ns < c->from_ns)
		return 0;
	if (!c->service_len)
		return 1;
	/* the record was checked when it was drained */
	if (spanrec_decode(e + 1, e->len, &r, NULL, 0) < 0 || !r.local.present)
		return 0;
	return r.local.service.len == c->service_len &&
	       !memcmp(r.local.service.p, c->service, c->service_len);
}

long flight_capture(struct flight *f, const struct wire_capture *c, struct wbuf *out,
		    uint64_t max_bytes, int *cut, uint64_t *lost, struct flight_stats *st)
{
	uint64_t *pos = NULL, total = 0;
	size_t n = 0, cap = 0, count_off;
	long kept = 0;

	*cut = 0;
	count_off = out->len;
	wbuf_le32(out, 0);
	pthread_mutex_lock(&f->lock);
	f->st.captures++;
	*lost = 0;
	if (c->kind == WIRE_CK_TRACE) {
		uint64_t p = f->bucket[bucket_of(f, c->trace_hi, c->trace_lo)];

		*lost = lost_get(f, c->trace_hi, c->trace_lo);
		/* newest first; a chain only goes down, and stops at the tail */
		while (p && p - 1 >= f->tail) {
			const struct fent *e = ent_at(f, p - 1);

			if (e->trace_hi == c->trace_hi && e->trace_lo == c->trace_lo &&
			    array_grow((void **)&pos, n, &cap, sizeof(*pos), 64) == 0)
				pos[n++] = p - 1;
			p = e->prev;
		}
	} else {
		for (uint64_t p = f->tail; p < f->head; p = ent_next(f, p))
			if (ent_is_span(f, p) && window_match(f, p, c) &&
			    array_grow((void **)&pos, n, &cap, sizeof(*pos), 64) == 0)
				pos[n++] = p;
		/* newest first, as for a trace */
		for (size_t i = 0; i < n / 2; i++) {
			uint64_t t = pos[i];

			pos[i] = pos[n - 1 - i];
			pos[n - 1 - i] = t;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct fent *e = ent_at(f, pos[i]);

		if (total + e->len + 4 > max_bytes) {
			*cut = 1;
			break;
		}
		total += e->len + 4;
		wbuf_le32(out, e->len);
		wbuf_put(out, e + 1, e->len);
		kept++;
	}
	stats_locked(f, st);
	pthread_mutex_unlock(&f->lock);
	free(pos);
	if (out->err)
		return out->err;
	for (int i = 0; i < 4; i++)
		out->p[count_off + i] = (uint8_t)((uint64_t)kept >> (8 * i));
	return kept;
}
