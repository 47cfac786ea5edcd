// SPDX-License-Identifier: MIT
/*
 * The SQLite store: opening (schema, migrations, refusing what is not a fay
 * store) and the write path.  The schema and the durability argument are
 * in src/store/schema.sql.
 *
 * Write path: one connection, prepared statements, one transaction per
 * store__write() call (which the collector's writer thread fills with every
 * batch waiting, a group commit).  Names (services, span names, remote
 * services) go through an in-memory set so a known name costs no SQL.
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
#include "store/sqlite_int.h"
#include "store/store.h"

/* Migrations: store_migrations[v - 1] takes schema version v to v + 1.
 * None yet: version 1 is the first.  Append, never edit. */
static const char *const store_migrations[] = { NULL };
#define STORE_NMIGRATIONS 0

enum {
	ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
	ST_INS_SPAN, ST_INS_PART, ST_LAST_SEQ, ST_AGENT_BATCH,
	ST_AGENT_HELLO, ST_AGENT_STATS,
	ST_INS_SERVICE, ST_INS_SPAN_NAME, ST_INS_REMOTE,
	ST_DEL_MERGED, ST_SEL_PARTS,
	ST_RETAIN_SPANS, ST_RETAIN_PARTS,
	ST_MAX,
};

static const char *const stmt_sql[ST_MAX] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_INS_SPAN] =
		"INSERT INTO spans (trace_hi, trace_lo, id, parent_id, kind, name,"
		" local_service, local_ipv4, local_ipv6, local_port,"
		" remote_service, remote_ipv4, remote_ipv6, remote_port,"
		" start_us, duration_us, shared, debug, error, annotations, tags, origin)"
		" VALUES (?,?,?,?,?,?, ?,?,?,?, ?,?,?,?, ?,?,?,?,?,?,?,?)",
	[ST_INS_PART] =
		"INSERT INTO span_parts (trace_hi, trace_lo, id, parent_id, name,"
		" service, ipv4, ipv6, port, remote_service, remote_ipv4, remote_ipv6,"
		" remote_port, debug, is_tag, ts_us, key, value)"
		" VALUES (?,?,?,?,?, ?,?,?,?,?,?,?, ?,?,?,?,?,?)",
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
	[ST_INS_SERVICE] = "INSERT OR IGNORE INTO services (name) VALUES (?)",
	[ST_INS_SPAN_NAME] = "INSERT OR IGNORE INTO span_names (service, name) VALUES (?, ?)",
	[ST_INS_REMOTE] = "INSERT OR IGNORE INTO remote_services (service, remote) VALUES (?, ?)",
	[ST_DEL_MERGED] =
		"DELETE FROM spans WHERE trace_hi = ? AND trace_lo = ? AND id = ? AND origin = 1",
	[ST_SEL_PARTS] =
		"SELECT parent_id, name, service, ipv4, ipv6, port, remote_service,"
		" remote_ipv4, remote_ipv6, remote_port, debug, is_tag, ts_us, key, value"
		" FROM span_parts WHERE trace_hi = ? AND trace_lo = ? AND id = ?"
		" ORDER BY is_tag, ts_us, rowid",
	[ST_RETAIN_SPANS] =
		"DELETE FROM spans WHERE rowid IN"
		" (SELECT rowid FROM spans WHERE start_us < ?1 LIMIT ?2)",
	[ST_RETAIN_PARTS] =
		"DELETE FROM span_parts WHERE rowid IN"
		" (SELECT rowid FROM span_parts WHERE ts_us < ?1 LIMIT ?2)",
};

/* A set of strings (the names already in the name tables). */
struct nameset {
	char **slot;
	size_t cap, n;
};

/* A growable byte buffer for the JSON columns. */
struct jbuf {
	char *p;
	size_t len, cap;
	int oom;
};

#define CKPT_PAGES 4096

/* The background checkpointer (see the top of the file). */
struct ckpt {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	sqlite3 *db;
	int pending, stop, running;
};

struct store {
	sqlite3 *db;
	char *path;
	unsigned flags;
	sqlite3_stmt *st[ST_MAX];
	struct nameset names;
	struct jbuf ja, jt;         /* annotations, tags of the span being bound */
	struct zarena merge_arena;  /* scratch for merging parts */
	uint64_t retained;          /* rows retention deleted since the last prune */
	struct ckpt ck;
};

int store__schema_version(void)
{
	return STORE_SCHEMA_VERSION;
}

const char *store__path(const struct store *st)
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
	memset(s, 0, sizeof(*s));
}

/* Is key known?  With add, insert it.  Returns 1 known, 0 new (added when
 * add), -ENOMEM.  The set forgets everything when it passes 64 Ki names
 * (the tables' INSERT OR IGNORE keeps the truth). */
static int nameset_has(struct nameset *s, const char *key, size_t len, int add)
{
	size_t i;

	if (!s->cap || (add && (s->n + 1) * 2 > s->cap)) {
		struct nameset ns = { 0 };
		size_t cap = s->cap ? s->cap * 2 : 1024;

		if (cap > (128u << 10)) {
			nameset_clear(s);
			cap = 1024;
		}
		ns.slot = calloc(cap, sizeof(*ns.slot));
		if (!ns.slot)
			return -ENOMEM;
		ns.cap = cap;
		for (size_t j = 0; j < s->cap; j++) {
			char *k = s->slot[j];

			if (!k)
				continue;
			i = fnv1a(k, strlen(k)) & (cap - 1);
			while (ns.slot[i])
				i = (i + 1) & (cap - 1);
			ns.slot[i] = k;
			ns.n++;
		}
		free(s->slot);
		*s = ns;
	}
	i = fnv1a(key, len) & (s->cap - 1);
	for (; s->slot[i]; i = (i + 1) & (s->cap - 1))
		if (!strncmp(s->slot[i], key, len) && !s->slot[i][len])
			return 1;
	if (!add)
		return 0;
	s->slot[i] = strndup(key, len);
	if (!s->slot[i])
		return -ENOMEM;
	s->n++;
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
	rc = exec(db, "PRAGMA cache_size = -65536; PRAGMA temp_store = MEMORY;");
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

static int migrate(sqlite3 *db, int64_t from)
{
	char sql[64];
	int rc = SQLITE_OK;

	for (int64_t v = from; v < STORE_SCHEMA_VERSION && rc == SQLITE_OK; v++) {
		if (v - 1 >= STORE_NMIGRATIONS || !store_migrations[v - 1])
			return SQLITE_INTERNAL;
		rc = exec(db, "BEGIN IMMEDIATE");
		if (rc != SQLITE_OK)
			break;
		rc = exec(db, store_migrations[v - 1]);
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %" PRId64, v + 1);
		if (rc == SQLITE_OK)
			rc = exec(db, sql);
		if (rc == SQLITE_OK)
			rc = exec(db, "COMMIT");
		else
			exec(db, "ROLLBACK");
		if (rc == SQLITE_OK)
			pr_info("store: migrated schema %" PRId64 " -> %" PRId64, v, v + 1);
	}
	return rc;
}

/* Check (and create or migrate) the schema of an open connection. */
static int check_schema(sqlite3 *db, const char *path, unsigned flags,
			char *err, size_t errlen)
{
	int64_t appid, ver, nobj;
	int rc;

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
	if (ver < STORE_SCHEMA_VERSION) {
		if (flags & STORE_F_READONLY) {
			set_err(err, errlen, "%s: schema version %" PRId64 " needs a migration to %d;"
				" open it once with 'fay collector'", path, ver, STORE_SCHEMA_VERSION);
			return -EPROTO;
		}
		rc = migrate(db, ver);
		if (rc != SQLITE_OK)
			return open_fail(db, rc, path, "migrating the schema", err, errlen);
	}
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
static void ckpt_start(struct store *st)
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

static void ckpt_stop(struct store *st)
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

struct store *store__open(const char *path, unsigned flags, char *err, size_t errlen)
{
	struct store *st;
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
	ret = check_schema(st->db, path, flags, err, errlen);
	if (ret)
		goto err_out;
	if (flags & STORE_F_READONLY)
		return st;
	rc = exec(st->db, "PRAGMA journal_mode = WAL");
	if (rc != SQLITE_OK) {
		ret = open_fail(st->db, rc, path, "switching to WAL", err, errlen);
		goto err_out;
	}
	for (int i = 0; i < ST_MAX; i++) {
		rc = sqlite3_prepare_v3(st->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&st->st[i], NULL);
		if (rc != SQLITE_OK) {
			ret = open_fail(st->db, rc, path, "preparing statements", err, errlen);
			goto err_out;
		}
	}
	ckpt_start(st);
	return st;

err_out:
	store__close(st);
	return fay_err_ptr(ret);
}

void store__close(struct store *st)
{
	if (!st)
		return;
	ckpt_stop(st);
	for (int i = 0; i < ST_MAX; i++)
		sqlite3_finalize(st->st[i]);
	if (st->db && sqlite3_close(st->db) != SQLITE_OK)
		pr_warn("store: %s: close: %s", st->path, sqlite3_errmsg(st->db));
	nameset_clear(&st->names);
	free(st->ja.p);
	free(st->jt.p);
	zarena_reset(&st->merge_arena);
	free(st->path);
	free(st);
}

/* ---- JSON columns ------------------------------------------------------- */

static void jb_put(struct jbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;

		while (b->len + n + 1 > cap)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void jb_str(struct jbuf *b, struct zs_str s)
{
	static const char hex[] = "0123456789abcdef";
	size_t run = 0;

	jb_put(b, "\"", 1);
	for (uint32_t i = 0; i < s.len; i++) {
		unsigned char c = (unsigned char)s.p[i];
		char esc[7];

		if (c >= 0x20 && c != '"' && c != '\\') {
			run++;
			continue;
		}
		jb_put(b, s.p + i - run, run);
		run = 0;
		esc[0] = '\\';
		switch (c) {
		case '"': case '\\': esc[1] = (char)c; jb_put(b, esc, 2); break;
		case '\n': jb_put(b, "\\n", 2); break;
		case '\t': jb_put(b, "\\t", 2); break;
		case '\r': jb_put(b, "\\r", 2); break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			jb_put(b, esc, 6);
		}
	}
	jb_put(b, s.p + s.len - run, run);
	jb_put(b, "\"", 1);
}

static void jb_annotations(struct jbuf *b, const struct zspan *s)
{
	char num[64];

	b->len = 0;
	b->oom = 0;
	jb_put(b, "[", 1);
	for (uint32_t i = 0; i < s->nannotations; i++) {
		int n = snprintf(num, sizeof(num), "%s{\"timestamp\":%" PRIu64 ",\"value\":",
				 i ? "," : "", s->annotations[i].ts_us);

		jb_put(b, num, (size_t)n < sizeof(num) ? (size_t)n : sizeof(num) - 1);
		jb_str(b, s->annotations[i].value);
		jb_put(b, "}", 1);
	}
	jb_put(b, "]", 1);
}

static void jb_tags(struct jbuf *b, const struct zspan *s)
{
	b->len = 0;
	b->oom = 0;
	jb_put(b, "{", 1);
	for (uint32_t i = 0; i < s->ntags; i++) {
		if (i)
			jb_put(b, ",", 1);
		jb_str(b, s->tags[i].key);
		jb_put(b, ":", 1);
		jb_str(b, s->tags[i].value);
	}
	jb_put(b, "}", 1);
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

/* Make sure (kind, a, b) is in its name table. */
static int note_name(struct store *st, int which, struct zs_str a, struct zs_str b)
{
	char key[1024];
	sqlite3_stmt *s = st->st[which];
	size_t n;
	int rc;

	if (!a.len || (which != ST_INS_SERVICE && !b.len))
		return SQLITE_OK;
	n = (size_t)snprintf(key, sizeof(key), "%d\x1f%.*s\x1f%.*s", which,
			     (int)a.len, a.p, (int)b.len, b.p);
	if (n >= sizeof(key))
		n = sizeof(key) - 1; /* cut: at worst a redundant INSERT OR IGNORE */
	rc = nameset_has(&st->names, key, n, 0);
	if (rc == 1)
		return SQLITE_OK;
	bind_str(s, 1, a);
	if (which != ST_INS_SERVICE)
		bind_str(s, 2, b);
	rc = step_done(s);
	if (rc == SQLITE_OK && nameset_has(&st->names, key, n, 1) < 0)
		nameset_clear(&st->names);
	return rc;
}

/* Bind trace id, span id and parent id at columns 1..4. */
static void bind_ids(sqlite3_stmt *s, uint64_t hi, uint64_t lo, uint64_t id, uint64_t parent)
{
	sqlite3_bind_int64(s, 1, (sqlite3_int64)hi);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)lo);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)id);
	bind_u64_or_null(s, 4, parent);
}

static int insert_span(struct store *st, const struct zspan *z, int origin)
{
	sqlite3_stmt *s = st->st[ST_INS_SPAN];
	int rc;

	bind_ids(s, z->trace_hi, z->trace_lo, z->id, z->parent_id);
	sqlite3_bind_int(s, 5, z->kind);
	bind_str(s, 6, z->name);
	bind_ep(s, 7, &z->local);
	bind_ep(s, 11, &z->remote);
	bind_u64_or_null(s, 15, z->timestamp_us);
	bind_u64_or_null(s, 16, z->duration_us);
	sqlite3_bind_int(s, 17, z->shared);
	sqlite3_bind_int(s, 18, z->debug);
	sqlite3_bind_int(s, 19, z->error);
	if (z->nannotations) {
		jb_annotations(&st->ja, z);
		if (st->ja.oom)
			return SQLITE_NOMEM;
		sqlite3_bind_text(s, 20, st->ja.p, (int)st->ja.len, SQLITE_STATIC);
	} else {
		sqlite3_bind_null(s, 20);
	}
	if (z->ntags) {
		jb_tags(&st->jt, z);
		if (st->jt.oom)
			return SQLITE_NOMEM;
		sqlite3_bind_text(s, 21, st->jt.p, (int)st->jt.len, SQLITE_STATIC);
	} else {
		sqlite3_bind_null(s, 21);
	}
	sqlite3_bind_int(s, 22, origin);
	rc = step_done(s);
	if (rc != SQLITE_OK)
		return rc;
	rc = note_name(st, ST_INS_SERVICE, z->local.service, (struct zs_str){ 0 });
	if (rc == SQLITE_OK)
		rc = note_name(st, ST_INS_SPAN_NAME, z->local.service, z->name);
	if (rc == SQLITE_OK)
		rc = note_name(st, ST_INS_REMOTE, z->local.service, z->remote.service);
	return rc;
}

static int insert_part(struct store *st, const struct zs_part *p)
{
	sqlite3_stmt *s = st->st[ST_INS_PART];

	bind_ids(s, p->trace_hi, p->trace_lo, p->id, p->parent_id);
	bind_str(s, 5, p->name);
	bind_ep(s, 6, &p->local);
	bind_ep(s, 10, &p->remote);
	sqlite3_bind_int(s, 14, p->debug);
	sqlite3_bind_int(s, 15, p->is_tag);
	bind_u64_or_null(s, 16, p->ts_us);
	sqlite3_bind_text(s, 17, p->key.len ? p->key.p : "", (int)p->key.len, SQLITE_STATIC);
	if (p->is_tag)
		sqlite3_bind_text(s, 18, p->value.len ? p->value.p : "", (int)p->value.len,
				  SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 18);
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
static int remerge(struct store *st, const struct span_key *k)
{
	sqlite3_stmt *d = st->st[ST_DEL_MERGED], *s = st->st[ST_SEL_PARTS];
	struct zarena *a = &st->merge_arena;
	struct zs_part *parts = NULL;
	struct zspan *spans;
	size_t n = 0, cap = 0;
	int rc, m;

	for (int i = 1; i <= 3; i++) {
		uint64_t v = i == 1 ? k->hi : i == 2 ? k->lo : k->id;

		sqlite3_bind_int64(d, i, (sqlite3_int64)v);
		sqlite3_bind_int64(s, i, (sqlite3_int64)v);
	}
	rc = step_done(d);
	if (rc != SQLITE_OK)
		return rc;
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
		rc = insert_span(st, &spans[i], 1);
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
oom:
	sqlite3_reset(s);
	return SQLITE_NOMEM;
}

static int write_parts(struct store *st, struct store_batch *b)
{
	struct span_key *keys;
	size_t nk = 0;
	int rc = SQLITE_OK;

	keys = malloc(sizeof(*keys) * b->nparts);
	if (!keys)
		return SQLITE_NOMEM;
	for (size_t i = 0; i < b->nparts && rc == SQLITE_OK; i++) {
		rc = insert_part(st, &b->parts[i]);
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

static int last_seq_of(struct store *st, const char *agent_id, uint64_t *seq)
{
	sqlite3_stmt *s = st->st[ST_LAST_SEQ];
	int rc;

	sqlite3_bind_text(s, 1, agent_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	*seq = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
	sqlite3_reset(s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int write_one(struct store *st, struct store_batch *b, uint64_t now_us)
{
	uint64_t last;
	int rc;

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
		rc = insert_span(st, &b->spans[i], 0);
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
		sqlite3_bind_int64(s, 4, (sqlite3_int64)now_us);
		sqlite3_bind_int64(s, 5, (sqlite3_int64)b->stored);
		rc = step_done(s);
	}
	return rc;
}

static void rollback(struct store *st)
{
	step_done(st->st[ST_ROLLBACK]);
	/* names inserted by the transaction are gone again */
	nameset_clear(&st->names);
}

int store__write(struct store *st, struct store_batch **b, size_t n,
		 char *err, size_t errlen)
{
	uint64_t now_us = clock_realtime_ns() / 1000;
	int rc;

	if (st->flags & STORE_F_READONLY) {
		set_err(err, errlen, "%s: opened read-only", st->path);
		return -EROFS;
	}
	rc = step_done(st->st[ST_BEGIN]);
	if (rc != SQLITE_OK) {
		set_err(err, errlen, "%s: BEGIN: %s", st->path, sqlite3_errmsg(st->db));
		return sq_errno(rc);
	}
	for (size_t i = 0; i < n; i++) {
		rc = write_one(st, b[i], now_us);
		if (rc != SQLITE_OK)
			goto fail;
	}
	rc = step_done(st->st[ST_COMMIT]);
	if (rc != SQLITE_OK)
		goto fail;
	return 0;
fail:
	set_err(err, errlen, "%s: storing spans: %s", st->path,
		rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(st->db));
	rollback(st);
	for (size_t i = 0; i < n; i++)
		b[i]->stored = 0, b[i]->duplicate = 0;
	return sq_errno(rc);
}

int store__agent_hello(struct store *st, const char *agent_id, const char *host,
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

int store__agent_stats(struct store *st, const char *agent_id, const char *json)
{
	sqlite3_stmt *s = st->st[ST_AGENT_STATS];

	sqlite3_bind_text(s, 1, agent_id, -1, SQLITE_STATIC);
	bind_cstr(s, 2, json);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)(clock_realtime_ns() / 1000));
	return sq_errno(step_done(s));
}

int store__agent_last_seq(struct store *st, const char *agent_id, uint64_t *last_seq)
{
	return sq_errno(last_seq_of(st, agent_id, last_seq));
}

/* Forget names no span carries any more (after retention deleted some). */
static int prune_names(struct store *st)
{
	int rc = exec(st->db,
		"BEGIN IMMEDIATE;"
		"DELETE FROM services WHERE NOT EXISTS (SELECT 1 FROM spans"
		" WHERE local_service = services.name);"
		"DELETE FROM span_names WHERE NOT EXISTS (SELECT 1 FROM spans"
		" WHERE local_service = span_names.service AND name = span_names.name);"
		"DELETE FROM remote_services WHERE NOT EXISTS (SELECT 1 FROM spans"
		" WHERE local_service = remote_services.service"
		" AND remote_service = remote_services.remote);"
		"COMMIT;");

	if (rc != SQLITE_OK)
		exec(st->db, "ROLLBACK");
	nameset_clear(&st->names);
	return rc;
}

int store__retain(struct store *st, uint64_t before_us, unsigned chunk)
{
	int64_t total = 0;
	int rc;

	rc = step_done(st->st[ST_BEGIN]);
	for (int i = ST_RETAIN_SPANS; i <= ST_RETAIN_PARTS && rc == SQLITE_OK; i++) {
		sqlite3_stmt *s = st->st[i];

		sqlite3_bind_int64(s, 1, (sqlite3_int64)before_us);
		sqlite3_bind_int64(s, 2, chunk);
		rc = step_done(s);
		total += sqlite3_changes(st->db);
	}
	if (rc == SQLITE_OK)
		rc = step_done(st->st[ST_COMMIT]);
	if (rc != SQLITE_OK) {
		pr_warn("store: %s: retention: %s", st->path, sqlite3_errmsg(st->db));
		rollback(st);
		return sq_errno(rc);
	}
	st->retained += (uint64_t)total;
	if (!total && st->retained) {
		st->retained = 0;
		rc = prune_names(st);
		if (rc != SQLITE_OK)
			pr_warn("store: %s: pruning names: %s", st->path, sqlite3_errmsg(st->db));
	}
	return (int)total;
}
