// SPDX-License-Identifier: MIT
/*
 * inline_vec: a probed function whose arguments and result are 256-bit
 * (AVX) or 512-bit (AVX-512) vectors, called first on fresh threads, so
 * that each thread's first call runs the inline-probe runtime's slow
 * path (tests/integration/inline_vec.sh).
 *
 *   inline_vec ymm N K    N threads, one after another, each calling
 *                         fay_inline_ymm() K times with values of its
 *                         own (its first call is its first probe);
 *                         prints "calls C bad B first_bad F" (F: wrong
 *                         results of threads' first calls)
 *   inline_vec zmm N K    the same with fay_inline_zmm() (exit 3 when
 *                         the CPU has no AVX-512F)
 *   inline_vec cpu        prints "avx2 0|1 avx512f 0|1"
 *
 * A result is right when every lane is exactly what the arguments give
 * (small integers: no rounding).  Exit status 0 when all are right, 1
 * otherwise.  QW_WAIT=PATH waits until PATH exists before starting;
 * QW_READY=PATH creates PATH first (the process is up: fay may attach).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <immintrin.h>

#define NARGS	8	/* the arguments fill ymm0-7 / zmm0-7 */

/* The probed functions, NAME(a, .., h) of vector type V, code for ISA:
 * the sum over j of argument j * (j + 1), lane by lane (every lane of
 * every argument register reaches the result, in ymm0 / zmm0). */
#define PROBED(name, V, isa)									\
	__attribute__((noinline, noipa, used, target(isa)))					\
	V name(V a, V b, V c, V d, V e, V f, V g, V h);						\
	V name(V a, V b, V c, V d, V e, V f, V g, V h)						\
	{											\
		return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;		\
	}
PROBED(fay_inline_ymm, __m256d, "avx2")
PROBED(fay_inline_zmm, __m512d, "avx512f")

static long per_thread;
static long total_bad, first_bad;

/* Argument j, lane l of call i on thread t: distinct small integers. */
static double arg_of(long t, long i, int j, int l)
{
	return (double)(t * 1000 + i % 100 * 10 + j) + l * 0.25;
}

static double want_of(long t, long i, int l)
{
	double w = 0;

	for (int j = 0; j < NARGS; j++)
		w += arg_of(t, i, j, l) * (j + 1);
	return w;
}

/* v[j * lanes + l]: argument j, lane l of call i on thread t */
static void args_of(double *v, int lanes, long t, long i)
{
	for (int j = 0; j < NARGS; j++)
		for (int l = 0; l < lanes; l++)
			v[j * lanes + l] = arg_of(t, i, j, l);
}

/* Whether every lane of r is what call i on thread t must return. */
static int right(const double *r, int lanes, long t, long i)
{
	for (int l = 0; l < lanes; l++)
		if (r[l] != want_of(t, i, l))
			return 0;
	return 1;
}

/* NAME(t, i): one call of FN (vectors of type V, LANES doubles, code for
 * ISA): whether every lane of its result is right */
#define CALLER(name, fn, V, lanes, isa)								\
	__attribute__((target(isa))) static int name(long t, long i)				\
	{											\
		V a[NARGS], x;									\
		double r[lanes];								\
												\
		args_of((double *)a, lanes, t, i);						\
		x = fn(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);				\
		memcpy(r, &x, sizeof(r));							\
		return right(r, lanes, t, i);							\
	}
CALLER(call_ymm, fay_inline_ymm, __m256d, 4, "avx2")
CALLER(call_zmm, fay_inline_zmm, __m512d, 8, "avx512f")

static int (*call_one)(long t, long i);

static void *thread_main(void *arg)
{
	long t = (long)arg, bad = 0;

	for (long i = 0; i < per_thread; i++) {
		int ok = call_one(t, i);

		bad += !ok;
		if (i == 0 && !ok)
			__atomic_add_fetch(&first_bad, 1, __ATOMIC_RELAXED);
	}
	__atomic_add_fetch(&total_bad, bad, __ATOMIC_RELAXED);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "", *wait = getenv("QW_WAIT");
	long n = argc > 3 ? atol(argv[2]) : 0;

	__builtin_cpu_init();
	if (!strcmp(mode, "cpu")) {
		printf("avx2 %d avx512f %d\n", !!__builtin_cpu_supports("avx2"),
		       !!__builtin_cpu_supports("avx512f"));
		return 0;
	}
	if (argc < 4 || n < 1 || (strcmp(mode, "ymm") && strcmp(mode, "zmm"))) {
		fprintf(stderr, "usage: inline_vec ymm|zmm N K | cpu\n");
		return 2;
	}
	if (mode[0] == 'y' ? !__builtin_cpu_supports("avx2") : !__builtin_cpu_supports("avx512f")) {
		fprintf(stderr, "inline_vec: this CPU has no %s\n",
			mode[0] == 'y' ? "AVX2" : "AVX-512F");
		return 3;
	}
	call_one = mode[0] == 'y' ? call_ymm : call_zmm;
	per_thread = atol(argv[3]);
	if (getenv("QW_READY")) {
		FILE *f = fopen(getenv("QW_READY"), "w");

		if (f)
			fclose(f);
	}
	while (wait && access(wait, F_OK))
		usleep(1000);
	for (long t = 0; t < n; t++) {
		pthread_t th;

		if (pthread_create(&th, NULL, thread_main, (void *)(t + 1)) ||
		    pthread_join(th, NULL))
			return 4;
	}
	printf("calls %ld bad %ld first_bad %ld\n", n * per_thread, total_bad, first_bad);
	return total_bad ? 1 : 0;
}
