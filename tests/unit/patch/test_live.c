// SPDX-License-Identifier: MIT
/*
 * Live writes beside threads that block signals, and a fork in the
 * middle of them (src/patch/live.c):
 *
 *   - 3 threads that block every signal for good (a sigwait() design)
 *     and 3 that block them around each call (glibc's pthread_kill()
 *     calls getpid() so) call a function whose first instruction is
 *     long, while it is armed and disarmed 200 times: every write
 *     succeeds (a spin holds the function, no int3 that would kill
 *     them), every call returns the right answer, and the process lives
 *     (it runs in a child: a death is a failed check, not a lost test);
 *   - the same with a function of two short instructions (threads must
 *     be moved out of the second): with the transient blockers only,
 *     every write succeeds; with threads that block every signal for
 *     good and run through it, the write is refused (-EBUSY, nothing
 *     changed) and no call goes wrong;
 *   - a one-byte first instruction (push %rbx) needs the int3
 *     (patch_site_traps()), a long one does not;
 *   - 10000 arm/disarm cycles of one function (4200 of a push %rbx one,
 *     written with an int3) beside calling threads: every write
 *     succeeds, every call is right, and the trampolines are reused (no
 *     mapping, no trap slot taken per arm);
 *   - 5000 arms of one function, each with another handler argument
 *     (another trampoline each, none reusable): every arm succeeds
 *     (trampoline pages are packed: the 1 MiB-step search alone ran out
 *     after about 2000), every call runs its own handler;
 *   - a siglongjmp() storm: a thread calls a two-instruction function
 *     (moved out of the second at each arm) while another sends it
 *     SIGUSR2 as fast as it can, whose handler siglongjmp()s back into
 *     its loop; 2000 arms each succeed (the move handler runs with every
 *     signal blocked: a SIGUSR2 taken at the exit of its first system
 *     call left it before its answer, and the write gave up after ~1 s
 *     with -ETIMEDOUT: 3 of 2000 arms at load 10);
 *   - a thread forks children while the function is armed and disarmed
 *     100 times; each child calls the function and must return from it
 *     (patch_live_child() finishes a write the fork cut in two) with the
 *     right answer, within 10 s.
 */
#include <errno.h>
#include <setjmp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "patch/patch.h"

long f_long(long a, long b);	/* lea 0x0(%rdi,%rsi,1),%rax (disp32: 8 bytes) */
long f_two(long a, long b);	/* mov %rdi,%rax (3); add %rsi,%rax (3) */
long f_pushbx(long a, long b);	/* push %rbx (1) */
__asm__(
	".text\n"
	".p2align 4\n"
	".globl f_long\n.type f_long,@function\n"
	"f_long:\n  .byte 0x48,0x8d,0x84,0x37,0,0,0,0\n  ret\n"
	".size f_long, .-f_long\n"
	".p2align 4\n"
	".globl f_two\n.type f_two,@function\n"
	"f_two:\n  mov %rdi,%rax\n  add %rsi,%rax\n  ret\n"
	".size f_two, .-f_two\n"
	".p2align 4\n"
	".globl f_pushbx\n.type f_pushbx,@function\n"
	"f_pushbx:\n  push %rbx\n  lea (%rdi,%rsi,1),%rax\n  pop %rbx\n  ret\n"
	".size f_pushbx, .-f_pushbx\n");

static long (*volatile fn)(long, long);
static volatile int stop;
static long bad, entries;

enum how { FOR_GOOD, AROUND_EACH, PLAIN };

static void *caller(void *arg)
{
	enum how how = (enum how)(uintptr_t)arg;
	sigset_t all, old;
	long calls = 0;

	sigfillset(&all);
	if (how == FOR_GOOD)
		pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!stop) {
		long a = calls & 0xffff, r;

		if (how == AROUND_EACH)
			pthread_sigmask(SIG_BLOCK, &all, &old);
		r = fn(a, 7);
		if (how == AROUND_EACH)
			pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (r != a + 7)
			__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		if (how != FOR_GOOD)
			usleep(20);	/* pthread_kill() is occasional */
		else if (calls % 64 == 0)
			sched_yield();
		calls++;
	}
	return (void *)calls;
}

static void on_entry(struct patch_regs *r, void *arg)
{
	(void)r;
	(void)arg;
	__atomic_add_fetch(&entries, 1, __ATOMIC_RELAXED);
}

static long exits;

static void on_exit_(struct patch_regs *r, void *arg)
{
	(void)r;
	(void)arg;
	__atomic_add_fetch(&exits, 1, __ATOMIC_RELAXED);
}

/* Mappings of this process (lines of /proc/self/maps). */
static int nmappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/*
 * In this process: 4 threads calling f while it is armed and disarmed
 * `rounds` times, every other time with an exit handler too.  Exit
 * status: 0 when every write succeeded, every call was right, entries
 * and exits were seen, and the process holds at most 4 mappings more
 * than after the first two rounds (the two trampolines, reused: no
 * room taken per arm); else 1..5.
 */
static int reuse_cycles(long (*f)(long, long), int rounds)
{
	pthread_t t[4];
	int failed = 0, maps0 = 0, maps1;
	struct timespec t0, t1;
	char err[256];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fn = f;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, caller, (void *)(uintptr_t)PLAIN);
	usleep(20000);
	for (int r = 0; r < rounds; r++) {
		struct patch_site *s = patch_site_new((void *)f, 16, err, sizeof(err));
		int rc = s ? patch_site_arm(s, on_entry, r & 1 ? on_exit_ : NULL, NULL, err,
					    sizeof(err)) : -999;

		if (rc && !failed++)
			fprintf(stderr, "round %d: rc %d: %s\n", r, rc, err);
		if (r % 16 == 0)
			usleep(200);	/* let the callers through the probe */
		patch_site_free(s);
		if (r == 1)
			maps0 = nmappings();
	}
	maps1 = nmappings();
	stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "%d rounds in %.1f s: %d failed, %ld entries, %ld exits, mappings "
		"%d -> %d\n", rounds, (double)(t1.tv_sec - t0.tv_sec) +
		(double)(t1.tv_nsec - t0.tv_nsec) / 1e9, failed, entries, exits, maps0, maps1);
	if (failed)
		return 1;
	if (bad)
		return 2;
	if (!entries || !exits)
		return 3;
	if (maps0 <= 0 || maps1 > maps0 + 4)
		return 4;
	return 0;
}

/* In this process: nfor threads blocking for good, naround blocking
 * around each call, `rounds` arm/disarm cycles of f.  Exit status: 0
 * when every write gave want_rc (or -EBUSY, in at most `busy_ok` of
 * them) and every call was right, else 1..4. */
static int cycles(long (*f)(long, long), int nfor, int naround, int rounds, int want_rc,
		  int busy_ok)
{
	pthread_t t[8];
	int n = 0, wrong_rc = 0, busy = 0;
	char err[256];

	fn = f;
	for (int i = 0; i < nfor; i++)
		pthread_create(&t[n++], NULL, caller, (void *)(uintptr_t)FOR_GOOD);
	for (int i = 0; i < naround; i++)
		pthread_create(&t[n++], NULL, caller, (void *)(uintptr_t)AROUND_EACH);
	usleep(20000);
	for (int r = 0; r < rounds; r++) {
		struct patch_site *s = patch_site_new((void *)f, 16, err, sizeof(err));
		int rc = s ? patch_site_arm(s, on_entry, NULL, NULL, err, sizeof(err)) : -999;

		if (rc == -EBUSY && want_rc != -EBUSY && busy < busy_ok) {
			busy++;
		} else if (rc != want_rc) {
			if (!wrong_rc++)
				fprintf(stderr, "round %d: rc %d, want %d: %s\n", r, rc, want_rc, err);
		}
		usleep(1000);
		patch_site_free(s);
	}
	stop = 1;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	if (busy)
		fprintf(stderr, "%d of %d writes refused (-EBUSY)\n", busy, rounds);
	if (wrong_rc)
		return 1;
	if (bad)
		return 2;
	if (want_rc == 0 && !entries)
		return 3;
	return 0;
}

static sigjmp_buf storm_jb;
static volatile int storm_ready;
static volatile long storm_jumps;

static void on_storm(int sig)
{
	(void)sig;
	if (storm_ready)
		siglongjmp(storm_jb, 1);
}

/* Calls fn until stop; every SIGUSR2 jumps back here.  The mask is not
 * saved (sigsetjmp(.., 0)): the jump lands with SIGUSR2 still blocked,
 * as the handler ran, and it is unblocked here, on the unwound stack.
 * A saved mask would be restored inside siglongjmp() before the stack
 * is left, and the next signal of the storm would nest a handler there,
 * again and again: ASan's slower handler overflowed the stack in CI. */
static void *jumper(void *arg)
{
	sigset_t usr2;

	(void)arg;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	if (sigsetjmp(storm_jb, 0)) {
		storm_jumps++;
		pthread_sigmask(SIG_UNBLOCK, &usr2, NULL);
	}
	storm_ready = 1;
	while (!stop) {
		long a = storm_jumps & 0xffff;

		if (fn(a, 7) != a + 7)
			__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
	}
	storm_ready = 0;
	return NULL;
}

static void *stormer(void *arg)
{
	pthread_t to = *(pthread_t *)arg;

	while (!stop) {
		pthread_kill(to, SIGUSR2);
		for (int i = 0; i < 200; i++)
			__asm__ volatile("pause");
	}
	return NULL;
}

/* In a child: `rounds` arms of f while a thread running it is jumped
 * out of by SIGUSR2 as fast as another can send it.  Exit status: 0,
 * 1 (a write failed: the first one's reason on stderr), 2 (a wrong
 * result), 3 (no jump), 128 + N (killed by N). */
static int storm_in_child(long (*f)(long, long), int rounds)
{
	pid_t p = fork();
	int st;

	if (p == 0) {
		struct sigaction sa = { .sa_handler = on_storm };
		pthread_t j, s;
		int failed = 0;
		char err[256];

		sigaction(SIGUSR2, &sa, NULL);
		fn = f;
		stop = 0;
		pthread_create(&j, NULL, jumper, NULL);
		while (!storm_ready)
			usleep(100);
		pthread_create(&s, NULL, stormer, &j);
		for (int r = 0; r < rounds; r++) {
			struct patch_site *ps = patch_site_new((void *)f, 16, err, sizeof(err));
			int rc = ps ? patch_site_arm(ps, on_entry, NULL, NULL, err, sizeof(err)) : -1;

			if (rc && !failed++)
				fprintf(stderr, "round %d: rc %d: %s\n", r, rc, err);
			patch_site_free(ps);
			usleep(3000);	/* the two threads run at once meanwhile */
		}
		stop = 1;
		pthread_join(s, NULL);
		pthread_join(j, NULL);
		if (failed)
			fprintf(stderr, "%d of %d arms failed\n", failed, rounds);
		_exit(failed ? 1 : bad ? 2 : !storm_jumps ? 3 : 0);
	}
	if (p < 0 || waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* reuse_cycles() in a child: its exit status, or 128 + the signal. */
static int reuse_in_child(long (*f)(long, long), int rounds)
{
	pid_t p = fork();
	int st;

	if (p == 0)
		_exit(reuse_cycles(f, rounds));
	if (p < 0 || waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static uintptr_t last_arg;

static void on_entry_arg(struct patch_regs *r, void *arg)
{
	(void)r;
	last_arg = (uintptr_t)arg;
}

/* rounds arms of f, each with another handler argument (so another
 * trampoline: one is reused only for the same bytes), each called once
 * and disarmed.  0 when every arm succeeded and every call ran its own
 * handler with the right result, 1: an arm failed, 2: a wrong result or
 * argument, 4: the mappings grew by more than rounds / 10 (the pages not
 * packed: one mapping each would be rounds more; 5000 gave 64 here). */
static int many_tramps(long (*f)(long, long), int rounds)
{
	char err[256];
	int maps0 = nmappings(), maps1;

	for (int r = 0; r < rounds; r++) {
		struct patch_site *s = patch_site_new((void *)f, 16, err, sizeof(err));
		int rc = s ? patch_site_arm(s, on_entry_arg, NULL, (void *)(uintptr_t)(r + 1), err,
					    sizeof(err)) : -999;

		if (rc) {
			fprintf(stderr, "arm %d: rc %d: %s\n", r, rc, err);
			patch_site_free(s);
			return 1;
		}
		last_arg = 0;
		if (f(r, 5) != r + 5 || last_arg != (uintptr_t)(r + 1)) {
			patch_site_free(s);
			return 2;
		}
		patch_site_free(s);
	}
	maps1 = nmappings();
	fprintf(stderr, "%d trampolines: mappings %d -> %d\n", rounds, maps0, maps1);
	return maps1 > maps0 + rounds / 10 ? 4 : 0;
}

static int many_tramps_in_child(long (*f)(long, long), int rounds)
{
	pid_t p = fork();
	int st;

	if (p == 0)
		_exit(many_tramps(f, rounds));
	if (p < 0 || waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* cycles() in a child; its exit status, or 128 + the signal that killed it. */
static int in_child(long (*f)(long, long), int nfor, int naround, int rounds, int want_rc,
		    int busy_ok)
{
	pid_t p = fork();
	int st;

	if (p == 0)
		_exit(cycles(f, nfor, naround, rounds, want_rc, busy_ok));
	if (p < 0 || waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static volatile long forks_seen;

static void *forker(void *arg)
{
	long *failed = arg, forks = 0;

	while (!stop) {
		pid_t p = fork();
		int st;

		if (p == 0) {
			alarm(10);	/* a child held for good dies of SIGALRM */
			_exit(fn(forks, 5) == forks + 5 ? 0 : 1);
		}
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
			(*failed)++;
		forks_seen = ++forks;
	}
	return (void *)forks;
}

int main(void)
{
	char err[256];
	struct patch_site *s;
	int st;

	st = in_child(f_long, 3, 3, 200, 0, 0);
	is_int(st, 0, "a long first instruction, 3 threads blocking every signal for good and 3 "
	       "around each call: 200 writes succeed, every call right, the process lives "
	       "(1: a write failed, 2: a wrong result, 3: no entry, 128+N: killed by N)");
	/* a thread held by the spin with its signals blocked cannot answer
	 * the move signal, nor be told from one stopped after the first
	 * instruction: the write gives up and tries again (some may fail:
	 * 5-12 % at load 2, half at load 17, so only "not all" is asked) */
	st = in_child(f_two, 0, 4, 100, 0, 99);
	is_int(st, 0, "two short instructions (threads moved out of the second), 4 threads "
	       "blocking around each call: 100 writes succeed or are refused (-EBUSY, not "
	       "all of them), every call right");
	st = in_child(f_two, 2, 2, 10, -EBUSY, 0);
	is_int(st, 0, "two short instructions, threads running it with every signal blocked: "
	       "each write refused with -EBUSY, nothing changed, every call right");

	/* trampolines reused: no room nor trap slot taken per arm */
	st = reuse_in_child(f_long, 10000);
	is_int(st, 0, "10000 arms and disarms of one function (entry, and entry + exit, in "
	       "turn) beside 4 calling threads: every write succeeds, every call right, "
	       "no mapping taken per arm (1: a write failed, 2: a wrong result, 3: no "
	       "entry or exit, 4: mappings grew, 128+N: killed by N)");
	st = reuse_in_child(f_pushbx, 4200);
	is_int(st, 0, "4200 arms and disarms of a push %%rbx function, each written with an "
	       "int3 (more than the 4096 trap slots): the same");

	/* trampolines of different code: pages packed, not one per 1 MiB */
	st = many_tramps_in_child(f_long, 5000);
	is_int(st, 0, "5000 trampolines of different code near one function (the search "
	       "alone found about 2000): every arm succeeds, every call runs its own "
	       "handler, the pages packed into few mappings (1: an arm failed, 2: a wrong "
	       "call, 4: mappings grew by > 500)");

	s = patch_site_new((void *)f_pushbx, 16, err, sizeof(err));
	ok(s && patch_site_traps(s, true) && strstr(patch_site_traps(s, true), "one byte"),
	   "push %%rbx first: an int3 write (%s)", s ? patch_site_traps(s, true) : err);
	ok(s && !patch_site_traps(s, false), "... but not to put the original bytes back");
	patch_site_free(s);
	s = patch_site_new((void *)f_long, 16, err, sizeof(err));
	ok(s && !patch_site_traps(s, true), "an 8-byte first instruction: a spin write");
	patch_site_free(s);

	st = storm_in_child(f_two, 2000);
	is_int(st, 0, "2000 arms of a two-instruction function while its caller is "
	       "siglongjmp()ed out of by a SIGUSR2 storm: every write succeeds, every call "
	       "right (1: a write failed, 2: a wrong result, 3: no jump, 128+N: killed by N)");

	/* forks across writes (the runtime registers the same handler) */
	pthread_atfork(NULL, NULL, patch_live_child);
	{
		pthread_t t;
		long failed = 0, forks;
		void *r;
		int armed = 0, round;

		fn = f_long;
		stop = 0;
		pthread_create(&t, NULL, forker, &failed);
		for (round = 0; round < 100 || (forks_seen < 200 && round < 1500); round++) {
			s = patch_site_new((void *)f_long, 16, err, sizeof(err));
			if (s && !patch_site_arm(s, on_entry, NULL, NULL, err, sizeof(err)))
				armed++;
			else if (armed == round)
				fprintf(stderr, "round %d: %s\n", round, s ? err : "no site");
			patch_site_free(s);
		}
		stop = 1;
		pthread_join(t, &r);
		forks = (long)r;
		is_int(armed, round, "%d writes while another thread forks, all succeed", round);
		ok(forks > 0 && failed == 0, "%ld children called the function and returned the "
		   "right answer (%ld did not)", forks, failed);
	}
	return test_done();
}
