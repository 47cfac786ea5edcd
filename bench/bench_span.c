// SPDX-License-Identifier: MIT
/*
 * bench_span: what one span costs the traced program.
 *
 *   fay        fay_span_root + fay_span_event + fay_span_tag + fay_span_end
 *              (sampled: recorded into the thread's shm ring; unsampled:
 *              the same four calls on a span that is not recorded)
 *   remote     the same four calls with fay_span_remote(traceparent)
 *              instead of fay_span_root: a child of a remote parent, the
 *              traceparent parsed (sampled flag set)
 *   2 threads  the sampled span on two threads at once, each thread's
 *              CPU time per span (to compare with one thread's: no
 *              cache line is shared on the hot path)
 *   lttng-ust  the same information as BlkKin records it: four LTTng-UST
 *              tracepoints with BlkKin's event shapes (bench_span_lttng.h):
 *              zipkin:timestamp (start), zipkin:timestamp (the event),
 *              zipkin:keyval_string (the tag), zipkin:timestamp (end),
 *              each carrying trace name, service, port, ip and the ids.
 *   floor      what the machine gives any recorder: the three TSC reads a
 *              span with one event needs (begin, event, end), alone, on
 *              one thread and on two threads at once.  A span cannot
 *              cost less than its clock; two threads of these reads share
 *              nothing, so their ratio is the VM's own, not fay's.
 *
 * Both record into shared-memory rings that nobody drains during the run
 * (fay: a flight-recorder ring; LTTng: a snapshot session, overwrite
 * mode), in the same process, interleaved round by round; the figures are
 * medians over the rounds of the thread's CPU time per span.
 * bench/run-span.sh starts the LTTng session.
 *
 * Usage: bench_span [--rounds N] [--spans N] [--no-lttng]
 *        bench_span --callgrind N   (N spans of each kind in the
 *                                    functions one_span_sampled and
 *                                    one_span_unsampled, for
 *                                    valgrind --toggle-collect)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include <fay/trace.h>

#ifndef BENCH_NO_LTTNG
#include "bench_span_lttng.h"
#endif
#include "bench.h"

static const char *service = "mapperd", *ip = "10.0.0.7";
static const int port = 7001;

/* The thread's CPU time: on a shared, loaded VM the time this thread was
 * not running would otherwise land on whichever variant was running. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The LTTng loop's ids: BlkKin draws them from a PRNG too (xorshift64*). */
static uint64_t xs = 0x9e3779b97f4a7c15ull;
static inline long xrand(void)
{
	xs ^= xs >> 12;
	xs ^= xs << 25;
	xs ^= xs >> 27;
	return (long)((xs * 0x2545f4914f6cdd1dull) >> 1);
}

__attribute__((noinline)) void one_span_sampled(void);
__attribute__((noinline)) void one_span_unsampled(void);
__attribute__((noinline)) void one_span_remote(void);

static const char *remote_tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/* Four calls, as an instrumented request handler makes them. */
static inline void fay_span(void)
{
	struct fay_span *s = fay_span_root("write");

	fay_span_event(s, "queued");
	fay_span_tag(s, "object", "rbd.0001");
	fay_span_end(s);
}

/* A server's span: the parent came in a traceparent header. */
static inline void fay_span_from_remote(void)
{
	struct fay_span *s = fay_span_remote(remote_tp, "write");

	fay_span_event(s, "queued");
	fay_span_tag(s, "object", "rbd.0001");
	fay_span_end(s);
}

void one_span_remote(void)
{
	fay_span_from_remote();
}

/* Called only while the sampling is 1 (or 1 in UNSAMPLED_ONE_IN): named
 * so that callgrind can count exactly these. */
void one_span_sampled(void)
{
	fay_span();
}

void one_span_unsampled(void)
{
	fay_span();
}

/* Unsampled spans are measured as a production setting makes them: 1 in
 * N sampling with a large N, so the random draw is in the figure (with
 * fay_set_sampling(0) it would not be needed). */
#define UNSAMPLED_ONE_IN 4294967295u

static double run_fay(unsigned n, int sampled)
{
	uint64_t t0;

	fay_set_sampling(sampled ? 1 : UNSAMPLED_ONE_IN);
	t0 = now_ns();
	for (unsigned i = 0; i < n; i++)
		fay_span();
	return (double)(now_ns() - t0) / n;
}

static double run_remote(unsigned n)
{
	uint64_t t0 = now_ns();

	for (unsigned i = 0; i < n; i++)
		fay_span_from_remote();
	return (double)(now_ns() - t0) / n;
}

/* The clock floor: the three TSC reads of a span with one event, and
 * nothing else (the sum keeps the compiler from dropping them). */
static volatile uint64_t clock_sink;

static void clock_loop(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t a = __rdtsc(), b = __rdtsc(), c = __rdtsc();

		clock_sink += a ^ b ^ c;
	}
}

static double run_clock(unsigned n)
{
	uint64_t t0 = now_ns();

	clock_loop(n);
	return (double)(now_ns() - t0) / n;
}

static void span_loop(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		fay_span();
}

/* Two threads running one loop at the same time (for fay_span, sampling
 * must be 1): each measures its own CPU time per iteration; the result is
 * their mean. */
struct two {
	pthread_barrier_t *go;
	void (*loop)(unsigned n);
	unsigned n;
	double ns;
};

static void *two_thread(void *arg)
{
	struct two *w = arg;
	uint64_t t0;

	pthread_barrier_wait(w->go);
	t0 = now_ns();
	w->loop(w->n);
	w->ns = (double)(now_ns() - t0) / w->n;
	return NULL;
}

static double run_two(unsigned n, void (*loop)(unsigned n))
{
	pthread_barrier_t go;
	pthread_t th[2];
	struct two w[2] = { { &go, loop, n, 0 }, { &go, loop, n, 0 } };

	if (loop == span_loop)
		fay_set_sampling(1);
	pthread_barrier_init(&go, NULL, 2);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, two_thread, &w[i])) {
			fprintf(stderr, "error: pthread_create failed\n");
			exit(1);
		}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	return (w[0].ns + w[1].ns) / 2;
}

#ifndef BENCH_NO_LTTNG
static double run_lttng(unsigned n)
{
	uint64_t t0 = now_ns();

	for (unsigned i = 0; i < n; i++) {
		long trace = xrand(), span = trace;

		lttng_ust_tracepoint(zipkin, timestamp, "write", service, port, ip,
				     trace, span, 0, "sr");
		lttng_ust_tracepoint(zipkin, timestamp, "write", service, port, ip,
				     trace, span, 0, "queued");
		lttng_ust_tracepoint(zipkin, keyval_string, "write", service, port, ip,
				     trace, span, 0, "object", "rbd.0001");
		lttng_ust_tracepoint(zipkin, timestamp, "write", service, port, ip,
				     trace, span, 0, "ss");
	}
	return (double)(now_ns() - t0) / n;
}

static int lttng_recording(void)
{
	return lttng_ust_tracepoint_enabled(zipkin, timestamp) &&
	       lttng_ust_tracepoint_enabled(zipkin, keyval_string);
}
#endif

static unsigned arg_uint(const char *opt, const char *v)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = v ? strtoul(v, &end, 10) : 0;
	if (!v || errno || *end || !x || x > 100000000ul) {
		fprintf(stderr, "error: %s wants a whole number from 1 to 100000000, not '%s'\n",
			opt, v ? v : "");
		exit(2);
	}
	return (unsigned)x;
}

static int callgrind(unsigned n)
{
	/* warm up outside the counted functions: ring claimed, handle
	 * cache filled, ids generator seeded, lazy symbols bound */
	fay_set_sampling(1);
	for (int i = 0; i < 1000; i++)
		fay_span();
	for (unsigned i = 0; i < n; i++)
		one_span_sampled();
	for (int i = 0; i < 1000; i++)
		fay_span_from_remote();
	for (unsigned i = 0; i < n; i++)
		one_span_remote();
	fay_set_sampling(UNSAMPLED_ONE_IN);
	for (int i = 0; i < 1000; i++)
		fay_span();
	for (unsigned i = 0; i < n; i++)
		one_span_unsampled();
	return 0;
}

int main(int argc, char **argv)
{
	unsigned rounds = 11, spans = 200000, unsampled_mult = 10;
	int use_lttng = 1, err;
	double *fs, *fu, *fr, *f2, *lt, *c1, *c2, mfs, mfu, mfr, mf2, mlt = 0,
	       mc1, mc2;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = arg_uint("--rounds", argv[++i]);
		else if (!strcmp(argv[i], "--spans") && i + 1 < argc)
			spans = arg_uint("--spans", argv[++i]);
		else if (!strcmp(argv[i], "--no-lttng"))
			use_lttng = 0;
		else if (!strcmp(argv[i], "--callgrind") && i + 1 < argc) {
			err = fay_init(service, ip, port);
			if (err) {
				fprintf(stderr, "error: fay_init: %s\n", strerror(-err));
				return 1;
			}
			return callgrind(arg_uint("--callgrind", argv[++i]));
		} else {
			fprintf(stderr, "usage: %s [--rounds N] [--spans N] [--no-lttng] | --callgrind N\n",
				argv[0]);
			return 2;
		}
	}
#ifdef BENCH_NO_LTTNG
	use_lttng = 0;
#else
	if (use_lttng && !lttng_recording()) {
		fprintf(stderr, "error: the zipkin:* LTTng-UST tracepoints are not enabled: "
			"no LTTng session is recording them (run bench/run-span.sh, "
			"or pass --no-lttng)\n");
		return 2;
	}
#endif
	err = fay_init(service, ip, port);
	if (err) {
		fprintf(stderr, "error: fay_init: %s\n", strerror(-err));
		return 1;
	}
	fs = calloc(rounds, sizeof(double));
	fu = calloc(rounds, sizeof(double));
	fr = calloc(rounds, sizeof(double));
	f2 = calloc(rounds, sizeof(double));
	lt = calloc(rounds, sizeof(double));
	c1 = calloc(rounds, sizeof(double));
	c2 = calloc(rounds, sizeof(double));
	if (!fs || !fu || !fr || !f2 || !lt || !c1 || !c2)
		return 1;

	/* warm up: rings claimed, caches and branch predictors filled */
	run_fay(spans / 10 + 1, 1);
	run_fay(spans / 10 + 1, 0);
	run_two(spans / 10 + 1, span_loop);
	run_clock(spans / 10 + 1);
#ifndef BENCH_NO_LTTNG
	if (use_lttng)
		run_lttng(spans / 10 + 1);
#endif
	for (unsigned r = 0; r < rounds; r++) {
		fs[r] = run_fay(spans, 1);
		fu[r] = run_fay(spans * unsampled_mult, 0);
		fay_set_sampling(UNSAMPLED_ONE_IN);  /* remote: the flag decides */
		fr[r] = run_remote(spans);
		f2[r] = run_two(spans, span_loop);
		c1[r] = run_clock(spans);
		c2[r] = run_two(spans, clock_loop);
#ifndef BENCH_NO_LTTNG
		if (use_lttng)
			lt[r] = run_lttng(spans);
#endif
	}
	mfs = median(fs, rounds);
	mfu = median(fu, rounds);
	mfr = median(fr, rounds);
	mf2 = median(f2, rounds);
	mc1 = median(c1, rounds);
	mc2 = median(c2, rounds);
	printf("bench_span: %u rounds x %u spans, median ns per span (root+event+tag+end)\n",
	       rounds, spans);
	if (use_lttng) {
		mlt = median(lt, rounds);
		printf("sampled span:   fay %7.1f ns   lttng-ust %7.1f ns (4 tracepoints)   "
		       "ratio %.2f  (goal <= 50 ns and <= 0.10: %s)\n", mfs, mlt, mfs / mlt,
		       mfs <= 50.0 && mfs / mlt <= 0.10 ? "met" : "MISSED");
	} else {
		printf("sampled span:   fay %7.1f ns   (goal <= 50 ns: %s)\n", mfs,
		       mfs <= 50.0 ? "met" : "MISSED");
	}
	printf("unsampled span: fay %7.1f ns   (goal <= 3 ns: %s)\n", mfu,
	       mfu <= 3.0 ? "met" : "MISSED");
	printf("remote parent:  fay %7.1f ns   (goal <= 80 ns: %s)\n", mfr,
	       mfr <= 80.0 ? "met" : "MISSED");
	printf("two threads:    fay %7.1f ns per span per thread, %.2fx one thread's "
	       "(goal <= 1.10: %s)\n", mf2, mf2 / mfs, mf2 / mfs <= 1.10 ? "met" : "MISSED");
	printf("machine floor:  3 TSC reads %5.1f ns (a span with one event reads the clock 3 times: "
	       "fay's sampled span less its clock %.1f ns)\n", mc1, mfs - mc1);
	printf("machine floor:  3 TSC reads on two threads at once, sharing nothing: %.2fx one thread's\n",
	       mc2 / mc1);
	free(c1);
	free(c2);
	free(fs);
	free(fu);
	free(fr);
	free(f2);
	free(lt);
	return 0;
}
