/* SPDX-License-Identifier: MIT */
/*
 * Zipkin's V1 rule, the one copy for everyone who turns BlkKin's
 * per-annotation records into spans: the store (store/span_v1.c, every
 * span the collector keeps) and the agent (agent/spanmerge.c, the spans
 * its spans(...) queries see).  Which two-letter annotations are "core"
 * and what kind of span each makes, and how long a span lasts from its
 * begin to its end annotation (zipkin2.v1.V1SpanConverter and the
 * zipkin2.Span model).
 */
#ifndef FAY_COMMON_ZIPKIN_V1_H
#define FAY_COMMON_ZIPKIN_V1_H

#include <stddef.h>
#include <stdint.h>

/* The core annotations, in V1SpanConverter's order. */
enum zv1_core {
	ZV1_CS, ZV1_SR, ZV1_SS, ZV1_CR, ZV1_MS, ZV1_MR, ZV1_WS, ZV1_WR, ZV1_NCORE
};

/* Which core annotation the value (s, len) is (exactly "cs", "sr", ...),
 * or -1 for any other value.  (V1 also wants an endpoint on a core
 * annotation: that check is the caller's.) */
int zv1_core(const char *s, size_t len);

/* The span kind (SPAN_KIND_*, common/spanrec.h) core annotation k makes
 * its span: cs/cr CLIENT, sr/ss SERVER, ms PRODUCER, mr CONSUMER;
 * ws/wr (and anything else) SPAN_KIND_UNSET: they leave the kind alone. */
uint8_t zv1_kind(int k);

/*
 * The duration of a span from its begin annotation to its end one, both
 * recorded, in the unit of begin and end, of which one_us make one
 * microsecond (1: microseconds, 1000: nanoseconds).  Under one
 * microsecond (also 0, both in the same tick) is one microsecond:
 * Zipkin reads 0 as "no duration", and zipkin2.Span says a known
 * duration under 1 us must be rounded up to 1.  An end before its begin
 * (the clock stepped back) is 0, no duration, as zipkin2's builder makes
 * a negative one.
 */
uint64_t zv1_duration(uint64_t begin, uint64_t end, uint64_t one_us);

#endif
