// SPDX-License-Identifier: MIT
/*
 * The order of a trace search's answer (store_trace_newer(), store.h), on
 * a real SQLite store in a temp directory: newest first, and traces of
 * one timestamp by trace id whatever order they were written in, also
 * where a limit cuts through them (every backend answers the same:
 * tests/integration/store_same_answers.sh compares SQLite and ClickHouse).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"
#include "test.h"

static struct zspan span(uint64_t hi, uint64_t lo, uint64_t ts)
{
	struct zspan s = { .trace_hi = hi, .trace_lo = lo, .id = 1, .timestamp_us = ts,
			   .duration_us = 10, .kind = SPAN_KIND_SERVER };

	s.local.service = (struct zs_str)ZS_STR("svc");
	s.name = (struct zs_str)ZS_STR("op");
	return s;
}

/* The trace ids of t's answer, lo only, as "a,b,c". */
static const char *ids(const struct store_traces *t)
{
	static char buf[256];
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < t->n && off < sizeof(buf) - 24; i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%llx", i ? "," : "",
					(unsigned long long)t->v[i].spans[0].trace_lo);
	return buf;
}

static void comparator(void)
{
	struct zspan a = span(0, 5, 100), b = span(0, 7, 100), c = span(1, 1, 100),
		     d = span(0, 1, 200);
	struct store_trace ta = { &a, 1, 100 }, tb = { &b, 1, 100 }, tc = { &c, 1, 100 },
			   td = { &d, 1, 200 };

	ok(store_trace_newer(&td, &ta) < 0 && store_trace_newer(&ta, &td) > 0,
	   "a newer trace first");
	ok(store_trace_newer(&ta, &tb) < 0 && store_trace_newer(&tb, &ta) > 0,
	   "same timestamp: the lower trace id first");
	ok(store_trace_newer(&tb, &tc) < 0, "... the high half decides first");
	is_int(store_trace_newer(&ta, &ta), 0, "a trace is not before itself");
}

static void search(void)
{
	char dir[64] = "/tmp/fay-order-test.XXXXXX", path[128], err[256];
	/* written out of id order; 0x30..0x34 share one timestamp */
	uint64_t lo[] = { 0x33, 0x31, 0x40, 0x34, 0x30, 0x32, 0x20 };
	uint64_t ts[] = { 5000000, 5000000, 6000000, 5000000, 5000000, 5000000, 4000000 };
	struct zspan s[7];
	struct store_batch b = { .spans = s, .nspans = 7 }, *bp = &b;
	struct store_query q = { .end_ts_ms = 10000, .lookback_ms = 10000, .limit = 100 };
	struct store_traces t = { 0 };
	static const struct { unsigned limit; const char *want, *what; } cases[] = {
		{ 100, "40,30,31,32,33,34,20", "newest first, ties by id" },
		{ 3, "40,30,31", "the tie cut by id, not by arrival" },
		{ 6, "40,30,31,32,33,34", "the whole tie, not the older trace" },
		{ 1, "40", "the newest alone" },
	};
	struct store_reader *r;
	struct store *st;

	if (!mkdtemp(dir)) {
		ok(0, "a temp dir: %s", dir);
		return;
	}
	snprintf(path, sizeof(path), "%s/fay.db", dir);
	st = store__open(path, 0, err, sizeof(err));
	ok(st != NULL, "store opens: %s", st ? path : err);
	if (!st)
		return;
	for (int i = 0; i < 7; i++)
		s[i] = span(0, lo[i], ts[i]);
	is_int(store__write(st, &bp, 1, err, sizeof(err)), 0, "7 traces written");
	r = store__reader_new(st);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		q.limit = cases[i].limit;
		store__traces(r, &q, &t);
		is_str(ids(&t), cases[i].want, "limit %u: %s", q.limit, cases[i].what);
		store_traces_free(&t);
	}
	store__reader_free(r);
	store__close(st);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	if (system(path))
		diag("cleanup failed");
}

int main(void)
{
	comparator();
	search();
	return test_done();
}
