// SPDX-License-Identifier: MIT
/* Partial results as bytes, and their merge table (partial.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/partial.h"

static void put_shape_item(struct wbuf *w, enum vtype t, int size)
{
	wbuf_u8(w, t == VT_STR ? 1 : 0);
	wbuf_uvar(w, t == VT_STR ? (uint64_t)size : 8);
}

void partial_shape_encode(const struct plan *p, struct wbuf *w)
{
	wbuf_u8(w, p->mode == PLAN_STREAM);
	if (p->mode == PLAN_STREAM) {
		wbuf_uvar(w, (uint64_t)p->ncols);
		for (int i = 0; i < p->ncols; i++)
			put_shape_item(w, p->cols[i].type, p->cols[i].size);
		return;
	}
	wbuf_uvar(w, (uint64_t)p->nkeys);
	for (int i = 0; i < p->nkeys; i++)
		put_shape_item(w, p->keys[i].e->type, p->keys[i].size);
	wbuf_uvar(w, (uint64_t)p->naggrs);
	for (int i = 0; i < p->naggrs; i++)
		aggr_desc_encode(&p->aggrs[i].desc, w);
}

static int check_item(struct rbuf *r, enum vtype t, int size, const char *what,
		      const char *name, char *why, size_t len)
{
	unsigned ty = rbuf_u8(r, what);
	uint64_t sz = rbuf_uvar(r, what);

	if (r->err)
		return 0;
	if (ty != (t == VT_STR) || sz != (t == VT_STR ? (uint64_t)size : 8)) {
		snprintf(why, len, "%s '%s' is %s[%llu] there, %s[%d] here", what, name,
			 ty ? "string" : "int", (unsigned long long)sz,
			 t == VT_STR ? "string" : "int", t == VT_STR ? size : 8);
		return -EPROTO;
	}
	return 0;
}

int partial_shape_check(const struct plan *p, struct rbuf *r, char *why, size_t len)
{
	unsigned stream = rbuf_u8(r, "mode");
	uint64_t n;
	int err = 0;

	if (!r->err && stream != (p->mode == PLAN_STREAM)) {
		snprintf(why, len, "rows of a %s query where this one %s",
			 stream ? "streaming" : "aggregating",
			 p->mode == PLAN_STREAM ? "streams" : "aggregates");
		return -EPROTO;
	}
	n = rbuf_uvar(r, "count");
	if (!r->err && n != (uint64_t)(stream ? p->ncols : p->nkeys)) {
		snprintf(why, len, "%llu %s where this query has %d",
			 (unsigned long long)n, stream ? "columns" : "key components",
			 stream ? p->ncols : p->nkeys);
		return -EPROTO;
	}
	for (uint64_t i = 0; !err && !r->err && i < n; i++)
		err = stream ? check_item(r, p->cols[i].type, p->cols[i].size, "column",
					  p->cols[i].name, why, len)
			     : check_item(r, p->keys[i].e->type, p->keys[i].size, "key",
					  p->keys[i].name, why, len);
	if (err || stream || r->err)
		goto out;
	n = rbuf_uvar(r, "aggregate count");
	if (!r->err && n != (uint64_t)p->naggrs) {
		snprintf(why, len, "%llu aggregates where this query has %d",
			 (unsigned long long)n, p->naggrs);
		return -EPROTO;
	}
	for (int i = 0; !err && !r->err && i < p->naggrs; i++) {
		char sub[200];

		err = aggr_desc_check(&p->aggrs[i].desc, r, sub, sizeof(sub));
		if (err) {
			snprintf(why, len, "aggregate %d (%s): %s", i + 1, p->aggrs[i].text, sub);
			return err;
		}
	}
out:
	if (!err && r->err) {
		snprintf(why, len, "%s", r->why);
		return r->err;
	}
	return err;
}

static void put_int(struct wbuf *w, const unsigned char *at)
{
	int64_t v;

	memcpy(&v, at, 8);
	wbuf_svar(w, v);
}

static void put_str(struct wbuf *w, const unsigned char *at, int size)
{
	size_t n = strnlen((const char *)at, (size_t)size);

	wbuf_uvar(w, n);
	wbuf_put(w, at, n);
}

static void get_int(struct rbuf *r, unsigned char *at, const char *what)
{
	int64_t v = rbuf_svar(r, what);

	memcpy(at, &v, 8);
}

static void get_str(struct rbuf *r, unsigned char *at, int size, const char *what)
{
	uint64_t n = rbuf_uvar_max(r, (uint64_t)size, what);
	const void *s = rbuf_get(r, (size_t)n, what);

	if (s)
		memcpy(at, s, (size_t)n);
}

void partial_row_encode(const struct plan *p, const void *key, const void *val,
			struct wbuf *w)
{
	const unsigned char *k = key, *v = val;

	for (int i = 0; i < p->nkeys; i++) {
		const struct plan_key *pk = &p->keys[i];

		if (pk->e->type == VT_STR)
			put_str(w, k + pk->offset, pk->size);
		else
			put_int(w, k + pk->offset);
	}
	for (int i = 0; i < p->naggrs; i++)
		if (p->aggrs[i].share < 0)	/* a shared sketch once */
			aggr_state_encode(&p->aggrs[i].desc, v + p->aggrs[i].offset, w);
}

int partial_row_decode(const struct plan *p, struct rbuf *r, void *key, void *val)
{
	unsigned char *k = key, *v = val;

	memset(key, 0, (size_t)p->key_size);
	memset(val, 0, (size_t)p->value_size);
	for (int i = 0; i < p->nkeys && !r->err; i++) {
		const struct plan_key *pk = &p->keys[i];

		if (pk->e->type == VT_STR)
			get_str(r, k + pk->offset, pk->size, "string key");
		else
			get_int(r, k + pk->offset, "integer key");
	}
	for (int i = 0; i < p->naggrs && !r->err; i++)
		if (p->aggrs[i].share < 0)
			aggr_state_decode(&p->aggrs[i].desc, r, v + p->aggrs[i].offset);
	return r->err;
}

void partial_record_encode(const struct plan *p, const void *rec, struct wbuf *w)
{
	const unsigned char *b = rec;

	for (int i = 0; i < p->ncols; i++) {
		if (p->cols[i].type == VT_STR)
			put_str(w, b + p->cols[i].offset, p->cols[i].size);
		else
			put_int(w, b + p->cols[i].offset);
	}
}

int partial_record_decode(const struct plan *p, struct rbuf *r, void *rec)
{
	unsigned char *b = rec;

	memset(rec, 0, (size_t)p->record_size);
	for (int i = 0; i < p->ncols && !r->err; i++) {
		if (p->cols[i].type == VT_STR)
			get_str(r, b + p->cols[i].offset, p->cols[i].size, "string column");
		else
			get_int(r, b + p->cols[i].offset, "integer column");
	}
	return r->err;
}

/* ---- the merge table: open addressing over the key bytes ---------------- */

struct ptable {
	const struct plan *p;
	size_t ksize, vsize, n, cap;	/* rows; cap is a power of two */
	unsigned char *keys, *vals;	/* n rows, insertion order */
	uint32_t *slots;		/* cap entries: row + 1, 0 empty */
};

struct ptable *ptable_new(const struct plan *p)
{
	struct ptable *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->p = p;
	t->ksize = (size_t)p->key_size;
	t->vsize = (size_t)p->value_size;
	return t;
}

void ptable_free(struct ptable *t)
{
	if (!t)
		return;
	free(t->keys);
	free(t->vals);
	free(t->slots);
	free(t);
}

static size_t slot_of(const struct ptable *t, const void *key)
{
	return (size_t)(t->ksize ? aggr_hash_bytes(key, t->ksize) : 0) & (t->cap - 1);
}

static int grow(struct ptable *t)
{
	size_t nc = t->cap ? 2 * t->cap : 64;
	uint32_t *ns = calloc(nc, sizeof(*ns));
	unsigned char *nk = realloc(t->keys, (nc / 2) * (t->ksize ? t->ksize : 1));
	unsigned char *nv;

	if (!ns || !nk) {
		free(ns);
		if (nk)
			t->keys = nk;
		return -ENOMEM;
	}
	t->keys = nk;
	nv = realloc(t->vals, (nc / 2) * t->vsize);
	if (!nv) {
		free(ns);
		return -ENOMEM;
	}
	t->vals = nv;
	free(t->slots);
	t->slots = ns;
	t->cap = nc;
	for (size_t i = 0; i < t->n; i++) {
		size_t s = slot_of(t, t->keys + i * t->ksize);

		while (t->slots[s])
			s = (s + 1) & (t->cap - 1);
		t->slots[s] = (uint32_t)(i + 1);
	}
	return 0;
}

int ptable_merge(struct ptable *t, const void *key, const void *val)
{
	const struct plan *p = t->p;
	unsigned char *v;
	size_t s;

	if ((t->n + 1) * 2 > t->cap && grow(t))
		return -ENOMEM;
	s = slot_of(t, key);
	while (t->slots[s]) {
		size_t i = t->slots[s] - 1;

		if (!t->ksize || !memcmp(t->keys + i * t->ksize, key, t->ksize))
			break;
		s = (s + 1) & (t->cap - 1);
	}
	if (t->slots[s]) {
		v = t->vals + (t->slots[s] - 1) * t->vsize;
	} else {
		if (t->ksize)
			memcpy(t->keys + t->n * t->ksize, key, t->ksize);
		v = t->vals + t->n * t->vsize;
		memset(v, 0, t->vsize);
		t->slots[s] = (uint32_t)(++t->n);
	}
	for (int i = 0; i < p->naggrs; i++)
		if (p->aggrs[i].share < 0)	/* a shared sketch is merged once */
			aggr_merge(&p->aggrs[i].desc, v + p->aggrs[i].offset,
				   (const unsigned char *)val + p->aggrs[i].offset);
	return 0;
}

int ptable_merge_rows(struct ptable *t, struct rbuf *r)
{
	/* a row takes at least one byte per key and aggregate */
	uint64_t n = rbuf_uvar_max(r, r->len - r->off, "row count");
	unsigned char *key = calloc(1, t->ksize + 1), *val = calloc(1, t->vsize);
	int err = r->err;

	if (!key || !val)
		err = -ENOMEM;
	for (uint64_t i = 0; !err && i < n; i++) {
		err = partial_row_decode(t->p, r, key, val);
		err = err ? : ptable_merge(t, key, val);
	}
	free(key);
	free(val);
	return err;
}

int ptable_merge_table(struct ptable *t, const struct ptable *src)
{
	int err = 0;

	for (size_t i = 0; !err && i < src->n; i++)
		err = ptable_merge(t, src->keys + i * src->ksize, src->vals + i * src->vsize);
	return err;
}

size_t ptable_count(const struct ptable *t)
{
	return t->n;
}

void ptable_row(const struct ptable *t, size_t i, const void **key, const void **val)
{
	*key = t->keys + i * t->ksize;
	*val = t->vals + i * t->vsize;
}

void ptable_encode(const struct ptable *t, struct wbuf *w)
{
	wbuf_uvar(w, t->n);
	for (size_t i = 0; i < t->n; i++)
		partial_row_encode(t->p, t->keys + i * t->ksize, t->vals + i * t->vsize, w);
}
