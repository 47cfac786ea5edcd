// SPDX-License-Identifier: MIT
/*
 * libfay: the sampling decision made at each root span.
 *
 * Fixed mode, 1 in N: an independent Bernoulli trial per root, from the
 * thread's own generator (lib_rand(): no syscall, no shared write),
 * sampled when r < UINT64_MAX / N.
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
