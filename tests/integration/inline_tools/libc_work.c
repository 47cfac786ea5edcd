// SPDX-License-Identifier: MIT
/*
 * libc_work: a live multi-threaded program calling libc's common
 * functions and checking its own results, for the inline safety battery
 * (tests/integration/inline_safety_libc.sh).
 *
 *   libc_work DIR   N worker threads (LW_THREADS, default 3) each run
 *                   rounds of malloc, free, calloc, realloc,
 *                   __libc_malloc, memcpy, memset, strlen, strcmp,
 *                   memcmp, qsort, snprintf, pthread_mutex_lock/unlock,
 *                   clock_gettime, nanosleep, getpid, open, read,
 *                   write, close, fopen, fwrite, fclose, checking every
 *                   result, with a 200 us sleep between rounds (it never
 *                   spins); another thread sends the workers SIGUSR1
 *                   every ms (the handler calls getpid, clock_gettime,
 *                   write to a pipe: a probe and a live write in a
 *                   signal handler), and one sits blocked in read() on
 *                   a pipe (a thread in a system call across each
 *                   attach).  LW_SEALED=1: one more worker runs the
 *                   same rounds with every signal blocked for good (a
 *                   sigwait() design: the live write cannot signal it,
 *                   and an int3 would kill it).  Creates DIR/ready once running and stops
 *                   when DIR/stop exists (DIR/ready holds its pid); prints "rounds R bad B
 *                   signals S" and exits 0 when B is 0 (a failed check
 *                   is named on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);

static const char *dir;
static atomic_long rounds, bad, signals;
static atomic_int stop;
static int sigpipe[2], blockpipe[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long shared;

#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c)) {                                                        \
			atomic_fetch_add(&bad, 1);                                 \
			fprintf(stderr, "libc_work: check failed: %s (line %d)\n", \
				#c, __LINE__);                                     \
		}                                                                  \
	} while (0)

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

static void on_usr1(int sig)
{
	struct timespec ts;
	int e = errno;
	char c = 's';

	(void)sig;
	if (getpid() > 0 && clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
		atomic_fetch_add(&signals, 1);
	(void)!write(sigpipe[1], &c, 1);
	errno = e;
}

static void round_(int id, long r)
{
	volatile size_t n = 100 + (size_t)(r % 50);
	char *a = malloc(n), *b = calloc(n, 1), *c, path[256], buf[256];
	int v[64];
	struct timespec t0, t1, nap = { 0, 1000 };
	FILE *f;
	int fd;

	CHECK(a && b);
	if (!a || !b) {
		free(a);
		free(b);
		return;
	}
	for (size_t i = 0; i < n; i++)
		CHECK(b[i] == 0);
	memset(a, 'x', n - 1);
	a[n - 1] = '\0';
	CHECK(strlen(a) == n - 1);
	memcpy(b, a, n);
	CHECK(memcmp(a, b, n) == 0 && strcmp(a, b) == 0);
	b[n / 2] = 'y';
	CHECK(memcmp(a, b, n) < 0 && strcmp(a, b) < 0);
	c = realloc(a, 2 * n);
	CHECK(c && c[0] == 'x' && c[n - 2] == 'x');
	if (c)
		a = c;
	free(a);
	free(b);
	a = __libc_malloc(64);
	CHECK(a != NULL);
	free(a);
	for (int i = 0; i < 64; i++)
		v[i] = (int)((i * 7919 + r) % 101);
	qsort(v, 64, sizeof(v[0]), cmp_int);
	for (int i = 1; i < 64; i++)
		CHECK(v[i - 1] <= v[i]);
	CHECK(snprintf(buf, sizeof(buf), "%d-%ld", id, r) > 0);
	snprintf(path, sizeof(path), "%d-%ld", id, r);
	CHECK(strcmp(buf, path) == 0);
	pthread_mutex_lock(&mu);
	shared++;
	pthread_mutex_unlock(&mu);
	CHECK(clock_gettime(CLOCK_MONOTONIC, &t0) == 0);
	while (nanosleep(&nap, &nap) && errno == EINTR)
		;
	CHECK(clock_gettime(CLOCK_MONOTONIC, &t1) == 0);
	CHECK(t1.tv_sec > t0.tv_sec || (t1.tv_sec == t0.tv_sec && t1.tv_nsec >= t0.tv_nsec));
	CHECK(getpid() > 1);
	snprintf(path, sizeof(path), "%s/f%d", dir, id);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK(write(fd, buf, strlen(buf)) == (ssize_t)strlen(buf));
		CHECK(lseek(fd, 0, SEEK_SET) == 0);
		memset(path, 0, sizeof(path));
		CHECK(read(fd, path, sizeof(path)) == (ssize_t)strlen(buf));
		CHECK(strcmp(path, buf) == 0);
		CHECK(close(fd) == 0);
	}
	snprintf(path, sizeof(path), "%s/g%d", dir, id);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		CHECK(fwrite(buf, 1, strlen(buf), f) == strlen(buf));
		CHECK(fclose(f) == 0);
	}
}

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	struct timespec nap = { 0, 200000 };

	for (long r = 0; !atomic_load(&stop); r++) {
		round_(id, r);
		atomic_fetch_add(&rounds, 1);
		nanosleep(&nap, NULL);
	}
	return NULL;
}

/* A worker with every signal blocked for good (id 16: its own files). */
static void *sealed_worker(void *arg)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	return worker(arg);
}

static void *signaller(void *arg)
{
	pthread_t *w = arg;
	int nw = atoi(getenv("LW_THREADS") ? getenv("LW_THREADS") : "3");
	struct timespec nap = { 0, 1000000 };
	char drain[64];

	for (long i = 0; !atomic_load(&stop); i++) {
		pthread_kill(w[i % nw], SIGUSR1);
		nanosleep(&nap, NULL);
		while (read(sigpipe[0], drain, sizeof(drain)) > 0)
			;
	}
	return NULL;
}

static void *blocked(void *arg)
{
	char c = 0;
	ssize_t n;

	(void)arg;
	while ((n = read(blockpipe[0], &c, 1)) < 0 && errno == EINTR)
		;
	CHECK(n == 1 && c == 'q');
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	int nw = atoi(getenv("LW_THREADS") ? getenv("LW_THREADS") : "3");
	int sealed = getenv("LW_SEALED") && !strcmp(getenv("LW_SEALED"), "1");
	pthread_t w[16], sg, bl, sw;
	char path[512], stopf[512];
	struct timespec nap = { 0, 20000000 };
	FILE *f;

	if (argc != 2 || nw < 1 || nw > 16) {
		fprintf(stderr, "usage: LW_THREADS=N libc_work DIR\n");
		return 2;
	}
	dir = argv[1];
	if (pipe2(sigpipe, O_NONBLOCK | O_CLOEXEC) || pipe2(blockpipe, O_CLOEXEC))
		return 2;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < nw; i++)
		pthread_create(&w[i], NULL, worker, (void *)(long)i);
	pthread_create(&sg, NULL, signaller, w);
	pthread_create(&bl, NULL, blocked, NULL);
	if (sealed)
		pthread_create(&sw, NULL, sealed_worker, (void *)16L);
	snprintf(path, sizeof(path), "%s/ready.tmp", dir);
	f = fopen(path, "w");
	if (!f)
		return 2;
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	snprintf(stopf, sizeof(stopf), "%s/ready", dir);
	rename(path, stopf);
	snprintf(path, sizeof(path), "%s/stop", dir);
	while (access(path, F_OK))
		nanosleep(&nap, NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < nw; i++)
		pthread_join(w[i], NULL);
	pthread_join(sg, NULL);
	if (sealed)
		pthread_join(sw, NULL);
	(void)!write(blockpipe[1], "q", 1);
	pthread_join(bl, NULL);
	CHECK(shared == atomic_load(&rounds));
	printf("rounds %ld bad %ld signals %ld\n", atomic_load(&rounds), atomic_load(&bad),
	       atomic_load(&signals));
	return atomic_load(&bad) ? 1 : 0;
}
