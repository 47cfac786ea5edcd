/* SPDX-License-Identifier: MIT */
/*
 * The TSC as a clock: the one copy of the tick-to-nanosecond line and of
 * its calibration, shared by libfay (src/lib/clock.c: CLOCK_REALTIME for
 * span timestamps) and the inline probes' runtime (src/vm/clock.c:
 * CLOCK_MONOTONIC for probes).
 *
 * A line is (tsc0, ns0, mult): ns = ns0 + (tsc - tsc0) * mult >> 32, mult
 * being ns per tick in 32.32 fixed point.  A calibration is two (TSC,
 * clock) pairs, each a clock_gettime() with a TSC read on either side,
 * taken some time apart.  Where the TSC is not a clock (not constant or
 * not non-stop, or another architecture) the callers use clock_gettime().
 */
#ifndef FAY_COMMON_TSC_H
#define FAY_COMMON_TSC_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* The TSC now (x86-64; 0 elsewhere, where nothing records ticks). */
static inline uint64_t tsc_now(void)
{
#if defined(__x86_64__)
	return __rdtsc();
#else
	return 0;
#endif
}

/* ns per tick << 32 for d_ns nanoseconds in d_tsc ticks (d_tsc > 0). */
static inline uint64_t tsc_rate(uint64_t d_ns, uint64_t d_tsc)
{
	return (uint64_t)(((unsigned __int128)d_ns << 32) / d_tsc);
}

/* The nanoseconds of d ticks (negative: before the line's origin) at
 * mult.  Integer only: callable from code that may not touch vector
 * registers (vm.h's vm_prog_calls_out()). */
static inline int64_t tsc_delta_ns(int64_t d, uint64_t mult)
{
	return (int64_t)(((__int128)d * (__int128)mult) >> 32);
}

/* The line's value at tsc. */
static inline uint64_t tsc_line_ns(uint64_t tsc0, uint64_t ns0, uint64_t mult,
				   uint64_t tsc)
{
	return ns0 + (uint64_t)tsc_delta_ns((int64_t)(tsc - tsc0), mult);
}

/* Is the TSC a clock here: constant and non-stop (/proc/cpuinfo's flags
 * constant_tsc and nonstop_tsc), on x86-64?  Reads /proc/cpuinfo each
 * call: callers decide once. */
bool tsc_invariant(void);

/* Does the kernel itself keep time with the TSC (clocksource tsc, or
 * kvm-clock, which a guest derives from it)?  Reads sysfs each call. */
bool tsc_kernel_clock(void);

/*
 * A (TSC, clk) pair: up to tries reads of clock clk, each with a TSC read
 * on either side; stops at the first whose two TSC reads are fewer than
 * good ticks apart (good 0: takes all tries).  *tsc is the middle of the
 * narrowest, *ns its clock value.  Returns that width in ticks (large: a
 * pair taken across a preemption, worth little).  x86-64 only.
 */
uint64_t tsc_pair(clockid_t clk, unsigned tries, uint64_t good,
		  uint64_t *tsc, uint64_t *ns);

#endif
