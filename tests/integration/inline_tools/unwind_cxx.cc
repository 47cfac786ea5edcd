// SPDX-License-Identifier: MIT
/*
 * unwind_cxx K US: the C++ twin of unwind_work.c (issue 19 item 5,
 * inline_unwind.sh): calls that leave by an exception thrown through
 * them at various depths, and C++ names to probe (fay::unw::Level::call,
 * demangled).
 *
 * Round r (0 <= r < K) calls fay::unw::Level::call(D, L, US) with
 * D = 2 + r % 7 levels (args D, D-1, .., 1; each call sleeps US
 * microseconds before its inner call) and a catching level L: every
 * third round 0 (nothing thrown), else one of 2..D, whose call catches
 * what the innermost call throws (std::runtime_error).  The calls of
 * args below L are left by the exception; the call of arg L catches it,
 * sleeps US and returns, as do the ones above it: a call of arg v that
 * returns lasts at least v x US microseconds.  A last call
 * call(1, 0, US) lets the pairing see the last round's exception.
 *
 * Prints "returned V N" and "unwound V N" for each arg V, "left N",
 * "entered N", "sum S", as unwind_work does.  Exit status 0 when every call computed right.
 */
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <time.h>

namespace fay {
namespace unw {

static const int maxd = 8;
static long returned[maxd + 1], entered;

static void sleep_us(long us)
{
	struct timespec t = { us / 1000000, us % 1000000 * 1000 };

	if (us)
		nanosleep(&t, NULL);
}

struct Level {
	__attribute__((noinline, noipa)) static long call(long d, long land, long us);
};

long Level::call(long d, long land, long us)
{
	long r = 0;

	entered++;
	sleep_us(us);
	if (d == land) {
		try {
			r = call(d - 1, land, us) + 1;
		} catch (const std::runtime_error &) {
			sleep_us(us);
			returned[d]++;
			return d;
		}
	} else if (d > 1) {
		r = call(d - 1, land, us) + 1;
	} else if (land) {
		throw std::runtime_error("unwound");
	} else {
		r = 1;
	}
	returned[d]++;
	return r == d ? d : -1;
}

} // namespace unw
} // namespace fay

int main(int argc, char **argv)
{
	long k = argc > 2 ? atol(argv[1]) : 0, us = argc > 2 ? atol(argv[2]) : 0;
	long bad = 0, sum = 0, left = 0, unwound[fay::unw::maxd + 1] = { 0 };

	if (argc < 3) {
		fprintf(stderr, "usage: unwind_cxx K US\n");
		return 2;
	}
	for (long r = 0; r < k; r++) {
		long d = 2 + r % 7, land = r % 3 == 0 ? 0 : 2 + (r / 3) % (d - 1);
		long got = fay::unw::Level::call(d, land, us);

		bad += got != d;
		sum += got;
		if (land)
			left += land - 1;
		for (long v = 1; v < land; v++)
			unwound[v]++;
	}
	bad += fay::unw::Level::call(1, 0, us) != 1;
	for (int v = 1; v <= fay::unw::maxd; v++)
		printf("returned %d %ld\n", v, fay::unw::returned[v]);
	for (int v = 1; v <= fay::unw::maxd; v++)
		printf("unwound %d %ld\n", v, unwound[v]);
	printf("left %ld\nentered %ld\nsum %ld\n", left, fay::unw::entered, sum);
	return bad != 0;
}
