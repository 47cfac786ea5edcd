// SPDX-License-Identifier: MIT
/*
 * bench_probe: the cost of a generated probe, fay vs bpftrace.
 *
 * Both count events per pid on tracepoint syscalls:sys_enter_getppid
 * (fay: IR -> regalloc -> bytecode into a PERCPU_HASH; bpftrace:
 * `@[pid] = count()`, LLVM).  Measured in the same run, medians of
 * --runs rounds:
 *   - per-event cost: ns per getppid() with the probe minus without
 *     (the baseline is measured right before and after each probe);
 *   - set-up time: from nothing to attached (fay: build IR, lower, load,
 *     attach; bpftrace: process start to its BEGIN probe).
 * Each round checks that the count is exactly the number of calls.
 *
 * usage: bench_probe [--calls N] [--runs R]      (root)
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

#include <bpf/bpf.h>

#include "bpf/ir.h"
#include "bpf/load.h"
#include "probe/probe.h"
#include "bench.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double loop_ns(long calls)
{
	double t0 = now_ns();

	for (long i = 0; i < calls; i++)
		syscall(SYS_getppid);
	return (now_ns() - t0) / calls;
}

/* Kernel-measured run time per run of program fd (bpf_stats_enabled). */
static double prog_ns_per_run(int fd, uint64_t *cnt)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len) || !info.run_cnt)
		return -1;
	*cnt = info.run_cnt;
	return (double)info.run_time_ns / info.run_cnt;
}

/* bpftrace's tracepoint program: the newest TRACEPOINT program with at
 * least calls runs. */
static double newest_tp_ns_per_run(long calls)
{
	uint32_t id = 0;
	double best = -1;

	while (!bpf_prog_get_next_id(id, &id)) {
		struct bpf_prog_info info = { 0 };
		uint32_t len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(id);

		if (fd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) &&
		    info.type == BPF_PROG_TYPE_TRACEPOINT &&
		    info.run_cnt >= (uint64_t)calls)
			best = (double)info.run_time_ns / info.run_cnt;
		close(fd);
	}
	return best;
}

/* fay: count per pid; returns the per-call ns, *setup_ns, *count. */
static int run_fay(long calls, double *call_ns, double *setup_ns, uint64_t *count,
		   const double *base_ns, double *run_ns)
{
	double t0 = now_ns();
	char err[300];
	struct probe *p = probe_new(PROBE_SYSCALL, "getppid", NULL, err, sizeof(err));
	struct bmap *m = bmap_new("counts", BPF_MAP_TYPE_PERCPU_HASH, 8, 8, 10240);
	struct bprog_opts o;
	struct bprog_diag d;
	struct bprog *prog = NULL;
	struct ir *ir;
	uint64_t key = (uint64_t)getpid();
	int rc = -1;

	if (!p || !m) {
		fprintf(stderr, "fay: %s\n", p ? "out of memory" : err);
		goto out;
	}
	ir = ir_new("count_pid");
	{
		int k = ir_stack_alloc(ir, 8, 8), z = ir_stack_alloc(ir, 8, 8);
		int done = ir_label_new(ir);
		ir_reg t = ir_vreg(ir), v = ir_vreg(ir), c = ir_vreg(ir);

		ir_call(ir, t, BPF_FUNC_get_current_pid_tgid, 0);
		ir_alu(ir, BPF_RSH, t, IR_I(32));
		ir_store(ir, IR_S(k), 0, 8, IR_R(t));
		ir_zero(ir, z, 8);
		ir_map_lookup_or_init(ir, v, m, k, z, done);
		ir_load(ir, c, IR_R(v), 0, 8, 0);
		ir_alu(ir, BPF_ADD, c, IR_I(1));
		ir_store(ir, IR_R(v), 0, 8, IR_R(c));
		ir_label(ir, done);
		ir_exit(ir, IR_I(0));
	}
	probe_prog_opts(p, &o);
	prog = bprog_load(ir, &o, &d);
	ir_free(ir);
	if (!prog || probe_attach(p, bprog_fd(prog))) {
		fprintf(stderr, "fay: %s\n", prog ? probe_strerror(p) : d.msg);
		bprog_diag_clear(&d);
		goto out;
	}
	*setup_ns = now_ns() - t0;
	*call_ns = loop_ns(calls);
	probe_detach(p);
	{
		uint64_t n;

		*run_ns = prog_ns_per_run(bprog_fd(prog), &n);
	}
	/* The machine drifts: charge the probe against the baseline right
	 * around it. */
	*call_ns -= (*base_ns + loop_ns(calls)) / 2;
	*count = 0;
	bmap_sum_u64(m, &key, 0, count);
	rc = 0;
out:
	probe_free(p);
	bprog_free(prog);
	bmap_free(m);
	return rc;
}

/* bpftrace: the same program; parses "@[PID]: N" at exit. */
static int run_bpftrace(long calls, double *call_ns, double *setup_ns, uint64_t *count,
			const double *base_ns, double *run_ns)
{
	double t0 = now_ns();
	pid_t pid;
	FILE *f;
	char line[256];
	int st;

	f = bench_bpftrace("BEGIN { printf(\"ready\\n\"); } "
			   "tracepoint:syscalls:sys_enter_getppid { @[pid] = count(); }", &pid);
	if (!f)
		return -1;
	*setup_ns = now_ns() - t0;
	*call_ns = loop_ns(calls);
	*run_ns = newest_tp_ns_per_run(calls);
	kill(pid, SIGINT);
	*count = 0;
	while (fgets(line, sizeof(line), f)) {
		long p;
		unsigned long long n;

		if (sscanf(line, "@[%ld]: %llu", &p, &n) == 2 && p == getpid())
			*count = n;
	}
	fclose(f);
	waitpid(pid, &st, 0);
	*call_ns -= (*base_ns + loop_ns(calls)) / 2;
	return 0;
}

int main(int argc, char **argv)
{
	long calls = 1000000;
	int runs = 7;
	double base[32], fay[32], bt[32], fs[32], bs[32], fr[32], br[32];
	FILE *stats;
	int was_on = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--calls") && i + 1 < argc)
			calls = atol(argv[++i]);
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: bench_probe [--calls N] [--runs R]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > 32 || calls < 1000) {
		fprintf(stderr, "bench_probe: --runs 1..32, --calls >= 1000\n");
		return 2;
	}
	/* Let the kernel time each program run (restored at the end). */
	stats = fopen("/proc/sys/kernel/bpf_stats_enabled", "r+");
	if (stats) {
		if (fscanf(stats, "%d", &was_on) != 1)
			was_on = 0;
		rewind(stats);
		fputs("1\n", stats);
		fflush(stats);
	}
	for (int r = 0; r < runs; r++) {
		uint64_t c1, c2;

		double b2;

		base[r] = loop_ns(calls);
		if (run_fay(calls, &fay[r], &fs[r], &c1, &base[r], &fr[r]))
			goto fail;
		b2 = loop_ns(calls);
		if (run_bpftrace(calls, &bt[r], &bs[r], &c2, &b2, &br[r]))
			goto fail;
		if (c1 != (uint64_t)calls || c2 != (uint64_t)calls) {
			fprintf(stderr, "count mismatch: fay %llu, bpftrace %llu, want %ld\n",
				(unsigned long long)c1, (unsigned long long)c2, calls);
			goto fail;
		}
		fprintf(stderr, "run %d: base %.1f ns/call, +fay %.1f, +bpftrace %.1f; "
			"in-kernel run fay %.1f ns, bpftrace %.1f ns; setup fay %.2f ms, "
			"bpftrace %.0f ms\n", r, base[r], fay[r], bt[r], fr[r], br[r],
			fs[r] / 1e6, bs[r] / 1e6);
	}
	{
		double b = median(base, runs), f = median(fay, runs), t = median(bt, runs);
		double sf = median(fs, runs), sb = median(bs, runs);

		printf("getppid() baseline: %.1f ns/call (%ld calls, median of %d runs)\n",
		       b, calls, runs);
		printf("probe cost per event: fay %.1f ns, bpftrace %.1f ns, "
		       "fay/bpftrace %.2f\n", f, t, t > 0 ? f / t : 0);
		double rf = median(fr, runs), rb = median(br, runs);

		printf("program run time (kernel bpf_stats): fay %.1f ns, bpftrace "
		       "%.1f ns, fay/bpftrace %.2f\n", rf, rb, rb > 0 ? rf / rb : 0);
		printf("set-up to attached:   fay %.2f ms, bpftrace %.0f ms, "
		       "fay/bpftrace %.4f\n", sf / 1e6, sb / 1e6, sf / sb);
	}
	runs = 0;	/* success */
fail:
	if (stats) {
		rewind(stats);
		fprintf(stats, "%d\n", was_on);
		fclose(stats);
	}
	return runs ? 1 : 0;
}
