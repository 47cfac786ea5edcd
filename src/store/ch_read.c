// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store: the read side.  Each reader has its own HTTP
 * connection.  Rows are read in RowBinary ordered by their key with the
 * newest version first, and only the first row of a key is kept: a batch
 * written twice (a resend after a failure) shows once even before
 * ClickHouse merged the duplicates away, on one node or a cluster alike.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/log.h"
#include "store/backend.h"
#include "store/ch_int.h"

/* Trace search: how far a span may start outside the trace's own
 * timestamp window, and how many candidate traces a round fetches. */
#define SEARCH_SLACK_US UINT64_C(3600000000)
#define SEARCH_ROUND    200

#define KEY_ORDER "trace_lo, trace_hi, id, origin, src, seq, no, ver DESC"

struct store_rd {
	struct store_be *st;
	struct ch_conn *c;
	struct wbuf out;
	char err[400];
};

struct store_rd *ch__reader_new(struct store_be *st)
{
	struct store_rd *r = calloc(1, sizeof(*r));

	if (!r)
		return fay_err_ptr(-ENOMEM);
	r->st = st;
	r->c = ch_conn_new(st->urls[0], st->db,
			   st->flags & STORE_F_READONLY ? CH_READONLY : 0,
			   r->err, sizeof(r->err));
	if (!r->c) {
		int e = errno;

		pr_warn("store: clickhouse: reader: %s", r->err);
		free(r);
		return fay_err_ptr(-e);
	}
	return r;
}

struct store_be *ch_reader_store(struct store_rd *r)
{
	return r->st;
}

void ch__reader_free(struct store_rd *r)
{
	if (!r)
		return;
	ch_conn_free(r->c);
	wbuf_free(&r->out);
	free(r);
}

void ch_sql_add(struct wbuf *w, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf)) {
		w->err = -E2BIG;
		return;
	}
	wbuf_put(w, buf, (size_t)n);
}

/* A string literal: quoted, backslash and quote escaped. */
static void sql_str(struct wbuf *w, const char *s)
{
	wbuf_u8(w, '\'');
	for (; *s; s++) {
		if (*s == '\\' || *s == '\'')
			wbuf_u8(w, '\\');
		wbuf_u8(w, (uint8_t)*s);
	}
	wbuf_u8(w, '\'');
}

/* Run the statement in sql (NUL added here), the answer in r->out. */
static int run(struct store_rd *r, struct wbuf *sql)
{
	int ret;

	wbuf_u8(sql, 0);
	if (sql->err) {
		wbuf_free(sql);
		return -ENOMEM;
	}
	ret = ch_query(r->c, (const char *)sql->p, &r->out, r->err, sizeof(r->err));
	if (ret)
		pr_warn("store: clickhouse: %s", r->err);
	wbuf_free(sql);
	return ret;
}

/* ---- names -------------------------------------------------------------- */

static int names(struct store_rd *r, int kind, const char *service,
		 struct store_names *out)
{
	struct wbuf sql = { 0 };
	size_t cap = 0;
	struct rbuf rb;
	int ret;

	ch_sql_add(&sql, "SELECT DISTINCT %s FROM names WHERE kind = %d",
		   kind ? "name" : "service", kind);
	if (kind) {
		ch_sql_add(&sql, " AND service = ");
		sql_str(&sql, service ? service : "");
	}
	ch_sql_add(&sql, " ORDER BY %s FORMAT RowBinary", kind ? "name" : "service");
	ret = run(r, &sql);
	if (ret)
		return ret;
	memset(out, 0, sizeof(*out));
	rbuf_init(&rb, r->out.p, r->out.len);
	while (!rbuf_done(&rb)) {
		if (zarena_grow(&out->arena, (void **)&out->v, out->n, &cap, sizeof(*out->v)))
			return -ENOMEM;
		ret = ch_get_str(&rb, &out->arena, &out->v[out->n]);
		if (ret)
			return ret;
		out->n++;
	}
	return 0;
}

int ch__services(struct store_rd *r, struct store_names *out)
{
	return names(r, 0, NULL, out);
}

int ch__span_names(struct store_rd *r, const char *service, struct store_names *out)
{
	return names(r, 1, service, out);
}

int ch__remote_services(struct store_rd *r, const char *service,
			struct store_names *out)
{
	return names(r, 2, service, out);
}

/* Values of the tags of an --autocomplete-keys key: names of kind 3,
 * the key in the service column. */
int ch__autocomplete_values(struct store_rd *r, const char *key, struct store_names *out)
{
	return names(r, 3, key, out);
}

/* ---- traces ------------------------------------------------------------- */

/* A span read, with its key. */
struct rspan {
	struct ch_key k;
	struct zspan z;
};

static int same_key(const struct ch_key *a, const struct ch_key *b)
{
	return a->trace_lo == b->trace_lo && a->trace_hi == b->trace_hi &&
	       a->id == b->id && a->origin == b->origin && a->src == b->src &&
	       a->seq == b->seq && a->no == b->no;
}

/* Start order; among equal starts, arrival (SQLite's order of rows). */
static int rspan_cmp(const void *x, const void *y)
{
	const struct rspan *a = x, *b = y;
	uint64_t ka[] = { a->z.timestamp_us, a->k.ver, a->k.origin, a->k.src, a->k.seq, a->k.no };
	uint64_t kb[] = { b->z.timestamp_us, b->k.ver, b->k.origin, b->k.src, b->k.seq, b->k.no };

	return ch_cmp_keys(ka, kb, 6);
}

static int traces_add(struct store_traces *out, struct rspan *v, size_t n)
{
	struct store_trace *t;

	qsort(v, n, sizeof(*v), rspan_cmp);
	if (zarena_grow(&out->arena, (void **)&out->v, out->n, &out->cap, sizeof(*out->v)))
		return -ENOMEM;
	t = &out->v[out->n++];
	t->spans = zarena_alloc(&out->arena, n * sizeof(*t->spans));
	if (!t->spans)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		t->spans[i] = v[i].z;
		zspan_normalize(&t->spans[i]);
	}
	t->n = n;
	t->ts_us = store_trace_ts(t->spans, n);
	return 0;
}

/* Append the traces ids[] (lo, hi pairs) that have spans to out, each as
 * one struct store_trace, in no set order.  0 or -errno. */
static int load_traces(struct store_rd *r, const uint64_t (*ids)[2], size_t nids,
		       struct store_traces *out)
{
	struct wbuf sql = { 0 };
	struct zarena tmp = { 0 };
	struct rspan *v = NULL;
	size_t n = 0, cap = 0, start = 0;
	struct rbuf rb;
	int ret;

	if (!nids)
		return 0;
	ch_sql_add(&sql, "SELECT " CH_SPAN_COLS " FROM spans WHERE trace_lo IN (");
	for (size_t i = 0; i < nids; i++)
		ch_sql_add(&sql, "%s%" PRIu64, i ? "," : "", ids[i][0]);
	ch_sql_add(&sql, ") AND (trace_lo, trace_hi) IN (");
	for (size_t i = 0; i < nids; i++)
		ch_sql_add(&sql, "%s(%" PRIu64 ",%" PRIu64 ")", i ? "," : "",
			   ids[i][0], ids[i][1]);
	ch_sql_add(&sql, ") ORDER BY " KEY_ORDER " FORMAT RowBinary");
	ret = run(r, &sql);
	if (ret)
		return ret;
	rbuf_init(&rb, r->out.p, r->out.len);
	while (!rbuf_done(&rb)) {
		if (zarena_grow(&tmp, (void **)&v, n, &cap, sizeof(*v))) {
			ret = -ENOMEM;
			goto out;
		}
		ret = ch_get_span(&rb, &out->arena, &v[n].k, &v[n].z);
		if (ret) {
			if (rb.err)
				pr_warn("store: clickhouse: spans: %s", rb.why);
			goto out;
		}
		if (n && same_key(&v[n - 1].k, &v[n].k))
			continue;   /* an older version of the row before */
		if (n && (v[n].k.trace_lo != v[start].k.trace_lo ||
			  v[n].k.trace_hi != v[start].k.trace_hi)) {
			struct rspan next = v[n];

			ret = traces_add(out, &v[start], n - start);
			if (ret)
				goto out;
			v[start] = next;
			n = start;
		}
		n++;
	}
	if (n > start)
		ret = traces_add(out, &v[start], n - start);
out:
	zarena_reset(&tmp);
	return ret;
}

int ch__trace(struct store_rd *r, uint64_t hi, uint64_t lo, struct store_traces *out)
{
	uint64_t id[1][2] = { { lo, hi } };
	size_t before = out->n;
	int ret = load_traces(r, id, 1, out);

	return ret ? ret : out->n > before;
}

/* The candidates of q, newest first, from offset off: their ids into ids
 * (lo, hi), how many into *n. */
static int candidates(struct store_rd *r, const struct store_query *q, size_t off,
		      uint64_t (*ids)[2], size_t *n)
{
	uint64_t begin_us, end_us;
	struct wbuf sql = { 0 };
	struct rbuf rb;
	int ret;

	store_query_window(q, &begin_us, &end_us);
	begin_us = begin_us > SEARCH_SLACK_US ? begin_us - SEARCH_SLACK_US : 0;
	ch_sql_add(&sql, "SELECT trace_lo, trace_hi FROM span_index WHERE"
		   " start_us BETWEEN %" PRIu64 " AND %" PRIu64,
		   begin_us, end_us + SEARCH_SLACK_US);
	/* a service name constrains every other condition (store_query_test);
	 * names are their hashes (ch_schema.c): a collision adds a candidate,
	 * which the test of the whole trace drops */
	if (q->service)
		ch_sql_add(&sql, " AND service_h = %" PRIu64,
			   ch_murmur64(q->service, strlen(q->service)));
	ch_sql_add(&sql, " GROUP BY trace_lo, trace_hi HAVING 1");
	if (q->span_name)
		ch_sql_add(&sql, " AND max(name_h = %" PRIu64 ")",
			   ch_murmur64(q->span_name, strlen(q->span_name)));
	if (q->min_duration_us) {
		ch_sql_add(&sql, " AND max(duration_us >= %" PRIu64, q->min_duration_us);
		if (q->max_duration_us)
			ch_sql_add(&sql, " AND duration_us <= %" PRIu64, q->max_duration_us);
		ch_sql_add(&sql, ")");
	}
	ch_sql_add(&sql, " ORDER BY max(start_us) DESC, trace_lo LIMIT %zu, %d"
		   " FORMAT RowBinary", off, SEARCH_ROUND);
	ret = run(r, &sql);
	if (ret)
		return ret;
	rbuf_init(&rb, r->out.p, r->out.len);
	for (*n = 0; *n < SEARCH_ROUND && !rbuf_done(&rb); (*n)++) {
		ids[*n][0] = rbuf_le64(&rb, "trace_lo");
		ids[*n][1] = rbuf_le64(&rb, "trace_hi");
	}
	return rb.err;
}

/*
 * Candidates from span_index (the service's rows: one seek), SEARCH_ROUND
 * at a time newest first, loaded whole and decided by store_query_test(),
 * until limit traces matched or none is left.
 */
int ch__traces(struct store_rd *r, const struct store_query *q, struct store_traces *out)
{
	uint64_t (*ids)[2] = malloc(SEARCH_ROUND * sizeof(*ids));
	size_t off = 0, n = 0;
	int ret = 0;

	if (!ids)
		return -ENOMEM;
	while (out->n < q->limit) {
		size_t first = out->n, keep;

		ret = candidates(r, q, off, ids, &n);
		if (ret || !n)
			break;
		off += n;
		ret = load_traces(r, (const uint64_t (*)[2])ids, n, out);
		if (ret)
			break;
		/* keep the matches, newest first, up to the limit */
		keep = first;
		for (size_t i = first; i < out->n; i++)
			if (store_query_test(q, out->v[i].spans, out->v[i].n))
				out->v[keep++] = out->v[i];
		out->n = keep;
		if (n < SEARCH_ROUND)
			break;
	}
	free(ids);
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), store_trace_newer);
	if (out->n > q->limit)
		out->n = q->limit;
	return ret;
}

/* ---- counts, scans, agents ---------------------------------------------- */

static int count(struct store_rd *r, const char *sql_text, uint64_t *v)
{
	struct wbuf sql = { 0 };
	struct rbuf rb;
	int ret;

	ch_sql_add(&sql, "%s FORMAT RowBinary", sql_text);
	ret = run(r, &sql);
	if (ret)
		return ret;
	rbuf_init(&rb, r->out.p, r->out.len);
	*v = rbuf_le64(&rb, "count");
	return rb.err;
}

int ch__counts(struct store_rd *r, struct store_counts *c)
{
	int ret;

	ret = count(r, "SELECT count() FROM (SELECT DISTINCT trace_lo, trace_hi, id,"
		    " origin, src, seq, no FROM spans)", &c->spans);
	if (!ret)
		ret = count(r, "SELECT count() FROM (SELECT DISTINCT trace_lo, trace_hi,"
			    " id, src, seq, no FROM span_parts)", &c->parts);
	if (!ret)
		ret = count(r, "SELECT uniqExact(agent_id) FROM agents", &c->agents);
	return ret;
}

static void day_str(char out[16], uint64_t us)
{
	time_t t = (time_t)(us / 1000000u);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 16, "%Y-%m-%d", &tm);
}

/*
 * The traces with a span that started in the window (to_us included when
 * whole), their spans in it (or all of them when whole), traces in order
 * of their ids' low half so that a 128-bit trace and its 64-bit form come
 * together.
 */
static int scan(struct store_rd *r, uint64_t from_us, uint64_t to_us, int whole,
		int (*fn)(void *ctx, const struct store_row *row), void *ctx)
{
	struct store_traces t = { 0 };
	struct wbuf sql = { 0 };
	struct zarena tmp = { 0 };
	uint64_t (*ids)[2] = NULL;
	size_t n = 0, cap = 0;
	char d0[16], d1[16];
	struct rbuf rb;
	int ret;

	/* the traces with a span in the window, then their spans in it */
	day_str(d0, from_us);
	day_str(d1, to_us);
	ch_sql_add(&sql, "SELECT DISTINCT trace_lo, trace_hi FROM spans WHERE"
		   " day BETWEEN '%s' AND '%s' AND start_us >= %" PRIu64
		   " AND start_us %s %" PRIu64 " ORDER BY trace_lo, trace_hi FORMAT RowBinary",
		   d0, d1, from_us, whole ? "<=" : "<", to_us);
	ret = run(r, &sql);
	if (ret)
		return ret;
	rbuf_init(&rb, r->out.p, r->out.len);
	while (!rbuf_done(&rb)) {
		if (zarena_grow(&tmp, (void **)&ids, n, &cap, sizeof(*ids))) {
			ret = -ENOMEM;
			goto out;
		}
		ids[n][0] = rbuf_le64(&rb, "trace_lo");
		ids[n][1] = rbuf_le64(&rb, "trace_hi");
		n++;
	}
	for (size_t i = 0; i < n && !ret; i += SEARCH_ROUND) {
		size_t m = n - i < SEARCH_ROUND ? n - i : SEARCH_ROUND;

		ret = load_traces(r, (const uint64_t (*)[2])&ids[i], m, &t);
		for (size_t k = 0; k < t.n && !ret; k++) {
			for (size_t j = 0; j < t.v[k].n && !ret; j++) {
				const struct zspan *z = &t.v[k].spans[j];
				struct store_row row = {
					.trace_hi = z->trace_hi, .trace_lo = z->trace_lo,
					.id = z->id, .parent_id = z->parent_id,
					.kind = z->kind, .shared = z->shared, .error = z->error,
					.service = z->local.service,
					.remote_service = z->remote.service, .name = z->name,
					.ipv4 = { z->local.ipv4, (uint32_t)strlen(z->local.ipv4) },
					.ipv6 = { z->local.ipv6, (uint32_t)strlen(z->local.ipv6) },
					.port = z->local.port,
					.start_us = z->timestamp_us, .duration_us = z->duration_us,
				};

				if (!whole && (z->timestamp_us < from_us || z->timestamp_us >= to_us))
					continue;
				ret = fn(ctx, &row);
			}
		}
		store_traces_free(&t);
	}
out:
	store_traces_free(&t);
	zarena_reset(&tmp);
	return ret;
}

int ch__scan(struct store_rd *r, uint64_t from_us, uint64_t to_us,
	     int (*fn)(void *ctx, const struct store_row *row), void *ctx)
{
	return scan(r, from_us, to_us, 0, fn, ctx);
}

int ch__scan_traces(struct store_rd *r, uint64_t from_us, uint64_t to_us,
		    int (*fn)(void *ctx, const struct store_row *row), void *ctx)
{
	return scan(r, from_us, to_us, 1, fn, ctx);
}

int ch__agents(struct store_rd *r,
	       int (*fn)(void *ctx, const struct store_agent *a), void *ctx)
{
	struct wbuf sql = { 0 };
	struct zarena a = { 0 };
	struct rbuf rb;
	int ret;

	ch_sql_add(&sql, "SELECT agent_id, argMax(host, ver), argMax(version, ver),"
		   " argMax(last_seq, ver), min(first_seen_us), argMax(last_seen_us, ver),"
		   " argMax(batches, ver), argMax(spans, ver), argMax(has_stats, ver),"
		   " argMax(stats, ver), argMax(stats_us, ver) FROM agents"
		   " GROUP BY agent_id ORDER BY agent_id FORMAT RowBinary");
	ret = run(r, &sql);
	if (ret)
		return ret;
	rbuf_init(&rb, r->out.p, r->out.len);
	while (!ret && !rbuf_done(&rb)) {
		struct zs_str s[4];
		struct store_agent ag = { 0 };
		uint8_t has_stats;

		ret = ch_get_str(&rb, &a, &s[0]);
		ret = ret ? ret : ch_get_str(&rb, &a, &s[1]);
		ret = ret ? ret : ch_get_str(&rb, &a, &s[2]);
		ag.last_seq = rbuf_le64(&rb, "last_seq");
		ag.first_seen_us = rbuf_le64(&rb, "first_seen_us");
		ag.last_seen_us = rbuf_le64(&rb, "last_seen_us");
		ag.batches = rbuf_le64(&rb, "batches");
		ag.spans = rbuf_le64(&rb, "spans");
		has_stats = rbuf_u8(&rb, "has_stats");
		ret = ret ? ret : ch_get_str(&rb, &a, &s[3]);
		ag.stats_us = rbuf_le64(&rb, "stats_us");
		if (ret || rb.err)
			break;
		/* NUL-terminated copies (the strings of an arena are not) */
		{
			char *c[4];

			for (int i = 0; i < 4; i++) {
				c[i] = zarena_alloc(&a, s[i].len + 1);
				if (!c[i]) {
					ret = -ENOMEM;
					break;
				}
				memcpy(c[i], s[i].p, s[i].len);
				c[i][s[i].len] = '\0';
			}
			if (ret)
				break;
			ag.id = c[0];
			ag.host = *c[1] ? c[1] : NULL;
			ag.version = *c[2] ? c[2] : NULL;
			ag.stats = has_stats ? c[3] : NULL;
		}
		ret = fn(ctx, &ag);
		zarena_reset(&a);
	}
	zarena_reset(&a);
	return ret ? ret : rb.err;
}
