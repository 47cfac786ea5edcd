// SPDX-License-Identifier: MIT
/*
 * span_profile: a libfay program (linked with libfay.so) whose requests
 * of two kinds burn different amounts of CPU, for the trace_id /
 * span_name fields of profile(...) samples
 * (tests/integration/query_span_profile.sh).
 *
 *   span_profile K IDS [H]  K rounds: a root span "heavy" spinning H
 *                         (default 3) units of work, then a root span
 *                         "light" spinning 1 unit, then 1 unit outside
 *                         any span; the low 64 bits of every trace id it
 *                         made are written to the file IDS, one decimal
 *                         number a line.
 *
 * A unit is ~1 ms of arithmetic on this machine (the same loop for
 * every kind, so the CPU each kind takes is in the ratio of its units).
 * Run with FAY_SAMPLE=1 so every request is recorded.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fay/trace.h>

#define UNIT 400000L

__attribute__((noinline)) static uint64_t spin(long units)
{
	volatile uint64_t x = 1;

	for (long i = 0; i < units * UNIT; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

/* The current span's trace id (low half), 0 when none. */
static uint64_t trace_lo(void)
{
	struct fay_current c;

	return fay_current_span(&c, sizeof(c), FAY_CURRENT_VERSION) ? 0 : c.trace_lo;
}

int main(int argc, char **argv)
{
	long k = argc > 2 ? atol(argv[1]) : 0;
	FILE *ids = argc > 2 ? fopen(argv[2], "w") : NULL;
	long heavy = argc > 3 ? atol(argv[3]) : 3;

	if (!ids || k <= 0 || heavy <= 0) {
		fprintf(stderr, "usage: span_profile K IDS [H]\n");
		return 2;
	}
	if (fay_init("span-profile", NULL, 0)) {
		fprintf(stderr, "span_profile: fay_init failed\n");
		return 1;
	}
	for (long i = 0; i < k; i++) {
		struct fay_span *s = fay_span_root("heavy");

		fprintf(ids, "%llu\n", (unsigned long long)trace_lo());
		spin(heavy);
		fay_span_end(s);
		s = fay_span_root("light");
		fprintf(ids, "%llu\n", (unsigned long long)trace_lo());
		spin(1);
		fay_span_end(s);
		spin(1);
		usleep(100);
	}
	fclose(ids);
	return 0;
}
