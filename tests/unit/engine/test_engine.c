// SPDX-License-Identifier: MIT
/*
 * The engine end to end, in-process, with real BPF (root):
 *  - every aggregate's per-event update, generated as BPF, leaves exactly
 *    the partial state of the C reference (query/aggr.c) over the same
 *    values: hist/lhist/quantile buckets, min/max/avg, the HyperLogLog
 *    registers (byte for byte), for values chosen at every edge;
 *  - signed / and % with BPF's rules (x / 0 = 0, x % 0 = x), shifts,
 *    comparisons and && || ! computed by the probe match plan_binop();
 *  - group-by tuples, string keys (str() of a user pointer), predicates,
 *    entry/exit pairing (ret, duration), streaming records, windows
 *    (reset), the drop counters (a map with too few keys), and nothing
 *    left in the kernel afterwards.
 * The probe point is a function of this very program (a uprobe).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "test.h"
#include "common/err.h"
#include "engine/engine.h"
#include "query/plan.h"
#include "query/query.h"

__attribute__((noinline, noipa, used)) long fay_eng_target(long a, long b);
__attribute__((noinline, noipa, used)) long fay_eng_target(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return (long)((unsigned long)a - (unsigned long)b);	/* wraps, no UB */
}

__attribute__((noinline, noipa, used)) long fay_eng_str(const char *s, long n);
__attribute__((noinline, noipa, used)) long fay_eng_str(const char *s, long n)
{
	__asm__ volatile("" : : "r"(s) : "memory");
	return n;
}

__attribute__((noinline, noipa, used)) void fay_eng_sleep(long us);
__attribute__((noinline, noipa, used)) void fay_eng_sleep(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000 };

	nanosleep(&ts, NULL);
}

static char self[4096];

/* Values at every edge the bucket functions have. */
/* (qfmt() returns one static buffer: copy a query kept across calls.) */
static int64_t vals[4096];
static int nvals;

static void make_values(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int i = -20; i <= 40; i++)
		vals[nvals++] = i;
	for (int s = 1; s < 63; s++) {
		vals[nvals++] = (int64_t)1 << s;
		vals[nvals++] = ((int64_t)1 << s) - 1;
		vals[nvals++] = ((int64_t)1 << s) + 1;
		vals[nvals++] = -((int64_t)1 << s);
	}
	vals[nvals++] = INT64_MAX;
	vals[nvals++] = INT64_MIN;
	vals[nvals++] = INT64_MIN + 1;
	while (nvals < 900) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		vals[nvals++] = (int64_t)(x >> (x & 63));
		vals[nvals++] = (int64_t)(x % 5000) - 100;
	}
}

struct run {
	struct query *q;
	const struct plan *p;
	struct engine *e;
};

static int start(struct run *r, const char *text, const struct engine_opts *o)
{
	char err[2048];

	memset(r, 0, sizeof(*r));
	r->q = query_new("<test>", text, strlen(text), NULL);
	if (!r->q || query_plan(r->q, &r->p)) {
		diag("plan: %s", r->q && query_error(r->q) ? query_error(r->q) : "?");
		return -1;
	}
	r->e = engine_new(r->q, r->p, o, err, sizeof(err));
	if (!r->e) {
		diag("engine_new: %s%s", err, query_error(r->q) ? query_error(r->q) : "");
		return -1;
	}
	if (engine_load(r->e) || engine_attach(r->e)) {
		diag("load/attach: %s", engine_error(r->e));
		return -1;
	}
	return 0;
}

static void stop(struct run *r)
{
	engine_free(r->e);
	query_free(r->q);
	r->e = NULL;
	r->q = NULL;
}

static char *qfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *qfmt(const char *fmt, ...)
{
	static char buf[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return buf;
}

/* ---- aggregates: BPF state == reference state ------------------------------- */

static void test_aggregates(void)
{
	struct run r;
	struct engine_result res;
	const char *q = qfmt("from f in function(\"%s:fay_eng_target\") select {"
			     " n: count(), s: sum(f.arg(0)), mn: min(f.arg(0)), mx: max(f.arg(0)),"
			     " a: avg(f.arg(0)), h: hist(f.arg(0)), l: lhist(f.arg(0), -50, 4000, 7),"
			     " q: quantile(f.arg(0), 0.9), d: distinct(f.arg(0)) }", self);

	if (start(&r, q, NULL)) {
		ok(0, "aggregate query runs");
		stop(&r);
		return;
	}
	for (int i = 0; i < nvals; i++)
		fay_eng_target(vals[i], 0);
	ok(!engine_read(r.e, false, &res), "read the aggregates");
	is_int(res.nrows, 1, "one row without a key");
	for (int a = 0; res.nrows == 1 && a < r.p->naggrs; a++) {
		const struct plan_aggr *ag = &r.p->aggrs[a];
		unsigned char *ref = calloc(1, ag->desc.size);

		for (int i = 0; i < nvals; i++)
			aggr_update(&ag->desc, ref, vals[i]);
		ok(!memcmp(ref, res.rows[0].val + ag->offset, ag->desc.size),
		   "%s: the probe's state is the reference state over %d values",
		   ag->text, nvals);
		free(ref);
	}
	for (int c = 0; c < ENGINE_NCOUNTERS; c++)
		is_u64(res.counters[c], 0, "counter %d is 0", c);
	engine_result_clear(&res);
	stop(&r);
}

/* ---- operators: the probe computes what plan_binop() says -------------------- */

static void test_operators(void)
{
	static const struct { const char *op; enum px_op px; } ops[] = {
		{ "/", PX_DIV }, { "%", PX_MOD }, { "+", PX_ADD }, { "-", PX_SUB },
		{ "*", PX_MUL }, { "<<", PX_SHL }, { ">>", PX_SHR }, { "&", PX_AND },
		{ "|", PX_OR }, { "^", PX_XOR }, { "<", PX_LT }, { "<=", PX_LE },
		{ ">", PX_GT }, { ">=", PX_GE }, { "==", PX_EQ }, { "!=", PX_NE },
		{ "&&", PX_LAND }, { "||", PX_LOR },
	};
	static const int64_t as[] = { 0, 1, -1, 7, -7, 100, -100, INT64_MIN, INT64_MAX, 65 };
	static const int64_t bs[] = { 0, 1, -1, 3, -3, 64, 65, INT64_MIN };

	for (size_t o = 0; o < ARRAY_SIZE(ops); o++) {
		struct run r;
		struct engine_result res;
		int bad = 0, rows;
		const char *q = qfmt("from f in function(\"%s:fay_eng_target\") group f by"
				     " { a: f.arg(0), b: f.arg(1), v: f.arg(0) %s f.arg(1) } into g"
				     " select { a: g.a, b: g.b, v: g.v }", self, ops[o].op);

		if (start(&r, q, NULL)) {
			ok(0, "operator %s query runs", ops[o].op);
			stop(&r);
			continue;
		}
		for (size_t i = 0; i < ARRAY_SIZE(as); i++)
			for (size_t j = 0; j < ARRAY_SIZE(bs); j++)
				fay_eng_target(as[i], bs[j]);
		if (engine_read(r.e, false, &res)) {
			ok(0, "read %s", ops[o].op);
			stop(&r);
			continue;
		}
		rows = (int)res.nrows;
		for (size_t i = 0; i < res.nrows; i++) {
			int64_t a, b, v;

			memcpy(&a, res.rows[i].key, 8);
			memcpy(&b, res.rows[i].key + 8, 8);
			memcpy(&v, res.rows[i].key + 16, 8);
			if (v != plan_binop(ops[o].px, a, b)) {
				if (bad++ < 3)
					diag("%" PRId64 " %s %" PRId64 " = %" PRId64 " in BPF, %" PRId64
					     " in C", a, ops[o].op, b, v, plan_binop(ops[o].px, a, b));
			}
		}
		ok(rows == (int)(ARRAY_SIZE(as) * ARRAY_SIZE(bs)) && !bad,
		   "a %s b in the probe matches plan_binop over %d pairs (%d rows, %d wrong)",
		   ops[o].op, (int)(ARRAY_SIZE(as) * ARRAY_SIZE(bs)), rows, bad);
		engine_result_clear(&res);
		stop(&r);
	}
}

/* ---- keys, strings, predicates, pairing ---------------------------------- */

static void test_strings_and_where(void)
{
	static const char *const words[] = { "alpha", "beta", "gamma-gamma-gamma-gamma" };
	struct run r;
	struct engine_result res;
	const char *q = qfmt("from f in function(\"%s:fay_eng_str\") where f.arg(1) %% 2 == 0"
			     " && str(f.arg(0)) != \"beta\" group f by str(f.arg(0)) into g"
			     " select { w: g.key, n: g.count(), s: g.sum(f.arg(1)),"
			     " d: g.distinct(str(f.arg(0))) }", self);
	long want[3] = { 0 }, sum[3] = { 0 };

	if (start(&r, q, NULL)) {
		ok(0, "string query runs");
		stop(&r);
		return;
	}
	for (long i = 0; i < 300; i++) {
		fay_eng_str(words[i % 3], i);
		if (i % 2 == 0 && i % 3 != 1) {
			want[i % 3]++;
			sum[i % 3] += i;
		}
	}
	ok(!engine_read(r.e, false, &res), "read the string keys");
	is_int(res.nrows, 2, "two keys pass the where (beta is filtered out)");
	for (size_t i = 0; i < res.nrows; i++) {
		const char *k = (const char *)res.rows[i].key;
		int w = !strcmp(k, "alpha") ? 0 : !strncmp(k, "gamma", 5) ? 2 : 1;
		int64_t n, s;
		unsigned char ref[AGGR_HLL_M] = { 0 };
		char pad[64] = { 0 };

		memcpy(&n, res.rows[i].val, 8);
		memcpy(&s, res.rows[i].val + 8, 8);
		is_int(n, want[w], "count of \"%s\"", k);
		is_int(s, sum[w], "sum of \"%s\"", k);
		strncpy(pad, words[w], sizeof(pad) - 1);
		aggr_update_hash(&r.p->aggrs[2].desc, ref,
				 aggr_hash_bytes(pad, (size_t)r.p->aggrs[2].arg->size));
		ok(!memcmp(ref, res.rows[i].val + r.p->aggrs[2].offset, AGGR_HLL_M),
		   "distinct(str) of \"%s\" hashes the padded string like aggr_hash_bytes", k);
	}
	ok(res.nrows < 1 || !strcmp((char *)res.rows[0].key, "alpha"), "rows in key order");
	engine_result_clear(&res);
	stop(&r);
}

static void test_pairing(void)
{
	struct run r;
	struct engine_result res;
	const char *q = qfmt("from f in function(\"%s:fay_eng_target\") where f.ret > 0"
			     " group f by f.arg(1) into g select { b: g.key, n: g.count(),"
			     " r: g.sum(f.ret), mx: g.max(f.arg(0)) }", self);
	char *q1 = strdup(q);
	int64_t v[5];

	if (!q1 || start(&r, q1, NULL)) {
		ok(0, "paired query runs");
	} else {
		/* ret = a - b: positive for a > b */
		for (long a = 0; a < 50; a++)
			fay_eng_target(a, a % 2 ? 10 : 20);
		ok(!engine_read(r.e, false, &res), "read the paired query");
		is_int(res.nrows, 2, "two keys (b = 10, b = 20)");
		for (size_t i = 0; i < res.nrows; i++) {
			int64_t b, want_n = 0, want_r = 0, want_mx = 0;

			memcpy(&b, res.rows[i].key, 8);
			memcpy(v, res.rows[i].val, 4 * sizeof(v[0]));
			for (long a = 0; a < 50; a++)
				if ((a % 2 ? 10 : 20) == b && a - b > 0) {
					want_n++;
					want_r += a - b;
					want_mx = a;
				}
			is_int(v[0], want_n, "b=%" PRId64 ": calls with ret > 0 (where at exit)", b);
			is_int(v[1], want_r, "b=%" PRId64 ": sum of ret", b);
			is_int(v[3], want_mx, "b=%" PRId64 ": max of arg(0), carried from entry", b);
		}
		engine_result_clear(&res);
	}
	stop(&r);
	free(q1);

	if (start(&r, qfmt("from f in function(\"%s:fay_eng_sleep\") select { n: count(),"
			   " mn: min(f.duration), mx: max(f.duration) }", self), NULL)) {
		ok(0, "duration query runs");
	} else {
		for (int i = 0; i < 20; i++)
			fay_eng_sleep(2000);
		ok(!engine_read(r.e, false, &res), "read durations");
		memcpy(v, res.rows[0].val, sizeof(v));
		is_int(v[0], 20, "20 timed calls");
		/* min: words 1 (n) and 2 (m); max: 3 and 4 */
		ok(v[2] >= 2000000, "min duration >= 2 ms (%" PRId64 " ns)", v[2]);
		ok(v[4] >= v[2] && v[4] < 2000000000, "max duration >= min, < 2 s (%" PRId64
		   " ns)", v[4]);
		engine_result_clear(&res);
	}
	stop(&r);
}

/* ---- windows (reset), drops, streams ------------------------------------ */

static void test_reset_and_drops(void)
{
	struct run r;
	struct engine_result res;
	const char *q = qfmt("from f in function(\"%s:fay_eng_target\") group f by f.arg(0)"
			     " into g select { k: g.key, n: g.count() }", self);
	struct query *qq;
	uint64_t total = 0;

	if (start(&r, q, NULL)) {
		ok(0, "window query runs");
		stop(&r);
		return;
	}
	for (int i = 0; i < 10; i++)
		fay_eng_target(i, 0);
	ok(!engine_read(r.e, true, &res) && res.nrows == 10, "first window: 10 keys");
	engine_result_clear(&res);
	for (int i = 0; i < 3; i++)
		fay_eng_target(i, 0);
	ok(!engine_read(r.e, true, &res) && res.nrows == 3, "after a reset: 3 keys");
	for (size_t i = 0; i < res.nrows; i++) {
		uint64_t n;

		memcpy(&n, res.rows[i].val, 8);
		total += n;
	}
	is_u64(total, 3, "after a reset: 3 events");
	engine_result_clear(&res);
	stop(&r);

	/* A map of 4 keys: 6 more keys are counted as dropped. */
	qq = query_new("<test>", q, strlen(q), NULL);
	if (qq && !query_plan(qq, &r.p)) {
		char err[1024];
		struct plan *mp = (struct plan *)r.p;

		mp->max_entries = 4;
		r.q = qq;
		r.e = engine_new(qq, r.p, NULL, err, sizeof(err));
		if (r.e && !engine_load(r.e) && !engine_attach(r.e)) {
			for (int i = 0; i < 10; i++)
				fay_eng_target(i, 0);
			ok(!engine_read(r.e, false, &res), "read a full map");
			is_int(res.nrows, 4, "4 keys fit");
			is_u64(res.counters[EC_MAP_FULL], 6, "6 events counted as dropped (map full)");
			engine_result_clear(&res);
		} else {
			ok(0, "small-map query runs: %.300s", r.e ? engine_error(r.e) : err);
		}
	}
	stop(&r);
}

struct recs {
	int n;
	int64_t sum;
	bool size_ok;
	size_t want;
};

static void on_rec(void *ctx, const void *rec, size_t size)
{
	struct recs *c = ctx;
	int64_t a;

	memcpy(&a, rec, 8);
	c->n++;
	c->sum += a;
	if (size != c->want)
		c->size_ok = false;
}

static void test_stream(enum engine_buffer buf, const char *name)
{
	struct engine_opts o = { .sz = sizeof(o), .buffer = buf };
	struct recs c = { .size_ok = true };
	struct run r;
	const char *q = qfmt("from f in function(\"%s:fay_eng_target\") where f.arg(1) == 5"
			     " select { a: f.arg(0), c: f.comm }", self);

	if (start(&r, q, &o)) {
		ok(0, "%s stream runs", name);
		stop(&r);
		return;
	}
	c.want = (size_t)r.p->record_size;
	engine_set_record_fn(r.e, on_rec, &c);
	for (int i = 0; i < 100; i++)
		fay_eng_target(i, i % 2 ? 5 : 6);
	for (int i = 0; i < 50 && c.n < 50; i++) {
		usleep(10000);
		engine_consume(r.e);
	}
	is_int(c.n, 50, "%s: 50 rows streamed", name);
	is_int(c.sum, 2500, "%s: the rows carry arg(0) (sum of odd 1..99)", name);
	ok(c.size_ok, "%s: records of record_size bytes", name);
	stop(&r);
}

/* A stream nobody reads: what does not fit is counted, nothing twice. */
static void test_lost(enum engine_buffer buf, const char *name)
{
	struct engine_opts o = { .sz = sizeof(o), .buffer = buf };
	struct recs c = { .size_ok = true };
	uint64_t cnt[ENGINE_NCOUNTERS];
	struct run r;
	const long n = 300000;
	const char *q = qfmt("from s in syscall(\"getppid\") where s.pid == %d"
			     " select { t: s.tid, c: s.comm }", (int)getpid());

	if (start(&r, q, &o)) {
		ok(0, "%s: lost-row query runs", name);
		stop(&r);
		return;
	}
	c.want = (size_t)r.p->record_size;
	engine_set_record_fn(r.e, on_rec, &c);
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	while (engine_consume(r.e) > 0)
		;
	ok(!engine_counters(r.e, cnt), "%s: read the counters", name);
	ok(cnt[EC_LOST] > 0, "%s: a full buffer loses rows (%" PRIu64 " lost, %d read)",
	   name, cnt[EC_LOST], c.n);
	is_u64((uint64_t)c.n + cnt[EC_LOST], (uint64_t)n,
	       "%s: rows read + rows counted lost = events", name);
	stop(&r);
}

/* ---- hygiene ------------------------------------------------------------ */

/* Every program and map of an engine is gone once it is freed. */
static void test_hygiene(void)
{
	struct run r;
	uint32_t ids[8];
	int nids = 0, left = 0;
	const char *q = qfmt("from f in function(\"%s:fay_eng_target\") group f by f.arg(0)"
			     " into g select { k: g.key, n: g.count(), t: g.avg(f.duration) }", self);

	if (start(&r, q, NULL)) {
		ok(0, "hygiene query runs");
		stop(&r);
		return;
	}
	for (int i = 0; i < engine_nprobes(r.e) && nids < 8; i++)
		ids[nids++] = engine_prog_id(r.e, i);
	ok(nids == 2 && ids[0] && ids[1], "two programs loaded (entry and exit)");
	stop(&r);
	for (int tries = 0; tries < 100; tries++) {
		left = 0;
		for (int i = 0; i < nids; i++) {
			int fd = bpf_prog_get_fd_by_id(ids[i]);

			if (fd >= 0) {
				left++;
				close(fd);
			}
		}
		if (!left)
			break;
		usleep(20000);
	}
	is_int(left, 0, "no program of the query is left in the kernel");
}

int main(void)
{
	ssize_t n;

	if (geteuid() != 0)
		skip_all("needs root (loads BPF programs)");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		skip_all("cannot read /proc/self/exe");
	self[n] = '\0';
	make_values();

	test_aggregates();
	test_operators();
	test_strings_and_where();
	test_pairing();
	test_reset_and_drops();
	test_stream(ENGINE_BUF_RINGBUF, "ringbuf");
	test_stream(ENGINE_BUF_PERF, "perf buffer");
	test_lost(ENGINE_BUF_RINGBUF, "ringbuf");
	test_lost(ENGINE_BUF_PERF, "perf buffer");

	test_hygiene();
	return test_done();
}
