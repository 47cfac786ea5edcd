// SPDX-License-Identifier: MIT
/*
 * The SQLite store's write calls: a write transaction of batches (an
 * agent's batch seen before is skipped; BlkKin parts are merged again
 * with the parts stored before), the agents table, and retention.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/grow.h"
#include "common/log.h"
#include "store/sqlite_int.h"
#include "store/store.h"

struct span_key {
	uint64_t hi, lo, id;
};

static int key_cmp(const void *x, const void *y)
{
	const struct span_key *a = x, *b = y;

	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* Rebuild the merged spans of one span id from all its parts. */
static int remerge(struct store_be *st, const struct span_key *k)
{
	sqlite3_stmt *d = st->st[ST_DEL_MERGED], *s = st->st[ST_SEL_PARTS];
	struct zarena *a = &st->merge_arena;
	struct zs_part *parts = NULL;
	struct zspan *spans;
	size_t n = 0, cap = 0, ti;
	int rc, m, gone;

	rc = sq_trace_get(st, k->hi, k->lo, &ti);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(d, 1, st->tm.v[ti].seq);
	sqlite3_bind_int64(d, 2, (sqlite3_int64)k->id);
	sqlite3_bind_int64(s, 1, st->tm.v[ti].seq);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)k->id);
	rc = sq_step_done(d);
	if (rc != SQLITE_OK)
		return rc;
	gone = sqlite3_changes(st->db);
	if (gone) {
		st->tm.v[ti].nspans -= gone;
		st->tm.v[ti].recompute = 1;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct zs_part *p;

		if (zarena_grow(a, (void **)&parts, n, &cap, sizeof(*parts)))
			goto oom;
		p = &parts[n++];
		memset(p, 0, sizeof(*p));
		p->trace_hi = k->hi;
		p->trace_lo = k->lo;
		p->id = k->id;
		p->parent_id = (uint64_t)sqlite3_column_int64(s, 0);
		if (sq_col_str(s, 1, a, &p->name) || sq_col_ep(s, 2, a, &p->local) ||
		    sq_col_ep(s, 6, a, &p->remote))
			goto oom;
		p->debug = (uint8_t)sqlite3_column_int(s, 10);
		p->is_tag = (uint8_t)sqlite3_column_int(s, 11);
		p->ts_us = (uint64_t)sqlite3_column_int64(s, 12);
		if (sq_col_str(s, 13, a, &p->key) || sq_col_str(s, 14, a, &p->value))
			goto oom;
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return rc;
	m = zparts_merge(parts, n, a, &spans);
	if (m < 0)
		return SQLITE_NOMEM;
	for (int i = 0; i < m; i++) {
		rc = sq_insert_span(st, &spans[i], 1);
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
oom:
	sqlite3_reset(s);
	return SQLITE_NOMEM;
}

static int write_parts(struct store_be *st, struct store_batch *b)
{
	struct span_key *keys;
	size_t nk = 0;
	int rc = SQLITE_OK;

	keys = malloc(sizeof(*keys) * b->nparts);
	if (!keys)
		return SQLITE_NOMEM;
	for (size_t i = 0; i < b->nparts && rc == SQLITE_OK; i++) {
		rc = sq_insert_part(st, &b->parts[i]);
		keys[nk++] = (struct span_key){ b->parts[i].trace_hi, b->parts[i].trace_lo,
						b->parts[i].id };
	}
	qsort(keys, nk, sizeof(*keys), key_cmp);
	for (size_t i = 0; i < nk && rc == SQLITE_OK; i++) {
		if (i && !key_cmp(&keys[i - 1], &keys[i]))
			continue;
		rc = remerge(st, &keys[i]);
		zarena_reset(&st->merge_arena);
	}
	free(keys);
	return rc;
}

/* Room for need elements of el bytes in *v (of *cap).  0 or -ENOMEM. */
static int room(void **v, size_t need, size_t *cap, size_t el)
{
	while (*cap < need)
		if (array_grow(v, *cap, cap, el, 256))
			return -ENOMEM;
	return 0;
}

static int seq_cmp(const void *x, const void *y)
{
	const struct sq_row *a = x, *b = y;

	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * Put the claimed rows r[0..n) in key order (trace_seq, no), into st->rows.
 * Within a trace the claims are already in order (no grows), so this is a
 * stable bucket sort by trace: O(n) plus the batch's distinct traces
 * sorted by seq.  0 or -ENOMEM.
 */
static int rows_in_key_order(struct store_be *st, struct sq_row *r, size_t n)
{
	struct sq_row *tr, *out;
	size_t nt = 0, at = 0;

	if (room((void **)&st->tcount, st->tm.n, &st->tcount_cap, sizeof(*st->tcount)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		st->tcount[r[i].ti] = 0;
	/* the first row of each trace stands for the trace: r[n..n+nt) */
	tr = r + n;
	for (size_t i = 0; i < n; i++)
		if (!st->tcount[r[i].ti]++)
			tr[nt++] = r[i];
	qsort(tr, nt, sizeof(*tr), seq_cmp);
	for (size_t k = 0; k < nt; k++) {
		uint32_t c = st->tcount[tr[k].ti];

		st->tcount[tr[k].ti] = (uint32_t)at; /* where its rows start */
		at += c;
	}
	out = r + n + nt;
	for (size_t i = 0; i < n; i++)
		out[st->tcount[r[i].ti]++] = r[i];
	memmove(r, out, n * sizeof(*r));
	return 0;
}

/*
 * A batch's spans: claimed in arrival order (trace seqs, row numbers and
 * names exactly as one span after the other would give them), then their
 * rows written in key order.  The spans of an SDK's batch interleave a
 * few traces; written as they come, each row would go into the middle of
 * the B-tree behind its trace's last row, and SQLite splits a page far
 * more often than when every row of a new trace is appended at the end.
 * The rows go SQ_SPAN_ROWS to an INSERT (the rest one by one): one
 * statement's start and end, and one cursor appending, for eight rows.
 * A batch store__prepare() made ready (b->prep) has its blobs and Bloom
 * bits taken from there (sqlite_prep.c).
 */
static int write_spans(struct store_be *st, struct store_batch *b)
{
	const struct store_prep *prep = b->prep;
	size_t n = b->nspans, sorted = 1;
	int rc;

	if (prep && (prep->spans != b->spans || prep->n != n))
		prep = NULL; /* made of other spans: not used */

	if (n < 2) {
		for (size_t i = 0; i < n; i++) {
			rc = sq_insert_span(st, &b->spans[i], 0);
			if (rc != SQLITE_OK)
				return rc;
		}
		return SQLITE_OK;
	}
	/* room for the rows, their traces and the sorted copy */
	if (room((void **)&st->rows, 3 * n, &st->rows_cap, sizeof(*st->rows)))
		return SQLITE_NOMEM;
	for (size_t i = 0, j = 0; i < b->nspans; i++) {
		struct sq_row *r = &st->rows[j];

		rc = sq_span_claim(st, &b->spans[i], r);
		if (rc != SQLITE_OK)
			return rc;
		if (r->no == SQ_NO_DROPPED) {
			n--;
			continue;
		}
		r->span = (uint32_t)i;
		if (j && (r->seq < r[-1].seq || (r->seq == r[-1].seq && r->no < r[-1].no)))
			sorted = 0;
		j++;
	}
	if (!sorted && rows_in_key_order(st, st->rows, n))
		return SQLITE_NOMEM;
	for (size_t i = 0; i < n;) {
		const struct sq_row *r = &st->rows[i];

		if (n - i >= SQ_SPAN_ROWS) {
			rc = sq_span_rows(st, b->spans, 0, r, prep);
			i += SQ_SPAN_ROWS;
		} else {
			rc = sq_span_row(st, &b->spans[r->span], 0, r, prep);
			i++;
		}
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
}

static int last_seq_of(struct store_be *st, const char *agent_id, uint64_t *seq)
{
	sqlite3_stmt *s = st->st[ST_LAST_SEQ];
	int rc;

	sqlite3_bind_text(s, 1, agent_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	*seq = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
	sqlite3_reset(s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int write_one(struct store_be *st, struct store_batch *b)
{
	size_t dropped;
	uint64_t last;
	int rc = SQLITE_OK;

	b->duplicate = 0;
	b->stored = 0;
	b->dropped = 0;
	if (b->agent_id) {
		rc = last_seq_of(st, b->agent_id, &last);
		if (rc != SQLITE_OK)
			return rc;
		if (b->seq <= last) {
			b->duplicate = 1;
			return SQLITE_OK;
		}
	}
	st->dropped = 0;
	rc = write_spans(st, b);
	if (rc != SQLITE_OK)
		return rc;
	dropped = st->dropped; /* of the batch's spans (not of spans merged from parts) */
	if (b->nparts) {
		rc = write_parts(st, b);
		if (rc != SQLITE_OK)
			return rc;
	}
	b->stored = b->nspans - dropped + b->nparts;
	b->dropped = dropped;
	if (b->agent_id) {
		sqlite3_stmt *s = st->st[ST_AGENT_BATCH];

		sqlite3_bind_text(s, 1, b->agent_id, -1, SQLITE_STATIC);
		sq_bind_cstr(s, 2, b->host);
		sqlite3_bind_int64(s, 3, (sqlite3_int64)b->seq);
		sqlite3_bind_int64(s, 4, (sqlite3_int64)st->now_us);
		sqlite3_bind_int64(s, 5, (sqlite3_int64)b->stored);
		rc = sq_step_done(s);
	}
	return rc;
}

static void rollback(struct store_be *st, int64_t max_seq)
{
	sq_step_done(st->st[ST_ROLLBACK]);
	sq_tm_reset(st);
	st->max_seq = max_seq;
	/* names written by the transaction are gone again */
	sq_nameset_clear(&st->names);
}

int sq__write(struct store_be *st, struct store_batch **b, size_t n,
		 char *err, size_t errlen)
{
	int64_t max_seq = st->max_seq;
	int rc;

	if (st->flags & STORE_F_READONLY) {
		sq_set_err(err, errlen, "%s: opened read-only", st->path);
		return -EROFS;
	}
	st->now_us = clock_realtime_ns() / 1000;
	st->why[0] = '\0';
	rc = sq_step_done(st->st[ST_BEGIN]);
	if (rc != SQLITE_OK) {
		sq_set_err(err, errlen, "%s: BEGIN: %s", st->path, sqlite3_errmsg(st->db));
		return sq_errno(rc);
	}
	for (size_t i = 0; i < n; i++) {
		rc = write_one(st, b[i]);
		if (rc != SQLITE_OK)
			goto fail;
	}
	rc = sq_flush_traces(st);
	if (rc != SQLITE_OK)
		goto fail;
	rc = sq_step_done(st->st[ST_COMMIT]);
	if (rc != SQLITE_OK)
		goto fail;
	return 0;
fail:
	sq_set_err(err, errlen, "%s: storing spans: %s", st->path,
		st->why[0] ? st->why :
		rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(st->db));
	rollback(st, max_seq);
	for (size_t i = 0; i < n; i++)
		b[i]->stored = 0, b[i]->duplicate = 0, b[i]->dropped = 0;
	return sq_errno(rc);
}

int sq__agent_hello(struct store_be *st, const char *agent_id, const char *host,
		       const char *version, uint64_t *last_seq)
{
	sqlite3_stmt *s = st->st[ST_AGENT_HELLO];
	int rc;

	sqlite3_bind_text(s, 1, agent_id, -1, SQLITE_STATIC);
	sq_bind_cstr(s, 2, host);
	sq_bind_cstr(s, 3, version);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)(clock_realtime_ns() / 1000));
	rc = sqlite3_step(s);
	*last_seq = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
	/* RETURNING: the row change is committed when the statement finishes */
	while (rc == SQLITE_ROW)
		rc = sqlite3_step(s);
	sqlite3_reset(s);
	if (rc != SQLITE_DONE) {
		pr_warn("store: %s: agent %s: %s", st->path, agent_id, sqlite3_errmsg(st->db));
		return sq_errno(rc);
	}
	return 0;
}

int sq__agent_stats(struct store_be *st, const char *agent_id, const char *json)
{
	sqlite3_stmt *s = st->st[ST_AGENT_STATS];

	sqlite3_bind_text(s, 1, agent_id, -1, SQLITE_STATIC);
	sq_bind_cstr(s, 2, json);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)(clock_realtime_ns() / 1000));
	return sq_errno(sq_step_done(s));
}

int sq__agent_last_seq(struct store_be *st, const char *agent_id, uint64_t *last_seq)
{
	return sq_errno(last_seq_of(st, agent_id, last_seq));
}

/* ---- retention ---------------------------------------------------------- */

/* Forget names no span newer than cutoff_us carried (their last_us may lag
 * by NAME_LAST_SLACK_US, hence the margin). */
int sq__set_autocomplete_keys(struct store_be *st, const char *const *keys, size_t n)
{
	char **v = n ? calloc(n, sizeof(*v)) : NULL;

	if (n && !v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		v[i] = strdup(keys[i]);
		if (!v[i]) {
			while (i)
				free(v[--i]);
			free(v);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < st->nac_keys; i++)
		free(st->ac_keys[i]);
	free(st->ac_keys);
	st->ac_keys = v;
	st->nac_keys = n;
	return 0;
}

static int prune_names(struct store_be *st, uint64_t cutoff_us)
{
	uint64_t c = cutoff_us > NAME_LAST_SLACK_US ? cutoff_us - NAME_LAST_SLACK_US : 0;
	char sql[512];
	int rc;

	snprintf(sql, sizeof(sql),
		 "BEGIN IMMEDIATE;"
		 "DELETE FROM services WHERE last_us < %" PRIu64 ";"
		 "DELETE FROM span_names WHERE last_us < %" PRIu64 ";"
		 "DELETE FROM remote_services WHERE last_us < %" PRIu64 ";"
		 "DELETE FROM autocomplete WHERE last_us < %" PRIu64 ";"
		 "COMMIT;", c, c, c, c);
	rc = sq_exec(st->db, sql);
	if (rc != SQLITE_OK)
		sq_exec(st->db, "ROLLBACK");
	sq_nameset_clear(&st->names);
	return rc;
}

int sq__retain(struct store_be *st, uint64_t before_us, unsigned chunk)
{
	sqlite3_stmt *sel = st->st[ST_RETAIN_SEL];
	int64_t seqs[256];
	int64_t total = 0;
	int n = 0, rc;

	rc = sq_step_done(st->st[ST_BEGIN]);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(sel, 1, (sqlite3_int64)before_us);
		sqlite3_bind_int64(sel, 2, chunk < ARRAY_SIZE(seqs) ? chunk : ARRAY_SIZE(seqs));
		while ((rc = sqlite3_step(sel)) == SQLITE_ROW)
			seqs[n++] = sqlite3_column_int64(sel, 0);
		sqlite3_reset(sel);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	/* whole traces, until chunk rows went */
	for (int i = 0; i < n && rc == SQLITE_OK && total < (int64_t)chunk; i++) {
		int64_t rows = 0;

		for (int k = ST_RETAIN_SPANS; k <= ST_RETAIN_TRACE && rc == SQLITE_OK; k++) {
			sqlite3_bind_int64(st->st[k], 1, seqs[i]);
			rc = sq_step_done(st->st[k]);
			if (k != ST_RETAIN_TRACE)
				rows += sqlite3_changes(st->db);
		}
		total += rows ? rows : 1; /* an empty trace counts as one */
	}
	/* standing queries' windows that ended before the cutoff */
	if (rc == SQLITE_OK && total < (int64_t)chunk) {
		sqlite3_stmt *w = st->st[ST_RETAIN_WINDOWS];

		sqlite3_bind_int64(w, 1, (sqlite3_int64)before_us);
		sqlite3_bind_int64(w, 2, (sqlite3_int64)chunk - total);
		rc = sq_step_done(w);
		if (rc == SQLITE_OK)
			total += sqlite3_changes(st->db);
	}
	if (rc == SQLITE_OK)
		rc = sq_step_done(st->st[ST_COMMIT]);
	if (rc != SQLITE_OK) {
		pr_warn("store: %s: retention: %s", st->path, sqlite3_errmsg(st->db));
		rollback(st, st->max_seq);
		return sq_errno(rc);
	}
	st->retained += (uint64_t)total;
	if (!total && st->retained) {
		st->retained = 0;
		rc = prune_names(st, before_us);
		if (rc != SQLITE_OK)
			pr_warn("store: %s: pruning names: %s", st->path, sqlite3_errmsg(st->db));
	}
	return (int)total;
}
