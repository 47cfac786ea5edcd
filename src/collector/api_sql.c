// SPDX-License-Identifier: MIT
/*
 * POST /api/sql[?format=table|json]: one read-only SQL statement (the
 * body) on the collector's store, for `fay sql --collector URL`.  The
 * store enforces read-only itself (store__sql()); the token rules are
 * those of every POST (http_screen.c).  200 with the answer, 400 with the
 * store's reason for a bad statement, 403 for one that would write, 503
 * when the store does not answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/http_int.h"

int api_sql(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	const struct http_body *body = &rq->body;
	const char *fmt = arg(con, "format");
	struct store_sql_out o = { .json = !fmt || strcmp(fmt, "table") };
	struct store_sql_cb cb = { store_sql_out_columns, store_sql_out_row, &o };
	struct store_reader *r;
	char *sql, *text = NULL, err[512] = "";
	size_t len = 0;
	int ret;

	if (body->too_big)
		return reply_text(c, con, 413, "statement over --max-body\n");
	if (fmt && strcmp(fmt, "table") && strcmp(fmt, "json"))
		return reply_text(c, con, 400, "format '%s': table or json\n", fmt);
	sql = strndup(body->p ? body->p : "", body->len);
	o.f = open_memstream(&text, &len);
	r = sql && o.f ? coll_reader_get(c) : NULL;
	if (!r) {
		if (o.f)
			fclose(o.f);
		free(text);
		free(sql);
		return reply_text(c, con, 503, "store: %s\n", sql && o.f ? "no reader" :
				  "out of memory");
	}
	ret = store__sql(r, sql, &cb, err, sizeof(err));
	coll_reader_put(c, r);
	if (!ret)
		ret = store_sql_out_end(&o);
	store_sql_out_free(&o);
	fclose(o.f);
	free(sql);
	if (ret) {
		free(text);
		return reply_text(c, con, ret == -EPERM ? 403 : ret == -ECONNREFUSED ||
				  ret == -ETIMEDOUT ? 503 : 400, "%s\n",
				  err[0] ? err : strerror(-ret));
	}
	return reply(con, 200, o.json ? "application/json" : "text/plain; charset=utf-8",
		     text, len);
}
