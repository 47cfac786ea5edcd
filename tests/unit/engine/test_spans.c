// SPDX-License-Identifier: MIT
/*
 * spans(...) queries in the engine, no kernel and no root: the plan's
 * programs run in fay's VM on span contexts (spanctx_fill() of real
 * decoded span records), and the reader merges the VM maps into rows.
 * Counts, sums, averages, min/max and histograms per group match what
 * the test computes from the spans it fed; where clauses on tags, kind
 * and error filter; a window's reset starts the next window from zero; a
 * streaming query yields one record per matching span.  A feeder thread
 * runs while the reader resets, and nothing is lost or counted twice.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "common/spanrec.h"
#include "engine/driver.h"
#include "engine/engine.h"
#include "query/plan.h"
#include "query/query.h"
#include "query/spanctx.h"

static const char *const names[] = { "write", "read", "map", "object" };
static const char *const objs[] = { "obj-a", "obj-b", "obj-c" };

struct rec {
	struct spanrec_fixed f;
	uint8_t items[512];
};

/* Span i of the synthetic workload, decoded into *sr (pointing into *r). */
static void span(int i, struct rec *r, struct spanrec *sr)
{
	size_t used = 0;
	char err[128];
	const char *n = names[i % 4], *o = objs[i % 3];

	memset(r, 0, sizeof(*r));
	r->f.trace_lo = 1000 + (uint64_t)i / 4;
	r->f.span_id = 1 + (uint64_t)i;
	r->f.start_ns = 1700000000000000000ull + (uint64_t)i * 1000;
	r->f.duration_ns = 1000 * (uint64_t)(i % 97 + 1);
	r->f.kind = i % 2 ? SPAN_KIND_SERVER : SPAN_KIND_CLIENT;
	r->f.flags = i % 10 == 0 ? SPAN_F_ERROR : 0;
	spanrec_put_item(r->items, sizeof(r->items), &used, SPAN_ITEM_NAME, 0, n, strlen(n), NULL, 0);
	spanrec_put_item(r->items, sizeof(r->items), &used, SPAN_ITEM_TAG, 0, "object", 6, o, strlen(o));
	spanrec_put_item(r->items, sizeof(r->items), &used, SPAN_ITEM_TAG_INT, (uint64_t)(i % 5),
			 "size", 4, NULL, 0);
	r->f.items_len = (uint32_t)used;
	r->f.nitems = 3;
	if (spanrec_decode(r, sizeof(r->f) + used, sr, err, sizeof(err)) < 0)
		diag("span %d: %s", i, err);
}

/* Plan text as an agent does (*q to free) and start its engine. */
static struct engine *start(const char *text, struct query **q, const struct plan **p)
{
	char err[1024];
	struct engine_opts o = { .sz = sizeof(o), .host = "h1" };
	struct query_opts qo = { .sz = sizeof(qo), .cluster = true };
	struct engine *e;

	*p = NULL;
	*q = engine_plan_text("<t>", text, strlen(text), &qo, p, err, sizeof(err));
	if (!*q) {
		diag("%s", err);
		return NULL;
	}
	e = engine_new(*q, *p, &o, err, sizeof(err));
	if (!e) {
		diag("engine_new: %s", err);
		return NULL;
	}
	if (engine_load(e) || engine_attach(e)) {
		diag("load: %s", engine_error(e));
		engine_free(e);
		return NULL;
	}
	return e;
}

/* Feed spans [from, to) of the workload. */
static void feed(struct engine *e, const struct plan *p, int from, int to)
{
	unsigned char *ctx = malloc((size_t)p->ctx_size);
	struct rec r;
	struct spanrec sr;

	for (int i = from; i < to; i++) {
		span(i, &r, &sr);
		if (spanctx_match(p, &sr, "svc"))
			spanctx_fill(p, &sr, "svc", 77, NULL, NULL, ctx);
		else
			continue;
		if (engine_span_feed(e, ctx))
			diag("feed %d failed", i);
	}
	engine_span_kick(e);
	free(ctx);
}

static int64_t col(const struct plan *p, const struct engine_row *row, int c, const char **s)
{
	struct plan_val v;

	if (plan_eval(p, p->cols[c].e, row->key, row->val, &v))
		return INT64_MIN;
	if (s)
		*s = v.s;
	return v.i;
}

#define N 2000

static void test_group(void)
{
	const struct plan *p;
	struct query *q;
	struct engine *e = start("from sp in spans(\"svc\") group sp by sp.name into g "
				  "select {n: g.key, c: g.count(), d: g.avg(sp.duration), "
				  "lo: g.min(sp.duration), hi: g.max(sp.duration), e: g.sum(sp.error)"
				  "}", &q, &p);
	struct engine_result res;

	ok(e != NULL, "a group-by spans query loads in the VM (no root)");
	if (!e)
		goto out;
	is_int(engine_nprobes(e), 1, "one program");
	is_str(engine_probe_desc(e, 0), "spans(\"svc\")", "described as its source");
	feed(e, p, 0, N);
	ok(!engine_read(e, false, &res), "read");
	is_int((int)res.nrows, 4, "one row per name");
	for (size_t r = 0; r < res.nrows; r++) {
		const char *name = NULL;
		int k;
		int64_t c = col(p, &res.rows[r], 1, NULL), sum = 0, n = 0, lo = INT64_MAX, hi = 0, er = 0;

		col(p, &res.rows[r], 0, &name);
		for (k = 0; k < 4 && strcmp(names[k], name); k++)
			;
		for (int i = k; i < N; i += 4) {
			int64_t d = 1000 * (i % 97 + 1);

			sum += d;
			n++;
			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
			er += i % 10 == 0;
		}
		is_int((int)c, (int)n, "%s: count", name);
		is_int((int)col(p, &res.rows[r], 2, NULL), (int)(sum / n), "%s: avg duration", name);
		is_int((int)col(p, &res.rows[r], 3, NULL), (int)lo, "%s: min", name);
		is_int((int)col(p, &res.rows[r], 4, NULL), (int)hi, "%s: max", name);
		is_int((int)col(p, &res.rows[r], 5, NULL), (int)er, "%s: errors", name);
	}
	engine_result_clear(&res);
	engine_free(e);
out:
	query_free(q);
}

static void test_where(void)
{
	const struct plan *p;
	struct query *q;
	struct engine *e = start("from sp in spans where sp.tag(\"object\") == \"obj-b\" && "
				  "sp.kind == \"server\" && sp.tag(\"size\") != \"0\" && !sp.error "
				  "select {c: count(), s: sum(sp.pid)}", &q, &p);
	struct engine_result res;
	int want = 0;

	ok(e != NULL, "a where on tags, kind and error loads");
	if (!e)
		goto out;
	feed(e, p, 0, N);
	for (int i = 0; i < N; i++)
		want += i % 3 == 1 && i % 2 == 1 && i % 5 != 0 && i % 10 != 0;
	ok(!engine_read(e, false, &res) && res.nrows == 1, "one row");
	if (res.nrows == 1) {
		is_int((int)col(p, &res.rows[0], 0, NULL), want, "only the matching spans count");
		is_int((int)col(p, &res.rows[0], 1, NULL), want * 77, "pid of each");
	}
	engine_result_clear(&res);
	engine_free(e);
out:
	query_free(q);
}

struct feeder {
	struct engine *e;
	const struct plan *p;
	int from, to;
};

static void *feeder_main(void *arg)
{
	struct feeder *f = arg;

	for (int i = f->from; i < f->to; i += 10)
		feed(f->e, f->p, i, i + 10 < f->to ? i + 10 : f->to);
	return NULL;
}

static void test_windows(void)
{
	const struct plan *p;
	struct query *q;
	struct engine *e = start("from sp in spans group sp by sp.kind into g "
				  "select {k: g.key, c: g.count()} window 1s", &q, &p);
	struct engine_result res;
	struct feeder f;
	pthread_t t;
	int64_t total = 0;

	ok(e != NULL, "a windowed query loads");
	if (!e)
		goto out;
	feed(e, p, 0, 100);
	ok(!engine_read(e, true, &res), "window 1 read and reset");
	for (size_t r = 0; r < res.nrows; r++)
		total += col(p, &res.rows[r], 1, NULL);
	is_int((int)total, 100, "window 1 holds the first 100 spans");
	engine_result_clear(&res);
	/* windows cut while a thread feeds: each span in exactly one */
	f = (struct feeder){ .e = e, .p = p, .from = 0, .to = 20000 };
	total = 0;
	pthread_create(&t, NULL, feeder_main, &f);
	for (int w = 0; w < 50; w++) {
		if (engine_read(e, true, &res))
			break;
		for (size_t r = 0; r < res.nrows; r++)
			total += col(p, &res.rows[r], 1, NULL);
		engine_result_clear(&res);
	}
	pthread_join(t, NULL);
	ok(!engine_read(e, true, &res), "last window");
	for (size_t r = 0; r < res.nrows; r++)
		total += col(p, &res.rows[r], 1, NULL);
	engine_result_clear(&res);
	is_int((int)total, 20000, "windows cut during feeds add up to every span");
	engine_free(e);
out:
	query_free(q);
}

static int nrec;
static int64_t durs;

static void on_rec(void *ctx, const void *rec, size_t size)
{
	const struct plan *p = ctx;
	int64_t d;

	memcpy(&d, (const char *)rec + p->cols[1].offset, 8);
	nrec++;
	durs += d;
}

static void test_stream(void)
{
	const struct plan *p;
	struct query *q;
	struct engine *e = start("from sp in spans where sp.name == \"map\" "
				  "select {n: sp.name, d: sp.duration, t: sp.tag(\"object\")}", &q, &p);
	int64_t want = 0;

	ok(e != NULL, "a streaming query loads");
	if (!e)
		goto out;
	engine_set_record_fn(e, on_rec, (void *)p);
	ok(engine_stream_fd(e) >= 0, "it has a stream fd");
	feed(e, p, 0, 400);
	ok(engine_consume(e) > 0, "records wait");
	for (int i = 2; i < 400; i += 4)
		want += 1000 * (i % 97 + 1);
	is_int(nrec, 100, "one record per matching span");
	is_int((int)durs, (int)want, "with its duration");
	engine_free(e);
out:
	query_free(q);
}

int main(void)
{
	test_group();
	test_where();
	test_windows();
	test_stream();
	return test_done();
}
