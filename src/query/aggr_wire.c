// SPDX-License-Identifier: MIT
/*
 * Partial aggregate states on the wire (aggr.h, "serialized partial
 * states"): a descriptor that says what a state is (kind, format version,
 * parameters) and a compact encoding of the state itself.
 *
 * Descriptor:  u8 kind, u8 AGGR_STATE_VERSION, then
 *   hist      uvar buckets (AGGR_HIST_BUCKETS)
 *   lhist     svar lo, svar hi, svar step
 *   quantile  u8 sub-bucket bits (AGGR_Q_SUB_BITS), uvar buckets
 *   distinct  u8 HyperLogLog precision (AGGR_HLL_P)
 *   others    nothing
 * A receiver merges a state only when the descriptor equals its own for
 * that aggregate (quantile's p is not part of it: it applies at the final
 * value, so p50 and p99 of one expression merge the same sketch).
 *
 * State (all varints, so small counts take one byte):
 *   count            uvar n
 *   sum              svar s
 *   min, max         uvar n, then svar m when n > 0
 *   avg              svar s, uvar n
 *   bucket arrays    uvar k (non-zero buckets), then k x (uvar gap from
 *                    the previous non-zero bucket + 1, uvar count)
 *   distinct         u8 0 then uvar k, k x (uvar gap, u8 rank) (sparse),
 *                    or u8 1 then AGGR_HLL_M rank bytes (dense), the
 *                    smaller of the two
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "query/aggr.h"

void aggr_desc_encode(const struct aggr_desc *d, struct wbuf *w)
{
	wbuf_u8(w, (uint8_t)d->kind);
	wbuf_u8(w, AGGR_STATE_VERSION);
	switch (d->kind) {
	case AGGR_HIST:
		wbuf_uvar(w, AGGR_HIST_BUCKETS);
		break;
	case AGGR_LHIST:
		wbuf_svar(w, d->lo);
		wbuf_svar(w, d->hi);
		wbuf_svar(w, d->step);
		break;
	case AGGR_QUANTILE:
		wbuf_u8(w, AGGR_Q_SUB_BITS);
		wbuf_uvar(w, AGGR_Q_BUCKETS);
		break;
	case AGGR_DISTINCT:
		wbuf_u8(w, AGGR_HLL_P);
		break;
	default:
		break;
	}
}

int aggr_desc_check(const struct aggr_desc *mine, struct rbuf *r, char *why, size_t len)
{
	unsigned kind = rbuf_u8(r, "aggregate kind");
	unsigned ver = rbuf_u8(r, "aggregate state version");
	const char *name = aggr_name(mine->kind);

	if (r->err)
		goto bad;
	if (kind != (unsigned)mine->kind) {
		snprintf(why, len, "a %s state where this query has %s",
			 aggr_name(kind) ? aggr_name(kind) : "unknown", name);
		return -EPROTO;
	}
	if (ver != AGGR_STATE_VERSION) {
		snprintf(why, len, "%s state format version %u; this build merges version %u",
			 name, ver, AGGR_STATE_VERSION);
		return -EPROTO;
	}
	switch (mine->kind) {
	case AGGR_HIST: {
		uint64_t nb = rbuf_uvar(r, "hist buckets");

		if (!r->err && nb != AGGR_HIST_BUCKETS) {
			snprintf(why, len, "hist with %llu buckets; this build has %u",
				 (unsigned long long)nb, AGGR_HIST_BUCKETS);
			return -EPROTO;
		}
		break;
	}
	case AGGR_LHIST: {
		int64_t lo = rbuf_svar(r, "lhist lo"), hi = rbuf_svar(r, "lhist hi"),
			step = rbuf_svar(r, "lhist step");

		if (!r->err && (lo != mine->lo || hi != mine->hi || step != mine->step)) {
			snprintf(why, len, "lhist(%lld, %lld, %lld) where this query has lhist(%lld, %lld, %lld)",
				 (long long)lo, (long long)hi, (long long)step,
				 (long long)mine->lo, (long long)mine->hi, (long long)mine->step);
			return -EPROTO;
		}
		break;
	}
	case AGGR_QUANTILE: {
		unsigned bits = rbuf_u8(r, "quantile precision");
		uint64_t nb = rbuf_uvar(r, "quantile buckets");

		if (!r->err && (bits != AGGR_Q_SUB_BITS || nb != AGGR_Q_BUCKETS)) {
			snprintf(why, len, "quantile sketch with %u sub-bucket bits and %llu buckets; this build has %u and %u",
				 bits, (unsigned long long)nb, AGGR_Q_SUB_BITS, AGGR_Q_BUCKETS);
			return -EPROTO;
		}
		break;
	}
	case AGGR_DISTINCT: {
		unsigned pr = rbuf_u8(r, "distinct precision");

		if (!r->err && pr != AGGR_HLL_P) {
			snprintf(why, len, "distinct sketch of precision %u (2^%u registers); this build has %u",
				 pr, pr, AGGR_HLL_P);
			return -EPROTO;
		}
		break;
	}
	default:
		break;
	}
	if (!r->err)
		return 0;
bad:
	snprintf(why, len, "%s", r->why);
	return -EBADMSG;
}

static void put_buckets(struct wbuf *w, const uint64_t *b, size_t n)
{
	size_t k = 0, prev = 0;

	for (size_t i = 0; i < n; i++)
		k += b[i] != 0;
	wbuf_uvar(w, k);
	for (size_t i = 0; i < n; i++) {
		if (!b[i])
			continue;
		wbuf_uvar(w, i + 1 - prev);
		wbuf_uvar(w, b[i]);
		prev = i + 1;
	}
}

/* Walk "uvar k, k x (uvar gap, item)" over n slots: at(ctx, slot) reads
 * the item of each.  Gaps must be >= 1 and stay inside the n slots. */
static void get_sparse(struct rbuf *r, size_t n, const char *what,
		       void (*at)(struct rbuf *r, void *ctx, size_t slot), void *ctx)
{
	uint64_t k = rbuf_uvar_max(r, n, what);
	size_t pos = 0;

	for (uint64_t j = 0; j < k && !r->err; j++) {
		uint64_t gap = rbuf_uvar_max(r, n, what);

		if (r->err)
			return;
		if (!gap || gap > n - pos) {
			rbuf_fail(r, what);
			return;
		}
		pos += gap;
		at(r, ctx, pos - 1);
	}
}

static void bucket_at(struct rbuf *r, void *ctx, size_t slot)
{
	((uint64_t *)ctx)[slot] = rbuf_uvar(r, "bucket count");
}

static void register_at(struct rbuf *r, void *ctx, size_t slot)
{
	uint8_t *reg = ctx;

	reg[slot] = rbuf_u8(r, "distinct register");
	if (reg[slot] > 64 - AGGR_HLL_P + 1)
		rbuf_fail(r, "distinct register rank");
}

void aggr_state_encode(const struct aggr_desc *d, const void *state, struct wbuf *w)
{
	const uint64_t *u = state;
	const int64_t *s = state;

	switch (d->kind) {
	case AGGR_COUNT:
		wbuf_uvar(w, u[0]);
		break;
	case AGGR_SUM:
		wbuf_svar(w, s[0]);
		break;
	case AGGR_MIN:
	case AGGR_MAX:
		wbuf_uvar(w, u[0]);
		if (u[0])
			wbuf_svar(w, s[1]);
		break;
	case AGGR_AVG:
		wbuf_svar(w, s[0]);
		wbuf_uvar(w, u[1]);
		break;
	case AGGR_HIST:
	case AGGR_LHIST:
	case AGGR_QUANTILE:
		put_buckets(w, u, d->size / 8);
		break;
	case AGGR_DISTINCT: {
		const uint8_t *reg = state;
		size_t k = 0, prev = 0;

		for (size_t i = 0; i < AGGR_HLL_M; i++)
			k += reg[i] != 0;
		if (k * 3 + 2 >= AGGR_HLL_M) {
			wbuf_u8(w, 1);
			wbuf_put(w, reg, AGGR_HLL_M);
			break;
		}
		wbuf_u8(w, 0);
		wbuf_uvar(w, k);
		for (size_t i = 0; i < AGGR_HLL_M; i++) {
			if (!reg[i])
				continue;
			wbuf_uvar(w, i + 1 - prev);
			wbuf_u8(w, reg[i]);
			prev = i + 1;
		}
		break;
	}
	default:
		break;
	}
}

int aggr_state_decode(const struct aggr_desc *d, struct rbuf *r, void *state)
{
	uint64_t *u = state;
	int64_t *s = state;

	memset(state, 0, d->size);
	switch (d->kind) {
	case AGGR_COUNT:
		u[0] = rbuf_uvar(r, "count");
		break;
	case AGGR_SUM:
		s[0] = rbuf_svar(r, "sum");
		break;
	case AGGR_MIN:
	case AGGR_MAX:
		u[0] = rbuf_uvar(r, "min/max count");
		if (u[0])
			s[1] = rbuf_svar(r, "min/max value");
		break;
	case AGGR_AVG:
		s[0] = rbuf_svar(r, "avg sum");
		u[1] = rbuf_uvar(r, "avg count");
		break;
	case AGGR_HIST:
	case AGGR_LHIST:
	case AGGR_QUANTILE:
		get_sparse(r, d->size / 8, "bucket index", bucket_at, u);
		break;
	case AGGR_DISTINCT: {
		uint8_t *reg = state;
		unsigned mode = rbuf_u8(r, "distinct encoding");

		if (mode == 1) {
			const void *p = rbuf_get(r, AGGR_HLL_M, "distinct registers");

			if (p)
				memcpy(reg, p, AGGR_HLL_M);
			break;
		}
		if (mode != 0) {
			r->off--;
			rbuf_fail(r, "distinct encoding");
			break;
		}
		get_sparse(r, AGGR_HLL_M, "distinct register index", register_at, reg);
		break;
	}
	default:
		rbuf_fail(r, "aggregate kind");
		break;
	}
	return r->err;
}
