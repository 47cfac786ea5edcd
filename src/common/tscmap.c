// SPDX-License-Identifier: MIT
/* The agent's tick-to-ns map of a process: common/tscmap.h says why. */
#include <string.h>

#include "common/tsc.h"
#include "common/tscmap.h"

static uint64_t seg_ns(const struct tsc_seg *s, uint64_t tick)
{
	return tsc_line_ns(s->tsc, s->ns, s->mult, tick);
}

static void push(struct tsc_map *m, uint64_t tsc, uint64_t ns, uint64_t mult)
{
	m->last = (m->last + 1) % TSC_MAP_SEGS;
	if (m->n < TSC_MAP_SEGS)
		m->n++;
	m->seg[m->last] = (struct tsc_seg){ .tsc = tsc, .ns = ns, .mult = mult };
}

void tsc_map_line(struct tsc_map *m, uint64_t tsc0, uint64_t ns0, uint64_t mult)
{
	m->n = 1;
	m->last = 0;
	m->until = 0;
	m->pub_tsc0 = tsc0;
	m->pub_ns0 = ns0;
	m->pub_mult = mult;
	m->seg[0] = (struct tsc_seg){ .tsc = tsc0, .ns = ns0, .mult = mult };
}

void tsc_map_follow(struct tsc_map *m, uint64_t tsc0, uint64_t ns0,
		    uint64_t mult, uint64_t now)
{
	const struct tsc_seg *l;
	uint64_t a, fa, h, ae;
	int64_t e;
	int changed;

	if (!m->n) {
		tsc_map_line(m, tsc0, ns0, mult);
		return;
	}
	changed = tsc0 != m->pub_tsc0 || ns0 != m->pub_ns0 || mult != m->pub_mult;
	l = &m->seg[m->last];
	if (!changed && !m->until)
		return;                 /* on the line, and it is the same */
	/* A new segment only after every tick drained so far (now), and
	 * not more often than TSC_MAP_GAP_NS (the history's length); a new
	 * line seen sooner is taken up at a later call (pub_* unchanged). */
	a = now > l->tsc ? now : l->tsc;
	if (tsc_delta_ns((int64_t)(a - l->tsc), mult) < TSC_MAP_GAP_NS)
		return;
	if (!changed && a < m->until)
		return;                 /* slewing toward the same line */
	m->pub_tsc0 = tsc0;
	m->pub_ns0 = ns0;
	m->pub_mult = mult;
	fa = seg_ns(l, a);
	e = (int64_t)(tsc_line_ns(tsc0, ns0, mult, a) - fa);
	ae = e < 0 ? -(uint64_t)e : (uint64_t)e;
	m->until = 0;
	if (ae > TSC_MAP_STEP_NS) {
		push(m, a, fa + (uint64_t)e, mult);     /* the clock was set */
		return;
	}
	if (ae < TSC_MAP_NEAR_NS) {
		push(m, a, fa, mult);   /* on the line (to a few ns) */
		return;
	}
	/* mult * (1 + e / h): reaches the line h ns from a */
	h = ae * (1000000u / TSC_MAP_SLEW_PPM);
	if (h < TSC_MAP_SLEW_NS)
		h = TSC_MAP_SLEW_NS;
	push(m, a, fa, (uint64_t)((__int128)mult + (__int128)mult * e / (__int128)h));
	m->until = a + (uint64_t)(((unsigned __int128)h << 32) / mult);
}

uint64_t tsc_map_ns(const struct tsc_map *m, uint64_t tick)
{
	uint32_t i = m->last;

	/* newest first: nearly every tick drained is in the newest */
	for (uint32_t k = 1; k < m->n; k++) {
		if (tick >= m->seg[i].tsc)
			break;
		i = (i + TSC_MAP_SEGS - 1) % TSC_MAP_SEGS;
	}
	/* in seg[i], or before the oldest: its line extended back */
	return seg_ns(&m->seg[i], tick);
}

void tsc_map_span(const struct tsc_map *m, void *buf, struct spanrec *r)
{
	uint8_t *p = (uint8_t *)buf + sizeof(struct spanrec_fixed);
	uint8_t *end = p + r->items_len;
	uint64_t t0 = r->f.start_ns, d = r->f.duration_ns;

	r->f.start_ns = tsc_map_ns(m, t0);
	/* the end through the map too: a child inside its parent in ticks
	 * stays inside it in ns */
	if ((int64_t)d > 0) {
		uint64_t e = tsc_map_ns(m, t0 + d);

		r->f.duration_ns = e > r->f.start_ns ? e - r->f.start_ns : 0;
	} else {
		r->f.duration_ns = 0;
	}
	r->f.flags &= (uint8_t)~SPAN_F_TICKS;
	memcpy(buf, &r->f, sizeof(r->f));
	/* the items were checked by spanrec_decode(): walk them by size */
	while (p < end) {
		uint16_t alen, blen;
		uint64_t v;

		memcpy(&alen, p + 2, 2);
		memcpy(&blen, p + 4, 2);
		if (p[0] == SPAN_ITEM_EVENT) {
			memcpy(&v, p + SPANREC_ITEM_HDR, 8);
			v = tsc_map_ns(m, v);
			memcpy(p + SPANREC_ITEM_HDR, &v, 8);
		}
		p += spanrec_item_size(p[0], alen, blen);
	}
}
