/* SPDX-License-Identifier: MIT */
/* Helpers shared by the benchmarks in bench/. */
#ifndef FAY_BENCH_H
#define FAY_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of n values (n > 0); sorts v in place. */
static inline double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Seconds on the monotonic clock. */
static inline double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Print the load average: "load average WHEN: 1.00 0.50 0.25". */
static inline void bench_loadavg(const char *when)
{
	double l[3];

	if (getloadavg(l, 3) == 3)
		printf("load average %s: %.2f %.2f %.2f\n", when, l[0], l[1], l[2]);
}

/*
 * Start `bpftrace -e prog` (prog prints "ready" in BEGIN) with its stdout
 * on a pipe; returns the pipe once "ready" was read (the probes are
 * attached), NULL if bpftrace did not start.  *pid is bpftrace's.
 */
static inline FILE *bench_bpftrace(const char *prog, pid_t *pid)
{
	int out[2], st;
	char line[256];
	FILE *f;

	if (pipe(out))
		return NULL;
	*pid = fork();
	if (*pid == 0) {
		struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

		dup2(out[1], 1);
		close(out[0]);
		close(out[1]);
		setrlimit(RLIMIT_MEMLOCK, &rl);
		execlp("bpftrace", "bpftrace", "-e", prog, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	f = fdopen(out[0], "r");
	while (fgets(line, sizeof(line), f) && !strstr(line, "ready"))
		;
	if (feof(f)) {
		fclose(f);
		waitpid(*pid, &st, 0);
		fprintf(stderr, "bpftrace did not start\n");
		return NULL;
	}
	return f;
}

#endif
