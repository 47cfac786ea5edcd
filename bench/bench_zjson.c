// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 JSON (a POST /api/v2/spans body) read into spans: the
 * streaming reader the collector uses (zjson_parse_spans,
 * src/collector/zjson_dec.c) against the jansson tree reader it replaced
 * (tests/fuzz/zjson_tree.c, compiled in), on the same bodies, in turn.
 *
 *   bench_zjson [-s SPANS_PER_REQUEST] [-r ROUNDS] [-t SECONDS]
 *
 * The spans are SDK-like: both endpoints, 10 tags, 2 annotations, a
 * parent, kind, 4 distinct traces a request.  Prints spans/s of each,
 * medians of ROUNDS, and the load average before and after.  Under
 * callgrind, --toggle-collect=zjson_parse_spans or
 * --toggle-collect=zjson_tree_parse_spans counts each one's instructions.
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "collector/zjson.h"
#include "../tests/fuzz/zjson_tree.c"

#define MAXR 32

typedef int reader_fn(const char *body, size_t len, struct zarena *a, struct zspan **out,
		      size_t *n, char *err, size_t errlen);

/* A body of n spans; malloc'ed. */
static char *body(int n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	uint64_t ts = 1795600000000000ull;

	fputc('[', f);
	for (int i = 0; i < n; i++) {
		uint64_t t = ts + (uint64_t)i * 1000;

		fprintf(f, "%s{\"traceId\":\"5b8efff798038103d269b633813fc6%02x\","
			"\"parentId\":\"%016x\",\"id\":\"%016x\",\"kind\":\"%s\","
			"\"name\":\"get /api/cart/%d\",\"timestamp\":%" PRIu64 ",\"duration\":%d,"
			"\"localEndpoint\":{\"serviceName\":\"checkout\",\"ipv4\":\"10.1.2.%d\","
			"\"port\":8080},\"remoteEndpoint\":{\"serviceName\":\"cart\","
			"\"ipv6\":\"2001:db8::%x\",\"port\":443},"
			"\"annotations\":[{\"timestamp\":%" PRIu64 ",\"value\":\"ws\"},"
			"{\"timestamp\":%" PRIu64 ",\"value\":\"wr\"}],"
			"\"tags\":{\"http.method\":\"GET\",\"http.path\":\"/api/cart/%d\","
			"\"http.status_code\":\"200\",\"http.url\":\"https://shop.example.com/api/cart/%d\","
			"\"net.peer.name\":\"cart.internal\",\"otel.library.name\":\"io.opentelemetry.http\","
			"\"otel.library.version\":\"1.2.0\",\"thread.name\":\"worker-%d\","
			"\"component\":\"http\",\"user.id\":\"u%06d\"}}",
			i ? "," : "", i % 4, i + 1000, i + 1, i % 2 ? "SERVER" : "CLIENT", i % 50, t,
			2500 + i % 100, i % 250 + 1, i % 4096 + 1, t + 100, t + 900, i % 50, i, i % 8,
			i);
	}
	fputc(']', f);
	fclose(f);
	return buf;
}

static double rate(reader_fn *rd, const char *b, size_t len, double secs)
{
	double t0 = bench_now_s(), t;
	size_t spans = 0;

	do {
		struct zarena a = { 0 };
		struct zspan *s;
		size_t n;
		char err[256];

		if (rd(b, len, &a, &s, &n, err, sizeof(err))) {
			fprintf(stderr, "refused: %s\n", err);
			exit(1);
		}
		spans += n;
		zarena_reset(&a);
		t = bench_now_s();
	} while (t - t0 < secs);
	return spans / (t - t0);
}

/* Both readers give the same spans (as the collector would serve them). */
static int same(const char *b, size_t len)
{
	struct zarena a = { 0 }, c = { 0 };
	struct zspan *s1, *s2;
	size_t n1, n2;
	char err[256], *t1 = NULL, *t2 = NULL;
	json_t *j1, *j2;
	int ok;

	if (zjson_parse_spans(b, len, &a, &s1, &n1, err, sizeof(err)) ||
	    zjson_tree_parse_spans(b, len, &c, &s2, &n2, err, sizeof(err)))
		return 0;
	j1 = zjson_spans(s1, n1);
	j2 = zjson_spans(s2, n2);
	if (j1 && j2) {
		t1 = json_dumps(j1, JSON_COMPACT);
		t2 = json_dumps(j2, JSON_COMPACT);
	}
	ok = t1 && t2 && !strcmp(t1, t2);
	json_decref(j1);
	json_decref(j2);
	free(t1);
	free(t2);
	zarena_reset(&a);
	zarena_reset(&c);
	return ok;
}

int main(int argc, char **argv)
{
	int spr = 512, rounds = 5;
	double secs = 0.5, ds[MAXR], dt[MAXR], ms, mt;
	char *b;
	size_t len;

	for (int o; (o = getopt(argc, argv, "s:r:t:")) != -1;) {
		switch (o) {
		case 's': spr = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 't': secs = atof(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-s SPANS_PER_REQUEST] [-r ROUNDS] [-t SECONDS]\n",
				argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAXR || spr < 1)
		return 2;
	b = body(spr);
	len = strlen(b);
	if (!same(b, len)) {
		fprintf(stderr, "the two readers do not give the same spans\n");
		return 1;
	}
	bench_loadavg("at the start");
	printf("requests of %d spans, %zu bytes (%zu a span)\n", spr, len, len / (size_t)spr);
	for (int r = 0; r < rounds; r++) {
		ds[r] = rate(zjson_parse_spans, b, len, secs);
		dt[r] = rate(zjson_tree_parse_spans, b, len, secs);
	}
	ms = median(ds, (unsigned)rounds);
	mt = median(dt, (unsigned)rounds);
	printf("  read into spans, median of %d:  streaming %.0f spans/s  jansson tree %.0f spans/s"
	       "  ratio %.2f\n", rounds, ms, mt, ms / mt);
	bench_loadavg("at the end");
	free(b);
	return 0;
}
