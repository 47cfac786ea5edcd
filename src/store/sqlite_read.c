// SPDX-License-Identifier: MIT
/*
 * The SQLite store: the read side.  Each reader has its own connection
 * (WAL lets readers run while the writer commits) and prepares statements
 * on first use.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "store/sqlite_int.h"
#include "store/store.h"

enum {
	RS_SERVICES, RS_SPAN_NAMES, RS_REMOTES, RS_AUTOCOMPLETE,
	RS_TRACE_SEQ, RS_TRACE_ID, RS_TRACE_SPANS, RS_SEARCH,
	RS_BEGIN, RS_COMMIT,
	RS_COUNT_SPANS, RS_COUNT_PARTS, RS_COUNT_AGENTS,
	RS_MAX,
};

static const char *const rs_sql[RS_MAX] = {
	[RS_SERVICES] = "SELECT name FROM services ORDER BY name",
	[RS_SPAN_NAMES] = "SELECT name FROM span_names WHERE service = ? ORDER BY name",
	[RS_REMOTES] = "SELECT remote FROM remote_services WHERE service = ? ORDER BY remote",
	[RS_AUTOCOMPLETE] = "SELECT value FROM autocomplete WHERE key = ? ORDER BY value",
	[RS_TRACE_SEQ] = "SELECT seq FROM traces WHERE trace_hi = ? AND trace_lo = ?",
	[RS_TRACE_ID] = "SELECT trace_hi, trace_lo FROM traces WHERE seq = ?",
	[RS_TRACE_SPANS] = "SELECT " SQ_SPAN_COLS " FROM span_rows WHERE "
			   SQ_TRACE_RANGE("span_rows", "?1") " ORDER BY start_us, seq_no",
	/* Trace search: newest first over the covering index, one entry per
	 * trace; the caller skips what the Bloom filter rules out. */
	[RS_SEARCH] = "SELECT seq, bloom, ts_us FROM traces INDEXED BY traces_ts"
		      " WHERE ts_us BETWEEN ?1 AND ?2 AND max_dur_us >= ?3"
		      " ORDER BY ts_us DESC",
	[RS_BEGIN] = "BEGIN",
	[RS_COMMIT] = "COMMIT",
	[RS_COUNT_SPANS] = "SELECT count(*) FROM span_rows",
	[RS_COUNT_PARTS] = "SELECT count(*) FROM span_parts",
	[RS_COUNT_AGENTS] = "SELECT count(*) FROM agents",
};

struct store_rd {
	sqlite3 *db;
	sqlite3_stmt *st[RS_MAX];
};

struct store_rd *sq__reader_new(struct store_be *st)
{
	struct store_rd *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return fay_err_ptr(-ENOMEM);
	rc = sqlite3_open_v2(sq__path(st), &r->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(r->db, 10000);
		/* A small page cache and no mmap of the file: the kernel's
		 * page cache holds the file for every reader at once, while
		 * each reader's own cache (16 MiB before, up to 8 readers)
		 * and mapping (256 MiB before) counted in the collector's
		 * RSS; reads were no faster with them (bench_store, 2 M
		 * spans: trace by id 0.02 ms, search 0.81-0.92 ms either
		 * way; bench/RESULTS.md "Soak"). */
		rc = sqlite3_exec(r->db, "PRAGMA query_only = 1; PRAGMA cache_size = -2048;"
				  " PRAGMA mmap_size = 0;",
				  NULL, NULL, NULL);
	}
	if (rc != SQLITE_OK) {
		pr_warn("store: %s: reader: %s", sq__path(st),
			r->db ? sqlite3_errmsg(r->db) : sqlite3_errstr(rc));
		sq__reader_free(r);
		return fay_err_ptr(-EIO);
	}
	return r;
}

sqlite3 *sq_reader_db(struct store_rd *r)
{
	return r->db;
}

void sq__reader_free(struct store_rd *r)
{
	if (!r)
		return;
	for (int i = 0; i < RS_MAX; i++)
		sqlite3_finalize(r->st[i]);
	sqlite3_close(r->db);
	free(r);
}

static sqlite3_stmt *stmt(struct store_rd *r, int i)
{
	if (!r->st[i] && sqlite3_prepare_v3(r->db, rs_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					    &r->st[i], NULL) != SQLITE_OK) {
		pr_warn("store: prepare: %s", sqlite3_errmsg(r->db));
		return NULL;
	}
	return r->st[i];
}

static int rd_err(struct store_rd *r, int rc)
{
	pr_warn("store: read: %s", sqlite3_errmsg(r->db));
	return rc == SQLITE_BUSY ? -EBUSY : rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
}

static int names(struct store_rd *r, int which, const char *arg,
		 struct store_names *out)
{
	sqlite3_stmt *s = stmt(r, which);
	size_t cap = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!s)
		return -EIO;
	if (arg)
		sqlite3_bind_text(s, 1, arg, -1, SQLITE_TRANSIENT);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(s, 0);

		if (zarena_grow(&out->arena, (void **)&out->v, out->n, &cap, sizeof(*out->v)))
			goto oom;
		if (zarena_str(&out->arena, &out->v[out->n], t ? t : "",
			       (size_t)sqlite3_column_bytes(s, 0), 0))
			goto oom;
		out->n++;
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return rd_err(r, rc);
	return 0;
oom:
	sqlite3_reset(s);
	return -ENOMEM;
}

int sq__services(struct store_rd *r, struct store_names *out)
{
	return names(r, RS_SERVICES, NULL, out);
}

int sq__span_names(struct store_rd *r, const char *service,
		      struct store_names *out)
{
	return names(r, RS_SPAN_NAMES, service, out);
}

int sq__remote_services(struct store_rd *r, const char *service,
			   struct store_names *out)
{
	return names(r, RS_REMOTES, service, out);
}

int sq__autocomplete_values(struct store_rd *r, const char *key, struct store_names *out)
{
	return names(r, RS_AUTOCOMPLETE, key, out);
}

/* ---- traces ----------------------------------------------------------- */

static struct store_trace *traces_add(struct store_traces *out)
{
	if (zarena_grow(&out->arena, (void **)&out->v, out->n, &out->cap, sizeof(*out->v)))
		return NULL;
	memset(&out->v[out->n], 0, sizeof(out->v[0]));
	return &out->v[out->n++];
}

/* Append the trace with this seq to out: 1, or 0 if it has no spans. */
static int load_trace(struct store_rd *r, int64_t seq, uint64_t hi, uint64_t lo,
		      struct store_traces *out)
{
	sqlite3_stmt *s = stmt(r, RS_TRACE_SPANS);
	struct store_trace *t;
	size_t cap = 0;
	int rc;

	if (!s)
		return -EIO;
	t = traces_add(out);
	if (!t)
		return -ENOMEM;
	sqlite3_bind_int64(s, 1, seq);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct zspan *z;

		if (zarena_grow(&out->arena, (void **)&t->spans, t->n, &cap, sizeof(*t->spans)))
			goto oom;
		z = &t->spans[t->n];
		if (sq_row_span(s, 0, &out->arena, z))
			goto oom;
		z->trace_hi = hi;
		z->trace_lo = lo;
		t->n++;
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE) {
		out->n--;
		return rd_err(r, rc);
	}
	if (!t->n) {
		out->n--;
		return 0;
	}
	t->ts_us = store_trace_ts(t->spans, t->n);
	return 1;
oom:
	sqlite3_reset(s);
	out->n--;
	return -ENOMEM;
}

/* Run a statement that returns nothing (BEGIN, COMMIT). */
static int rd_exec(struct store_rd *r, int which)
{
	sqlite3_stmt *s = stmt(r, which);
	int rc;

	if (!s)
		return -EIO;
	rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? 0 : rd_err(r, rc);
}

int sq__trace(struct store_rd *r, uint64_t hi, uint64_t lo,
		 struct store_traces *out)
{
	sqlite3_stmt *s = stmt(r, RS_TRACE_SEQ);
	int64_t seq;
	int rc, ret;

	if (!s)
		return -EIO;
	ret = rd_exec(r, RS_BEGIN); /* one snapshot for the trace and its spans */
	if (ret)
		return ret;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)hi);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)lo);
	rc = sqlite3_step(s);
	seq = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
	sqlite3_reset(s);
	if (rc == SQLITE_ROW)
		ret = load_trace(r, seq, hi, lo, out);
	else if (rc != SQLITE_DONE)
		ret = rd_err(r, rc);
	rd_exec(r, RS_COMMIT);
	return ret;
}

/* ---- trace search ------------------------------------------------------- */

/* The trace id of seq into *hi, *lo: 1, 0 if gone, -errno. */
static int trace_id(struct store_rd *r, int64_t seq, uint64_t *hi, uint64_t *lo)
{
	sqlite3_stmt *s = stmt(r, RS_TRACE_ID);
	int rc;

	if (!s)
		return -EIO;
	sqlite3_bind_int64(s, 1, seq);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*hi = (uint64_t)sqlite3_column_int64(s, 0);
		*lo = (uint64_t)sqlite3_column_int64(s, 1);
	}
	sqlite3_reset(s);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : rd_err(r, rc);
}

/*
 * Walk the traces of the window newest first (traces_ts: the Zipkin trace
 * timestamp, so the order and the window are exactly Zipkin's), skip those
 * whose longest span is too short or whose Bloom filter lacks a term of
 * the query, and let store_query_test() decide on the whole trace for the
 * rest, until limit traces matched and the next is older than the last
 * (traces of equal timestamps all compete for the last places:
 * store_trace_newer() picks, as on every backend).
 */
int sq__traces(struct store_rd *r, const struct store_query *q,
		  struct store_traces *out)
{
	uint64_t begin_us, end_us;
	uint8_t mask[SQ_BLOOM_BYTES];
	unsigned terms = sq_bloom_query(mask, q);
	sqlite3_stmt *s = stmt(r, RS_SEARCH);
	int rc = SQLITE_DONE, ret;

	store_query_window(q, &begin_us, &end_us);
	if (!s)
		return -EIO;
	ret = rd_exec(r, RS_BEGIN);
	if (ret)
		return ret;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)begin_us);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)end_us);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)q->min_duration_us);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t seq = sqlite3_column_int64(s, 0);
		uint64_t hi, lo;
		struct store_trace *t;

		if (out->n >= q->limit && (!out->n ||
		    (uint64_t)sqlite3_column_int64(s, 2) < out->v[out->n - 1].ts_us))
			break;
		if (terms && !sq_bloom_may(sqlite3_column_blob(s, 1),
					   (size_t)sqlite3_column_bytes(s, 1), mask))
			continue;
		ret = trace_id(r, seq, &hi, &lo);
		if (ret > 0)
			ret = load_trace(r, seq, hi, lo, out);
		if (ret < 0)
			goto out;
		if (!ret)
			continue;
		t = &out->v[out->n - 1];
		if (!store_query_test(q, t->spans, t->n))
			out->n--; /* its memory stays in the arena until freed */
	}
	ret = 0;
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		ret = rd_err(r, rc);
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), store_trace_newer);
	if (out->n > q->limit)
		out->n = q->limit;
out:
	sqlite3_reset(s);
	rd_exec(r, RS_COMMIT);
	return ret;
}

int sq__counts(struct store_rd *r, struct store_counts *c)
{
	uint64_t *dst[] = { &c->spans, &c->parts, &c->agents };

	for (int i = 0; i < 3; i++) {
		sqlite3_stmt *s = stmt(r, RS_COUNT_SPANS + i);
		int rc;

		if (!s)
			return -EIO;
		rc = sqlite3_step(s);
		*dst[i] = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
		sqlite3_reset(s);
		if (rc != SQLITE_ROW)
			return rd_err(r, rc);
	}
	return 0;
}
