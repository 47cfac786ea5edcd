// SPDX-License-Identifier: MIT
/* src/common/tsc.c: the line's arithmetic (a rate from two points, ticks
 * before and after the origin, a 1 GHz rate exact, 2.1 GHz's to 2 us over an
 * hour); on x86-64 with an invariant TSC, pairs whose clock value is
 * between two clock_gettime() read around them, and a rate measured from
 * two pairs 20 ms apart that converts a third pair's ticks to within a
 * millisecond of its clock value (usually microseconds). */
#include <time.h>

#include "common/clock.h"
#include "common/tsc.h"
#include "test.h"

int main(void)
{
	uint64_t m1 = tsc_rate(1000000000u, 2100000000u);   /* 2.1 GHz */
	uint64_t m2 = tsc_rate(1000, 1000);                  /* 1 GHz: 1 ns a tick */
	uint64_t hour = 3600ull * 1000000000u;

	is_u64(m2, 1ull << 32, "1 ns per tick is 1 << 32");
	is_u64(tsc_line_ns(5000, 7000, m2, 5100), 7100, "100 ticks after the origin at 1 GHz: +100 ns");
	is_u64(tsc_line_ns(5000, 7000, m2, 4900), 6900, "100 ticks before the origin: -100 ns (signed)");
	/* the rate is cut to 32.32: at 0.476 ns a tick that is < 5e-10 */
	ok(hour - tsc_line_ns(0, 0, m1, 2100000000ull * 3600) < 2000,
	   "an hour of 2.1 GHz ticks is an hour to 2 us, never over (%llu)",
	   (unsigned long long)tsc_line_ns(0, 0, m1, 2100000000ull * 3600));
	is_int((int)tsc_delta_ns(-2100, m1), -1000, "-2100 ticks at 2.1 GHz: -1000 ns");

	if (!tsc_invariant()) {
		diag("no invariant TSC here: the pairs are not tested");
		return test_done();
	}
	{
		uint64_t t0, n0, t1, n1, t2, n2, a, b, mult, conv;
		struct timespec d = { 0, 20 * 1000 * 1000 };
		int64_t err;

		a = clock_monotonic_ns();
		tsc_pair(CLOCK_MONOTONIC, 5, 0, &t0, &n0);
		b = clock_monotonic_ns();
		ok(a <= n0 && n0 <= b, "a pair's clock value lies between two reads around it");
		nanosleep(&d, NULL);
		ok(tsc_pair(CLOCK_MONOTONIC, 5, 0, &t1, &n1) < UINT64_MAX && t1 > t0 && n1 > n0,
		   "a second pair 20 ms later: ticks and ns both moved on");
		mult = tsc_rate(n1 - n0, t1 - t0);
		nanosleep(&d, NULL);
		tsc_pair(CLOCK_MONOTONIC, 5, 0, &t2, &n2);
		conv = tsc_line_ns(t1, n1, mult, t2);
		err = (int64_t)(conv - n2);
		ok(err < 1000000 && err > -1000000,
		   "the line from the two converts a third pair 20 ms on to its clock value +- 1 ms (%lld ns)",
		   (long long)err);
	}
	return test_done();
}
