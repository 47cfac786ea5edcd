// SPDX-License-Identifier: MIT
/*
 * inline_spans: a libfay program (linked with libfay.so) whose requests
 * of two types call one probed function, for the trace_id / span_name
 * fields of inline probes (tests/integration/inline_spans.sh).
 *
 *   inline_spans K     K requests: request i is a root span named "read"
 *                      (i % 3 == 0) or "write", calling fay_span_fn(i)
 *                      once; every 4th also calls it inside a child span
 *                      "inner"; then K / 2 calls outside any span, and
 *                      K / 4 inside a root span ended by another thread
 *                      first (not current any more).  Prints the counts
 *                      it made: "read R write W inner I none N".
 *
 * QW_WAIT=PATH waits until PATH exists before starting.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fay/trace.h>

__attribute__((noinline, noipa, used)) long fay_span_fn(long a);
long fay_span_fn(long a)
{
	__asm__ volatile("" ::: "memory");
	return a * 3;
}

static void *end_it(void *s)
{
	fay_span_end(s);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *wait = getenv("QW_WAIT");
	long k = argc > 1 ? atol(argv[1]) : 0, r = 0, w = 0, in = 0, none = 0, bad = 0;

	if (fay_init("inline-spans", NULL, 0)) {
		fprintf(stderr, "inline_spans: fay_init failed\n");
		return 1;
	}
	while (wait && access(wait, F_OK))
		usleep(1000);
	for (long i = 0; i < k; i++) {
		struct fay_span *s = fay_span_root(i % 3 == 0 ? "read" : "write");

		bad += fay_span_fn(i) != i * 3;
		*(i % 3 == 0 ? &r : &w) += 1;
		if (i % 4 == 0) {
			struct fay_span *c = fay_span_child(s, "inner");

			bad += fay_span_fn(i) != i * 3;
			in++;
			fay_span_end(c);
		}
		fay_span_end(s);
	}
	for (long i = 0; i < k / 2; i++, none++)
		bad += fay_span_fn(i) != i * 3;
	for (long i = 0; i < k / 4; i++, none++) {
		struct fay_span *s = fay_span_root("handed-off");
		pthread_t t;

		pthread_create(&t, NULL, end_it, s);
		pthread_join(t, NULL);
		bad += fay_span_fn(i) != i * 3;
	}
	printf("read %ld write %ld inner %ld none %ld\n", r, w, in, none);
	return bad ? 1 : 0;
}
