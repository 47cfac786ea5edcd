/* SPDX-License-Identifier: MIT */
/*
 * The flight buffer (#22): the spans this host recorded that head sampling
 * did not choose (libfay's FAY_RECORD=all), kept in memory within a bound
 * (fay agent --flight SIZE) so that a capture can bring back a whole trace,
 * or everything of the last seconds, after the fact.  Nothing here is
 * written to disk or shipped unless a capture asks for it.
 *
 * One byte arena used as a ring: each entry is a small header (trace id,
 * start and end, the link to the previous entry of its hash bucket) and
 * the span record with the process's endpoint added, exactly the bytes a
 * BATCH would carry.  Entries are addressed by absolute byte position
 * (they only grow); an entry is alive while its position is at or past
 * the tail.  A new entry that does not fit evicts the oldest ones first
 * (counted: dropped).  The index is a table of hash buckets by trace id,
 * each holding the position of its newest entry; entries link to the
 * previous one of their bucket, so a chain is in decreasing position and
 * a walk stops at the first position below the tail: the index never
 * needs cleaning when entries are evicted.
 *
 * Spans lost (evicted, or too big to keep) are counted by trace in a
 * second table (nbuckets / 2 slots, 4-way sets, the least recently lost
 * trace of a set forgotten first), so that a capture of a trace says how
 * many of its spans were already overwritten when it asked.
 *
 * Threads: the drain thread adds (flight_add), a capture (the query
 * link's thread) reads; one mutex, held for one add or one capture.
 */
#ifndef FAY_AGENT_FLIGHT_H
#define FAY_AGENT_FLIGHT_H

#include <stdint.h>

#include "agent/batch.h"
#include "common/bytes.h"
#include "common/spanrec.h"
#include "common/wire_cluster.h"

/* The smallest --flight: room for the index and some spans. */
#define FLIGHT_MIN_BYTES (1u << 20)

struct flight;

struct flight_stats {
	uint64_t bytes;		/* the bound (--flight) */
	uint64_t used;		/* bytes of entries held */
	uint64_t held;		/* spans held */
	uint64_t added;		/* spans added since the start */
	uint64_t dropped;	/* the oldest spans evicted to make room */
	uint64_t too_big;	/* spans larger than a quarter of the buffer:
				 * not kept */
	uint64_t oldest_ns;	/* start of the oldest span held, 0: none */
	uint64_t captures;	/* captures answered */
};

/* A buffer of at most bytes (index included; >= FLIGHT_MIN_BYTES).  The
 * arena's pages cost memory only once written.  NULL with errno. */
struct flight *flight_new(uint64_t bytes);
/* Accepts NULL. */
void flight_free(struct flight *f);

/* Keep span record rec (reclen bytes, decoded into r), ep added as its
 * local endpoint when it has none (ep may be NULL) and its process's tags
 * (may be NULL).  Never fails: a span too large is counted (too_big); the
 * oldest spans make room. */
void flight_add(struct flight *f, const void *rec, uint32_t reclen, const struct spanrec *r,
		const struct ep_item *ep, const struct tag_items *tags);

/* The spans c asks for (a trace id, or those overlapping a window and of
 * a service), appended to out as a BATCH payload (u32 count, then (u32
 * len, record) each), at most max_bytes of records: when more match, the
 * newest are kept and *cut is set.  *lost: for a trace, how many of its
 * spans the buffer had lost before (0 for a window).  Fills st as
 * flight_stats().  Returns the number of spans appended, or -ENOMEM
 * (out->err). */
long flight_capture(struct flight *f, const struct wire_capture *c, struct wbuf *out,
		    uint64_t max_bytes, int *cut, uint64_t *lost, struct flight_stats *st);

void flight_get_stats(struct flight *f, struct flight_stats *st);

#endif
