// SPDX-License-Identifier: MIT
/*
 * Every program fay's code generator emits for function() queries (all the
 * aggregates, group keys and tuples, let/where, str(), BPF division,
 * entry/exit pairing, streaming rows) passes fay's in-process verifier;
 * run on the same events (three threads, per-thread slots), the
 * interpreter and the JIT leave byte-identical maps, and the counts are
 * the number of events.  No kernel and no root: the engine only
 * generates code here (emit_only).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "engine/engine_int.h"
#include "engine/inline.h"
#include "query/plan.h"
#include "query/query.h"
#include "vm/vm.h"

__attribute__((noinline, noipa, used)) long fay_vm_target(long a, long b, const char *s);
__attribute__((noinline, noipa, used)) long fay_vm_target(long a, long b, const char *s)
{
	__asm__ volatile("" : : "r"(s) : "memory");
	return a - b;
}

#define NSLOTS 4
#define NEV 600

static uint64_t clock_ns;

static uint64_t now(const struct vm_env *env)
{
	return clock_ns;
}

static const char *strs[] = { "GET", "PUT", "a-longer-string-than-the-slot-is-wide", "" };

/* Run the events through entry (and exit) programs of one set. */
static void run(struct vm_prog *entry, struct vm_prog *exit_p, bool jit)
{
	uint64_t x;

	test_rng = 0x9e3779b97f4a7c15ull;
	clock_ns = 1000;
	for (int i = 0; i < NEV; i++) {
		uint64_t regs[21] = { 0 };
		uint32_t tid = 100 + (uint32_t)(i % 3);
		struct vm_env env = { .slot = tid % NSLOTS, .pid_tgid = 4242ull << 32 | tid,
				      .uid_gid = 0, .cpu = 0, .comm = "vmtest", .now = now };

		x = test_xorshift();
		regs[14] = i % 5 == 0 ? x : (uint64_t)(i % 97) - 20;	/* di: arg0 */
		regs[13] = (uint64_t)(i % 11);				/* si: arg1 */
		regs[12] = (uint64_t)(uintptr_t)strs[i % 4];		/* dx: arg2 */
		regs[19] = 0x7ffc1000 - 64 * (uint64_t)(i % 2);		/* sp */
		regs[10] = (uint64_t)fay_vm_target((long)regs[14], (long)regs[13], NULL);
		if (jit)
			vm_run(entry, regs, &env);
		else
			vm_interp(entry, regs, &env);
		clock_ns += 1 + (x % 100000);
		/* the return popped the return address: the exit's sp is the
		 * entry's + 8 (the uprobe programs pair by frame) */
		regs[19] += 8;
		if (exit_p) {
			if (jit)
				vm_run(exit_p, regs, &env);
			else
				vm_interp(exit_p, regs, &env);
		}
		clock_ns += 7;
	}
}

/* The same keys with the same values in every slot (rings: the same
 * bytes). */
static bool same_map(struct vm_map *a, struct vm_map *b)
{
	const struct vm_map_def *d = vm_map_def(a);
	unsigned char key[512], prev[512];
	int na = 0, nb = 0;

	if (d->type == BPF_MAP_TYPE_RINGBUF) {
		size_t s0, s1;
		void *x = vm_map_mem(a, &s0), *y = vm_map_mem(b, &s1);

		return s0 == s1 && !memcmp(x, y, s0);
	}
	for (int k = 0; !vm_map_next_key(a, k ? prev : NULL, key); k++, na++) {
		for (unsigned s = 0; s < NSLOTS; s++) {
			void *va = vm_map_lookup(a, key, s), *vb = vm_map_lookup(b, key, s);

			if (!va || !vb || memcmp(va, vb, d->value_size))
				return false;
		}
		memcpy(prev, key, d->key_size);
	}
	for (int k = 0; !vm_map_next_key(b, k ? prev : NULL, key); k++, nb++)
		memcpy(prev, key, d->key_size);
	return na == nb;
}

static void count_rec(const void *d, uint32_t sz, void *arg)
{
	(*(int *)arg)++;
}

static void one(const char *qfmt)
{
	char text[2048], err[2048];
	struct query *q;
	const struct plan *plan;
	struct engine *e = NULL;
	struct engine_opts o = { .sz = sizeof(o), .emit_only = true,
				 .buffer = ENGINE_BUF_RINGBUF };
	struct engine_inline sets[2];
	int verified = 1, same = 1;

	const char *at = strstr(qfmt, "PID");

	memset(sets, 0, sizeof(sets));
	snprintf(text, sizeof(text), "%.*s%d%s", (int)(at - qfmt), qfmt, (int)getpid(), at + 3);
	q = query_new("<test>", text, strlen(text), NULL);
	if (!q || query_plan(q, &plan)) {
		ok(0, "%s: plans: %s", qfmt, q && query_error(q) ? query_error(q) : "?");
		query_free(q);
		return;
	}
	e = engine_new(q, plan, &o, err, sizeof(err));
	if (!e) {
		ok(0, "%s: generates code: %.300s", qfmt, err);
		query_free(q);
		return;
	}
	for (int k = 0; k < 2 && verified; k++)
		if (engine_inline_new(e, NSLOTS, k == 1, &sets[k], err, sizeof(err))) {
			diag("%.900s", err);
			verified = 0;
		}
	ok(verified, "%s: %d program(s) verified and compiled", qfmt, e->nprogs);
	if (!verified)
		goto out;
	run(sets[0].entry, sets[0].exit, false);
	run(sets[1].entry, sets[1].exit, true);
	for (int m = 0; m < sets[0].nmaps; m++)
		if (!same_map(sets[0].maps[m], engine_inline_map(&sets[1], sets[0].bmaps[m]))) {
			diag("map %s differs", bmap_name(sets[0].bmaps[m]));
			same = 0;
		}
	ok(same, "%s: interpreter and JIT leave identical maps", qfmt);

	/* counts: the vals map of a keyless count() query, summed over slots */
	if (strstr(qfmt, "select count()")) {
		uint64_t sum = 0;
		uint32_t key = 0;

		for (unsigned s = 0; s < NSLOTS; s++)
			sum += *(uint64_t *)vm_map_lookup(engine_inline_map(&sets[1], e->vals),
							  &key, s);
		/* where arg(1) != 0: arg(1) is i % 11 */
		is_u64(sum, strstr(qfmt, "where") ? NEV - (NEV + 10) / 11 : NEV,
		       "%s: the slots add up to the events", qfmt);
	}
	if (e->out) {
		int recs = 0;

		for (unsigned s = 0; s < NSLOTS; s++)
			vm_ring_drain(engine_inline_map(&sets[1], e->out), s, count_rec, &recs);
		is_int(recs, NEV, "%s: one streamed row per event", qfmt);
	}
out:
	engine_inline_free(&sets[0]);
	engine_inline_free(&sets[1]);
	engine_free(e);
	query_free(q);
}

#define F "from e in process(PID).function(\"fay_vm_target\") "

int main(void)
{
	static const char *const queries[] = {
		F "select count()",
		F "where e.arg(1) != 0 select count()",
		F "select {s: sum(e.arg(0)), lo: min(e.arg(0)), hi: max(e.arg(0)), a: avg(e.arg(1))}",
		F "select {h: hist(e.arg(0)), l: lhist(e.arg(0), 0, 100, 10)}",
		F "select {q: quantile(e.arg(0), 0.99), d: distinct(e.arg(0))}",
		F "select {d: hist(e.duration), r: max(e.ret)}",
		F "group e by e.arg(1) into g select {k: g.key, c: g.count(), h: g.hist(e.arg(0))}",
		F "group e by e.tid into g select {t: g.key, d: g.avg(e.duration), "
		  "q: g.quantile(e.duration, 0.5), x: g.distinct(e.arg(0))}",
		F "group e by {p: e.pid, m: e.arg(1) % 3} into g select {p: g.p, m: g.m, c: g.count()}",
		F "group e by e.comm into g select {k: g.key, c: g.count()}",
		F "group e by str(e.arg(2)) into g select {k: g.key, c: g.count(), "
		  "l: g.lhist(e.arg(1), 0, 11, 1)}",
		F "let x = e.arg(0) * 3 where x % 2 == 0 && e.arg(1) > 2 select {s: sum(x), "
		  "c: count()}",
		F "select {c: count(), s: sum(e.arg(0) / e.arg(1)), m: sum(e.arg(0) % e.arg(1))}",
		F "select {t: e.tid, a: e.arg(0), b: e.arg(1)}",
		F "select {t: e.tid, r: e.ret, d: e.duration, s: str(e.arg(2))}",
	};

	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++)
		one(queries[i]);
	return test_done();
}
