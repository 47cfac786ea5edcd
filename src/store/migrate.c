// SPDX-License-Identifier: MIT
/*
 * The SQLite store: schema migrations that need more than SQL.
 *
 * 1 -> 2: version 1 kept one spans table (trace id, three secondary
 * indexes, annotations and tags as JSON text) and span_parts keyed by the
 * trace id.  Version 2 (schema.sql) has a traces table, spans clustered
 * by trace seq with annotations and tags in a binary blob, and
 * span_parts keyed by trace seq.  The migration renames the old tables,
 * creates the new ones, copies every span and partial record through the
 * store's own write path (so the trace rows and their Bloom filters are
 * built exactly as for new data) and drops the old tables, all in the one
 * transaction that sets user_version to 2: an interrupted migration
 * leaves the file at version 1.
 *
 * 2 -> 3: the autocomplete table (values of the tags with configured
 * keys, Zipkin's autocompleteValues), empty: values are recorded as spans
 * arrive, as Zipkin's own storages do.
 *
 * 4 -> 5: the spans table (WITHOUT ROWID, key (trace_seq, no)) becomes
 * span_rows, a rowid table keyed by seq_no = trace_seq << 20 | no, and a
 * view named spans shows it with the old columns.  The rows are copied
 * in key order by one INSERT ... SELECT, then the old table is dropped,
 * in the migration's one transaction: a crash or an error on the way
 * leaves the file at version 4 with its spans.  A file whose numbers do
 * not fit the key (a trace of more than 2^20 spans, a seq of 2^43) is
 * refused, and stays at version 4.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "store/sqlite_int.h"
#include "store/store.h"

/* Spans per trace-row flush while copying. */
#define COPY_CHUNK 20000

static const char v1_prepare[] =
	"DROP INDEX spans_trace; DROP INDEX spans_service_ts; DROP INDEX spans_ts;"
	"DROP INDEX span_parts_span; DROP INDEX span_parts_ts;"
	"ALTER TABLE spans RENAME TO v1_spans;"
	"ALTER TABLE span_parts RENAME TO v1_span_parts;"
	"ALTER TABLE services ADD COLUMN last_us INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE span_names ADD COLUMN last_us INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE remote_services ADD COLUMN last_us INTEGER NOT NULL DEFAULT 0;";

static const char v1_spans[] =
	"SELECT trace_hi, trace_lo, id, parent_id, kind, name,"
	" local_service, local_ipv4, local_ipv6, local_port,"
	" remote_service, remote_ipv4, remote_ipv6, remote_port,"
	" start_us, duration_us, shared, debug, annotations, tags, origin"
	" FROM v1_spans ORDER BY rowid";

static const char v1_parts[] =
	"SELECT trace_hi, trace_lo, id, parent_id, name, service, ipv4, ipv6, port,"
	" remote_service, remote_ipv4, remote_ipv6, remote_port, debug, is_tag, ts_us,"
	" key, value FROM v1_span_parts ORDER BY rowid";

static int jstr(json_t *v, struct zarena *a, struct zs_str *out)
{
	if (!json_is_string(v)) {
		*out = (struct zs_str){ "", 0 };
		return 0;
	}
	return zarena_str(a, out, json_string_value(v), json_string_length(v), 0);
}

static json_t *json_col(sqlite3_stmt *s, int i)
{
	const char *t = (const char *)sqlite3_column_text(s, i);

	return t ? json_loadb(t, (size_t)sqlite3_column_bytes(s, i), 0, NULL) : NULL;
}

/* Version 1's JSON columns (annotations 18, tags 19) into z; a column
 * that does not parse is dropped, as version 1's reader did. */
static int v1_lists(sqlite3_stmt *s, struct zarena *a, struct zspan *z)
{
	json_t *ann = json_col(s, 18), *tags = json_col(s, 19), *v;
	const char *k;
	size_t i;
	int ret = -ENOMEM;

	if (json_is_array(ann) && json_array_size(ann)) {
		z->annotations = zarena_alloc(a, sizeof(*z->annotations) * json_array_size(ann));
		if (!z->annotations)
			goto out;
		json_array_foreach(ann, i, v) {
			struct zs_annotation *an = &z->annotations[z->nannotations];

			an->ts_us = (uint64_t)json_integer_value(json_object_get(v, "timestamp"));
			if (jstr(json_object_get(v, "value"), a, &an->value))
				goto out;
			z->nannotations++;
		}
	}
	if (json_is_object(tags) && json_object_size(tags)) {
		z->tags = zarena_alloc(a, sizeof(*z->tags) * json_object_size(tags));
		if (!z->tags)
			goto out;
		json_object_foreach(tags, k, v) {
			struct zs_tag *t = &z->tags[z->ntags];

			if (zarena_str(a, &t->key, k, strlen(k), 0) || jstr(v, a, &t->value))
				goto out;
			z->ntags++;
		}
	}
	ret = 0;
out:
	json_decref(ann);
	json_decref(tags);
	return ret;
}

/* One version 1 spans row through the write path. */
static int copy_span(struct store_be *st, sqlite3_stmt *s, struct zarena *a)
{
	struct zspan z = { 0 };

	z.trace_hi = (uint64_t)sqlite3_column_int64(s, 0);
	z.trace_lo = (uint64_t)sqlite3_column_int64(s, 1);
	z.id = (uint64_t)sqlite3_column_int64(s, 2);
	z.parent_id = (uint64_t)sqlite3_column_int64(s, 3);
	z.kind = (uint8_t)sqlite3_column_int(s, 4);
	if (z.kind >= SPAN_KIND_MAX)
		z.kind = SPAN_KIND_UNSET;
	if (sq_col_str(s, 5, a, &z.name) || sq_col_ep(s, 6, a, &z.local) ||
	    sq_col_ep(s, 10, a, &z.remote) || v1_lists(s, a, &z))
		return SQLITE_NOMEM;
	z.timestamp_us = (uint64_t)sqlite3_column_int64(s, 14);
	z.duration_us = (uint64_t)sqlite3_column_int64(s, 15);
	z.shared = (uint8_t)sqlite3_column_int(s, 16);
	z.debug = (uint8_t)sqlite3_column_int(s, 17);
	zspan_normalize(&z);
	return sq_insert_span(st, &z, sqlite3_column_int(s, 20));
}

/* One version 1 span_parts row through the write path. */
static int copy_part(struct store_be *st, sqlite3_stmt *s, struct zarena *a)
{
	struct zs_part p = { 0 };

	p.trace_hi = (uint64_t)sqlite3_column_int64(s, 0);
	p.trace_lo = (uint64_t)sqlite3_column_int64(s, 1);
	p.id = (uint64_t)sqlite3_column_int64(s, 2);
	p.parent_id = (uint64_t)sqlite3_column_int64(s, 3);
	if (sq_col_str(s, 4, a, &p.name) || sq_col_ep(s, 5, a, &p.local) ||
	    sq_col_ep(s, 9, a, &p.remote) || sq_col_str(s, 16, a, &p.key) ||
	    sq_col_str(s, 17, a, &p.value))
		return SQLITE_NOMEM;
	p.debug = (uint8_t)sqlite3_column_int(s, 13);
	p.is_tag = (uint8_t)sqlite3_column_int(s, 14);
	p.ts_us = (uint64_t)sqlite3_column_int64(s, 15);
	return sq_insert_part(st, &p);
}

/* Copy every row sql selects with fn, writing the trace rows every
 * COPY_CHUNK rows.  SQLite rc. */
static int copy(struct store_be *st, const char *sql, const char *what,
		int (*fn)(struct store_be *st, sqlite3_stmt *s, struct zarena *a))
{
	struct zarena a = { 0 };
	sqlite3_stmt *s;
	size_t n = 0;
	int rc;

	rc = sqlite3_prepare_v2(sq_db(st), sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		rc = fn(st, s, &a);
		if (rc == SQLITE_OK && ++n % COPY_CHUNK == 0) {
			rc = sq_flush_traces(st);
			zarena_reset(&a);
		}
		if (rc != SQLITE_OK)
			break;
	}
	sqlite3_finalize(s);
	if (rc == SQLITE_DONE) {
		pr_info("store: migration: %zu %s copied", n, what);
		rc = sq_flush_traces(st);
	}
	zarena_reset(&a);
	return rc;
}

/* schema.sql's objects are all IF NOT EXISTS: running it adds the new
 * tables of a step that only adds tables. */
static int add_tables(struct store_be *st, const char *step)
{
	int rc = sqlite3_exec(sq_db(st), store_schema_sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK)
		pr_warn("store: migration %s: %s", step, sqlite3_errmsg(sq_db(st)));
	return rc;
}

int sq_migrate_2_3(struct store_be *st)
{
	return add_tables(st, "2 -> 3");
}

int sq_migrate_3_4(struct store_be *st)
{
	return add_tables(st, "3 -> 4");
}

int sq_migrate_1_2(struct store_be *st)
{
	sqlite3 *db = sq_db(st);
	int rc;

	rc = sqlite3_exec(db, v1_prepare, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, store_schema_sql, NULL, NULL, NULL); /* the new objects */
	if (rc == SQLITE_OK)
		rc = sq_prepare(st);
	if (rc == SQLITE_OK)
		rc = copy(st, v1_spans, "spans", copy_span);
	if (rc == SQLITE_OK)
		rc = copy(st, v1_parts, "partial records", copy_part);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "DROP TABLE v1_spans; DROP TABLE v1_span_parts;",
				  NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		pr_warn("store: migration 1 -> 2: %s", sqlite3_errmsg(db));
	return rc;
}

/* The number of rows the query sql (one integer column) answers, or -1. */
static int64_t count_of(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	int64_t n = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW)
		n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return n;
}

int sq_migrate_4_5(struct store_be *st)
{
	static const char copy_rows[] =
		"INSERT INTO span_rows (seq_no, id, parent_id, kind, name,"
		" local_service, local_ipv4, local_ipv6, local_port,"
		" remote_service, remote_ipv4, remote_ipv6, remote_port,"
		" start_us, duration_us, shared, debug, error, origin, extra)"
		" SELECT trace_seq << 20 | no, id, parent_id, kind, name,"
		" local_service, local_ipv4, local_ipv6, local_port,"
		" remote_service, remote_ipv4, remote_ipv6, remote_port,"
		" start_us, duration_us, shared, debug, error, origin, extra"
		" FROM v4_spans ORDER BY trace_seq, no";
	sqlite3 *db = sq_db(st);
	int64_t n, bad, copied;
	int rc;

	/* a file migrated from version 1 was given schema 5's objects already */
	if (count_of(db, "SELECT count(*) FROM sqlite_master"
			 " WHERE name = 'spans' AND type = 'table'") == 0)
		return add_tables(st, "4 -> 5");
	n = count_of(db, "SELECT count(*) FROM spans");
	bad = count_of(db, "SELECT count(*) FROM spans WHERE trace_seq < 0"
			   " OR trace_seq >= (1 << 43) OR no < 0 OR no >= (1 << 20)");
	if (n < 0 || bad < 0) {
		pr_warn("store: migration 4 -> 5: %s", sqlite3_errmsg(db));
		return SQLITE_ERROR;
	}
	if (bad) {
		snprintf(st->why, sizeof(st->why), "4 -> 5: %" PRId64 " spans have a trace seq of"
			 " 2^43 or more or a number of 2^20 or more (a trace of more than 1,048,576"
			 " spans), which schema 5's key cannot hold; the file stays at version 4", bad);
		return SQLITE_RANGE;
	}
	rc = sqlite3_exec(db, "ALTER TABLE spans RENAME TO v4_spans", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = add_tables(st, "4 -> 5"); /* span_rows and the view spans */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, copy_rows, NULL, NULL, NULL);
	copied = rc == SQLITE_OK ? count_of(db, "SELECT count(*) FROM span_rows") : -1;
	if (rc == SQLITE_OK && copied != n) {
		snprintf(st->why, sizeof(st->why), "4 -> 5: %" PRId64 " spans copied of %" PRId64
			 "; the file stays at version 4", copied, n);
		return SQLITE_CORRUPT;
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "DROP TABLE v4_spans", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		pr_warn("store: migration 4 -> 5: %s", sqlite3_errmsg(db));
	return rc;
}
