// SPDX-License-Identifier: MIT
/*
 * Real probes with programs built from the IR: syscall tracepoints
 * counted in a PERCPU_HASH, uprobe + uretprobe pairing in a per-thread
 * map, USDT, profile sampling, and nothing left in the kernel afterwards.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/sdt.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "test.h"
#include "progs.h"
#include "probe/probe.h"

#define K 1000

/* A uprobe target with known arguments and return value. */
__attribute__((noinline, used)) long fay_test_target(long a, long b);
__attribute__((noinline, used)) long fay_test_target(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return a + b;
}

/* A USDT site. */
__attribute__((noinline, used)) void fay_test_usdt(long i);
__attribute__((noinline, used)) void fay_test_usdt(long i)
{
	STAP_PROBE2(faytest, tick, i, 2 * i);
	__asm__ volatile("" ::: "memory");
}

/* Load ir for probe p and attach; NULL (and a failed test line) if not. */
static struct bprog *load_attach(struct probe *p, struct ir *ir, const char *what)
{
	struct bprog_opts o;
	struct bprog_diag d;
	struct bprog *prog;
	int err;

	probe_prog_opts(p, &o);
	prog = bprog_load(ir, &o, &d);
	ok(prog != NULL, "%s: program loads (%.300s)", what, prog ? "ok" : d.msg);
	bprog_diag_clear(&d);
	if (!prog)
		return NULL;
	err = probe_attach(p, bprog_fd(prog));
	ok(!err, "%s: attached as %s (%.300s)", what, probe_describe(p),
	   err ? probe_strerror(p) : "ok");
	if (err) {
		bprog_free(prog);
		return NULL;
	}
	return prog;
}

static bool prog_gone(uint32_t id)
{
	int fd = bpf_prog_get_fd_by_id(id);

	if (fd >= 0) {
		close(fd);
		return false;
	}
	return errno == ENOENT;
}

/* Detach, free and check the kernel forgot the program. */
static void teardown(struct probe *p, struct bprog *prog, const char *what)
{
	uint32_t id = prog ? bprog_id(prog) : 0;

	probe_free(p);
	bprog_free(prog);
	if (id)
		ok(prog_gone(id), "%s: program %u gone after detach", what, id);
}

/* A child that waits for a byte on a pipe, then calls getppid() n times. */
static pid_t spawn_getppid(int n, int *go)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		char c;

		close(fds[1]);
		if (read(fds[0], &c, 1) != 1)
			_exit(2);
		for (int i = 0; i < n; i++)
			syscall(SYS_getppid);
		_exit(0);
	}
	close(fds[0]);
	*go = fds[1];
	return pid;
}

/*
 * Let the child run and wait until it has exited, leaving it a zombie so
 * that its pid cannot be reused before reap_child().
 */
static void run_child(pid_t pid, int go)
{
	siginfo_t si;

	if (write(go, "x", 1) != 1)
		diag("write: %s", strerror(errno));
	close(go);
	if (waitid(P_PID, pid, &si, WEXITED | WNOWAIT))
		diag("waitid %d: %s", (int)pid, strerror(errno));
}

static void reap_child(pid_t pid)
{
	int st;

	waitpid(pid, &st, 0);
}

/*
 * Two getppid() children, decoy forked before child so decoy < child (a
 * pair the pid counter wrapped between is thrown away).  0, or -1 if fork
 * or pipe failed.
 */
static int spawn_pair(int n, pid_t *decoy, int *dgo, pid_t *child, int *cgo)
{
	for (int tries = 0; tries < 4; tries++) {
		*decoy = spawn_getppid(n, dgo);
		*child = *decoy > 0 ? spawn_getppid(n, cgo) : -1;
		if (*child > *decoy)
			return 0;
		if (*decoy > 0) {
			close(*dgo);
			reap_child(*decoy);
		}
		if (*child > 0) {
			close(*cgo);
			reap_child(*child);
		}
	}
	return -1;
}

/*
 * Count getppid() per tgid above min_pid = child - 1 while a decoy, an
 * older child of ours, makes the same K calls.  Other processes on the
 * machine may call getppid() too, and those with a pid above min_pid are
 * rightly counted: the checks look only at our pids and at the filter's
 * bound, never at how many keys the map holds.
 */
static void test_syscall_count(void)
{
	struct bmap *m = bmap_new("counts", BPF_MAP_TYPE_PERCPU_HASH, 8, 8, 8192);
	char err[300];
	struct probe *p = probe_new(PROBE_SYSCALL, "getppid", NULL, err, sizeof(err));
	struct probe *px = probe_new(PROBE_SYSCALL_EXIT, "getppid", NULL, err, sizeof(err));
	struct bprog *prog = NULL, *progx = NULL;
	struct ir *ir = NULL, *irx = NULL;
	uint64_t key, sum = 0;
	int go = -1, dgo = -1, out, k, z;
	pid_t child, decoy;

	ok(p && px, "syscall(\"getppid\") resolves: %s", p && px ? probe_describe(p) : err);
	if (!p || !px)
		goto out;
	if (spawn_pair(K, &decoy, &dgo, &child, &go)) {
		ok(0, "fork two children: %s", strerror(errno));
		goto out;
	}
	/* entry: count per tgid (key 0 = entry) */
	ir = prog_count_per_pid(m, child - 1);
	prog = load_attach(p, ir, "sys_enter_getppid");
	/* exit: count the calls whose return value is our pid at key 1 */
	irx = ir_new("exit_ret");
	k = ir_stack_alloc(irx, 8, 8);
	z = ir_stack_alloc(irx, 8, 8);
	out = ir_label_new(irx);
	{
		ir_reg r = ir_vreg(irx), v = ir_vreg(irx), c = ir_vreg(irx);

		emit_only_tgid(irx, child, out);
		is_int(probe_emit_ret(px, irx, r), 0, "ret of sys_exit_getppid");
		ir_jmp(irx, BPF_JNE, r, IR_I(getpid()), out);
		ir_store(irx, IR_S(k), 0, 8, IR_I(1));
		ir_zero(irx, z, 8);
		ir_map_lookup_or_init(irx, v, m, k, z, out);
		ir_load(irx, c, IR_R(v), 0, 8, 0);
		ir_alu(irx, BPF_ADD, c, IR_I(1));
		ir_store(irx, IR_R(v), 0, 8, IR_R(c));
		ir_label(irx, out);
		ir_exit(irx, IR_I(0));
	}
	progx = load_attach(px, irx, "sys_exit_getppid");
	run_child(decoy, dgo);
	run_child(child, go);
	key = (uint64_t)child;
	is_int(bmap_sum_u64(m, &key, 0, &sum), 0, "child's key present");
	is_u64(sum, K, "per-CPU counts of getppid() by the child sum to K");
	key = (uint64_t)decoy;
	ok(bmap_sum_u64(m, &key, 0, &sum) != 0,
	   "decoy (pid %d <= min_pid %d) not counted", (int)decoy, (int)child - 1);
	key = 1;
	sum = 0;
	bmap_sum_u64(m, &key, 0, &sum);
	is_u64(sum, K, "sys_exit_getppid saw ret == our pid K times (child only)");
	{
		/* Key 1 aside, no key at or below min_pid: the filter held. */
		uint64_t a, b;
		int low = 0, above = 0;

		for (int r = bmap_next_key(m, NULL, &a); !r; r = bmap_next_key(m, &a, &b), a = b) {
			if (a == 1 || a == (uint64_t)child)
				continue;
			if (a <= (uint64_t)child - 1)
				low++;
			else
				above++;
		}
		is_int(low, 0, "no other process at or below min_pid counted");
		diag("%d other processes above min_pid called getppid()", above);
	}
	reap_child(decoy);
	reap_child(child);
out:
	teardown(p, prog, "getppid entry");
	teardown(px, progx, "getppid exit");
	ir_free(ir);
	ir_free(irx);
	bmap_free(m);
}

enum { ST_CALLS, ST_SUM_A, ST_SUM_B, ST_PAIRED, ST_POSITIVE, ST_SUM_RET, ST_N };

static void test_uprobe_pairing(void)
{
	struct bmap *start = bmap_new("start", BPF_MAP_TYPE_HASH, 8, 8, 1024);
	struct bmap *st = bmap_new("stats", BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, ST_N);
	struct probe_opts po = { .sz = sizeof(po), .pid = getpid() };
	char spec[4200], self[4096], err[512];
	struct probe *pe = NULL, *px = NULL;
	struct bprog *ge = NULL, *gx = NULL;
	struct ir *ie = NULL, *ix = NULL;
	uint64_t want_a = 0, want_b = 0, want_ret = 0, v;
	volatile long sink = 0;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	self[n > 0 ? n : 0] = '\0';
	snprintf(spec, sizeof(spec), "%s:fay_test_target", self);
	pe = probe_new(PROBE_UPROBE, spec, &po, err, sizeof(err));
	ok(pe != NULL, "uprobe resolves: %.300s", pe ? probe_describe(pe) : err);
	px = probe_new(PROBE_URETPROBE, spec, &po, err, sizeof(err));
	ok(px != NULL, "uretprobe resolves: %.300s", px ? probe_describe(px) : err);
	if (!pe || !px)
		goto out;

	/* entry: start[tid] = now; stats += 1, a, b */
	ie = ir_new("u_entry");
	{
		int key = ir_stack_alloc(ie, 8, 8), val = ir_stack_alloc(ie, 8, 8);
		int out = ir_label_new(ie);
		ir_reg a = ir_vreg(ie), b = ir_vreg(ie), t = ir_vreg(ie), now = ir_vreg(ie);

		is_int(probe_emit_arg(pe, ie, a, 0), 0, "emit arg(0)");
		is_int(probe_emit_arg(pe, ie, b, 1), 0, "emit arg(1)");
		ir_call(ie, t, BPF_FUNC_get_current_pid_tgid, 0);
		ir_call(ie, now, BPF_FUNC_ktime_get_ns, 0);
		ir_store(ie, IR_S(key), 0, 8, IR_R(t));
		ir_store(ie, IR_S(val), 0, 8, IR_R(now));
		ir_call(ie, IR_NOREG, BPF_FUNC_map_update_elem, 4, IR_M(start),
			IR_S(key), IR_S(val), IR_I(BPF_ANY));
		emit_array_add(ie, st, key, ST_CALLS, IR_I(1), out);
		emit_array_add(ie, st, key, ST_SUM_A, IR_R(a), out);
		emit_array_add(ie, st, key, ST_SUM_B, IR_R(b), out);
		ir_label(ie, out);
		ir_exit(ie, IR_I(0));
	}
	/* exit: d = now - start[tid]; stats += paired, d > 0, ret */
	ix = ir_new("u_exit");
	{
		int key = ir_stack_alloc(ix, 8, 8), out = ir_label_new(ix);
		int skip = ir_label_new(ix);
		ir_reg t = ir_vreg(ix), sp = ir_vreg(ix), d = ir_vreg(ix), r = ir_vreg(ix);
		ir_reg now = ir_vreg(ix);

		is_int(probe_emit_ret(px, ix, r), 0, "emit ret");
		ir_call(ix, now, BPF_FUNC_ktime_get_ns, 0);
		ir_call(ix, t, BPF_FUNC_get_current_pid_tgid, 0);
		ir_store(ix, IR_S(key), 0, 8, IR_R(t));
		ir_call(ix, sp, BPF_FUNC_map_lookup_elem, 2, IR_M(start), IR_S(key));
		ir_jmp(ix, BPF_JEQ, sp, IR_I(0), out);
		ir_load(ix, d, IR_R(sp), 0, 8, 0);
		ir_call(ix, IR_NOREG, BPF_FUNC_map_delete_elem, 2, IR_M(start), IR_S(key));
		ir_alu(ix, BPF_SUB, now, IR_R(d));
		emit_array_add(ix, st, key, ST_PAIRED, IR_I(1), out);
		emit_array_add(ix, st, key, ST_SUM_RET, IR_R(r), out);
		ir_jmp(ix, BPF_JSLE, now, IR_I(0), skip);
		emit_array_add(ix, st, key, ST_POSITIVE, IR_I(1), out);
		ir_label(ix, skip);
		ir_label(ix, out);
		ir_exit(ix, IR_I(0));
	}
	ge = load_attach(pe, ie, "uprobe");
	gx = load_attach(px, ix, "uretprobe");
	if (!ge || !gx)
		goto out;
	for (long i = 0; i < K; i++) {
		sink += fay_test_target(i, 1000 + i);
		want_a += i;
		want_b += 1000 + i;
		want_ret += 1000 + 2 * i;
	}
	for (uint32_t i = 0; i < ST_N; i++) {
		uint64_t want[ST_N] = { K, want_a, want_b, K, K, want_ret };
		static const char *const what[ST_N] = { "calls", "sum of arg(0)",
			"sum of arg(1)", "entry/exit pairs", "positive durations",
			"sum of ret" };

		v = 0;
		bmap_sum_u64(st, &i, 0, &v);
		is_u64(v, want[i], "uprobe: %s", what[i]);
	}
	{
		uint64_t k0, k1;

		ok(bmap_next_key(start, NULL, &k0) == -ENOENT,
		   "per-thread start map is empty again");
		(void)k1;
	}
out:
	teardown(pe, ge, "uprobe");
	teardown(px, gx, "uretprobe");
	ir_free(ie);
	ir_free(ix);
	bmap_free(start);
	bmap_free(st);
}

static void test_usdt(void)
{
	struct bmap *st = bmap_new("ustats", BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 4);
	char spec[4200], self[4096], err[512];
	struct probe_opts po = { .sz = sizeof(po), .pid = getpid() };
	struct probe *p;
	struct bprog *g = NULL;
	struct ir *ir = NULL;
	uint64_t v, want1 = 0, want2 = 0;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	self[n > 0 ? n : 0] = '\0';
	snprintf(spec, sizeof(spec), "%s:faytest:tick", self);
	p = probe_new(PROBE_USDT, spec, &po, err, sizeof(err));
	ok(p != NULL, "usdt resolves: %.300s", p ? probe_describe(p) : err);
	if (!p)
		goto out;
	is_int(probe_nargs(p), 2, "usdt has 2 arguments");
	ir = ir_new("usdt");
	{
		int key = ir_stack_alloc(ir, 8, 8), out = ir_label_new(ir);
		ir_reg a = ir_vreg(ir), b = ir_vreg(ir);

		is_int(probe_emit_arg(p, ir, a, 0), 0, "usdt arg(0)");
		is_int(probe_emit_arg(p, ir, b, 1), 0, "usdt arg(1)");
		emit_array_add(ir, st, key, 0, IR_I(1), out);
		emit_array_add(ir, st, key, 1, IR_R(a), out);
		emit_array_add(ir, st, key, 2, IR_R(b), out);
		ir_label(ir, out);
		ir_exit(ir, IR_I(0));
	}
	g = load_attach(p, ir, "usdt");
	if (!g)
		goto out;
	for (long i = 0; i < K; i++) {
		fay_test_usdt(i);
		want1 += i;
		want2 += 2 * i;
	}
	for (uint32_t i = 0; i < 3; i++) {
		uint64_t want[3] = { K, want1, want2 };

		v = 0;
		bmap_sum_u64(st, &i, 0, &v);
		is_u64(v, want[i], "usdt: stat %u", i);
	}
out:
	teardown(p, g, "usdt");
	ir_free(ir);
	bmap_free(st);
}

/* A thread spinning on one CPU: a timer-driven sample lands on a running
 * CPU, not on a vCPU the host may have descheduled while idle (on this VM
 * an idle vCPU saw 21 samples/s of 97 once). */
struct spinner {
	pthread_t t;
	int cpu;
	volatile int *stop;
};

static void *spin(void *arg)
{
	struct spinner *s = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(s->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	while (!*s->stop)
		;
	return NULL;
}

static void test_profile(void)
{
	struct bmap *st = bmap_new("pstats", BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 1);
	struct probe_opts po = { .sz = sizeof(po), .hz = 97 };
	char err[300];
	struct probe *p = probe_new(PROBE_PROFILE, "", &po, err, sizeof(err));
	struct bprog *g = NULL;
	struct ir *ir = NULL;
	struct timespec t0, t1;
	int ncpu = bpf_ncpus();
	uint64_t *vals = NULL;
	uint32_t key = 0;
	double secs;

	ok(p != NULL, "profile(97) resolves: %s", p ? probe_describe(p) : err);
	if (!p)
		goto out;
	ir = ir_new("prof");
	{
		int k = ir_stack_alloc(ir, 8, 8), out = ir_label_new(ir);
		ir_reg ip = ir_vreg(ir);

		is_int(probe_emit_field(p, ir, ip, "ip"), 0, "profile field ip");
		emit_array_add(ir, st, k, 0, IR_I(1), out);
		ir_label(ir, out);
		ir_exit(ir, IR_I(0));
	}
	volatile int stop = 0;
	struct spinner *sp = calloc(ncpu, sizeof(*sp));

	for (int c = 0; sp && c < ncpu; c++) {
		sp[c] = (struct spinner){ .cpu = c, .stop = &stop };
		pthread_create(&sp[c].t, NULL, spin, &sp[c]);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	g = load_attach(p, ir, "profile");
	if (g)
		sleep(2);
	probe_detach(p);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	stop = 1;
	for (int c = 0; sp && c < ncpu; c++)
		pthread_join(sp[c].t, NULL);
	free(sp);
	if (!g)
		goto out;
	secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	vals = calloc(ncpu, 8);
	bmap_lookup(st, &key, vals);
	for (int c = 0; c < ncpu; c++) {
		double rate = vals[c] / secs;

		ok(rate > 97 * 0.5 && rate < 97 * 1.5,
		   "cpu %d: %.1f samples/s at 97 Hz (%" PRIu64 " in %.2fs)", c, rate,
		   vals[c], secs);
	}
out:
	free(vals);
	teardown(p, g, "profile");
	ir_free(ir);
	bmap_free(st);
}

/* probe_new(kind, spec) must fail with a message containing want. */
static void bad(enum probe_kind kind, const char *spec, const char *want)
{
	char err[300];
	struct probe *p = probe_new(kind, spec, NULL, err, sizeof(err));

	ok(!p && strstr(err, want), "\"%s\" refused: %s", spec, err);
	probe_free(p);
}

static void test_bad_specs(void)
{
	bad(PROBE_SYSCALL, "no_such_call", "no syscall \"no_such_call\"");
	bad(PROBE_TRACEPOINT, "sched", "subsystem:event");
	bad(PROBE_TRACEPOINT, "sched:nope", "no tracepoint");
	bad(PROBE_UPROBE, "libc:no_such_function_x", "no function \"no_such_function_x\"");
	bad(PROBE_UPROBE, "libnotthere:read", "cannot find \"libnotthere\"");
	bad(PROBE_UPROBE, "read", "expected \"library:function\"");
	bad(PROBE_USDT, "/bin/true:nope:nothing", "no USDT probe nope:nothing");
	bad(PROBE_KFUNC, "no_such_kfunc_xyz", "no such kernel function");
	bad(PROBE_PROFILE, "0", "rate must be");
}

static void test_fields(void)
{
	char err[300];
	struct probe *p = probe_new(PROBE_TRACEPOINT, "sched:sched_switch", NULL,
				    err, sizeof(err));
	struct probe *r = probe_new(PROBE_SYSCALL, "read", NULL, err, sizeof(err));
	struct ir *ir = ir_new("f");
	const struct probe_field *f;
	size_t n = 0;
	ir_reg v = ir_vreg(ir);
	int slot = ir_stack_alloc(ir, 16, 8);

	ok(p != NULL, "sched:sched_switch resolves");
	if (p) {
		f = probe_fields(p, &n);
		ok(n >= 6 && !strcmp(f[0].name, "prev_comm") && f[0].is_array &&
		   f[0].size == 16, "prev_comm is char[16] at %d", n ? f[0].offset : -1);
		is_int(probe_emit_field(p, ir, v, "prev_pid"), 0, "scalar field");
		is_int(probe_emit_field(p, ir, v, "prev_comm"), -EOPNOTSUPP,
		       "array field is not a scalar");
		is_int(probe_emit_field_copy(p, ir, slot, 16, "prev_comm"), 0,
		       "array field copies to the stack");
		is_int(probe_emit_field(p, ir, v, "nope"), -ENOENT, "unknown field: %.200s",
		       probe_strerror(p));
		is_int(probe_emit_ret(p, ir, v), -EOPNOTSUPP, "tracepoint has no ret");
	}
	ok(r && probe_nargs(r) == 3, "read has 3 arguments");
	if (r) {
		is_int(probe_emit_arg(r, ir, v, 2), 0, "read arg(2)");
		is_int(probe_emit_arg(r, ir, v, 3), -ENOENT, "read arg(3): %.200s",
		       probe_strerror(r));
	}
	ir_exit(ir, IR_I(0));
	{
		struct bprog_opts o = { .sz = sizeof(o), .type = BPF_PROG_TYPE_TRACEPOINT };
		struct bprog_diag d;
		struct bprog *g = bprog_load(ir, &o, &d);

		ok(g != NULL, "field reads pass the verifier: %.300s", g ? "ok" : d.msg);
		bprog_diag_clear(&d);
		bprog_free(g);
	}
	ir_free(ir);
	probe_free(p);
	probe_free(r);
}

int main(void)
{
	if (geteuid() != 0 && !bpf_have_privileges())
		skip_all("needs root or CAP_BPF+CAP_PERFMON to load BPF");
	if (!tracefs_dir())
		skip_all("no tracefs and cannot mount it: %s", strerror(errno));
	test_bad_specs();
	test_fields();
	test_syscall_count();
	test_uprobe_pairing();
	test_usdt();
	test_profile();
	return test_done();
}
