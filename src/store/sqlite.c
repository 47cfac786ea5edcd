// SPDX-License-Identifier: MIT
/*
 * The SQLite store: opening (schema, migrations, refusing what is not a fay
 * store), the write statements, closing, and the ops table.  The schema
 * and the durability argument are in src/store/schema.sql.  The write path
 * is in sqlite_write.c (spans within a transaction) and sqlite_batch.c (a
 * write call, the agents table, retention); reading in sqlite_read.c,
 * scan.c and sqlite_sql.c.
 *
 * Checkpoints: sqlite_ckpt.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "store/backend.h"
#include "store/sqlite_int.h"

/* Migrations: store_migrations[v - 1] takes schema version v to v + 1,
 * inside a transaction that then sets user_version to v + 1.  Append,
 * never edit. */
static const sq_migration_fn store_migrations[] = {
	sq_migrate_1_2,   /* src/store/migrate.c */
	sq_migrate_2_3,
	sq_migrate_3_4,
	sq_migrate_4_5,
};
#define STORE_NMIGRATIONS ARRAY_SIZE(store_migrations)

/* The columns of a traces row, in the order of ST_INS_TRACE's parameters
 * 4.. (bind_trace()). */
#define TRACE_COLS "ts_us, root_us, min_us, end_us, max_dur_us, nspans, next_no," \
	" error, root_service, root_name, bloom"

/* One row of ST_INS_SPANS (SQ_SPAN_PARAMS parameters).  ST_INS_SPANS is
 * INSERT OR FAIL: a statement that writes several rows and may ABORT
 * opens a statement journal (a savepoint, and a copy of each page it
 * changes that the transaction changed before) so that it can undo its
 * own rows; OR FAIL has nothing to undo.  A failed row fails the whole
 * write: sq__write() rolls the transaction back either way. */
#define ROW20 "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
_Static_assert(SQ_SPAN_ROWS == 8, "ST_INS_SPANS has 8 rows");

static const char *const stmt_sql[ST_MAX] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_INS_SPAN] =
		"INSERT INTO span_rows (seq_no, id, parent_id, kind, name,"
		" local_service, local_ipv4, local_ipv6, local_port,"
		" remote_service, remote_ipv4, remote_ipv6, remote_port,"
		" start_us, duration_us, shared, debug, error, origin, extra)"
		" VALUES (?,?,?,?,?, ?,?,?,?, ?,?,?,?, ?,?,?,?,?,?,?)",
	[ST_INS_SPANS] =
		"INSERT OR FAIL INTO span_rows (seq_no, id, parent_id, kind, name,"
		" local_service, local_ipv4, local_ipv6, local_port,"
		" remote_service, remote_ipv4, remote_ipv6, remote_port,"
		" start_us, duration_us, shared, debug, error, origin, extra)"
		" VALUES " ROW20 "," ROW20 "," ROW20 "," ROW20 "," ROW20 "," ROW20 "," ROW20 "," ROW20,
	[ST_INS_PART] =
		"INSERT INTO span_parts (trace_seq, id, parent_id, name,"
		" service, ipv4, ipv6, port, remote_service, remote_ipv4, remote_ipv6,"
		" remote_port, debug, is_tag, ts_us, key, value)"
		" VALUES (?,?,?,?, ?,?,?,?,?,?,?, ?,?,?,?,?,?)",
	[ST_LAST_SEQ] = "SELECT last_seq FROM agents WHERE agent_id = ?",
	[ST_AGENT_BATCH] =
		"INSERT INTO agents (agent_id, host, last_seq, first_seen_us,"
		" last_seen_us, batches, spans) VALUES (?1, ?2, ?3, ?4, ?4, 1, ?5)"
		" ON CONFLICT (agent_id) DO UPDATE SET last_seq = excluded.last_seq,"
		" host = coalesce(excluded.host, host), last_seen_us = excluded.last_seen_us,"
		" batches = batches + 1, spans = spans + excluded.spans",
	[ST_AGENT_HELLO] =
		"INSERT INTO agents (agent_id, host, version, first_seen_us, last_seen_us)"
		" VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (agent_id) DO UPDATE SET"
		" host = coalesce(excluded.host, host), version = coalesce(excluded.version, version),"
		" last_seen_us = excluded.last_seen_us RETURNING last_seq",
	[ST_AGENT_STATS] =
		"UPDATE agents SET stats = ?2, stats_us = ?3, last_seen_us = ?3 WHERE agent_id = ?1",
	[ST_INS_SERVICE] =
		"INSERT INTO services (name, last_us) VALUES (?1, ?3) ON CONFLICT (name)"
		" DO UPDATE SET last_us = max(last_us, excluded.last_us)",
	[ST_INS_SPAN_NAME] =
		"INSERT INTO span_names (service, name, last_us) VALUES (?1, ?2, ?3)"
		" ON CONFLICT (service, name) DO UPDATE SET last_us = max(last_us, excluded.last_us)",
	[ST_INS_REMOTE] =
		"INSERT INTO remote_services (service, remote, last_us) VALUES (?1, ?2, ?3)"
		" ON CONFLICT (service, remote) DO UPDATE SET last_us = max(last_us, excluded.last_us)",
	[ST_INS_AUTOCOMPLETE] =
		"INSERT INTO autocomplete (key, value, last_us) VALUES (?1, ?2, ?3)"
		" ON CONFLICT (key, value) DO UPDATE SET last_us = max(last_us, excluded.last_us)",
	[ST_DEL_MERGED] =
		"DELETE FROM span_rows WHERE " SQ_TRACE_RANGE("span_rows", "?1")
		" AND id = ?2 AND origin = 1",
	[ST_SEL_PARTS] =
		"SELECT parent_id, name, service, ipv4, ipv6, port, remote_service,"
		" remote_ipv4, remote_ipv6, remote_port, debug, is_tag, ts_us, key, value"
		" FROM span_parts WHERE trace_seq = ? AND id = ?"
		" ORDER BY is_tag, ts_us, rowid",
	[ST_SEL_TRACE] =
		"SELECT seq, " TRACE_COLS " FROM traces WHERE trace_hi = ? AND trace_lo = ?",
	[ST_SEL_TRACE_SPANS] = "SELECT " SQ_SPAN_COLS " FROM span_rows WHERE "
		SQ_TRACE_RANGE("span_rows", "?1"),
	[ST_INS_TRACE] =
		"INSERT INTO traces (seq, trace_hi, trace_lo, " TRACE_COLS ")"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
	[ST_UPD_TRACE] =
		"UPDATE traces SET ts_us = ?4, root_us = ?5, min_us = ?6, end_us = ?7,"
		" max_dur_us = ?8, nspans = ?9, next_no = ?10, error = ?11,"
		" root_service = ?12, root_name = ?13, bloom = ?14"
		" WHERE seq = ?1 AND trace_hi = ?2 AND trace_lo = ?3",
	[ST_MAX_SEQ] = "SELECT coalesce(max(seq), 0) FROM traces",
	[ST_RETAIN_SEL] =
		"SELECT seq FROM traces INDEXED BY traces_end WHERE end_us < ?1 LIMIT ?2",
	[ST_RETAIN_SPANS] = "DELETE FROM span_rows WHERE " SQ_TRACE_RANGE("span_rows", "?1"),
	[ST_RETAIN_PARTS] = "DELETE FROM span_parts WHERE trace_seq = ?",
	[ST_RETAIN_TRACE] = "DELETE FROM traces WHERE seq = ?",
	[ST_RETAIN_WINDOWS] = "DELETE FROM query_windows WHERE rowid IN (SELECT rowid FROM"
		" query_windows WHERE end_us < ?1 LIMIT ?2)",
};

const char *sq__path(const struct store_be *st)
{
	return st->path;
}

/* ---- errors ------------------------------------------------------------- */

/* Map an SQLite result code to -errno. */
int sq_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return -EBADMSG;
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
		return -EINVAL;
	default:
		return -EIO;
	}
}

__attribute__((format(printf, 3, 4)))
void sq_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The message of a failed open/check, naming the file. */
static int open_fail(sqlite3 *db, int rc, const char *path, const char *what,
		     char *err, size_t errlen)
{
	const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);

	switch (rc & 0xff) {
	case SQLITE_NOTADB:
		sq_set_err(err, errlen, "%s: not an SQLite database (%s); refusing to use it",
			path, msg);
		break;
	case SQLITE_CORRUPT:
		sq_set_err(err, errlen, "%s: the database is corrupt (%s); refusing to use it",
			path, msg);
		break;
	case SQLITE_CANTOPEN:
		sq_set_err(err, errlen, "%s: cannot open (%s; does the directory exist and is it writable?)",
			path, msg);
		break;
	default:
		sq_set_err(err, errlen, "%s: %s: %s", path, what, msg);
	}
	return sq_errno(rc);
}

/* ---- open --------------------------------------------------------------- */

int sq_exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static int pragma_int(sqlite3 *db, const char *sql, int64_t *v)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);

	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		*v = 0;
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

/* Connection settings shared by the writer and the readers. */
static int tune(sqlite3 *db, int writer)
{
	const char *sync = getenv("FAY_STORE_SYNC");
	int rc;

	sqlite3_busy_timeout(db, 10000);
	/* Page cache: 64 MiB for the one writer, 8 MiB for each reader (up
	 * to 8 pooled): 64 MiB each let a long soak's collector grow to
	 * 390 MiB of RSS (bench/RESULTS.md, soak), for reads that mostly
	 * touch the newest pages. */
	rc = sq_exec(db, writer ? "PRAGMA cache_size = -65536; PRAGMA temp_store = MEMORY;"
			     : "PRAGMA cache_size = -8192; PRAGMA temp_store = MEMORY;");
	if (rc != SQLITE_OK || !writer)
		return rc;
	if (sync && !strcasecmp(sync, "full"))
		return sq_exec(db, "PRAGMA synchronous = FULL;");
	return sq_exec(db, "PRAGMA synchronous = NORMAL;");
}

static int create_schema(sqlite3 *db)
{
	char sql[128];
	int rc;

	rc = sq_exec(db, "BEGIN IMMEDIATE");
	if (rc != SQLITE_OK)
		return rc;
	rc = sq_exec(db, store_schema_sql);
	if (rc == SQLITE_OK) {
		snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; PRAGMA user_version = %d;",
			 STORE_APP_ID, STORE_SCHEMA_VERSION);
		rc = sq_exec(db, sql);
	}
	if (rc == SQLITE_OK)
		rc = sq_exec(db, "COMMIT");
	if (rc != SQLITE_OK)
		sq_exec(db, "ROLLBACK");
	return rc;
}

static int migrate(struct store_be *st, int64_t from)
{
	char sql[64];
	int rc = SQLITE_OK;

	for (int64_t v = from; v < STORE_SCHEMA_VERSION && rc == SQLITE_OK; v++) {
		if (v - 1 >= (int64_t)STORE_NMIGRATIONS)
			return SQLITE_INTERNAL;
		pr_info("store: %s: migrating schema %" PRId64 " -> %" PRId64 " ...",
			st->path, v, v + 1);
		rc = sq_exec(st->db, "BEGIN IMMEDIATE");
		if (rc != SQLITE_OK)
			break;
		st->now_us = clock_realtime_ns() / 1000;
		rc = store_migrations[v - 1](st);
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %" PRId64, v + 1);
		if (rc == SQLITE_OK)
			rc = sq_exec(st->db, sql);
		if (rc == SQLITE_OK)
			rc = sq_exec(st->db, "COMMIT");
		else
			sq_exec(st->db, "ROLLBACK");
		if (rc == SQLITE_OK)
			pr_info("store: %s: migrated schema %" PRId64 " -> %" PRId64,
				st->path, v, v + 1);
	}
	return rc;
}

/* Check (or create) the schema of an open connection; *ver: the version
 * the file has now (older ones are for the caller to migrate). */
static int check_schema(sqlite3 *db, const char *path, unsigned flags,
			int64_t *ver_out, char *err, size_t errlen)
{
	int64_t appid, ver, nobj;
	int rc;

	*ver_out = STORE_SCHEMA_VERSION;
	/* The first read of the file: a non-SQLite file fails here. */
	rc = pragma_int(db, "PRAGMA application_id", &appid);
	if (rc == SQLITE_OK)
		rc = pragma_int(db, "PRAGMA user_version", &ver);
	if (rc == SQLITE_OK)
		rc = pragma_int(db, "SELECT count(*) FROM sqlite_master", &nobj);
	if (rc != SQLITE_OK)
		return open_fail(db, rc, path, "reading the schema", err, errlen);
	if (!appid && !ver && !nobj) {
		if (flags & STORE_F_READONLY) {
			sq_set_err(err, errlen, "%s: an empty database, not a fay store yet", path);
			return -ENOENT;
		}
		rc = sq_exec(db, "PRAGMA journal_mode = WAL");
		if (rc == SQLITE_OK)
			rc = create_schema(db);
		if (rc != SQLITE_OK)
			return open_fail(db, rc, path, "creating the schema", err, errlen);
		return 0;
	}
	if (appid != STORE_APP_ID) {
		sq_set_err(err, errlen, "%s: an SQLite database of another program (application_id 0x%08" PRIx64
			", %" PRId64 " schema objects), not a fay store; refusing to use it",
			path, (uint64_t)appid & 0xffffffffu, nobj);
		return -EBADMSG;
	}
	if (ver > STORE_SCHEMA_VERSION) {
		sq_set_err(err, errlen, "%s: fay store schema version %" PRId64
			" is newer than this fay knows (%d); upgrade fay", path, ver,
			STORE_SCHEMA_VERSION);
		return -EPROTO;
	}
	if (ver < 1) {
		sq_set_err(err, errlen, "%s: fay store with an invalid schema version %" PRId64,
			path, ver);
		return -EBADMSG;
	}
	if (ver < STORE_SCHEMA_VERSION && (flags & STORE_F_READONLY)) {
		sq_set_err(err, errlen, "%s: schema version %" PRId64 " needs a migration to %d;"
			" open it once with 'fay collector'", path, ver, STORE_SCHEMA_VERSION);
		return -EPROTO;
	}
	*ver_out = ver;
	return 0;
}

/* SQLite's process-wide settings, before its first use: no memory
 * statistics (fay reads none; with them every sqlite3_malloc() and
 * sqlite3_free() takes a global mutex and counts: ~0.5k instructions of
 * an OTLP span's write, bench/RESULTS.md "OTLP: an arena's pages kept
 * between requests").  A call after SQLite is initialised (a program that
 * used it first) changes nothing. */
static void sq_global_config(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static sqlite3 *open_conn(const char *path, int create, int writer,
			  char *err, size_t errlen, int *ret)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	sqlite3 *db = NULL;
	int fl = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
	int rc;

	pthread_once(&once, sq_global_config);
	if (create)
		fl |= SQLITE_OPEN_CREATE;
	rc = sqlite3_open_v2(path, &db, fl, NULL);
	if (rc == SQLITE_OK)
		rc = tune(db, writer);
	if (rc != SQLITE_OK) {
		*ret = open_fail(db, rc, path, "opening", err, errlen);
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_extended_result_codes(db, 1);
	return db;
}

sqlite3 *sq_db(struct store_be *st)
{
	return st->db;
}

int sq_prepare(struct store_be *st)
{
	sqlite3_stmt *s;
	int rc;

	for (int i = 0; i < ST_MAX; i++) {
		if (st->st[i])
			continue;
		rc = sqlite3_prepare_v3(st->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&st->st[i], NULL);
		if (rc != SQLITE_OK)
			return rc;
	}
	s = st->st[ST_MAX_SEQ];
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		st->max_seq = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	return rc == SQLITE_ROW ? SQLITE_OK : rc;
}

struct store_be *sq__open(const char *path, unsigned flags, char *err, size_t errlen)
{
	struct store_be *st;
	int64_t ver;
	int ret = -ENOMEM, rc;

	st = calloc(1, sizeof(*st));
	if (!st || !(st->path = strdup(path))) {
		sq_set_err(err, errlen, "%s: out of memory", path);
		goto err_out;
	}
	pthread_mutex_init(&st->wlock, NULL);
	pthread_mutex_init(&st->plock, NULL);
	st->flags = flags;
	st->db = open_conn(path, !(flags & STORE_F_READONLY), 1, err, errlen, &ret);
	if (!st->db)
		goto err_out;
	ret = check_schema(st->db, path, flags, &ver, err, errlen);
	if (ret)
		goto err_out;
	if (flags & STORE_F_READONLY)
		return st;
	rc = sq_exec(st->db, "PRAGMA journal_mode = WAL");
	if (rc != SQLITE_OK) {
		ret = open_fail(st->db, rc, path, "switching to WAL", err, errlen);
		goto err_out;
	}
	if (ver < STORE_SCHEMA_VERSION) {
		rc = migrate(st, ver);
		if (rc != SQLITE_OK && st->why[0]) {
			/* a migration's own reason (migrate.c) */
			sq_set_err(err, errlen, "%s: migrating the schema: %s", path, st->why);
			ret = -ERANGE;
			goto err_out;
		}
		if (rc != SQLITE_OK) {
			ret = open_fail(st->db, rc, path, "migrating the schema", err, errlen);
			goto err_out;
		}
	}
	rc = sq_prepare(st);
	if (rc != SQLITE_OK) {
		ret = open_fail(st->db, rc, path, "preparing statements", err, errlen);
		goto err_out;
	}
	sq_ckpt_start(st);
	return st;

err_out:
	sq__close(st);
	return fay_err_ptr(ret);
}

void sq__close(struct store_be *st)
{
	if (!st)
		return;
	sq_ckpt_stop(st);
	sq_windows_close(st);
	pthread_mutex_destroy(&st->wlock);
	sq_prep_pool_free(st);
	pthread_mutex_destroy(&st->plock);
	for (int i = 0; i < ST_MAX; i++)
		sqlite3_finalize(st->st[i]);
	if (st->db && sqlite3_close(st->db) != SQLITE_OK)
		pr_warn("store: %s: close: %s", st->path, sqlite3_errmsg(st->db));
	sq_nameset_clear(&st->names);
	sq__set_autocomplete_keys(st, NULL, 0);
	for (int i = 0; i < SQ_SPAN_ROWS; i++)
		free(st->extra[i].p);
	free(st->tm.v);
	free(st->tm.slot);
	sq_termset_free(&st->terms);
	free(st->rows);
	free(st->tcount);
	zarena_reset(&st->merge_arena);
	zarena_reset(&st->txn_arena);
	free(st->path);
	free(st);
}

const struct store_ops sq_store_ops = {
	.name = "sqlite",
	.schema_version = STORE_SCHEMA_VERSION,
	.open = sq__open,
	.close = sq__close,
	.write = sq__write,
	.prepare = sq__prepare,
	.agent_hello = sq__agent_hello,
	.agent_stats = sq__agent_stats,
	.agent_last_seq = sq__agent_last_seq,
	.retain = sq__retain,
	.space = sq__space,
	.disk_low = sq__disk_low,
	.put_windows = sq__put_windows,
	.windows_from = "query_windows",
	.set_autocomplete_keys = sq__set_autocomplete_keys,
	.autocomplete_values = sq__autocomplete_values,
	.sql = sq__sql,
	.reader_new = sq__reader_new,
	.reader_free = sq__reader_free,
	.services = sq__services,
	.span_names = sq__span_names,
	.remote_services = sq__remote_services,
	.trace = sq__trace,
	.traces = sq__traces,
	.counts = sq__counts,
	.scan = sq__scan,
	.scan_traces = sq__scan_traces,
	.agents = sq__agents,
};
