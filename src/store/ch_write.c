// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's store__write(): batches to RowBinary rows, one
 * INSERT a table (spans, span_index and names at once, on three
 * connections), partial records merged into spans (see store/ch.c for the
 * order and why a failure anywhere is safe to retry).
 *
 * Several writes may be under way at once (store__writers(), ch_int.h):
 * one makes its rows and stores its partial records under st->wlock,
 * then sends its data INSERTs on its own slot's connections without it
 * while the next write makes its rows, then takes it again for its
 * agents' rows.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/rand.h"
#include "store/backend.h"
#include "store/ch_int.h"

/* The rows of one store__write(), a buffer a table. */
struct ch_rows {
	struct wbuf spans, index, names, parts;
	struct ch_agent **agents;     /* the agents of its batches */
	size_t nagents, capagents;
	uint64_t (*keys)[3];      /* span ids touched by parts */
	size_t nkeys, capkeys;
};

#define PART_COLS "trace_hi, trace_lo, id, src, seq, no, ver, parent_id, name," \
	" service, ipv4, ipv6, port, remote_service, remote_ipv4, remote_ipv6," \
	" remote_port, debug, is_tag, ts_us, key, value"

/* (kind, service, name) into names unless written lately. */
static void note_name(struct store_be *st, struct ch_rows *rw, uint8_t kind,
		      struct zs_str svc, struct zs_str name, uint64_t ts_us)
{
	uint64_t h;
	size_t i, first;

	if (!svc.len || (kind && !name.len))
		return;
	h = ch_hash(&kind, 1, 0xcbf29ce484222325ull);
	h = ch_hash(svc.p, svc.len, h);
	h = ch_hash("\x1f", 1, h);
	h = ch_hash(name.p, name.len, h);
	/* CH_NAME_WAYS slots a name may be in: a name found there is not
	 * written again within the slack; a new one takes the stalest slot
	 * (one slot a name let two that collide evict each other at every
	 * span: 15% more rows than spans in bench_store) */
	first = h % CH_NAME_SLOTS / CH_NAME_WAYS * CH_NAME_WAYS;
	i = first;
	for (size_t j = first; j < first + CH_NAME_WAYS; j++) {
		if (st->names[j].h == h) {
			if (ts_us <= st->names[j].last_us + CH_NAME_SLACK_US)
				return;
			i = j;
			break;
		}
		if (st->names[j].last_us < st->names[i].last_us)
			i = j;
	}
	st->names[i].h = h;
	st->names[i].last_us = ts_us;
	wbuf_u8(&rw->names, kind);
	ch_put_zs(&rw->names, svc);
	ch_put_zs(&rw->names, name);
	wbuf_le64(&rw->names, ts_us);
}

/* A span's rows: spans, span_index, names. */
static void add_span(struct store_be *st, struct ch_rows *rw, const struct ch_key *k,
		     const struct zspan *z)
{
	uint64_t ts = z->timestamp_us ? z->timestamp_us : st->now_us;

	ch_put_span(&rw->spans, k, z);
	ch_put_le16(&rw->index, ch_day(ts));
	wbuf_le64(&rw->index, ch_murmur64(z->local.service.p, z->local.service.len));
	wbuf_le64(&rw->index, ch_murmur64(z->name.p, z->name.len));
	wbuf_le64(&rw->index, ts);
	wbuf_le64(&rw->index, z->duration_us);
	wbuf_le64(&rw->index, z->trace_hi);
	wbuf_le64(&rw->index, z->trace_lo);
	note_name(st, rw, 0, z->local.service, (struct zs_str){ "", 0 }, ts);
	note_name(st, rw, 1, z->local.service, z->name, ts);
	note_name(st, rw, 2, z->local.service, z->remote.service, ts);
	for (uint32_t i = 0; i < z->ntags && st->nac_keys; i++)
		for (size_t j = 0; j < st->nac_keys; j++)
			if (zs_str_eqc(z->tags[i].key, st->ac_keys[j]))
				note_name(st, rw, 3, z->tags[i].key, z->tags[i].value, ts);
}

static int add_part(struct store_be *st, struct ch_rows *rw, uint64_t src, uint64_t seq,
		    uint32_t no, const struct zs_part *p)
{
	struct wbuf *w = &rw->parts;

	ch_put_le16(w, ch_day(p->ts_us ? p->ts_us : st->now_us));
	wbuf_le64(w, p->trace_hi);
	wbuf_le64(w, p->trace_lo);
	wbuf_le64(w, p->id);
	wbuf_le64(w, src);
	wbuf_le64(w, seq);
	wbuf_le32(w, no);
	wbuf_le64(w, st->now_us);
	wbuf_le64(w, p->parent_id);
	ch_put_zs(w, p->name);
	ch_put_ep(w, &p->local);
	ch_put_ep(w, &p->remote);
	wbuf_u8(w, p->debug);
	wbuf_u8(w, p->is_tag);
	wbuf_le64(w, p->ts_us);
	ch_put_zs(w, p->key);
	ch_put_zs(w, p->value);
	if (array_grow((void **)&rw->keys, rw->nkeys, &rw->capkeys, sizeof(*rw->keys), 64))
		return -ENOMEM;
	rw->keys[rw->nkeys][0] = p->trace_lo;
	rw->keys[rw->nkeys][1] = p->trace_hi;
	rw->keys[rw->nkeys][2] = p->id;
	rw->nkeys++;
	return 0;
}

static int key_cmp(const void *x, const void *y)
{
	return ch_cmp_keys(x, y, 3);
}

/* A partial record read back, with what orders it. */
struct rpart {
	struct zs_part p;
	uint64_t src, seq, ver;
	uint32_t no;
};

/* The order of SQLite's "is_tag, ts_us, rowid": arrival (the first
 * version of a row) stands in for rowid. */
static int rpart_cmp(const void *x, const void *y)
{
	const struct rpart *a = x, *b = y;
	uint64_t ka[] = { a->p.is_tag, a->p.ts_us, a->ver, a->src, a->seq, a->no };
	uint64_t kb[] = { b->p.is_tag, b->p.ts_us, b->ver, b->src, b->seq, b->no };

	return ch_cmp_keys(ka, kb, 6);
}

static int read_part(struct rbuf *r, struct zarena *a, struct rpart *rp)
{
	struct zs_part *p = &rp->p;
	int ret = 0;

	memset(rp, 0, sizeof(*rp));
	p->trace_hi = rbuf_le64(r, "trace_hi");
	p->trace_lo = rbuf_le64(r, "trace_lo");
	p->id = rbuf_le64(r, "id");
	rp->src = rbuf_le64(r, "src");
	rp->seq = rbuf_le64(r, "seq");
	rp->no = rbuf_le32(r, "no");
	rp->ver = rbuf_le64(r, "ver");
	p->parent_id = rbuf_le64(r, "parent_id");
	ret |= ch_get_str(r, a, &p->name);
	ret |= ch_get_ep(r, a, &p->local);
	ret |= ch_get_ep(r, a, &p->remote);
	p->debug = rbuf_u8(r, "debug");
	p->is_tag = rbuf_u8(r, "is_tag");
	p->ts_us = rbuf_le64(r, "ts_us");
	ret |= ch_get_str(r, a, &p->key);
	ret |= ch_get_str(r, a, &p->value);
	return r->err ? r->err : ret ? -ENOMEM : 0;
}

/* Merge the span ids of one group (same trace and id) into spans. */
static int merge_one(struct store_be *st, struct ch_rows *rw, struct rpart *v, size_t n)
{
	struct zarena *a = &st->merge_arena;
	struct zs_part *parts = zarena_alloc(a, n * sizeof(*parts));
	struct zspan *spans;
	int m;

	if (!parts)
		return -ENOMEM;
	qsort(v, n, sizeof(*v), rpart_cmp);
	for (size_t i = 0; i < n; i++)
		parts[i] = v[i].p;
	m = zparts_merge(parts, n, a, &spans);
	if (m < 0)
		return m;
	for (int i = 0; i < m; i++) {
		struct ch_key k = {
			.trace_hi = spans[i].trace_hi, .trace_lo = spans[i].trace_lo,
			.id = spans[i].id, .origin = 1, .no = (uint32_t)i, .ver = st->now_us,
		};

		add_span(st, rw, &k, &spans[i]);
	}
	return 0;
}

/* Read back every part of the span ids rw->keys and merge each. */
static int merge_parts(struct store_be *st, struct ch_rows *rw, char *err, size_t errlen)
{
	struct wbuf sql = { 0 }, out = { 0 };
	struct rpart *v = NULL;
	size_t n = 0, cap = 0, start;
	struct rbuf r;
	int ret;

	qsort(rw->keys, rw->nkeys, sizeof(*rw->keys), key_cmp);
	ch_sql_add(&sql, "SELECT " PART_COLS " FROM span_parts WHERE trace_lo IN (");
	for (size_t i = 0; i < rw->nkeys; i++)
		ch_sql_add(&sql, "%s%" PRIu64, i ? "," : "", rw->keys[i][0]);
	ch_sql_add(&sql, ") AND (trace_lo, trace_hi, id) IN (");
	for (size_t i = 0; i < rw->nkeys; i++) {
		if (i && !key_cmp(rw->keys[i - 1], rw->keys[i]))
			continue;
		ch_sql_add(&sql, "%s(%" PRIu64 ",%" PRIu64 ",%" PRIu64 ")", i ? "," : "",
			   rw->keys[i][0], rw->keys[i][1], rw->keys[i][2]);
	}
	ch_sql_add(&sql, ") ORDER BY trace_lo, trace_hi, id, src, seq, no, ver"
		   " FORMAT RowBinary");
	wbuf_u8(&sql, 0);
	if (sql.err) {
		wbuf_free(&sql);
		return -ENOMEM;
	}
	ret = ch_query(st->c, (const char *)sql.p, &out, err, errlen);
	wbuf_free(&sql);
	rbuf_init(&r, out.p, out.len);
	while (!ret && !rbuf_done(&r)) {
		if (zarena_grow(&st->merge_arena, (void **)&v, n, &cap, sizeof(*v))) {
			ret = -ENOMEM;
			break;
		}
		ret = read_part(&r, &st->merge_arena, &v[n]);
		if (ret) {
			snprintf(err, errlen, "span_parts: %s", r.err ? r.why : "out of memory");
			break;
		}
		/* a row sent again: keep its first arrival */
		if (n && v[n - 1].p.trace_lo == v[n].p.trace_lo &&
		    v[n - 1].p.trace_hi == v[n].p.trace_hi && v[n - 1].p.id == v[n].p.id &&
		    v[n - 1].src == v[n].src && v[n - 1].seq == v[n].seq &&
		    v[n - 1].no == v[n].no)
			continue;
		n++;
	}
	for (size_t i = 0, j; !ret && i < n; i = j) {
		start = i;
		for (j = i + 1; j < n && v[j].p.trace_lo == v[start].p.trace_lo &&
		     v[j].p.trace_hi == v[start].p.trace_hi && v[j].p.id == v[start].p.id; j++)
			;
		ret = merge_one(st, rw, &v[start], j - start);
	}
	wbuf_free(&out);
	return ret;
}

/* Whether b is new; its rows into rw.  -errno on failure. */
static int add_batch(struct store_be *st, struct ch_rows *rw, struct store_batch *b,
		     char *err, size_t errlen)
{
	uint64_t src, seq = 0;
	struct ch_agent *ag = NULL;
	int ret;

	b->duplicate = 0;
	b->stored = 0;
	if (b->agent_id) {
		ag = ch_agent_get(st, b->agent_id, err, errlen);
		if (!ag)
			return -errno;
		if (!ag->touched) {
			if (array_grow((void **)&rw->agents, rw->nagents, &rw->capagents,
				       sizeof(*rw->agents), 16))
				return -ENOMEM;
			ch_agent_begin(ag);
			ag->touched = 1;
			rw->agents[rw->nagents++] = ag;
		}
		if (b->seq <= ag->new_seq) {
			b->duplicate = 1;
			return 0;
		}
		src = ch_hash(b->agent_id, strlen(b->agent_id), 0xcbf29ce484222325ull);
		seq = b->seq;
	} else {
		src = rand_u64() | 1;   /* never 0, the merged spans' */
	}
	for (size_t i = 0; i < b->nspans; i++) {
		struct ch_key k = {
			.trace_hi = b->spans[i].trace_hi, .trace_lo = b->spans[i].trace_lo,
			.id = b->spans[i].id, .src = src, .seq = seq, .no = (uint32_t)i,
			.ver = st->now_us,
		};

		add_span(st, rw, &k, &b->spans[i]);
	}
	for (size_t i = 0; i < b->nparts; i++) {
		ret = add_part(st, rw, src, seq, (uint32_t)i, &b->parts[i]);
		if (ret)
			return ret;
	}
	b->stored = b->nspans + b->nparts;
	if (ag) {
		ag->new_seq = b->seq;
		ag->new_batches++;
		ag->new_spans += b->stored;
		if (b->host && ch_agent_host(ag, b->host))
			return -ENOMEM;
	}
	return 0;
}

/* A free slot, taken (under st->wlock), its kept row buffers into rw,
 * empty. */
static struct ch_slot *slot_take(struct store_be *st, struct ch_rows *rw)
{
	struct wbuf *w[] = { &rw->spans, &rw->index, &rw->names, &rw->parts };
	struct ch_slot *sl = NULL;

	for (;;) {
		for (size_t i = 0; i < CH_WRITERS && !sl; i++)
			if (!st->slot[i].busy)
				sl = &st->slot[i];
		if (sl)
			break;
		/* more writers than store__writers() said */
		pthread_cond_wait(&st->wcv, &st->wlock);
	}
	sl->busy = 1;
	for (size_t i = 0; i < ARRAY_SIZE(w); i++) {
		*w[i] = sl->keep[i];
		w[i]->len = 0;
		w[i]->err = 0;
		memset(&sl->keep[i], 0, sizeof(sl->keep[i]));
	}
	return sl;
}

/* rw's row buffers back into the slot, or freed when large; the slot
 * free (under st->wlock). */
static void slot_give(struct store_be *st, struct ch_slot *sl, struct ch_rows *rw)
{
	struct wbuf *w[] = { &rw->spans, &rw->index, &rw->names, &rw->parts };

	for (size_t i = 0; i < ARRAY_SIZE(w); i++) {
		if (w[i]->cap > CH_KEEP_ROWS_MAX)
			wbuf_free(w[i]);
		sl->keep[i] = *w[i];
	}
	sl->busy = 0;
	pthread_cond_broadcast(&st->wcv);
}

static int insert(struct store_be *st, const char *sql, struct wbuf *w, char *err,
		  size_t errlen)
{
	if (w->err)
		return -ENOMEM;
	if (!w->len)
		return 0;
	return ch_insert(st->c, sql, w->p, w->len, err, errlen);
}

/* One INSERT of the parallel phase, on a connection of its own. */
struct ch_ins {
	const char *sql;
	const struct wbuf *rows;
	struct ch_conn *c;
	int ret;
	char err[400];
};

static void *ins_run(void *arg)
{
	struct ch_ins *j = arg;

	j->ret = ch_insert(j->c, j->sql, j->rows->p, j->rows->len, j->err, sizeof(j->err));
	return NULL;
}

/*
 * Send the INSERTs of v (at most CH_PAR) at once, each on its own
 * connection, this thread running the first: the server parses, sorts
 * and writes each table's part in a thread of its own, so a write costs
 * about its largest INSERT instead of their sum.  0 once every one was
 * accepted; else the first failure's -errno and reason (the others may
 * have been accepted: their rows come again under the same keys when the
 * batch is resent).
 */
static int insert_all(struct ch_slot *sl, struct ch_ins *v, size_t n, char *err,
		      size_t errlen)
{
	pthread_t t[CH_PAR];
	int started[CH_PAR] = { 0 };
	struct ch_ins *run[CH_PAR];
	size_t k = 0;
	int ret = 0;

	for (size_t i = 0; i < n; i++) {
		if (v[i].rows->err)
			return -ENOMEM;
		if (v[i].rows->len && k < CH_PAR)
			run[k++] = &v[i];
	}
	for (size_t i = 0; i < k; i++) {
		run[i]->c = sl->c[i];
		run[i]->ret = 0;
		if (i && pthread_create(&t[i], NULL, ins_run, run[i]) == 0)
			started[i] = 1;
	}
	for (size_t i = 0; i < k; i++) {
		if (!i || !started[i])
			ins_run(run[i]);   /* the first, or one no thread took */
		else
			pthread_join(t[i], NULL);
	}
	for (size_t i = 0; i < k && !ret; i++) {
		ret = run[i]->ret;
		if (ret)
			snprintf(err, errlen, "%s", run[i]->err);
	}
	return ret;
}

int ch__write(struct store_be *st, struct store_batch **b, size_t n, char *err,
	      size_t errlen)
{
	struct ch_rows rw = { 0 };
	struct wbuf ag = { 0 };
	struct ch_slot *sl;
	uint64_t now_us;
	int ret = 0;

	if (st->flags & STORE_F_READONLY) {
		snprintf(err, errlen, "clickhouse:%s: opened read-only", st->url);
		return -EROFS;
	}
	pthread_mutex_lock(&st->wlock);
	ch_agents_wait(st, b, n);
	sl = slot_take(st, &rw);
	now_us = st->now_us = clock_realtime_ns() / 1000;
	for (size_t i = 0; i < n && !ret; i++)
		ret = add_batch(st, &rw, b[i], err, errlen);
	if (!ret)
		ret = insert(st, "INSERT INTO span_parts (day, " PART_COLS ") FORMAT RowBinary",
			     &rw.parts, err, errlen);
	if (!ret && rw.nkeys)
		ret = merge_parts(st, &rw, err, errlen);
	zarena_reset(&st->merge_arena);
	pthread_mutex_unlock(&st->wlock);
	if (!ret) {
		struct ch_ins par[] = {
			{ .sql = "INSERT INTO spans (day, " CH_SPAN_COLS ") FORMAT RowBinary",
			  .rows = &rw.spans },
			{ .sql = "INSERT INTO span_index (day, service_h, name_h, start_us,"
			  " duration_us, trace_hi, trace_lo) FORMAT RowBinary", .rows = &rw.index },
			{ .sql = "INSERT INTO names (kind, service, name, last_us) FORMAT RowBinary",
			  .rows = &rw.names },
		};

		ret = insert_all(sl, par, ARRAY_SIZE(par), err, errlen);
	}
	pthread_mutex_lock(&st->wlock);
	if (!ret && st->test_kill_file && unlink(st->test_kill_file) == 0) {
		pr_warn("store: clickhouse: test point FAY_CH_TEST_KILL_FILE: killed after"
			" the data INSERTs of %zu batches, before their agents' seq and ACKs", n);
		raise(SIGKILL);
	}
	for (size_t i = 0; i < rw.nagents; i++)
		ch_put_agent(&ag, rw.agents[i], now_us);
	if (!ret)
		ret = insert(st, "INSERT INTO agents (" CH_AGENT_COLS ") FORMAT RowBinary",
			     &ag, err, errlen);
	for (size_t i = 0; i < rw.nagents; i++) {
		if (!ret)
			ch_agent_commit(rw.agents[i], now_us);
		rw.agents[i]->touched = 0;
	}
	if (ret) {
		/* the names written may not be there: forget them */
		memset(st->names, 0, sizeof(st->names));
		for (size_t i = 0; i < n; i++)
			b[i]->stored = 0, b[i]->duplicate = 0;
		if (ret == -ENOMEM)
			snprintf(err, errlen, "out of memory");
	}
	slot_give(st, sl, &rw);   /* and wakes who waits for its agents */
	pthread_mutex_unlock(&st->wlock);
	wbuf_free(&ag);
	free(rw.keys);
	free(rw.agents);
	return ret;
}
