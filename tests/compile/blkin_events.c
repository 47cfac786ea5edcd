// SPDX-License-Identifier: MIT
/*
 * A program written for ceph/blkin the way Ceph's own code uses it: spans
 * that record the program's own events ("start", "queued", "end") and a
 * key-value, never Zipkin's cs/sr/ss/cr.  Builds unchanged against libfay
 * (-I include/fay -lfay).  Zipkin 1.x gave such a span the timestamp of
 * its first annotation and the duration to its last; fay does the same at
 * ingest (tests/integration/blkin_search.sh runs this through an agent and
 * a collector and finds the trace by search).  Prints the trace id in
 * decimal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <zipkin_c.h>

static void pause_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

int main()
{
	struct blkin_endpoint ep;
	struct blkin_trace trace, child;

	if (blkin_init() < 0) {
		fprintf(stderr, "Could not initialize blkin\n");
		exit(1);
	}
	blkin_init_endpoint(&ep, "10.0.0.3", 6801, "osd.1");
	blkin_init_new_trace(&trace, "op_write", &ep);
	BLKIN_TIMESTAMP(&trace, &ep, "start");
	BLKIN_KEYVAL_STRING(&trace, &ep, "object", "rbd_data.2");
	pause_ms(3);
	blkin_init_child(&child, &trace, &ep, "journal_write");
	BLKIN_TIMESTAMP(&child, &ep, "journal start");
	pause_ms(2);
	BLKIN_TIMESTAMP(&child, &ep, "journal done");
	BLKIN_TIMESTAMP(&trace, &ep, "queued");
	pause_ms(3);
	BLKIN_TIMESTAMP(&trace, &ep, "end");
	printf("%lld\n", (long long)trace.info.trace_id);
	return 0;
}
