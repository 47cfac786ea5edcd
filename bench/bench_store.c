// SPDX-License-Identifier: MIT
/*
 * bench_store: the span store's two backends side by side, in one run:
 * SQLite (a fresh file) and ClickHouse (a server's HTTP interface).
 *
 *   bench_store --clickhouse URL [-n SPANS] [-b BATCH] [-t SPANS_PER_TRACE]
 *               [-q QUERIES] [--db PATH]
 *
 * 1. ingest: the same SPANS spans (traces of -t spans, 20 services, 50
 *    span names, a tag each, random durations) through store__write() in
 *    writes of -b spans (the collector's group commit), into each store;
 *    spans/s and the ClickHouse / SQLite ratio.
 * 2. trace by id: store__trace() of -q random stored traces on a warm
 *    reader: median and p99 milliseconds.
 * 3. search: store__traces() for a service and a minimum duration
 *    (Zipkin's serviceName + minDuration, limit 10, the last 24 h):
 *    median milliseconds of -q queries, services in turn.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/rand.h"
#include "store/store.h"

static unsigned nspans = 1000000, batch = 10000, per_trace = 8, nq = 50;
static const char *ch_url, *db_path = "/tmp/fay-bench-store.db";
static uint64_t base_us;

static char services[20][16], names[50][16];

/* Span i of the run: trace i / per_trace, deterministic from i. */
static void make_span(unsigned i, struct zspan *z, struct zs_tag *tag, char *val)
{
	unsigned t = i / per_trace, k = i % per_trace;
	uint64_t h = (uint64_t)t * 0x9e3779b97f4a7c15ull + 1;

	memset(z, 0, sizeof(*z));
	z->trace_hi = 0;
	z->trace_lo = h ^ (h >> 31);
	z->id = (uint64_t)k + 1;
	z->parent_id = k ? 1 : 0;
	z->kind = k ? 1 : 2;
	z->local.service = (struct zs_str){ services[(t + k) % 20],
					    (uint32_t)strlen(services[(t + k) % 20]) };
	z->name = (struct zs_str){ names[(t * 7 + k) % 50], (uint32_t)strlen(names[(t * 7 + k) % 50]) };
	z->timestamp_us = base_us + (uint64_t)t * 500 + k * 10;
	z->duration_us = 100 + (h >> 40) % 100000 / (k + 1);
	snprintf(val, 24, "%u", 200 + (t % 5 == 0) * 300);
	tag->key = ZS_STR("http.status_code");
	tag->value = (struct zs_str){ val, (uint32_t)strlen(val) };
	z->tags = tag;
	z->ntags = 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct result {
	double rate, id_ms, id_p99_ms, search_ms;
	size_t found;
};

static int run(const char *where, struct result *res)
{
	struct zspan *z = calloc(batch, sizeof(*z));
	struct zs_tag *tags = calloc(batch, sizeof(*tags));
	char (*vals)[24] = calloc(batch, 24);
	uint64_t *lat = calloc(nq, sizeof(*lat)), t0;
	char err[512];
	struct store *st = store__open(where, 0, err, sizeof(err));
	struct store_reader *r;

	if (!st || !z || !tags || !vals || !lat) {
		fprintf(stderr, "bench_store: %s: %s\n", where, st ? "out of memory" : err);
		return -1;
	}
	t0 = clock_monotonic_ns();
	for (unsigned i = 0; i < nspans; i += batch) {
		unsigned n = nspans - i < batch ? nspans - i : batch;
		struct store_batch b = { .spans = z, .nspans = n }, *bp = &b;

		for (unsigned j = 0; j < n; j++)
			make_span(i + j, &z[j], &tags[j], vals[j]);
		if (store__write(st, &bp, 1, err, sizeof(err))) {
			fprintf(stderr, "bench_store: %s: %s\n", where, err);
			return -1;
		}
	}
	res->rate = nspans / ((clock_monotonic_ns() - t0) / 1e9);
	r = store__reader_new(st);
	if (!r)
		return -1;
	for (unsigned q = 0; q < nq; q++) {
		struct store_traces t = { 0 };
		unsigned i = (unsigned)(rand_u64() % nspans) / per_trace * per_trace;
		struct zspan s;
		struct zs_tag tag;
		char v[24];

		make_span(i, &s, &tag, v);
		t0 = clock_monotonic_ns();
		if (store__trace(r, s.trace_hi, s.trace_lo, &t) != 1 || t.v[0].n != per_trace) {
			fprintf(stderr, "bench_store: %s: trace %u not found whole\n", where, i);
			return -1;
		}
		lat[q] = clock_monotonic_ns() - t0;
		store_traces_free(&t);
	}
	qsort(lat, nq, sizeof(*lat), cmp_u64);
	res->id_ms = lat[nq / 2] / 1e6;
	res->id_p99_ms = lat[nq * 99 / 100] / 1e6;
	res->found = 0;
	for (unsigned q = 0; q < nq; q++) {
		struct store_traces t = { 0 };
		struct store_query sq = {
			.service = services[q % 20], .min_duration_us = 50000,
			.end_ts_ms = clock_realtime_ns() / 1000000 + 86400000,
			.lookback_ms = 2 * 86400000ull, .limit = 10,
		};

		t0 = clock_monotonic_ns();
		if (store__traces(r, &sq, &t)) {
			fprintf(stderr, "bench_store: %s: search failed\n", where);
			return -1;
		}
		lat[q] = clock_monotonic_ns() - t0;
		res->found += t.n;
		store_traces_free(&t);
	}
	qsort(lat, nq, sizeof(*lat), cmp_u64);
	res->search_ms = lat[nq / 2] / 1e6;
	store__reader_free(r);
	store__close(st);
	free(z);
	free(tags);
	free(vals);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	struct result sq, ch;
	char where[1024];
	int opt;

	static const char usage[] =
		"usage: bench_store --clickhouse URL [-n SPANS] [-b BATCH] [-t SPANS_PER_TRACE]"
		" [-q QUERIES] [--db PATH]\n";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--clickhouse") && i + 1 < argc)
			ch_url = argv[++i], argv[i - 1] = argv[i] = (char *)"-";
		else if (!strcmp(argv[i], "--db") && i + 1 < argc)
			db_path = argv[++i], argv[i - 1] = argv[i] = (char *)"-";
	}
	while ((opt = getopt(argc, argv, "n:b:t:q:")) != -1) {
		switch (opt) {
		case 'n': nspans = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'b': batch = (unsigned)strtoul(optarg, NULL, 10); break;
		case 't': per_trace = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'q': nq = (unsigned)strtoul(optarg, NULL, 10); break;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (!ch_url || !nspans || !batch || !per_trace || !nq) {
		fputs(usage, stderr);
		return 2;
	}
	for (int i = 0; i < 20; i++)
		snprintf(services[i], sizeof(services[i]), "svc%02d", i);
	for (int i = 0; i < 50; i++)
		snprintf(names[i], sizeof(names[i]), "op%02d", i);
	base_us = clock_realtime_ns() / 1000 - (uint64_t)nspans / per_trace * 500;
	unlink(db_path);
	printf("# %u spans, traces of %u, writes of %u spans, %u queries\n",
	       nspans, per_trace, batch, nq);
	if (run(db_path, &sq))
		return 1;
	printf("sqlite      ingest %9.0f spans/s  trace-by-id median %7.2f ms p99 %7.2f ms"
	       "  search median %8.2f ms (%zu traces)\n",
	       sq.rate, sq.id_ms, sq.id_p99_ms, sq.search_ms, sq.found);
	fflush(stdout);
	snprintf(where, sizeof(where), "clickhouse:%s", ch_url);
	if (run(where, &ch))
		return 1;
	printf("clickhouse  ingest %9.0f spans/s  trace-by-id median %7.2f ms p99 %7.2f ms"
	       "  search median %8.2f ms (%zu traces)\n",
	       ch.rate, ch.id_ms, ch.id_p99_ms, ch.search_ms, ch.found);
	printf("ratio clickhouse/sqlite ingest %.2fx\n", ch.rate / sq.rate);
	unlink(db_path);
	return 0;
}
