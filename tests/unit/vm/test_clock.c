// SPDX-License-Identifier: MIT
/*
 * The VM's TSC clock (src/vm/clock.c) and the JIT's inlined helpers:
 * vm_tsc_now() stays within microseconds of CLOCK_MONOTONIC while
 * vm_tsc_sync() re-anchors it, strictly increases on a thread (never
 * backwards across a sync, never the same value twice: a TSC that
 * advances in 10 ns steps gives two reads in one step the same tick),
 * and counts nanoseconds; the JIT calls vm_prog_set_now()'s clock directly,
 * inlines get_current_pid_tgid, fay_depth and array lookups with the
 * helper's bounds (a key past the array, a slot past the map's slots:
 * NULL).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "test.h"
#include "bpf/insn.h"
#include "vm/vm.h"

#define P(...) ((const struct bpf_insn[]){ __VA_ARGS__ })
#define N(a) (sizeof(a) / sizeof((a)[0]))
#define LD_MAP(d, idx) LD_IMM64_LO(d, BPF_PSEUDO_MAP_FD, idx), LD_IMM64_HI(0)

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* |tsc - CLOCK_MONOTONIC| in ns: the smallest of 5 tries (preemption) */
static int64_t off_now(void)
{
	int64_t best = INT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t a = mono(), t = vm_tsc_now(NULL), b = mono();
		int64_t d = (int64_t)(t - (a + (b - a) / 2));

		if (d < 0)
			d = -d;
		if (d < best)
			best = d;
	}
	return best;
}

static void clock_tests(void)
{
	int64_t worst = 0;
	uint64_t prev = 0, back = 0, t0, m0;
	struct timespec d = { 0, 100 * 1000 * 1000 };

	ok(vm_tsc_active(), "calibrated");
	t0 = vm_tsc_now(NULL);
	m0 = mono();
	for (int step = 0; step < 12; step++) {
		int64_t o;

		for (int i = 0; i < 200000; i++) {
			uint64_t t = vm_tsc_now(NULL);

			back += t <= prev;
			prev = t;
		}
		nanosleep(&d, NULL);
		ok(vm_tsc_sync() == 0, "sync %d", step);
		o = off_now();
		worst = o > worst ? o : worst;
	}
	ok(back == 0, "strictly increasing over 2.4 M reads and 12 syncs (%llu at or before the previous)",
	   (unsigned long long)back);
	ok(worst < 50000, "within 50 us of CLOCK_MONOTONIC after each sync (worst %lld ns)",
	   (long long)worst);
	/* nanoseconds, not ticks: 1.2 s of both clocks agree to 1e-3 */
	{
		double r = (double)(vm_tsc_now(NULL) - t0) / (double)(mono() - m0);

		ok(r > 0.999 && r < 1.001, "the TSC line runs at CLOCK_MONOTONIC's rate (%.6f)", r);
	}
}

static uint64_t fake_now(const struct vm_env *env)
{
	return 4242 + env->slot;
}

/* fay_depth(): env->depth, compiled in place; as a lookup key of the
 * pairs array (the inline runtime's levels), NULL past its end. */
static void depth_tests(struct vm_map *m, const struct bpf_insn *lk, size_t n)
{
	struct bpf_insn dk[16];
	char err[256], ctx[8] = { 0 };
	struct vm_prog *p;
	int right = 0;

	/* jit_tests()'s lookup with the key from fay_depth() */
	memcpy(dk, lk, n * sizeof(*lk));
	dk[0] = (struct bpf_insn)CALL_HELPER(VM_FUNC_fay_depth);
	dk[1] = (struct bpf_insn)STX_MEM(BPF_W, BPF_REG_10, BPF_REG_0, -8);
	p = vm_prog_new(dk, n, &m, 1, sizeof(ctx), err, sizeof(err));

	ok(p && vm_prog_jit(p) == 0 && !vm_prog_calls_out(p),
	   "fay_depth and the lookup compiled in place (no call out)%s%s", p ? "" : ": ",
	   p ? "" : err);
	if (!p)
		return;
	for (uint32_t d = 0; d < 5; d++) {
		struct vm_env e = { .slot = 2, .depth = d };
		uint64_t want = d < 3 ? d * 10 + 3 : 999;

		right += vm_run(p, ctx, &e) == want && vm_interp(p, ctx, &e) == want;
	}
	ok(right == 5, "fay_depth as the key: levels 0-2 found, 3 and 4 past the array (%d/5)",
	   right);
	vm_prog_free(p);
}

/* A helper that returns a field of its vm_env, id, named name: compiled
 * in place (no call out), and its answer for es[i] is want[i], JIT and
 * interpreter alike. */
static void env_field_test(int32_t id, const char *name, const struct vm_env *es,
			   const uint64_t *want, int n)
{
	const struct bpf_insn prog[] = {
		CALL_HELPER(id),
		EXIT_INSN(),
	};
	char err[256], ctx[8] = { 0 };
	struct vm_prog *p = vm_prog_new(prog, N(prog), NULL, 0, sizeof(ctx), err, sizeof(err));
	int right = 0;

	ok(p && vm_prog_jit(p) == 0 && !vm_prog_calls_out(p),
	   "%s compiled in place (no call out)%s%s", name, p ? "" : ": ", p ? "" : err);
	if (!p)
		return;
	for (int i = 0; i < n; i++) {
		struct vm_env e = es[i];

		right += vm_run(p, ctx, &e) == want[i] && vm_interp(p, ctx, &e) == want[i];
	}
	ok(right == n, "%s returns its vm_env field, JIT and interpreter (%d/%d)", name, right, n);
	vm_prog_free(p);
}

/* fay_unwound(): env->unwound (1 at the exit of a call the runtime found
 * left without its return, else 0), compiled in place, the interpreter's
 * answer the same; as a program's branch (f.unwound in a where): the
 * return register read only for a normal return. */
static void unwound_tests(void)
{
	/* r0 = fay_unwound() ? 1000 : ctx[0] + 1 */
	const struct bpf_insn br[] = {
		MOV64_REG(BPF_REG_6, BPF_REG_1),
		CALL_HELPER(VM_FUNC_fay_unwound),
		JMP_IMM(BPF_JNE, BPF_REG_0, 0, 3),
		LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_6, 0),
		ALU64_IMM(BPF_ADD, BPF_REG_0, 1),
		EXIT_INSN(),
		MOV64_IMM(BPF_REG_0, 1000),
		EXIT_INSN(),
	};
	const struct vm_env es[4] = { { .depth = 7 }, { .depth = 7, .unwound = 1 },
				      { .depth = 7 }, { .depth = 7, .unwound = 1 } };
	const uint64_t is[4] = { 0, 1, 0, 1 };
	uint64_t regs[1] = { 41 };
	char err[256];
	struct vm_prog *p;
	int right = 0;

	env_field_test(VM_FUNC_fay_unwound, "fay_unwound", es, is, 4);
	p = vm_prog_new(br, N(br), NULL, 0, sizeof(regs), err, sizeof(err));
	ok(p && vm_prog_jit(p) == 0 && !vm_prog_calls_out(p),
	   "f.unwound as a branch: compiled in place%s%s", p ? "" : ": ", p ? "" : err);
	if (!p)
		return;
	right = 0;
	for (uint32_t u = 0; u < 2; u++) {
		struct vm_env e = { .slot = 0, .depth = 3, .unwound = u };
		uint64_t want = u ? 1000 : 42;

		right += vm_run(p, regs, &e) == want && vm_interp(p, regs, &e) == want;
	}
	ok(right == 2, "f.unwound as a branch: a return reads ctx, an unwound exit does not, JIT and interpreter (%d/2)",
	   right);
	vm_prog_free(p);
}

/* fay_cookie(): env->cookie (the probed site's id, a wildcard's function
 * index: s.name), all 64 bits. */
static void cookie_tests(void)
{
	const uint64_t ck[] = { 0, 1, 10, 255, 0x123456789abull };
	struct vm_env es[5];

	for (int i = 0; i < 5; i++)
		es[i] = (struct vm_env){ .depth = 3, .unwound = 1, .cookie = ck[i] };
	env_field_test(VM_FUNC_fay_cookie, "fay_cookie", es, ck, 5);
}

/* get_current_cgroup_id(): env->cgroup_id, all 64 bits, and fay_vpid():
 * env->vpid, 32 (the process as fay told its runtime, INL_PID: each
 * process of an inline query its own, issue #25), the fields around
 * them set so that a load from a neighbour shows. */
static void ids_tests(void)
{
	const uint64_t cg[] = { 0, 1, 0x1234, 0x8000000000000001ull };
	const uint64_t vp[] = { 1, 2, 4242, 0x7fffffff };
	struct vm_env es[4];

	for (int i = 0; i < 4; i++)
		es[i] = (struct vm_env){ .pid_tgid = ~0ull, .exit = ~0u, .cookie = ~0ull,
					 .cgroup_id = cg[i], .vpid = (uint32_t)vp[i] };
	env_field_test(BPF_FUNC_get_current_cgroup_id, "get_current_cgroup_id", es, cg, 4);
	env_field_test(VM_FUNC_fay_vpid, "fay_vpid", es, vp, 4);
}

static void jit_tests(void)
{
	static const struct vm_map_def def = { BPF_MAP_TYPE_PERCPU_ARRAY, 4, 16, 3 };
	struct vm_map *m = vm_map_new(&def, 4);
	struct vm_env env = { .slot = 1, .pid_tgid = 0x1234500006789ull };
	char err[256], ctx[8] = { 0 };
	/* r0 = the first u64 of the value of key r6, or 999 */
	struct bpf_insn lk[] = {
		MOV64_IMM(BPF_REG_6, 0),
		STX_MEM(BPF_W, BPF_REG_10, BPF_REG_6, -8),
		LD_MAP(BPF_REG_1, 0),
		MOV64_REG(BPF_REG_2, BPF_REG_10),
		ALU64_IMM(BPF_ADD, BPF_REG_2, -8),
		CALL_HELPER(BPF_FUNC_map_lookup_elem),
		JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 2),
		LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_0, 0),
		EXIT_INSN(),
		MOV64_IMM(BPF_REG_0, 999),
		EXIT_INSN(),
	};
	const struct bpf_insn kt[] = {
		CALL_HELPER(BPF_FUNC_ktime_get_ns), MOV64_REG(BPF_REG_6, BPF_REG_0),
		CALL_HELPER(BPF_FUNC_get_current_pid_tgid), ALU64_REG(BPF_ADD, BPF_REG_0, BPF_REG_6),
		EXIT_INSN(),
	};
	struct vm_prog *p = vm_prog_new(kt, N(kt), NULL, 0, sizeof(ctx), err, sizeof(err));

	ok(m && p, "map and program (%s)", err);
	if (!m || !p)
		return;
	env.now = fake_now;
	ok(vm_interp(p, ctx, &env) == 4243 + env.pid_tgid, "interpreter: env->now + pid_tgid");
	vm_prog_set_now(p, fake_now);
	env.now = NULL;
	ok(vm_prog_jit(p) == 0 && vm_run(p, ctx, &env) == 4243 + env.pid_tgid,
	   "JIT: the set clock called directly, pid_tgid inline");
	vm_prog_free(p);
	for (uint32_t k = 0; k < 3; k++)
		for (unsigned int slot = 0; slot < 4; slot++) {
			uint64_t v[2] = { k * 10 + slot + 1, 0 };

			vm_map_update(m, &k, v, BPF_ANY, slot);
		}
	for (int key = 0; key < 5; key++)
		for (unsigned int slot = 0; slot < 6; slot++) {
			struct vm_env e = { .slot = slot };
			uint64_t want, got, ref;

			lk[0].imm = key;
			p = vm_prog_new(lk, N(lk), &m, 1, sizeof(ctx), err, sizeof(err));
			if (!p || vm_prog_jit(p)) {
				ok(0, "key %d slot %u: %s", key, slot, err);
				vm_prog_free(p);
				continue;
			}
			want = key < 3 && slot < 4 ? (uint64_t)key * 10 + slot + 1 : 999;
			got = vm_run(p, ctx, &e);
			ref = vm_interp(p, ctx, &e);
			if (got != want)
				ok(0, "inline lookup key %d slot %u: %llx, want %llx", key, slot,
				   (unsigned long long)got, (unsigned long long)want);
			else if (got != ref)
				ok(0, "inline lookup key %d slot %u: JIT %llx, interpreter %llx", key,
				   slot, (unsigned long long)got, (unsigned long long)ref);
			vm_prog_free(p);
		}
	ok(1, "inline array lookups: 30 key/slot pairs as vm_map_lookup(), NULL past the ends");
	depth_tests(m, lk, N(lk));
	vm_map_free(m);
	unwound_tests();
	cookie_tests();
	ids_tests();
}

int main(void)
{
	int rc = vm_tsc_init();

	jit_tests();
	if (rc == -ENOTSUP) {
		ok(1, "no invariant TSC here: vm_tsc_now() is clock_gettime() (%s)",
		   vm_tsc_active() ? "active?" : "inactive");
		return test_done();
	}
	ok(rc == 0, "vm_tsc_init: %d", rc);
	clock_tests();
	return test_done();
}
