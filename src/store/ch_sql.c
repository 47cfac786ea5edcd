// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store: store__sql(), one statement sent with the
 * readonly=1 setting (the server refuses anything that writes or changes
 * settings) on a connection of its own, its answer read as
 * TabSeparatedWithNames.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend.h"
#include "store/ch_int.h"

/* Unescape one TabSeparated field in place ([p, end)); NUL-terminates. */
static char *tsv_field(char *p, char *end)
{
	char *o = p, *start = p;

	for (; p < end; p++) {
		if (*p != '\\' || p + 1 >= end) {
			*o++ = *p;
			continue;
		}
		switch (*++p) {
		case 't': *o++ = '\t'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case '0': *o++ = '\0'; break;
		default: *o++ = *p; break;
		}
	}
	*o = '\0';
	return start;
}

/* Split line [p, end) at tabs into at most max fields; how many. */
static size_t tsv_line(char *p, char *end, const char **v, size_t max)
{
	size_t n = 0;

	while (n < max) {
		char *tab = memchr(p, '\t', (size_t)(end - p));
		char *stop = tab ? tab : end;

		/* \N is NULL */
		if (stop - p == 2 && p[0] == '\\' && p[1] == 'N')
			v[n] = NULL;
		else
			v[n] = tsv_field(p, stop);
		n++;
		if (!tab)
			break;
		p = tab + 1;
	}
	return n;
}

int ch__sql(struct store_rd *r, const char *sql, const struct store_sql_cb *cb,
	    char *err, size_t errlen)
{
	struct store_be *st = ch_reader_store(r);
	struct ch_conn *c = ch_conn_new(st->urls[0], st->db, CH_READONLY, err, errlen);
	struct wbuf q = { 0 }, out = { 0 };
	const char **v = NULL;
	size_t ncols = 0, len;
	char *p, *end;
	int ret;

	if (!c)
		return -errno;
	len = strlen(sql);
	while (len && strchr(" \t\r\n;", sql[len - 1]))
		len--;
	wbuf_put(&q, sql, len);
	wbuf_put(&q, "\nFORMAT TabSeparatedWithNames", 30);
	wbuf_u8(&q, 0);
	ret = q.err ? -ENOMEM : ch_query(c, (const char *)q.p, &out, err, errlen);
	if (ret == -EIO && strstr(err, "readonly"))
		ret = -EPERM;
	if (ret)
		goto done;
	p = (char *)out.p;
	end = p + out.len;
	for (int line = 0; p < end && !ret; line++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *stop = nl ? nl : end;

		if (!line) {
			/* the header: as many columns as tabs + 1 */
			ncols = 1;
			for (char *t = p; t < stop; t++)
				ncols += *t == '\t';
			v = calloc(ncols, sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				break;
			}
			tsv_line(p, stop, v, ncols);
			ret = cb->columns(cb->ctx, ncols, v);
		} else {
			size_t n = tsv_line(p, stop, v, ncols);

			for (size_t i = n; i < ncols; i++)
				v[i] = NULL;
			ret = cb->row(cb->ctx, ncols, v);
		}
		p = stop + 1;
	}
done:
	free(v);
	wbuf_free(&q);
	wbuf_free(&out);
	ch_conn_free(c);
	return ret;
}
