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
 *   - a thread forks children while the function is armed and disarmed
 *     100 times; each child calls the function and must return from it
 *     (patch_live_child() finishes a write the fork cut in two) with the
 *     right answer, within 10 s.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
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

enum how { FOR_GOOD, AROUND_EACH };

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
		if (how == AROUND_EACH)
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
	 * instruction: the write gives up and tries again (a few may fail) */
	st = in_child(f_two, 0, 4, 100, 0, 50);
	is_int(st, 0, "two short instructions (threads moved out of the second), 4 threads "
	       "blocking around each call: 100 writes succeed or are refused (-EBUSY, at most "
	       "half), every call right");
	st = in_child(f_two, 2, 2, 10, -EBUSY, 0);
	is_int(st, 0, "two short instructions, threads running it with every signal blocked: "
	       "each write refused with -EBUSY, nothing changed, every call right");

	s = patch_site_new((void *)f_pushbx, 16, err, sizeof(err));
	ok(s && patch_site_traps(s, true) && strstr(patch_site_traps(s, true), "one byte"),
	   "push %%rbx first: an int3 write (%s)", s ? patch_site_traps(s, true) : err);
	ok(s && !patch_site_traps(s, false), "... but not to put the original bytes back");
	patch_site_free(s);
	s = patch_site_new((void *)f_long, 16, err, sizeof(err));
	ok(s && !patch_site_traps(s, true), "an 8-byte first instruction: a spin write");
	patch_site_free(s);

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
