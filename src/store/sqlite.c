// SPDX-License-Identifier: MIT
/*
 * The SQLite store: opening (schema, migrations, refusing what is not a fay
 * store) and the write path.  The schema and the durability argument are
 * in src/store/schema.sql.
 *
 * Write path: one connection, prepared statements, one transaction per
 * sq__write() call (which the collector's writer thread fills with every
 * batch waiting, a group commit).  Within a transaction the spans are
 * gathered per trace in memory (struct tsum: the trace's seq, timestamps,
 * Bloom filter ...), each span row is appended under its trace's seq, and
 * each touched trace row is written once, at the end.  Names (services,
 * span names, remote services) go through an in-memory set so a known
 * name costs no SQL.
 *
 * Checkpoints run off the write path: the writer connection has SQLite's
 * auto-checkpoint off, its WAL hook wakes a checkpoint thread once the WAL
 * holds CKPT_PAGES pages, and that thread copies the WAL into the database
 * (PASSIVE: never blocks the writer or readers) on its own connection.
 * The fsyncs of a checkpoint thus no longer stall ingest.
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
#include <sys/time.h>

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
};
#define STORE_NMIGRATIONS ARRAY_SIZE(store_migrations)

enum {
	ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
	ST_INS_SPAN, ST_INS_PART, ST_LAST_SEQ, ST_AGENT_BATCH,
	ST_AGENT_HELLO, ST_AGENT_STATS,
	ST_INS_SERVICE, ST_INS_SPAN_NAME, ST_INS_REMOTE, ST_INS_AUTOCOMPLETE,
	ST_DEL_MERGED, ST_SEL_PARTS,
	ST_SEL_TRACE, ST_SEL_TRACE_SPANS, ST_INS_TRACE, ST_UPD_TRACE, ST_MAX_SEQ,
	ST_RETAIN_SEL, ST_RETAIN_SPANS, ST_RETAIN_PARTS, ST_RETAIN_TRACE,
	ST_MAX,
};

/* The columns of a traces row, in the order of ST_INS_TRACE's parameters
 * 4.. (bind_trace()). */
#define TRACE_COLS "ts_us, root_us, min_us, end_us, max_dur_us, nspans, next_no," \
	" error, root_service, root_name, bloom"

static const char *const stmt_sql[ST_MAX] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_INS_SPAN] =
		"INSERT INTO spans (trace_seq, no, id, parent_id, kind, name,"
		" local_service, local_ipv4, local_ipv6, local_port,"
		" remote_service, remote_ipv4, remote_ipv6, remote_port,"
		" start_us, duration_us, shared, debug, error, origin, extra)"
		" VALUES (?,?,?,?,?,?, ?,?,?,?, ?,?,?,?, ?,?,?,?,?,?,?)",
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
		"DELETE FROM spans WHERE trace_seq = ? AND id = ? AND origin = 1",
	[ST_SEL_PARTS] =
		"SELECT parent_id, name, service, ipv4, ipv6, port, remote_service,"
		" remote_ipv4, remote_ipv6, remote_port, debug, is_tag, ts_us, key, value"
		" FROM span_parts WHERE trace_seq = ? AND id = ?"
		" ORDER BY is_tag, ts_us, rowid",
	[ST_SEL_TRACE] =
		"SELECT seq, " TRACE_COLS " FROM traces WHERE trace_hi = ? AND trace_lo = ?",
	[ST_SEL_TRACE_SPANS] = "SELECT " SQ_SPAN_COLS " FROM spans WHERE trace_seq = ?",
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
	[ST_RETAIN_SPANS] = "DELETE FROM spans WHERE trace_seq = ?",
	[ST_RETAIN_PARTS] = "DELETE FROM span_parts WHERE trace_seq = ?",
	[ST_RETAIN_TRACE] = "DELETE FROM traces WHERE seq = ?",
};

/* A map of strings to a time (the names already in the name tables, with
 * the last_us written for them). */
struct nameset {
	char **slot;
	uint64_t *val;
	size_t cap, n;
};

/*
 * A trace touched by the transaction under way: its row as it will be
 * written at the end (ts_us is root_us, else min_us).  Strings are in the
 * store's txn arena.
 */
struct tsum {
	uint64_t hi, lo;
	int64_t seq, nspans, next_no;
	uint64_t root_us, min_us, end_us, max_dur_us;
	struct zs_str root_service, root_name;
	uint8_t error;
	uint8_t exists;       /* the row is in the table (UPDATE, not INSERT) */
	uint8_t recompute;    /* spans were deleted: rebuild from the rows */
	uint8_t bloom[SQ_BLOOM_BYTES];
};

/* The traces of a transaction, by id (open addressing over v). */
struct tmap {
	struct tsum *v;
	size_t n, cap;
	uint32_t *slot;       /* index in v + 1; 0 empty */
	size_t nslot;
};

#define CKPT_PAGES 4096
/* A name's last_us is rewritten when a span is this much newer. */
#define NAME_LAST_SLACK_US 60000000ull

/* The background checkpointer (see the top of the file). */
struct ckpt {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	sqlite3 *db;
	int pending, stop, running;
};

struct store_be {
	sqlite3 *db;
	char *path;
	unsigned flags;
	sqlite3_stmt *st[ST_MAX];
	struct nameset names;
	char **ac_keys;             /* --autocomplete-keys */
	size_t nac_keys;
	struct sq_buf extra;        /* spans.extra of the span being bound */
	struct zarena merge_arena;  /* scratch for merging parts */
	struct zarena txn_arena;    /* strings of the transaction's tsums */
	struct tmap tm;
	int64_t max_seq;            /* highest traces.seq given */
	uint64_t now_us;            /* the transaction's time */
	uint64_t retained;          /* rows retention deleted since the last prune */
	uint64_t retain_cutoff_us;  /* the cutoff of that retention */
	struct ckpt ck;
};

const char *sq__path(const struct store_be *st)
{
	return st->path;
}

/* ---- errors ------------------------------------------------------------- */

/* Map an SQLite result code to -errno. */
static int sq_errno(int rc)
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
static void set_err(char *err, size_t errlen, const char *fmt, ...)
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
		set_err(err, errlen, "%s: not an SQLite database (%s); refusing to use it",
			path, msg);
		break;
	case SQLITE_CORRUPT:
		set_err(err, errlen, "%s: the database is corrupt (%s); refusing to use it",
			path, msg);
		break;
	case SQLITE_CANTOPEN:
		set_err(err, errlen, "%s: cannot open (%s; does the directory exist and is it writable?)",
			path, msg);
		break;
	default:
		set_err(err, errlen, "%s: %s: %s", path, what, msg);
	}
	return sq_errno(rc);
}

/* ---- name set ----------------------------------------------------------- */

static uint64_t fnv1a(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void nameset_clear(struct nameset *s)
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
	size_t i = fnv1a(key, len) & (s->cap - 1);

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
		nameset_clear(s);
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

/* ---- open --------------------------------------------------------------- */

static int exec(sqlite3 *db, const char *sql)
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
	rc = exec(db, writer ? "PRAGMA cache_size = -65536; PRAGMA temp_store = MEMORY;"
			     : "PRAGMA cache_size = -8192; PRAGMA temp_store = MEMORY;");
	if (rc != SQLITE_OK || !writer)
		return rc;
	if (sync && !strcasecmp(sync, "full"))
		return exec(db, "PRAGMA synchronous = FULL;");
	return exec(db, "PRAGMA synchronous = NORMAL;");
}

static int create_schema(sqlite3 *db)
{
	char sql[128];
	int rc;

	rc = exec(db, "BEGIN IMMEDIATE");
	if (rc != SQLITE_OK)
		return rc;
	rc = exec(db, store_schema_sql);
	if (rc == SQLITE_OK) {
		snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; PRAGMA user_version = %d;",
			 STORE_APP_ID, STORE_SCHEMA_VERSION);
		rc = exec(db, sql);
	}
	if (rc == SQLITE_OK)
		rc = exec(db, "COMMIT");
	if (rc != SQLITE_OK)
		exec(db, "ROLLBACK");
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
		rc = exec(st->db, "BEGIN IMMEDIATE");
		if (rc != SQLITE_OK)
			break;
		st->now_us = clock_realtime_ns() / 1000;
		rc = store_migrations[v - 1](st);
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %" PRId64, v + 1);
		if (rc == SQLITE_OK)
			rc = exec(st->db, sql);
		if (rc == SQLITE_OK)
			rc = exec(st->db, "COMMIT");
		else
			exec(st->db, "ROLLBACK");
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
			set_err(err, errlen, "%s: an empty database, not a fay store yet", path);
			return -ENOENT;
		}
		rc = exec(db, "PRAGMA journal_mode = WAL");
		if (rc == SQLITE_OK)
			rc = create_schema(db);
		if (rc != SQLITE_OK)
			return open_fail(db, rc, path, "creating the schema", err, errlen);
		return 0;
	}
	if (appid != STORE_APP_ID) {
		set_err(err, errlen, "%s: an SQLite database of another program (application_id 0x%08" PRIx64
			", %" PRId64 " schema objects), not a fay store; refusing to use it",
			path, (uint64_t)appid & 0xffffffffu, nobj);
		return -EBADMSG;
	}
	if (ver > STORE_SCHEMA_VERSION) {
		set_err(err, errlen, "%s: fay store schema version %" PRId64
			" is newer than this fay knows (%d); upgrade fay", path, ver,
			STORE_SCHEMA_VERSION);
		return -EPROTO;
	}
	if (ver < 1) {
		set_err(err, errlen, "%s: fay store with an invalid schema version %" PRId64,
			path, ver);
		return -EBADMSG;
	}
	if (ver < STORE_SCHEMA_VERSION && (flags & STORE_F_READONLY)) {
		set_err(err, errlen, "%s: schema version %" PRId64 " needs a migration to %d;"
			" open it once with 'fay collector'", path, ver, STORE_SCHEMA_VERSION);
		return -EPROTO;
	}
	*ver_out = ver;
	return 0;
}

static sqlite3 *open_conn(const char *path, int create, int writer,
			  char *err, size_t errlen, int *ret)
{
	sqlite3 *db = NULL;
	int fl = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
	int rc;

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

static void *ckpt_main(void *arg)
{
	struct ckpt *ck = arg;

	pthread_mutex_lock(&ck->lock);
	for (;;) {
		while (!ck->pending && !ck->stop)
			pthread_cond_wait(&ck->wake, &ck->lock);
		if (ck->stop)
			break;
		ck->pending = 0;
		pthread_mutex_unlock(&ck->lock);
		if (sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
					      NULL, NULL) != SQLITE_OK)
			pr_debug("store: checkpoint: %s", sqlite3_errmsg(ck->db));
		pthread_mutex_lock(&ck->lock);
	}
	pthread_mutex_unlock(&ck->lock);
	return NULL;
}

/* sqlite3_wal_hook: called after each commit with the WAL's page count. */
static int ckpt_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct ckpt *ck = arg;

	if (pages >= CKPT_PAGES) {
		pthread_mutex_lock(&ck->lock);
		ck->pending = 1;
		pthread_cond_signal(&ck->wake);
		pthread_mutex_unlock(&ck->lock);
	}
	return SQLITE_OK;
}

/* Start the checkpointer; without it SQLite's auto-checkpoint stays on. */
static void ckpt_start(struct store_be *st)
{
	struct ckpt *ck = &st->ck;

	pthread_mutex_init(&ck->lock, NULL);
	pthread_cond_init(&ck->wake, NULL);
	if (sqlite3_open_v2(st->path, &ck->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		sqlite3_close(ck->db);
		ck->db = NULL;
		return;
	}
	sqlite3_busy_timeout(ck->db, 1000);
	/* Read once: before its first read a connection has not opened the
	 * WAL, and SQLite 3.40 (Debian 12) makes sqlite3_wal_checkpoint_v2()
	 * on such a connection a silent no-op; the WAL then grew forever. */
	if (exec(ck->db, "SELECT count(*) FROM sqlite_master") != SQLITE_OK) {
		sqlite3_close(ck->db);
		ck->db = NULL;
		return;
	}
	if (pthread_create(&ck->thread, NULL, ckpt_main, ck)) {
		sqlite3_close(ck->db);
		ck->db = NULL;
		return;
	}
	ck->running = 1;
	exec(st->db, "PRAGMA wal_autocheckpoint = 0");
	sqlite3_wal_hook(st->db, ckpt_hook, ck);
}

static void ckpt_stop(struct store_be *st)
{
	struct ckpt *ck = &st->ck;

	if (!ck->running)
		return;
	sqlite3_wal_hook(st->db, NULL, NULL);
	pthread_mutex_lock(&ck->lock);
	ck->stop = 1;
	pthread_cond_signal(&ck->wake);
	pthread_mutex_unlock(&ck->lock);
	pthread_join(ck->thread, NULL);
	sqlite3_close(ck->db);
	pthread_mutex_destroy(&ck->lock);
	pthread_cond_destroy(&ck->wake);
	ck->running = 0;
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
		set_err(err, errlen, "%s: out of memory", path);
		goto err_out;
	}
	st->flags = flags;
	st->db = open_conn(path, !(flags & STORE_F_READONLY), 1, err, errlen, &ret);
	if (!st->db)
		goto err_out;
	ret = check_schema(st->db, path, flags, &ver, err, errlen);
	if (ret)
		goto err_out;
	if (flags & STORE_F_READONLY)
		return st;
	rc = exec(st->db, "PRAGMA journal_mode = WAL");
	if (rc != SQLITE_OK) {
		ret = open_fail(st->db, rc, path, "switching to WAL", err, errlen);
		goto err_out;
	}
	if (ver < STORE_SCHEMA_VERSION) {
		rc = migrate(st, ver);
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
	ckpt_start(st);
	return st;

err_out:
	sq__close(st);
	return fay_err_ptr(ret);
}

void sq__close(struct store_be *st)
{
	if (!st)
		return;
	ckpt_stop(st);
	for (int i = 0; i < ST_MAX; i++)
		sqlite3_finalize(st->st[i]);
	if (st->db && sqlite3_close(st->db) != SQLITE_OK)
		pr_warn("store: %s: close: %s", st->path, sqlite3_errmsg(st->db));
	nameset_clear(&st->names);
	sq__set_autocomplete_keys(st, NULL, 0);
	free(st->extra.p);
	free(st->tm.v);
	free(st->tm.slot);
	zarena_reset(&st->merge_arena);
	zarena_reset(&st->txn_arena);
	free(st->path);
	free(st);
}

/* ---- write -------------------------------------------------------------- */

static int bind_str(sqlite3_stmt *s, int i, struct zs_str v)
{
	if (!v.len)
		return sqlite3_bind_null(s, i);
	return sqlite3_bind_text(s, i, v.p, (int)v.len, SQLITE_STATIC);
}

static int bind_cstr(sqlite3_stmt *s, int i, const char *v)
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

/* Bind endpoint e at columns i..i+3 (service, ipv4, ipv6, port). */
static void bind_ep(sqlite3_stmt *s, int i, const struct zs_endpoint *e)
{
	bind_str(s, i, e->service);
	bind_cstr(s, i + 1, e->ipv4);
	bind_cstr(s, i + 2, e->ipv6);
	bind_u64_or_null(s, i + 3, e->port);
}

/* Step a write statement to completion and reset it. */
static int step_done(sqlite3_stmt *s)
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
	rc = step_done(s);
	if (rc == SQLITE_OK && nameset_put(&st->names, key, n, ts_us) < 0)
		nameset_clear(&st->names);
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
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		struct tsum *v = realloc(m->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->v = v;
		m->cap = cap;
	}
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
static void tm_reset(struct store_be *st)
{
	struct tmap *m = &st->tm;

	if (m->n)
		memset(m->slot, 0, m->nslot * sizeof(*m->slot));
	m->n = 0;
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
static int trace_get(struct store_be *st, uint64_t hi, uint64_t lo, size_t *ti)
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
		t->seq = ++st->max_seq;
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return rc;
	m->slot[tm_slot(m, hi, lo)] = (uint32_t)m->n + 1;
	*ti = m->n++;
	return SQLITE_OK;
}

/* Account span z to trace t (all but nspans). */
static int trace_add(struct store_be *st, struct tsum *t, const struct zspan *z)
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
		    trace_add(st, t, &z) != SQLITE_OK) {
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
		rc = step_done(s);
	}
	tm_reset(st);
	return rc;
}

/* ---- spans and parts ---------------------------------------------------- */

int sq_insert_span(struct store_be *st, const struct zspan *z, int origin)
{
	sqlite3_stmt *s = st->st[ST_INS_SPAN];
	uint64_t name_us = z->timestamp_us ? z->timestamp_us : st->now_us;
	struct tsum *t;
	size_t ti;
	int rc;

	rc = trace_get(st, z->trace_hi, z->trace_lo, &ti);
	if (rc != SQLITE_OK)
		return rc;
	t = &st->tm.v[ti];
	if (sq_extra_encode(&st->extra, z))
		return SQLITE_NOMEM;
	sqlite3_bind_int64(s, 1, t->seq);
	sqlite3_bind_int64(s, 2, t->next_no);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)z->id);
	bind_u64_or_null(s, 4, z->parent_id);
	sqlite3_bind_int(s, 5, z->kind);
	bind_str(s, 6, z->name);
	bind_ep(s, 7, &z->local);
	bind_ep(s, 11, &z->remote);
	bind_u64_or_null(s, 15, z->timestamp_us);
	bind_u64_or_null(s, 16, z->duration_us);
	sqlite3_bind_int(s, 17, z->shared);
	sqlite3_bind_int(s, 18, z->debug);
	sqlite3_bind_int(s, 19, z->error);
	sqlite3_bind_int(s, 20, origin);
	if (st->extra.len)
		sqlite3_bind_blob(s, 21, st->extra.p, (int)st->extra.len, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 21);
	rc = step_done(s);
	if (rc != SQLITE_OK)
		return rc;
	t->next_no++;
	t->nspans++;
	rc = trace_add(st, t, z);
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

int sq_insert_part(struct store_be *st, const struct zs_part *p)
{
	sqlite3_stmt *s = st->st[ST_INS_PART];
	size_t ti;
	int rc;

	rc = trace_get(st, p->trace_hi, p->trace_lo, &ti);
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
	return step_done(s);
}

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

	rc = trace_get(st, k->hi, k->lo, &ti);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(d, 1, st->tm.v[ti].seq);
	sqlite3_bind_int64(d, 2, (sqlite3_int64)k->id);
	sqlite3_bind_int64(s, 1, st->tm.v[ti].seq);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)k->id);
	rc = step_done(d);
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
	uint64_t last;
	int rc = SQLITE_OK;

	b->duplicate = 0;
	b->stored = 0;
	if (b->agent_id) {
		rc = last_seq_of(st, b->agent_id, &last);
		if (rc != SQLITE_OK)
			return rc;
		if (b->seq <= last) {
			b->duplicate = 1;
			return SQLITE_OK;
		}
	}
	for (size_t i = 0; i < b->nspans; i++) {
		rc = sq_insert_span(st, &b->spans[i], 0);
		if (rc != SQLITE_OK)
			return rc;
	}
	if (b->nparts) {
		rc = write_parts(st, b);
		if (rc != SQLITE_OK)
			return rc;
	}
	b->stored = b->nspans + b->nparts;
	if (b->agent_id) {
		sqlite3_stmt *s = st->st[ST_AGENT_BATCH];

		sqlite3_bind_text(s, 1, b->agent_id, -1, SQLITE_STATIC);
		bind_cstr(s, 2, b->host);
		sqlite3_bind_int64(s, 3, (sqlite3_int64)b->seq);
		sqlite3_bind_int64(s, 4, (sqlite3_int64)st->now_us);
		sqlite3_bind_int64(s, 5, (sqlite3_int64)b->stored);
		rc = step_done(s);
	}
	return rc;
}

static void rollback(struct store_be *st, int64_t max_seq)
{
	step_done(st->st[ST_ROLLBACK]);
	tm_reset(st);
	st->max_seq = max_seq;
	/* names written by the transaction are gone again */
	nameset_clear(&st->names);
}

int sq__write(struct store_be *st, struct store_batch **b, size_t n,
		 char *err, size_t errlen)
{
	int64_t max_seq = st->max_seq;
	int rc;

	if (st->flags & STORE_F_READONLY) {
		set_err(err, errlen, "%s: opened read-only", st->path);
		return -EROFS;
	}
	st->now_us = clock_realtime_ns() / 1000;
	rc = step_done(st->st[ST_BEGIN]);
	if (rc != SQLITE_OK) {
		set_err(err, errlen, "%s: BEGIN: %s", st->path, sqlite3_errmsg(st->db));
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
	rc = step_done(st->st[ST_COMMIT]);
	if (rc != SQLITE_OK)
		goto fail;
	return 0;
fail:
	set_err(err, errlen, "%s: storing spans: %s", st->path,
		rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(st->db));
	rollback(st, max_seq);
	for (size_t i = 0; i < n; i++)
		b[i]->stored = 0, b[i]->duplicate = 0;
	return sq_errno(rc);
}

int sq__agent_hello(struct store_be *st, const char *agent_id, const char *host,
		       const char *version, uint64_t *last_seq)
{
	sqlite3_stmt *s = st->st[ST_AGENT_HELLO];
	int rc;

	sqlite3_bind_text(s, 1, agent_id, -1, SQLITE_STATIC);
	bind_cstr(s, 2, host);
	bind_cstr(s, 3, version);
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
	bind_cstr(s, 2, json);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)(clock_realtime_ns() / 1000));
	return sq_errno(step_done(s));
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
	rc = exec(st->db, sql);
	if (rc != SQLITE_OK)
		exec(st->db, "ROLLBACK");
	nameset_clear(&st->names);
	return rc;
}

int sq__retain(struct store_be *st, uint64_t before_us, unsigned chunk)
{
	sqlite3_stmt *sel = st->st[ST_RETAIN_SEL];
	int64_t seqs[256];
	int64_t total = 0;
	int n = 0, rc;

	rc = step_done(st->st[ST_BEGIN]);
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
			rc = step_done(st->st[k]);
			if (k != ST_RETAIN_TRACE)
				rows += sqlite3_changes(st->db);
		}
		total += rows ? rows : 1; /* an empty trace counts as one */
	}
	if (rc == SQLITE_OK)
		rc = step_done(st->st[ST_COMMIT]);
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

const struct store_ops sq_store_ops = {
	.name = "sqlite",
	.schema_version = STORE_SCHEMA_VERSION,
	.open = sq__open,
	.close = sq__close,
	.write = sq__write,
	.agent_hello = sq__agent_hello,
	.agent_stats = sq__agent_stats,
	.agent_last_seq = sq__agent_last_seq,
	.retain = sq__retain,
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
