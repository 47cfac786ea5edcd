// SPDX-License-Identifier: MIT
/*
 * A traced workload for the flight recorder's tests (tests/integration/
 * flight_capture.sh): requests of one root span and --children child
 * spans, one line per request on stdout once it ended:
 *
 *     TRACE_HEX SAMPLED NSPANS START_NS END_NS
 *
 * (SAMPLED 1 when head sampling chose the trace, from its traceparent),
 * so the test knows which spans were recorded, and which were shipped.
 * Run it with FAY_SAMPLE and FAY_RECORD=all in the environment.
 *
 *   flight_workload [--requests N] [--children K] [--service NAME]
 *                   [--pause-us US] [--child-pause-us US]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fay/trace.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "requests", required_argument, NULL, 'n' },
		{ "children", required_argument, NULL, 'k' },
		{ "service", required_argument, NULL, 's' },
		{ "pause-us", required_argument, NULL, 'p' },
		{ "child-pause-us", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	long requests = 100, children = 3, pause_us = 100, child_pause_us = 0;
	const char *service = "flightd";
	int opt, err;

	while ((opt = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (opt) {
		case 'n': requests = atol(optarg); break;
		case 'k': children = atol(optarg); break;
		case 's': service = optarg; break;
		case 'p': pause_us = atol(optarg); break;
		case 'c': child_pause_us = atol(optarg); break;
		default:
			fprintf(stderr, "usage: flight_workload [--requests N] [--children K] "
				"[--service NAME] [--pause-us US] [--child-pause-us US]\n");
			return 2;
		}
	}
	err = fay_init(service, "127.0.0.1", 7100);
	if (err) {
		fprintf(stderr, "fay_init: %s\n", strerror(-err));
		return 1;
	}
	for (long i = 0; i < requests; i++) {
		char tp[FAY_TRACEPARENT_LEN];
		unsigned long long t0 = now_ns(), t1;
		struct fay_span *root = fay_span_root("request");

		fay_span_tag_int(root, "request", i);
		for (long k = 0; k < children; k++) {
			struct fay_span *c = fay_span_child(root, "step");

			fay_span_event(c, "work");
			fay_span_end(c);
			if (child_pause_us)
				usleep((useconds_t)child_pause_us);
		}
		if (fay_span_traceparent(root, tp, sizeof(tp)) < 0) {
			fprintf(stderr, "no traceparent for request %ld\n", i);
			return 1;
		}
		fay_span_end(root);
		t1 = now_ns();
		/* 00-TRACE(32)-SPAN(16)-FLAGS(2) */
		printf("%.32s %c %ld %llu %llu\n", tp + 3, tp[54] == '1' ? '1' : '0', children + 1,
		       t0, t1);
		if (pause_us)
			usleep((useconds_t)pause_us);
	}
	fflush(stdout);
	return 0;
}
