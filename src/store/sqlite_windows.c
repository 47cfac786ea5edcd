// SPDX-License-Identifier: MIT
/*
 * The SQLite store: store__put_windows(), on a connection of its own
 * (opened at the first call, kept until the store closes), so that a
 * standing query's thread never shares the ingest writer's connection.
 * WAL lets one connection write at a time: a window's short transaction
 * and the writer's wait for each other (busy timeout), they never fail.
 * Retention of the windows is sq__retain()'s (sqlite_batch.c).
 */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>

#include "common/log.h"
#include "store/sqlite_int.h"
#include "store/store.h"

#define WIN_UPSERT \
	"INSERT INTO query_windows (name, start_us, end_us, host, answer, asked, answered," \
	" missing, provisional, amended, written_us) VALUES (?,?,?,?,?,?,?,?,?,?,?)" \
	" ON CONFLICT (name, end_us, host) DO UPDATE SET start_us = excluded.start_us," \
	" answer = excluded.answer, asked = excluded.asked, answered = excluded.answered," \
	" missing = excluded.missing, provisional = excluded.provisional," \
	" amended = excluded.amended, written_us = excluded.written_us" \
	" WHERE excluded.written_us >= query_windows.written_us"

/* Open st->wdb (under st->wlock).  SQLite rc. */
static int wdb_open(struct store_be *st)
{
	int rc;

	if (st->wdb)
		return SQLITE_OK;
	rc = sqlite3_open_v2(st->path, &st->wdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(st->wdb, 10000);
		rc = sq_exec(st->wdb, "PRAGMA synchronous = NORMAL");
	}
	if (rc != SQLITE_OK) {
		sqlite3_close(st->wdb);
		st->wdb = NULL;
	}
	return rc;
}

static int put(sqlite3 *db, const struct store_window *w, size_t n)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(db, WIN_UPSERT, -1, &s, NULL);

	if (rc == SQLITE_OK)
		rc = sq_exec(db, "BEGIN IMMEDIATE");
	for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
		sqlite3_bind_text(s, 1, w[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, (sqlite3_int64)w[i].start_us);
		sqlite3_bind_int64(s, 3, (sqlite3_int64)w[i].end_us);
		sqlite3_bind_text(s, 4, w[i].host, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 5, w[i].answer, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 6, w[i].asked);
		sqlite3_bind_int64(s, 7, w[i].answered);
		sqlite3_bind_text(s, 8, w[i].missing ? w[i].missing : "[]", -1, SQLITE_STATIC);
		sqlite3_bind_int(s, 9, w[i].provisional);
		sqlite3_bind_int(s, 10, w[i].amended);
		sqlite3_bind_int64(s, 11, (sqlite3_int64)w[i].written_us);
		rc = sq_step_done(s);
	}
	if (rc == SQLITE_OK)
		rc = sq_exec(db, "COMMIT");
	else if (!sqlite3_get_autocommit(db))
		sq_exec(db, "ROLLBACK");
	sqlite3_finalize(s);
	return rc;
}

int sq__put_windows(struct store_be *st, const struct store_window *w, size_t n,
		    char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&st->wlock);
	rc = wdb_open(st);
	if (rc == SQLITE_OK)
		rc = put(st->wdb, w, n);
	if (rc != SQLITE_OK)
		sq_set_err(err, errlen, "%s: query_windows: %s", st->path,
			   st->wdb ? sqlite3_errmsg(st->wdb) : sqlite3_errstr(rc));
	pthread_mutex_unlock(&st->wlock);
	return rc == SQLITE_OK ? 0 : sq_errno(rc);
}

void sq_windows_close(struct store_be *st)
{
	if (st->wdb && sqlite3_close(st->wdb) != SQLITE_OK)
		pr_warn("store: %s: close: %s", st->path, sqlite3_errmsg(st->wdb));
	st->wdb = NULL;
}
