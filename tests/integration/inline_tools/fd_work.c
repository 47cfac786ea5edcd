// SPDX-License-Identifier: MIT
/*
 * fd_work: a program that counts on the descriptor numbers POSIX gives
 * (the lowest free one), with fay's runtime in it (tests/integration/
 * inline_fds.sh).  Each mode prints one line on stderr:
 *
 *   fd_work reuse        close(1) at once, then 150 ms later open() a
 *                        file, which must be 1, and close(1) again and
 *                        dup2() onto 1 (no EBUSY): "open 1 dup2 1"
 *   fd_work eof FLAG     write a byte to stdout, close(1), then wait up
 *                        to 3 s for FLAG (made by the reader once it saw
 *                        the pipe's end): "eof seen" or "eof not seen"
 *   fd_work closerange K close_range(3, ~0) (a daemon's habit), then K
 *                        calls of fay_fd_fn(i): "calls K"
 *   fd_work seccomp MODE ...  under a seccomp filter that allows every
 *                        system call (the runtime's thread then shares
 *                        the program's table), exec itself with MODE ...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline, noipa)) long fay_fd_fn(long i)
{
	__asm__ volatile("" ::: "memory");
	return i + 1;
}

static void nap_ms(long ms)
{
	struct timespec d = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&d, &d) && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "reuse")) {
		int fd, d, nul;

		close(1);
		nap_ms(150);	/* the runtime's thread is up, waiting for fay */
		fd = open("/dev/null", O_WRONLY);
		close(1);
		nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
		nap_ms(50);
		d = dup2(nul, 1);
		fprintf(stderr, "open %d dup2 %d%s%s\n", fd, d, d < 0 ? " " : "",
			d < 0 ? strerror(errno) : "");
		return 0;
	}
	if (!strcmp(mode, "eof") && argc > 2) {
		int i;

		if (write(1, "x", 1) != 1)
			return 1;
		close(1);
		for (i = 0; i < 300 && access(argv[2], F_OK); i++)
			nap_ms(10);
		fprintf(stderr, "eof %s\n", i < 300 ? "seen" : "not seen");
		return 0;
	}
	if (!strcmp(mode, "closerange") && argc > 2) {
		long k = atol(argv[2]), s = 0;

		if (syscall(SYS_close_range, 3u, ~0u, 0u))
			fprintf(stderr, "close_range: %s\n", strerror(errno));
		for (long i = 0; i < k; i++)
			s += fay_fd_fn(i);
		fprintf(stderr, "calls %ld sum %ld\n", k, s);
		return 0;
	}
	if (!strcmp(mode, "seccomp") && argc > 2) {
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		struct sock_fprog prog = { 1, &allow };

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
			fprintf(stderr, "seccomp: %s\n", strerror(errno));
			return 1;
		}
		execv("/proc/self/exe", argv + 1);
		fprintf(stderr, "exec: %s\n", strerror(errno));
		return 1;
	}
	fprintf(stderr, "usage: fd_work reuse | eof FLAG | closerange K | seccomp MODE ...\n");
	return 2;
}
