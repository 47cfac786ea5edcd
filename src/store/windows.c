// SPDX-License-Identifier: MIT
/*
 * store__windows(): the last windows of a standing query, read the same
 * way on every backend, through store__sql() (the table layout is one:
 * docs/SQL.md).  The backend names what it reads (its ops'
 * windows_from: ClickHouse adds FINAL, so that a window written twice is
 * one row before any merge); rows come newest first and a key seen
 * already is skipped besides, so no answer holds a window twice.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend.h"
#include "store/store.h"

#define WIN_COLS "name, start_us, end_us, host, answer, asked, answered, missing," \
	" provisional, amended, written_us"
#define WIN_NCOLS 11

struct win_rows {
	char ***rows;             /* each: WIN_NCOLS strings */
	size_t n, cap;
	unsigned limit;
	int err;
};

static int win_columns(void *ctx, size_t n, const char *const *names)
{
	(void)names;
	return n == WIN_NCOLS ? 0 : (((struct win_rows *)ctx)->err = -EPROTO);
}

static void row_free(char **r)
{
	for (int i = 0; r && i < WIN_NCOLS; i++)
		free(r[i]);
	free(r);
}

/* Keep a row unless its end_us is that of the row before (the same key,
 * an older version: rows come by end_us, then written_us, descending). */
static int win_row(void *ctx, size_t n, const char *const *vals)
{
	struct win_rows *w = ctx;
	char **r;

	if (n != WIN_NCOLS)
		return w->err = -EPROTO;
	if (w->n && !strcmp(w->rows[w->n - 1][2], vals[2] ? vals[2] : ""))
		return 0;
	if (w->n == w->limit)
		return 1;	/* enough */
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		char ***v = realloc(w->rows, cap * sizeof(*v));

		if (!v)
			return w->err = -ENOMEM;
		w->rows = v;
		w->cap = cap;
	}
	r = calloc(WIN_NCOLS, sizeof(*r));
	if (!r)
		return w->err = -ENOMEM;
	w->rows[w->n++] = r;
	for (int i = 0; i < WIN_NCOLS; i++)
		if (!(r[i] = strdup(vals[i] ? vals[i] : "")))
			return w->err = -ENOMEM;
	return 0;
}

static bool quotable(const char *s)
{
	return !strpbrk(s, "'\\");
}

int store__windows(struct store_reader *r, const char *name, const char *host,
		   unsigned limit, int (*fn)(void *ctx, const struct store_window *w),
		   void *ctx, char *err, size_t errlen)
{
	const struct store_ops *ops = store_reader_ops(r);
	struct win_rows w = { .limit = limit };
	struct store_sql_cb cb = { win_columns, win_row, &w };
	size_t len = strlen(name) + strlen(host) + 512;
	char *sql = malloc(len);
	int ret;

	if (!quotable(name) || !quotable(host)) {
		free(sql);
		snprintf(err, errlen, "a window's name or host with ' or \\");
		return -EINVAL;
	}
	if (!sql)
		return -ENOMEM;
	if (!limit || !ops->windows_from) {
		free(sql);
		return 0;
	}
	snprintf(sql, len, "SELECT " WIN_COLS " FROM %s WHERE name = '%s' AND host = '%s'"
		 " ORDER BY end_us DESC, written_us DESC LIMIT %u", ops->windows_from, name, host,
		 limit);
	ret = store__sql(r, sql, &cb, err, errlen);
	free(sql);
	if (ret == 1)
		ret = 0;	/* stopped: limit windows */
	if (!ret && w.err)
		ret = w.err;
	/* oldest first */
	for (size_t i = w.n; !ret && i-- > 0;) {
		char **v = w.rows[i];
		struct store_window sw = {
			.name = v[0],
			.start_us = strtoull(v[1], NULL, 10),
			.end_us = strtoull(v[2], NULL, 10),
			.host = v[3],
			.answer = v[4],
			.asked = (uint32_t)strtoul(v[5], NULL, 10),
			.answered = (uint32_t)strtoul(v[6], NULL, 10),
			.missing = v[7],
			.provisional = (uint8_t)atoi(v[8]),
			.amended = (uint8_t)atoi(v[9]),
			.written_us = strtoull(v[10], NULL, 10),
		};

		ret = fn(ctx, &sw);
	}
	for (size_t i = 0; i < w.n; i++)
		row_free(w.rows[i]);
	free(w.rows);
	return ret;
}
