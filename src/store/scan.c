// SPDX-License-Identifier: MIT
/*
 * The SQLite store: scans for the web UI (dashboard, dependency graph,
 * hosts).  They read on the reader's connection with statements of their
 * own, prepared per call (a scan reads thousands of rows; the prepare is
 * noise next to it).  The span scan speaks both layouts of the spans
 * table: schema 1 (trace ids on every span row) and schema 2 (spans keyed
 * by traces.seq, see schema.sql), chosen by the file's user_version.
 */
#include <errno.h>
#include <sqlite3.h>
#include <string.h>

#include "common/log.h"
#include "store/sqlite_int.h"
#include "store/store.h"

static int scan_err(sqlite3 *db, int rc)
{
	pr_warn("store: scan: %s", sqlite3_errmsg(db));
	return rc == SQLITE_BUSY ? -EBUSY : rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
}

static struct zs_str col_str(sqlite3_stmt *s, int i)
{
	const char *t = (const char *)sqlite3_column_text(s, i);

	return t ? (struct zs_str){ t, (uint32_t)sqlite3_column_bytes(s, i) } :
		   (struct zs_str){ "", 0 };
}

/* Bind [from_us, to_us] to sql's ?1 ?2 and call fn for each span row. */
static int run_scan(sqlite3 *db, const char *sql, uint64_t from_us, uint64_t to_us,
		    int (*fn)(void *ctx, const struct store_row *row), void *ctx)
{
	sqlite3_stmt *s = NULL;
	int rc, ret = 0;

	rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return scan_err(db, rc);
	sqlite3_bind_int64(s, 1, (sqlite3_int64)from_us);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)to_us);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_row row = {
			.trace_hi = (uint64_t)sqlite3_column_int64(s, 0),
			.trace_lo = (uint64_t)sqlite3_column_int64(s, 1),
			.id = (uint64_t)sqlite3_column_int64(s, 2),
			.parent_id = (uint64_t)sqlite3_column_int64(s, 3),
			.kind = (uint8_t)sqlite3_column_int(s, 4),
			.shared = (uint8_t)sqlite3_column_int(s, 5),
			.error = (uint8_t)sqlite3_column_int(s, 6),
			.service = col_str(s, 7),
			.remote_service = col_str(s, 8),
			.name = col_str(s, 9),
			.start_us = (uint64_t)sqlite3_column_int64(s, 10),
			.duration_us = (uint64_t)sqlite3_column_int64(s, 11),
			.ipv4 = col_str(s, 12),
			.ipv6 = col_str(s, 13),
			.port = (uint16_t)sqlite3_column_int(s, 14),
		};

		ret = fn(ctx, &row);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = scan_err(db, rc);
	sqlite3_finalize(s);
	return ret;
}

static int user_version(sqlite3 *db)
{
	sqlite3_stmt *s = NULL;
	int version = 0;

	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW)
		version = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	return version;
}

#define SCAN_COLS \
	"t.trace_hi, t.trace_lo, s.id, s.parent_id, s.kind, s.shared, s.error," \
	" s.local_service, s.remote_service, s.name, s.start_us, s.duration_us," \
	" s.local_ipv4, s.local_ipv6, s.local_port"

int sq__scan(struct store_rd *r, uint64_t from_us, uint64_t to_us,
		int (*fn)(void *ctx, const struct store_row *row), void *ctx)
{
	static const char sql_v1[] =
		"SELECT trace_hi, trace_lo, id, parent_id, kind, shared, error,"
		" local_service, remote_service, name, start_us, duration_us,"
		" local_ipv4, local_ipv6, local_port"
		" FROM spans INDEXED BY spans_ts WHERE start_us >= ?1 AND start_us < ?2"
		" ORDER BY trace_hi, trace_lo, start_us";
	/* traces that end after the window starts, their spans in it */
	static const char sql_v2[] =
		"SELECT " SCAN_COLS
		" FROM traces t INDEXED BY traces_end JOIN span_rows s ON "
		SQ_TRACE_RANGE("s", "t.seq")
		" WHERE t.end_us >= ?1 AND s.start_us >= ?1 AND s.start_us < ?2"
		" ORDER BY t.seq, s.start_us";
	sqlite3 *db = sq_reader_db(r);

	return run_scan(db, user_version(db) >= 2 ? sql_v2 : sql_v1, from_us, to_us, fn, ctx);
}

int sq__scan_traces(struct store_rd *r, uint64_t from_us, uint64_t to_us,
		    int (*fn)(void *ctx, const struct store_row *row), void *ctx)
{
	/* traces with a span that started in the window, every span of
	 * them, traces of one low id half together */
	static const char sql[] =
		"SELECT " SCAN_COLS
		" FROM traces t INDEXED BY traces_end JOIN span_rows s ON "
		SQ_TRACE_RANGE("s", "t.seq")
		" WHERE t.end_us >= ?1 AND t.min_us <= ?2 AND EXISTS (SELECT 1 FROM span_rows w"
		"  WHERE " SQ_TRACE_RANGE("w", "t.seq")
		" AND w.start_us >= ?1 AND w.start_us <= ?2)"
		" ORDER BY t.trace_lo, t.seq, s.start_us";
	sqlite3 *db = sq_reader_db(r);

	if (user_version(db) < 2)
		return sq__scan(r, from_us, to_us + 1, fn, ctx);
	return run_scan(db, sql, from_us, to_us, fn, ctx);
}

int sq__agents(struct store_rd *r,
		  int (*fn)(void *ctx, const struct store_agent *a), void *ctx)
{
	static const char sql[] =
		"SELECT agent_id, host, version, last_seq, first_seen_us, last_seen_us,"
		" batches, spans, stats, stats_us FROM agents ORDER BY agent_id";
	sqlite3 *db = sq_reader_db(r);
	sqlite3_stmt *s = NULL;
	int rc, ret = 0;

	rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return scan_err(db, rc);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_agent a = {
			.id = (const char *)sqlite3_column_text(s, 0),
			.host = (const char *)sqlite3_column_text(s, 1),
			.version = (const char *)sqlite3_column_text(s, 2),
			.last_seq = (uint64_t)sqlite3_column_int64(s, 3),
			.first_seen_us = (uint64_t)sqlite3_column_int64(s, 4),
			.last_seen_us = (uint64_t)sqlite3_column_int64(s, 5),
			.batches = (uint64_t)sqlite3_column_int64(s, 6),
			.spans = (uint64_t)sqlite3_column_int64(s, 7),
			.stats = (const char *)sqlite3_column_text(s, 8),
			.stats_us = (uint64_t)sqlite3_column_int64(s, 9),
		};

		if (!a.id)
			continue;
		ret = fn(ctx, &a);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = scan_err(db, rc);
	sqlite3_finalize(s);
	return ret;
}
