// SPDX-License-Identifier: MIT
/*
 * The span tap: with no query attached a feed does nothing (not even a
 * merge); attached queries each see the spans they ask for (by service,
 * by pattern, all), BlkKin parts only once merged into a whole span, with
 * their own context layout (different tag keys); a detached query sees
 * nothing more while the others go on; a streaming query's fd wakes after
 * a pass; the counts add up.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "agent/spantap.h"
#include "engine/driver.h"
#include "engine/engine.h"
#include "query/plan.h"
#include "test.h"

struct rec {
	struct spanrec_fixed f;
	uint8_t items[512];
};

static struct spanrec mk(struct rec *r, uint64_t span, const char *svc, const char *name,
			 bool partial, const char *annot, const char *tk, const char *tv)
{
	size_t used = 0;
	struct spanrec out;

	memset(r, 0, sizeof(*r));
	r->f.trace_lo = 77;
	r->f.span_id = span;
	r->f.start_ns = 1000 * span + (annot && annot[1] == 'r' && annot[0] == 'c' ? 500 : 0) +
			(annot && !strcmp(annot, "ss") ? 3000 : 0);
	r->f.duration_ns = partial ? 0 : 2000;
	r->f.flags = partial ? SPAN_F_PARTIAL | SPAN_F_SAMPLED : SPAN_F_SAMPLED;
	r->f.nitems = 1;
	spanrec_put_item(r->items, sizeof(r->items), &used, SPAN_ITEM_NAME, 0, name, strlen(name),
			 NULL, 0);
	if (partial) {
		spanrec_put_item(r->items, sizeof(r->items), &used, SPAN_ITEM_LOCAL_EP, 1, svc,
				 strlen(svc), "::1", 3);
		r->f.nitems++;
	}
	if (annot) {
		spanrec_put_item(r->items, sizeof(r->items), &used, SPAN_ITEM_EVENT, r->f.start_ns,
				 annot, strlen(annot), NULL, 0);
		r->f.nitems++;
	}
	if (tk) {
		spanrec_put_item(r->items, sizeof(r->items), &used, SPAN_ITEM_TAG, 0, tk, strlen(tk),
				 tv, strlen(tv));
		r->f.nitems++;
	}
	r->f.items_len = (uint32_t)used;
	if (spanrec_decode(r, sizeof(r->f) + used, &out, NULL, 0) < 0)
		diag("span %llu does not decode", (unsigned long long)span);
	return out;
}

struct q {
	struct query *q;
	const struct plan *p;
	struct engine *e;
};

static int start(struct q *x, const char *text)
{
	struct query_opts qo = { .sz = sizeof(qo), .cluster = true };
	struct engine_opts eo = { .sz = sizeof(eo), .host = "t" };
	char err[512];

	x->q = engine_plan_text("<t>", text, strlen(text), &qo, &x->p, err, sizeof(err));
	x->e = x->q ? engine_new(x->q, x->p, &eo, err, sizeof(err)) : NULL;
	if (!x->e || engine_load(x->e) || engine_attach(x->e)) {
		diag("%s: %s", text, x->e ? engine_error(x->e) : err);
		return -1;
	}
	return 0;
}

static void stop(struct q *x)
{
	engine_free(x->e);
	query_free(x->q);
}

/* The single count of a keyless query, or the sum over its rows of the
 * count column c. */
static int64_t count(struct q *x, int c)
{
	struct engine_result res;
	int64_t n = 0;

	if (engine_read(x->e, false, &res))
		return -1;
	for (size_t i = 0; i < res.nrows; i++) {
		struct plan_val v;

		plan_eval(x->p, x->p->cols[c].e, res.rows[i].key, res.rows[i].val, &v);
		n += v.i;
	}
	engine_result_clear(&res);
	return n;
}

static int nrec;

static void on_rec(void *ctx, const void *rec, size_t size)
{
	nrec++;
}

int main(void)
{
	struct spantap *t = spantap_new();
	struct q mapper, all, tagged, stream;
	struct rec r;
	struct spanrec s;
	uint64_t fed, dropped;
	struct pollfd pf;

	ok(t != NULL, "a tap");
	/* nothing attached: a feed is a no-op, BlkKin parts are not kept */
	s = mk(&r, 1, "mapper", "map", true, "sr", NULL, NULL);
	spantap_feed(t, &s, "mapper", 1, NULL, NULL);
	spantap_counts(t, &fed, &dropped);
	is_u64(fed, 0, "no query: nothing fed");

	if (start(&mapper, "from sp in spans(\"mapper\") select {c: count(), d: sum(sp.duration)}") ||
	    start(&all, "from sp in spans group sp by sp.kind into g select {k: g.key, c: g.count()}") ||
	    start(&tagged, "from sp in spans(\"comp*\") where sp.tag(\"object\") == \"o1\" select {c: count()}") ||
	    start(&stream, "from sp in spans select {n: sp.name, s: sp.service}")) {
		ok(0, "four spans(...) engines");
		return test_done();
	}
	engine_set_record_fn(stream.e, on_rec, NULL);
	is_int(spantap_attach(t, mapper.e), 0, "attach spans(\"mapper\")");
	is_int(spantap_attach(t, all.e), 0, "attach spans");
	is_int(spantap_attach(t, tagged.e), 0, "attach spans(\"comp*\") with a tag filter");
	is_int(spantap_attach(t, stream.e), 0, "attach a stream");

	/* the ss of span 1, whose sr came before any query: never completes */
	s = mk(&r, 1, "mapper", "map", true, "ss", NULL, NULL);
	spantap_feed(t, &s, "mapper", 1, NULL, NULL);
	/* a BlkKin server span 2 of mapper: sr, a tag, ss */
	s = mk(&r, 2, "mapper", "map", true, "sr", NULL, NULL);
	spantap_feed(t, &s, "mapper", 1, NULL, NULL);
	s = mk(&r, 2, "mapper", "map", true, NULL, "object", "o9");
	spantap_feed(t, &s, "mapper", 1, NULL, NULL);
	is_int((int)count(&mapper, 0), 0, "parts are not spans");
	s = mk(&r, 2, "mapper", "map", true, "ss", NULL, NULL);
	spantap_feed(t, &s, "mapper", 1, NULL, NULL);
	is_int((int)count(&mapper, 0), 1, "its end makes one whole span");
	is_int((int)count(&mapper, 1), 3000, "with the duration from sr to ss");
	/* libfay spans of composer (no endpoint: the process's service) */
	for (int i = 0; i < 10; i++) {
		s = mk(&r, 100 + (uint64_t)i, NULL, "object", false, NULL, "object", i % 2 ? "o1" : "o2");
		spantap_feed(t, &s, "composer", 2, NULL, NULL);
	}
	spantap_pass_end(t);
	is_int((int)count(&mapper, 0), 1, "spans(\"mapper\") does not see composer's");
	is_int((int)count(&tagged, 0), 5, "spans(\"comp*\") where tag == \"o1\": 5 of 10");
	is_int((int)count(&all, 1), 11, "spans sees all 11 whole spans");
	pf = (struct pollfd){ .fd = engine_stream_fd(stream.e), .events = POLLIN };
	ok(poll(&pf, 1, 0) == 1, "the stream's fd woke after the pass");
	engine_consume(stream.e);
	is_int(nrec, 11, "one streamed row per whole span");

	spantap_detach(t, all.e);
	s = mk(&r, 200, NULL, "object", false, NULL, "object", "o1");
	spantap_feed(t, &s, "composer", 2, NULL, NULL);
	is_int((int)count(&all, 1), 11, "a detached query sees nothing more");
	is_int((int)count(&tagged, 0), 6, "the others go on");
	spantap_counts(t, &fed, &dropped);
	is_u64(fed, 12, "12 whole spans fed");
	is_u64(dropped, 0, "none given up yet (span 1 waits for its TTL)");
	spantap_detach(t, mapper.e);
	spantap_detach(t, tagged.e);
	spantap_detach(t, stream.e);
	stop(&mapper);
	stop(&all);
	stop(&tagged);
	stop(&stream);
	spantap_free(t);
	return test_done();
}
