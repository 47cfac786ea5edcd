// SPDX-License-Identifier: MIT
/*
 * The container tests' workload (issue #25): run inside a root file
 * system of its own with its own copy of libc.  ctr_work DIR N writes
 * DIR/ready (its pid as it sees it, in its pid namespace), waits for
 * DIR/go, calls libc's getppid() N times (a call fay counts; nothing in
 * glibc calls it by itself), writes DIR/done, then waits for DIR/stop
 * (so that queries that end later still find it) and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv)
{
	long n, sum = 0;

	if (argc != 3 || (n = atol(argv[2])) < 0) {
		fprintf(stderr, "usage: ctr_work DIR N\n");
		return 2;
	}
	if (put(argv[1], "ready", (long)getpid()))
		return 1;
	while (!exists(argv[1], "go"))
		usleep(10000);
	for (long i = 0; i < n; i++) {
		sum += getppid() >= 0;
		if (i % 64 == 63)
			usleep(100);
	}
	if (put(argv[1], "done", sum))
		return 1;
	while (!exists(argv[1], "stop"))
		usleep(10000);
	return sum == n ? 0 : 1;
}
