// SPDX-License-Identifier: MIT
/*
 * bench_inline: what a function() probe adds to each call, inline (fay's
 * patcher + in-process VM) vs the kernel uprobe (fay's own uprobe path)
 * vs bpftrace vs `uftrace record -P`.
 *
 * The probed function, bench_target, starts with `lea rax, [rdi + 1]`
 * (4 bytes), an instruction the kernel's uprobes single-step (they
 * emulate only branches, nops and push).  Two queries, the programs
 * fay generates for them (the same bytecode in both fay modes):
 *   count:  from e in process(PID).function("bench_target") select count()
 *   hist:   ... select hist(e.duration)          (entry + exit probes)
 * bpftrace: `@c = count()` on a uprobe; uprobe + uretprobe with
 * `@h = hist(nsecs - @s[tid])`.  uftrace records entry and exit of
 * bench_target to a file (-P: dynamic patching).
 * Per round: the loop's ns per call without any probe right before, then
 * with each tracer; added ns = with - without.  Medians of --runs rounds.
 * Each fay round checks that the count (or the histogram's total) is the
 * number of calls.
 *
 * usage: bench_inline [--calls N] [--slow-calls N] [--runs R]    (root)
 *        bench_inline --child N     (the loop alone: uftrace runs this)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/engine_int.h"
#include "engine/inline.h"
#include "patch/patch.h"
#include "query/plan.h"
#include "query/query.h"
#include "vm/vm.h"
#include "bench.h"

long bench_target(long a, long b);
__asm__(".text\n.globl bench_target\n.type bench_target,@function\n"
	"bench_target:\n  lea 1(%rdi),%rax\n  add %rsi,%rax\n  ret\n"
	".size bench_target, .-bench_target\n");

static char self[4096];

/* CPU time of this thread: on a loaded machine wall time would count the
 * other processes' time slices; the kernel's uprobe handling is charged
 * to the thread, uftrace's writer process is not (nor is fay's reader). */
static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double loop_ns(long calls)
{
	long (*volatile f)(long, long) = bench_target;
	double t0 = cpu_ns();
	long s = 0;

	for (long i = 0; i < calls; i++)
		s += f(i, s & 1);
	__asm__ volatile("" : : "r"(s));
	return (cpu_ns() - t0) / calls;
}

/* ---- fay: plan a query on this process ---------------------------------- */

struct fq {
	struct query *q;
	struct engine *e;
};

static int fq_new(struct fq *f, const char *select, bool emit_only)
{
	char text[512], err[2048];
	const struct plan *p;
	struct engine_opts o = { .sz = sizeof(o), .emit_only = emit_only,
				 .buffer = ENGINE_BUF_RINGBUF, .pid = getpid() };

	snprintf(text, sizeof(text),
		 "from e in process(%d).function(\"bench_target\") select %s",
		 (int)getpid(), select);
	f->q = query_new("<bench>", text, strlen(text), NULL);
	if (!f->q || query_plan(f->q, &p)) {
		fprintf(stderr, "plan: %s\n", f->q && query_error(f->q) ? query_error(f->q) : "?");
		return -1;
	}
	f->e = engine_new(f->q, p, &o, err, sizeof(err));
	if (!f->e) {
		fprintf(stderr, "engine: %s%s\n", err, query_error(f->q) ? query_error(f->q) : "");
		return -1;
	}
	return 0;
}

static void fq_free(struct fq *f)
{
	engine_free(f->e);
	query_free(f->q);
}

/* ---- inline -------------------------------------------------------------- */

static __thread struct vm_env tenv;

static void h_entry(struct patch_regs *r, void *arg)
{
	vm_run(((struct engine_inline *)arg)->entry, r, &tenv);
}

static void h_exit(struct patch_regs *r, void *arg)
{
	vm_run(((struct engine_inline *)arg)->exit, r, &tenv);
}

/* Sum of the first u64 of vals (count) or of the 64 hist buckets. */
static uint64_t inline_total(struct engine *e, struct engine_inline *in, bool hist)
{
	uint32_t k = 0;
	uint64_t *v = vm_map_lookup(engine_inline_map(in, e->vals), &k, 0), t = 0;

	for (int i = 0; i < (hist ? 64 : 1); i++)
		t += v[i];
	return t;
}

static int run_inline(const char *select, bool hist, long calls, double *ns,
		      char *first, size_t firstlen)
{
	struct fq f;
	struct engine_inline in;
	struct patch_site *s;
	char err[1024];
	int rc = -1;

	if (fq_new(&f, select, true))
		return -1;
	if (engine_inline_new(f.e, 1, true, &in, err, sizeof(err))) {
		fprintf(stderr, "inline: %s\n", err);
		fq_free(&f);
		return -1;
	}
	tenv = (struct vm_env){ .slot = 0, .pid_tgid = (uint64_t)getpid() << 32 |
				(uint64_t)syscall(SYS_gettid),
				.now = vm_tsc_init() ? NULL : vm_tsc_now };
	s = patch_site_new((void *)bench_target, 8, err, sizeof(err));
	if (!s || patch_site_arm(s, h_entry, in.exit ? h_exit : NULL, &in, err, sizeof(err))) {
		fprintf(stderr, "patch: %s\n", err);
		goto out;
	}
	snprintf(first, firstlen, "%s", patch_site_first(s));
	*ns = loop_ns(calls);
	patch_site_free(s);
	s = NULL;
	if (inline_total(f.e, &in, hist) != (uint64_t)calls) {
		fprintf(stderr, "inline %s: total %llu, want %ld\n", select,
			(unsigned long long)inline_total(f.e, &in, hist), calls);
		goto out;
	}
	rc = 0;
out:
	patch_site_free(s);
	engine_inline_free(&in);
	fq_free(&f);
	return rc;
}

/* ---- kernel uprobe through fay's engine ---------------------------------- */

static int run_uprobe(const char *select, long calls, double *ns)
{
	struct fq f;
	int rc = -1;

	if (fq_new(&f, select, false))
		return -1;
	if (engine_load(f.e) || engine_attach(f.e)) {
		fprintf(stderr, "uprobe: %s", engine_error(f.e));
		goto out;
	}
	*ns = loop_ns(calls);
	rc = 0;
out:
	fq_free(&f);
	return rc;
}

/* ---- bpftrace ------------------------------------------------------------- */

static int run_bpftrace(bool hist, long calls, double *ns)
{
	char prog[12288];
	int st;
	pid_t pid;
	FILE *f;
	char line[256];
	long got = -1;

	if (hist)
		snprintf(prog, sizeof(prog),
			 "BEGIN { printf(\"ready\\n\"); } "
			 "uprobe:%s:bench_target /pid == %d/ { @s[tid] = nsecs; } "
			 "uretprobe:%s:bench_target /@s[tid]/ { @h = hist(nsecs - @s[tid]); "
			 "delete(@s[tid]); @n = count(); }", self, (int)getpid(), self);
	else
		snprintf(prog, sizeof(prog),
			 "BEGIN { printf(\"ready\\n\"); } "
			 "uprobe:%s:bench_target /pid == %d/ { @n = count(); }",
			 self, (int)getpid());
	f = bench_bpftrace(prog, &pid);
	if (!f)
		return -1;
	*ns = loop_ns(calls);
	kill(pid, SIGINT);
	while (fgets(line, sizeof(line), f))
		sscanf(line, "@n: %ld", &got);
	fclose(f);
	waitpid(pid, &st, 0);
	if (got != calls) {
		fprintf(stderr, "bpftrace counted %ld, want %ld\n", got, calls);
		return -1;
	}
	return 0;
}

/* ---- uftrace --------------------------------------------------------------- */

static int run_uftrace(long calls, double *ns)
{
	char dir[] = "/tmp/fay-bench-uftrace.XXXXXX", n[32], line[256];
	int out[2], st;
	pid_t pid;
	FILE *f;
	int rc = -1;

	if (!mkdtemp(dir) || pipe(out))
		return -1;
	snprintf(n, sizeof(n), "%ld", calls);
	pid = fork();
	if (pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		close(out[1]);
		execlp("uftrace", "uftrace", "record", "--no-libcall", "-P", "bench_target",
		       "-d", dir, self, "--child", n, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	f = fdopen(out[0], "r");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "child %lf", ns) == 1)
			rc = 0;
	fclose(f);
	waitpid(pid, &st, 0);
	snprintf(line, sizeof(line), "rm -rf %s", dir);
	if (system(line)) {
		/* nothing to do: a temporary directory left behind */
	}
	if (rc)
		fprintf(stderr, "uftrace did not run the loop\n");
	return rc;
}

int main(int argc, char **argv)
{
	long calls = 2000000, slow = 20000;
	int runs = 5;
	enum { BASE, I_CNT, I_HIST, U_CNT, U_HIST, B_CNT, B_HIST, UFT, NM };
	static const char *const name[NM] = {
		"no probe", "fay inline count", "fay inline hist", "fay uprobe count",
		"fay uprobe hist", "bpftrace count", "bpftrace hist", "uftrace -P",
	};
	double v[NM][32], med[NM];
	char first[64] = "?";

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--child") && i + 1 < argc) {
			long n = atol(argv[i + 1]);

			printf("child %.2f\n", loop_ns(n));
			return 0;
		} else if (!strcmp(argv[i], "--calls") && i + 1 < argc) {
			calls = atol(argv[++i]);
		} else if (!strcmp(argv[i], "--slow-calls") && i + 1 < argc) {
			slow = atol(argv[++i]);
		} else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: bench_inline [--calls N] [--slow-calls N] "
				"[--runs R]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > 32)
		runs = 5;
	if (readlink("/proc/self/exe", self, sizeof(self) - 1) < 0)
		return 1;
	for (int r = 0; r < runs; r++) {
		double base = loop_ns(calls), base_slow = loop_ns(slow), x;

		v[BASE][r] = base;
		if (run_inline("count()", false, calls, &x, first, sizeof(first)))
			return 1;
		v[I_CNT][r] = x - base;
		if (run_inline("hist(e.duration)", true, calls, &x, first, sizeof(first)))
			return 1;
		v[I_HIST][r] = x - base;
		if (run_uprobe("count()", slow, &x))
			return 1;
		v[U_CNT][r] = x - base_slow;
		if (run_uprobe("hist(e.duration)", slow, &x))
			return 1;
		v[U_HIST][r] = x - base_slow;
		if (run_bpftrace(false, slow, &x))
			return 1;
		v[B_CNT][r] = x - base_slow;
		if (run_bpftrace(true, slow, &x))
			return 1;
		v[B_HIST][r] = x - base_slow;
		if (run_uftrace(slow * 10, &x))
			return 1;
		v[UFT][r] = x - loop_ns(slow * 10);
		fprintf(stderr, "run %d:", r);
		for (int m = 0; m < NM; m++)
			fprintf(stderr, " %s %.1f;", name[m], v[m][r]);
		fprintf(stderr, "\n");
	}
	for (int m = 0; m < NM; m++)
		med[m] = median(v[m], (unsigned)runs);
	printf("probed function: bench_target, first instruction `%s` "
	       "(single-stepped by kernel uprobes)\n", first);
	printf("added ns per call, median of %d runs (loop without probe: %.2f ns/call):\n",
	       runs, med[BASE]);
	for (int m = 1; m < NM; m++)
		printf("  %-18s %10.1f ns\n", name[m], med[m]);
	printf("ratios: inline count / uprobe count %.4f, inline hist / uprobe hist %.4f,\n"
	       "        inline count / bpftrace count %.4f, inline hist / bpftrace hist %.4f,\n"
	       "        inline hist / uftrace %.3f\n",
	       med[I_CNT] / med[U_CNT], med[I_HIST] / med[U_HIST], med[I_CNT] / med[B_CNT],
	       med[I_HIST] / med[B_HIST], med[I_HIST] / med[UFT]);
	return 0;
}
