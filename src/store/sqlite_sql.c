// SPDX-License-Identifier: MIT
/*
 * The SQLite store: store__sql(), one read-only statement on a connection
 * of its own opened read-only (SQLITE_OPEN_READONLY), refused unless
 * sqlite3_stmt_readonly() says it writes nothing.  `spans` is a view
 * (schema 5): a statement that would write it fails to prepare instead
 * (SQLite: "cannot modify spans because it is a view", or "use DROP VIEW"
 * after asking the authorizer about the DROP), and is refused the same
 * way as any other write.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_int.h"
#include "store/store.h"

/* The authorizer: notes (in *ctx) an action that would write. */
static int note_write(void *ctx, int code, const char *a, const char *b,
		      const char *db, const char *trigger)
{
	switch (code) {
	case SQLITE_INSERT: case SQLITE_UPDATE: case SQLITE_DELETE:
	case SQLITE_DROP_TABLE: case SQLITE_DROP_VIEW: case SQLITE_DROP_INDEX:
	case SQLITE_DROP_TRIGGER: case SQLITE_CREATE_TABLE: case SQLITE_CREATE_VIEW:
	case SQLITE_CREATE_INDEX: case SQLITE_CREATE_TRIGGER: case SQLITE_ALTER_TABLE:
		*(int *)ctx = 1;
		break;
	}
	return SQLITE_OK;
}

static int sql_fail(sqlite3 *db, char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
	return -EINVAL;
}

int sq__sql(struct store_rd *r, const char *sql, const struct store_sql_cb *cb,
	    char *err, size_t errlen)
{
	const char *path = sqlite3_db_filename(sq_reader_db(r), "main");
	const char **vals = NULL, *tail = NULL;
	sqlite3_stmt *s = NULL;
	sqlite3 *db = NULL;
	int rc, n, ret = 0, writes = 0;

	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		ret = sql_fail(db, err, errlen, path);
		goto out;
	}
	sqlite3_busy_timeout(db, 10000);
	sqlite3_set_authorizer(db, note_write, &writes);
	rc = sqlite3_prepare_v2(db, sql, -1, &s, &tail);
	if (rc != SQLITE_OK && (writes || !strncmp(sqlite3_errmsg(db), "cannot modify ", 14)))
		goto writes;
	if (rc != SQLITE_OK) {
		ret = sql_fail(db, err, errlen, "SQL");
		goto out;
	}
	if (!s) {
		snprintf(err, errlen, "SQL: no statement");
		ret = -EINVAL;
		goto out;
	}
	tail += strspn(tail, " \t\r\n;");
	if (*tail) {
		snprintf(err, errlen, "SQL: one statement only (more at \"%.40s\")", tail);
		ret = -EINVAL;
		goto out;
	}
	if (!sqlite3_stmt_readonly(s)) {
writes:
		snprintf(err, errlen, "SQL: only statements that read (SELECT ...) are allowed");
		ret = -EPERM;
		goto out;
	}
	n = sqlite3_column_count(s);
	vals = calloc((size_t)n + 1, sizeof(*vals));
	if (!vals) {
		ret = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < n; i++)
		vals[i] = sqlite3_column_name(s, i);
	ret = cb->columns(cb->ctx, (size_t)n, vals);
	while (!ret && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		for (int i = 0; i < n; i++)
			vals[i] = (const char *)sqlite3_column_text(s, i);
		ret = cb->row(cb->ctx, (size_t)n, vals);
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sql_fail(db, err, errlen, "SQL");
out:
	free(vals);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return ret;
}
