// SPDX-License-Identifier: MIT
/*
 * Partial states on the wire: every aggregate's state survives
 * encode -> decode bit for bit; merging decoded partials equals merging
 * the originals (so a tree of any shape gives the same answer); every
 * truncation and corruption of an encoding is refused with a reason;
 * a partial of another shape or format version is refused by name; a
 * 100-group count costs well under 2 KiB.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "query/partial.h"
#include "query/query.h"
#include "test.h"

static struct query *compile(const char *text, const struct plan **p)
{
	struct query_opts o = { .sz = sizeof(o), .tracefs = "tests/golden/tracefs" };
	struct query *q = query_new("<t>", text, strlen(text), &o);

	if (q && query_plan(q, p))
		*p = NULL;
	return q;
}

#define next test_xorshift

/* A value as the probes would build it: per-event updates. */
static void fill(const struct plan *p, unsigned char *val, int events)
{
	memset(val, 0, (size_t)p->value_size);
	for (int e = 0; e < events; e++) {
		int64_t v = (int64_t)(next() % 100000) - 50;

		for (int i = 0; i < p->naggrs; i++)
			if (p->aggrs[i].share < 0)	/* a shared sketch once */
				aggr_update(&p->aggrs[i].desc, val + p->aggrs[i].offset, v);
	}
}

static const char *Q_ALL =
	"from s in syscall(\"read\") group s by { c: s.comm, p: s.pid } into g select {"
	" n: g.count(), t: g.sum(s.ret), lo: g.min(s.ret), hi: g.max(s.ret),"
	" a: g.avg(s.ret), h: g.hist(s.ret), l: g.lhist(s.ret, 0, 1000, 10),"
	" q: g.quantile(s.ret, 0.99), d: g.distinct(s.ret) }";

static void test_roundtrip(void)
{
	const struct plan *p;
	struct query *q = compile(Q_ALL, &p);
	unsigned char *key, *val, *key2, *val2;
	struct wbuf w = { 0 };
	struct rbuf r;
	char why[256];
	bool same = true;

	ok(p != NULL, "the query with every aggregate plans");
	if (!p) {
		query_free(q);
		return;
	}
	key = calloc(1, (size_t)p->key_size);
	key2 = calloc(1, (size_t)p->key_size);
	val = calloc(1, (size_t)p->value_size);
	val2 = calloc(1, (size_t)p->value_size);
	for (int round = 0; round < 200; round++) {
		memset(key, 0, (size_t)p->key_size);
		snprintf((char *)key + p->keys[0].offset, (size_t)p->keys[0].size, "proc%d", round);
		memcpy(key + p->keys[1].offset, &round, sizeof(round));
		fill(p, val, round % 7 ? (int)(next() % 500) : 0);
		w.len = 0;
		partial_row_encode(p, key, val, &w);
		rbuf_init(&r, w.p, w.len);
		if (partial_row_decode(p, &r, key2, val2) || !rbuf_done(&r) ||
		    memcmp(key, key2, (size_t)p->key_size) ||
		    memcmp(val, val2, (size_t)p->value_size)) {
			same = false;
			break;
		}
	}
	ok(same, "200 rows of every aggregate: decode(encode(x)) == x bit for bit");

	w.len = 0;
	partial_shape_encode(p, &w);
	rbuf_init(&r, w.p, w.len);
	is_int(partial_shape_check(p, &r, why, sizeof(why)), 0, "own shape accepted");
	ok(rbuf_done(&r), "shape read to its end");

	/* every truncation of a row is refused, never read past */
	fill(p, val, 300);
	w.len = 0;
	partial_row_encode(p, key, val, &w);
	same = true;
	for (size_t cut = 0; cut < w.len; cut++) {
		rbuf_init(&r, w.p, cut);
		if (!partial_row_decode(p, &r, key2, val2) || !strstr(r.why, "at byte")) {
			same = false;
			break;
		}
	}
	ok(same, "every one of %zu truncations refused with a reason", w.len);
	wbuf_free(&w);
	free(key);
	free(key2);
	free(val);
	free(val2);
	query_free(q);
}

static void test_corrupt(void)
{
	const struct plan *p;
	struct query *q = compile(Q_ALL, &p);
	unsigned char *key = calloc(1, (size_t)p->key_size), *val = calloc(1, (size_t)p->value_size);
	struct wbuf w = { 0 };
	struct rbuf r;
	int refused = 0, fine = 0, n;

	fill(p, val, 50);
	partial_row_encode(p, key, val, &w);
	n = (int)w.len;
	/* random byte flips: decoding must end (ASan watches) and a refusal
	 * always says where */
	for (int i = 0; i < 2000; i++) {
		unsigned char *b = malloc(w.len);

		memcpy(b, w.p, w.len);
		b[next() % w.len] ^= (unsigned char)(1 + next() % 255);
		rbuf_init(&r, b, w.len);
		if (partial_row_decode(p, &r, key, val))
			refused += strstr(r.why, "at byte") != NULL;
		else
			fine++;
		free(b);
	}
	ok(refused + fine == 2000, "2000 corrupted rows of %d bytes: decoded or refused with a reason (%d refused)",
	   n, refused);
	wbuf_free(&w);
	free(key);
	free(val);
	query_free(q);
}

static void test_merge(void)
{
	const struct plan *p;
	struct query *q = compile(Q_ALL, &p);
	struct ptable *direct = ptable_new(p), *a = ptable_new(p), *b = ptable_new(p),
		      *tree = ptable_new(p);
	unsigned char *key = calloc(1, (size_t)p->key_size), *val = calloc(1, (size_t)p->value_size);
	struct wbuf wa = { 0 }, wb = { 0 };
	struct rbuf r;
	bool same = true;

	/* 8 "hosts", 50 keys each, overlapping: direct merge vs two
	 * subtrees encoded, decoded and merged at a root */
	for (int host = 0; host < 8; host++) {
		for (int k = 0; k < 50; k++) {
			memset(key, 0, (size_t)p->key_size);
			snprintf((char *)key, 16, "k%d", (k * 7 + host) % 60);
			fill(p, val, 1 + (int)(next() % 40));
			ptable_merge(direct, key, val);
			ptable_merge(host < 3 ? a : b, key, val);
		}
	}
	ptable_encode(a, &wa);
	ptable_encode(b, &wb);
	rbuf_init(&r, wb.p, wb.len);
	is_int(ptable_merge_rows(tree, &r), 0, "subtree b merged at the root");
	rbuf_init(&r, wa.p, wa.len);
	is_int(ptable_merge_rows(tree, &r), 0, "subtree a merged at the root");
	is_int(ptable_count(tree), ptable_count(direct), "same number of groups");
	for (size_t i = 0; i < ptable_count(direct); i++) {
		const void *k1, *v1, *k2, *v2;
		size_t j;

		ptable_row(direct, i, &k1, &v1);
		for (j = 0; j < ptable_count(tree); j++) {
			ptable_row(tree, j, &k2, &v2);
			if (!memcmp(k1, k2, (size_t)p->key_size))
				break;
		}
		if (j == ptable_count(tree) || memcmp(v1, v2, (size_t)p->value_size))
			same = false;
	}
	ok(same, "every group: two-level tree == flat merge, bit for bit");
	wbuf_free(&wa);
	wbuf_free(&wb);
	ptable_free(direct);
	ptable_free(a);
	ptable_free(b);
	ptable_free(tree);
	free(key);
	free(val);
	query_free(q);
}

static void test_shapes(void)
{
	const struct plan *p1, *p2;
	struct query *q1 = compile("from s in syscall(\"read\") select { l: lhist(s.ret, 0, 100, 10) }", &p1);
	struct query *q2 = compile("from s in syscall(\"read\") select { l: lhist(s.ret, 0, 100, 5) }", &p2);
	struct wbuf w = { 0 };
	struct rbuf r;
	char why[256] = "";

	partial_shape_encode(p1, &w);
	rbuf_init(&r, w.p, w.len);
	is_int(partial_shape_check(p2, &r, why, sizeof(why)), -EPROTO, "other lhist bounds refused");
	ok(strstr(why, "lhist(0, 100, 10) where this query has lhist(0, 100, 5)") != NULL,
	   "the reason names both: %s", why);
	/* a future format version */
	w.p[w.len - 5] = AGGR_STATE_VERSION + 1;	/* version, lo, hi (2 bytes), step */
	rbuf_init(&r, w.p, w.len);
	is_int(partial_shape_check(p1, &r, why, sizeof(why)), -EPROTO, "another state version refused");
	ok(strstr(why, "format version 2; this build merges version 1") != NULL, "by name: %s", why);
	wbuf_free(&w);
	query_free(q1);
	query_free(q2);

	q1 = compile("from s in syscall(\"read\") group s by s.comm into g select { n: g.count() }", &p1);
	q2 = compile("from s in syscall(\"read\") group s by s.pid into g select { n: g.count() }", &p2);
	partial_shape_encode(p1, &w);
	rbuf_init(&r, w.p, w.len);
	is_int(partial_shape_check(p2, &r, why, sizeof(why)), -EPROTO, "another key type refused");
	ok(strstr(why, "key 's.pid'") != NULL, "names the key: %s", why);
	wbuf_free(&w);
	query_free(q2);

	/* 100 groups of a count, as an agent sends them per window */
	{
		struct ptable *t = ptable_new(p1);
		unsigned char key[64] = { 0 }, val[8];

		for (int i = 0; i < 100; i++) {
			uint64_t n = 1 + next() % 100000;

			snprintf((char *)key, 16, "worker-%d", i);
			memcpy(val, &n, 8);
			ptable_merge(t, key, val);
		}
		partial_shape_encode(p1, &w);
		ptable_encode(t, &w);
		ok(w.len < 2048, "100-group count: %zu bytes (goal: 2 KiB per host per window)", w.len);
		ptable_free(t);
		wbuf_free(&w);
	}
	query_free(q1);
}

/* Quantiles of one expression share one sketch: a row carries it once
 * and a merge adds it once (not once per quantile). */
static void test_shared_sketch(void)
{
	const struct plan *p;
	struct query *q = compile("from s in syscall(\"read\") select {"
				  " p50: quantile(s.ret, 0.5), p99: quantile(s.ret, 0.99),"
				  " n: count() }", &p);
	struct ptable *t;
	unsigned char *val, *v2, nokey[8] = { 0 };
	const void *k, *mv;
	struct wbuf w = { 0 };
	struct rbuf r;
	int64_t n = 0, p50 = 0, p99 = 0;

	ok(p && p->aggrs[1].share == 0 && p->aggrs[1].offset == p->aggrs[0].offset,
	   "p99 shares p50's sketch");
	if (!p) {
		query_free(q);
		return;
	}
	val = calloc(1, (size_t)p->value_size);
	v2 = calloc(1, (size_t)p->value_size);
	for (int64_t i = 1; i <= 1000; i++)
		for (int a = 0; a < p->naggrs; a++)
			if (p->aggrs[a].share < 0)
				aggr_update(&p->aggrs[a].desc, val + p->aggrs[a].offset, i);
	partial_row_encode(p, nokey, val, &w);
	rbuf_init(&r, w.p, w.len);
	ok(!partial_row_decode(p, &r, nokey, v2) && rbuf_done(&r) &&
	   !memcmp(val, v2, (size_t)p->value_size), "a row with a shared sketch round-trips");
	t = ptable_new(p);
	ptable_merge(t, nokey, val);
	ptable_merge(t, nokey, val);
	ptable_row(t, 0, &k, &mv);
	aggr_final(&p->aggrs[2].desc, (const unsigned char *)mv + p->aggrs[2].offset, &n);
	aggr_final(&p->aggrs[0].desc, (const unsigned char *)mv + p->aggrs[0].offset, &p50);
	aggr_final(&p->aggrs[1].desc, (const unsigned char *)mv + p->aggrs[1].offset, &p99);
	is_int(n, 2000, "two hosts' 1000 events merged: count 2000");
	ok(p50 >= 484 && p50 <= 516 && p99 >= 958 && p99 <= 1022,
	   "the merged sketch is 1..1000 twice, not four times: p50 %lld, p99 %lld",
	   (long long)p50, (long long)p99);
	{
		uint64_t total = 0;

		for (int b = 0; b < AGGR_Q_BUCKETS; b++)
			total += ((const uint64_t *)((const unsigned char *)mv + p->aggrs[0].offset))[b];
		is_u64(total, 2000, "the shared sketch holds 2000 values after the merge");
	}
	ptable_free(t);
	wbuf_free(&w);
	free(val);
	free(v2);
	query_free(q);
}

static void test_varints(void)
{
	static const int64_t v[] = { 0, 1, -1, 63, -64, 64, INT64_MAX, INT64_MIN, 1ll << 40 };
	struct wbuf w = { 0 };
	struct rbuf r;
	bool same = true;
	unsigned char eleven[11];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		wbuf_svar(&w, v[i]);
		wbuf_uvar(&w, (uint64_t)v[i]);
	}
	rbuf_init(&r, w.p, w.len);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (rbuf_svar(&r, "s") != v[i] || rbuf_uvar(&r, "u") != (uint64_t)v[i])
			same = false;
	ok(same && rbuf_done(&r), "varints round-trip at the limits");
	memset(eleven, 0xff, sizeof(eleven));
	rbuf_init(&r, eleven, sizeof(eleven));
	rbuf_uvar(&r, "length");
	ok(r.err == -EBADMSG && strstr(r.why, "length"), "a varint over 64 bits refused: %s", r.why);
	wbuf_free(&w);
}

int main(void)
{
	test_varints();
	test_roundtrip();
	test_corrupt();
	test_merge();
	test_shapes();
	test_shared_sketch();
	return test_done();
}
