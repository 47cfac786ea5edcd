// SPDX-License-Identifier: MIT
/*
 * What a spans(...) query costs the agent per span: the drain thread's
 * part of `from sp in spans group sp by {sp.service, sp.name} into g
 * select { n: g.count(), avg: g.avg(sp.duration), p99:
 * g.quantile(sp.duration, 0.99) }` (and the same with `where
 * sp.tag("object") != ""`): spanctx_match + spanctx_fill + the generated
 * program run in fay's VM (JIT) + its map update, per decoded span.
 *
 * Peer, same run, same spans: the hand-written C a developer would put in
 * the agent for exactly this question (the service and name from the
 * record, a string-keyed open-addressed table, count, sum and the
 * quantile sketch updated with query/aggr.c's reference functions, the
 * tag looked up by scanning the items).  The answers are compared group
 * by group before any figure is printed.
 *
 *	bench_spans [--spans N] [--runs R]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/clock.h"
#include "common/spanrec.h"
#include "engine/driver.h"
#include "engine/engine.h"
#include "query/aggr.h"
#include "query/plan.h"
#include "query/spanctx.h"

struct rec {
	struct spanrec_fixed f;
	uint8_t items[400];
};

static const char *const layers[][3] = {
	{ "vm-client", "write", "read" }, { "composer", "write", "object" },
	{ "mapper", "map", "replicate" }, { "blocker-1", "write", "read" },
	{ "blocker-2", "write", "read" },
};

/* Span i, blockstack-shaped: a name, an endpoint, three tags, an event. */
static void make_span(unsigned i, struct rec *r, struct spanrec *sr)
{
	const char *svc = layers[i % 5][0], *name = layers[i % 5][1 + (i / 5) % 2];
	char obj[32];
	size_t used = 0, cap = sizeof(r->items);
	uint64_t x = aggr_hash64(i + 1);

	memset(r, 0, sizeof(*r));
	r->f.trace_lo = 1 + i / 16;
	r->f.span_id = 1 + i;
	r->f.start_ns = 1700000000000000000ull + i * 1000ull;
	r->f.duration_ns = 1000 + x % 5000000;
	r->f.kind = SPAN_KIND_SERVER;
	snprintf(obj, sizeof(obj), "rbd_data.%u", (unsigned)(x % 4096));
	spanrec_put_item(r->items, cap, &used, SPAN_ITEM_NAME, 0, name, strlen(name), NULL, 0);
	spanrec_put_item(r->items, cap, &used, SPAN_ITEM_LOCAL_EP, 6800, svc, strlen(svc),
			 "127.0.0.1", 9);
	spanrec_put_item(r->items, cap, &used, SPAN_ITEM_TAG_INT, x % (1 << 24), "offset", 6,
			 NULL, 0);
	spanrec_put_item(r->items, cap, &used, SPAN_ITEM_TAG_INT, 16384, "size", 4, NULL, 0);
	if (i % 3)
		spanrec_put_item(r->items, cap, &used, SPAN_ITEM_TAG, 0, "object", 6, obj,
				 strlen(obj));
	spanrec_put_item(r->items, cap, &used, SPAN_ITEM_EVENT, r->f.start_ns + 10, "queue", 5,
			 NULL, 0);
	r->f.items_len = (uint32_t)used;
	r->f.nitems = i % 3 ? 6 : 5;
	if (spanrec_decode(r, sizeof(r->f) + used, sr, NULL, 0) < 0) {
		fprintf(stderr, "bench_spans: span %u does not decode\n", i);
		exit(1);
	}
}

/* ---- the peer: hand-written C for the same question ------------------- */

#define PEER_SLOTS 64

struct pgroup {
	bool used;
	char svc[64], name[64];
	uint64_t n;
	int64_t sum;
	unsigned char q[8192];
};

static struct pgroup peer[PEER_SLOTS];
static struct aggr_desc qdesc;

static bool has_object(const struct spanrec *r)
{
	struct spanrec_item it;
	uint32_t off = 0;

	while (spanrec_next(r, &off, &it))
		if ((it.type == SPAN_ITEM_TAG || it.type == SPAN_ITEM_TAG_INT) && it.a.len == 6 &&
		    !memcmp(it.a.p, "object", 6))
			return it.type == SPAN_ITEM_TAG_INT || it.b.len > 0;
	return false;
}

static void peer_one(const struct spanrec *r, bool where)
{
	struct spanrec_str s = r->local.service, n = r->name;
	uint64_t h;
	unsigned k;

	if (where && !has_object(r))
		return;
	h = aggr_hash64(aggr_hash_bytes(s.p, s.len) ^ (aggr_hash_bytes(n.p, n.len) * 31));
	for (k = (unsigned)h % PEER_SLOTS;; k = (k + 1) % PEER_SLOTS) {
		struct pgroup *g = &peer[k];

		if (!g->used) {
			g->used = true;
			memcpy(g->svc, s.p, s.len < 63 ? s.len : 63);
			memcpy(g->name, n.p, n.len < 63 ? n.len : 63);
		} else if (strlen(g->svc) != s.len || memcmp(g->svc, s.p, s.len) ||
			   strlen(g->name) != n.len || memcmp(g->name, n.p, n.len)) {
			continue;
		}
		g->n++;
		g->sum += (int64_t)r->f.duration_ns;
		aggr_update(&qdesc, g->q, (int64_t)r->f.duration_ns);
		return;
	}
}

/* ---- fay ------------------------------------------------------------------- */

struct fay {
	struct query *q;
	const struct plan *p;
	struct engine *e;
	unsigned char *ctx;
};

static int fay_start(struct fay *f, const char *text)
{
	struct query_opts qo = { .sz = sizeof(qo), .cluster = true };
	struct engine_opts eo = { .sz = sizeof(eo), .host = "bench" };
	char err[1024];

	f->q = engine_plan_text("<bench>", text, strlen(text), &qo, &f->p, err, sizeof(err));
	if (!f->q || !(f->e = engine_new(f->q, f->p, &eo, err, sizeof(err)))) {
		fprintf(stderr, "bench_spans: %s\n", f->q ? err : err);
		return -1;
	}
	if (engine_load(f->e) || engine_attach(f->e)) {
		fprintf(stderr, "bench_spans: %s", engine_error(f->e));
		return -1;
	}
	f->ctx = malloc((size_t)f->p->ctx_size);
	return f->ctx ? 0 : -1;
}

static void fay_one(struct fay *f, const struct spanrec *r)
{
	if (!spanctx_match(f->p, r, "proc"))
		return;
	spanctx_fill(f->p, r, "proc", 4242, NULL, NULL, f->ctx);
	engine_span_feed(f->e, f->ctx);
}

static void fay_stop(struct fay *f)
{
	engine_free(f->e);
	query_free(f->q);
	free(f->ctx);
}

/* fay's rows against the peer's table: every group, n, avg, p99. */
static int same_answer(struct fay *f)
{
	struct engine_result res;
	size_t groups = 0;
	int bad = 0;

	if (engine_read(f->e, false, &res))
		return 0;
	for (size_t i = 0; i < res.nrows; i++) {
		struct plan_val v[5];
		bool found = false;

		for (int c = 0; c < 5; c++)
			plan_eval(f->p, f->p->cols[c].e, res.rows[i].key, res.rows[i].val, &v[c]);
		for (unsigned k = 0; k < PEER_SLOTS; k++) {
			struct pgroup *g = &peer[k];
			int64_t p99;

			if (!g->used || strncmp(g->svc, v[0].s, v[0].len) || g->svc[v[0].len] ||
			    strncmp(g->name, v[1].s, v[1].len) || g->name[v[1].len])
				continue;
			aggr_final(&qdesc, g->q, &p99);
			found = true;
			bad |= (uint64_t)v[2].i != g->n || v[3].i != g->sum / (int64_t)g->n ||
			       v[4].i != p99;
		}
		bad |= !found;
		groups += found;
	}
	for (unsigned k = 0; k < PEER_SLOTS; k++)
		groups -= peer[k].used;
	engine_result_clear(&res);
	return !bad && !groups;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "spans", required_argument, NULL, 's' }, { "runs", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const qs[2] = {
		"from sp in spans group sp by {s: sp.service, n: sp.name} into g "
		"select {s: g.s, n: g.n, c: g.count(), a: g.avg(sp.duration), "
		"p: g.quantile(sp.duration, 0.99)}",
		"from sp in spans where sp.tag(\"object\") != \"\" "
		"group sp by {s: sp.service, n: sp.name} into g "
		"select {s: g.s, n: g.n, c: g.count(), a: g.avg(sp.duration), "
		"p: g.quantile(sp.duration, 0.99)}",
	};
	unsigned nspans = 200000, runs = 9;
	struct rec *recs;
	struct spanrec *srs;
	int o;

	while ((o = getopt_long(argc, argv, "s:r:", lo, NULL)) != -1) {
		if (o == 's')
			nspans = (unsigned)strtoul(optarg, NULL, 10);
		else if (o == 'r')
			runs = (unsigned)strtoul(optarg, NULL, 10);
		else
			return 2;
	}
	if (!nspans || !runs || runs > 99)
		return 2;
	aggr_desc_init(&qdesc, AGGR_QUANTILE, 0, 0, 0, 0.99);
	recs = calloc(nspans, sizeof(*recs));
	srs = calloc(nspans, sizeof(*srs));
	if (!recs || !srs)
		return 1;
	for (unsigned i = 0; i < nspans; i++)
		make_span(i, &recs[i], &srs[i]);
	printf("spans(...) in the agent: ns per drained span, %u spans, median of %u runs\n",
	       nspans, runs);
	printf("%-44s %10s %10s %8s\n", "query", "fay ns", "C ns", "fay/C");
	for (int w = 0; w < 2; w++) {
		double tf[99], tc[99];

		for (unsigned r = 0; r < runs; r++) {
			struct fay f = { 0 };
			uint64_t t0, t1, t2;

			memset(peer, 0, sizeof(peer));
			if (fay_start(&f, qs[w]))
				return 1;
			t0 = clock_monotonic_ns();
			for (unsigned i = 0; i < nspans; i++)
				fay_one(&f, &srs[i]);
			t1 = clock_monotonic_ns();
			for (unsigned i = 0; i < nspans; i++)
				peer_one(&srs[i], w == 1);
			t2 = clock_monotonic_ns();
			if (!same_answer(&f)) {
				fprintf(stderr, "bench_spans: fay and the C peer disagree (%s)\n", qs[w]);
				return 1;
			}
			fay_stop(&f);
			tf[r] = (double)(t1 - t0) / nspans;
			tc[r] = (double)(t2 - t1) / nspans;
		}
		{
			double mf = median(tf, runs), mc = median(tc, runs);

			printf("%-44s %10.1f %10.1f %8.2f\n",
			       w ? "where tag(\"object\") != \"\", group, 3 aggrs" : "group by service, name; count avg p99",
			       mf, mc, mf / mc);
		}
	}
	printf("answers: identical to the C peer's (every group: count, avg, p99)\n");
	free(recs);
	free(srs);
	return 0;
}
