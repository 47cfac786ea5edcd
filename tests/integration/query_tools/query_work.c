// SPDX-License-Identifier: MIT
/*
 * query_work: workloads whose truth is known by construction, for the
 * fay query tests and bench/bench_query.sh.
 *
 *   query_work calls K        fay_work_fn(i, 7) for i in 0..K-1 (returns i + 7)
 *   query_work words K        fay_work_word(w, i): w cycles "alpha" "beta" "gamma"
 *   query_work sleep K US     fay_work_sleep(US) K times (nanosleep)
 *   query_work usdt K         USDT fayq:tick (i, 2*i, "tick") K times
 *   query_work getppid K      K getppid() system calls
 *   query_work read K N       K reads of N bytes of /dev/zero
 *   query_work spin MS        burn the CPU for MS milliseconds; prints
 *                             "cpu_ns N" (the CPU time it got) on stderr
 *   query_work lat K          fay_work_lat(i) K times: an empty function
 *
 * Environment: QW_WAIT=PATH waits until PATH exists before starting;
 * QW_TIME=1 prints "loop_ns N cpu_ns M" on stdout: the loop's wall-clock
 * time and the CPU time the process spent in it (probes run in the
 * traced process's context: their cost is in M, the time other processes
 * of a busy machine take is not).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOIPA __attribute__((noinline, noipa, used))

NOIPA long fay_work_fn(long a, long b);
NOIPA long fay_work_fn(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return a + b;
}

NOIPA long fay_work_word(const char *w, long i);
NOIPA long fay_work_word(const char *w, long i)
{
	__asm__ volatile("" : : "r"(w) : "memory");
	return i;
}

NOIPA long fay_work_lat(long i);
NOIPA long fay_work_lat(long i)
{
	__asm__ volatile("" ::: "memory");
	return i;
}

NOIPA void fay_work_sleep(long us);
NOIPA void fay_work_sleep(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000 };

	nanosleep(&ts, NULL);
}

static long long clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static long long now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

int main(int argc, char **argv)
{
	static const char *const words[] = { "alpha", "beta", "gamma" };
	const char *wait = getenv("QW_WAIT"), *mode = argc > 1 ? argv[1] : "";
	long k = argc > 2 ? atol(argv[2]) : 0, n = argc > 3 ? atol(argv[3]) : 0;
	long long t0, c0;
	char buf[65536];

	if (argc < 3) {
		fprintf(stderr, "usage: query_work calls|words|sleep|usdt|getppid|read|spin|lat K [N]\n");
		return 2;
	}
	while (wait && access(wait, F_OK))
		usleep(1000);
	t0 = now_ns();
	c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	if (!strcmp(mode, "calls")) {
		for (long i = 0; i < k; i++)
			fay_work_fn(i, 7);
	} else if (!strcmp(mode, "words")) {
		for (long i = 0; i < k; i++)
			fay_work_word(words[i % 3], i);
	} else if (!strcmp(mode, "lat")) {
		for (long i = 0; i < k; i++)
			fay_work_lat(i);
	} else if (!strcmp(mode, "sleep")) {
		for (long i = 0; i < k; i++)
			fay_work_sleep(n);
	} else if (!strcmp(mode, "usdt")) {
		for (long i = 0; i < k; i++) {
			STAP_PROBE3(fayq, tick, i, 2 * i, "tick");
			__asm__ volatile("" ::: "memory");
		}
	} else if (!strcmp(mode, "getppid")) {
		for (long i = 0; i < k; i++)
			syscall(SYS_getppid);
	} else if (!strcmp(mode, "read")) {
		int fd = open("/dev/zero", O_RDONLY);

		if (fd < 0 || n <= 0 || n > (long)sizeof(buf))
			return 1;
		for (long i = 0; i < k; i++)
			if (read(fd, buf, (size_t)n) != n)
				return 1;
		close(fd);
	} else if (!strcmp(mode, "spin")) {
		volatile unsigned long x = 0;

		struct timespec cpu;

		while (now_ns() - t0 < k * 1000000ll)
			x++;
		/* what a sampler can have seen: the CPU time we got */
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
		fprintf(stderr, "cpu_ns %lld\n", cpu.tv_sec * 1000000000ll + cpu.tv_nsec);
	} else {
		fprintf(stderr, "query_work: unknown mode %s\n", mode);
		return 2;
	}
	if (getenv("QW_TIME"))
		printf("loop_ns %lld cpu_ns %lld\n", now_ns() - t0,
		       clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0);
	return 0;
}
