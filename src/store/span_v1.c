// SPDX-License-Identifier: MIT
/*
 * The BlkKin partial-record merge, zparts_merge(): the parts of one span
 * id into Zipkin v2 spans with Zipkin's V1SpanConverter rule (read
 * openzipkin/zipkin zipkin2/v1/V1SpanConverter for the original).  The
 * rest of the span model: span.c.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/err.h"
#include "common/zipkin_v1.h"
#include "store/span.h"

/* ---- V1 merge ----------------------------------------------------------- */

/* A span under construction: Span.Builder of V1SpanConverter. */
struct v1b {
	const struct zs_endpoint *local;  /* NULL: not yet known */
	const struct zs_endpoint *remote;
	uint8_t kind, shared;
	uint64_t ts, dur;
	struct zs_annotation *ann;
	uint32_t nann;
	struct zs_tag *tags;
	uint32_t ntags;
};

struct v1conv {
	const struct zs_part *src;        /* for ids, name, debug */
	struct v1b *b;                    /* b[0] is "first" */
	size_t nb, max;
	size_t nparts;
	const struct zs_part *at[ZV1_NCORE]; /* the core annotations seen */
};

static int same_service(const struct zs_endpoint *x, const struct zs_endpoint *y)
{
	return zs_str_eq(x->service, y->service);
}

static struct v1b *v1_new(struct v1conv *c, const struct zs_endpoint *e)
{
	struct v1b *b = &c->b[c->nb++]; /* max is nparts + 2: never overflows */

	b->local = e;
	return b;
}

/* forEndpoint(): the span of the record's service, made on first use. */
static struct v1b *v1_for(struct v1conv *c, const struct zs_endpoint *e)
{
	if (!e)
		return &c->b[0];
	for (size_t i = 0; i < c->nb; i++) {
		if (!c->b[i].local) {
			c->b[i].local = e; /* closeEnoughEndpoint adopts it */
			return &c->b[i];
		}
		if (same_service(c->b[i].local, e))
			return &c->b[i];
	}
	return v1_new(c, e);
}

static const struct zs_endpoint *part_ep(const struct zs_part *p)
{
	return zs_ep_present(&p->local) ? &p->local : NULL;
}

static void v1_annotate(struct v1b *b, uint64_t ts, struct zs_str v)
{
	b->ann[b->nann++] = (struct zs_annotation){ ts, v };
}

/* From begin to end, both recorded (common/zipkin_v1.h). */
static uint64_t v1_dur(const struct zs_part *begin, const struct zs_part *end)
{
	return zv1_duration(begin->ts_us, end->ts_us, 1);
}

static void v1_ts_dur(struct v1conv *c, const struct zs_part *begin,
		      const struct zs_part *end)
{
	struct v1b *b = v1_for(c, part_ep(begin));

	b->ts = begin->ts_us;
	if (end)
		b->dur = v1_dur(begin, end);
}

static void v1_incomplete_rpc(struct v1conv *c)
{
	for (size_t i = 0; i < c->nb; i++) {
		struct v1b *b = &c->b[i];

		if (b->kind == SPAN_KIND_CLIENT) {
			if (c->at[ZV1_CS])
				b->ts = c->at[ZV1_CS]->ts_us;
			if (c->at[ZV1_CR])
				v1_annotate(b, c->at[ZV1_CR]->ts_us, c->at[ZV1_CR]->key);
		} else if (b->kind == SPAN_KIND_SERVER) {
			if (c->at[ZV1_SR])
				b->ts = c->at[ZV1_SR]->ts_us;
			if (c->at[ZV1_SS])
				v1_annotate(b, c->at[ZV1_SS]->ts_us, c->at[ZV1_SS]->key);
		}
	}
}

/* The "core" annotations (common/zipkin_v1.h), with an endpoint. */
static int v1_core(struct v1conv *c, const struct zs_part *p, struct v1b *b)
{
	int k = part_ep(p) ? zv1_core(p->key.p, p->key.len) : -1;

	if (k < 0)
		return 0;
	if (zv1_kind(k))
		b->kind = zv1_kind(k);
	c->at[k] = p;
	return 1;
}

static void v1_annotations(struct v1conv *c, const struct zs_part *parts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct zs_part *p = &parts[i];
		struct v1b *b;

		if (p->is_tag)
			continue;
		b = v1_for(c, part_ep(p));
		if (!v1_core(c, p, b))
			v1_annotate(b, p->ts_us, p->key);
	}

	if (c->at[ZV1_CS] && c->at[ZV1_SR]) {
		struct v1b *client, *server;

		/* the client side owns the span's timestamp and duration */
		v1_ts_dur(c, c->at[ZV1_CS], c->at[ZV1_CR]);
		client = v1_for(c, part_ep(c->at[ZV1_CS]));
		if (same_service(part_ep(c->at[ZV1_CS]), part_ep(c->at[ZV1_SR]))) {
			client->kind = SPAN_KIND_CLIENT;
			/* loopback: fork a span for the server side */
			server = v1_new(c, part_ep(c->at[ZV1_SR]));
			server->kind = SPAN_KIND_SERVER;
		} else {
			server = v1_for(c, part_ep(c->at[ZV1_SR]));
		}
		server->shared = 1;
		server->ts = c->at[ZV1_SR]->ts_us;
		if (c->at[ZV1_SS])
			server->dur = v1_dur(c->at[ZV1_SR], c->at[ZV1_SS]);
		if (!c->at[ZV1_CR])
			client->dur = 0; /* one-way: no duration */
	} else if (c->at[ZV1_CS] && c->at[ZV1_CR]) {
		v1_ts_dur(c, c->at[ZV1_CS], c->at[ZV1_CR]);
	} else if (c->at[ZV1_SR] && c->at[ZV1_SS]) {
		v1_ts_dur(c, c->at[ZV1_SR], c->at[ZV1_SS]);
	} else {
		v1_incomplete_rpc(c);
	}

	if (c->at[ZV1_MS] && c->at[ZV1_MR]) {
		struct v1b *prod = v1_for(c, part_ep(c->at[ZV1_MS])), *cons;

		if (same_service(part_ep(c->at[ZV1_MS]), part_ep(c->at[ZV1_MR]))) {
			prod->kind = SPAN_KIND_PRODUCER;
			cons = v1_new(c, part_ep(c->at[ZV1_MR]));
			cons->kind = SPAN_KIND_CONSUMER;
		} else {
			cons = v1_for(c, part_ep(c->at[ZV1_MR]));
		}
		cons->shared = 1;
		if (c->at[ZV1_WR]) {
			cons->ts = c->at[ZV1_WR]->ts_us;
			cons->dur = v1_dur(c->at[ZV1_WR], c->at[ZV1_MR]);
		} else {
			cons->ts = c->at[ZV1_MR]->ts_us;
		}
		prod->ts = c->at[ZV1_MS]->ts_us;
		prod->dur = c->at[ZV1_WS] ? v1_dur(c->at[ZV1_MS], c->at[ZV1_WS]) : 0;
	} else if (c->at[ZV1_MS]) {
		v1_ts_dur(c, c->at[ZV1_MS], c->at[ZV1_WS]);
	} else if (c->at[ZV1_MR]) {
		if (c->at[ZV1_WR])
			v1_ts_dur(c, c->at[ZV1_WR], c->at[ZV1_MR]);
		else
			v1_ts_dur(c, c->at[ZV1_MR], NULL);
	} else {
		if (c->at[ZV1_WS])
			v1_annotate(v1_for(c, part_ep(c->at[ZV1_WS])), c->at[ZV1_WS]->ts_us, c->at[ZV1_WS]->key);
		if (c->at[ZV1_WR])
			v1_annotate(v1_for(c, part_ep(c->at[ZV1_WR])), c->at[ZV1_WR]->ts_us, c->at[ZV1_WR]->key);
	}
}

static void v1_tags(struct v1conv *c, const struct zs_part *parts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct zs_part *p = &parts[i];
		struct v1b *b;

		if (zs_ep_present(&p->remote))
			v1_for(c, part_ep(p))->remote = &p->remote;
		if (!p->is_tag)
			continue;
		b = v1_for(c, part_ep(p));
		if (zs_str_eqc(p->key, "lc") && !p->value.len)
			continue; /* V1's "lc" marker carries nothing */
		b->tags[b->ntags++] = (struct zs_tag){ p->key, p->value };
	}
}

int zparts_merge(const struct zs_part *parts, size_t n, struct zarena *a,
		 struct zspan **out)
{
	struct v1conv c = { .src = n ? &parts[0] : NULL, .nparts = n };
	struct zspan *spans;
	const struct zs_part *src = NULL;
	uint8_t debug = 0;

	*out = NULL;
	if (!n)
		return 0;
	c.max = n + 2;
	c.b = zarena_zalloc(a, sizeof(*c.b) * c.max);
	if (!c.b)
		return -ENOMEM;
	/* Every builder may receive every part: size them for that. */
	for (size_t i = 0; i < c.max; i++) {
		c.b[i].ann = zarena_alloc(a, sizeof(*c.b[i].ann) * n);
		c.b[i].tags = zarena_alloc(a, sizeof(*c.b[i].tags) * n);
		if (!c.b[i].ann || !c.b[i].tags)
			return -ENOMEM;
	}
	c.nb = 1;
	for (size_t i = 0; i < n; i++) {
		if (!src && parts[i].name.len)
			src = &parts[i];
		debug |= parts[i].debug;
	}
	if (!src)
		src = &parts[0];

	v1_annotations(&c, parts, n);
	v1_tags(&c, parts, n);

	spans = zarena_zalloc(a, sizeof(*spans) * c.nb);
	if (!spans)
		return -ENOMEM;
	for (size_t i = 0; i < c.nb; i++) {
		struct zspan *s = &spans[i];
		struct v1b *b = &c.b[i];

		s->trace_hi = parts[0].trace_hi;
		s->trace_lo = parts[0].trace_lo;
		s->id = parts[0].id;
		s->parent_id = parts[0].parent_id;
		s->name = src->name;
		s->debug = debug;
		s->kind = b->kind;
		s->shared = b->shared;
		s->timestamp_us = b->ts;
		s->duration_us = b->dur;
		if (b->local)
			s->local = *b->local;
		if (b->remote)
			s->remote = *b->remote;
		s->annotations = b->ann;
		s->nannotations = b->nann;
		s->tags = b->tags;
		s->ntags = b->ntags;
		zspan_normalize(s);
		/* Zipkin 1.x (ApplyTimestampAndDuration): a span with no
		 * timestamp of its own (a BlkKin program's "start"/"end",
		 * no cs/sr) starts at its first annotation and lasts until
		 * its last, so that search, dashboards and retention see it */
		if (!s->timestamp_us && s->nannotations) {
			s->timestamp_us = s->annotations[0].ts_us;
			s->duration_us = s->annotations[s->nannotations - 1].ts_us -
					 s->timestamp_us;
		}
	}
	*out = spans;
	return (int)c.nb;
}
