/* SPDX-License-Identifier: MIT */
/*
 * FayQL aggregates: per-event update (what a probe does to its per-CPU
 * map value), merge (per-CPU partials on a host, host partials in a
 * cluster) and final value (at read).
 *
 * Every partial state is a flat array of little-endian 64-bit words (one
 * exception: distinct's HyperLogLog registers are bytes), so a BPF
 * program can keep it in a PERCPU_HASH / PERCPU_ARRAY value as is.
 * All-zero bytes are the empty state: a fresh map value needs no set-up.
 * Every merge is associative and commutative with the empty state as
 * identity, so the answer does not depend on the order in which CPUs and
 * hosts are merged, nor on the shape of the aggregation tree.
 *
 *   kind      state (words)            per event v          merge
 *   count     n                        n += 1               add
 *   sum       s                        s += v               add
 *   min/max   n, m                     m = n ? min(m,v) : v; n += 1
 *                                                           keep the smaller/larger m of the sides with n > 0; add n
 *   avg       s, n                     s += v, n += 1       add (final s / n, truncated)
 *   hist      b[64]                    b[aggr_hist_bucket(v)] += 1         add
 *   lhist     b[nb + 2]                b[aggr_lhist_bucket(d, v)] += 1     add
 *   quantile  b[AGGR_Q_BUCKETS]        b[aggr_quant_bucket(v)] += 1        add
 *   distinct  u8 r[AGGR_HLL_M]         h = aggr_hash64(v) (strings: aggr_hash_bytes);
 *                                      r[idx(h)] = max(r[idx(h)], rank(h))  byte-wise max
 *
 * Error bounds (tested in tests/unit/query/test_aggr.c):
 *  - quantile: log-linear buckets, AGGR_Q_SUB sub-buckets per power of
 *    two (DDSketch's linearly interpolated mapping).  Values below
 *    AGGR_Q_SUB are exact; above, the answer is the middle of the bucket
 *    holding the true rank-ceil(p*n) value, within AGGR_Q_REL_ERR
 *    (1/32 = 3.125%) of it.  Negative values count as 0.
 *  - distinct: HyperLogLog with 2^AGGR_HLL_P registers; standard error
 *    1.04/sqrt(1024) = 3.25%; small counts use linear counting.
 *
 * Integer arithmetic follows BPF: x / 0 = 0, x % 0 = x.
 */
#ifndef FAY_QUERY_AGGR_H
#define FAY_QUERY_AGGR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"

enum aggr_kind {
	AGGR_COUNT, AGGR_SUM, AGGR_MIN, AGGR_MAX, AGGR_AVG, AGGR_HIST,
	AGGR_LHIST, AGGR_QUANTILE, AGGR_DISTINCT,
	AGGR_NKINDS
};

#define AGGR_HIST_BUCKETS	64
/* quantile: 2^AGGR_Q_SUB_BITS linear sub-buckets per power of two */
#define AGGR_Q_SUB_BITS		4
#define AGGR_Q_SUB		(1 << AGGR_Q_SUB_BITS)
/* values 0..AGGR_Q_SUB-1 exact, then octaves 2^4 .. 2^62 */
#define AGGR_Q_BUCKETS		(AGGR_Q_SUB + (63 - AGGR_Q_SUB_BITS) * AGGR_Q_SUB)
#define AGGR_Q_REL_ERR		(1.0 / (2 * AGGR_Q_SUB))
/* distinct: HyperLogLog with 2^AGGR_HLL_P one-byte registers */
#define AGGR_HLL_P		10
#define AGGR_HLL_M		(1 << AGGR_HLL_P)
#define AGGR_HLL_STDERR		0.0325
/* lhist: at most this many buckets between lo and hi */
#define AGGR_LHIST_MAX		1000

struct aggr_desc {
	enum aggr_kind kind;
	int64_t lo, hi, step;	/* lhist */
	unsigned nbuckets;	/* lhist: (hi - lo) / step rounded up */
	double p;		/* quantile */
	size_t size;		/* bytes of partial state */
};

/* "count", "sum" ...; NULL when k is out of range. */
const char *aggr_name(enum aggr_kind k);
/* The kind called name, or -ENOENT. */
int aggr_lookup(const char *name);

/*
 * Fill d for kind k.  lhist needs lo < hi, step > 0 and at most
 * AGGR_LHIST_MAX buckets; quantile 0 < p < 1.  -EINVAL otherwise (with
 * d->size 0).
 */
int aggr_desc_init(struct aggr_desc *d, enum aggr_kind k, int64_t lo,
		   int64_t hi, int64_t step, double p);

/* Bucket functions: the probe computes exactly these. */
unsigned aggr_hist_bucket(int64_t v);	/* 0: v <= 0; i: 2^(i-1) <= v < 2^i */
unsigned aggr_lhist_bucket(const struct aggr_desc *d, int64_t v); /* 0 under, nb+1 over */
unsigned aggr_quant_bucket(int64_t v);
/* Lowest value and width of quantile bucket b. */
void aggr_quant_bounds(unsigned b, uint64_t *lo, uint64_t *width);
uint64_t aggr_hash64(uint64_t v);	/* murmur3 fmix64 */
/* Strings: h = 0; per 8-byte little-endian word w (zero padded): h = fmix64(h ^ w). */
uint64_t aggr_hash_bytes(const void *p, size_t len);
/* HLL register index (top AGGR_HLL_P bits) and rank (1 + leading zeros of the rest). */
unsigned aggr_hll_index(uint64_t h);
unsigned aggr_hll_rank(uint64_t h);

/* Per-event update of state (d->size bytes) with value v (reference
 * implementation of the probe's part).  distinct hashes v with
 * aggr_hash64(); aggr_update_hash() takes a hash already made. */
void aggr_update(const struct aggr_desc *d, void *state, int64_t v);
void aggr_update_hash(const struct aggr_desc *d, void *state, uint64_t h);

/* dst = merge(dst, src).  Associative, commutative, zero is identity. */
void aggr_merge(const struct aggr_desc *d, void *dst, const void *src);

/*
 * The final scalar value: count, sum, min, max, avg (s/n truncated, 0
 * when empty), quantile (see above; 0 when empty), distinct (estimate
 * rounded).  -EINVAL for hist and lhist (use the buckets).
 */
int aggr_final(const struct aggr_desc *d, const void *state, int64_t *out);
/* The HyperLogLog estimate, unrounded. */
double aggr_distinct_estimate(const void *state);

/* ---- partial states on the wire (aggr_wire.c) ---------------------------
 * Hosts and collectors exchange partial states, never events.  A state
 * travels with a descriptor (kind, AGGR_STATE_VERSION, parameters: lhist
 * bounds, sketch precision); a receiver merges only states whose
 * descriptor equals its own and refuses the rest by name. */
#define AGGR_STATE_VERSION	1

/* Append d's descriptor to w. */
void aggr_desc_encode(const struct aggr_desc *d, struct wbuf *w);
/* Read a descriptor from r and compare it with mine: 0 when the states
 * merge; -EPROTO (another kind, version or parameters) or -EBADMSG
 * (malformed) with a sentence in why. */
int aggr_desc_check(const struct aggr_desc *mine, struct rbuf *r, char *why,
		    size_t len);
/* Append the compact encoding of state (d->size bytes) to w. */
void aggr_state_encode(const struct aggr_desc *d, const void *state, struct wbuf *w);
/* Decode one state from r into state (d->size bytes, zeroed first);
 * indices and ranks are checked.  0 or -EBADMSG (r->why says where). */
int aggr_state_decode(const struct aggr_desc *d, struct rbuf *r, void *state);

#endif
