// SPDX-License-Identifier: MIT
/*
 * A fixed span workload for tests/integration/span_golden.sh: the same
 * names, tags, events, ids taken from fixed traceparents, parentage,
 * truncation and unsampled spans every run, so that what the collector
 * stores can be compared with a golden file (tests/golden/spans/).  Span
 * ids libfay draws at random are made into labels by the test;
 * timestamps are checked against the wall clock this program reads
 * before and after the workload, which it prints as "before NS" and
 * "after NS".  Linked with libfay.so, so that the same binary can be run
 * against another build of the library (LD_LIBRARY_PATH).
 *
 *   span_golden [--blkin]     (--blkin: also BlkKin records, blkin.h)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fay/blkin.h>
#include <fay/trace.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* A request as a server handles it: a remote parent, a child, a grandchild. */
static void request(const char *tp, int i)
{
	struct fay_span *s = fay_span_remote(tp, "golden.handle");
	struct fay_span *c, *g;

	fay_span_event(s, "sr");
	fay_span_tag(s, "object", "rbd.0001");
	fay_span_tag_int(s, "i", i);
	c = fay_span_child(s, "golden.io");
	fay_span_tag(c, "dev", "vda");
	fay_span_event(c, "queued");
	g = fay_span_child(c, "golden.io.complete");
	fay_span_tag_int(g, "bytes", -4096);
	fay_span_end(g);
	fay_span_event(c, "done");
	fay_span_end(c);
	fay_span_event(s, "ss");
	fay_span_end(s);
}

static void blkin_part(void)
{
	struct blkin_endpoint ep;
	struct blkin_trace t, child;
	struct blkin_trace_info info = { .trace_id = 0x1234, .span_id = 0x5678,
					 .parent_span_id = 0 };

	blkin_init_endpoint(&ep, "10.0.0.9", 6800, "osd.golden");
	blkin_init_child_info(&t, &info, &ep, "golden.blkin");
	BLKIN_TIMESTAMP(&t, &ep, "sr");
	BLKIN_KEYVAL_STRING(&t, &ep, "op", "write");
	BLKIN_KEYVAL_INTEGER(&t, &ep, "len", 4096);
	blkin_init_child(&child, &t, &ep, "golden.blkin.sub");
	BLKIN_TIMESTAMP(&child, &ep, "cs");
	BLKIN_TIMESTAMP(&child, &ep, "cr");
	BLKIN_TIMESTAMP(&t, &ep, "ss");
}

int main(int argc, char **argv)
{
	char longname[400], big[200], key[16];
	struct fay_span *s, *u;
	int err;

	err = fay_init("golden", "10.0.0.7", 7001);
	if (err) {
		fprintf(stderr, "span_golden: fay_init: %s\n", strerror(-err));
		return 1;
	}
	if (argc > 1 && !strcmp(argv[1], "--blkin") && blkin_init()) {
		fprintf(stderr, "span_golden: blkin_init failed\n");
		return 1;
	}
	printf("before %llu\n", now_ns());

	request("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", 1);
	/* libfay's TSC clock measures its rate over 256 ms of a thread's
	 * reads: what follows is timed by it, not by clock_gettime */
	usleep(300000);
	request("00-0000000000000000000000000000abcd-00000000000000ef-01", 2);
	/* not sampled upstream: nothing recorded, ids still flow */
	request("00-0af7651916cd43dd8448eb211c80319c-00000000000000aa-00", 3);

	/* a root of a new trace (random ids), names and strings at the edges */
	s = fay_span_root("golden.root");
	fay_span_tag(s, "empty", "");
	fay_span_tag(s, "", "no key");
	fay_span_tag(s, NULL, NULL);
	fay_span_event(s, NULL);
	fay_span_tag(s, "utf8", "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93");
	fay_span_tag_int(s, "min", INT64_MIN);
	fay_span_tag_int(s, "max", INT64_MAX);
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	u = fay_span_child(s, longname);        /* cut to 256 bytes */
	fay_span_end(u);
	u = fay_span_child(s, NULL);            /* "" */
	fay_span_end(u);
	fay_span_end(s);

	/* more than a handle holds: the last tags are dropped and counted */
	s = fay_span_remote("00-0000000000000000000000000000beef-0000000000000001-01",
			    "golden.truncated");
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	for (int i = 0; i < 12; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		fay_span_tag(s, key, big);
	}
	fay_span_event(s, "after-the-cut");
	fay_span_end(s);

	/* a malformed traceparent: a new root */
	s = fay_span_remote("00-zz", "golden.badparent");
	fay_span_end(s);

	if (argc > 1 && !strcmp(argv[1], "--blkin"))
		blkin_part();
	printf("after %llu\n", now_ns());
	return 0;
}
