/* SPDX-License-Identifier: MIT */
/*
 * The span model of the store and the HTTP API: a Zipkin v2 span
 * (zipkin2.Span), plus the BlkKin partial record (one annotation of a span)
 * that the store merges into Zipkin spans.  No third-party types here:
 * the SQLite store, a later ClickHouse store, the JSON codec of the HTTP
 * API and the wire ingest all speak this.
 *
 * Strings are (pointer, length) views, not NUL-terminated; who owns the
 * bytes is said where a struct is filled (usually an arena, see below).
 */
#ifndef FAY_STORE_SPAN_H
#define FAY_STORE_SPAN_H

#include <stddef.h>
#include <stdint.h>

#include "common/spanrec.h"

struct zs_str {
	const char *p;
	uint32_t len;
};

#define ZS_STR(s) ((struct zs_str){ (s), (uint32_t)sizeof(s) - 1 })

/* A Zipkin endpoint.  Absent when no field is set (zs_ep_present()). */
struct zs_endpoint {
	struct zs_str service;   /* lower case; len 0 = absent */
	char ipv4[16];           /* dotted quad; "" = absent */
	char ipv6[46];           /* RFC 5952 text; "" = absent */
	uint16_t port;           /* 0 = absent */
};

struct zs_annotation {
	uint64_t ts_us;
	struct zs_str value;
};

struct zs_tag {
	struct zs_str key, value;
};

/*
 * One Zipkin v2 span.  Zero means absent for parent_id, timestamp_us and
 * duration_us (as in Zipkin, where 0 is "not set"); kind is enum
 * spanrec_kind.  annotations are sorted by (timestamp, value) without
 * duplicates and tags by key without duplicate keys once zspan_normalize()
 * ran (the store and the JSON writer rely on it).
 */
struct zspan {
	uint64_t trace_hi, trace_lo;   /* trace_hi 0: a 64-bit trace id */
	uint64_t id, parent_id;
	struct zs_str name;            /* lower case; len 0 = absent */
	uint8_t kind;
	uint8_t shared, debug;
	uint8_t error;                 /* has an "error" tag */
	uint64_t timestamp_us, duration_us;
	struct zs_endpoint local, remote;
	struct zs_annotation *annotations;
	uint32_t nannotations;
	struct zs_tag *tags;
	uint32_t ntags;
};

/*
 * A BlkKin partial record: one timestamp annotation (or one key-value) of
 * span (trace, id), recorded on its own with the endpoint of the process
 * that recorded it (ceph/blkin's blkin_record).  The store keeps them and
 * merges all parts of a span id into Zipkin spans (store_merge_parts()).
 */
struct zs_part {
	uint64_t trace_hi, trace_lo, id, parent_id;
	struct zs_str name;
	struct zs_endpoint local, remote;
	uint8_t debug;
	uint8_t is_tag;                /* 0: annotation (ts_us, key); 1: tag */
	uint64_t ts_us;
	struct zs_str key;             /* annotation value, or tag key */
	struct zs_str value;           /* tag value */
};

/* ---- arena: one bump allocator per batch / per query result ----------- */

struct zarena_chunk;
struct mem_budget;
struct zarena {
	struct zarena_chunk *head;
	size_t used, cap;              /* of head */
	/* optional: each chunk is taken from budget (common/budget.h) and
	 * given back by zarena_reset(); over is set when it refused one */
	struct mem_budget *budget;
	size_t charged;
	int over;
};

/* Zero-initialised struct zarena is ready to use (set .budget to charge
 * its chunks to a memory budget).  NULL with errno ENOMEM: out of memory,
 * or a chunk the budget refused (then a->over is 1). */
void *zarena_alloc(struct zarena *a, size_t size);
void *zarena_zalloc(struct zarena *a, size_t size);
/* Copy len bytes (lower-cased when lower) into the arena; NULL: ENOMEM. */
int zarena_str(struct zarena *a, struct zs_str *out, const char *p, size_t len,
	       int lower);
/*
 * Make room for element n of an arena array *v of *cap elements of size
 * el: when n == *cap, a new array twice as large (at least 16) is made in
 * the arena and the old elements copied (the old array stays in the arena
 * until reset).  Returns 0 or -ENOMEM.
 */
int zarena_grow(struct zarena *a, void **v, size_t n, size_t *cap, size_t el);
/* Free every chunk and give their charge back to the budget; the arena
 * is empty and reusable afterwards (with the same budget, over 0). */
void zarena_reset(struct zarena *a);

/* ---- helpers ------------------------------------------------------------ */

/*
 * A copy of s and of everything it points to (name, endpoints' services,
 * annotations, tags) in one malloc'ed block: free() it whole.  The copy's
 * strings point into the block.  NULL when out of memory.
 */
struct zspan *zspan_dup(const struct zspan *s);

static inline int zs_ep_present(const struct zs_endpoint *e)
{
	return e->service.len || e->ipv4[0] || e->ipv6[0] || e->port;
}

int zs_str_eq(struct zs_str a, struct zs_str b);
int zs_str_eqc(struct zs_str a, const char *c);

/*
 * Set e's address from ip text as zipkin2.Endpoint.parseIp(String) does:
 * a dotted quad goes to ipv4; an IPv4-mapped or -compatible address
 * written with dots (::ffff:1.2.3.4, ::1.2.3.4) to ipv4 as the quad; any
 * other IPv6 text to ipv6 in Zipkin's form (lower case, zeros compressed:
 * "::1" stays "::1").  Returns 0, or -EINVAL when the text is not an
 * address (e unchanged).
 */
int zs_ep_set_ip(struct zs_endpoint *e, const char *ip, size_t len);
/*
 * The same from 4 or 16 address bytes (zipkin2.Endpoint.parseIp(byte[]),
 * as the protobuf encoding carries them): an IPv4-compatible address
 * (12 zero bytes, but not ::1) goes to ipv4.  0 or -EINVAL (other length).
 */
int zs_ep_set_ip_bytes(struct zs_endpoint *e, const unsigned char *ip, size_t len);

/*
 * Sort annotations by (timestamp, value) and drop exact duplicates; sort
 * tags by key keeping the last value of a key; set error from the tags;
 * drop parent_id == id and shared on a CLIENT span (zipkin2.Span.build()).
 * Sorting happens in place (the arrays must be writable).
 */
void zspan_normalize(struct zspan *s);

/*
 * Convert a decoded span record into spans or parts, as the wire ingest
 * does: a whole record becomes one zspan (times in microseconds, at least
 * 1 us of duration; int tags in decimal; SPAN_F_ERROR without an "error"
 * tag adds error="true"; dropped items add the tag fay.dropped_items);
 * a SPAN_F_PARTIAL record becomes one zs_part per annotation or tag.
 * Strings are copied (lower-cased where Zipkin does) into the arena.
 * Returns the number of spans (1) or parts (>= 0) written to *span or
 * appended to *parts (capacity *cap, grown in the arena), or -ENOMEM.
 */
int zspan_from_rec(const struct spanrec *r, struct zarena *a, struct zspan *span);
int zparts_from_rec(const struct spanrec *r, struct zarena *a,
		    struct zs_part **parts, size_t *n, size_t *cap);

/*
 * Merge the partial records of one span id (all with the same trace and
 * id, in recording order) into Zipkin v2 spans with the rule of
 * zipkin2.v1.V1SpanConverter: cs/cr make a CLIENT span (timestamp cs,
 * duration cr - cs, 1 us when both fall in one microsecond, as for every
 * pair), sr/ss a SERVER span (shared when the same span id also
 * has cs; the loopback case, cs and sr from the same service, forks two
 * spans), ms/mr/ws/wr likewise PRODUCER/CONSUMER, any other annotation
 * stays an annotation, key-values become tags, each on the span of its
 * record's endpoint (one span per service name).  One deliberate
 * difference: a server half with no cs is not marked shared, because a
 * partial record never carries a span timestamp, so "no timestamp" (V1's
 * convention for shared) says nothing here.
 * A span that gets no timestamp from these rules but has annotations
 * (a BlkKin program's own events, "start" ... "end") gets Zipkin 1.x's:
 * timestamp = its first annotation, duration = last - first (absent when
 * 0).
 * Writes up to nparts + 2 spans to out (arena-allocated array) and returns
 * how many, or -ENOMEM.  Every span is normalized.  (span_v1.c)
 */
int zparts_merge(const struct zs_part *parts, size_t nparts, struct zarena *a,
		 struct zspan **out);

#endif
