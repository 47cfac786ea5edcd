// SPDX-License-Identifier: MIT
/*
 * The SQLite store: the read side.  Each reader has its own connection
 * (WAL lets readers run while the writer commits) and prepares statements
 * on first use.
 */
#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "store/sqlite_int.h"
#include "store/store.h"

enum {
	RS_SERVICES, RS_SPAN_NAMES, RS_REMOTES, RS_TRACE,
	RS_CAND_SVC, RS_CAND_SVC_NAME, RS_CAND_ALL, RS_CAND_NAME,
	RS_COUNT_SPANS, RS_COUNT_PARTS, RS_COUNT_AGENTS,
	RS_MAX,
};

#define SPAN_COLS \
	"trace_hi, trace_lo, id, parent_id, kind, name," \
	" local_service, local_ipv4, local_ipv6, local_port," \
	" remote_service, remote_ipv4, remote_ipv6, remote_port," \
	" start_us, duration_us, shared, debug, annotations, tags"

static const char *const rs_sql[RS_MAX] = {
	[RS_SERVICES] = "SELECT name FROM services ORDER BY name",
	[RS_SPAN_NAMES] = "SELECT name FROM span_names WHERE service = ? ORDER BY name",
	[RS_REMOTES] = "SELECT remote FROM remote_services WHERE service = ? ORDER BY remote",
	[RS_TRACE] = "SELECT " SPAN_COLS " FROM spans WHERE trace_hi = ? AND trace_lo = ?"
		     " ORDER BY start_us, rowid",
	/* Candidates, newest span first: each walks one index backwards and
	 * the caller stops as soon as it has enough matching traces. */
	[RS_CAND_SVC] = "SELECT trace_hi, trace_lo FROM spans INDEXED BY spans_service_ts"
			" WHERE local_service = ?1 AND start_us BETWEEN ?2 AND ?3"
			" ORDER BY start_us DESC",
	[RS_CAND_SVC_NAME] = "SELECT trace_hi, trace_lo FROM spans INDEXED BY spans_service_ts"
			     " WHERE local_service = ?1 AND start_us BETWEEN ?2 AND ?3"
			     " AND name = ?4 ORDER BY start_us DESC",
	[RS_CAND_ALL] = "SELECT trace_hi, trace_lo FROM spans INDEXED BY spans_ts"
			" WHERE start_us BETWEEN ?2 AND ?3 ORDER BY start_us DESC",
	[RS_CAND_NAME] = "SELECT trace_hi, trace_lo FROM spans INDEXED BY spans_ts"
			 " WHERE start_us BETWEEN ?2 AND ?3 AND name = ?4"
			 " ORDER BY start_us DESC",
	[RS_COUNT_SPANS] = "SELECT count(*) FROM spans",
	[RS_COUNT_PARTS] = "SELECT count(*) FROM span_parts",
	[RS_COUNT_AGENTS] = "SELECT count(*) FROM agents",
};

struct store_reader {
	sqlite3 *db;
	sqlite3_stmt *st[RS_MAX];
};

struct store_reader *store__reader_new(struct store *st)
{
	struct store_reader *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return fay_err_ptr(-ENOMEM);
	rc = sqlite3_open_v2(store__path(st), &r->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(r->db, 10000);
		rc = sqlite3_exec(r->db, "PRAGMA query_only = 1; PRAGMA cache_size = -16384;",
				  NULL, NULL, NULL);
	}
	if (rc != SQLITE_OK) {
		pr_warn("store: %s: reader: %s", store__path(st),
			r->db ? sqlite3_errmsg(r->db) : sqlite3_errstr(rc));
		store__reader_free(r);
		return fay_err_ptr(-EIO);
	}
	return r;
}

sqlite3 *sq_reader_db(struct store_reader *r)
{
	return r->db;
}

void store__reader_free(struct store_reader *r)
{
	if (!r)
		return;
	for (int i = 0; i < RS_MAX; i++)
		sqlite3_finalize(r->st[i]);
	sqlite3_close(r->db);
	free(r);
}

void store_names_free(struct store_names *n)
{
	if (!n)
		return;
	zarena_reset(&n->arena);
	n->v = NULL;
	n->n = 0;
}

void store_traces_free(struct store_traces *t)
{
	if (!t)
		return;
	zarena_reset(&t->arena);
	t->v = NULL;
	t->n = t->cap = 0;
}

static sqlite3_stmt *stmt(struct store_reader *r, int i)
{
	if (!r->st[i] && sqlite3_prepare_v3(r->db, rs_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					    &r->st[i], NULL) != SQLITE_OK) {
		pr_warn("store: prepare: %s", sqlite3_errmsg(r->db));
		return NULL;
	}
	return r->st[i];
}

static int rd_err(struct store_reader *r, int rc)
{
	pr_warn("store: read: %s", sqlite3_errmsg(r->db));
	return rc == SQLITE_BUSY ? -EBUSY : rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
}

static int names(struct store_reader *r, int which, const char *arg,
		 struct store_names *out)
{
	sqlite3_stmt *s = stmt(r, which);
	size_t cap = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!s)
		return -EIO;
	if (arg)
		sqlite3_bind_text(s, 1, arg, -1, SQLITE_TRANSIENT);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(s, 0);

		if (zarena_grow(&out->arena, (void **)&out->v, out->n, &cap, sizeof(*out->v)))
			goto oom;
		if (zarena_str(&out->arena, &out->v[out->n], t ? t : "",
			       (size_t)sqlite3_column_bytes(s, 0), 0))
			goto oom;
		out->n++;
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		return rd_err(r, rc);
	return 0;
oom:
	sqlite3_reset(s);
	return -ENOMEM;
}

int store__services(struct store_reader *r, struct store_names *out)
{
	return names(r, RS_SERVICES, NULL, out);
}

int store__span_names(struct store_reader *r, const char *service,
		      struct store_names *out)
{
	return names(r, RS_SPAN_NAMES, service, out);
}

int store__remote_services(struct store_reader *r, const char *service,
			   struct store_names *out)
{
	return names(r, RS_REMOTES, service, out);
}

/* ---- span rows ---------------------------------------------------------- */

int sq_col_str(sqlite3_stmt *s, int i, struct zarena *a, struct zs_str *out)
{
	const unsigned char *t = sqlite3_column_text(s, i);

	if (!t) {
		*out = (struct zs_str){ "", 0 };
		return 0;
	}
	return zarena_str(a, out, (const char *)t, (size_t)sqlite3_column_bytes(s, i), 0);
}

int sq_col_ep(sqlite3_stmt *s, int i, struct zarena *a, struct zs_endpoint *e)
{
	const unsigned char *t;

	memset(e, 0, sizeof(*e));
	if (sq_col_str(s, i, a, &e->service))
		return -ENOMEM;
	if ((t = sqlite3_column_text(s, i + 1)))
		snprintf(e->ipv4, sizeof(e->ipv4), "%s", (const char *)t);
	if ((t = sqlite3_column_text(s, i + 2)))
		snprintf(e->ipv6, sizeof(e->ipv6), "%s", (const char *)t);
	e->port = (uint16_t)sqlite3_column_int(s, i + 3);
	return 0;
}

static int json_col(sqlite3_stmt *s, int i, json_t **out)
{
	const char *t = (const char *)sqlite3_column_text(s, i);
	json_error_t je;

	*out = NULL;
	if (!t)
		return 0;
	*out = json_loadb(t, (size_t)sqlite3_column_bytes(s, i), 0, &je);
	if (!*out) {
		pr_warn("store: a span's JSON column %d does not parse: %s", i, je.text);
		return -EBADMSG;
	}
	return 0;
}

static int jstr(json_t *v, struct zarena *a, struct zs_str *out)
{
	if (!json_is_string(v)) {
		*out = (struct zs_str){ "", 0 };
		return 0;
	}
	return zarena_str(a, out, json_string_value(v), json_string_length(v), 0);
}

/* Annotations and tags of a row (JSON columns 18, 19). */
static int row_lists(sqlite3_stmt *s, struct zarena *a, struct zspan *z)
{
	json_t *ann = NULL, *tags = NULL, *v;
	const char *k;
	size_t i;
	int ret = 0;

	if (json_col(s, 18, &ann) || json_col(s, 19, &tags)) {
		ret = 0; /* a damaged column: keep the span without it */
		goto out;
	}
	if (json_is_array(ann) && json_array_size(ann)) {
		z->annotations = zarena_alloc(a, sizeof(*z->annotations) * json_array_size(ann));
		if (!z->annotations)
			goto oom;
		json_array_foreach(ann, i, v) {
			struct zs_annotation *an = &z->annotations[z->nannotations];

			an->ts_us = (uint64_t)json_integer_value(json_object_get(v, "timestamp"));
			if (jstr(json_object_get(v, "value"), a, &an->value))
				goto oom;
			z->nannotations++;
		}
	}
	if (json_is_object(tags) && json_object_size(tags)) {
		z->tags = zarena_alloc(a, sizeof(*z->tags) * json_object_size(tags));
		if (!z->tags)
			goto oom;
		json_object_foreach(tags, k, v) {
			struct zs_tag *t = &z->tags[z->ntags];

			if (zarena_str(a, &t->key, k, strlen(k), 0) || jstr(v, a, &t->value))
				goto oom;
			z->ntags++;
		}
	}
	goto out;
oom:
	ret = -ENOMEM;
out:
	json_decref(ann);
	json_decref(tags);
	return ret;
}

static int row_span(sqlite3_stmt *s, struct zarena *a, struct zspan *z)
{
	memset(z, 0, sizeof(*z));
	z->trace_hi = (uint64_t)sqlite3_column_int64(s, 0);
	z->trace_lo = (uint64_t)sqlite3_column_int64(s, 1);
	z->id = (uint64_t)sqlite3_column_int64(s, 2);
	z->parent_id = (uint64_t)sqlite3_column_int64(s, 3);
	z->kind = (uint8_t)sqlite3_column_int(s, 4);
	if (z->kind >= SPAN_KIND_MAX)
		z->kind = SPAN_KIND_UNSET;
	if (sq_col_str(s, 5, a, &z->name) || sq_col_ep(s, 6, a, &z->local) ||
	    sq_col_ep(s, 10, a, &z->remote))
		return -ENOMEM;
	z->timestamp_us = (uint64_t)sqlite3_column_int64(s, 14);
	z->duration_us = (uint64_t)sqlite3_column_int64(s, 15);
	z->shared = (uint8_t)sqlite3_column_int(s, 16);
	z->debug = (uint8_t)sqlite3_column_int(s, 17);
	if (row_lists(s, a, z))
		return -ENOMEM;
	zspan_normalize(z);
	return 0;
}

static struct store_trace *traces_add(struct store_traces *out)
{
	if (zarena_grow(&out->arena, (void **)&out->v, out->n, &out->cap, sizeof(*out->v)))
		return NULL;
	memset(&out->v[out->n], 0, sizeof(out->v[0]));
	return &out->v[out->n++];
}

int store__trace(struct store_reader *r, uint64_t hi, uint64_t lo,
		 struct store_traces *out)
{
	sqlite3_stmt *s = stmt(r, RS_TRACE);
	struct store_trace *t;
	size_t cap = 0;
	int rc;

	if (!s)
		return -EIO;
	t = traces_add(out);
	if (!t)
		return -ENOMEM;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)hi);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)lo);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (zarena_grow(&out->arena, (void **)&t->spans, t->n, &cap, sizeof(*t->spans)))
			goto oom;
		if (row_span(s, &out->arena, &t->spans[t->n]))
			goto oom;
		t->n++;
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE) {
		out->n--;
		return rd_err(r, rc);
	}
	if (!t->n) {
		out->n--;
		return 0;
	}
	t->ts_us = store_trace_ts(t->spans, t->n);
	return 1;
oom:
	sqlite3_reset(s);
	out->n--;
	return -ENOMEM;
}

/* ---- trace search ------------------------------------------------------- */

/* Trace ids already looked at (open addressing, grows). */
struct idset {
	uint64_t (*v)[2];
	size_t cap, n;
};

static int idset_add(struct idset *s, uint64_t hi, uint64_t lo)
{
	size_t i;

	if ((s->n + 1) * 2 > s->cap) {
		struct idset ns = { .cap = s->cap ? s->cap * 2 : 256 };

		ns.v = calloc(ns.cap, sizeof(*ns.v));
		if (!ns.v)
			return -ENOMEM;
		for (size_t j = 0; j < s->cap; j++)
			if (s->v[j][0] || s->v[j][1])
				idset_add(&ns, s->v[j][0], s->v[j][1]);
		free(s->v);
		*s = ns;
	}
	i = (size_t)((hi * 0x9e3779b97f4a7c15ull) ^ lo) * 0x9e3779b97f4a7c15ull % s->cap;
	for (; s->v[i][0] || s->v[i][1]; i = (i + 1) % s->cap)
		if (s->v[i][0] == hi && s->v[i][1] == lo)
			return 0;
	s->v[i][0] = hi;
	s->v[i][1] = lo;
	s->n++;
	return 1;
}

static int trace_newer(const void *x, const void *y)
{
	const struct store_trace *a = x, *b = y;

	return a->ts_us > b->ts_us ? -1 : a->ts_us < b->ts_us;
}

int store__traces(struct store_reader *r, const struct store_query *q,
		  struct store_traces *out)
{
	uint64_t end_us = q->end_ts_ms * 1000;
	uint64_t lb = q->lookback_ms < q->end_ts_ms ? q->lookback_ms : q->end_ts_ms;
	uint64_t begin_us = (q->end_ts_ms - lb) * 1000;
	struct idset seen = { 0 };
	sqlite3_stmt *s;
	int which, rc, ret = 0;

	if (q->service)
		which = q->span_name ? RS_CAND_SVC_NAME : RS_CAND_SVC;
	else
		which = q->span_name ? RS_CAND_NAME : RS_CAND_ALL;
	s = stmt(r, which);
	if (!s)
		return -EIO;
	if (q->service)
		sqlite3_bind_text(s, 1, q->service, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)begin_us);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)end_us);
	if (q->span_name)
		sqlite3_bind_text(s, 4, q->span_name, -1, SQLITE_TRANSIENT);
	while (out->n < q->limit && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		uint64_t hi = (uint64_t)sqlite3_column_int64(s, 0);
		uint64_t lo = (uint64_t)sqlite3_column_int64(s, 1);
		struct store_trace *t;

		ret = idset_add(&seen, hi, lo);
		if (ret < 0)
			goto out;
		if (!ret)
			continue;
		ret = store__trace(r, hi, lo, out);
		if (ret < 0)
			goto out;
		if (!ret)
			continue;
		t = &out->v[out->n - 1];
		if (!store_query_test(q, t->spans, t->n))
			out->n--; /* its memory stays in the arena until freed */
	}
	ret = 0;
	if (out->n < q->limit && rc != SQLITE_DONE)
		ret = rd_err(r, rc);
	qsort(out->v, out->n, sizeof(*out->v), trace_newer);
out:
	sqlite3_reset(s);
	free(seen.v);
	return ret;
}

int store__counts(struct store_reader *r, struct store_counts *c)
{
	uint64_t *dst[] = { &c->spans, &c->parts, &c->agents };

	for (int i = 0; i < 3; i++) {
		sqlite3_stmt *s = stmt(r, RS_COUNT_SPANS + i);
		int rc;

		if (!s)
			return -EIO;
		rc = sqlite3_step(s);
		*dst[i] = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
		sqlite3_reset(s);
		if (rc != SQLITE_ROW)
			return rd_err(r, rc);
	}
	return 0;
}
