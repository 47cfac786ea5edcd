// SPDX-License-Identifier: MIT
/*
 * The terminal views of `fay traces`: the waterfall of one trace and the
 * list of many.  Pure functions of the model (traces_model.c) and a
 * struct tr_view, writing to a FILE, so the unit tests can render canned
 * traces into memory and check every cell.
 *
 * The bar of a span covers the cells of the trace's time axis its
 * [timestamp, timestamp + duration] falls on, at 1/8-cell precision with
 * Unicode's eighth blocks (left-aligned partial blocks at the end, right
 * half / right eighth at the start); ASCII mode uses '#'.  Annotations are
 * marks on the bar.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "cli/traces.h"

static const char *const palette[] = {
	"\033[36m", "\033[33m", "\033[35m", "\033[32m", "\033[34m",
	"\033[96m", "\033[93m", "\033[95m", "\033[92m", "\033[94m",
};
#define PALETTE_N (sizeof(palette) / sizeof(palette[0]))
#define C_RESET "\033[0m"
#define C_DIM   "\033[2m"
#define C_BOLD  "\033[1m"
#define C_MARK  "\033[1;97m"
#define C_ERR   "\033[1;31m"

static const char *svc_color(const struct tr_view *v, int svc)
{
	return v->color ? palette[(unsigned)svc % PALETTE_N] : "";
}

static const char *col(const struct tr_view *v, const char *code)
{
	return v->color ? code : "";
}

char *tr_format_duration(uint64_t us, char *buf, size_t len)
{
	if (us < 1000)
		snprintf(buf, len, "%" PRIu64 "us", us);
	else if (us < 1000000)
		snprintf(buf, len, "%.3fms", (double)us / 1e3);
	else if (us < 60000000)
		snprintf(buf, len, "%.3fs", (double)us / 1e6);
	else
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s",
			 us / 60000000, us / 1000000 % 60);
	return buf;
}

char *tr_format_time(uint64_t us, char *buf, size_t len)
{
	time_t sec = (time_t)(us / 1000000);
	struct tm tm;
	size_t n;

	if (!localtime_r(&sec, &tm) ||
	    !(n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))) {
		snprintf(buf, len, "%" PRIu64, us);
		return buf;
	}
	snprintf(buf + n, len - n, ".%03u", (unsigned)(us / 1000 % 1000));
	return buf;
}

/* Display cells of a UTF-8 string: one per code point. */
static size_t cells(const char *s, size_t bytes)
{
	size_t n = 0;

	for (size_t i = 0; i < bytes && s[i]; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			n++;
	return n;
}

/* Bytes of the longest prefix of @s that fits in @max cells. */
static size_t prefix_bytes(const char *s, size_t max)
{
	size_t n = 0, i = 0;

	for (; s[i]; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			if (n == max)
				break;
			n++;
		}
	}
	return i;
}

/*
 * Print @s (@bytes long) in at most @room cells, cutting it with an
 * ellipsis when it is wider; returns the cells printed.
 */
static size_t put_clipped(FILE *f, const char *s, size_t bytes, size_t room,
			  const struct tr_view *v)
{
	size_t w = cells(s, bytes);

	if (w <= room) {
		fwrite(s, 1, bytes, f);
		return w;
	}
	if (!room)
		return 0;
	fwrite(s, 1, prefix_bytes(s, room - 1), f);
	fputs(v->ascii ? "~" : "…", f);
	return room;
}

static void pad(FILE *f, size_t n)
{
	while (n--)
		fputc(' ', f);
}

static size_t indent_of(const struct tr_span *s, const struct tr_view *v)
{
	size_t in = 2 * (size_t)s->depth;

	/* Deep traces: keep room for the names. */
	return in > (size_t)v->label_max / 2 ? (size_t)v->label_max / 2 : in;
}

static size_t label_cells(const struct tr_span *s, const struct tr_view *v)
{
	return indent_of(s, v) + cells(s->service, strlen(s->service)) + 1 +
	       cells(s->name, strlen(s->name));
}

/* "  service name" padded to @width cells; the service in its colour. */
static void put_label(FILE *f, const struct tr_span *s, size_t width,
		      const struct tr_view *v)
{
	size_t used = indent_of(s, v), room;

	pad(f, used);
	room = width - used;
	fputs(svc_color(v, s->svc), f);
	used += put_clipped(f, s->service, strlen(s->service), room, v);
	fputs(col(v, C_RESET), f);
	if (used < width) {
		fputc(' ', f);
		used++;
		used += put_clipped(f, s->name, strlen(s->name), width - used, v);
	}
	pad(f, width - used);
}

/* Cell of time @ts on a @w-cell axis [t0, t0 + total]. */
static int cell_of(uint64_t ts, uint64_t t0, uint64_t total, int w)
{
	uint64_t c = ts <= t0 ? 0 : (ts - t0) * (uint64_t)w / total;

	return c >= (uint64_t)w ? w - 1 : (int)c;
}

static const char *const left_eighths[] = {
	"▏", "▎", "▍", "▌", "▋", "▊", "▉", "█",
};

/* What cell @c shows of a bar covering eighth-units [su, eu). */
static const char *bar_cell(long su, long eu, int c, int ascii)
{
	long lo = (long)c * 8, hi = lo + 8;
	long a = su > lo ? su : lo, b = eu < hi ? eu : hi, k = b - a;

	if (k <= 0)
		return NULL;
	if (ascii)
		return "#";
	if (k == 8)
		return "█";
	if (a == lo)
		return left_eighths[k - 1];
	if (b == hi)
		return k >= 4 ? "▐" : "▕";
	return k >= 4 ? "▌" : "▏";
}

static void put_bar(FILE *f, const struct tr_trace *t, const struct tr_span *s,
		    const struct tr_view *v)
{
	int w = v->bar_width;
	uint64_t total = t->t1 > t->t0 ? t->t1 - t->t0 : 1;
	uint64_t units = (uint64_t)w * 8;
	long su = -1, eu = -1;
	size_t a = 0;
	const char *color = svc_color(v, s->svc);
	int in_color = 0;

	if (s->has_ts) {
		uint64_t end = s->ts + (s->has_dur ? s->dur : 0);

		su = (long)(s->ts <= t->t0 ? 0 : (s->ts - t->t0) * units / total);
		eu = (long)(end <= t->t0 ? 0 :
			    ((end - t->t0) * units + total - 1) / total);
		if (su >= (long)units)
			su = (long)units - 1;
		if (eu > (long)units)
			eu = (long)units;
		if (eu <= su)
			eu = su + 1;
	}
	fputs(v->ascii ? "|" : "│", f);
	for (int c = 0; c < w; c++) {
		const char *cell = su >= 0 ? bar_cell(su, eu, c, v->ascii) : NULL;
		int mark = 0;

		while (a < s->nannots &&
		       cell_of(s->annots[a].ts, t->t0, total, w) <= c) {
			if (cell_of(s->annots[a].ts, t->t0, total, w) == c)
				mark = 1;
			a++;
		}
		if (mark) {
			fputs(col(v, C_MARK), f);
			fputs(v->ascii ? "+" : "┃", f);
			fputs(col(v, C_RESET), f);
			in_color = 0;
		} else if (cell) {
			if (!in_color && *color) {
				fputs(color, f);
				in_color = 1;
			}
			fputs(cell, f);
		} else {
			if (in_color) {
				fputs(C_RESET, f);
				in_color = 0;
			}
			fputc(' ', f);
		}
	}
	if (in_color)
		fputs(C_RESET, f);
	fputs(v->ascii ? "|" : "│", f);
}

/* The widest label, capped at view->label_max and at least 12 cells. */
static size_t label_width(const struct tr_trace *t, const struct tr_view *v)
{
	size_t w = 12;

	for (size_t i = 0; i < t->nspans; i++) {
		size_t c = label_cells(&t->spans[i], v);

		if (c > w)
			w = c;
	}
	return w > (size_t)v->label_max ? (size_t)v->label_max : w;
}

/* "0", the middle and the end of the axis, over the bar's cells. */
static void put_axis(FILE *f, const struct tr_trace *t, size_t lw,
		     const struct tr_view *v)
{
	int w = v->bar_width;
	char line[1024], mid[32], end[32];
	uint64_t total = t->t1 - t->t0;
	size_t ml, el;

	if (w > (int)sizeof(line) - 1)
		w = (int)sizeof(line) - 1;
	memset(line, ' ', (size_t)w);
	line[w] = '\0';
	line[0] = '0';
	tr_format_duration(total / 2, mid, sizeof(mid));
	tr_format_duration(total, end, sizeof(end));
	ml = strlen(mid);
	el = strlen(end);
	/* The middle label only where it stays clear of the others. */
	if ((size_t)(w / 2) >= ml / 2 + 3 && w / 2 - ml / 2 + ml + 2 <= w - el)
		memcpy(line + w / 2 - ml / 2, mid, ml);
	if ((size_t)w >= el + 2)
		memcpy(line + w - el, end, el);
	pad(f, lw + 2);
	fprintf(f, "%s%s%s\n", col(v, C_DIM), line, col(v, C_RESET));
}

static void put_details(FILE *f, const struct tr_trace *t,
			const struct tr_span *s, const struct tr_view *v)
{
	size_t in = indent_of(s, v) + 4;
	char d[32];

	if (v->verbose) {
		pad(f, in);
		fprintf(f, "%sid %s", col(v, C_DIM), s->id);
		if (s->parent_id)
			fprintf(f, "  parent %s%s", s->parent_id,
				s->orphan ? " (not in this trace)" : "");
		if (s->kind)
			fprintf(f, "  %s", s->kind);
		if (s->shared)
			fputs("  shared", f);
		if (s->ip)
			fprintf(f, "  at %s:%d", s->ip, s->port);
		if (s->remote_service)
			fprintf(f, "  remote %s", s->remote_service);
		if (!s->has_ts)
			fputs("  (no timestamp)", f);
		fprintf(f, "%s\n", col(v, C_RESET));
	}
	if (s->nannots) {
		pad(f, in);
		fputs("@", f);
		for (size_t j = 0; j < s->nannots; j++) {
			const struct tr_annot *a = &s->annots[j];
			uint64_t base = s->has_ts ? s->ts : t->t0;

			if (a->ts >= base)
				fprintf(f, " +%s", tr_format_duration(a->ts - base, d, sizeof(d)));
			else
				fprintf(f, " -%s", tr_format_duration(base - a->ts, d, sizeof(d)));
			fprintf(f, " %s%s%s", col(v, C_BOLD), a->value, col(v, C_RESET));
			if (j + 1 < s->nannots)
				fputc(' ', f);
		}
		fputc('\n', f);
	}
	if (s->ntags) {
		pad(f, in);
		for (size_t j = 0; j < s->ntags; j++) {
			const struct tr_tag *g = &s->tags[j];
			int err = !strcmp(g->key, "error");
			size_t vl = strlen(g->value);

			fprintf(f, "%s%s%s=%s", j ? "  " : "",
				err ? col(v, C_ERR) : col(v, C_DIM), g->key,
				col(v, C_RESET));
			if (!v->verbose && cells(g->value, vl) > 80)
				put_clipped(f, g->value, vl, 80, v);
			else
				fputs(g->value, f);
		}
		fputc('\n', f);
	}
}

int tr_render_waterfall(FILE *f, const struct tr_trace *t,
			const struct tr_view *view)
{
	const struct tr_span *r = t->root >= 0 ? &t->spans[t->root] : NULL;
	size_t lw = label_width(t, view), nerr = 0;
	struct tr_view vv = *view, *v = &vv;
	char buf[64];

	/* Fit the bar between the label and " │...│ 123.456ms ERROR". */
	if (v->bar_width <= 0)
		v->bar_width = v->term_cols - (int)lw - 19;
	if (v->bar_width < 10)
		v->bar_width = 10;

	for (size_t i = 0; i < t->nspans; i++)
		nerr += t->spans[i].error;

	fprintf(f, "%sTrace %s%s\n", col(v, C_BOLD), t->trace_id, col(v, C_RESET));
	if (r)
		fprintf(f, "  root      %s%s%s %s\n", svc_color(v, r->svc),
			r->service, col(v, C_RESET), r->name);
	fprintf(f, "  start     %s\n", tr_format_time(t->t0, buf, sizeof(buf)));
	fprintf(f, "  duration  %s, %zu span%s, %zu service%s:",
		tr_format_duration(t->t1 - t->t0, buf, sizeof(buf)),
		t->nspans, t->nspans == 1 ? "" : "s",
		t->nservices, t->nservices == 1 ? "" : "s");
	for (size_t i = 0; i < t->nservices; i++)
		fprintf(f, " %s%s%s", svc_color(v, (int)i),
			*t->services[i] ? t->services[i] : "(unknown)",
			col(v, C_RESET));
	fputc('\n', f);
	if (nerr)
		fprintf(f, "  %serrors    %zu span%s%s\n", col(v, C_ERR), nerr,
			nerr == 1 ? "" : "s", col(v, C_RESET));
	fputc('\n', f);

	put_axis(f, t, lw, v);
	for (size_t k = 0; k < t->nspans; k++) {
		const struct tr_span *s = &t->spans[t->order[k]];

		put_label(f, s, lw, v);
		fputc(' ', f);
		put_bar(f, t, s, v);
		if (s->has_dur)
			fprintf(f, " %9s", tr_format_duration(s->dur, buf, sizeof(buf)));
		else
			fprintf(f, " %9s", "?");
		if (s->error)
			fprintf(f, " %sERROR%s", col(v, C_ERR), col(v, C_RESET));
		if (s->orphan && !v->verbose)
			fputs(" (orphan)", f);
		fputc('\n', f);
		if (v->details || v->verbose)
			put_details(f, t, s, v);
	}
	fflush(f);
	return ferror(f) ? -EIO : 0;
}

/* "a,b,c" of the trace's services, cut to @max cells as "a,b,+3". */
static void services_field(const struct tr_trace *t, char *buf, size_t max)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < t->nservices; i++) {
		const char *s = *t->services[i] ? t->services[i] : "?";
		size_t sl = strlen(s), left = t->nservices - i - 1;
		char more[32];

		/* Room for this one and, if others follow, a ",+N". */
		snprintf(more, sizeof(more), ",+%zu", left);
		if (len + (len ? 1 : 0) + sl + (left ? strlen(more) : 0) > max) {
			snprintf(more, sizeof(more), "%s+%zu", len ? "," : "",
				 t->nservices - i);
			if (len + strlen(more) <= max)
				strcpy(buf + len, more);
			return;
		}
		len += (size_t)sprintf(buf + len, "%s%s", len ? "," : "", s);
	}
}

int tr_render_list(FILE *f, struct tr_trace *const *ts, size_t n,
		   const struct tr_view *v)
{
	size_t rw = 4, idw = 8;
	char tbuf[64], dbuf[32], sbuf[64];

	for (size_t i = 0; i < n; i++) {
		const struct tr_trace *t = ts[i];
		const struct tr_span *r = t->root >= 0 ? &t->spans[t->root] : NULL;
		size_t w = r ? cells(r->service, strlen(r->service)) + 1 +
			       cells(r->name, strlen(r->name)) : 1;

		if (w > rw)
			rw = w;
		if (strlen(t->trace_id) > idw)
			idw = strlen(t->trace_id);
	}
	if (rw > 32)
		rw = 32;
	fprintf(f, "%s%-23s  %-*s  %-*s  %5s  %-40s  %9s%s\n", col(v, C_BOLD),
		"START", (int)idw, "TRACE ID", (int)rw, "ROOT", "SPANS",
		"SERVICES", "DURATION", col(v, C_RESET));
	for (size_t i = 0; i < n; i++) {
		const struct tr_trace *t = ts[i];
		const struct tr_span *r = t->root >= 0 ? &t->spans[t->root] : NULL;
		size_t used = 0;

		fprintf(f, "%-23s  %-*s  ", tr_format_time(t->t0, tbuf, sizeof(tbuf)),
			(int)idw, t->trace_id);
		if (r) {
			fputs(svc_color(v, r->svc), f);
			used = put_clipped(f, r->service, strlen(r->service), rw, v);
			fputs(col(v, C_RESET), f);
			if (used < rw) {
				fputc(' ', f);
				used++;
				used += put_clipped(f, r->name, strlen(r->name),
						    rw - used, v);
			}
		}
		pad(f, rw - used);
		services_field(t, sbuf, 40);
		fprintf(f, "  %5zu  %-40s  %9s", t->nspans, sbuf,
			tr_format_duration(t->t1 - t->t0, dbuf, sizeof(dbuf)));
		if (t->error)
			fprintf(f, "  %sERROR%s", col(v, C_ERR), col(v, C_RESET));
		fputc('\n', f);
	}
	fflush(f);
	return ferror(f) ? -EIO : 0;
}
