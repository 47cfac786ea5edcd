// SPDX-License-Identifier: MIT
/*
 * The SQLite store's write path within a transaction (sqlite_batch.c runs
 * the transaction).
 *
 * Write path: one connection, prepared statements, one transaction per
 * sq__write() call (which the collector's writer thread fills with every
 * batch waiting, a group commit).  Within a transaction the spans are
 * gathered per trace in memory (struct tsum: the trace's seq, timestamps,
 * Bloom filter ...), each span row is appended under its trace's seq, and
 * each touched trace row is written once, at the end.  Names (services,
 * span names, remote services) go through an in-memory set so a known
 * name costs no SQL.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/log.h"
#include "store/sqlite_int.h"

/* ---- name set ----------------------------------------------------------- */

/* The set's hash of a key: eight bytes a turn (the set lives in memory
 * only; FNV-1a byte by byte was a third of note_name()'s cost). */
static uint64_t key_hash(const char *s, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len, w;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	if (i < len) {
		w = 0;
		memcpy(&w, s + i, len - i);
		h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	}
	h ^= h >> 32;
	return h;
}

void sq_nameset_clear(struct nameset *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
	free(s->val);
	memset(s, 0, sizeof(*s));
}

/* The slot of key: where it is, or the empty slot where it would go. */
static size_t nameset_slot(const struct nameset *s, const char *key, size_t len)
{
	size_t i = key_hash(key, len) & (s->cap - 1);

	for (; s->slot[i]; i = (i + 1) & (s->cap - 1))
		if (!strncmp(s->slot[i], key, len) && !s->slot[i][len])
			break;
	return i;
}

/* Grow the table (or forget everything past 64 Ki names: the name tables
 * keep the truth, a forgotten name costs one upsert).  0 or -ENOMEM. */
static int nameset_grow(struct nameset *s)
{
	struct nameset ns = { 0 };
	size_t cap = s->cap ? s->cap * 2 : 1024;

	if (cap > (128u << 10)) {
		sq_nameset_clear(s);
		cap = 1024;
	}
	ns.slot = calloc(cap, sizeof(*ns.slot));
	ns.val = calloc(cap, sizeof(*ns.val));
	if (!ns.slot || !ns.val) {
		free(ns.slot);
		free(ns.val);
		return -ENOMEM;
	}
	ns.cap = cap;
	for (size_t j = 0; j < s->cap; j++) {
		size_t i;

		if (!s->slot[j])
			continue;
		i = nameset_slot(&ns, s->slot[j], strlen(s->slot[j]));
		ns.slot[i] = s->slot[j];
		ns.val[i] = s->val[j];
		ns.n++;
	}
	free(s->slot);
	free(s->val);
	*s = ns;
	return 0;
}

/* The value of key: 1 and *val if known, else 0. */
static int nameset_get(struct nameset *s, const char *key, size_t len, uint64_t *val)
{
	size_t i;

	if (!s->cap)
		return 0;
	i = nameset_slot(s, key, len);
	if (!s->slot[i])
		return 0;
	*val = s->val[i];
	return 1;
}

/* Set key to val.  0 or -ENOMEM. */
static int nameset_put(struct nameset *s, const char *key, size_t len, uint64_t val)
{
	size_t i;

	if ((!s->cap || (s->n + 1) * 2 > s->cap) && nameset_grow(s))
		return -ENOMEM;
	i = nameset_slot(s, key, len);
	if (!s->slot[i]) {
		s->slot[i] = strndup(key, len);
		if (!s->slot[i])
			return -ENOMEM;
		s->n++;
	}
	s->val[i] = val;
	return 0;
}

/* ---- write -------------------------------------------------------------- */

static int bind_str(sqlite3_stmt *s, int i, struct zs_str v)
{
	if (!v.len)
		return sqlite3_bind_null(s, i);
	return sqlite3_bind_text(s, i, v.p, (int)v.len, SQLITE_STATIC);
}

int sq_bind_cstr(sqlite3_stmt *s, int i, const char *v)
{
	if (!v || !*v)
		return sqlite3_bind_null(s, i);
	return sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

static int bind_u64_or_null(sqlite3_stmt *s, int i, uint64_t v)
{
	if (!v)
		return sqlite3_bind_null(s, i);
	return sqlite3_bind_int64(s, i, (sqlite3_int64)v);
}

/* A spans INSERT being bound: the statement and which of st->span_bound
 * (0: ST_INS_SPAN, 1: ST_INS_SPANS) says what its parameters hold. */
struct ins {
	sqlite3_stmt *s;
	uint8_t *bound;
	int64_t *val;
};

/* Parameter i of a spans INSERT: integer v, or NULL when null; not bound
 * again when it holds that already (most spans repeat most of them: no
 * remote endpoint, no addresses, flags 0). */
static void span_int(const struct ins *in, int i, int64_t v, int null)
{
	uint8_t k = null ? 1 : 2;

	if (in->bound[i] == k && (null || in->val[i] == v))
		return;
	if (null)
		sqlite3_bind_null(in->s, i);
	else
		sqlite3_bind_int64(in->s, i, v);
	in->bound[i] = k;
	in->val[i] = v;
}

/* Parameter i of a spans INSERT: text v, or NULL when empty. */
static void span_str(const struct ins *in, int i, struct zs_str v)
{
	if (!v.len) {
		span_int(in, i, 0, 1);
		return;
	}
	sqlite3_bind_text(in->s, i, v.p, (int)v.len, SQLITE_STATIC);
	in->bound[i] = 0;
}

/* Parameter i of a spans INSERT: C string v, or NULL when empty. */
static void span_cstr(const struct ins *in, int i, const char *v)
{
	span_str(in, i, (struct zs_str){ v, v ? (uint32_t)strlen(v) : 0 });
}

/* Endpoint e at parameters i..i+3 of a spans INSERT. */
static void span_ep(const struct ins *in, int i, const struct zs_endpoint *e)
{
	span_str(in, i, e->service);
	span_cstr(in, i + 1, e->ipv4);
	span_cstr(in, i + 2, e->ipv6);
	span_int(in, i + 3, e->port, !e->port);
}

/* Bind endpoint e at columns i..i+3 (service, ipv4, ipv6, port). */
static void bind_ep(sqlite3_stmt *s, int i, const struct zs_endpoint *e)
{
	bind_str(s, i, e->service);
	sq_bind_cstr(s, i + 1, e->ipv4);
	sq_bind_cstr(s, i + 2, e->ipv6);
	bind_u64_or_null(s, i + 3, e->port);
}

/* Step a write statement to completion and reset it. */
int sq_step_done(sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* Make sure (kind, a, b) is in its name table with a last_us not older
 * than ts_us - NAME_LAST_SLACK_US. */
static int note_name(struct store_be *st, int which, struct zs_str a, struct zs_str b,
		     uint64_t ts_us)
{
	char key[1024];
	sqlite3_stmt *s = st->st[which];
	uint64_t last;
	size_t n, la, lb;
	int rc;

	if (!a.len || (which != ST_INS_SERVICE && !b.len))
		return SQLITE_OK;
	/* "<which>\x1f<a>\x1f<b>", cut to the buffer (at worst a redundant
	 * upsert); built by hand: snprintf was 10% of ingest */
	la = a.len < sizeof(key) - 4 ? a.len : sizeof(key) - 4;
	lb = b.len < sizeof(key) - 4 - la ? b.len : sizeof(key) - 4 - la;
	key[0] = (char)('0' + which);
	key[1] = '\x1f';
	memcpy(key + 2, a.p, la);
	key[2 + la] = '\x1f';
	if (lb)
		memcpy(key + 3 + la, b.p, lb);
	n = 3 + la + lb;
	key[n] = '\0';
	if (nameset_get(&st->names, key, n, &last) && ts_us <= last + NAME_LAST_SLACK_US)
		return SQLITE_OK;
	bind_str(s, 1, a);
	if (which != ST_INS_SERVICE)
		bind_str(s, 2, b);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)ts_us);
	rc = sq_step_done(s);
	if (rc == SQLITE_OK && nameset_put(&st->names, key, n, ts_us) < 0)
		sq_nameset_clear(&st->names);
	return rc;
}

/* ---- the transaction's traces ------------------------------------------- */

static size_t tm_slot(const struct tmap *m, uint64_t hi, uint64_t lo)
{
	uint64_t h = (hi * 0x9e3779b97f4a7c15ull) ^ lo;
	size_t i;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	for (i = (size_t)h & (m->nslot - 1); m->slot[i]; i = (i + 1) & (m->nslot - 1)) {
		const struct tsum *t = &m->v[m->slot[i] - 1];

		if (t->hi == hi && t->lo == lo)
			break;
	}
	return i;
}

/* Room for one more trace.  0 or -ENOMEM. */
static int tm_room(struct tmap *m)
{
	if (array_grow((void **)&m->v, m->n, &m->cap, sizeof(*m->v), 256))
		return -ENOMEM;
	if ((m->n + 1) * 2 > m->nslot) {
		size_t nslot = m->nslot ? m->nslot * 2 : 1024;
		uint32_t *slot = calloc(nslot, sizeof(*slot));

		if (!slot)
			return -ENOMEM;
		free(m->slot);
		m->slot = slot;
		m->nslot = nslot;
		for (size_t j = 0; j < m->n; j++)
			m->slot[tm_slot(m, m->v[j].hi, m->v[j].lo)] = (uint32_t)j + 1;
	}
	return 0;
}

/* Forget the transaction's traces. */
void sq_tm_reset(struct store_be *st)
{
	struct tmap *m = &st->tm;

	if (m->n)
		memset(m->slot, 0, m->nslot * sizeof(*m->slot));
	m->n = 0;
	sq_termset_reset(&st->terms);
	zarena_reset(&st->txn_arena);
}

static uint64_t col_u64(sqlite3_stmt *s, int i)
{
	return (uint64_t)sqlite3_column_int64(s, i);
}

/*
 * The index in st->tm of trace (hi, lo): known to the transaction, else
 * read from its row, else a new trace with the next seq.  SQLite rc.
 */
int sq_trace_get(struct store_be *st, uint64_t hi, uint64_t lo, size_t *ti)
{
	struct tmap *m = &st->tm;
	sqlite3_stmt *s = st->st[ST_SEL_TRACE];
	struct tsum *t;
	size_t i;
	int rc;

	if (m->nslot) {
		i = tm_slot(m, hi, lo);
		if (m->slot[i]) {
			*ti = m->slot[i] - 1;
			return SQLITE_OK;
		}
	}
	if (tm_room(m))
		return SQLITE_NOMEM;
	t = &m->v[m->n];
	memset(t, 0, sizeof(*t));
	t->hi = hi;
	t->lo = lo;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)hi);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)lo);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const void *b = sqlite3_column_blob(s, 11);

		t->exists = 1;
		t->seq = sqlite3_column_int64(s, 0);
		t->root_us = col_u64(s, 2);
		t->min_us = col_u64(s, 3);
		t->end_us = col_u64(s, 4);
		t->max_dur_us = col_u64(s, 5);
		t->nspans = sqlite3_column_int64(s, 6);
		t->next_no = sqlite3_column_int64(s, 7);
		t->error = (uint8_t)sqlite3_column_int(s, 8);
		if (sq_col_str(s, 9, &st->txn_arena, &t->root_service) ||
		    sq_col_str(s, 10, &st->txn_arena, &t->root_name)) {
			sqlite3_reset(s);
			return SQLITE_NOMEM;
		}
		if (b && sqlite3_column_bytes(s, 11) == SQ_BLOOM_BYTES)
			memcpy(t->bloom, b, SQ_BLOOM_BYTES);
		else
			memset(t->bloom, 0xff, SQ_BLOOM_BYTES); /* matches anything */
		rc = SQLITE_DONE;
	} else if (rc == SQLITE_DONE) {
		if (st->max_seq + 1 >= SQ_SEQ_LIMIT) {
			snprintf(st->why, sizeof(st->why), "trace numbers exhausted: %" PRId64
				 " traces numbered, the most schema 5's span key holds (2^43)",
				 st->max_seq);
			rc = SQLITE_FULL;
		} else {
			t->seq = ++st->max_seq;
		}
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return rc;
	m->slot[tm_slot(m, hi, lo)] = (uint32_t)m->n + 1;
	*ti = m->n++;
	return SQLITE_OK;
}

/* to |= from, a filter's 64 bytes (the compiler's vectors) */
static inline void bloom_or(uint8_t *to, const uint8_t *from)
{
	uint64_t a[SQ_BLOOM_BYTES / 8], b[SQ_BLOOM_BYTES / 8];

	memcpy(a, to, sizeof(a));
	memcpy(b, from, sizeof(b));
	for (size_t i = 0; i < SQ_BLOOM_BYTES / 8; i++)
		a[i] |= b[i];
	memcpy(to, a, sizeof(a));
}

/* Account span z to trace t (all but nspans); ti: t's index in st->tm
 * when t's Bloom filter holds the terms st->terms says, -1 when it is
 * being rebuilt; bloom: z's terms' bits made by sq__prepare() (ORed into
 * t's filter), or NULL (hashed here). */
static int trace_add(struct store_be *st, struct tsum *t, long ti, const struct zspan *z,
		     const uint8_t *bloom)
{
	uint64_t ts = z->timestamp_us;

	if (ts) {
		if (!t->min_us || ts < t->min_us)
			t->min_us = ts;
		if (!z->parent_id && (!t->root_us || ts < t->root_us)) {
			t->root_us = ts;
			if (zarena_str(&st->txn_arena, &t->root_service, z->local.service.p,
				       z->local.service.len, 0) ||
			    zarena_str(&st->txn_arena, &t->root_name, z->name.p, z->name.len, 0))
				return SQLITE_NOMEM;
		}
		if (ts + z->duration_us > t->end_us)
			t->end_us = ts + z->duration_us;
	}
	if (z->duration_us > t->max_dur_us)
		t->max_dur_us = z->duration_us;
	t->error |= z->error;
	if (bloom)
		bloom_or(t->bloom, bloom);
	else if (ti >= 0)
		sq_bloom_span_txn(&st->terms, (uint32_t)ti, t->bloom, z);
	else
		sq_bloom_span(t->bloom, z);
	return SQLITE_OK;
}

/* Rebuild the row of trace ti from its spans (after some were deleted). */
static int trace_recompute(struct store_be *st, size_t ti)
{
	struct tsum *t = &st->tm.v[ti];
	sqlite3_stmt *s = st->st[ST_SEL_TRACE_SPANS];
	struct zspan z;
	int rc;

	t->root_us = t->min_us = t->end_us = t->max_dur_us = 0;
	t->root_service = t->root_name = (struct zs_str){ "", 0 };
	t->error = 0;
	t->nspans = 0;
	memset(t->bloom, 0, sizeof(t->bloom));
	sqlite3_bind_int64(s, 1, t->seq);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (sq_row_span(s, 0, &st->merge_arena, &z) ||
		    trace_add(st, t, -1, &z, NULL) != SQLITE_OK) {
			rc = SQLITE_NOMEM;
			break;
		}
		t->nspans++;
	}
	sqlite3_reset(s);
	zarena_reset(&st->merge_arena);
	t->recompute = 0;
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int sq_flush_traces(struct store_be *st)
{
	int rc = SQLITE_OK;

	for (size_t i = 0; i < st->tm.n && rc == SQLITE_OK; i++) {
		struct tsum *t = &st->tm.v[i];
		sqlite3_stmt *s;

		if (t->recompute) {
			rc = trace_recompute(st, i);
			if (rc != SQLITE_OK)
				break;
		}
		if (!t->end_us)
			t->end_us = st->now_us; /* no timestamps: when stored */
		s = st->st[t->exists ? ST_UPD_TRACE : ST_INS_TRACE];
		sqlite3_bind_int64(s, 1, t->seq);
		sqlite3_bind_int64(s, 2, (sqlite3_int64)t->hi);
		sqlite3_bind_int64(s, 3, (sqlite3_int64)t->lo);
		sqlite3_bind_int64(s, 4, (sqlite3_int64)(t->root_us ? t->root_us : t->min_us));
		bind_u64_or_null(s, 5, t->root_us);
		bind_u64_or_null(s, 6, t->min_us);
		sqlite3_bind_int64(s, 7, (sqlite3_int64)t->end_us);
		sqlite3_bind_int64(s, 8, (sqlite3_int64)t->max_dur_us);
		sqlite3_bind_int64(s, 9, t->nspans);
		sqlite3_bind_int64(s, 10, t->next_no);
		sqlite3_bind_int(s, 11, t->error);
		bind_str(s, 12, t->root_service);
		bind_str(s, 13, t->root_name);
		sqlite3_bind_blob(s, 14, t->bloom, SQ_BLOOM_BYTES, SQLITE_STATIC);
		rc = sq_step_done(s);
	}
	sq_tm_reset(st);
	return rc;
}

/* ---- spans and parts ---------------------------------------------------- */

int sq_span_claim(struct store_be *st, const struct zspan *z, struct sq_row *r)
{
	uint64_t name_us = z->timestamp_us ? z->timestamp_us : st->now_us;
	struct tsum *t;
	size_t ti;
	int rc;

	rc = sq_trace_get(st, z->trace_hi, z->trace_lo, &ti);
	if (rc != SQLITE_OK)
		return rc;
	t = &st->tm.v[ti];
	r->seq = t->seq;
	r->ti = (uint32_t)ti;
	if (t->next_no >= SQ_NO_LIMIT) {
		if (!t->full)
			pr_warn("store: trace %016" PRIx64 "%016" PRIx64 " has used its %" PRId64
				" span numbers, the most schema 5's span key holds (2^%d):"
				" span %016" PRIx64 " and the trace's further spans are not stored",
				t->hi, t->lo, t->next_no, SQ_NO_BITS, z->id);
		t->full = 1;
		r->no = SQ_NO_DROPPED;
		st->dropped++;
		return SQLITE_OK;
	}
	r->no = t->next_no++;
	for (uint32_t i = 0; i < z->ntags && rc == SQLITE_OK && st->nac_keys; i++)
		for (size_t k = 0; k < st->nac_keys && rc == SQLITE_OK; k++)
			if (zs_str_eqc(z->tags[i].key, st->ac_keys[k]))
				rc = note_name(st, ST_INS_AUTOCOMPLETE, z->tags[i].key,
					       z->tags[i].value, name_us);
	if (rc == SQLITE_OK)
		rc = note_name(st, ST_INS_SERVICE, z->local.service, (struct zs_str){ 0 }, name_us);
	if (rc == SQLITE_OK)
		rc = note_name(st, ST_INS_SPAN_NAME, z->local.service, z->name, name_us);
	if (rc == SQLITE_OK)
		rc = note_name(st, ST_INS_REMOTE, z->local.service, z->remote.service, name_us);
	return rc;
}

/* Bind span z's row r at parameters p + 1 .. p + SQ_SPAN_PARAMS of in,
 * its extra blob prep's (r->span's) when prep is not NULL, else encoded
 * into x.  SQLite rc. */
static int bind_row(const struct ins *in, int p, struct sq_buf *x, const struct zspan *z,
		    int origin, const struct sq_row *r, const struct store_prep *prep)
{
	const uint8_t *xp;
	size_t xn;

	if (prep) {
		xp = prep->extra[r->span];
		xn = prep->extra_len[r->span];
	} else {
		if (sq_extra_encode(x, z))
			return SQLITE_NOMEM;
		xp = x->p;
		xn = x->len;
	}
	sqlite3_bind_int64(in->s, p + 1, SQ_SEQ_NO(r->seq, r->no));
	sqlite3_bind_int64(in->s, p + 2, (sqlite3_int64)z->id);
	span_int(in, p + 3, (sqlite3_int64)z->parent_id, !z->parent_id);
	span_int(in, p + 4, z->kind, 0);
	span_str(in, p + 5, z->name);
	span_ep(in, p + 6, &z->local);
	span_ep(in, p + 10, &z->remote);
	span_int(in, p + 14, (sqlite3_int64)z->timestamp_us, !z->timestamp_us);
	span_int(in, p + 15, (sqlite3_int64)z->duration_us, !z->duration_us);
	span_int(in, p + 16, z->shared, 0);
	span_int(in, p + 17, z->debug, 0);
	span_int(in, p + 18, z->error, 0);
	span_int(in, p + 19, origin, 0);
	if (xn) {
		sqlite3_bind_blob(in->s, p + 20, xp, (int)xn, SQLITE_STATIC);
		in->bound[p + 20] = 0;
	} else {
		span_int(in, p + 20, 0, 1);
	}
	return SQLITE_OK;
}

int sq_span_row(struct store_be *st, const struct zspan *z, int origin, const struct sq_row *r,
		const struct store_prep *prep)
{
	struct ins in = { st->st[ST_INS_SPAN], st->span_bound[0], st->span_int[0] };
	struct tsum *t = &st->tm.v[r->ti];
	int rc;

	rc = bind_row(&in, 0, &st->extra[0], z, origin, r, prep);
	if (rc == SQLITE_OK)
		rc = sq_step_done(in.s);
	if (rc != SQLITE_OK)
		return rc;
	t->nspans++;
	return trace_add(st, t, r->ti, z, prep ? prep->bloom[r->span] : NULL);
}

int sq_span_rows(struct store_be *st, const struct zspan *z, int origin, const struct sq_row *r,
		 const struct store_prep *prep)
{
	struct ins in = { st->st[ST_INS_SPANS], st->span_bound[1], st->span_int[1] };
	int rc = SQLITE_OK;

	for (int i = 0; i < SQ_SPAN_ROWS && rc == SQLITE_OK; i++)
		rc = bind_row(&in, i * SQ_SPAN_PARAMS, &st->extra[i], &z[r[i].span], origin, &r[i],
			      prep);
	if (rc == SQLITE_OK)
		rc = sq_step_done(in.s);
	for (int i = 0; i < SQ_SPAN_ROWS && rc == SQLITE_OK; i++) {
		struct tsum *t = &st->tm.v[r[i].ti];

		t->nspans++;
		rc = trace_add(st, t, r[i].ti, &z[r[i].span],
			       prep ? prep->bloom[r[i].span] : NULL);
	}
	return rc;
}

int sq_insert_span(struct store_be *st, const struct zspan *z, int origin)
{
	struct sq_row r;
	int rc = sq_span_claim(st, z, &r);

	if (rc != SQLITE_OK || r.no == SQ_NO_DROPPED)
		return rc;
	return sq_span_row(st, z, origin, &r, NULL);
}

int sq_insert_part(struct store_be *st, const struct zs_part *p)
{
	sqlite3_stmt *s = st->st[ST_INS_PART];
	size_t ti;
	int rc;

	rc = sq_trace_get(st, p->trace_hi, p->trace_lo, &ti);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(s, 1, st->tm.v[ti].seq);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)p->id);
	bind_u64_or_null(s, 3, p->parent_id);
	bind_str(s, 4, p->name);
	bind_ep(s, 5, &p->local);
	bind_ep(s, 9, &p->remote);
	sqlite3_bind_int(s, 13, p->debug);
	sqlite3_bind_int(s, 14, p->is_tag);
	bind_u64_or_null(s, 15, p->ts_us);
	sqlite3_bind_text(s, 16, p->key.len ? p->key.p : "", (int)p->key.len, SQLITE_STATIC);
	if (p->is_tag)
		sqlite3_bind_text(s, 17, p->value.len ? p->value.p : "", (int)p->value.len,
				  SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 17);
	return sq_step_done(s);
}
