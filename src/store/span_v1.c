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
	const struct zs_part *cs, *sr, *ss, *cr, *ms, *mr, *ws, *wr;
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

/* From begin to end, both recorded: a known duration, so two annotations
 * in the same microsecond make 1 us (Zipkin's rule, and a whole record's
 * in span.c), never 0, which reads as "no duration". */
static uint64_t v1_dur(const struct zs_part *begin, const struct zs_part *end)
{
	return end->ts_us == begin->ts_us ? 1 : end->ts_us - begin->ts_us;
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
			if (c->cs)
				b->ts = c->cs->ts_us;
			if (c->cr)
				v1_annotate(b, c->cr->ts_us, c->cr->key);
		} else if (b->kind == SPAN_KIND_SERVER) {
			if (c->sr)
				b->ts = c->sr->ts_us;
			if (c->ss)
				v1_annotate(b, c->ss->ts_us, c->ss->key);
		}
	}
}

/* The "core" annotations: two letters, with an endpoint. */
static int v1_core(struct v1conv *c, const struct zs_part *p, struct v1b *b)
{
	static const struct { char v[3]; uint8_t kind; size_t off; } core[] = {
		{ "cs", SPAN_KIND_CLIENT, offsetof(struct v1conv, cs) },
		{ "sr", SPAN_KIND_SERVER, offsetof(struct v1conv, sr) },
		{ "ss", SPAN_KIND_SERVER, offsetof(struct v1conv, ss) },
		{ "cr", SPAN_KIND_CLIENT, offsetof(struct v1conv, cr) },
		{ "ms", SPAN_KIND_PRODUCER, offsetof(struct v1conv, ms) },
		{ "mr", SPAN_KIND_CONSUMER, offsetof(struct v1conv, mr) },
		{ "ws", SPAN_KIND_UNSET, offsetof(struct v1conv, ws) },
		{ "wr", SPAN_KIND_UNSET, offsetof(struct v1conv, wr) },
	};

	if (p->key.len != 2 || !part_ep(p))
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(core); i++) {
		if (memcmp(p->key.p, core[i].v, 2))
			continue;
		if (core[i].kind)
			b->kind = core[i].kind;
		*(const struct zs_part **)((char *)c + core[i].off) = p;
		return 1;
	}
	return 0;
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

	if (c->cs && c->sr) {
		struct v1b *client, *server;

		/* the client side owns the span's timestamp and duration */
		v1_ts_dur(c, c->cs, c->cr);
		client = v1_for(c, part_ep(c->cs));
		if (same_service(part_ep(c->cs), part_ep(c->sr))) {
			client->kind = SPAN_KIND_CLIENT;
			/* loopback: fork a span for the server side */
			server = v1_new(c, part_ep(c->sr));
			server->kind = SPAN_KIND_SERVER;
		} else {
			server = v1_for(c, part_ep(c->sr));
		}
		server->shared = 1;
		server->ts = c->sr->ts_us;
		if (c->ss)
			server->dur = v1_dur(c->sr, c->ss);
		if (!c->cr)
			client->dur = 0; /* one-way: no duration */
	} else if (c->cs && c->cr) {
		v1_ts_dur(c, c->cs, c->cr);
	} else if (c->sr && c->ss) {
		v1_ts_dur(c, c->sr, c->ss);
	} else {
		v1_incomplete_rpc(c);
	}

	if (c->ms && c->mr) {
		struct v1b *prod = v1_for(c, part_ep(c->ms)), *cons;

		if (same_service(part_ep(c->ms), part_ep(c->mr))) {
			prod->kind = SPAN_KIND_PRODUCER;
			cons = v1_new(c, part_ep(c->mr));
			cons->kind = SPAN_KIND_CONSUMER;
		} else {
			cons = v1_for(c, part_ep(c->mr));
		}
		cons->shared = 1;
		if (c->wr) {
			cons->ts = c->wr->ts_us;
			cons->dur = v1_dur(c->wr, c->mr);
		} else {
			cons->ts = c->mr->ts_us;
		}
		prod->ts = c->ms->ts_us;
		prod->dur = c->ws ? v1_dur(c->ms, c->ws) : 0;
	} else if (c->ms) {
		v1_ts_dur(c, c->ms, c->ws);
	} else if (c->mr) {
		if (c->wr)
			v1_ts_dur(c, c->wr, c->mr);
		else
			v1_ts_dur(c, c->mr, NULL);
	} else {
		if (c->ws)
			v1_annotate(v1_for(c, part_ep(c->ws)), c->ws->ts_us, c->ws->key);
		if (c->wr)
			v1_annotate(v1_for(c, part_ep(c->wr)), c->wr->ts_us, c->wr->key);
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
