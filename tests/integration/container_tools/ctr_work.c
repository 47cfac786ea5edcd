// SPDX-License-Identifier: MIT
/*
 * The container tests' workload (issue #25): run inside a root file
 * system of its own with its own copy of libc.  ctr_work DIR N writes
 * DIR/ready (its pid as it sees it, in its pid namespace), waits for
 * DIR/go, calls libc's getppid() N times (a call fay counts; nothing in
 * glibc calls it by itself), writes DIR/done, then waits for DIR/stop
 * (so that queries that end later still find it) and exits 0.
 *
 * ctr_work DIR N now: calls getppid() N times at once, from its first
 * instruction in main (a process that starts working right away), writes
 * DIR/done and exits.
 *
 * ctr_work DIR N dlopen LIB SYM: first dlopen(LIB) (a library its loader
 * did not map at the start, from wherever LIB is), then as ctr_work DIR N
 * with LIB's SYM (a function of no argument) called instead of getppid().
 *
 * ctr_work DIR MS burst: calls getppid() from its start for MS ms (a
 * pause of 20 us every 16 calls), then writes DIR/done: "T0 CALLS", T0
 * the CLOCK_MONOTONIC ns of its first call (the clock of fay's s.time),
 * and exits: how many calls fay missed, and for how long, before it
 * attached to a file it had not probed yet (bench/exec_first_calls.sh).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int exists(const char *dir, const char *name)
{
	char fn[512];

	snprintf(fn, sizeof(fn), "%s/%s", dir, name);
	return access(fn, F_OK) == 0;
}

static int put(const char *dir, const char *name, long v)
{
	char fn[512], tmp[520];
	FILE *f;

	snprintf(fn, sizeof(fn), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", fn);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%ld\n", v);
	if (fclose(f))
		return -1;
	return rename(tmp, fn);
}

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* MS ms of calls; DIR/done is "T0 CALLS" */
static int burst(const char *dir, long ms)
{
	long long t0 = mono_ns(), end = t0 + ms * 1000000LL;
	long calls = 0;
	char fn[512];
	FILE *f;

	do {
		for (int i = 0; i < 16; i++, calls++)
			getppid();
		usleep(20);
	} while (mono_ns() < end);
	snprintf(fn, sizeof(fn), "%s/done", dir);
	f = fopen(fn, "w");
	if (!f)
		return 1;
	fprintf(f, "%lld %ld\n", t0, calls);
	return fclose(f) ? 1 : 0;
}

static long call_getppid(void)
{
	return getppid();
}

int main(int argc, char **argv)
{
	long (*call)(void) = call_getppid;
	long n, sum = 0;

	if (argc == 4 && !strcmp(argv[3], "burst"))
		return burst(argv[1], atol(argv[2]));
	if (argc == 4 && !strcmp(argv[3], "now") && (n = atol(argv[2])) >= 0) {
		for (long i = 0; i < n; i++)
			sum += getppid() >= 0;
		return put(argv[1], "done", sum) ? 1 : 0;
	}
	if (argc == 6 && !strcmp(argv[3], "dlopen")) {
		void *h = dlopen(argv[4], RTLD_NOW);

		if (!h || !(call = (long (*)(void))dlsym(h, argv[5]))) {
			fprintf(stderr, "ctr_work: %s\n", dlerror());
			return 1;
		}
		argc = 3;
	}
	if (argc != 3 || (n = atol(argv[2])) < 0) {
		fprintf(stderr, "usage: ctr_work DIR N [now] | ctr_work DIR N dlopen LIB SYM | "
			"ctr_work DIR MS burst\n");
		return 2;
	}
	if (put(argv[1], "ready", (long)getpid()))
		return 1;
	while (!exists(argv[1], "go"))
		usleep(10000);
	for (long i = 0; i < n; i++) {
		sum += call() >= 0;
		if (i % 64 == 63)
			usleep(100);
	}
	if (put(argv[1], "done", sum))
		return 1;
	while (!exists(argv[1], "stop"))
		usleep(10000);
	return sum == n ? 0 : 1;
}
