/* SPDX-License-Identifier: MIT */
/*
 * The keep buffer of a query in keep mode (#22 item 4: 'keep DUR [max N]'
 * in docs/QUERY.md): the events a streaming query yields on this host,
 * kept instead of sent, so that a capture can bring back the last seconds
 * after the fact (fay capture --query), or `fay query` prints them when it
 * ends.
 *
 * A ring of fixed-size entries (the arrival time, then the plan's record):
 * bounded by time (an event older than DUR is dropped: expired) and by
 * memory (N entries, or as many as KEEPBUF_DEFAULT_BYTES hold; never more
 * than KEEPBUF_MAX_BYTES): when it is full the oldest event is overwritten
 * and counted.  The entries' pages cost memory only once written.
 *
 * Threads: one adds (the query's runner), any other may read; a mutex,
 * held for one add or one walk.
 */
#ifndef FAY_ENGINE_KEEPBUF_H
#define FAY_ENGINE_KEEPBUF_H

#include <stddef.h>
#include <stdint.h>

#define KEEPBUF_DEFAULT_BYTES	(16u << 20)	/* without 'max N' */
#define KEEPBUF_MAX_BYTES	(256u << 20)

struct keepbuf;

struct keepbuf_stats {
	uint64_t cap;		/* the most events held (the memory bound) */
	uint64_t bytes;		/* cap x entry size */
	uint64_t held;		/* events held now (within DUR) */
	uint64_t added;		/* events added since the start */
	uint64_t overwritten;	/* events within DUR the memory bound evicted */
	uint64_t expired;	/* events older than DUR dropped */
	uint64_t oldest_ns;	/* arrival of the oldest event held, 0: none */
};

/* A buffer of records of recsize bytes (> 0) kept keep_ns (> 0), at most
 * max_events (0: KEEPBUF_DEFAULT_BYTES' worth; either way at most
 * KEEPBUF_MAX_BYTES).  NULL with errno. */
struct keepbuf *keepbuf_new(uint32_t recsize, uint64_t keep_ns, uint64_t max_events);
/* Accepts NULL. */
void keepbuf_free(struct keepbuf *k);

/* Keep record rec (recsize bytes), arrived at now_ns (wall clock; the
 * calls' times never go down).  Never fails: the oldest event makes room. */
void keepbuf_add(struct keepbuf *k, const void *rec, uint64_t now_ns);

/* Calls fn(ctx, rec, t_ns) for each event held at now_ns that arrived in
 * [from_ns, to_ns], oldest first, until fn returns non-zero (returned).
 * Returns 0 after the last; *n (may be NULL) counts the calls. */
int keepbuf_each(struct keepbuf *k, uint64_t from_ns, uint64_t to_ns, uint64_t now_ns,
		 int (*fn)(void *ctx, const void *rec, uint64_t t_ns), void *ctx,
		 uint64_t *n);

/* Its counts, as of now_ns (expired events dropped first). */
void keepbuf_get_stats(struct keepbuf *k, uint64_t now_ns, struct keepbuf_stats *st);

#endif
