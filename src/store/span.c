// SPDX-License-Identifier: MIT
/*
 * The span model: arena and normalisation helpers, conversion from span
 * records, and the BlkKin partial-record merge (Zipkin's
 * V1SpanConverter rule; read openzipkin/zipkin zipkin2/v1/V1SpanConverter
 * for the original).  Endpoint addresses: span_ip.c.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "store/span.h"

/* ---- arena -------------------------------------------------------------- */

struct zarena_chunk {
	struct zarena_chunk *next;
	size_t cap;
	_Alignas(16) unsigned char data[];
};

#define ZARENA_MIN (64u << 10)

void *zarena_alloc(struct zarena *a, size_t size)
{
	struct zarena_chunk *c;
	size_t sz = (size + 15) & ~(size_t)15;
	void *p;

	if (!a->head || a->cap - a->used < sz) {
		size_t cap = sz > ZARENA_MIN ? sz : ZARENA_MIN;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return fay_err_ptr(-ENOMEM);
		c->next = a->head;
		c->cap = cap;
		a->head = c;
		a->used = 0;
		a->cap = cap;
	}
	p = a->head->data + a->used;
	a->used += sz;
	return p;
}

void *zarena_zalloc(struct zarena *a, size_t size)
{
	void *p = zarena_alloc(a, size);

	if (p)
		memset(p, 0, size);
	return p;
}

int zarena_str(struct zarena *a, struct zs_str *out, const char *p, size_t len,
	       int lower)
{
	char *d;

	if (!len) {
		*out = (struct zs_str){ "", 0 };
		return 0;
	}
	d = zarena_alloc(a, len + 1);
	if (!d)
		return -ENOMEM;
	if (lower) {
		for (size_t i = 0; i < len; i++)
			d[i] = (char)tolower((unsigned char)p[i]);
	} else {
		memcpy(d, p, len);
	}
	d[len] = '\0';
	out->p = d;
	out->len = (uint32_t)len;
	return 0;
}

int zarena_grow(struct zarena *a, void **v, size_t n, size_t *cap, size_t el)
{
	size_t ncap;
	void *nv;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	nv = zarena_alloc(a, el * ncap);
	if (!nv)
		return -ENOMEM;
	if (n)
		memcpy(nv, *v, el * n);
	*v = nv;
	*cap = ncap;
	return 0;
}

void zarena_reset(struct zarena *a)
{
	struct zarena_chunk *c = a->head, *n;

	for (; c; c = n) {
		n = c->next;
		free(c);
	}
	a->head = NULL;
	a->used = a->cap = 0;
}

/* ---- helpers ------------------------------------------------------------ */

int zs_str_eq(struct zs_str a, struct zs_str b)
{
	return a.len == b.len && (!a.len || !memcmp(a.p, b.p, a.len));
}

int zs_str_eqc(struct zs_str a, const char *c)
{
	size_t n = strlen(c);

	return a.len == n && (!n || !memcmp(a.p, c, n));
}

static int zs_str_cmp(struct zs_str a, struct zs_str b)
{
	uint32_t n = a.len < b.len ? a.len : b.len;
	int c = n ? memcmp(a.p, b.p, n) : 0;

	if (c)
		return c;
	return a.len < b.len ? -1 : a.len > b.len;
}

static int ann_cmp(const void *x, const void *y)
{
	const struct zs_annotation *a = x, *b = y;

	if (a->ts_us != b->ts_us)
		return a->ts_us < b->ts_us ? -1 : 1;
	return zs_str_cmp(a->value, b->value);
}

/* Stable for equal keys (insertion order breaks ties), so that "the last
 * value of a key wins" holds after sorting. */
struct tag_ord {
	struct zs_tag t;
	uint32_t i;
};

static int tag_cmp(const void *x, const void *y)
{
	const struct tag_ord *a = x, *b = y;
	int c = zs_str_cmp(a->t.key, b->t.key);

	return c ? c : (a->i < b->i ? -1 : a->i > b->i);
}

static void sort_tags(struct zspan *s)
{
	struct tag_ord small[16], *o = small;
	uint32_t n = 0, i;

	/* already sorted without duplicate keys (spans read back from the
	 * store, most records): nothing to do */
	for (i = 1; i < s->ntags; i++)
		if (zs_str_cmp(s->tags[i - 1].key, s->tags[i].key) >= 0)
			break;
	if (i == s->ntags)
		return;
	if (s->ntags > ARRAY_SIZE(small)) {
		o = malloc(sizeof(*o) * s->ntags);
		if (!o) {
			/* cannot sort: keep them as they are (still valid JSON) */
			return;
		}
	}
	for (i = 0; i < s->ntags; i++)
		o[i] = (struct tag_ord){ s->tags[i], i };
	qsort(o, s->ntags, sizeof(*o), tag_cmp);
	for (i = 0; i < s->ntags; i++) {
		if (i + 1 < s->ntags && zs_str_eq(o[i].t.key, o[i + 1].t.key))
			continue; /* a later value of the same key wins */
		s->tags[n++] = o[i].t;
	}
	s->ntags = n;
	if (o != small)
		free(o);
}

void zspan_normalize(struct zspan *s)
{
	uint32_t n = 0;

	for (n = 1; n < s->nannotations; n++)
		if (ann_cmp(&s->annotations[n - 1], &s->annotations[n]) >= 0)
			break;
	if (n < s->nannotations) { /* not sorted, or a duplicate */
		n = 0;
		qsort(s->annotations, s->nannotations, sizeof(*s->annotations), ann_cmp);
		for (uint32_t i = 0; i < s->nannotations; i++) {
			if (n && !ann_cmp(&s->annotations[n - 1], &s->annotations[i]))
				continue;
			s->annotations[n++] = s->annotations[i];
		}
		s->nannotations = n;
	}
	if (s->ntags > 1)
		sort_tags(s);
	s->error = 0;
	for (uint32_t i = 0; i < s->ntags; i++)
		if (zs_str_eqc(s->tags[i].key, "error"))
			s->error = 1;
	if (s->parent_id == s->id)
		s->parent_id = 0;
	if (s->kind == SPAN_KIND_CLIENT)
		s->shared = 0;
}

/* ---- span records ------------------------------------------------------- */

static uint64_t ns_to_us(uint64_t ns)
{
	return ns / 1000;
}

static int ep_from_rec(const struct spanrec_ep *in, struct zarena *a,
		       struct zs_endpoint *out)
{
	memset(out, 0, sizeof(*out));
	if (!in->present)
		return 0;
	if (zarena_str(a, &out->service, in->service.p, in->service.len, 1))
		return -ENOMEM;
	if (in->ip.len)
		zs_ep_set_ip(out, in->ip.p, in->ip.len); /* unparsable: absent */
	out->port = in->port;
	return 0;
}

int zspan_from_rec(const struct spanrec *r, struct zarena *a, struct zspan *s)
{
	struct spanrec_item it;
	uint32_t off = 0, na = 0, nt = 0;
	int has_error = 0;
	char num[32];

	memset(s, 0, sizeof(*s));
	s->trace_hi = r->f.trace_hi;
	s->trace_lo = r->f.trace_lo;
	s->id = r->f.span_id;
	s->parent_id = r->f.parent_id;
	s->kind = r->f.kind;
	s->shared = !!(r->f.flags & SPAN_F_SHARED);
	s->debug = !!(r->f.flags & SPAN_F_DEBUG);
	s->timestamp_us = ns_to_us(r->f.start_ns);
	/* a whole record is a finished span: under 1 us (even 0 ns, when
	 * the clock did not move) is 1 us, never "no duration" */
	if (r->f.start_ns)
		s->duration_us = r->f.duration_ns < 1000 ? 1 : ns_to_us(r->f.duration_ns);
	if (zarena_str(a, &s->name, r->name.p, r->name.len, 1))
		return -ENOMEM;
	if (ep_from_rec(&r->local, a, &s->local) || ep_from_rec(&r->remote, a, &s->remote))
		return -ENOMEM;
	/* +2: a synthetic error tag and the truncation tag */
	s->annotations = zarena_alloc(a, sizeof(*s->annotations) * (r->nevents + 1));
	s->tags = zarena_alloc(a, sizeof(*s->tags) * (r->ntags + 2));
	if (!s->annotations || !s->tags)
		return -ENOMEM;
	while (spanrec_next(r, &off, &it)) {
		struct zs_tag *t = &s->tags[nt];

		switch (it.type) {
		case SPAN_ITEM_EVENT:
			s->annotations[na].ts_us = ns_to_us(it.val);
			if (zarena_str(a, &s->annotations[na].value, it.a.p, it.a.len, 0))
				return -ENOMEM;
			na++;
			break;
		case SPAN_ITEM_TAG:
		case SPAN_ITEM_TAG_INT:
			if (zarena_str(a, &t->key, it.a.p, it.a.len, 0))
				return -ENOMEM;
			if (it.type == SPAN_ITEM_TAG_INT) {
				int n = snprintf(num, sizeof(num), "%" PRId64, (int64_t)it.val);

				if (zarena_str(a, &t->value, num, (size_t)n, 0))
					return -ENOMEM;
			} else if (zarena_str(a, &t->value, it.b.p, it.b.len, 0)) {
				return -ENOMEM;
			}
			if (zs_str_eqc(t->key, "error"))
				has_error = 1;
			nt++;
			break;
		default:
			break;
		}
	}
	if ((r->f.flags & SPAN_F_ERROR) && !has_error)
		s->tags[nt++] = (struct zs_tag){ ZS_STR("error"), ZS_STR("true") };
	if (r->f.dropped_items || (r->f.flags & SPAN_F_TRUNCATED)) {
		int n = snprintf(num, sizeof(num), "%" PRIu32, r->f.dropped_items);

		s->tags[nt].key = (struct zs_str)ZS_STR("fay.dropped_items");
		if (zarena_str(a, &s->tags[nt].value, num, (size_t)n, 0))
			return -ENOMEM;
		nt++;
	}
	s->nannotations = na;
	s->ntags = nt;
	zspan_normalize(s);
	return 1;
}

int zparts_from_rec(const struct spanrec *r, struct zarena *a,
		    struct zs_part **parts, size_t *n, size_t *cap)
{
	struct spanrec_item it;
	struct zs_part base;
	uint32_t off = 0;
	int cnt = 0;
	char num[32];

	memset(&base, 0, sizeof(base));
	base.trace_hi = r->f.trace_hi;
	base.trace_lo = r->f.trace_lo;
	base.id = r->f.span_id;
	base.parent_id = r->f.parent_id;
	base.debug = !!(r->f.flags & SPAN_F_DEBUG);
	if (zarena_str(a, &base.name, r->name.p, r->name.len, 1) ||
	    ep_from_rec(&r->local, a, &base.local) ||
	    ep_from_rec(&r->remote, a, &base.remote))
		return -ENOMEM;
	while (spanrec_next(r, &off, &it)) {
		struct zs_part *p;

		if (it.type != SPAN_ITEM_EVENT && it.type != SPAN_ITEM_TAG &&
		    it.type != SPAN_ITEM_TAG_INT)
			continue;
		if (zarena_grow(a, (void **)parts, *n, cap, sizeof(**parts)))
			return -ENOMEM;
		p = &(*parts)[(*n)++];
		*p = base;
		if (zarena_str(a, &p->key, it.a.p, it.a.len, 0))
			return -ENOMEM;
		if (it.type == SPAN_ITEM_EVENT) {
			p->ts_us = ns_to_us(it.val);
		} else if (it.type == SPAN_ITEM_TAG) {
			p->is_tag = 1;
			if (zarena_str(a, &p->value, it.b.p, it.b.len, 0))
				return -ENOMEM;
		} else {
			int k = snprintf(num, sizeof(num), "%" PRId64, (int64_t)it.val);

			p->is_tag = 1;
			if (zarena_str(a, &p->value, num, (size_t)k, 0))
				return -ENOMEM;
		}
		cnt++;
	}
	return cnt;
}

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

static void v1_ts_dur(struct v1conv *c, const struct zs_part *begin,
		      const struct zs_part *end)
{
	struct v1b *b = v1_for(c, part_ep(begin));

	b->ts = begin->ts_us;
	if (end)
		b->dur = end->ts_us - begin->ts_us;
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
			server->dur = c->ss->ts_us - c->sr->ts_us;
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
			cons->dur = c->mr->ts_us - c->wr->ts_us;
		} else {
			cons->ts = c->mr->ts_us;
		}
		prod->ts = c->ms->ts_us;
		prod->dur = c->ws ? c->ws->ts_us - c->ms->ts_us : 0;
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
