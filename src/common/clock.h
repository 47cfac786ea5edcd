/* SPDX-License-Identifier: MIT */
#ifndef FAY_COMMON_CLOCK_H
#define FAY_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Wall-clock nanoseconds since the epoch (vDSO, no syscall). */
static inline uint64_t clock_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Parse "250ms", "10s", "5m", "2h", "7d", "100us", "42ns" or a bare number
 * of seconds into nanoseconds.  Returns 0 or -EINVAL. */
int clock_parse_duration(const char *s, uint64_t *ns);

#endif
