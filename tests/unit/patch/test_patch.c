// SPDX-License-Identifier: MIT
/*
 * The patcher on functions of this very program: entry and exit probes
 * through a trampoline (prologues relocated, a RIP-relative operand
 * re-based, a 5-byte nop site, stack arguments seen by an exit-probed
 * function), sites refused with a reason (too short, a jump into the
 * patched bytes; test_reloc.c has the branches that move), the
 * original bytes back after disarm, longjmp out of a probed function,
 * pthread_exit unwinding through the trampoline, a JIT-compiled VM
 * program as the handler, the vector registers kept (by the trampoline,
 * or by handlers that say they keep them: PATCH_HANDLERS_KEEP_VECTORS),
 * and 8 threads calling a function in a tight loop while it is armed and
 * disarmed 100 times (and 50 times one whose first instruction, a jmp,
 * is relocated: its copies sit at other offsets than the originals).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "bpf/insn.h"
#include "patch/patch.h"
#include "vm/vm.h"

/* Functions with known first instructions. */
long f_push(long a, long b);
long f_rip(long a);
long f_nop(long a);
long f_short(void);
long f_lea_ret(long a, long b);
long f_getter(long a, long b);
long f_into(long a);
long f_hop(long a, long b);
long rip_var = 1000;
__asm__(
	".text\n"
	".globl f_push\n.type f_push,@function\n"
	"f_push:\n"
	"  push %rbp\n  mov %rsp,%rbp\n  lea (%rdi,%rsi,1),%rax\n  pop %rbp\n  ret\n"
	".size f_push, .-f_push\n"
	".globl f_rip\n.type f_rip,@function\n"
	"f_rip:\n"
	"  mov rip_var(%rip),%rax\n  add %rdi,%rax\n  ret\n"
	".size f_rip, .-f_rip\n"
	".globl f_nop\n.type f_nop,@function\n"
	"f_nop:\n"
	"  .byte 0x0f,0x1f,0x44,0x00,0x00\n  lea 1(%rdi),%rax\n  ret\n"
	".size f_nop, .-f_nop\n"
	".globl f_lea_ret\n.type f_lea_ret,@function\n"
	"f_lea_ret:\n  lea (%rdi,%rsi,1),%rax\n  ret\n"
	".size f_lea_ret, .-f_lea_ret\n"
	".globl f_getter\n.type f_getter,@function\n"
	"f_getter:\n  mov %rsi,%rax\n  ret\n"
	".size f_getter, .-f_getter\n"
	"  .byte 0x66,0x2e,0x0f,0x1f,0x84,0x00,0x00,0x00,0x00,0x00\n"
	".globl f_short\n.type f_short,@function\n"
	"f_short:\n  xor %eax,%eax\n  ret\n"
	".size f_short, .-f_short\n"
	".globl f_hop\n.type f_hop,@function\n"
	"f_hop:\n  .byte 0xeb, 0\n  lea (%rdi,%rsi),%rax\n  ret\n"
	".size f_hop, .-f_hop\n"
	".globl f_into\n.type f_into,@function\n"
	"f_into:\n  push %rbx\n2: add $1,%rdi\n  cmp $10,%rdi\n  jl 2b\n"
	"  mov %rdi,%rax\n  pop %rbx\n  ret\n"
	".size f_into, .-f_into\n");

static size_t fsize(const char *name)
{
	/* the sizes above, from the symbol table would be nicer; these
	 * functions are tiny so the decoder stops at their end anyway */
	return strcmp(name, "f_short") == 0 ? 3 : 32;
}

__attribute__((noinline, noipa)) long f_args(long a, long b, long c, long d, long e,
					     long f, long g, long h);
__attribute__((noinline, noipa)) long f_args(long a, long b, long c, long d, long e,
					     long f, long g, long h)
{
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

static jmp_buf jb;

__attribute__((noinline, noipa)) long f_jumpy(long a);
__attribute__((noinline, noipa)) long f_jumpy(long a)
{
	volatile long x = a * 3;

	if (a < 0)
		longjmp(jb, 1);
	return x + 1;
}

__attribute__((noinline, noipa)) long f_exit(long a);
__attribute__((noinline, noipa)) long f_exit(long a)
{
	volatile long x = a;

	if (x == 42)
		pthread_exit((void *)x);
	return x;
}

struct counts {
	long entries, exits;
	uint64_t last_di, last_si, last_ax, last_ip, last_sp;
};

static void on_entry(struct patch_regs *r, void *arg)
{
	struct counts *c = arg;

	__atomic_add_fetch(&c->entries, 1, __ATOMIC_RELAXED);
	c->last_di = r->di;
	c->last_si = r->si;
	c->last_ip = r->ip;
	c->last_sp = r->sp;
}

static void on_exit_(struct patch_regs *r, void *arg)
{
	struct counts *c = arg;

	__atomic_add_fetch(&c->exits, 1, __ATOMIC_RELAXED);
	c->last_ax = r->ax;
}

static struct patch_site *arm(void *f, size_t size, struct counts *c, bool exit,
			      const char *what)
{
	char err[256];
	struct patch_site *s = patch_site_new(f, size, err, sizeof(err));

	ok(s != NULL, "%s: site accepted%s%s", what, s ? "" : ": ", s ? "" : err);
	if (!s)
		return NULL;
	is_int(patch_site_arm(s, on_entry, exit ? on_exit_ : NULL, c, err, sizeof(err)), 0,
	       "%s: armed (first instruction %s)", what, patch_site_first(s));
	return s;
}

static void refused(void *f, size_t size, const char *want, const char *what)
{
	char err[256] = "";
	struct patch_site *s = patch_site_new(f, size, err, sizeof(err));

	ok(!s && strstr(err, want), "%s refused: %s", what, s ? "(accepted)" : err);
	patch_site_free(s);
}

static void basics(void)
{
	struct counts c = { 0 };
	uint8_t before[16];
	struct patch_site *s;
	long (*volatile push)(long, long) = f_push;
	long (*volatile rip)(long) = f_rip;
	long (*volatile nop)(long) = f_nop;
	long (*volatile args)(long, long, long, long, long, long, long, long) = f_args;

	memcpy(before, (void *)f_push, 16);
	s = arm((void *)f_push, fsize("f_push"), &c, true, "push rbp prologue");
	if (s) {
		ok(memcmp(before, (void *)f_push, 5) && ((uint8_t *)f_push)[0] == 0xe9,
		   "the function starts with a jmp");
		is_int(push(40, 2), 42, "the probed function still computes");
		is_int(c.entries, 1, "entry probe ran");
		is_int(c.exits, 1, "exit probe ran");
		ok(c.last_di == 40 && c.last_si == 2 && c.last_ax == 42,
		   "the probes saw di=40 si=2 and ax=42");
		is_u64(c.last_ip, (uint64_t)(uintptr_t)f_push, "ip is the function");
		for (int i = 0; i < 1000; i++)
			push(i, i);
		is_int(c.entries, 1001, "1000 more calls, 1000 more entries");
		is_int(patch_site_disarm(s), 0, "disarm");
		ok(!memcmp(before, (void *)f_push, 16), "the original bytes are back");
		is_int(push(1, 2), 3, "unprobed call");
		is_int(c.entries, 1001, "no probe after disarm");
	}
	patch_site_free(s);

	memset(&c, 0, sizeof(c));
	s = arm((void *)f_rip, fsize("f_rip"), &c, false, "RIP-relative first instruction");
	if (s) {
		is_int(rip(5), 1005, "the relocated RIP-relative load reads the same variable");
		rip_var = 7;
		is_int(rip(5), 12, "and follows it");
		is_int(c.entries, 2, "entry-only probe ran twice");
	}
	patch_site_free(s);

	memset(&c, 0, sizeof(c));
	s = arm((void *)f_nop, fsize("f_nop"), &c, true, "a 5-byte nop site");
	if (s) {
		ok(patch_site_nop(s), "recognised as a nop site");
		is_int(nop(9), 10, "nop site: result");
		ok(c.entries == 1 && c.exits == 1 && c.last_ax == 10, "nop site: probes ran");
	}
	patch_site_free(s);

	memset(&c, 0, sizeof(c));
	memcpy(before, (void *)f_lea_ret, 5);
	s = arm((void *)f_lea_ret, 5, &c, true, "a 5-byte function ending in ret");
	if (s) {
		long (*volatile lr)(long, long) = f_lea_ret;

		is_int(lr(40, 2), 42, "lea+ret: result through the trampoline");
		ok(c.entries == 1 && c.exits == 1 && c.last_ax == 42, "lea+ret: both probes ran");
		is_int(patch_site_disarm(s), 0, "lea+ret: disarm");
		ok(!memcmp(before, (void *)f_lea_ret, 5), "lea+ret: the original bytes are back");
	}
	patch_site_free(s);

	memset(&c, 0, sizeof(c));
	memcpy(before, (void *)f_getter, 8);
	refused((void *)f_getter, 4, "shorter than the 5-byte jump",
		"a 4-byte function without room");
	{
		char err[256];

		s = patch_site_new_room((void *)f_getter, 4, 14, err, sizeof(err));
		ok(s != NULL, "a 4-byte function followed by a 10-byte nop: accepted%s%s",
		   s ? "" : ": ", s ? "" : err);
		if (s && !patch_site_arm(s, on_entry, on_exit_, &c, err, sizeof(err))) {
			long (*volatile g)(long, long) = f_getter;

			is_int(g(1, 42), 42, "mov+ret over padding: result through the trampoline");
			ok(c.entries == 1 && c.exits == 1 && c.last_ax == 42,
			   "mov+ret over padding: both probes ran");
			is_int(patch_site_disarm(s), 0, "mov+ret over padding: disarm");
			ok(!memcmp(before, (void *)f_getter, 8),
			   "mov+ret over padding: the function and its padding are back");
		}
		patch_site_free(s);
	}
	refused((void *)f_short, 3, "shorter than", "a 3-byte function followed by code");

	memset(&c, 0, sizeof(c));
	s = arm((void *)f_args, 64, &c, true, "8 arguments, 2 on the stack, exit probe");
	if (s) {
		is_int(args(1, 2, 3, 4, 5, 6, 7, 8), 204,
		       "stack arguments reach the function through the trampoline");
		is_int(c.last_ax, 204, "exit probe saw the result");
	}
	patch_site_free(s);

	refused((void *)f_short, fsize("f_short"), "shorter than the 5-byte jump",
		"a 3-byte function");
	refused((void *)f_into, fsize("f_into"), "jumps into the patched bytes",
		"a loop back into the prologue");
	/* glibc's getppid (mov $0x6e,%eax; syscall; ret) with a uprobe on
	 * it: the kernel's int3 over the mov's first byte */
	static const uint8_t uprobed[] = { 0xcc, 0x6e, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3 };
	refused((void *)uprobed, sizeof(uprobed), "breakpoint another tracer put there",
		"a function under another tracer's uprobe");
}

static void *exiter(void *arg)
{
	long (*volatile f)(long) = f_exit;

	f(1);
	f(42);		/* pthread_exit unwinds through the trampoline */
	return (void *)-1;
}

static void unwinding(void)
{
	struct counts c = { 0 };
	struct patch_site *s;
	long (*volatile jumpy)(long) = f_jumpy;
	volatile int jumped = 0;
	pthread_t t;
	void *ret = NULL;

	s = arm((void *)f_jumpy, 64, &c, true, "longjmp target");
	if (s) {
		if (setjmp(jb) == 0)
			jumpy(-1);
		else
			jumped = 1;
		ok(jumped, "longjmp out of a probed function");
		is_int(jumpy(2), 7, "the function works after the longjmp");
		ok(c.entries == 2 && c.exits == 1, "entries 2, exits 1 (the longjmp skipped one)");
	}
	patch_site_free(s);

	memset(&c, 0, sizeof(c));
	s = arm((void *)f_exit, 64, &c, true, "pthread_exit target");
	if (s) {
		pthread_create(&t, NULL, exiter, NULL);
		pthread_join(t, &ret);
		is_int((long)ret, 42, "pthread_exit unwound through the trampoline");
		ok(c.entries == 2 && c.exits == 1, "entries 2, exits 1");
	}
	patch_site_free(s);
}

/* ---- a VM program as the entry handler ---------------------------------- */

static __thread struct vm_env tenv;

struct vmh {
	struct vm_prog *p;
};

static void vm_entry(struct patch_regs *r, void *arg)
{
	struct vmh *h = arg;

	vm_run(h->p, r, &tenv);
}

static void with_vm(void)
{
	struct vm_map_def d = { BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 1 };
	struct vm_map *m = vm_map_new(&d, 1);
	struct bpf_insn prog[] = {	/* slot value += arg(0) */
		MOV64_REG(BPF_REG_6, BPF_REG_1),
		ST_MEM(BPF_DW, BPF_REG_10, -8, 0),
		LD_IMM64_LO(BPF_REG_1, BPF_PSEUDO_MAP_FD, 0), LD_IMM64_HI(0),
		MOV64_REG(BPF_REG_2, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_2, -8),
		CALL_HELPER(BPF_FUNC_map_lookup_elem),
		JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 4),
		LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_6, 112),
		LDX_MEM(BPF_DW, BPF_REG_2, BPF_REG_0, 0),
		ALU64_REG(BPF_ADD, BPF_REG_2, BPF_REG_1),
		STX_MEM(BPF_DW, BPF_REG_0, BPF_REG_2, 0),
		MOV64_IMM(BPF_REG_0, 0), EXIT_INSN(),
	};
	char err[256];
	struct vmh h = { vm_prog_new(prog, sizeof(prog) / sizeof(prog[0]), &m, 1,
				     sizeof(struct patch_regs), err, sizeof(err)) };
	struct patch_site *s;
	long (*volatile push)(long, long) = f_push;
	uint32_t k = 0;
	struct timespec t0, t1;
	const int n = 1000000;

	ok(h.p && !vm_prog_jit(h.p), "a sum program verified and compiled%s%s",
	   h.p ? "" : ": ", h.p ? "" : err);
	if (!h.p)
		return;
	s = patch_site_new((void *)f_push, 32, err, sizeof(err));
	ok(s && !patch_site_arm(s, vm_entry, NULL, &h, err, sizeof(err)),
	   "f_push armed with the program");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++)
		push(i, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	is_u64(*(uint64_t *)vm_map_lookup(m, &k, 0), (uint64_t)n * (n - 1) / 2,
	       "the program summed arg(0) over %d calls", n);
	diag("%.1f ns per call with the probe (sanitized build)",
	     ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
	patch_site_free(s);
	vm_prog_free(h.p);
	vm_map_free(m);
}

/* ---- vector registers ---------------------------------------------------- */

__attribute__((noinline, noipa)) double f_fp(double a, double b, double c, double d,
					     double e, double f, double g, double h);
__attribute__((noinline, noipa)) double f_fp(double a, double b, double c, double d,
					     double e, double f, double g, double h)
{
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

static long vec_calls;

/* A handler that changes every argument and return vector register. */
static void clobber(struct patch_regs *r, void *arg)
{
	(void)r;
	(void)arg;
	__atomic_add_fetch(&vec_calls, 1, __ATOMIC_RELAXED);
	__asm__ volatile("pxor %%xmm0, %%xmm0\n pxor %%xmm1, %%xmm1\n pxor %%xmm2, %%xmm2\n"
			 "pxor %%xmm3, %%xmm3\n pxor %%xmm4, %%xmm4\n pxor %%xmm5, %%xmm5\n"
			 "pxor %%xmm6, %%xmm6\n pxor %%xmm7, %%xmm7\n" ::: "xmm0", "xmm1",
			 "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
}

/* A handler that keeps them (no vector code at all). */
__attribute__((target("general-regs-only"))) static void keeper(struct patch_regs *r,
								 void *arg)
{
	(void)arg;
	__atomic_add_fetch(&vec_calls, 1, __ATOMIC_RELAXED);
	r->ax += 0;
}

static double fp_calls(int n, bool *all_right)
{
	double (*volatile f)(double, double, double, double, double, double, double,
			     double) = f_fp;
	double sum = 0;

	*all_right = true;
	for (int i = 0; i < n; i++) {
		double v = f(i, 1, 2, 3, 4, 5, 6, 0.5);

		*all_right &= v == i + 2 + 6 + 12 + 20 + 30 + 42 + 4;
		sum += v;
	}
	return sum;
}

static void vectors(void)
{
	struct {
		patch_fn h;
		unsigned int flags;
		bool want_right;
		const char *what;
	} cases[] = {
		{ clobber, 0, true, "xmm0-7 saved around a handler that changes them" },
		{ keeper, PATCH_HANDLERS_KEEP_VECTORS, true,
		  "PATCH_HANDLERS_KEEP_VECTORS with a general-regs-only handler" },
		{ clobber, PATCH_HANDLERS_KEEP_VECTORS, false,
		  "PATCH_HANDLERS_KEEP_VECTORS: the trampoline saved no vector register" },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct patch_site *s = patch_site_new((void *)f_fp, 64, err, sizeof(err));
		bool right;

		vec_calls = 0;
		ok(s && !patch_site_arm_flags(s, cases[i].h, cases[i].h, NULL, cases[i].flags,
					      err, sizeof(err)), "f_fp armed (flags %u)%s%s",
		   cases[i].flags, s ? "" : ": ", s ? "" : err);
		fp_calls(1000, &right);
		patch_site_free(s);
		ok(right == cases[i].want_right && vec_calls == 2000, "%s (%s, %ld handler calls)",
		   cases[i].what, right ? "right results" : "wrong results", vec_calls);
	}
}

/* ---- stress -------------------------------------------------------------- */

static volatile int stop;
static long bad_results;

static long (*volatile stressed)(long, long);

static void *hammer(void *arg)
{
	long calls = 0;

	while (!stop) {
		long a = calls & 0xffff, b = (long)(uintptr_t)arg;

		if (stressed(a, b) != a + b)
			__atomic_add_fetch(&bad_results, 1, __ATOMIC_RELAXED);
		calls++;
	}
	return (void *)calls;
}

/* 8 threads call fn (a + b) while it is armed and disarmed `rounds` times. */
static void stress(long (*fn)(long, long), const char *what, int rounds)
{
	pthread_t t[8];
	struct counts c = { 0 };
	long calls = 0;
	int armed = 0;
	char err[256];

	stop = 0;
	bad_results = 0;
	stressed = fn;
	for (long i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, hammer, (void *)i);
	for (int round = 0; round < rounds; round++) {
		struct patch_site *s = patch_site_new((void *)fn, 32, err, sizeof(err));

		if (s && !patch_site_arm(s, on_entry, on_exit_, &c, err, sizeof(err)))
			armed++;
		usleep(2000);
		patch_site_free(s);
	}
	stop = 1;
	for (int i = 0; i < 8; i++) {
		void *r;

		pthread_join(t[i], &r);
		calls += (long)r;
	}
	usleep(10000);
	is_int(armed, rounds, "%s: armed and disarmed %d times under 8 busy threads", what,
	       rounds);
	is_int(bad_results, 0, "%s: every one of %ld calls returned the right result", what,
	       calls);
	ok(c.entries > 0 && c.entries == c.exits, "entries (%ld) = exits (%ld)", c.entries,
	   c.exits);
}

int main(void)
{
	basics();
	unwinding();
	with_vm();
	vectors();
	stress(f_push, "push rbp prologue", 100);
	/* a jmp to the next instruction first: the copies sit at other
	 * offsets than the originals (test_reloc.c: reloc.c's kinds) */
	stress(f_hop, "jmp rel8 first", 50);
	return test_done();
}
