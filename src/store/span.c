// SPDX-License-Identifier: MIT
/*
 * The span model: arena and normalisation helpers, and conversion from
 * span records.  The BlkKin partial-record merge: span_v1.c.  Endpoint
 * addresses: span_ip.c.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/budget.h"
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

		if (a->budget && mem_budget_take(a->budget, sizeof(*c) + cap)) {
			a->over = 1;
			return fay_err_ptr(-ENOMEM);
		}
		c = malloc(sizeof(*c) + cap);
		if (!c) {
			if (a->budget)
				mem_budget_give(a->budget, sizeof(*c) + cap);
			return fay_err_ptr(-ENOMEM);
		}
		if (a->budget)
			a->charged += sizeof(*c) + cap;
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
		size_t i = 0;

		/* eight bytes a turn: 'A'-'Z' get 0x20 (tolower() in the C
		 * locale, which fay runs in), every other byte is kept */
		for (; i + 8 <= len; i += 8) {
			const uint64_t h = 0x8080808080808080ull;
			uint64_t w, l7, ge_a, gt_z;

			memcpy(&w, p + i, 8);
			l7 = w & ~h;
			ge_a = l7 + 0x3f3f3f3f3f3f3f3full;      /* high bit: >= 'A' */
			gt_z = l7 + 0x2525252525252525ull;      /* high bit: > 'Z' */
			w |= (ge_a & ~gt_z & ~w & h) >> 2;
			memcpy(d + i, &w, 8);
		}
		for (; i < len; i++)
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
	mem_budget_give(a->budget, a->charged);
	a->charged = 0;
	a->over = 0;
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

/* Copy str's bytes to *at (moved past them) and point str there. */
static void dup_str(struct zs_str *str, char **at)
{
	if (str->len)
		memcpy(*at, str->p, str->len);
	str->p = *at;
	*at += str->len;
}

struct zspan *zspan_dup(const struct zspan *s)
{
	size_t size = sizeof(*s) + sizeof(*s->annotations) * s->nannotations +
		      sizeof(*s->tags) * s->ntags + s->name.len + s->local.service.len +
		      s->remote.service.len;
	struct zspan *d;
	char *at;

	for (uint32_t i = 0; i < s->nannotations; i++)
		size += s->annotations[i].value.len;
	for (uint32_t i = 0; i < s->ntags; i++)
		size += s->tags[i].key.len + s->tags[i].value.len;
	d = malloc(size);
	if (!d)
		return NULL;
	*d = *s;
	d->annotations = (struct zs_annotation *)(d + 1);
	d->tags = (struct zs_tag *)(d->annotations + s->nannotations);
	at = (char *)(d->tags + s->ntags);
	if (s->nannotations)
		memcpy(d->annotations, s->annotations, sizeof(*s->annotations) * s->nannotations);
	if (s->ntags)
		memcpy(d->tags, s->tags, sizeof(*s->tags) * s->ntags);
	dup_str(&d->name, &at);
	dup_str(&d->local.service, &at);
	dup_str(&d->remote.service, &at);
	for (uint32_t i = 0; i < d->nannotations; i++)
		dup_str(&d->annotations[i].value, &at);
	for (uint32_t i = 0; i < d->ntags; i++) {
		dup_str(&d->tags[i].key, &at);
		dup_str(&d->tags[i].value, &at);
	}
	return d;
}

static inline __attribute__((always_inline)) int zs_str_cmp(struct zs_str a, struct zs_str b)
{
	uint32_t n = a.len < b.len ? a.len : b.len;
	int c;

	if (n >= 8) {
		/* most keys differ in their first eight bytes: compared as
		 * one big-endian number, the order of memcmp() */
		uint64_t x, y;

		memcpy(&x, a.p, 8);
		memcpy(&y, b.p, 8);
		if (x != y)
			return __builtin_bswap64(x) < __builtin_bswap64(y) ? -1 : 1;
	}
	c = n ? memcmp(a.p, b.p, n) : 0;

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

/* A key's first eight bytes as one big-endian number, zero-padded: two
 * keys' numbers differ in the order zs_str_cmp() gives them, or are equal
 * (then compare the keys). */
static uint64_t key_prefix(struct zs_str k)
{
	uint64_t v = 0;

	if (k.len >= 8) {
		memcpy(&v, k.p, 8);
		return __builtin_bswap64(v);
	}
	for (uint32_t i = 0; i < 8; i++)
		v = v << 8 | (i < k.len ? (unsigned char)k.p[i] : 0);
	return v;
}

/* A few tags' order: their prefixes and indexes (16 bytes to move). */
struct tag_key {
	uint64_t pre;
	uint32_t i;
};

static int tag_key_less(const struct zs_tag *t, const struct tag_key *a, const struct tag_key *b)
{
	int c;

	if (a->pre != b->pre)
		return a->pre < b->pre;
	c = zs_str_cmp(t[a->i].key, t[b->i].key);
	return c ? c < 0 : a->i < b->i;
}

static void sort_tags(struct zspan *s)
{
	struct tag_ord *o;
	uint32_t n = 0, i;

	/* already sorted without duplicate keys (spans read back from the
	 * store, most records): nothing to do */
	for (i = 1; i < s->ntags; i++)
		if (zs_str_cmp(s->tags[i - 1].key, s->tags[i].key) >= 0)
			break;
	if (i == s->ntags)
		return;
	if (s->ntags <= 16) {
		/* a few (an OTLP span's attributes): insertion sort of
		 * prefixes, the same order (tag_cmp's) without qsort's cost
		 * per call nor moving whole tags */
		struct tag_key k[16];
		struct zs_tag t[16];

		memcpy(t, s->tags, sizeof(*t) * s->ntags);
		for (i = 0; i < s->ntags; i++) {
			struct tag_key x = { key_prefix(t[i].key), i };
			uint32_t j = i;

			for (; j && tag_key_less(t, &x, &k[j - 1]); j--)
				k[j] = k[j - 1];
			k[j] = x;
		}
		for (i = 0; i < s->ntags; i++) {
			if (i + 1 < s->ntags && k[i].pre == k[i + 1].pre &&
			    zs_str_eq(t[k[i].i].key, t[k[i + 1].i].key))
				continue; /* a later value of the same key wins */
			s->tags[n++] = t[k[i].i];
		}
		s->ntags = n;
		return;
	}
	o = malloc(sizeof(*o) * s->ntags);
	if (!o)
		return; /* cannot sort: keep them as they are (still valid JSON) */
	for (i = 0; i < s->ntags; i++)
		o[i] = (struct tag_ord){ s->tags[i], i };
	qsort(o, s->ntags, sizeof(*o), tag_cmp);
	for (i = 0; i < s->ntags; i++) {
		if (i + 1 < s->ntags && zs_str_eq(o[i].t.key, o[i + 1].t.key))
			continue; /* a later value of the same key wins */
		s->tags[n++] = o[i].t;
	}
	s->ntags = n;
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
		if (s->tags[i].key.len == 5 && !memcmp(s->tags[i].key.p, "error", 5))
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
	/* a whole record is a finished span: it covers every microsecond it
	 * touched, from its start's (rounded down) to its end's (rounded up),
	 * so a child inside its parent in ns is inside it in us too, the
	 * parent's last microsecond included; never under 1 us (even 0 ns,
	 * when the clock did not move), never "no duration" */
	if (r->f.start_ns) {
		uint64_t end_us = (r->f.start_ns + r->f.duration_ns + 999) / 1000;

		s->duration_us = end_us > s->timestamp_us ? end_us - s->timestamp_us : 1;
	}
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
