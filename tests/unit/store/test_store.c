// SPDX-License-Identifier: MIT
/*
 * The SQLite store through its interface (store/store.h), on real files in
 * a temp directory: schema, insert and read back, dedupe by agent
 * last_seq, partial-record merge across batches, names, trace search,
 * retention, a version 1 file migrated, files that are not fay stores
 * (never touched), a batch interleaving traces (rows in key order), and
 * the limits of schema 5's span key (2^20 spans a trace, 2^43 traces).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sqlite3.h>
#include <unistd.h>

#include "common/clock.h"
#include "store/store.h"
#include "test.h"

static char dir[64], path[128];
static struct zarena A;

static const char AGENT[] = "00112233445566778899aabbccddeeff";

static struct zspan span(uint64_t lo, uint64_t id, uint64_t parent, const char *svc,
			 const char *name, uint64_t ts, uint64_t dur)
{
	struct zspan s = { .trace_hi = 0x1111, .trace_lo = lo, .id = id, .parent_id = parent,
			   .timestamp_us = ts, .duration_us = dur, .kind = SPAN_KIND_SERVER };

	s.local.service = (struct zs_str){ svc, (uint32_t)strlen(svc) };
	s.name = (struct zs_str){ name, (uint32_t)strlen(name) };
	return s;
}

static int write1(struct store *st, const char *agent, uint64_t seq, struct zspan *s,
		  size_t n, struct store_batch *out)
{
	struct store_batch b = { .agent_id = agent, .host = "h1", .seq = seq, .spans = s,
				 .nspans = n };
	struct store_batch *bp = &b;
	char err[256];
	int ret = store__write(st, &bp, 1, err, sizeof(err));

	if (ret)
		diag("store__write: %s", err);
	if (out)
		*out = b;
	return ret;
}

static size_t trace_len(struct store_reader *r, uint64_t hi, uint64_t lo)
{
	struct store_traces t = { 0 };
	size_t n = 0;

	if (store__trace(r, hi, lo, &t) > 0)
		n = t.v[0].n;
	store_traces_free(&t);
	return n;
}

static void roundtrip(struct store *st, struct store_reader *r)
{
	struct zs_annotation an[] = { { 1000050, ZS_STR("wire \"send\"\n") } };
	struct zs_tag tg[] = { { ZS_STR("error"), ZS_STR("disk full") },
			       { ZS_STR("k\\1"), ZS_STR("v\x01") } };
	struct zspan s = span(1, 0xffffffffffffffffull, 0x8000000000000000ull, "api", "put",
			      1000000, 250);
	struct store_traces t = { 0 };
	const struct zspan *g;

	s.kind = SPAN_KIND_CLIENT;
	s.debug = 1;
	s.annotations = an;
	s.nannotations = 1;
	s.tags = tg;
	s.ntags = 2;
	snprintf(s.local.ipv6, sizeof(s.local.ipv6), "2001:db8::1");
	s.local.port = 443;
	s.remote.service = (struct zs_str)ZS_STR("disk");
	snprintf(s.remote.ipv4, sizeof(s.remote.ipv4), "10.1.2.3");
	zspan_normalize(&s);
	is_int(write1(st, NULL, 0, &s, 1, NULL), 0, "HTTP-style write (no agent)");
	is_int(store__trace(r, 0x1111, 1, &t), 1, "trace found");
	if (t.n != 1 || t.v[0].n != 1) {
		ok(0, "one span back");
		return;
	}
	g = &t.v[0].spans[0];
	is_u64(g->trace_hi, 0x1111, "trace_hi");
	is_u64(g->id, 0xffffffffffffffffull, "id with the top bit set survives int64");
	is_u64(g->parent_id, 0x8000000000000000ull, "parent id");
	is_int(g->kind, SPAN_KIND_CLIENT, "kind");
	is_str(g->name.p, "put", "name");
	is_u64(g->timestamp_us, 1000000, "timestamp");
	is_u64(g->duration_us, 250, "duration");
	is_str(g->local.service.p, "api", "local service");
	is_str(g->local.ipv6, "2001:db8::1", "local ipv6");
	is_int(g->local.port, 443, "local port");
	is_str(g->remote.service.p, "disk", "remote service");
	is_str(g->remote.ipv4, "10.1.2.3", "remote ipv4");
	is_int(g->debug, 1, "debug");
	is_int(g->error, 1, "error (from the tag)");
	ok(g->nannotations == 1 && g->annotations[0].ts_us == 1000050 &&
	   zs_str_eqc(g->annotations[0].value, "wire \"send\"\n"),
	   "annotation with quote and newline round-trips");
	ok(g->ntags == 2 && zs_str_eqc(g->tags[1].key, "k\\1") &&
	   zs_str_eqc(g->tags[1].value, "v\x01"), "tag with backslash and control byte round-trips");
	store_traces_free(&t);
	is_int(store__trace(r, 0x1111, 999, &t), 0, "unknown trace: 0");
	store_traces_free(&t);
}

/* The spans INSERTs bind again only what changed from the row bound
 * there before (sqlite_write.c span_int(): the one-row INSERT, and the
 * eight-row one whose parameters repeat the row eight before): n spans of
 * trace lo that alternate every column between set and absent every
 * period spans, the first `first` in one transaction and the rest in the
 * next, read back as they were written. */
static void columns_alternate(struct store *st, struct store_reader *r, uint64_t lo, int n,
			      int period, int first)
{
	struct zs_tag tg[] = { { ZS_STR("error"), ZS_STR("yes") } };
	struct zspan s[48];
	struct store_traces t = { 0 };
	int bad = 0;

	for (int i = 0; i < n; i++) {
		int full = i % period == 0;

		s[i] = span(lo, 100 + (uint64_t)i, full ? 7 + (uint64_t)i : 0,
			    full ? "full" : "bare", full ? "op" : "", full ? 2000000 + (uint64_t)i : 0,
			    full ? 10 + (uint64_t)i : 0);
		s[i].kind = full ? SPAN_KIND_CLIENT : SPAN_KIND_UNSET;
		if (full) {
			s[i].debug = 1;
			s[i].shared = 0;
			s[i].tags = tg;
			s[i].ntags = 1;
			s[i].remote.service = (struct zs_str)ZS_STR("peer");
			snprintf(s[i].local.ipv4, sizeof(s[i].local.ipv4), "10.0.0.%d", i);
			snprintf(s[i].remote.ipv6, sizeof(s[i].remote.ipv6), "2001:db8::%d", i);
			s[i].local.port = (uint16_t)(1000 + i);
			s[i].remote.port = (uint16_t)(2000 + i);
		} else {
			s[i].kind = SPAN_KIND_SERVER;
			s[i].local.service = (struct zs_str)ZS_STR("");
		}
		zspan_normalize(&s[i]);
	}
	is_int(write1(st, NULL, 0, s, (size_t)first, NULL), 0,
	       "%d spans, every column set or absent every %d", first, period);
	is_int(write1(st, NULL, 0, s + first, (size_t)(n - first), NULL), 0,
	       "%d more in the next transaction", n - first);
	is_int(store__trace(r, 0x1111, lo, &t), 1, "their trace");
	if (t.n != 1 || t.v[0].n != (size_t)n) {
		ok(0, "%d spans back (%zu)", n, t.n ? t.v[0].n : 0);
		store_traces_free(&t);
		return;
	}
	for (size_t j = 0; j < (size_t)n; j++) {
		const struct zspan *g = &t.v[0].spans[j];
		const struct zspan *w = g->id >= 100 && g->id < 100 + (uint64_t)n ? &s[g->id - 100] : NULL;

		if (!w || g->parent_id != w->parent_id || g->kind != w->kind ||
		    g->timestamp_us != w->timestamp_us || g->duration_us != w->duration_us ||
		    g->debug != w->debug || g->error != w->error || g->ntags != w->ntags ||
		    !zs_str_eq(g->name, w->name) || !zs_str_eq(g->local.service, w->local.service) ||
		    !zs_str_eq(g->remote.service, w->remote.service) ||
		    strcmp(g->local.ipv4, w->local.ipv4) || strcmp(g->remote.ipv6, w->remote.ipv6) ||
		    g->local.port != w->local.port || g->remote.port != w->remote.port) {
			diag("span %" PRIu64 " read back differs", g->id);
			bad++;
		}
	}
	is_int(bad, 0, "each span's columns as written (none left from the row bound before)");
	store_traces_free(&t);
}

static void dedupe(struct store *st, struct store_reader *r)
{
	struct zspan s[3] = { span(2, 1, 0, "api", "a", 2000000, 10),
			      span(2, 2, 1, "api", "b", 2000001, 5),
			      span(3, 1, 0, "api", "c", 3000000, 7) };
	struct store_batch b;
	uint64_t last = 99;

	is_int(store__agent_hello(st, AGENT, "h1", "0.1", &last), 0, "HELLO of a new agent");
	is_u64(last, 0, "new agent: last_seq 0");
	is_int(write1(st, AGENT, 1, s, 2, &b), 0, "batch 1");
	ok(!b.duplicate && b.stored == 2, "batch 1 stored 2");
	is_int(write1(st, AGENT, 1, s, 2, &b), 0, "batch 1 again");
	ok(b.duplicate && b.stored == 0, "batch 1 again: duplicate, nothing stored");
	is_int(trace_len(r, 0x1111, 2), 2, "trace 2 has its 2 spans once");
	is_int(write1(st, AGENT, 5, s + 2, 1, &b), 0, "batch 5 (a gap is fine)");
	ok(!b.duplicate, "batch 5 stored");
	is_int(write1(st, AGENT, 4, s + 2, 1, &b), 0, "batch 4 after 5");
	ok(b.duplicate, "batch 4 after 5 is a duplicate (seq <= last_seq)");
	is_int(trace_len(r, 0x1111, 3), 1, "trace 3 once");
	store__agent_last_seq(st, AGENT, &last);
	is_u64(last, 5, "last_seq 5");
	is_int(store__agent_hello(st, AGENT, "h1", "0.1", &last), 0, "HELLO again");
	is_u64(last, 5, "WELCOME would say 5");
	is_int(store__agent_stats(st, AGENT, "{\"rings\":2}"), 0, "STATS kept");

	/* one transaction for several batches; a duplicate inside it */
	{
		struct zspan s4 = span(4, 1, 0, "api", "d", 4000000, 1);
		struct store_batch b1 = { .agent_id = AGENT, .seq = 6, .spans = &s4, .nspans = 1 };
		struct store_batch b2 = { .agent_id = AGENT, .seq = 6, .spans = &s4, .nspans = 1 };
		struct store_batch *bs[] = { &b1, &b2 };
		char err[128];

		is_int(store__write(st, bs, 2, err, sizeof(err)), 0, "group of two batches");
		ok(!b1.duplicate && b2.duplicate, "the same seq twice in one group: stored once");
		is_int(trace_len(r, 0x1111, 4), 1, "trace 4 once");
	}
}

static void partial_across_batches(struct store *st, struct store_reader *r)
{
	struct zs_part p[4];
	struct store_batch b1 = { .agent_id = AGENT, .seq = 10, .parts = p, .nparts = 2 };
	struct store_batch b2 = { .agent_id = AGENT, .seq = 11, .parts = p + 2, .nparts = 2 };
	struct store_batch *bp;
	struct store_traces t = { 0 };
	const char *names[] = { "cs", "sr", "ss", "cr" };
	const char *svcs[] = { "web", "db", "db", "web" };
	char err[128];

	for (int i = 0; i < 4; i++) {
		p[i] = (struct zs_part){ .trace_lo = 50, .trace_hi = 0x1111, .id = 7,
					 .name = ZS_STR("select"), .ts_us = 5000000 + i * 100 };
		p[i].key = (struct zs_str){ names[i], 2 };
		p[i].local.service = (struct zs_str){ svcs[i], (uint32_t)strlen(svcs[i]) };
	}
	bp = &b1;
	is_int(store__write(st, &bp, 1, err, sizeof(err)), 0, "parts cs, sr");
	is_int(b1.stored, 2, "2 parts stored");
	store__trace(r, 0x1111, 50, &t);
	ok(t.n == 1 && t.v[0].n == 2, "after cs+sr: client and server spans exist");
	store_traces_free(&t);
	bp = &b2;
	is_int(store__write(st, &bp, 1, err, sizeof(err)), 0, "parts ss, cr (next batch)");
	store__trace(r, 0x1111, 50, &t);
	ok(t.n == 1 && t.v[0].n == 2, "after all four: still exactly two spans (rebuilt, not added)");
	for (size_t i = 0; t.n && i < t.v[0].n; i++) {
		const struct zspan *s = &t.v[0].spans[i];

		if (s->kind == SPAN_KIND_CLIENT)
			ok(s->timestamp_us == 5000000 && s->duration_us == 300,
			   "merged client: cs..cr = 300 us");
		else
			ok(s->kind == SPAN_KIND_SERVER && s->shared && s->duration_us == 100,
			   "merged server: sr..ss = 100 us, shared");
	}
	store_traces_free(&t);
}

static void names_and_search(struct store *st, struct store_reader *r)
{
	struct store_names n = { 0 };
	struct store_traces t = { 0 };
	struct store_query q = { .end_ts_ms = 10000, .lookback_ms = 10000, .limit = 10 };
	struct zspan s[3] = { span(60, 1, 0, "search", "find", 7000000, 100),
			      span(61, 1, 0, "search", "find", 8000000, 900),
			      span(62, 1, 0, "search", "scan", 9000000, 50) };

	s[1].remote.service = (struct zs_str)ZS_STR("index");
	is_int(write1(st, NULL, 0, s, 3, NULL), 0, "three traces of 'search'");
	is_int(store__services(r, &n), 0, "services");
	ok(n.n >= 4 && zs_str_eqc(n.v[0], "api"), "services sorted (api first of %zu)", n.n);
	store_names_free(&n);
	store__span_names(r, "search", &n);
	ok(n.n == 2 && zs_str_eqc(n.v[0], "find") && zs_str_eqc(n.v[1], "scan"),
	   "span names of search: find, scan");
	store_names_free(&n);
	store__remote_services(r, "search", &n);
	ok(n.n == 1 && zs_str_eqc(n.v[0], "index"), "remote services of search: index");
	store_names_free(&n);

	q.service = "search";
	is_int(store__traces(r, &q, &t), 0, "query by service");
	ok(t.n == 3 && t.v[0].spans[0].trace_lo == 62 && t.v[2].spans[0].trace_lo == 60,
	   "three traces, newest first");
	store_traces_free(&t);
	q.limit = 2;
	store__traces(r, &q, &t);
	ok(t.n == 2 && t.v[0].spans[0].trace_lo == 62, "limit 2: the two newest");
	store_traces_free(&t);
	q.limit = 10;
	q.span_name = "find";
	q.min_duration_us = 500;
	store__traces(r, &q, &t);
	ok(t.n == 1 && t.v[0].spans[0].trace_lo == 61, "spanName + minDuration");
	store_traces_free(&t);
	q.span_name = NULL;
	q.min_duration_us = 0;
	q.end_ts_ms = 8500;
	q.lookback_ms = 1000;
	store__traces(r, &q, &t);
	ok(t.n == 1 && t.v[0].spans[0].trace_lo == 61, "endTs/lookback window");
	store_traces_free(&t);
}

static void retention(struct store *st, struct store_reader *r)
{
	uint64_t now = clock_realtime_ns() / 1000;
	struct zspan s[2] = { span(70, 1, 0, "old", "x", now - 3600000000ull, 1),
			      span(71, 1, 0, "new", "y", now, 1) };
	struct store_names n = { 0 };
	struct store_counts c0, c1;
	int total = 0, k;

	write1(st, NULL, 0, s, 2, NULL);
	store__counts(r, &c0);
	while ((k = store__retain(st, now - 60000000ull, 2)) > 0)
		total += k;
	is_int(k, 0, "retention ends with 0");
	store__counts(r, &c1);
	ok(total > 0 && c1.spans + c1.parts == c0.spans + c0.parts - (uint64_t)total,
	   "retention deleted %d rows in chunks of 2", total);
	is_int(trace_len(r, 0x1111, 70), 0, "hour-old span gone");
	is_int(trace_len(r, 0x1111, 71), 1, "new span kept");
	store__services(r, &n);
	ok(n.n == 1 && zs_str_eqc(n.v[0], "new"), "names of deleted spans pruned (left: new)");
	store_names_free(&n);
}

static int has_trace(const struct store_traces *t, uint64_t lo)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].n && t->v[i].spans[0].trace_lo == lo)
			return 1;
	return 0;
}

/* Zipkin's QueryRequest semantics through the Bloom prefilter: every term
 * is tested against the spans of serviceName only. */
static void search_terms(struct store *st, struct store_reader *r)
{
	struct zs_tag tg[] = { { ZS_STR("http.method"), ZS_STR("GET") } };
	struct zs_annotation an[] = { { 20000100, ZS_STR("retry") } };
	struct zspan s[4] = { span(80, 1, 0, "front", "get", 20000000, 500),
			      span(80, 2, 1, "back", "load", 20000010, 400),
			      span(81, 1, 0, "front", "get", 21000000, 50),
			      span(81, 2, 1, "back", "load", 21000010, 40) };
	struct store_query q = { .end_ts_ms = 30000, .lookback_ms = 15000, .limit = 10 };
	struct store_traces t = { 0 };
	char aq[64];

	s[1].tags = tg;
	s[1].ntags = 1;
	s[1].annotations = an;
	s[1].nannotations = 1;
	s[1].remote.service = (struct zs_str)ZS_STR("disk");
	is_int(write1(st, NULL, 0, s, 4, NULL), 0, "two traces front -> back");

	q.service = "back";
	snprintf(aq, sizeof(aq), "http.method=GET and retry");
	store_query_parse_aq(&q, aq, NULL, 0);
	store__traces(r, &q, &t);
	ok(t.n == 1 && has_trace(&t, 80), "back + tag key=value + annotation: trace 80");
	store_traces_free(&t);
	q.service = "front";
	store__traces(r, &q, &t);
	is_int((int)t.n, 0, "the same terms on front: none (terms bind to the service)");
	store_traces_free(&t);
	q.service = NULL;
	store__traces(r, &q, &t);
	ok(t.n == 1 && has_trace(&t, 80), "the same terms on any service: trace 80");
	store_traces_free(&t);
	snprintf(aq, sizeof(aq), "http.method=POST");
	store_query_parse_aq(&q, aq, NULL, 0);
	store__traces(r, &q, &t);
	is_int((int)t.n, 0, "http.method=POST: none");
	store_traces_free(&t);
	snprintf(aq, sizeof(aq), "http.method");
	store_query_parse_aq(&q, aq, NULL, 0);
	q.service = "back";
	store__traces(r, &q, &t);
	ok(t.n == 1 && has_trace(&t, 80), "bare tag key");
	store_traces_free(&t);
	q.naq = 0;
	q.remote_service = "disk";
	store__traces(r, &q, &t);
	ok(t.n == 1 && has_trace(&t, 80), "remoteServiceName");
	store_traces_free(&t);
	q.remote_service = NULL;
	q.span_name = "load";
	q.min_duration_us = 100;
	store__traces(r, &q, &t);
	ok(t.n == 1 && has_trace(&t, 80), "back/load with minDuration 100: trace 80 only");
	store_traces_free(&t);
	q.service = "front";
	q.span_name = NULL;
	q.min_duration_us = 450;
	q.max_duration_us = 480;
	store__traces(r, &q, &t);
	is_int((int)t.n, 0, "front 450..480 us: none (no span of front that long)");
	store_traces_free(&t);
}

/* A trace whose spans arrive in several transactions: the trace row
 * follows (span count, timestamp from the root once it arrives). */
static void trace_across_batches(struct store *st, struct store_reader *r)
{
	struct zspan child = span(90, 2, 1, "leaf", "work", 40000000, 10);
	struct zspan root = span(90, 1, 0, "top", "req", 39000000, 2000000);
	struct store_query q = { .end_ts_ms = 39500, .lookback_ms = 1000, .limit = 10 };
	struct store_traces t = { 0 };

	is_int(write1(st, NULL, 0, &child, 1, NULL), 0, "child first");
	q.service = "leaf";
	store__traces(r, &q, &t);
	is_int((int)t.n, 0, "window before the child: nothing yet");
	store_traces_free(&t);
	is_int(write1(st, NULL, 0, &root, 1, NULL), 0, "root in a later transaction");
	is_int(trace_len(r, 0x1111, 90), 2, "one trace of 2 spans");
	store__traces(r, &q, &t);
	ok(t.n == 1 && t.v[0].ts_us == 39000000,
	   "found by the root's timestamp, with a span of leaf");
	store_traces_free(&t);
	q.end_ts_ms = 40500;
	store__traces(r, &q, &t);
	is_int((int)t.n, 0, "not by the child's timestamp any more (Zipkin: the root's)");
	store_traces_free(&t);
}

/*
 * A batch interleaving the spans of 16 new traces (as an SDK's batch
 * does) and of one trace stored before: every row gets the trace seq and
 * row number one span after the other would give it (seqs by first
 * appearance, numbers by arrival within the trace), and the rows are
 * written in key order: the spans B-tree grows at its end, its leaf
 * pages numbered in key order.  Written in arrival order, each row went
 * into the middle of the tree behind its trace's last row and SQLite
 * split pages there (16 of 69 leaf pages out of order here).
 */
static void interleaved_batch(void)
{
	enum { NT = 16, PER = 64, N = NT * PER + 1 };
	static struct zspan s[N];
	static struct zs_tag tags[N][4];
	struct zspan old = span(5000, 1, 0, "svc", "old", 1000, 10);
	char p[160], err[256];
	struct store *st;
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	int64_t old_seq = 0;
	size_t bad = 0, rows = 0, i = 0;
	int leaves = -1, back = 0;

	snprintf(p, sizeof(p), "%s/interleaved.db", dir);
	st = store__open(p, 0, err, sizeof(err));
	ok(st != NULL, "interleaved: a new store opens: %s", st ? p : err);
	if (!st)
		return;
	is_int(write1(st, NULL, 0, &old, 1, NULL), 0, "interleaved: a trace stored before");
	for (size_t k = 0; k < N - 1; k++) {
		s[k] = span(6000 + k % NT, 100 + k, k < NT ? 0 : 100 + k % NT, "svc", "get /cart",
			    2000 + k, 5);
		for (int j = 0; j < 4; j++)
			tags[k][j] = (struct zs_tag){ { "http.url.with.a.long.key", 24 },
						      { "https://shop.example/api/cart?x=1&y=2&z=3",
							41 } };
		tags[k][0].key = (struct zs_str){ "a.key", 5 };
		tags[k][1].key = (struct zs_str){ "b.key", 5 };
		tags[k][2].key = (struct zs_str){ "c.key", 5 };
		tags[k][3].key = (struct zs_str){ "d.key", 5 };
		s[k].tags = tags[k];
		s[k].ntags = 4;
	}
	/* the old trace's second span, in the middle of the batch */
	memmove(&s[N / 2 + 1], &s[N / 2], (N - 1 - N / 2) * sizeof(s[0]));
	s[N / 2] = span(5000, 2, 1, "svc", "old", 1001, 10);
	is_int(write1(st, NULL, 0, s, N, NULL), 0, "interleaved: one batch of %d spans", N);
	store__close(st);

	if (sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "SELECT t.trace_lo, t.seq, s.no, s.id FROM spans s"
			       " JOIN traces t ON t.seq = s.trace_seq ORDER BY t.trace_lo, s.no",
			       -1, &q, NULL) != SQLITE_OK) {
		ok(0, "interleaved: read the file: %s", sqlite3_errmsg(db));
		sqlite3_close(db);
		return;
	}
	while (sqlite3_step(q) == SQLITE_ROW) {
		uint64_t lo = (uint64_t)sqlite3_column_int64(q, 0);
		int64_t seq = sqlite3_column_int64(q, 1), no = sqlite3_column_int64(q, 2);
		uint64_t id = (uint64_t)sqlite3_column_int64(q, 3);

		rows++;
		if (lo == 5000) {
			if (!old_seq)
				old_seq = seq;
			bad += seq != old_seq || id != (uint64_t)no + 1;
			continue;
		}
		/* trace 6000 + t: seq old + 1 + t, span k = t + NT * no */
		bad += seq != old_seq + 1 + (int64_t)(lo - 6000) ||
		       id != 100 + (lo - 6000) + (uint64_t)NT * (uint64_t)no;
		i++;
	}
	sqlite3_finalize(q);
	is_int((int)rows, N + 1, "interleaved: every row there");
	is_int((int)bad, 0, "interleaved: seqs by first appearance, row numbers by arrival");
	/* the leaf pages in key order: each one a page number lower than the
	 * one before it is a page split off in the middle of the tree */
	if (sqlite3_prepare_v2(db,
			       "SELECT pageno FROM dbstat WHERE name = 'span_rows'"
			       " AND pagetype = 'leaf' ORDER BY path", -1, &q, NULL) == SQLITE_OK) {
		int64_t prev = 0;

		leaves = 0;
		while (sqlite3_step(q) == SQLITE_ROW) {
			int64_t pg = sqlite3_column_int64(q, 0);

			back += pg < prev;
			prev = pg;
			leaves++;
		}
	}
	sqlite3_finalize(q);
	if (leaves < 0)
		diag("no dbstat: %s", sqlite3_errmsg(db));
	ok(leaves > 0 && back <= 1, "interleaved: rows appended in key order: %d of %d leaf pages"
	   " out of order", back, leaves);
	sqlite3_close(db);
}

static const char v1_schema[] =
	"CREATE TABLE spans ( trace_hi INTEGER NOT NULL, trace_lo INTEGER NOT"
	" NULL, id INTEGER NOT NULL, parent_id INTEGER, kind INTEGER NOT"
	" NULL, name TEXT, local_service TEXT, local_ipv4 TEXT, local_ipv6"
	" TEXT, local_port INTEGER, remote_service TEXT, remote_ipv4 TEXT,"
	" remote_ipv6 TEXT, remote_port INTEGER, start_us INTEGER,"
	" duration_us INTEGER, shared INTEGER NOT NULL DEFAULT 0, debug"
	" INTEGER NOT NULL DEFAULT 0, error INTEGER NOT NULL DEFAULT 0,"
	" annotations TEXT, tags TEXT, origin INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX spans_trace ON spans (trace_hi, trace_lo, id);"
	"CREATE INDEX spans_service_ts ON spans (local_service, start_us);"
	"CREATE INDEX spans_ts ON spans (start_us);"
	"CREATE TABLE span_parts ( trace_hi INTEGER NOT NULL, trace_lo INTEGER"
	" NOT NULL, id INTEGER NOT NULL, parent_id INTEGER, name TEXT,"
	" service TEXT, ipv4 TEXT, ipv6 TEXT, port INTEGER, remote_service"
	" TEXT, remote_ipv4 TEXT, remote_ipv6 TEXT, remote_port INTEGER,"
	" debug INTEGER NOT NULL DEFAULT 0, is_tag INTEGER NOT NULL, ts_us"
	" INTEGER, key TEXT NOT NULL, value TEXT);"
	"CREATE INDEX span_parts_span ON span_parts (trace_hi, trace_lo, id);"
	"CREATE INDEX span_parts_ts ON span_parts (ts_us);"
	"CREATE TABLE services ( name TEXT PRIMARY KEY) WITHOUT ROWID;"
	"CREATE TABLE span_names ( service TEXT NOT NULL, name TEXT NOT NULL,"
	" PRIMARY KEY (service, name)) WITHOUT ROWID;"
	"CREATE TABLE remote_services ( service TEXT NOT NULL, remote TEXT NOT"
	" NULL, PRIMARY KEY (service, remote)) WITHOUT ROWID;"
	"CREATE TABLE agents ( agent_id TEXT PRIMARY KEY, host TEXT, version"
	" TEXT, last_seq INTEGER NOT NULL DEFAULT 0, first_seen_us INTEGER,"
	" last_seen_us INTEGER, batches INTEGER NOT NULL DEFAULT 0, spans"
	" INTEGER NOT NULL DEFAULT 0, stats TEXT, stats_us INTEGER) WITHOUT"
	" ROWID;";

/* A version 1 file (as fay 0.1 wrote it) is migrated on open. */
static void migrate_v1(void)
{
	char p[160], err[400];
	struct store_traces t = { 0 };
	struct store_query q = { .service = "old-api", .end_ts_ms = 3000, .lookback_ms = 3000,
				 .limit = 10 };
	struct store_counts c;
	struct store_reader *r;
	struct store *st;
	sqlite3 *db;
	uint64_t last = 0;
	int v = 0;

	snprintf(p, sizeof(p), "%s/v1.db", dir);
	if (sqlite3_open(p, &db) != SQLITE_OK ||
	    sqlite3_exec(db, v1_schema, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db,
		"PRAGMA journal_mode = WAL; PRAGMA application_id = 1178687827;" /* "FAYS" */
		"PRAGMA user_version = 1;"
		"INSERT INTO spans (trace_hi, trace_lo, id, parent_id, kind, name, local_service,"
		" local_ipv4, start_us, duration_us, annotations, tags) VALUES"
		" (0, 77, 1, NULL, 2, 'get', 'old-api', '10.0.0.1', 1000000, 900,"
		"  '[{\"timestamp\":1000100,\"value\":\"queued\"}]', '{\"op\":\"read\",\"shard\":\"3\"}'),"
		" (0, 77, 2, 1, 1, 'call', 'old-api', NULL, 1000200, 300, NULL, '{\"error\":\"x\"}');"
		"INSERT INTO spans (trace_hi, trace_lo, id, kind, name, local_service, start_us,"
		" duration_us, origin) VALUES (5, 78, 9, 2, 'sel', 'db', 2000000, 50, 1);"
		"INSERT INTO span_parts (trace_hi, trace_lo, id, name, service, is_tag, ts_us, key)"
		" VALUES (5, 78, 9, 'sel', 'db', 0, 2000000, 'sr'), (5, 78, 9, 'sel', 'db', 0, 2000050, 'ss');"
		"INSERT INTO services VALUES ('old-api'), ('db');"
		"INSERT INTO agents (agent_id, last_seq) VALUES ('00112233445566778899aabbccddeeff', 7);",
		NULL, NULL, NULL) != SQLITE_OK) {
		ok(0, "make a version 1 file: %s", sqlite3_errmsg(db));
		sqlite3_close(db);
		return;
	}
	sqlite3_close(db);
	st = store__open(p, STORE_F_READONLY, err, sizeof(err));
	ok(!st && strstr(err, "needs a migration"), "read-only open of v1 refused: %s", err);
	st = store__open(p, 0, err, sizeof(err));
	ok(st != NULL, "version 1 file opens (migrated): %s", st ? p : err);
	if (!st)
		return;
	r = store__reader_new(st);
	store__counts(r, &c);
	ok(c.spans == 3 && c.parts == 2, "3 spans, 2 parts after the migration");
	store__trace(r, 0, 77, &t);
	if (t.n == 1 && t.v[0].n == 2) {
		const struct zspan *g = &t.v[0].spans[0];

		ok(g->id == 1 && g->nannotations == 1 && zs_str_eqc(g->annotations[0].value, "queued") &&
		   g->annotations[0].ts_us == 1000100, "annotation kept");
		ok(g->ntags == 2 && zs_str_eqc(g->tags[0].key, "op") && zs_str_eqc(g->tags[1].value, "3"),
		   "tags kept");
		ok(!strcmp(g->local.ipv4, "10.0.0.1") && g->duration_us == 900, "columns kept");
		ok(t.v[0].spans[1].error && t.v[0].spans[1].parent_id == 1, "child and its error tag");
	} else {
		ok(0, "trace 77 has 2 spans (got %zu traces)", t.n);
	}
	store_traces_free(&t);
	store__traces(r, &q, &t);
	ok(t.n == 1 && t.v[0].n == 2, "search by service finds the migrated trace");
	store_traces_free(&t);
	store__agent_last_seq(st, AGENT, &last);
	is_u64(last, 7, "agent last_seq kept (dedupe goes on)");
	{
		struct zs_part pt = { .trace_hi = 5, .trace_lo = 78, .id = 9, .name = ZS_STR("sel"),
				      .ts_us = 1999000, .key = ZS_STR("cs") };
		struct store_batch b = { .parts = &pt, .nparts = 1 };
		struct store_batch *bp = &b;

		pt.local.service = (struct zs_str)ZS_STR("web");
		is_int(store__write(st, &bp, 1, err, sizeof(err)), 0, "a part joins migrated parts");
		store__trace(r, 5, 78, &t);
		ok(t.n == 1 && t.v[0].n == 2, "merged with the migrated sr/ss: client + server");
		store_traces_free(&t);
	}
	store__reader_free(r);
	store__close(st);
	if (sqlite3_open(p, &db) == SQLITE_OK) {
		sqlite3_stmt *s;

		if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK &&
		    sqlite3_step(s) == SQLITE_ROW)
			v = sqlite3_column_int(s, 0);
		sqlite3_finalize(s);
	}
	sqlite3_close(db);
	is_int(v, 5, "user_version is 5 now (1 -> 2 -> 3 -> 4 -> 5)");
}

/* Run sql on the file p on a connection of its own; SQLite rc. */
static int sql_on(const char *p, const char *sql)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open(p, &db);

	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		diag("%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
	return rc;
}

/* The integer sql answers on the file p, or -1. */
static int64_t int_on(const char *p, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	int64_t v = -1;

	if (sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return v;
}

/*
 * Schema 5 keys a span row by trace_seq << 20 | no.  A trace whose next
 * number reaches 2^20 takes no more spans: the write succeeds, the spans
 * beyond are not stored (not counted in stored), other traces of the
 * same batch are.  Trace seq 2^43 is never given: a write that needs a
 * new trace fails with a reason that says so, one to an existing trace
 * goes on.  The number is set near the limit through SQL (writing a
 * million spans would take a minute under ASan).
 */
static void span_key_limits(void)
{
	struct zspan s[6];
	struct store_batch b;
	struct store_reader *r;
	struct store *st;
	char p[160], err[400];

	snprintf(p, sizeof(p), "%s/limits.db", dir);
	st = store__open(p, 0, err, sizeof(err));
	ok(st != NULL, "limits: a new store opens: %s", st ? p : err);
	if (!st)
		return;
	s[0] = span(7000, 1, 0, "svc", "root", 1000, 10);
	is_int(write1(st, NULL, 0, s, 1, NULL), 0, "limits: trace 7000's first span");
	is_int(sql_on(p, "UPDATE traces SET next_no = 1048574 WHERE trace_lo = 7000"), SQLITE_OK,
	       "limits: trace 7000's next number set to 2^20 - 2");
	for (int i = 0; i < 4; i++)
		s[i] = span(7000, 2 + (uint64_t)i, 1, "svc", "child", 1001 + (uint64_t)i, 5);
	s[4] = span(7001, 1, 0, "svc", "other", 1100, 5);
	is_int(write1(st, NULL, 0, s, 5, &b), 0, "limits: a batch of 4 spans of trace 7000 and 1 of 7001 written");
	is_int((int)b.stored, 3, "limits: 3 stored (2 of trace 7000 fit, 7001's)");
	r = store__reader_new(st);
	is_int(r ? (int)trace_len(r, 0x1111, 7000) : -1, 3, "limits: trace 7000 reads back 3 spans");
	is_int(r ? (int)trace_len(r, 0x1111, 7001) : -1, 1, "limits: trace 7001 reads back 1 span");
	is_int((int)int_on(p, "SELECT max(no) FROM spans WHERE trace_seq ="
			   " (SELECT seq FROM traces WHERE trace_lo = 7000)"), 1048575,
	       "limits: the last span stored is number 2^20 - 1 (the view's no)");
	is_int((int)int_on(p, "SELECT count(*) FROM spans WHERE trace_seq ="
			   " (SELECT seq FROM traces WHERE trace_lo = 7001)"), 1,
	       "limits: trace 7001's row is under its own seq, not 7000's");
	s[0] = span(7000, 9, 1, "svc", "late", 1009, 5);
	is_int(write1(st, NULL, 0, s, 1, &b), 0, "limits: one more span of the full trace: the write succeeds");
	is_int((int)b.stored, 0, "limits: ... and stores nothing");
	store__reader_free(r);
	store__close(st);

	/* the last seq the key holds, given to a trace */
	is_int(sql_on(p, "INSERT INTO traces (seq, trace_hi, trace_lo, ts_us, end_us, max_dur_us,"
		      " nspans, next_no, error, bloom) VALUES ((1 << 43) - 1, 0, 7002, 0, 1, 0, 0, 0, 0,"
		      " zeroblob(64))"), SQLITE_OK, "limits: a trace with seq 2^43 - 1");
	st = store__open(p, 0, err, sizeof(err));
	ok(st != NULL, "limits: reopens: %s", st ? p : err);
	if (!st)
		return;
	s[0] = span(7003, 1, 0, "svc", "new", 1200, 5);
	{
		struct store_batch nb = { .spans = s, .nspans = 1 };
		struct store_batch *bp = &nb;

		int ret;

		err[0] = '\0';
		ret = store__write(st, &bp, 1, err, sizeof(err));
		ok(ret < 0 && strstr(err, "trace numbers exhausted") && strstr(err, p),
		   "limits: a new trace past seq 2^43 - 1 fails, saying why: %s", err);
	}
	s[0] = span(7001, 2, 1, "svc", "more", 1101, 5);
	is_int(write1(st, NULL, 0, s, 1, &b), 0, "limits: a span of an existing trace is still stored");
	is_int((int)b.stored, 1, "limits: ... stored");
	store__close(st);
}

static int file_sha(const char *p, char *out, size_t len)
{
	char cmd[256];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "sha256sum '%s'", p);
	f = popen(cmd, "r");
	if (!f || !fgets(out, (int)len, f))
		return -1;
	return pclose(f);
}

static void not_a_store(void)
{
	char p[160], err[400], cmd[512], h0[128] = "", h1[128] = "";
	struct store *st;
	int fd;

	snprintf(p, sizeof(p), "%s/garbage.db", dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	for (int i = 0; i < 256; i++)
		if (write(fd, "this is not a database, it is a text file\n", 43) != 43)
			break;
	close(fd);
	file_sha(p, h0, sizeof(h0));
	errno = 0;
	st = store__open(p, 0, err, sizeof(err));
	ok(!st && errno, "garbage file refused (errno %d)", errno);
	ok(strstr(err, p) && strstr(err, "not an SQLite database"), "message names the file: %s", err);
	file_sha(p, h1, sizeof(h1));
	ok(h0[0] && !strcmp(h0, h1), "garbage file unchanged");
	snprintf(cmd, sizeof(cmd), "%s-wal", p);
	ok(access(cmd, F_OK) != 0, "no -wal created beside it");

	/* another program's SQLite database */
	snprintf(p, sizeof(p), "%s/other.db", dir);
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'CREATE TABLE t(x); INSERT INTO t VALUES(1);'", p);
	if (system(cmd) != 0) {
		ok(1, "# skip: no sqlite3 CLI for the other-program case");
	} else {
		st = store__open(p, 0, err, sizeof(err));
		ok(!st && strstr(err, "another program") && strstr(err, p),
		   "another program's database refused: %s", err);
	}

	/* a store from a newer fay */
	snprintf(p, sizeof(p), "%s/newer.db", dir);
	st = store__open(p, 0, err, sizeof(err));
	store__close(st);
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'PRAGMA user_version = 99;'", p);
	if (system(cmd) == 0) {
		st = store__open(p, 0, err, sizeof(err));
		ok(!st && strstr(err, "newer"), "newer schema refused: %s", err);
	}

	/* a fay store whose pages were overwritten */
	snprintf(p, sizeof(p), "%s/corrupt.db", dir);
	st = store__open(p, 0, err, sizeof(err));
	store__close(st);
	fd = open(p, O_WRONLY);
	{
		char junk[4096];

		memset(junk, 0xa5, sizeof(junk));
		if (pwrite(fd, junk, sizeof(junk), 4096) != (ssize_t)sizeof(junk) ||
		    pwrite(fd, junk, 80, 20) != 80)
			diag("pwrite failed");
	}
	close(fd);
	st = store__open(p, 0, err, sizeof(err));
	ok(!st && strstr(err, p), "corrupt fay store refused: %s", err);
	store__close(st);

	snprintf(p, sizeof(p), "%s/no/such/dir/fay.db", dir);
	st = store__open(p, 0, err, sizeof(err));
	ok(!st && strstr(err, "cannot open"), "missing directory: %s", err);
}

int main(void)
{
	struct store *st;
	struct store_reader *r;
	char err[400];

	snprintf(dir, sizeof(dir), "/tmp/fay-store-test.XXXXXX");
	if (!mkdtemp(dir))
		skip_all("no temp dir");
	snprintf(path, sizeof(path), "%s/fay.db", dir);
	st = store__open(path, 0, err, sizeof(err));
	ok(st != NULL, "new store opens: %s", st ? path : err);
	if (!st)
		return test_done();
	is_int(store__schema_version(), 5, "schema version 5");
	r = store__reader_new(st);
	ok(r != NULL, "reader on its own connection");

	roundtrip(st, r);
	columns_alternate(st, r, 0x5151, 8, 2, 5);     /* one-row INSERTs */
	columns_alternate(st, r, 0x5152, 42, 3, 21);   /* eight-row INSERTs, and the rest */
	dedupe(st, r);
	partial_across_batches(st, r);
	names_and_search(st, r);
	search_terms(st, r);
	trace_across_batches(st, r);
	retention(st, r);

	store__reader_free(r);
	store__close(st);
	st = store__open(path, STORE_F_READONLY, err, sizeof(err));
	ok(st != NULL, "reopens read-only");
	r = st ? store__reader_new(st) : NULL;
	is_int(r ? trace_len(r, 0x1111, 71) : 0, 1, "data still there after reopening");
	store__reader_free(r);
	store__close(st);

	not_a_store();
	migrate_v1();
	interleaved_batch();
	span_key_limits();

	zarena_reset(&A);
	snprintf(err, sizeof(err), "rm -rf '%s'", dir);
	if (system(err))
		diag("cleanup failed");
	return test_done();
}
