// SPDX-License-Identifier: MIT
/*
 * A workload with a known call tree, for stack keys (s.ustack): main
 * calls A, which calls B, which calls C (the hot path), and D, which
 * calls C too (the cold path).  Built twice (mk/bench_query.mk): with
 * frame pointers (stack_work_fp) and without (stack_work_nofp).
 *
 *   stack_work calls K   A() K times: B->C every time, D->C every third
 *                        (C is entered K + ceil(K/3) times: K under
 *                        main;A;B;C, ceil(K/3) under main;A;D;C), with
 *                        a 1 ms sleep every 10 calls
 *   stack_work spin MS   about MS ms of CPU in a loop of A(): C spins 9
 *                        units under B, D spins 1 unit itself (samples:
 *                        90% main;A;B;C, 10% main;A;D)
 *
 *   stack_work tree D    T(D): T(d) calls L(d - 1) then R(d - 1), which
 *                        call T(d - 1); T(0) calls C(0): C is entered
 *                        2^D times, each under a stack of its own (the
 *                        path of Ls and Rs), for a full stack table
 *   stack_work treesys D as tree D, and T(0) calls getppid() after C(0)
 *                        (a system call under 2^D user stacks)
 *   stack_work deep N K  K calls of C from N frames of Deep() below
 *                        main, no sleep (bench/bench_inline_stack.sh:
 *                        QW_TIME=1 prints "cpu_ns X" for the loop)
 *
 * QW_READY=PATH creates PATH once started; QW_WAIT=PATH waits for PATH
 * first (as query_work does).  No inlining, no sibling calls: every
 * function keeps its frame.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static int spin_units = 0;	/* 0: calls mode (no spinning) */
static int tree_sys;		/* treesys: T(0) calls getppid() */

#define NOINL __attribute__((noinline))

/* C and D call note(), so that they are not leaf functions: GCC gives
 * a leaf function no frame of its own even with -fno-omit-frame-pointer,
 * and the walk would skip its caller */
NOINL void note(void)
{
	__asm__ volatile("" ::: "memory");
}

#define BURN(units)							\
	do {								\
		for (int u_ = 0; u_ < (units); u_++)			\
			for (int i_ = 0; i_ < 20000; i_++)		\
				sink += (unsigned long)i_ ^ sink;	\
	} while (0)

NOINL void C(int units)
{
	BURN(units);
	note();
	sink++;
}

NOINL void B(void)
{
	C(spin_units ? 9 * spin_units : 0);
	sink++;
}

NOINL void D(int call_c)
{
	if (call_c)
		C(0);
	BURN(spin_units);
	note();
	sink++;
}

NOINL void A(long i)
{
	B();
	if (spin_units)
		D(0);
	else if (i % 3 == 0)
		D(1);
	sink++;
}

NOINL void T(int d);

NOINL void L(int d)
{
	T(d);
	sink++;
}

NOINL void R(int d)
{
	T(d);
	sink++;
}

NOINL void T(int d)
{
	if (!d) {
		C(0);
		if (tree_sys)
			sink += (unsigned long)getppid();
		sink++;
		return;
	}
	L(d - 1);
	R(d - 1);
	sink++;
}

static long deep_calls;

static long long cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

NOINL void Deep(int d)
{
	if (d > 0) {
		Deep(d - 1);
	} else {
		long long t0 = cpu_ns();

		for (long i = 0; i < deep_calls; i++)
			C(0);
		if (getenv("QW_TIME"))
			printf("cpu_ns %lld\n", cpu_ns() - t0);
	}
	sink++;
}

static long long cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	const char *wait = getenv("QW_WAIT");
	long k = argc > 2 ? atol(argv[2]) : 0;

	if (argc < 3 || (strcmp(argv[1], "calls") && strcmp(argv[1], "spin") &&
			 strcmp(argv[1], "tree") && strcmp(argv[1], "treesys") &&
			 strcmp(argv[1], "deep"))) {
		fprintf(stderr, "usage: stack_work calls K | spin MS | tree D | treesys D | "
			"deep N K\n");
		return 2;
	}
	if (getenv("QW_READY"))
		close(open(getenv("QW_READY"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	while (wait && access(wait, F_OK))
		usleep(1000);
	if (!strcmp(argv[1], "calls")) {
		for (long i = 0; i < k; i++) {
			A(i);
			if (i % 10 == 9)
				usleep(1000);	/* not a spinner: ~0.1 s per 1000 */
		}
		return 0;
	}
	if (!strcmp(argv[1], "deep")) {
		deep_calls = argc > 3 ? atol(argv[3]) : 0;
		Deep((int)k);
		return 0;
	}
	if (!strcmp(argv[1], "tree") || !strcmp(argv[1], "treesys")) {
		tree_sys = !strcmp(argv[1], "treesys");
		T((int)k);
		usleep(300000);	/* the reader names the stacks of a live process */
		return 0;
	}
	spin_units = 1;
	for (long long end = cpu_ms() + k; cpu_ms() < end; )
		for (int i = 0; i < 50; i++)	/* the clock is read rarely */
			A(0);
	return 0;
}
