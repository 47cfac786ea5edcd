/* SPDX-License-Identifier: MIT */
/*
 * A process's TSC-to-CLOCK_REALTIME conversion as the agent keeps it
 * (docs/ABI.md 1.2.2): one function of the tick, built from the lines the
 * process's threads publish one after another, that never goes back.
 *
 * Why not the published line itself: each thread of the process retakes
 * its own (TSC, clock_gettime) pair every 64 ms and publishes its line, and
 * two pairs taken 64 ms apart disagree by the widths of their reads, up to
 * ~850 ns on this machine under load.  The agent converts a record when it
 * drains it, and a parent, ended after its child, is drained later: a
 * parent converted with a line 800 ns ahead of the one its child was
 * converted with starts after its child, though it began first
 * (e2e/blockstack_traces: "composer object" at ...583 under "composer
 * write" at ...584).
 *
 * So the map is piecewise linear in the tick and continuous: a new
 * segment starts where the last one is at the agent's own TSC when it
 * sees a new line (no tick drained before that can be later: a record is
 * written before it is read), and slews toward the published line (at
 * most 500 ppm: 64 ms for the usual sub-microsecond gaps) instead of
 * stepping to it.  A tick converts with the segment it falls in,
 * whenever it is drained, so stamps keep their order: two stamps of one
 * process, whatever their threads and rings, convert in the order of
 * their ticks.  Only a gap of more than TSC_MAP_STEP_NS (the clock was set)
 * is stepped.  TSC_MAP_SEGS segments are kept (seconds of history); a
 * tick older than the oldest extends it backwards.
 */
#ifndef FAY_COMMON_TSCMAP_H
#define FAY_COMMON_TSCMAP_H

#include <stdint.h>

#include "common/spanrec.h"

#define TSC_MAP_SEGS      256
#define TSC_MAP_SLEW_NS   64000000u   /* a gap closes over at least this */
#define TSC_MAP_SLEW_PPM  500u        /* and at most this fast */
#define TSC_MAP_GAP_NS    8000000u    /* segments at least this far apart */
#define TSC_MAP_STEP_NS   10000000u   /* a larger gap is a clock step */
#define TSC_MAP_NEAR_NS   32          /* closer than this is on the line */

/* ns = ns + (tick - tsc) * mult >> 32 from tsc on (common/tsc.h). */
struct tsc_seg {
	uint64_t tsc, ns, mult;
};

struct tsc_map {
	uint32_t n;                /* segments kept, 0: no line yet */
	uint32_t last;             /* index of the newest in seg[] (a ring) */
	uint64_t until;            /* while slewing: the tick the gap closes */
	uint64_t pub_tsc0, pub_ns0, pub_mult;  /* the line followed */
	struct tsc_seg seg[TSC_MAP_SEGS];
};

/* Start *m afresh as the one line (tsc0, ns0, mult): mult != 0. */
void tsc_map_line(struct tsc_map *m, uint64_t tsc0, uint64_t ns0, uint64_t mult);

/*
 * Follow the line (tsc0, ns0, mult) the process publishes now (the same or
 * a new one), now being the caller's TSC read after it read the line and
 * before it converts what it drains next.  The first line is taken as it
 * is; after that the map stays continuous (see above).  mult != 0.
 */
void tsc_map_follow(struct tsc_map *m, uint64_t tsc0, uint64_t ns0,
		    uint64_t mult, uint64_t now);

/* The CLOCK_REALTIME ns of tick (m->n > 0). */
uint64_t tsc_map_ns(const struct tsc_map *m, uint64_t tick);

/*
 * Turn the TSC ticks of a SPAN_F_TICKS record into CLOCK_REALTIME ns with
 * m: start_ns, duration_ns (the map's ns at the end tick less the start's;
 * a negative duration, the TSCs of two CPUs apart, becomes 0) and every
 * EVENT value, in the record at buf that spanrec_decode() made *r of, and
 * in *r; clears the flag in both.  The agent's, for shm files.
 */
void tsc_map_span(const struct tsc_map *m, void *buf, struct spanrec *r);

#endif
