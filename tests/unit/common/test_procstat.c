// SPDX-License-Identifier: MIT
/* src/common/procstat.c: proc_start_ticks() names a process by its start
 * time: this one's from /proc/self and /proc/PID agree, a child whose
 * comm holds ") (" and spaces started no earlier and reads its own the
 * same as its parent does, and a child reaped is gone (-ENOENT);
 * proc_cpu_ticks() grows by about the CPU time a child burns, read
 * through its odd comm, and agrees with getrusage() for this process;
 * proc_exiting(): a running child 0, with a blocked SIGUSR1 pending 0,
 * whose main thread called pthread_exit() while another runs 0, a
 * zombie 1, a reaped one 1. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procstat.h"
#include "test.h"

/* A thread that waits for a byte on *fd, then ends the process. */
static void *wait_gate(void *fd)
{
	char c;

	_exit(read(*(int *)fd, &c, 1) == 1 ? 0 : 1);
}

/* Spin on the CPU for about ms milliseconds of CPU time. */
static void burn(long ms)
{
	struct timespec t0, t;
	volatile unsigned long x = 0;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* ticks of user+system CPU this process has used, by getrusage(). */
static double rusage_ticks(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return ((double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
		((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) / 1e6) *
	       (double)sysconf(_SC_CLK_TCK);
}

int main(void)
{
	unsigned long long self = 0, byid = 0, child = 0, own = 0;
	int fds[2], st;
	pid_t pid;

	is_int(proc_start_ticks(0, &self), 0, "this process's start time");
	is_int(proc_start_ticks(getpid(), &byid), 0, "... by its pid");
	is_u64(byid, self, "... the same");
	if (pipe(fds))
		return 1;
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_NAME, "a) b (c ) 9 9");
		proc_start_ticks(0, &own);
		if (write(fds[1], &own, sizeof(own)) != sizeof(own))
			_exit(1);
		pause();
		_exit(0);
	}
	ok(read(fds[0], &own, sizeof(own)) == sizeof(own), "the child read its own");
	is_int(proc_start_ticks(pid, &child), 0, "a child named 'a) b (c ) 9 9'");
	is_u64(child, own, "... the parent reads what the child read");
	ok(child >= self, "... it started no earlier than its parent");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	is_int(proc_start_ticks(pid, &child), -ENOENT, "reaped: -ENOENT");
	is_int(proc_cpu_ticks(pid, &child), -ENOENT, "reaped: no CPU time either");

	{
		unsigned long long c0 = 0, c1 = 0, me = 0;
		long hz = sysconf(_SC_CLK_TCK);
		double ru;

		char go;
		int gate[2];

		if (pipe(gate))
			return 1;
		pid = fork();
		if (pid == 0) {
			prctl(PR_SET_NAME, "a) b (c ) 9 9");
			if (read(gate[0], &go, 1) != 1)
				_exit(1);
			burn(300);
			pause();
			_exit(0);
		}
		is_int(proc_cpu_ticks(pid, &c0), 0, "a child's CPU time, through its odd comm");
		if (write(gate[1], "g", 1) != 1)
			return 1;
		/* poll: the child's 300 ms of CPU may take long on a loaded machine */
		for (int i = 0; i < 3000; i++) {
			if (proc_cpu_ticks(pid, &c1) || c1 >= c0 + (unsigned long long)hz / 5)
				break;
			usleep(10000);
		}
		ok(c1 >= c0 + (unsigned long long)hz / 5, "... grows by at least 200 ms of the 300 ms it burns (%llu ticks)",
		   c1 - c0);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		burn(100);
		ru = rusage_ticks();
		is_int(proc_cpu_ticks(0, &me), 0, "this process's CPU time");
		ok((double)me > ru - 3 && (double)me < ru + 3, "... agrees with getrusage (%llu, %.1f ticks)",
		   me, ru);
	}
	{
		sigset_t usr1, orig;
		char go;
		int gate[2];

		if (pipe(gate))
			return 1;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		sigprocmask(SIG_BLOCK, &usr1, &orig);	/* the child inherits it */
		pid = fork();
		if (pid == 0) {
			prctl(PR_SET_NAME, "a) b (c ) 9 9");
			if (read(gate[0], &go, 1) != 1)
				_exit(1);
			_exit(0);
		}
		sigprocmask(SIG_SETMASK, &orig, NULL);
		is_int(proc_exiting(pid), 0, "proc_exiting: a running child (odd comm): 0");
		kill(pid, SIGUSR1);
		is_int(proc_exiting(pid), 0, "... a pending signal other than SIGKILL: 0");
		if (write(gate[1], "g", 1) != 1)
			return 1;
		/* a zombie until reaped: poll its state (the child may take long) */
		for (int i = 0; i < 3000 && !proc_exiting(pid); i++)
			usleep(10000);
		is_int(proc_exiting(pid), 1, "... exited, not reaped (a zombie): 1");
		waitpid(pid, &st, 0);
		is_int(proc_exiting(pid), 1, "... reaped: 1");
	}
	{
		char go;
		int gate[2];
		pthread_t t;
		char st_path[64], st_c = 0;
		FILE *f;

		if (pipe(gate))
			return 1;
		pid = fork();
		if (pid == 0) {
			if (pthread_create(&t, NULL, wait_gate, &gate[0]))
				_exit(1);
			pthread_exit(NULL);	/* the process lives on in t */
		}
		/* poll: until the main thread is a zombie */
		snprintf(st_path, sizeof(st_path), "/proc/%d/stat", (int)pid);
		for (int i = 0; i < 3000 && st_c != 'Z'; i++) {
			char line[512], *p;

			f = fopen(st_path, "r");
			p = f && fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
			st_c = p ? p[2] : 0;
			if (f)
				fclose(f);
			if (st_c != 'Z')
				usleep(10000);
		}
		ok(st_c == 'Z', "a child whose main thread called pthread_exit(): that thread a zombie");
		is_int(proc_exiting(pid), 0, "... its other thread runs: 0");
		if (write(gate[1], "g", 1) != 1)
			return 1;
		waitpid(pid, &st, 0);
		(void)go;
	}
	return test_done();
}
