// SPDX-License-Identifier: MIT
/*
 * A ktime_get_ns() for inline probes from the TSC.  On this class of VM
 * clock_gettime(CLOCK_MONOTONIC) costs ~28 ns of CPU (kvm-clock through
 * the vDSO) and rdtsc ~13 ns; an entry+exit probe reads the clock twice.
 *
 * ns = ns0 + (tsc - tsc0) * mult >> 32, the three published under a
 * sequence lock (one writer: whoever calls vm_tsc_init/vm_tsc_sync).
 * vm_tsc_init() calibrates over ~20 ms (error ~1e-4); each
 * vm_tsc_sync() (the runtime calls it about once a second while a
 * session runs) measures the true rate over the time since the previous
 * one and re-anchors the line where it is now (continuous: no step) with
 * a rate that gains the error against CLOCK_MONOTONIC back over the next
 * second, as NTP slews a clock; an error over 1 ms is stepped instead.
 * So durations stay within ~1e-4 from the first second and ~1e-6 after,
 * and absolute times stay within microseconds of CLOCK_MONOTONIC, NTP's
 * slewing included.  The pairs and the line are common/tsc.h's (libfay's
 * clock uses the same).  Without an invariant TSC (constant_tsc and
 * nonstop_tsc in /proc/cpuinfo) vm_tsc_now() is clock_gettime().
 *
 * On a thread the readings strictly increase: a reading at or before the
 * thread's previous one is that one + 1 ns.  The TSC need not tick every
 * cycle: on AMD EPYC hosts it adds P0/100 MHz every 10 ns (every value 21
 * ticks apart at 2.1 GHz), and rdtsc is not ordered with the instructions
 * before it, so an inline probe's exit read can land in its entry's step
 * (a duration of 0).  A second reading in one step, + 1 ns, is still inside
 * that step's 10 ns (rdtsc itself takes about a step: at most 2 of a
 * thread's readings fall in one).  It also keeps a thread's readings in
 * order across CPUs whose TSCs disagree.  Not an lfence before rdtsc (the
 * vDSO's ordered read): ~10 ns per read here, 21 ns per probed call.
 */
#include <errno.h>
#include <time.h>

#include "common/tsc.h"
#include "vm/vm.h"

#define SLEW_NS		1000000000ll	/* the error is gained back over this */
#define STEP_NS		1000000ll	/* larger errors are stepped */

static struct {
	uint32_t seq;
	uint64_t tsc0, ns0, mult;
} clk;
static uint64_t last_tsc, last_mono;	/* the writer's previous measurement */
/* The calling thread's previous reading (vm_tsc_now()) */
static __thread uint64_t thread_last __attribute__((tls_model("initial-exec")));

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A (tsc, CLOCK_MONOTONIC) pair: the narrowest of 5. */
static void measure(uint64_t *tsc, uint64_t *mono)
{
	tsc_pair(CLOCK_MONOTONIC, 5, 0, tsc, mono);
}

static void publish(uint64_t tsc0, uint64_t ns0, uint64_t mult)
{
	__atomic_store_n(&clk.seq, clk.seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&clk.tsc0, tsc0, __ATOMIC_RELAXED);
	__atomic_store_n(&clk.ns0, ns0, __ATOMIC_RELAXED);
	__atomic_store_n(&clk.mult, mult, __ATOMIC_RELAXED);
	__atomic_store_n(&clk.seq, clk.seq + 1, __ATOMIC_RELEASE);
}

int vm_tsc_init(void)
{
	uint64_t t0, m0, t1, m1;
	struct timespec d = { 0, 20 * 1000 * 1000 };

	if (clk.mult)
		return 0;
	if (!tsc_invariant())
		return -ENOTSUP;
	measure(&t0, &m0);
	nanosleep(&d, NULL);
	measure(&t1, &m1);
	if (t1 <= t0 || m1 <= m0)
		return -ENOTSUP;
	last_tsc = t1;
	last_mono = m1;
	publish(t1, m1, tsc_rate(m1 - m0, t1 - t0));
	return 0;
}

bool vm_tsc_active(void)
{
	return __atomic_load_n(&clk.mult, __ATOMIC_RELAXED) != 0;
}

/* The line's value at tsc (the writer's view). */
static uint64_t line_at(uint64_t tsc)
{
	return tsc_line_ns(clk.tsc0, clk.ns0, clk.mult, tsc);
}

int vm_tsc_sync(void)
{
	uint64_t t, m, now, r;
	int64_t err;

	if (!clk.mult)
		return -ENOTSUP;
	measure(&t, &m);
	if (t <= last_tsc || m <= last_mono)
		return -EAGAIN;
	r = tsc_rate(m - last_mono, t - last_tsc);	/* the true rate, lately */
	last_tsc = t;
	last_mono = m;
	err = (int64_t)(m - line_at(t));
	if (err > STEP_NS || err < -STEP_NS) {
		publish(t, m, r);
		return 0;
	}
	/* over the next SLEW_NS the line advances SLEW_NS + err, from where
	 * it is now (not at t: this thread may have been preempted since,
	 * and readers went on along the old line meanwhile) */
	t = __rdtsc();
	now = line_at(t);
	publish(t, now, (uint64_t)(((__int128)r * (SLEW_NS + err)) / SLEW_NS));
	return 0;
}

/* No vector registers (vm.h: vm_prog_calls_out()); clock_gettime() only
 * before a calibration or without an invariant TSC.  After the thread's
 * previous reading (above): a signal handler's readings between this
 * thread's load and store of thread_last may be forgotten, so a reading
 * after the handler is after this one, not necessarily after the
 * handler's (each handler's own readings are in order). */
__attribute__((target("general-regs-only")))
uint64_t vm_tsc_now(const struct vm_env *env)
{
	uint64_t tsc0, ns0, mult, t, last;
	uint32_t s;

	(void)env;
	/* The TSC is read inside the sequence, not after it: a thread
	 * interrupted between the two (a signal, a preemption) while the
	 * line is re-anchored would put an old line's rate on a late TSC,
	 * microseconds ahead of the new line, and the next reading (a
	 * call's exit) would come out earlier than this one. */
	do {
		s = __atomic_load_n(&clk.seq, __ATOMIC_ACQUIRE);
		tsc0 = __atomic_load_n(&clk.tsc0, __ATOMIC_RELAXED);
		ns0 = __atomic_load_n(&clk.ns0, __ATOMIC_RELAXED);
		mult = __atomic_load_n(&clk.mult, __ATOMIC_RELAXED);
		t = __rdtsc();
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((s & 1) || s != __atomic_load_n(&clk.seq, __ATOMIC_RELAXED));
	t = __builtin_expect(!mult, 0) ? mono_ns() : tsc_line_ns(tsc0, ns0, mult, t);
	last = thread_last;
	if (__builtin_expect(t <= last, 0))
		t = last + 1;
	thread_last = t;
	return t;
}
