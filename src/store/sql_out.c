// SPDX-License-Identifier: MIT
/*
 * The answer of store__sql() as text: an aligned table (rows kept until
 * the end, to size the columns) or JSON (an array of objects, written as
 * the rows come).  Used by `fay sql` and the collector's POST /api/sql.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_str.h"
#include "store/store.h"

/* s as a JSON string, or null. */
static void json_str_or_null(FILE *f, const char *s)
{
	if (s)
		json_str(f, s, strlen(s));
	else
		fputs("null", f);
}

static char *dup_or_null(const char *s)
{
	return strdup(s ? s : "NULL");
}

int store_sql_out_columns(void *ctx, size_t n, const char *const *names)
{
	struct store_sql_out *o = ctx;

	o->ncols = n;
	o->names = calloc(n ? n : 1, sizeof(*o->names));
	if (!o->names)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(o->names[i] = dup_or_null(names[i])))
			return -ENOMEM;
	if (o->json)
		fputc('[', o->f);
	return 0;
}

int store_sql_out_row(void *ctx, size_t n, const char *const *vals)
{
	struct store_sql_out *o = ctx;
	char **row;

	if (o->json) {
		fputs(o->nrows ? ",\n{" : "\n{", o->f);
		for (size_t i = 0; i < n && i < o->ncols; i++) {
			if (i)
				fputc(',', o->f);
			json_str_or_null(o->f, o->names[i]);
			fputc(':', o->f);
			json_str_or_null(o->f, vals[i]);
		}
		fputc('}', o->f);
		o->nrows++;
		return ferror(o->f) ? -EIO : 0;
	}
	if (o->nrows == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		char ***v = realloc(o->rows, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		o->rows = v;
		o->cap = cap;
	}
	row = calloc(o->ncols ? o->ncols : 1, sizeof(*row));
	if (!row)
		return -ENOMEM;
	o->rows[o->nrows++] = row;
	for (size_t i = 0; i < o->ncols; i++)
		if (!(row[i] = dup_or_null(i < n ? vals[i] : NULL)))
			return -ENOMEM;
	return 0;
}

static void pad_cell(FILE *f, const char *s, size_t w, int last)
{
	size_t len = strlen(s);

	fputs(s, f);
	if (!last)
		for (; len < w + 2; len++)
			fputc(' ', f);
}

int store_sql_out_end(struct store_sql_out *o)
{
	size_t *w;

	if (o->json) {
		fputs(o->names ? "\n]\n" : "[]\n", o->f);
		return ferror(o->f) ? -EIO : 0;
	}
	w = calloc(o->ncols ? o->ncols : 1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (size_t i = 0; i < o->ncols; i++) {
		w[i] = strlen(o->names[i]);
		for (size_t r = 0; r < o->nrows; r++)
			if (strlen(o->rows[r][i]) > w[i])
				w[i] = strlen(o->rows[r][i]);
	}
	for (size_t i = 0; i < o->ncols; i++)
		pad_cell(o->f, o->names[i], w[i], i + 1 == o->ncols);
	fputc('\n', o->f);
	for (size_t i = 0; i < o->ncols; i++) {
		for (size_t k = 0; k < w[i]; k++)
			fputc('-', o->f);
		if (i + 1 < o->ncols)
			fputs("  ", o->f);
	}
	fputc('\n', o->f);
	for (size_t r = 0; r < o->nrows; r++) {
		for (size_t i = 0; i < o->ncols; i++)
			pad_cell(o->f, o->rows[r][i], w[i], i + 1 == o->ncols);
		fputc('\n', o->f);
	}
	fprintf(o->f, "(%zu row%s)\n", o->nrows, o->nrows == 1 ? "" : "s");
	free(w);
	return ferror(o->f) ? -EIO : 0;
}

void store_sql_out_free(struct store_sql_out *o)
{
	for (size_t r = 0; r < o->nrows && o->rows; r++) {
		for (size_t i = 0; i < o->ncols; i++)
			free(o->rows[r][i]);
		free(o->rows[r]);
	}
	for (size_t i = 0; i < o->ncols && o->names; i++)
		free(o->names[i]);
	free(o->rows);
	free(o->names);
	o->rows = NULL;
	o->names = NULL;
	o->nrows = o->cap = o->ncols = 0;
}
