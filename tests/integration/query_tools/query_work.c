// SPDX-License-Identifier: MIT
/*
 * query_work: workloads whose truth is known by construction, for the
 * fay query tests and bench/bench_query.sh.
 *
 *   query_work calls K [MS]   fay_work_fn(i, 7) for i in 0..K-1 (returns i + 7);
 *                             with MS, the calls spread over at least MS
 *                             milliseconds (a busy wait between calls,
 *                             never a sleep: as fast a loop as the pace allows)
 *   query_work words K        fay_work_word(w, i): w cycles "alpha" "beta" "gamma"
 *   query_work sleep K US     fay_work_sleep(US) K times (nanosleep)
 *   query_work usdt K         USDT fayq:tick (i, 2*i, "tick") K times
 *   query_work getppid K      K getppid() system calls
 *   query_work sysmix K       K getppid, K/2 getuid, K/3 dup and close
 *   query_work mutex K        K pthread_mutex_lock/unlock, K/2 trylock/unlock
 *   query_work read K N       K reads of N bytes of /dev/zero
 *   query_work spin MS        burn the CPU for MS milliseconds; prints
 *                             "cpu_ns N" (the CPU time it got) on stderr
 *   query_work lat K          fay_work_lat(i) K times: an empty function
 *   query_work signal K N     K kill(self, SIGUSR1) (group signals) and N
 *                             tgkill(self, self, SIGUSR1) (thread signals)
 *   query_work open K         K openat(AT_FDCWD, QW_OPEN_PATH) of a path that
 *                             does not exist
 *   query_work pages K        mmap K anonymous pages and touch each once
 *   query_work dwrite K FILE  K O_DIRECT 4 KiB writes to FILE, then fsync
 *   query_work usdt2 K        USDT fayq:multi (i) K times at each of two
 *                             sites that keep i in %rax and in %rcx
 *   query_work behave MS KIND behave as a kind of host for MS milliseconds,
 *                             in rounds of 16 operations and a 2 ms sleep:
 *                             file (openat, read, fstat, close of
 *                             /proc/self/stat), net (sendto and recvfrom
 *                             on an AF_UNIX datagram pair), idle (the sleep
 *                             alone): system-call mixes k-means tells apart
 *   query_work fork K         K fork()s, each child _exit(0) at once, each
 *                             waited for (waitpid)
 *
 * Environment: QW_WAIT=PATH waits until PATH exists before starting;
 * QW_READY=PATH creates PATH first, in main (the workload is exec'd and
 * glibc started: fay may attach to it or load its runtime into it);
 * QW_TIME=1 prints "loop_ns N cpu_ns M" on stdout: the loop's wall-clock
 * time and the CPU time the process spent in it (probes run in the
 * traced process's context: their cost is in M, the time other processes
 * of a busy machine take is not).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <sys/sdt.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

#define QW_OPEN_PATH "/proc/self/fay-query-work-no-such-file"

static void on_signal(int sig)
{
	(void)sig;
}

/*
 * One USDT probe, fayq:multi, at two sites whose argument lives in
 * different registers: sys/sdt.h lets the compiler choose the operand,
 * and a register variable makes it choose %rax at one site and %rcx at
 * the other (readelf -n shows "-8@%rax" and "-8@%rcx").
 */
NOIPA void fay_work_multi_a(long i);
NOIPA void fay_work_multi_a(long i)
{
	register long v __asm__("rax") = i;

	__asm__ volatile("" : "+r"(v));
	STAP_PROBE1(fayq, multi, v);
}

NOIPA void fay_work_multi_c(long i);
NOIPA void fay_work_multi_c(long i)
{
	register long v __asm__("rcx") = i;

	__asm__ volatile("" : "+r"(v));
	STAP_PROBE1(fayq, multi, v);
}

static int dwrite(long k, const char *path)
{
	void *buf;
	int fd;

	if (!path || posix_memalign(&buf, 4096, 4096))
		return 1;
	memset(buf, 'f', 4096);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0600);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	for (long i = 0; i < k; i++)
		if (write(fd, buf, 4096) != 4096) {
			perror("write");
			return 1;
		}
	fsync(fd);
	close(fd);
	free(buf);
	return 0;
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

/* query_work behave MS KIND (above). */
static int behave(long ms, const char *kind)
{
	const struct timespec nap = { 0, 2000000 };
	int file = !strcmp(kind, "file"), net = !strcmp(kind, "net");
	long long end = now_ns() + ms * 1000000ll;
	int sv[2] = { -1, -1 };
	char b[512];

	if (!file && !net && strcmp(kind, "idle")) {
		fprintf(stderr, "query_work behave: kind %s: want file, net or idle\n", kind);
		return -1;
	}
	if (net && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	while (now_ns() < end) {
		for (int i = 0; i < 16 && file; i++) {
			struct stat st;
			int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);

			if (fd < 0)
				return -1;
			if (read(fd, b, sizeof(b)) < 0 || fstat(fd, &st))
				return -1;
			close(fd);
		}
		for (int i = 0; i < 16 && net; i++) {
			if (sendto(sv[0], "x", 1, 0, NULL, 0) != 1 ||
			    recvfrom(sv[1], b, sizeof(b), 0, NULL, NULL) != 1)
				return -1;
		}
		nanosleep(&nap, NULL);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const words[] = { "alpha", "beta", "gamma" };
	const char *wait = getenv("QW_WAIT"), *mode = argc > 1 ? argv[1] : "";
	long k = argc > 2 ? atol(argv[2]) : 0, n = argc > 3 ? atol(argv[3]) : 0;
	long long t0, c0;
	char buf[65536];

	if (argc < 3) {
		fprintf(stderr, "usage: query_work calls|words|sleep|usdt|usdt2|sysmix|mutex|getppid|read|spin|lat|signal|open|pages|dwrite|behave|fork K [N|FILE|KIND]\n");
		return 2;
	}
	if (getenv("QW_READY"))
		close(open(getenv("QW_READY"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	while (wait && access(wait, F_OK))
		usleep(1000);
	t0 = now_ns();
	c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	if (!strcmp(mode, "calls")) {
		for (long i = 0; i < k; i++) {
			fay_work_fn(i, 7);
			/* paced (MS): call i + 1 not before t0 + (i + 1) * MS / K */
			while (n > 0 && now_ns() - t0 < (i + 1) * n * 1000000ll / k)
				;
		}
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
	} else if (!strcmp(mode, "usdt2")) {
		for (long i = 0; i < k; i++) {
			fay_work_multi_a(i);
			fay_work_multi_c(i);
		}
	} else if (!strcmp(mode, "signal")) {
		signal(SIGUSR1, on_signal);
		for (long i = 0; i < k; i++)
			kill(getpid(), SIGUSR1);
		for (long i = 0; i < n; i++)
			syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGUSR1);
	} else if (!strcmp(mode, "open")) {
		for (long i = 0; i < k; i++)
			if (openat(AT_FDCWD, QW_OPEN_PATH, O_RDONLY) >= 0)
				return 1;
	} else if (!strcmp(mode, "pages")) {
		long pg = sysconf(_SC_PAGESIZE);
		volatile char *m = mmap(NULL, (size_t)(k * pg), PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return 1;
		for (long i = 0; i < k; i++)
			m[i * pg] = 1;
		munmap((void *)m, (size_t)(k * pg));
	} else if (!strcmp(mode, "dwrite")) {
		if (dwrite(k, argv[3]))
			return 1;
	} else if (!strcmp(mode, "fork")) {
		for (long i = 0; i < k; i++) {
			pid_t c = fork();

			if (c == 0)
				_exit(0);
			if (c < 0 || waitpid(c, NULL, 0) != c)
				return 1;
		}
	} else if (!strcmp(mode, "sysmix")) {
		/* K getppid, K/2 getuid, K/3 dup and close: counts by
		 * system call name that differ from one another */
		for (long i = 0; i < k; i++) {
			syscall(SYS_getppid);
			if (i % 2)
				syscall(SYS_getuid);
			if (i % 3 == 0)
				syscall(SYS_close, (long)syscall(SYS_dup, 0L));
		}
	} else if (!strcmp(mode, "mutex")) {
		/* K lock/unlock pairs, and a trylock (and unlock) every
		 * other time: libc's pthread_mutex_* at known counts */
		static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

		for (long i = 0; i < k; i++) {
			pthread_mutex_lock(&mu);
			pthread_mutex_unlock(&mu);
			if (i % 2 == 0 && !pthread_mutex_trylock(&mu))
				pthread_mutex_unlock(&mu);
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
	} else if (!strcmp(mode, "behave")) {
		if (behave(k, argc > 3 ? argv[3] : ""))
			return 2;
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
