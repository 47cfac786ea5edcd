/* SPDX-License-Identifier: MIT */
/*
 * Whole spans out of BlkKin's partial records, for spans(...) queries.
 *
 * blkin_record() writes one record per annotation (SPAN_F_PARTIAL: the
 * span's ids, its name, the annotation's endpoint and one timestamp or
 * tag; src/lib/blkin.c); the collector merges them into Zipkin spans
 * when it stores them.  A query over spans wants whole spans with a
 * duration, so the agent merges them too, the same way (Zipkin's V1
 * rule): the parts of one span id recorded by one service are kept until
 * the span has both annotations of a side, cs and cr (a client span,
 * from cs to cr) or sr and ss (a server span, from sr to ss; durations
 * by common/zipkin_v1.h: under 1 us is 1 us, as the store has it); then the
 * span comes out once, with every tag recorded so far, and its parts are
 * forgotten once every side they began is out (a loopback RPC, cs, sr,
 * ss and cr in one service, is a server span and then a client span, as
 * the store's Zipkin converter makes it).  Parts that arrive after that (a tag recorded after the end
 * annotation) and spans that never end are not seen by queries: a span
 * whose parts wait longer than SPANMERGE_TTL_NS, or that the table must
 * give up when it is full (its oldest), is counted in spanmerge_dropped().
 *
 * One thread only (the drain thread); no allocation after spanmerge_new().
 */
#ifndef FAY_AGENT_SPANMERGE_H
#define FAY_AGENT_SPANMERGE_H

#include <stdint.h>

#include "common/spanrec.h"

#define SPANMERGE_TTL_NS	(60ull * 1000000000ull)

struct spanmerge;

/* A table for cap spans in progress (rounded up to a power of two).
 * NULL and errno. */
struct spanmerge *spanmerge_new(unsigned cap);
/* Accepts NULL. */
void spanmerge_free(struct spanmerge *m);

/*
 * Add partial record r (SPAN_F_PARTIAL; decoded).  Returns 1 when r
 * completes a span: *out is that whole span (kind, start, duration, name,
 * local endpoint, tags; flags without SPAN_F_PARTIAL), valid until the
 * next call; 0 when the part is kept; -EINVAL for a record that is not a
 * part.
 */
int spanmerge_add(struct spanmerge *m, const struct spanrec *r, struct spanrec *out);

/* Spans given up so far (never completed within the TTL, or evicted). */
uint64_t spanmerge_dropped(const struct spanmerge *m);

#endif
