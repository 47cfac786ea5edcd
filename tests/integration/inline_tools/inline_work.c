// SPDX-License-Identifier: MIT
/*
 * inline_work: workloads for inline probes (tests/integration/inline_*.sh,
 * bench/bench_inline_run.sh), each checking its own results.
 *
 *   inline_work calls K          fay_inline_fn(i, 7) for i in 0..K-1
 *   inline_work threads N FILE   N threads call fay_inline_fn(i, 7) in a
 *                                tight loop until FILE exists; prints
 *                                "calls C bad B" (B: wrong results)
 *   inline_work loop FILE        the same on the main thread alone
 *   inline_work manythreads N K  two waves of N threads (up to 1000), all
 *                                of a wave alive at once (a barrier), each
 *                                calling fay_inline_fn(i, 7) K times, then
 *                                exiting; prints "calls C bad B"
 *   inline_work signals K        the main thread calls fay_inline_fn(i, 7) K
 *                                times while another sends it SIGUSR1 as
 *                                fast as it can; the handler calls
 *                                fay_inline_fn(1, 7) once and notes where
 *                                it interrupted; prints "calls C bad B
 *                                signals S in_probe P": P of the signals
 *                                interrupted the probe machinery (the
 *                                runtime library or anonymous executable
 *                                memory: trampolines, JIT code)
 *   inline_work dlopen K LIB DIR dlopen(LIB), create DIR/ready, wait for
 *                                DIR/go; call its fay_lib_fn(i, 1) K times,
 *                                dlclose it, create DIR/closed, wait for
 *                                DIR/end; dlopen it again and call it K
 *                                times; prints "calls C bad B"
 *   inline_work lat K            fay_inline_lat(i, 1) K times (8 bytes:
 *                                "lea 1(%rdi),%rax; add %rsi,%rax; ret",
 *                                patchable by uftrace -P too); QW_TIME=1
 *                                prints "loop_ns N cpu_ns M" (the loop's
 *                                wall and process CPU time)
 *   inline_work sleep K MS       fay_inline_sleep(MS) K times; prints
 *                                "sum_ns S max_ns M": each call's time as
 *                                its caller measured it (CLOCK_MONOTONIC)
 *   inline_work forkexec K       fork: the child calls fay_inline_fn K
 *                                times, then execs "inline_work calls K";
 *                                the parent waits for it, then calls
 *                                fay_inline_fn(1000 + i, 7) K times
 *   inline_work sid K [PROG ARG...]  getsid(0) and fay_inline_fn(i, 7) K
 *                                times each (getsid: a libc function no
 *                                other test probes); prints "sid calls K
 *                                bad B";
 *                                then execs PROG ARG... if given (a
 *                                chain of images under one pid: fay run
 *                                follows exec)
 *   inline_work tsc K            K pairs of rdtsc (the floor of timing a
 *                                call from two TSC reads); QW_TIME=1 as lat
 *   inline_work fp K             fay_inline_fp(i, 1, 2, 3, 4, 5, 6, 0.5)
 *                                K times (eight double arguments in
 *                                xmm0-7, a double result in xmm0)
 *   inline_work rec K D US       K rounds of fay_inline_rec(d, US, 0) for
 *                                d = 1..D: a recursion d calls deep (args
 *                                d, d-1, .., 1), each call sleeping US
 *                                microseconds after its inner call (a
 *                                call with arg v lasts >= v * US us); the
 *                                calls with arg v: K * (D - v + 1)
 *   inline_work jump K D J US    K rounds of: fay_inline_rec(J, 0, 1),
 *                                whose innermost call longjmp()s out of
 *                                all J (no exit returns), then
 *                                fay_inline_rec(D, US, 0): K calls of
 *                                each arg 1..D return
 *   inline_work branchy K        fay_inline_branchy(i, 7) K times: a
 *                                later jump lands in its first 5 bytes
 *                                (a site the patcher refuses)
 *   inline_work phases DIR K     phase 1: the main thread calls
 *                                fay_inline_fn(i, 7) until DIR/stop1
 *                                exists (a 100 us sleep every 4096
 *                                calls); with QW_SIGJMP=1 without the
 *                                sleeps, while another thread sends it
 *                                SIGUSR2 as fast as it can, whose handler
 *                                siglongjmp()s out of wherever it landed
 *                                (the probed call, its probes) back into
 *                                the loop; prints "phase1 tries T returns
 *                                R jumps J bad B in_probe P" (a call that
 *                                returned is one of the R, every call is
 *                                one of the T), creates DIR/ready2, waits
 *                                for DIR/go2; phase 2: K calls of
 *                                fay_inline_fn(i, 7), no signals;
 *                                creates DIR/done2, waits for DIR/end;
 *                                prints "phase2 calls K bad B";
 *                                QW_TRIES=N ends phase 1 after N calls
 *
 * Exit status 0 when every call returned a + b, 1 otherwise.
 * QW_NOROOM=1 first fills every free page within 1 GiB + 2 MiB of
 * fay_inline_fn with a PROT_NONE mapping: no trampoline can be mapped
 * near it, so an inline probe's ARM fails after its site was accepted.
 * QW_WAIT=PATH waits until PATH exists before starting; QW_READY=PATH
 * creates PATH first, in main (glibc mapped and started: fay may attach
 * to or load its runtime into the process; before that /proc/PID/exe may
 * still be the shell that forked it).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

/* The probed function: "lea (%rdi,%rsi),%rax; ret" at -O2. */
__attribute__((noinline, noipa, used)) long fay_inline_fn(long a, long b);
long fay_inline_fn(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return a + b;
}

/* A function with a jump back to its second instruction (+3, inside the
 * bytes the 5-byte jump would cover; never taken): the patcher refuses
 * it, a uprobe takes it. */
long fay_inline_branchy(long a, long b);
__asm__(".text\n.globl fay_inline_branchy\n.type fay_inline_branchy, @function\n"
	"fay_inline_branchy:\n\tmov %rdi,%rax\n1:\txor %ecx,%ecx\n\ttest %rcx,%rcx\n"
	"\tjnz 1b\n\tadd %rsi,%rax\n\tret\n"
	".size fay_inline_branchy, .-fay_inline_branchy\n");

long fay_inline_lat(long a, long b);
__asm__(".text\n.globl fay_inline_lat\n.type fay_inline_lat,@function\n"
	"fay_inline_lat:\n  lea 1(%rdi),%rax\n  add %rsi,%rax\n  ret\n"
	".size fay_inline_lat, .-fay_inline_lat\n");

/* Sleeps ms milliseconds. */
__attribute__((noinline, noipa, used)) void fay_inline_sleep(long ms);
void fay_inline_sleep(long ms)
{
	struct timespec d = { ms / 1000, ms % 1000 * 1000000 };

	nanosleep(&d, NULL);
}

/* Vector arguments and result: the probes must keep xmm0-7. */
__attribute__((noinline, noipa, used)) double fay_inline_fp(double a, double b, double c,
							    double d, double e, double f,
							    double g, double h);
double fay_inline_fp(double a, double b, double c, double d, double e, double f, double g,
		     double h)
{
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

static jmp_buf rec_jb;

/* A recursion d calls deep; the innermost longjmp()s to rec_jb when
 * jump, else each call sleeps us microseconds after its inner call.
 * Returns d. */
__attribute__((noinline, noipa, used)) long fay_inline_rec(long d, long us, long jump);
long fay_inline_rec(long d, long us, long jump)
{
	long r = 0;

	if (d > 1)
		r = fay_inline_rec(d - 1, us, jump);
	else if (jump)
		longjmp(rec_jb, 1);
	if (us) {
		struct timespec t = { us / 1000000, us % 1000000 * 1000 };

		nanosleep(&t, NULL);
	}
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

static long long ns_of(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static const char *stop_file;
static long total_calls, total_bad;

static void *spin(void *arg __attribute__((unused)))
{
	long calls = 0, bad = 0;

	while (access(stop_file, F_OK)) {
		for (long i = 0; i < 4096; i++, calls++)
			bad += fay_inline_fn(i, 7) != i + 7;
	}
	__atomic_add_fetch(&total_calls, calls, __ATOMIC_RELAXED);
	__atomic_add_fetch(&total_bad, bad, __ATOMIC_RELAXED);
	return NULL;
}

static pthread_barrier_t wave;
static long per_thread;

static void *short_lived(void *arg __attribute__((unused)))
{
	long bad = 0;

	pthread_barrier_wait(&wave);
	for (long i = 0; i < per_thread; i++)
		bad += fay_inline_fn(i, 7) != i + 7;
	__atomic_add_fetch(&total_calls, per_thread, __ATOMIC_RELAXED);
	__atomic_add_fetch(&total_bad, bad, __ATOMIC_RELAXED);
	return NULL;
}

#define MAX_RIPS 100000
static unsigned long long rips[MAX_RIPS];
static volatile long nsig, sig_bad, main_done;

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	long n = nsig;

	(void)sig;
	(void)si;
	if (n < MAX_RIPS)
		rips[n] = (unsigned long long)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
	sig_bad += fay_inline_fn(1, 7) != 8;
	nsig = n + 1;
}

static int pester_sig = SIGUSR1;

static void *pester(void *arg)
{
	pthread_t main_thread = *(pthread_t *)arg;

	while (!main_done) {
		pthread_kill(main_thread, pester_sig);
		for (int i = 0; i < 200; i++)
			__asm__ volatile("pause");
	}
	return NULL;
}

/* Of the noted interrupted addresses, those in libfay-probe.so or in an
 * anonymous executable mapping. */
static long in_probe(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4400];
	unsigned long long lo[512], hi[512];
	int n = 0;
	long in = 0;

	while (f && n < 512 && fgets(line, sizeof(line), f)) {
		char perms[8], path[4096] = "";

		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %4095s", &lo[n], &hi[n], perms,
			   path) < 3 || perms[2] != 'x')
			continue;
		if (!path[0] || strstr(path, "libfay-probe.so"))
			n++;
	}
	if (f)
		fclose(f);
	for (long i = 0; i < nsig && i < MAX_RIPS; i++)
		for (int j = 0; j < n; j++)
			if (rips[i] >= lo[j] && rips[i] < hi[j]) {
				in++;
				break;
			}
	return in;
}

static void touch_in(const char *dir, const char *name)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	if (f)
		fclose(f);
}

static void wait_in(const char *dir, const char *name)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	while (access(p, F_OK))
		usleep(1000);
}

/* Open lib, call its fay_lib_fn k times, close it: wrong results (all
 * of them in the static build: no dlopen there). */
static long lib_calls(const char *lib, long k, const char *dir, bool first)
{
#ifdef INLINE_WORK_STATIC
	(void)lib, (void)dir, (void)first;
	return k;
#else
	void *h = dlopen(lib, RTLD_NOW);
	long (*fn)(long, long), bad = 0;

	if (!h || !(fn = (long (*)(long, long))dlsym(h, "fay_lib_fn"))) {
		fprintf(stderr, "inline_work: %s\n", dlerror());
		return k;
	}
	if (first) {
		touch_in(dir, "ready");
		wait_in(dir, "go");
	}
	for (long i = 0; i < k; i++)
		bad += fn(i, 1) != 2 * i + 1;
	dlclose(h);
	return bad;
#endif
}

static long calls(long k, long base);

static sigjmp_buf ph_jb;
static volatile sig_atomic_t ph_jump;
static volatile long ph_tries, ph_returns, ph_jumps, ph_bad, ph_max = LONG_MAX;

/* phases' SIGUSR2: note where it landed, then siglongjmp() out of it */
static void on_usr2(int sig, siginfo_t *si, void *uc)
{
	long n = nsig;

	(void)sig;
	(void)si;
	if (!ph_jump)
		return;
	if (n < MAX_RIPS)
		rips[n] = (unsigned long long)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
	nsig = n + 1;
	siglongjmp(ph_jb, 1);
}

/* phases' phase 1 (statics: a siglongjmp() lands back in it anywhere) */
static void phase_one(const char *stop, bool jumps)
{
	if (sigsetjmp(ph_jb, 1))
		ph_jumps++;
	ph_jump = jumps;
	for (;;) {
		long i = ph_tries, r;

		if (i >= ph_max)
			break;
		if (!(i & 4095)) {
			if (!access(stop, F_OK))
				break;
			if (!jumps)
				usleep(100);
		}
		ph_tries = i + 1;
		r = fay_inline_fn(i, 7);
		ph_bad += r != i + 7;
		ph_returns++;
	}
	ph_jump = 0;
}

static long phases(const char *dir, long k)
{
	struct sigaction sa = { .sa_sigaction = on_usr2, .sa_flags = SA_SIGINFO };
	pthread_t self = pthread_self(), p;
	bool jumps = getenv("QW_SIGJMP") != NULL;
	char stop[4096];
	long bad;

	snprintf(stop, sizeof(stop), "%s/stop1", dir);
	if (getenv("QW_TRIES"))
		ph_max = atol(getenv("QW_TRIES"));
	sigaction(SIGUSR2, &sa, NULL);
	bad = calls(1, 0);	/* the thread's probe slot, before the signals */
	ph_tries = ph_returns = 1;
	if (jumps) {
		pester_sig = SIGUSR2;
		pthread_create(&p, NULL, pester, &self);
	}
	phase_one(stop, jumps);
	if (jumps) {
		main_done = 1;
		pthread_join(p, NULL);
	}
	bad += ph_bad;
	printf("phase1 tries %ld returns %ld jumps %ld bad %ld in_probe %ld\n", ph_tries,
	       ph_returns, ph_jumps, bad, in_probe());
	fflush(stdout);
	touch_in(dir, "ready2");
	wait_in(dir, "go2");
	bad += calls(k, 0);
	touch_in(dir, "done2");
	wait_in(dir, "end");
	printf("phase2 calls %ld bad %ld\n", k, bad);
	return bad;
}

static long calls(long k, long base)
{
	long bad = 0;

	for (long i = 0; i < k; i++)
		bad += fay_inline_fn(base + i, 7) != base + i + 7;
	return bad;
}

/* The jump mode: returns the wrong results. */
static long jumps(long k, long depth, long j, long us)
{
	static volatile long jumped, bad, r;

	for (r = 0; r < k; r++) {
		if (!setjmp(rec_jb))
			fay_inline_rec(j, 0, 1);
		else
			jumped++;
		bad += fay_inline_rec(depth, us, 0) != depth;
	}
	bad += jumped != k;
	printf("calls %ld bad %ld jumped %ld\n", k * (depth + j), bad, jumped);
	return bad;
}

/* QW_NOROOM: reserve the free address space within 1 GiB + 2 MiB of
 * fay_inline_fn (the gaps between the mappings /proc/self/maps lists). */
static void no_room(void)
{
	uint64_t f = (uint64_t)(uintptr_t)fay_inline_fn, span = (1ull << 30) + (2ull << 20);
	uint64_t lo = f > span ? (f - span) & ~0xfffull : 0x10000, hi = (f + span) & ~0xfffull;
	uint64_t at = lo, a, b;
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];

	if (!m)
		exit(2);
	/* (the list is read whole first: the reservations are mappings too) */
	static uint64_t gaps[4096][2];
	int n = 0;

	while (fgets(line, sizeof(line), m) && n < 4096)
		if (sscanf(line, "%lx-%lx", &a, &b) == 2) {
			if (a > at && at < hi)
				gaps[n][0] = at, gaps[n++][1] = a < hi ? a : hi;
			if (b > at)
				at = b;
		}
	fclose(m);
	if (at < hi && n < 4096)
		gaps[n][0] = at, gaps[n++][1] = hi;
	for (int i = 0; i < n; i++)
		if (mmap((void *)(uintptr_t)gaps[i][0], gaps[i][1] - gaps[i][0], PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
			 0) == MAP_FAILED)
			exit(2);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[1] : "", *wait = getenv("QW_WAIT");
	long k = argc > 2 ? atol(argv[2]) : 0, bad = 0;

	if (getenv("QW_NOROOM"))
		no_room();
	if (getenv("QW_READY"))
		close(open(getenv("QW_READY"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	while (wait && access(wait, F_OK))
		usleep(1000);
	if (!strcmp(mode, "calls")) {
		bad = calls(k, 0);
	} else if (!strcmp(mode, "threads") && argc > 3) {
		pthread_t t[64];
		long n = k < 1 ? 1 : k > 64 ? 64 : k;

		stop_file = argv[3];
		for (long i = 0; i < n; i++)
			pthread_create(&t[i], NULL, spin, NULL);
		for (long i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		printf("calls %ld bad %ld\n", total_calls, total_bad);
		bad = total_bad;
	} else if (!strcmp(mode, "loop")) {
		stop_file = argv[2];
		spin(NULL);
		printf("calls %ld bad %ld\n", total_calls, total_bad);
		bad = total_bad;
	} else if (!strcmp(mode, "manythreads") && argc > 3) {
		static pthread_t t[1000];
		long n = k < 1 ? 1 : k > 1000 ? 1000 : k;

		per_thread = atol(argv[3]);
		for (int w = 0; w < 2; w++) {
			pthread_barrier_init(&wave, NULL, (unsigned)n);
			for (long i = 0; i < n; i++)
				if (pthread_create(&t[i], NULL, short_lived, NULL))
					return 3;
			for (long i = 0; i < n; i++)
				pthread_join(t[i], NULL);
			pthread_barrier_destroy(&wave);
		}
		printf("calls %ld bad %ld\n", total_calls, total_bad);
		bad = total_bad;
	} else if (!strcmp(mode, "signals")) {
		struct sigaction sa = { .sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO };
		pthread_t self = pthread_self(), p;

		sigaction(SIGUSR1, &sa, NULL);
		bad = calls(1, 0);	/* the thread's probe slot, before the signals */
		pthread_create(&p, NULL, pester, &self);
		bad += calls(k - 1, 1);
		main_done = 1;
		pthread_join(p, NULL);
		/* a signal sent last may still be pending: let it land */
		usleep(10000);
		bad += sig_bad;
		printf("calls %ld bad %ld signals %ld in_probe %ld\n", k + nsig, bad, nsig,
		       in_probe());
	} else if (!strcmp(mode, "phases") && argc > 3) {
		bad = phases(argv[2], atol(argv[3]));
	} else if (!strcmp(mode, "dlopen") && argc > 4) {
		bad = lib_calls(argv[3], k, argv[4], true);
		touch_in(argv[4], "closed");
		wait_in(argv[4], "end");
		bad += lib_calls(argv[3], k, argv[4], false);
		printf("calls %ld bad %ld\n", 2 * k, bad);
	} else if (!strcmp(mode, "lat")) {
		long long t0 = ns_of(CLOCK_MONOTONIC), c0 = ns_of(CLOCK_PROCESS_CPUTIME_ID);

		for (long i = 0; i < k; i++)
			bad += fay_inline_lat(i, 1) != i + 2;
		if (getenv("QW_TIME"))
			printf("loop_ns %lld cpu_ns %lld\n", ns_of(CLOCK_MONOTONIC) - t0,
			       ns_of(CLOCK_PROCESS_CPUTIME_ID) - c0);
	} else if (!strcmp(mode, "sleep") && argc > 3) {
		long long sum = 0, max = 0;

		for (long i = 0; i < k; i++) {
			long long t = ns_of(CLOCK_MONOTONIC);

			fay_inline_sleep(atol(argv[3]));
			t = ns_of(CLOCK_MONOTONIC) - t;
			sum += t;
			max = t > max ? t : max;
		}
		printf("sum_ns %lld max_ns %lld\n", sum, max);
	} else if (!strcmp(mode, "forkexec")) {
		int st = 1;
		pid_t pid = fork();

		if (pid == 0) {
			char *av[] = { argv[0], "calls", argv[2], NULL };

			if (calls(k, 0))
				_exit(1);
			execv("/proc/self/exe", av);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			bad++;
		bad += calls(k, 1000);
	} else if (!strcmp(mode, "sid")) {
		pid_t sid = k > 0 ? getsid(0) : 0;

		for (long i = 1; i < k; i++)	/* K calls in all */
			bad += getsid(0) != sid;
		bad += calls(k, 0);
		printf("sid calls %ld bad %ld\n", k, bad);
		fflush(stdout);
		if (argc > 3 && !bad) {
			execv(argv[3], argv + 3);
			perror(argv[3]);
			return 127;
		}
	} else if (!strcmp(mode, "tsc")) {
		long long t0 = ns_of(CLOCK_MONOTONIC), c0 = ns_of(CLOCK_PROCESS_CPUTIME_ID);
		uint64_t sum = 0;

		for (long i = 0; i < k; i++) {
			uint64_t a = __rdtsc();

			sum += __rdtsc() - a;
		}
		if (getenv("QW_TIME"))
			printf("loop_ns %lld cpu_ns %lld ticks %llu\n", ns_of(CLOCK_MONOTONIC) - t0,
			       ns_of(CLOCK_PROCESS_CPUTIME_ID) - c0, (unsigned long long)sum);
	} else if (!strcmp(mode, "fp")) {
		double (*volatile f)(double, double, double, double, double, double, double,
				     double) = fay_inline_fp;

		for (long i = 0; i < k; i++)
			bad += f((double)i, 1, 2, 3, 4, 5, 6, 0.5) != (double)i + 116;
		printf("calls %ld bad %ld\n", k, bad);
	} else if (!strcmp(mode, "rec") && argc > 4) {
		long depth = atol(argv[3]), us = atol(argv[4]), n = 0;

		for (long r = 0; r < k; r++)
			for (long d = 1; d <= depth; d++, n += d - 1)
				bad += fay_inline_rec(d, us, 0) != d;
		printf("calls %ld bad %ld\n", n, bad);
	} else if (!strcmp(mode, "jump") && argc > 5) {
		bad = jumps(k, atol(argv[3]), atol(argv[4]), atol(argv[5]));
	} else if (!strcmp(mode, "branchy")) {
		for (long i = 0; i < k; i++)
			bad += fay_inline_branchy(i, 7) != i + 7;
	} else {
		fprintf(stderr, "usage: inline_work calls K | threads N FILE | loop FILE | "
			"manythreads N K | signals K | dlopen K LIB DIR | lat K | sleep K MS | "
			"forkexec K | sid K [PROG ARG...] | tsc K | fp K | rec K D US | jump K D J US | branchy K\n");
		return 2;
	}
	return bad ? 1 : 0;
}
