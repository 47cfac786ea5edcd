// SPDX-License-Identifier: MIT
/*
 * libfay's clock: CLOCK_REALTIME nanoseconds, read from the TSC.
 *
 * A clock_gettime(CLOCK_REALTIME) through the vDSO costs about 30 ns on a
 * KVM guest (kvm-clock), and a span reads the clock at least twice; the
 * TSC costs about 12.  Each thread keeps a pair (TSC, realtime ns) taken
 * together and a rate (ns per tick, 32.32 fixed point), and converts
 * ticks since its pair; the pair is retaken with clock_gettime every
 * LIB_CLK_RESYNC_NS (and whenever the TSC reads below the pair, e.g. on
 * another CPU), so a clock step or an NTP slew reaches the timestamps
 * within that time, and the rate is remeasured over every
 * LIB_CLK_CAL_NS of wall time (the error of a rate measured over 256 ms
 * with pairs good to ~100 ns is under 1 ppm: well under 100 ns between
 * two resyncs).
 *
 * Once a thread has a rate, its new spans record the TSC ticks
 * themselves (SPAN_F_TICKS: no conversion on the hot path), and each
 * pair it takes, with its rate, is published in the file's header as
 * the line the agent converts ticks with (docs/ABI.md 1.2.2).  Before
 * that, and without a usable TSC, spans record CLOCK_REALTIME ns.
 *
 * src/vm/clock.c does the same job for the inline probes' runtime, which
 * has a control thread to recalibrate under a sequence lock; libfay has
 * no thread of its own, hence a pair per thread, retaken by the thread
 * that reads.  Both take their pairs and convert with common/tsc.h.
 *
 * The TSC is used only when the CPU says it is constant and non-stop and
 * the kernel itself keeps time with it (clocksource tsc or kvm-clock);
 * elsewhere, and on other architectures, every read is clock_gettime.
 */
#include "common/clock.h"
#include "common/tsc.h"
#include "lib/libfay.h"

/* How far apart in ticks the two TSC reads around clock_gettime may be
 * for the pair to count (a pair taken across a preemption is useless). */
#define PAIR_MAX_TICKS 4000u

void lib_clock_init(void)
{
#if defined(__x86_64__)
	if (READ_ONCE(lib.tsc_state))
		return;
	WRITE_ONCE(lib.tsc_state, tsc_invariant() && tsc_kernel_clock() ? 1 : 2);
#endif
}

#if defined(__x86_64__)
/* The thread's line into the file's header, for the agent to convert the
 * ticks of SPAN_F_TICKS records with (docs/ABI.md 1.2.2).  One writer at a
 * time: a thread that finds another writing leaves the line to it. */
static void publish(const struct lib_clock *c)
{
	struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);
	uint32_t s;

	if (!h)
		return;
	s = READ_ONCE(h->clk_seq);
	if ((s & 1) || !__atomic_compare_exchange_n(&h->clk_seq, &s, s + 1, false,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	WRITE_ONCE(h->clk_tsc0, c->tsc);
	WRITE_ONCE(h->clk_ns0, c->ns);
	WRITE_ONCE(h->clk_mult, c->mult);
	smp_store_release(&h->clk_seq, s + 2);
}

uint64_t lib_clock_slow(struct lib_tls *t)
{
	struct lib_clock *c = &t->clk;
	uint64_t ns = 0, tsc = 0, mult;

	if (READ_ONCE(lib.tsc_state) != 1)
		return clock_realtime_ns();
	if (tsc_pair(CLOCK_REALTIME, 3, PAIR_MAX_TICKS, &tsc, &ns) >= PAIR_MAX_TICKS)
		return ns;              /* keep the old pair; try again next read */

	/* The rate: measured from the calibration pair once it is old
	 * enough; a thread's first pairs borrow the process's last rate. */
	if (c->cal_tsc && tsc > c->cal_tsc && ns > c->cal_ns &&
	    ns - c->cal_ns >= LIB_CLK_CAL_NS) {
		mult = tsc_rate(ns - c->cal_ns, tsc - c->cal_tsc);
		/* 0.01 to 10 ns per tick, or the measure was wrong (a VM
		 * paused between the pairs, a clock step): keep the old */
		if (mult >= (UINT64_C(1) << 32) / 100 && mult <= UINT64_C(10) << 32) {
			c->mult = mult;
			WRITE_ONCE(lib.tsc_mult, mult);
		}
		c->cal_tsc = tsc;
		c->cal_ns = ns;
	} else if (!c->cal_tsc || tsc < c->cal_tsc || ns < c->cal_ns) {
		c->cal_tsc = tsc;       /* first pair, or TSC / clock went back */
		c->cal_ns = ns;
	}
	if (!c->mult)
		c->mult = READ_ONCE(lib.tsc_mult);
	c->tsc = tsc;
	c->ns = ns;
	/* Ticks until the next resync; 0 (always slow) until a rate is known. */
	if (c->mult) {
		uint64_t lim = (uint64_t)(((__uint128_t)LIB_CLK_RESYNC_NS << 32) / c->mult);

		t->clk_limit = lim > UINT32_MAX ? UINT32_MAX : (uint32_t)lim;
		publish(c);
	}
	return ns;
}
#endif
