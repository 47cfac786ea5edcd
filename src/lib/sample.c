// SPDX-License-Identifier: MIT
/*
 * libfay: the sampling decision made at each root span.
 *
 * Fixed mode, 1 in N: an independent Bernoulli trial per root, from the
 * thread's own generator (lib_rand(): no syscall, no shared write),
 * sampled when r < UINT64_MAX / N.  For N >= GAP_MIN_N the trials are
 * made as gaps instead: the number of unsampled roots before the next
 * sampled one is drawn once, from the geometric law a run of such trials
 * follows (P(gap = k) = (1 - p)^k p), so the sampled roots are the same
 * in law.  The roots of a gap pass in fay_span_root() with a decrement
 * of the thread's skip budget (lib_root_skip()), at most
 * LIB_UNSAMPLED_FLUSH at a time so that spans_unsampled reaches the
 * header as often as before; sampling all, rate mode and FAY_RECORD=all
 * give no budget (every root comes here).  The budget and the generation
 * are read (and the budget spent) by the inline fay_span_root() of
 * include/fay/trace.h too.  A change of sampling bumps fay_fast_gen,
 * which voids every thread's budget.
 *
 * Rate mode, about R traces a second: a token bucket kept as one word, the
 * "theoretical arrival time" of GCRA: a root is sampled when tat <= now +
 * tau, which then moves tat on by 1/R seconds.  tau lets a burst of
 * max(1, R/10) through after a quiet spell.  A refused root only reads the
 * word (no cache line bouncing between threads); the clock is the coarse
 * monotonic one (a few ns, a tick's resolution, right on average).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rand.h"
#include "lib/libfay.h"

static uint64_t coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int lib_sample_rate(void)
{
	uint64_t now = coarse_ns(), tat = READ_ONCE(lib.rate_tat), next;
	uint64_t iv = READ_ONCE(lib.rate_interval_ns);

	if (!iv)
		return 0;
	for (;;) {
		if (tat > now + READ_ONCE(lib.rate_tau_ns))
			return 0;
		next = (tat > now ? tat : now) + iv;
		if (atomic_cas(&lib.rate_tat, &tat, next))
			return 1;
	}
}

/* Geometric gaps for 1 in N from this N on (below, a sampled root is
 * frequent and the trial per root is cheaper than a drawn gap). */
#define GAP_MIN_N 64u

/* -ln(1 - p) for 0 < p <= 1/GAP_MIN_N: its series (the 12th term is
 * below 2^-70 of the first). */
static double neg_log1m(double p)
{
	double sum = 0, pk = p;

	for (int k = 1; k <= 12; k++, pk *= p)
		sum += pk / k;
	return sum;
}

/* -ln(u) for 0 < u <= 1 without libm: u = m 2^e with m in [sqrt(1/2),
 * sqrt(2)), ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172 (ten
 * terms: error below 1e-16). */
static double neg_log(double u)
{
	uint64_t b;
	double m, s, s2, sum = 0, sk;
	int e;

	memcpy(&b, &u, 8);
	e = (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & ~(UINT64_C(0x7ff) << 52)) | UINT64_C(1023) << 52;
	memcpy(&m, &b, 8);
	if (m > 1.4142135623730951) {
		m /= 2;
		e++;
	}
	s = (m - 1) / (m + 1);
	s2 = s * s;
	sk = s;
	for (int k = 1; k <= 19; k += 2, sk *= s2)
		sum += sk / k;
	return -(e * 0.6931471805599453 + 2 * sum);
}

/* Unsampled roots before the next sampled one, each root sampled with
 * probability th / 2^64 (th < 2^64 / GAP_MIN_N); UINT64_MAX: never. */
static uint64_t draw_gap(struct lib_tls *t, uint64_t th)
{
	double u, g;

	if (!th)
		return UINT64_MAX;
	/* u uniform in (0, 1], 53 bits */
	u = (double)((lib_rand(t) >> 11) + 1) * 0x1p-53;
	g = neg_log(u) / neg_log1m((double)th * 0x1p-64);
	return g >= 0x1p63 ? UINT64_MAX : (uint64_t)g;
}

int lib_root_slow(struct lib_tls *t)
{
	struct fay_fast_tls *f = lib_fast();
	uint32_t gen = smp_load_acquire(&fay_fast_gen);
	uint64_t th = READ_ONCE(lib.sample_thresh), b;
	int sampled;

	/* the roots the budget passed are unsampled roots */
	t->unsampled += t->skip_set - lib_skip(f);
	lib_set_skip(f, 0);
	t->skip_set = 0;
	if (th == UINT64_MAX) {
		sampled = 1;
	} else if (th == LIB_THRESH_RATE) {
		sampled = lib_sample_rate();
	} else if (th >= UINT64_MAX / GAP_MIN_N) {
		sampled = lib_rand(t) < th;
	} else {
		if (f->gen != gen)
			t->gap = draw_gap(t, th);
		sampled = !t->gap;
		if (sampled)
			t->gap = draw_gap(t, th);
		else if (t->gap != UINT64_MAX)
			t->gap--;
		if (!READ_ONCE(lib.record_all)) {
			b = t->gap < LIB_UNSAMPLED_FLUSH ? t->gap : LIB_UNSAMPLED_FLUSH;
			if (t->gap != UINT64_MAX)
				t->gap -= b;
			if (b)
				lib_nonrec_prepare();
			t->skip_set = (uint32_t)b;
			lib_set_skip(f, (uint32_t)b);
		}
	}
	f->gen = gen;
	if (!sampled && unlikely(++t->unsampled >= LIB_UNSAMPLED_FLUSH))
		lib_count_unsampled_slow();
	return sampled;
}

void lib_sample_changed(void)
{
	if (!__atomic_add_fetch(&fay_fast_gen, 1, __ATOMIC_RELEASE))
		__atomic_add_fetch(&fay_fast_gen, 1, __ATOMIC_RELEASE);
}

uint64_t lib_rng_seed(void)
{
	return rand_u64();
}

static void publish_one_in(uint32_t n)
{
	struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);

	if (h)
		WRITE_ONCE(h->sample_one_in, n);
}

static void set_one_in(unsigned n)
{
	WRITE_ONCE(lib.rate_mode, 0);
	/* r < UINT64_MAX / n: probability 1/n to within 2^-32 */
	WRITE_ONCE(lib.sample_thresh, n == 0 ? 0 : n == 1 ? UINT64_MAX : UINT64_MAX / n);
	publish_one_in(n);
	lib_sample_changed();
}

static void set_rate(double r)
{
	uint64_t iv, burst;

	if (!(r > 0)) {          /* 0, negative, NaN: nothing */
		set_one_in(0);
		return;
	}
	if (r >= 1e9) {          /* faster than the clock: everything */
		set_one_in(1);
		return;
	}
	iv = (uint64_t)(1e9 / r);
	burst = r >= 10 ? (uint64_t)(r / 10) : 1;
	WRITE_ONCE(lib.rate_interval_ns, iv);
	WRITE_ONCE(lib.rate_tau_ns, (burst - 1) * iv);
	WRITE_ONCE(lib.rate_tat, 0);
	WRITE_ONCE(lib.rate_mode, 1);
	smp_store_release(&lib.sample_thresh, LIB_THRESH_RATE);
	publish_one_in(0);
	lib_sample_changed();
}

/*
 * Apply a FAY_SAMPLE value: "N" (1 in N, 0 = none) or "rate:R" (R >= 0
 * traces a second).  Returns 0 or -EINVAL (nothing changed).
 */
int lib_parse_sample(const char *s)
{
	unsigned long long n;
	char *end;
	double r;

	if (!strncmp(s, "rate:", 5)) {
		s += 5;
		if (!*s || *s == '-' || *s == '+')
			return -EINVAL;
		r = strtod(s, &end);
		if (*end || !isfinite(r))
			return -EINVAL;
		set_rate(r);
		return 0;
	}
	if (!strcmp(s, "0")) {
		set_one_in(0);
		return 0;
	}
	if (lib_parse_uint(s, UINT32_MAX, &n))
		return -EINVAL;
	set_one_in((unsigned)n);
	return 0;
}

void fay_set_sampling(unsigned one_in_n)
{
	if (READ_ONCE(lib.env_sampling))
		return;
	set_one_in(one_in_n);
}

void fay_set_sampling_rate(double traces_per_sec)
{
	if (READ_ONCE(lib.env_sampling))
		return;
	set_rate(traces_per_sec);
}
