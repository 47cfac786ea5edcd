// SPDX-License-Identifier: MIT
/*
 * unwind_work K US: calls that leave by longjmp at various depths, for
 * the pairing of entries and exits (issue 19 item 5, inline_unwind.sh).
 *
 * Round r (0 <= r < K) calls fay_unw(D, L, US) with D = 2 + r % 7 levels
 * (args D, D-1, .., 1; each call sleeps US microseconds before its
 * inner call) and a landing level L: every third round 0 (no jump:
 * every call returns), else one of 2..D, whose call does setjmp() and
 * whose innermost call longjmp()s to it.  The calls of args below L are
 * left without their return; the call of arg L goes on after the jump
 * and returns, as do the ones above it.  So a call of arg v that
 * returns lasts at least v x US microseconds: a return paired with an
 * inner call's entry would be shorter.  A last call of fay_unw(1, 0, US)
 * lets the pairing see the last round's jump.
 *
 * Prints what the program itself counted: "returned V N" for each arg V
 * (its calls that returned), "unwound V N" (its calls left by the
 * longjmp), "left N" (all calls left by the longjmp),
 * "entered N", then "sum S" (what the calls computed, the same with and
 * without a probe).  Exit status 0 when every call computed right.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAXD 8

static jmp_buf *landing;
static long returned[MAXD + 1], unwound[MAXD + 1], entered, left;

static void sleep_us(long us)
{
	struct timespec t = { us / 1000000, us % 1000000 * 1000 };

	if (us)
		nanosleep(&t, NULL);
}

/* A call of arg d (the recursion's level counted from the innermost, 1):
 * returns d when it returns. */
__attribute__((noinline, noipa, used)) long fay_unw(long d, long land, long us);
long fay_unw(long d, long land, long us)
{
	jmp_buf jb, *volatile outer = landing;
	volatile long r = 0;

	entered++;
	if (d == land) {
		landing = &jb;
		if (setjmp(jb)) {
			landing = outer;
			sleep_us(us);
			returned[d]++;
			return d;
		}
	}
	sleep_us(us);
	if (d > 1)
		r = fay_unw(d - 1, land, us) + 1;
	else if (land)
		longjmp(*landing, 1);
	else
		r = 1;
	if (d == land)
		landing = outer;
	returned[d]++;
	__asm__ volatile("" ::: "memory");
	return r == d ? d : -1;
}

int main(int argc, char **argv)
{
	long k = argc > 2 ? atol(argv[1]) : 0, us = argc > 2 ? atol(argv[2]) : 0;
	long bad = 0, sum = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: unwind_work K US\n");
		return 2;
	}
	for (long r = 0; r < k; r++) {
		long d = 2 + r % 7, land = r % 3 == 0 ? 0 : 2 + (r / 3) % (d - 1);
		long got = fay_unw(d, land, us);

		bad += got != d;
		sum += got;
		if (land)
			left += land - 1;
		for (long v = 1; v < land; v++)
			unwound[v]++;
	}
	bad += fay_unw(1, 0, us) != 1;
	for (int v = 1; v <= MAXD; v++)
		printf("returned %d %ld\n", v, returned[v]);
	for (int v = 1; v <= MAXD; v++)
		printf("unwound %d %ld\n", v, unwound[v]);
	printf("left %ld\nentered %ld\nsum %ld\n", left, entered, sum);
	return bad != 0;
}
