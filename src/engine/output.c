// SPDX-License-Identifier: MIT
/*
 * Results as text: an aligned table (hist/lhist columns as bars, the way
 * bpftrace draws them) or JSON, one object per row per line, keys the
 * select's names; windowed rows carry "window_start_ns"; a distribution
 * is an array of its non-empty buckets {"lo": L, "hi": H, "count": N}
 * (lo inclusive, hi exclusive, null where the bucket is unbounded).  Folded
 * stacks and call trees: output_stacks.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json_str.h"
#include "engine/engine_int.h"

#define BAR_WIDTH 40

/* ---- values ------------------------------------------------------------------ */

/* Printable bytes of a fixed-size string (up to its NUL). */
static void put_str(FILE *f, const char *s, size_t len, int width)
{
	size_t n = strnlen(s, len);

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		fputc(c >= 0x20 && c != 0x7f ? c : '?', f);
	}
	for (int i = (int)n; i < width; i++)
		fputc(' ', f);
}

struct bucket {
	bool has_lo, has_hi;
	int64_t lo, hi;		/* [lo, hi) */
	uint64_t count;
};

/* The buckets of distribution aggregate a in value (every bucket). */
static int dist_buckets(const struct plan_aggr *a, const unsigned char *value,
			struct bucket **out)
{
	const struct aggr_desc *d = &a->desc;
	int n = d->kind == AGGR_HIST ? AGGR_HIST_BUCKETS : (int)d->nbuckets + 2;
	struct bucket *b = calloc((size_t)n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		memcpy(&b[i].count, value + a->offset + 8 * i, 8);
		if (d->kind == AGGR_HIST) {
			b[i].has_hi = true;
			if (i == 0) {
				b[i].hi = 1;
			} else {
				b[i].has_lo = true;
				b[i].lo = (int64_t)(1ull << (i - 1));
				b[i].hi = i < 64 ? (int64_t)(1ull << i) : INT64_MAX;
				if (i == 63)
					b[i].hi = INT64_MAX;	/* 2^63 - 1, inclusive */
			}
		} else if (i == 0) {
			b[i].has_hi = true;
			b[i].hi = d->lo;
		} else if (i == n - 1) {
			b[i].has_lo = true;
			b[i].lo = d->hi;
		} else {
			b[i].has_lo = b[i].has_hi = true;
			b[i].lo = d->lo + (int64_t)(i - 1) * d->step;
			b[i].hi = b[i].lo + d->step < d->hi ? b[i].lo + d->step : d->hi;
		}
	}
	*out = b;
	return n;
}

/* 1024 -> "1K" when exact, like bpftrace's labels. */
static void fmt_num(char *buf, size_t len, int64_t v, bool pow2)
{
	static const char sfx[] = "KMGTPE";
	int u = -1;

	if (pow2) {
		while (v >= 1024 && !(v % 1024) && u < 5) {
			v /= 1024;
			u++;
		}
	}
	if (u >= 0)
		snprintf(buf, len, "%" PRId64 "%c", v, sfx[u]);
	else
		snprintf(buf, len, "%" PRId64, v);
}

static void bucket_label(const struct bucket *b, bool pow2, char *buf, size_t len)
{
	char lo[32], hi[32];

	if (b->has_lo)
		fmt_num(lo, sizeof(lo), b->lo, pow2);
	if (b->has_hi)
		fmt_num(hi, sizeof(hi), pow2 && b->has_lo ? b->hi : b->hi - (pow2 ? 1 : 0),
			pow2);
	if (!b->has_lo && pow2)
		snprintf(buf, len, "(..., %s]", hi);
	else if (!b->has_lo)
		snprintf(buf, len, "(..., %s)", hi);
	else if (!b->has_hi)
		snprintf(buf, len, "[%s, ...)", lo);
	else if (b->hi - b->lo == 1)
		snprintf(buf, len, "[%s]", lo);
	else
		snprintf(buf, len, "[%s, %s)", lo, hi);
}

static int print_bars(FILE *f, const struct plan_aggr *a, const unsigned char *val,
		      const char *indent)
{
	struct bucket *b;
	int n = dist_buckets(a, val, &b), first = -1, last = -1;
	uint64_t max = 0;

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		if (!b[i].count)
			continue;
		if (first < 0)
			first = i;
		last = i;
		if (b[i].count > max)
			max = b[i].count;
	}
	if (first < 0)
		fprintf(f, "%s(no values)\n", indent);
	for (int i = first; first >= 0 && i <= last; i++) {
		char label[80];
		int w = (int)((b[i].count * BAR_WIDTH + max - 1) / max);

		bucket_label(&b[i], a->desc.kind == AGGR_HIST, label, sizeof(label));
		fprintf(f, "%s%-20s %10" PRIu64 " |", indent, label, b[i].count);
		for (int j = 0; j < BAR_WIDTH; j++)
			fputc(j < w ? '@' : ' ', f);
		fputs("|\n", f);
	}
	free(b);
	return 0;
}

static int json_dist(FILE *f, const struct plan_aggr *a, const unsigned char *val)
{
	struct bucket *b;
	int n = dist_buckets(a, val, &b);
	bool any = false;

	if (n < 0)
		return n;
	fputc('[', f);
	for (int i = 0; i < n; i++) {
		if (!b[i].count)
			continue;
		fprintf(f, "%s{\"lo\":", any ? "," : "");
		if (b[i].has_lo)
			fprintf(f, "%" PRId64, b[i].lo);
		else
			fputs("null", f);
		fputs(",\"hi\":", f);
		if (b[i].has_hi && !(a->desc.kind == AGGR_HIST && i == 63))
			fprintf(f, "%" PRId64, b[i].hi);
		else
			fputs("null", f);
		fprintf(f, ",\"count\":%" PRIu64 "}", b[i].count);
		any = true;
	}
	fputc(']', f);
	free(b);
	return 0;
}

/* ---- aggregated results ---------------------------------------------------- */

struct cell {
	struct plan_val v;
	char text[32];		/* integers */
};

static int col_width(const struct plan_col *c)
{
	return (int)strlen(c->name);
}

static void window_stamp(FILE *f, uint64_t ns)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;
	char buf[64];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(f, "window %s.%03uZ\n", buf, (unsigned)(ns / 1000000 % 1000));
}

/* Column i of a row (key and merged val) or, key NULL, of a streamed
 * record (val), in JSON. */
static void json_col(const struct plan *p, FILE *f, int i, const void *key,
		     const void *val)
{
	const struct plan_col *c = &p->cols[i];
	const unsigned char *r = val;
	struct plan_val v;

	if (!key) {
		if (c->type == VT_STR) {
			const char *s = (const char *)r + c->offset;

			json_str(f, s, strnlen(s, (size_t)c->size));
		} else {
			int64_t x;

			memcpy(&x, r + c->offset, 8);
			fprintf(f, "%" PRId64, x);
		}
		return;
	}
	if (c->type == VT_DIST) {
		json_dist(f, &p->aggrs[c->aggr], val);
		return;
	}
	if (plan_eval(p, c->e, key, val, &v))
		fputs("null", f);
	else if (v.type == VT_STR)
		json_str(f, v.s, strnlen(v.s, v.len));
	else
		fprintf(f, "%" PRId64, v.i);
}

/* {"window_start_ns":W,"col":v,...}\n */
static void json_object_row(const struct plan *p, FILE *f, const void *key,
			    const void *val, uint64_t wstart, int category)
{
	fputc('{', f);
	if (wstart)
		fprintf(f, "\"window_start_ns\":%" PRIu64 "%s", wstart, p->ncols ? "," : "");
	for (int i = 0; i < p->ncols; i++) {
		if (i)
			fputc(',', f);
		json_str(f, p->cols[i].name, strlen(p->cols[i].name));
		fputc(':', f);
		json_col(p, f, i, key, val);
	}
	if (category)
		fprintf(f, ",\"category\":%d", category);
	fputs("}\n", f);
}

/* ---- categories -------------------------------------------------------------- */

void engine_print_cats_json(const struct engine_cats *c, FILE *f)
{
	bool first = true;

	fprintf(f, "\"entity_column\":%d,\"pivot\":%s,", c->entity_col,
		c->pivot ? "true" : "false");
	if (c->k_auto)
		fprintf(f, "\"k\":%d,\"k_auto\":true,\"silhouette\":%.4g,", c->k,
			c->silhouette);
	fputs("\"categories\":[", f);
	for (int l = 1; l <= c->k; l++) {
		const double *cen = c->centroid + (size_t)(l - 1) * c->nfeat;
		bool m1 = true;

		if (!c->size[l - 1])
			continue;
		fprintf(f, "%s{\"category\":%d,\"size\":%zu,\"members\":[", first ? "" : ",",
			l, c->size[l - 1]);
		first = false;
		for (size_t i = 0; i < c->n; i++) {
			if (c->label[i] != l)
				continue;
			if (!m1)
				fputc(',', f);
			m1 = false;
			json_str(f, c->entity[i], strlen(c->entity[i]));
		}
		fputs("],\"centroid\":{", f);
		for (size_t j = 0; j < c->nfeat; j++) {
			if (j)
				fputc(',', f);
			json_str(f, c->feat[j], strlen(c->feat[j]));
			fprintf(f, ":%.6g", cen[j]);
		}
		fputs("},\"top\":[", f);
		for (int t = 0; t < CAT_TOP && c->top[(l - 1) * CAT_TOP + t] >= 0; t++) {
			const char *s = c->feat[c->top[(l - 1) * CAT_TOP + t]];

			if (t)
				fputc(',', f);
			json_str(f, s, strlen(s));
		}
		fputs("]}", f);
	}
	fputs("],\"changed\":[", f);
	first = true;
	for (size_t i = 0; i < c->n; i++) {
		if (!c->prev[i] || c->prev[i] == c->label[i])
			continue;
		fputs(first ? "{\"entity\":" : ",{\"entity\":", f);
		first = false;
		json_str(f, c->entity[i], strlen(c->entity[i]));
		fprintf(f, ",\"from\":%d,\"to\":%d}", c->prev[i], c->label[i]);
	}
	fputc(']', f);
}

/* A feature of a category: "read 41%" (a share) or "p99 +1.8sd". */
static void put_feature(FILE *f, const struct engine_cats *c, int l, int j)
{
	double v = c->centroid[(size_t)(l - 1) * c->nfeat + (size_t)j];

	if (c->pivot)
		fprintf(f, "%s %.0f%%", c->feat[j], v * 100);
	else
		fprintf(f, "%s %+.1fsd", c->feat[j], v);
}

/* The table's categories: one line each, then who changed. */
static void print_cats(FILE *f, const struct engine_cats *c)
{
	int wm = (int)strlen("members"), ncat = 0, nch = 0;

	for (int l = 1; l <= c->k; l++) {
		int w = 0;

		for (size_t i = 0; i < c->n; i++)
			if (c->label[i] == l)
				w += (w ? 1 : 0) + (int)strlen(c->entity[i]);
		if (w > wm)
			wm = w;
		ncat += c->size[l - 1] > 0;
	}
	if (c->k_auto)
		fprintf(f, "categories (k-means, k = %d chosen by silhouette %.2f, %d used, %zu "
			"entities)\n", c->k, c->silhouette, ncat, c->n);
	else
		fprintf(f, "categories (k-means, %d of %d used, %zu entities)\n", ncat, c->k,
			c->n);
	fprintf(f, "category  size  %-*s  distinguishing\n", wm, "members");
	for (int l = 1; l <= c->k; l++) {
		int w = 0;

		if (!c->size[l - 1])
			continue;
		fprintf(f, "%8d  %4zu  ", l, c->size[l - 1]);
		for (size_t i = 0; i < c->n; i++) {
			if (c->label[i] != l)
				continue;
			w += fprintf(f, "%s%s", w ? " " : "", c->entity[i]);
		}
		fprintf(f, "%*s  ", wm - w, "");
		for (int t = 0; t < CAT_TOP && c->top[(l - 1) * CAT_TOP + t] >= 0; t++) {
			if (t)
				fputs(", ", f);
			put_feature(f, c, l, c->top[(l - 1) * CAT_TOP + t]);
		}
		fputc('\n', f);
	}
	for (size_t i = 0; i < c->n; i++) {
		if (!c->prev[i] || c->prev[i] == c->label[i])
			continue;
		fprintf(f, "%s%s %d -> %d", nch++ ? ", " : "changed: ", c->entity[i],
			c->prev[i], c->label[i]);
	}
	if (nch)
		fputc('\n', f);
}

int engine_print_values(const struct plan *p, FILE *f, const void *key, const void *val)
{
	fputc('[', f);
	for (int i = 0; i < p->ncols; i++) {
		if (i)
			fputc(',', f);
		json_col(p, f, i, key, val);
	}
	fputc(']', f);
	return ferror(f) ? -EIO : 0;
}

/* Printed under its row: a distribution's bars, a stack's frames. */
static bool under(const struct plan_col *c)
{
	return c->type == VT_DIST || c->stack_key >= 0;
}

/* A stack column under its row: one frame a line, innermost first (the
 * key holds them root first, ';' between). */
static void print_frames(const struct plan *p, FILE *f, const struct plan_col *c,
			 const void *key, const char *indent)
{
	const struct plan_key *k = &p->keys[c->stack_key];
	const char *s = (const char *)key + k->offset, *end;
	size_t n = strnlen(s, (size_t)k->size);

	for (end = s + n; end > s; ) {
		const char *semi = end;

		while (semi > s && semi[-1] != ';')
			semi--;
		fprintf(f, "%s    ", indent);
		put_str(f, semi, (size_t)(end - semi), 0);
		fputc('\n', f);
		end = semi > s ? semi - 1 : s;
	}
}

int engine_print_result(const struct plan *p, struct engine_out *o,
			const struct engine_result *res, uint64_t wstart)
{
	FILE *f = o->f;
	int ncols = p->ncols, nscalar = 0, *w;
	struct cell *cells;

	if (o->folded)
		return engine_print_folded(p, f, res);
	if (o->tree)
		return engine_print_tree(p, f, res);

	if (o->json) {
		for (size_t r = 0; r < res->nrows; r++)
			json_object_row(p, f, res->rows[r].key, res->rows[r].val, wstart,
					engine_cats_label(res->cats, p, &res->rows[r]));
		if (res->cats) {
			fputc('{', f);
			if (wstart)
				fprintf(f, "\"window_start_ns\":%" PRIu64 ",", wstart);
			engine_print_cats_json(res->cats, f);
			fputs("}\n", f);
		}
		return ferror(f) ? -EIO : 0;
	}
	w = calloc((size_t)ncols + 1, sizeof(*w));
	cells = calloc(res->nrows * (size_t)ncols + 1, sizeof(*cells));
	if (!w || !cells) {
		free(w);
		free(cells);
		return -ENOMEM;
	}
	for (int i = 0; i < ncols; i++) {
		w[i] = col_width(&p->cols[i]);
		if (!under(&p->cols[i]))
			nscalar++;
	}
	for (size_t r = 0; r < res->nrows; r++) {
		for (int i = 0; i < ncols; i++) {
			const struct plan_col *c = &p->cols[i];
			struct cell *cl = &cells[r * (size_t)ncols + (size_t)i];
			int len;

			if (under(c))
				continue;
			if (plan_eval(p, c->e, res->rows[r].key, res->rows[r].val, &cl->v)) {
				snprintf(cl->text, sizeof(cl->text), "?");
				cl->v.type = VT_INT;
				len = 1;
			} else if (cl->v.type == VT_STR) {
				len = (int)strnlen(cl->v.s, cl->v.len);
			} else {
				len = snprintf(cl->text, sizeof(cl->text), "%" PRId64, cl->v.i);
			}
			if (len > w[i])
				w[i] = len;
		}
	}
	if (wstart)
		window_stamp(f, wstart);
	if (nscalar) {
		int done = 0;

		for (int i = 0; i < ncols; i++) {
			const struct plan_col *c = &p->cols[i];

			if (under(c))
				continue;
			done++;
			if (c->type == VT_STR)
				fprintf(f, "%-*s", done < nscalar ? w[i] : 0, c->name);
			else
				fprintf(f, "%*s", w[i], c->name);
			fputs(done < nscalar ? "  " : "\n", f);
		}
	}
	for (size_t r = 0; r < res->nrows; r++) {
		int done = 0;

		for (int i = 0; i < ncols; i++) {
			const struct plan_col *c = &p->cols[i];
			const struct cell *cl = &cells[r * (size_t)ncols + (size_t)i];

			if (under(c))
				continue;
			done++;
			if (cl->v.type == VT_STR)
				put_str(f, cl->v.s, cl->v.len, done < nscalar ? w[i] : 0);
			else
				fprintf(f, "%*s", w[i], cl->text);
			fputs(done < nscalar ? "  " : "\n", f);
		}
		for (int i = 0; i < ncols; i++) {
			const struct plan_col *c = &p->cols[i];

			if (!under(c))
				continue;
			fprintf(f, "%s%s:\n", nscalar ? "  " : "", c->name);
			if (c->stack_key >= 0)
				print_frames(p, f, c, res->rows[r].key, nscalar ? "  " : "");
			else
				print_bars(f, &p->aggrs[c->aggr], res->rows[r].val,
					   nscalar ? "  " : "");
		}
		if (nscalar && ncols > nscalar && r + 1 < res->nrows)
			fputc('\n', f);
	}
	if (!res->nrows && !nscalar)
		fputs("(no rows)\n", f);
	if (res->cats)
		print_cats(f, res->cats);
	free(w);
	free(cells);
	return ferror(f) ? -EIO : 0;
}

/* ---- streamed rows ----------------------------------------------------------- */

static int stream_width(const struct plan_col *c)
{
	int n = (int)strlen(c->name);

	if (c->type == VT_STR)
		return n > 16 ? n : 16;
	return n > 10 ? n : 10;
}

int engine_print_record(const struct plan *p, struct engine_out *o, const void *rec)
{
	const unsigned char *r = rec;
	FILE *f = o->f;

	if (o->json) {
		json_object_row(p, f, NULL, rec, 0, 0);
		return ferror(f) ? -EIO : 0;
	}
	if (!o->header_done) {
		for (int i = 0; i < p->ncols; i++) {
			const struct plan_col *c = &p->cols[i];
			bool last = i + 1 == p->ncols;

			if (c->type == VT_STR)
				fprintf(f, "%-*s", last ? 0 : stream_width(c), c->name);
			else
				fprintf(f, "%*s", stream_width(c), c->name);
			fputs(last ? "\n" : "  ", f);
		}
		o->header_done = true;
	}
	for (int i = 0; i < p->ncols; i++) {
		const struct plan_col *c = &p->cols[i];
		bool last = i + 1 == p->ncols;

		if (c->type == VT_STR) {
			put_str(f, (const char *)r + c->offset, (size_t)c->size,
				last ? 0 : stream_width(c));
		} else {
			int64_t v;

			memcpy(&v, r + c->offset, 8);
			fprintf(f, "%*" PRId64, stream_width(c), v);
		}
		fputs(last ? "\n" : "  ", f);
	}
	return ferror(f) ? -EIO : 0;
}

int engine_print_counters(const uint64_t c[ENGINE_NCOUNTERS], FILE *f,
			  const struct plan *p)
{
	int n = 0;

	for (int i = 0; i < ENGINE_NCOUNTERS; i++) {
		if (!c[i])
			continue;
		fprintf(f, "warning: %" PRIu64 " %s", c[i], engine_counter_desc(i));
		if (i == EC_MAP_FULL || i == EC_PAIRS_FULL)
			fprintf(f, " (%d entries)", p->max_entries);
		fputc('\n', f);
		n++;
	}
	return n;
}
