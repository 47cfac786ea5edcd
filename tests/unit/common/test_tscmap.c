// SPDX-License-Identifier: MIT
/*
 * src/common/tscmap.c: the agent's tick-to-ns map of a process.  One
 * line: the line's own values.  A process's threads publishing lines
 * that disagree by up to +-900 ns and 2 ppm, one every 16 ms, followed
 * over 10 s of simulated drain passes (one a millisecond): stamps
 * converted whenever they are drained, in any order, keep the order of
 * their ticks; the map is continuous (no step at a new line), never runs
 * faster or slower than 500 ppm plus the lines' own rates, and is within
 * 1 us of the newest line at the end.  A line 1 s ahead (the clock was
 * set) is stepped to; a line seen too soon after the last segment is
 * still followed later.  A span's duration goes through the map: a child
 * inside its parent in ticks stays inside it in ns.
 */
#include <stdlib.h>
#include <string.h>

#include "common/tsc.h"
#include "common/tscmap.h"
#include "test.h"

#define GHZ21 UINT64_C(2045222521)     /* 2^32 / 2.1: ns per tick << 32 */

static struct tsc_map m;

/* xorshift: the same walk every run */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct stamp {
	uint64_t tick, ns;
};

static int by_tick(const void *a, const void *b)
{
	const struct stamp *x = a, *y = b;

	return x->tick < y->tick ? -1 : x->tick > y->tick;
}

static void test_one_line(void)
{
	tsc_map_line(&m, 5000, 7000, UINT64_C(1) << 32);
	is_u64(tsc_map_ns(&m, 5100), 7100, "one line: 100 ticks after its origin at 1 GHz");
	is_u64(tsc_map_ns(&m, 4900), 6900, "and 100 before it");
	tsc_map_follow(&m, 5000, 7000, UINT64_C(1) << 32, 1u << 30);
	is_u64(tsc_map_ns(&m, 1u << 30), 7000 + (1u << 30) - 5000,
	       "the same line followed again: unchanged");
}

/* The walk: the truth is ns = 1.7e18 + tick / 2.1; lines are published
 * off it; a drain pass each ms reads the newest line and converts stamps
 * taken in the last 200 ms, at random. */
static void test_walk(void)
{
	enum { PASSES = 10000, PER = 20 };
	const uint64_t ns0 = 1700000000000000000ull, ms = 2100000;   /* ticks a ms */
	uint64_t seed = 0x9e3779b97f4a7c15ull, t = 1000 * ms, ltsc, lns, lmult;
	struct stamp *st = malloc(sizeof(*st) * PASSES * PER);
	size_t n = 0, inverted = 0, steps = 0;
	uint64_t prev_ns = 0, prev_t = 0;
	int64_t maxrate = 0, minrate = INT64_MAX, err;

	ltsc = t;
	lns = tsc_line_ns(0, ns0, GHZ21, t);
	lmult = GHZ21;
	for (int i = 0; i < PASSES; i++) {
		uint64_t now = t + (uint64_t)i * ms;

		if (i % 16 == 0) {      /* a thread retakes its pair */
			int64_t off = (int64_t)(rnd(&seed) % 1801) - 900;

			ltsc = now - rnd(&seed) % ms;
			lns = tsc_line_ns(0, ns0, GHZ21, ltsc) + (uint64_t)off;
			lmult = GHZ21 + GHZ21 / 1000000 * (rnd(&seed) % 5) / 2 - GHZ21 / 1000000;
		}
		tsc_map_follow(&m, ltsc, lns, lmult, now);
		for (int k = 0; k < PER && i > 200; k++) {
			st[n].tick = now - 1 - rnd(&seed) % (200 * ms);
			st[n].ns = tsc_map_ns(&m, st[n].tick);
			n++;
		}
		/* the rate between passes: within 500 ppm (+ 2 ppm) of 2.1 GHz */
		{
			uint64_t v = tsc_map_ns(&m, now);

			if (i) {
				int64_t r = (int64_t)((v - prev_ns) * 1000000000ull / (now - prev_t));

				if (r > maxrate)
					maxrate = r;
				if (r < minrate)
					minrate = r;
				/* continuity: the ns a tick before and at each pass */
				if (tsc_map_ns(&m, now - 1) > v)
					steps++;
			}
			prev_ns = v;
			prev_t = now;
		}
	}
	qsort(st, n, sizeof(*st), by_tick);
	for (size_t i = 1; i < n; i++)
		if (st[i].ns < st[i - 1].ns)
			inverted++;
	is_u64(inverted, 0, "%zu stamps drained over 10 s of lines +-900 ns apart: "
	       "none converts before one with fewer ticks", n);
	is_u64(steps, 0, "no step back at any pass");
	ok(minrate > 476190476 - 476190476 / 1000000 * 502 &&
	   maxrate < 476190476 + 476190476 / 1000000 * 502,
	   "ns per 1e9 ticks from %lld to %lld: within 502 ppm of 2.1 GHz's",
	   (long long)minrate, (long long)maxrate);
	err = (int64_t)(tsc_map_ns(&m, t + PASSES * ms) -
			tsc_line_ns(ltsc, lns, lmult, t + PASSES * ms));
	ok(err > -1000 && err < 1000, "the map ends %lld ns from the newest line", (long long)err);
	free(st);
}

static void test_step(void)
{
	const uint64_t ms = 2100000;
	uint64_t now = 5000 * ms;

	tsc_map_line(&m, 1000 * ms, 1000000000000ull, GHZ21);
	tsc_map_follow(&m, now, tsc_line_ns(1000 * ms, 1000000000000ull, GHZ21, now) + 1000000000u,
		       GHZ21, now + ms);
	ok(tsc_map_ns(&m, now + 2 * ms) - tsc_line_ns(now, tsc_line_ns(1000 * ms, 1000000000000ull,
			GHZ21, now) + 1000000000u, GHZ21, now + 2 * ms) + 1 < 3,
	   "a line 1 s ahead (the clock was set) is stepped to");
	ok(tsc_map_ns(&m, now) < tsc_map_ns(&m, now + 2 * ms) - 1000000000u,
	   "ticks before the step keep their old ns");
}

/* A parent [100, 10100) ticks and its child [200, 10000): converted after
 * a new line, they nest in ns. */
static void test_span(void)
{
	uint8_t rec[64 + 64];
	struct spanrec_fixed fx = { .trace_lo = 1, .span_id = 1, .flags = SPAN_F_TICKS };
	struct spanrec r;
	size_t off = 0;
	uint64_t ps, pe;

	tsc_map_line(&m, 0, 1000000, GHZ21);
	spanrec_put_item(rec + 64, 64, &off, SPAN_ITEM_NAME, 0, "op", 2, NULL, 0);
	fx.items_len = (uint32_t)off;
	fx.nitems = 1;
	fx.start_ns = 100;
	fx.duration_ns = 10000;
	memcpy(rec, &fx, 64);
	spanrec_decode(rec, 64 + off, &r, NULL, 0);
	tsc_map_span(&m, rec, &r);
	ps = r.f.start_ns;
	pe = ps + r.f.duration_ns;
	fx.start_ns = 200;
	fx.duration_ns = 9800;
	memcpy(rec, &fx, 64);
	spanrec_decode(rec, 64 + off, &r, NULL, 0);
	tsc_map_span(&m, rec, &r);
	ok(r.f.start_ns >= ps && r.f.start_ns + r.f.duration_ns <= pe,
	   "a child inside its parent in ticks is inside it in ns ([%llu, %llu] in [%llu, %llu])",
	   (unsigned long long)r.f.start_ns, (unsigned long long)(r.f.start_ns + r.f.duration_ns),
	   (unsigned long long)ps, (unsigned long long)pe);
	ok(!(r.f.flags & SPAN_F_TICKS), "the TICKS flag cleared");
	fx.duration_ns = (uint64_t)-50;         /* the end on a CPU behind */
	memcpy(rec, &fx, 64);
	spanrec_decode(rec, 64 + off, &r, NULL, 0);
	tsc_map_span(&m, rec, &r);
	is_u64(r.f.duration_ns, 0, "a negative duration becomes 0");
}

/* A new line seen 2 ms after the last segment (too soon for a new one),
 * then never changed again: still followed, at later passes. */
static void test_late_line(void)
{
	const uint64_t ms = 2100000, ns0 = 1000000000000ull;
	uint64_t now = 1000 * ms, l2ns = tsc_line_ns(now, ns0, GHZ21, now + 2 * ms) + 700;
	int64_t err;

	tsc_map_line(&m, now, ns0, GHZ21);
	tsc_map_follow(&m, now + 2 * ms, l2ns, GHZ21, now + 2 * ms);
	for (int i = 3; i < 400; i++)   /* passes every ms, the same line */
		tsc_map_follow(&m, now + 2 * ms, l2ns, GHZ21, now + (uint64_t)i * ms);
	err = (int64_t)(tsc_map_ns(&m, now + 400 * ms) -
			tsc_line_ns(now + 2 * ms, l2ns, GHZ21, now + 400 * ms));
	ok(err > -TSC_MAP_NEAR_NS && err < TSC_MAP_NEAR_NS,
	   "a line 700 ns ahead, seen too soon for a segment, is reached later (%lld ns off)",
	   (long long)err);
}

int main(void)
{
	test_one_line();
	test_walk();
	test_step();
	test_late_line();
	test_span();
	return test_done();
}
