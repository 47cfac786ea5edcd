// SPDX-License-Identifier: MIT
/*
 * Aggregate partial states: update, merge, final.  See aggr.h for the
 * layouts and error bounds; docs/QUERY.md explains them to users.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "query/aggr.h"

static const char *const names[AGGR_NKINDS] = {
	[AGGR_COUNT] = "count", [AGGR_SUM] = "sum", [AGGR_MIN] = "min",
	[AGGR_MAX] = "max", [AGGR_AVG] = "avg", [AGGR_HIST] = "hist",
	[AGGR_LHIST] = "lhist", [AGGR_QUANTILE] = "quantile",
	[AGGR_DISTINCT] = "distinct",
};

const char *aggr_name(enum aggr_kind k)
{
	return (unsigned)k < AGGR_NKINDS ? names[k] : NULL;
}

int aggr_lookup(const char *name)
{
	for (int k = 0; k < AGGR_NKINDS; k++)
		if (!strcmp(names[k], name))
			return k;
	return -ENOENT;
}

int aggr_desc_init(struct aggr_desc *d, enum aggr_kind k, int64_t lo,
		   int64_t hi, int64_t step, double p)
{
	memset(d, 0, sizeof(*d));
	d->kind = k;
	switch (k) {
	case AGGR_COUNT:
	case AGGR_SUM:
		d->size = 8;
		break;
	case AGGR_MIN:
	case AGGR_MAX:
	case AGGR_AVG:
		d->size = 16;
		break;
	case AGGR_HIST:
		d->size = 8 * AGGR_HIST_BUCKETS;
		break;
	case AGGR_LHIST: {
		/* in unsigned 64-bit so hi - lo cannot overflow */
		uint64_t span = (uint64_t)hi - (uint64_t)lo, nb;

		if (lo >= hi || step <= 0)
			return -EINVAL;
		nb = span / (uint64_t)step + (span % (uint64_t)step != 0);
		if (nb > AGGR_LHIST_MAX)
			return -EINVAL;
		d->lo = lo;
		d->hi = hi;
		d->step = step;
		d->nbuckets = (unsigned)nb;
		d->size = 8 * (d->nbuckets + 2);
		break;
	}
	case AGGR_QUANTILE:
		if (!(p > 0.0 && p < 1.0))
			return -EINVAL;
		d->p = p;
		d->size = 8 * AGGR_Q_BUCKETS;
		break;
	case AGGR_DISTINCT:
		d->size = AGGR_HLL_M;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

static unsigned msb(uint64_t v)	/* v != 0 */
{
	return 63 - __builtin_clzll(v);
}

unsigned aggr_hist_bucket(int64_t v)
{
	return v <= 0 ? 0 : msb((uint64_t)v) + 1;
}

unsigned aggr_lhist_bucket(const struct aggr_desc *d, int64_t v)
{
	if (v < d->lo)
		return 0;
	if (v >= d->hi)
		return d->nbuckets + 1;
	return (unsigned)(((uint64_t)v - (uint64_t)d->lo) / (uint64_t)d->step) + 1;
}

unsigned aggr_quant_bucket(int64_t v)
{
	unsigned e;

	if (v < AGGR_Q_SUB)
		return v < 0 ? 0 : (unsigned)v;
	e = msb((uint64_t)v);
	return AGGR_Q_SUB + (e - AGGR_Q_SUB_BITS) * AGGR_Q_SUB +
	       (unsigned)(((uint64_t)v >> (e - AGGR_Q_SUB_BITS)) & (AGGR_Q_SUB - 1));
}

void aggr_quant_bounds(unsigned b, uint64_t *lo, uint64_t *width)
{
	unsigned e, sub;

	if (b < AGGR_Q_SUB) {
		*lo = b;
		*width = 1;
		return;
	}
	e = (b - AGGR_Q_SUB) / AGGR_Q_SUB + AGGR_Q_SUB_BITS;
	sub = (b - AGGR_Q_SUB) % AGGR_Q_SUB;
	*width = 1ull << (e - AGGR_Q_SUB_BITS);
	*lo = (1ull << e) + sub * *width;
}

uint64_t aggr_hash64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

uint64_t aggr_hash_bytes(const void *p, size_t len)
{
	const unsigned char *s = p;
	uint64_t h = 0;

	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = 0;

		for (size_t j = 0; j < 8 && i + j < len; j++)
			w |= (uint64_t)s[i + j] << (8 * j);
		h = aggr_hash64(h ^ w);
	}
	return h;
}

unsigned aggr_hll_index(uint64_t h)
{
	return (unsigned)(h >> (64 - AGGR_HLL_P));
}

unsigned aggr_hll_rank(uint64_t h)
{
	uint64_t rest = h << AGGR_HLL_P;

	return rest ? (unsigned)__builtin_clzll(rest) + 1 : 64 - AGGR_HLL_P + 1;
}

void aggr_update_hash(const struct aggr_desc *d, void *state, uint64_t h)
{
	uint8_t *r = state;
	unsigned i = aggr_hll_index(h), rank = aggr_hll_rank(h);

	if (d->kind == AGGR_DISTINCT && r[i] < rank)
		r[i] = (uint8_t)rank;
}

void aggr_update(const struct aggr_desc *d, void *state, int64_t v)
{
	int64_t *w = state;
	uint64_t *u = state;

	switch (d->kind) {
	case AGGR_COUNT:
		u[0]++;
		break;
	case AGGR_SUM:
		u[0] += (uint64_t)v;	/* wraps like the probe's 64-bit add */
		break;
	case AGGR_MIN:
		if (!u[0] || v < w[1])
			w[1] = v;
		u[0]++;
		break;
	case AGGR_MAX:
		if (!u[0] || v > w[1])
			w[1] = v;
		u[0]++;
		break;
	case AGGR_AVG:
		u[0] += (uint64_t)v;
		u[1]++;
		break;
	case AGGR_HIST:
		u[aggr_hist_bucket(v)]++;
		break;
	case AGGR_LHIST:
		u[aggr_lhist_bucket(d, v)]++;
		break;
	case AGGR_QUANTILE:
		u[aggr_quant_bucket(v)]++;
		break;
	case AGGR_DISTINCT:
		aggr_update_hash(d, state, aggr_hash64((uint64_t)v));
		break;
	default:
		break;
	}
}

static void add_words(uint64_t *dst, const uint64_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i];
}

void aggr_merge(const struct aggr_desc *d, void *dst, const void *src)
{
	uint64_t *ud = dst;
	const uint64_t *us = src;
	int64_t *wd = dst;
	const int64_t *ws = src;

	switch (d->kind) {
	case AGGR_MIN:
	case AGGR_MAX:
		if (us[0] && (!ud[0] ||
			      (d->kind == AGGR_MIN ? ws[1] < wd[1] : ws[1] > wd[1])))
			wd[1] = ws[1];
		ud[0] += us[0];
		break;
	case AGGR_DISTINCT: {
		uint8_t *rd = dst;
		const uint8_t *rs = src;

		for (size_t i = 0; i < AGGR_HLL_M; i++)
			if (rs[i] > rd[i])
				rd[i] = rs[i];
		break;
	}
	default:
		/* count, sum, avg and every bucket array: word-wise add */
		add_words(ud, us, d->size / 8);
		break;
	}
}

double aggr_distinct_estimate(const void *state)
{
	const uint8_t *r = state;
	const double m = AGGR_HLL_M;
	double sum = 0, alpha = 0.7213 / (1 + 1.079 / m), e;
	unsigned zeros = 0;

	for (unsigned i = 0; i < AGGR_HLL_M; i++) {
		sum += ldexp(1.0, -(int)r[i]);
		zeros += !r[i];
	}
	e = alpha * m * m / sum;
	/* Small range: linear counting is far better while registers are
	 * still empty (Flajolet et al. 2007; Heule et al. 2013). */
	if (e <= 2.5 * m && zeros)
		e = m * log(m / zeros);
	return e;
}

static int64_t quantile_final(const struct aggr_desc *d, const uint64_t *b)
{
	uint64_t n = 0, rank, seen = 0, lo, width;
	double r;

	for (unsigned i = 0; i < AGGR_Q_BUCKETS; i++)
		n += b[i];
	if (!n)
		return 0;
	/* nearest rank: the smallest value with at least ceil(p n) values
	 * at or below it; the tiny slack absorbs p's binary rounding */
	r = ceil(d->p * (double)n - 1e-9);
	rank = r < 1 ? 1 : (uint64_t)r;
	for (unsigned i = 0; i < AGGR_Q_BUCKETS; i++) {
		seen += b[i];
		if (seen >= rank) {
			aggr_quant_bounds(i, &lo, &width);
			return (int64_t)(lo + width / 2);
		}
	}
	return 0;	/* not reached */
}

int aggr_final(const struct aggr_desc *d, const void *state, int64_t *out)
{
	const int64_t *w = state;
	const uint64_t *u = state;

	switch (d->kind) {
	case AGGR_COUNT:
	case AGGR_SUM:
		*out = w[0];
		return 0;
	case AGGR_MIN:
	case AGGR_MAX:
		*out = u[0] ? w[1] : 0;
		return 0;
	case AGGR_AVG:
		*out = u[1] ? w[0] / (int64_t)u[1] : 0;
		return 0;
	case AGGR_QUANTILE:
		*out = quantile_final(d, u);
		return 0;
	case AGGR_DISTINCT:
		*out = (int64_t)llround(aggr_distinct_estimate(state));
		return 0;
	default:
		return -EINVAL;
	}
}
