// SPDX-License-Identifier: MIT
/*
 * Aggregates: merging per-CPU partials in any order or tree gives the
 * same state (byte for byte) as one state that saw every event; the
 * empty state is the identity; finals are right; quantile stays within
 * its stated relative error and distinct within its stated error on
 * known distributions.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "query/aggr.h"
#include "test.h"

#define NCPU	8

#define xorshift test_xorshift

static double uniform01(void)
{
	return (xorshift() >> 11) * (1.0 / 9007199254740992.0);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Feed vals to NCPU partials (round robin by a random CPU), then merge
 * them four ways and compare each with one state fed everything. */
static void check_merge_orders(const struct aggr_desc *d, const int64_t *vals,
			       size_t n, const char *what)
{
	size_t sz = d->size;
	unsigned char *cpu = calloc(NCPU, sz), *all = calloc(1, sz);
	unsigned char *seq = calloc(1, sz), *rev = calloc(1, sz);
	unsigned char *perm = calloc(1, sz), *tree = calloc(NCPU, sz);
	unsigned char *ident = calloc(1, sz), *zero = calloc(1, sz);
	int order[NCPU];

	for (size_t i = 0; i < n; i++) {
		aggr_update(d, cpu + (xorshift() % NCPU) * sz, vals[i]);
		aggr_update(d, all, vals[i]);
	}
	for (int c = 0; c < NCPU; c++) {
		aggr_merge(d, seq, cpu + c * sz);
		aggr_merge(d, rev, cpu + (NCPU - 1 - c) * sz);
		order[c] = c;
	}
	for (int c = NCPU - 1; c > 0; c--) {
		int j = xorshift() % (c + 1), t = order[c];

		order[c] = order[j];
		order[j] = t;
	}
	for (int c = 0; c < NCPU; c++)
		aggr_merge(d, perm, cpu + order[c] * sz);
	/* a binary tree: (0+1) (2+3) ... then pairs of pairs */
	memcpy(tree, cpu, NCPU * sz);
	for (int step = 1; step < NCPU; step *= 2)
		for (int c = 0; c + step < NCPU; c += 2 * step)
			aggr_merge(d, tree + c * sz, tree + (c + step) * sz);
	/* identity: zero merged into a state, and a state into zero */
	memcpy(ident, all, sz);
	aggr_merge(d, ident, zero);
	aggr_merge(d, zero, all);

	ok(!memcmp(seq, all, sz), "%s: CPUs merged in order = one state", what);
	ok(!memcmp(rev, all, sz), "%s: CPUs merged in reverse = one state", what);
	ok(!memcmp(perm, all, sz), "%s: CPUs merged shuffled = one state", what);
	ok(!memcmp(tree, all, sz), "%s: CPUs merged as a tree = one state", what);
	ok(!memcmp(ident, all, sz) && !memcmp(zero, all, sz),
	   "%s: the empty state is the identity", what);
	free(cpu); free(all); free(seq); free(rev); free(perm); free(tree);
	free(ident); free(zero);
}

static void test_merges(void)
{
	enum { N = 20000 };
	int64_t *v = malloc(N * sizeof(*v));
	struct aggr_desc d;

	for (int i = 0; i < N; i++)
		v[i] = (int64_t)(xorshift() % 2000000) - 1000;
	for (int k = 0; k < AGGR_NKINDS; k++) {
		int err = aggr_desc_init(&d, k, -100, 5000, 7, 0.9);

		is_int(err, 0, "%s: desc", aggr_name(k));
		check_merge_orders(&d, v, N, aggr_name(k));
	}
	free(v);
}

static void test_finals(void)
{
	int64_t vals[] = { 5, -3, 17, 0, 42, 8, -3, 1000 };
	size_t n = (sizeof(vals) / sizeof(vals[0]));
	struct aggr_desc d;
	unsigned char st[64];
	int64_t out;
	static const struct { enum aggr_kind k; int64_t want; } c[] = {
		{ AGGR_COUNT, 8 }, { AGGR_SUM, 1066 }, { AGGR_MIN, -3 },
		{ AGGR_MAX, 1000 }, { AGGR_AVG, 133 },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		aggr_desc_init(&d, c[i].k, 0, 0, 0, 0);
		memset(st, 0, sizeof(st));
		for (size_t j = 0; j < n; j++)
			aggr_update(&d, st, vals[j]);
		is_int(aggr_final(&d, st, &out), 0, "%s final ok", aggr_name(c[i].k));
		is_int(out, c[i].want, "%s of the values", aggr_name(c[i].k));
	}
	/* min and max of a state that saw only negative values, and empty */
	aggr_desc_init(&d, AGGR_MAX, 0, 0, 0, 0);
	memset(st, 0, sizeof(st));
	aggr_update(&d, st, -7);
	aggr_update(&d, st, -9);
	aggr_final(&d, st, &out);
	is_int(out, -7, "max of negatives is not the empty 0");
	memset(st, 0, sizeof(st));
	aggr_final(&d, st, &out);
	is_int(out, 0, "max of nothing is 0");
	aggr_desc_init(&d, AGGR_HIST, 0, 0, 0, 0);
	ok(aggr_final(&d, st, &out) < 0, "hist has no scalar final");
}

static void test_buckets(void)
{
	struct aggr_desc d;
	uint64_t lo, w;

	is_int(aggr_hist_bucket(0), 0, "hist: 0 in bucket 0");
	is_int(aggr_hist_bucket(-5), 0, "hist: negative in bucket 0");
	is_int(aggr_hist_bucket(1), 1, "hist: 1 in bucket 1");
	is_int(aggr_hist_bucket(2), 2, "hist: 2 in bucket 2");
	is_int(aggr_hist_bucket(3), 2, "hist: 3 in bucket 2");
	is_int(aggr_hist_bucket(4), 3, "hist: 4 in bucket 3");
	is_int(aggr_hist_bucket(INT64_MAX), 63, "hist: INT64_MAX in bucket 63");

	is_int(aggr_desc_init(&d, AGGR_LHIST, -10, 25, 10, 0), 0, "lhist -10..25 by 10");
	is_int(d.nbuckets, 4, "lhist: 4 buckets (last one partial)");
	is_int(d.size, 8 * 6, "lhist: under + 4 + over words");
	is_int(aggr_lhist_bucket(&d, -11), 0, "lhist: below lo");
	is_int(aggr_lhist_bucket(&d, -10), 1, "lhist: lo in bucket 1");
	is_int(aggr_lhist_bucket(&d, -1), 1, "lhist: lo + step - 1 in bucket 1");
	is_int(aggr_lhist_bucket(&d, 0), 2, "lhist: lo + step in bucket 2");
	is_int(aggr_lhist_bucket(&d, 24), 4, "lhist: hi - 1 in the last bucket");
	is_int(aggr_lhist_bucket(&d, 25), 5, "lhist: hi is over");
	is_int(aggr_lhist_bucket(&d, INT64_MIN), 0, "lhist: INT64_MIN is under");
	is_int(aggr_desc_init(&d, AGGR_LHIST, INT64_MIN, INT64_MAX, INT64_MAX, 0), 0,
	       "lhist over the whole range does not overflow");
	is_int(d.nbuckets, 3, "lhist: whole range by INT64_MAX is 3 buckets");
	ok(aggr_desc_init(&d, AGGR_LHIST, 5, 5, 1, 0) < 0, "lhist: lo == hi refused");
	ok(aggr_desc_init(&d, AGGR_LHIST, 0, 10, 0, 0) < 0, "lhist: step 0 refused");
	ok(aggr_desc_init(&d, AGGR_LHIST, 0, 1001, 1, 0) < 0, "lhist: 1001 buckets refused");
	ok(aggr_desc_init(&d, AGGR_QUANTILE, 0, 0, 0, 0) < 0, "quantile: p 0 refused");
	ok(aggr_desc_init(&d, AGGR_QUANTILE, 0, 0, 0, 1) < 0, "quantile: p 1 refused");
	ok(aggr_desc_init(&d, AGGR_QUANTILE, 0, 0, 0, NAN) < 0, "quantile: p NaN refused");

	/* every quantile bucket holds exactly its own range, no gaps */
	int bad = 0;
	uint64_t next = 0;

	for (unsigned b = 0; b < AGGR_Q_BUCKETS; b++) {
		aggr_quant_bounds(b, &lo, &w);
		if (lo != next || aggr_quant_bucket((int64_t)lo) != b ||
		    aggr_quant_bucket((int64_t)(lo + w - 1)) != b)
			bad++;
		next = lo + w;
	}
	is_int(bad, 0, "quantile buckets tile 0..2^63 without gaps");
	is_u64(next, 1ull << 63, "quantile buckets end at 2^63");
	is_int(aggr_quant_bucket(INT64_MAX), AGGR_Q_BUCKETS - 1, "INT64_MAX in the last bucket");
	is_int(aggr_quant_bucket(-1), 0, "negative counts as 0");

	/* any value: the bucket's middle is within the stated error */
	double worst = 0;

	for (int i = 0; i < 200000; i++) {
		int64_t v = (int64_t)(xorshift() >> (xorshift() % 63 + 1));
		double mid;

		aggr_quant_bounds(aggr_quant_bucket(v), &lo, &w);
		mid = (double)(lo + w / 2);
		if (v > 0 && fabs(mid - (double)v) / (double)v > worst)
			worst = fabs(mid - (double)v) / (double)v;
	}
	ok(worst <= AGGR_Q_REL_ERR, "bucket middle within %.4f of any value (worst %.5f)",
	   AGGR_Q_REL_ERR, worst);
}

/* Exact nearest-rank quantile of sorted values. */
static int64_t exact_quantile(const int64_t *sorted, size_t n, double p)
{
	double r = ceil(p * (double)n - 1e-9);
	size_t rank = r < 1 ? 1 : (size_t)r;

	return sorted[rank - 1];
}

static void quantile_case(const char *name, int64_t *v, size_t n)
{
	static const double ps[] = { 0.01, 0.25, 0.5, 0.9, 0.99, 0.999 };
	struct aggr_desc d;
	void *cpu[4];
	void *merged;
	double worst = 0;

	aggr_desc_init(&d, AGGR_QUANTILE, 0, 0, 0, 0.5);
	merged = calloc(1, d.size);
	for (int c = 0; c < 4; c++)
		cpu[c] = calloc(1, d.size);
	for (size_t i = 0; i < n; i++)
		aggr_update(&d, cpu[i % 4], v[i]);
	for (int c = 0; c < 4; c++)
		aggr_merge(&d, merged, cpu[c]);
	qsort(v, n, sizeof(*v), cmp_i64);
	for (size_t i = 0; i < (sizeof(ps) / sizeof(ps[0])); i++) {
		int64_t got, want;
		double err;

		d.p = ps[i];
		aggr_final(&d, merged, &got);
		want = exact_quantile(v, n, ps[i]);
		err = want ? fabs((double)got - (double)want) / (double)want :
			     (double)(got != 0);
		if (err > worst)
			worst = err;
	}
	ok(worst <= AGGR_Q_REL_ERR, "quantile %s: p1..p99.9 within %.3f%% (worst %.4f%%)",
	   name, 100 * AGGR_Q_REL_ERR, 100 * worst);
	for (int c = 0; c < 4; c++)
		free(cpu[c]);
	free(merged);
}

static void test_quantile(void)
{
	enum { N = 100000 };
	int64_t *v = malloc(N * sizeof(*v));

	for (int i = 0; i < N; i++)
		v[i] = 1 + (int64_t)(uniform01() * 1e6);
	quantile_case("uniform 1..1e6", v, N);
	for (int i = 0; i < N; i++)
		v[i] = (int64_t)(-log(1 - uniform01()) * 1e5);
	quantile_case("exponential mean 1e5", v, N);
	for (int i = 0; i < N; i++) {
		/* Box-Muller normal, then exp: lognormal latencies (ns) */
		double z = sqrt(-2 * log(1 - uniform01())) * cos(2 * M_PI * uniform01());

		v[i] = (int64_t)exp(11 + 1.5 * z);
	}
	quantile_case("lognormal", v, N);
	for (int i = 0; i < N; i++)
		v[i] = (int64_t)(xorshift() % 16);
	quantile_case("small integers (exact)", v, N);
	for (int i = 0; i < N; i++)
		v[i] = 1ll << (xorshift() % 62);
	quantile_case("powers of two", v, N);
	for (int i = 0; i < 5; i++)
		v[i] = 123456789;
	quantile_case("five equal values", v, 5);
	free(v);
}

static double distinct_of(uint64_t seed, size_t n, size_t repeat)
{
	struct aggr_desc d;
	uint8_t cpu[4][AGGR_HLL_M], merged[AGGR_HLL_M] = { 0 };

	aggr_desc_init(&d, AGGR_DISTINCT, 0, 0, 0, 0);
	memset(cpu, 0, sizeof(cpu));
	for (size_t r = 0; r < repeat; r++)
		for (size_t i = 0; i < n; i++)	/* values seed*2^32 + i */
			aggr_update(&d, cpu[(i + r) % 4], (int64_t)((seed << 32) + i));
	for (int c = 0; c < 4; c++)
		aggr_merge(&d, merged, cpu[c]);
	return aggr_distinct_estimate(merged);
}

static void test_distinct(void)
{
	static const size_t ns[] = { 1, 10, 100, 1000, 10000, 100000, 1000000 };
	struct aggr_desc d;
	uint8_t st[AGGR_HLL_M] = { 0 };
	int64_t out;

	aggr_desc_init(&d, AGGR_DISTINCT, 0, 0, 0, 0);
	aggr_final(&d, st, &out);
	is_int(out, 0, "distinct of nothing is 0");
	for (size_t i = 0; i < (sizeof(ns) / sizeof(ns[0])); i++) {
		double e = distinct_of(7 + i, ns[i], ns[i] <= 10000 ? 3 : 1);
		double rel = fabs(e - (double)ns[i]) / (double)ns[i];

		/* three standard errors: a single run fails by chance < 0.3% */
		ok(rel <= 3 * AGGR_HLL_STDERR, "distinct %zu (each seen %s): estimate %.0f, error %.2f%% <= %.2f%%",
		   ns[i], ns[i] <= 10000 ? "3 times" : "once", e, 100 * rel,
		   300 * AGGR_HLL_STDERR);
	}
	/* the stated standard error holds over many runs */
	double sq = 0;
	int runs = 40;

	for (int r = 0; r < runs; r++) {
		double e = distinct_of(1000 + r, 50000, 1);

		sq += (e / 50000 - 1) * (e / 50000 - 1);
	}
	ok(sqrt(sq / runs) <= 1.25 * AGGR_HLL_STDERR,
	   "distinct: RMS error over %d runs %.2f%% (stated %.2f%%)", runs,
	   100 * sqrt(sq / runs), 100 * AGGR_HLL_STDERR);

	/* strings hash by bytes, zero padded to words */
	ok(aggr_hash_bytes("bash\0\0\0\0", 8) == aggr_hash_bytes("bash", 4),
	   "string hash ignores NUL padding within a word");
	ok(aggr_hash_bytes("bash", 4) != aggr_hash_bytes("bask", 4),
	   "string hash tells strings apart");
	ok(aggr_hll_rank(0) == 64 - AGGR_HLL_P + 1, "rank of an all-zero hash is capped");
	is_int(aggr_hll_index(~0ull), AGGR_HLL_M - 1, "index is the top bits");
}

int main(void)
{
	test_merges();
	test_finals();
	test_buckets();
	test_quantile();
	test_distinct();
	return test_done();
}
