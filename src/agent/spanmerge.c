// SPDX-License-Identifier: MIT
/*
 * BlkKin parts into whole spans (spanmerge.h): an open-addressed table
 * (linear probing) of spans in progress keyed by trace id, span id and
 * service, each holding the name, the endpoint, the four RPC timestamps
 * and the tag items verbatim; a span is built into one record buffer
 * when a side is whole.
 *
 * Why not the store's merge (store/span_v1.c, zparts_merge()): that one
 * is Zipkin's V1SpanConverter run over every part of a span id at once
 * (the store re-merges all stored parts each time one arrives: from many
 * agents, across restarts), allocating from an arena and making every
 * span V1 makes (annotations, remote endpoints, messaging spans).  This
 * one runs on the drain thread, sees each part once as it is drained,
 * may not allocate or keep parts unbounded, and must say when a span is
 * whole.  What the two must agree on, the rule, is common/zipkin_v1.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "agent/spanmerge.h"
#include "common/zipkin_v1.h"

#define PART_STR	64
#define PART_TAGS	1024	/* bytes of tag items kept per span */
#define SIDE_CLIENT	1u	/* cs or cr seen / the client span built */
#define SIDE_SERVER	2u	/* sr or ss seen / the server span built */

struct part {
	uint64_t h;			/* hash of the key */
	uint64_t trace_hi, trace_lo, span_id, parent_id;
	uint64_t first_ns;		/* start of the first part (its age) */
	uint64_t ts[ZV1_NCORE];		/* of the core annotations seen */
	unsigned have;			/* 1 << ZV1_* */
	unsigned sides, built;		/* SIDE_*: seen, built */
	bool used;
	uint8_t flags;
	uint16_t port, ntags;
	uint32_t tags_len;
	char name[PART_STR], service[PART_STR], ip[48];
	uint8_t tags[PART_TAGS];
};

struct spanmerge {
	unsigned cap, n;
	uint64_t dropped;
	struct part *t;
	struct {
		struct spanrec_fixed f;
		uint8_t items[PART_TAGS + 2 * (SPANREC_ITEM_HDR + 8) + 2 * PART_STR + 48];
	} out;
};

struct spanmerge *spanmerge_new(unsigned cap)
{
	struct spanmerge *m = calloc(1, sizeof(*m));
	unsigned c = 16;

	while (c < cap)
		c *= 2;
	if (m)
		m->t = calloc(c, sizeof(*m->t));
	if (!m || !m->t) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	m->cap = c;
	return m;
}

void spanmerge_free(struct spanmerge *m)
{
	if (!m)
		return;
	free(m->t);
	free(m);
}

uint64_t spanmerge_dropped(const struct spanmerge *m)
{
	return m->dropped;
}

static void str_copy(char *dst, size_t size, struct spanrec_str s)
{
	size_t n = s.len < size - 1 ? s.len : size - 1;

	memcpy(dst, s.p, n);
	dst[n] = '\0';
}

static uint64_t key_hash(const struct spanrec *r)
{
	uint64_t h = r->f.trace_lo * 0x9e3779b97f4a7c15ull ^ r->f.trace_hi ^
		     r->f.span_id * 0xc2b2ae3d27d4eb4full;

	for (uint32_t i = 0; i < r->local.service.len && i < PART_STR - 1; i++)
		h = (h ^ (uint8_t)r->local.service.p[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static bool same(const struct part *p, uint64_t h, const struct spanrec *r)
{
	size_t n = r->local.service.len < PART_STR - 1 ? r->local.service.len : PART_STR - 1;

	return p->h == h && p->trace_lo == r->f.trace_lo && p->trace_hi == r->f.trace_hi &&
	       p->span_id == r->f.span_id && strlen(p->service) == n &&
	       !memcmp(p->service, r->local.service.p, n);
}

/* Free slot i, then put the rest of its probe run back where lookups
 * find it (deletion without tombstones). */
static void del(struct spanmerge *m, unsigned i)
{
	unsigned mask = m->cap - 1;

	m->t[i].used = false;
	m->n--;
	for (unsigned j = (i + 1) & mask; m->t[j].used; j = (j + 1) & mask) {
		unsigned k = (unsigned)m->t[j].h & mask;

		while (m->t[k].used && k != j)
			k = (k + 1) & mask;
		if (k != j) {
			m->t[k] = m->t[j];
			m->t[j].used = false;
		}
	}
}

/* Give up spans older than the TTL; when the table is still full, the
 * oldest one. */
static void make_room(struct spanmerge *m, uint64_t now_ns)
{
	unsigned oldest = 0;

	for (unsigned i = 0; i < m->cap; i++) {
		while (m->t[i].used && m->t[i].first_ns + SPANMERGE_TTL_NS < now_ns) {
			del(m, i);	/* slot i may hold a moved entry now */
			m->dropped++;
		}
	}
	for (unsigned i = 0; i < m->cap; i++)
		if (m->t[i].used && (!m->t[oldest].used || m->t[i].first_ns < m->t[oldest].first_ns))
			oldest = i;
	if ((m->n + 1) * 4 >= m->cap * 3 && m->t[oldest].used) {
		del(m, oldest);
		m->dropped++;
	}
}

/* The whole span of p into m->out, decoded into *out. */
static int build(struct spanmerge *m, const struct part *p, int from, int to,
		 struct spanrec *out)
{
	struct spanrec_fixed *f = &m->out.f;
	size_t used = 0, cap = sizeof(m->out.items);
	char err[128];

	memset(f, 0, sizeof(*f));
	f->trace_hi = p->trace_hi;
	f->trace_lo = p->trace_lo;
	f->span_id = p->span_id;
	f->parent_id = p->parent_id;
	f->start_ns = p->ts[from];
	f->duration_ns = zv1_duration(p->ts[from], p->ts[to], 1000);
	f->kind = zv1_kind(from);
	f->flags = (uint8_t)(p->flags & ~SPAN_F_PARTIAL);
	spanrec_put_item(m->out.items, cap, &used, SPAN_ITEM_NAME, 0, p->name, strlen(p->name),
			 NULL, 0);
	spanrec_put_item(m->out.items, cap, &used, SPAN_ITEM_LOCAL_EP, p->port, p->service,
			 strlen(p->service), p->ip, strlen(p->ip));
	memcpy(m->out.items + used, p->tags, p->tags_len);
	used += p->tags_len;
	f->items_len = (uint32_t)used;
	f->nitems = (uint16_t)(2 + p->ntags);
	return spanrec_decode(&m->out, sizeof(*f) + used, out, err, sizeof(err)) < 0 ? -EBADMSG : 1;
}

int spanmerge_add(struct spanmerge *m, const struct spanrec *r, struct spanrec *out)
{
	unsigned mask = m->cap - 1, i;
	uint64_t h = key_hash(r);
	struct spanrec_item it;
	uint32_t off = 0;
	struct part *p;
	int ret = 0;

	if (!(r->f.flags & SPAN_F_PARTIAL))
		return -EINVAL;
	for (i = (unsigned)h & mask; m->t[i].used; i = (i + 1) & mask)
		if (same(&m->t[i], h, r))
			break;
	p = &m->t[i];
	if (!p->used) {
		if ((m->n + 1) * 4 >= m->cap * 3) {
			make_room(m, r->f.start_ns);
			for (i = (unsigned)h & mask; m->t[i].used; i = (i + 1) & mask)
				;
			p = &m->t[i];
		}
		memset(p, 0, sizeof(*p));
		p->used = true;
		p->h = h;
		p->trace_hi = r->f.trace_hi;
		p->trace_lo = r->f.trace_lo;
		p->span_id = r->f.span_id;
		p->parent_id = r->f.parent_id;
		p->first_ns = r->f.start_ns;
		str_copy(p->service, sizeof(p->service), r->local.service);
		str_copy(p->ip, sizeof(p->ip), r->local.ip);
		p->port = r->local.port;
		m->n++;
	}
	p->flags |= r->f.flags;
	if (!p->name[0] && r->name.len)
		str_copy(p->name, sizeof(p->name), r->name);
	while (spanrec_next(r, &off, &it)) {
		size_t sz = spanrec_item_size(it.type, it.a.len, it.b.len);
		int a;

		switch (it.type) {
		case SPAN_ITEM_EVENT:
			a = zv1_core(it.a.p, it.a.len);
			if (a >= 0 && !(p->have & (1u << a))) {
				p->ts[a] = it.val;
				p->have |= 1u << a;
			}
			break;
		case SPAN_ITEM_TAG:
		case SPAN_ITEM_TAG_INT:
			/* kept verbatim; what does not fit is left out */
			if (p->tags_len + sz <= sizeof(p->tags)) {
				size_t at = p->tags_len;

				if (!spanrec_put_item(p->tags, sizeof(p->tags), &at, it.type, it.val,
						      it.a.p, it.a.len, it.b.p, it.b.len)) {
					p->tags_len = (uint32_t)at;
					p->ntags++;
				}
			}
			break;
		default:
			break;
		}
	}
	if (p->have & ((1u << ZV1_CS) | (1u << ZV1_CR)))
		p->sides |= SIDE_CLIENT;
	if (p->have & ((1u << ZV1_SR) | (1u << ZV1_SS)))
		p->sides |= SIDE_SERVER;
	/* A record has one annotation, so at most one side ends here.  A
	 * loopback RPC (cs, sr, ss, cr in one service) is two spans, as
	 * Zipkin's converter and the store make it: the part stays until
	 * each side it has seen is built. */
	if (!(p->built & SIDE_CLIENT) && (p->have & (1u << ZV1_CS)) &&
	    (p->have & (1u << ZV1_CR))) {
		ret = build(m, p, ZV1_CS, ZV1_CR, out);
		p->built |= SIDE_CLIENT;
	} else if (!(p->built & SIDE_SERVER) && (p->have & (1u << ZV1_SR)) &&
		   (p->have & (1u << ZV1_SS))) {
		ret = build(m, p, ZV1_SR, ZV1_SS, out);
		p->built |= SIDE_SERVER;
	}
	if (ret && (p->built & p->sides) == p->sides)
		del(m, (unsigned)(p - m->t));
	return ret < 0 ? 0 : ret;
}
