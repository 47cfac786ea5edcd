// SPDX-License-Identifier: MIT
/*
 * bench_store: the span store's two backends side by side, in one run:
 * SQLite (a fresh file) and ClickHouse (a server's HTTP interface).
 *
 *   bench_store --clickhouse URL [-n SPANS] [-b BATCH] [-t SPANS_PER_TRACE]
 *               [-q QUERIES] [-r RUNS] [--db PATH] [--ch-pid PID]
 *   bench_store --sqlite-only [...]   (no ClickHouse: SQLite's figures
 *               alone, for two builds of fay run one after the other)
 *
 * 1. ingest: the same SPANS spans (traces of -t spans, 20 services, 50
 *    span names, a tag each, random durations) through store__write() in
 *    writes of -b spans (the collector's group commit), into each store,
 *    RUNS times in turn (SQLite, ClickHouse, SQLite, ...; a fresh file and
 *    a fresh database, URL's database with "_rN" appended, each run);
 *    spans/s of each run, the medians and their ClickHouse / SQLite
 *    ratio.  Where the time went: the CPU seconds of this process (all of
 *    SQLite's work; ClickHouse's client side: rows and curl) and, with
 *    --ch-pid, of the ClickHouse server (its /proc/PID/stat: parsing,
 *    sorting, writing parts, background merges).
 * 2. trace by id (after the last run): store__trace() of -q random stored
 *    traces on a warm reader: median and p99 milliseconds.
 * 3. search: store__traces() for a service and a minimum duration
 *    (Zipkin's serviceName + minDuration, limit 10, the last 24 h):
 *    median milliseconds of -q queries, services in turn.
 * 4. ad-hoc SQL (fay sql's path, store__sql()): one trace's spans by
 *    `SELECT count(*) FROM spans WHERE trace_seq = N` and by the trace
 *    id joined with traces; median milliseconds of 5 queries each.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/procstat.h"
#include "common/rand.h"
#include "store/store.h"

static unsigned nspans = 1000000, batch = 10000, per_trace = 8, nq = 50, nruns = 3;
static const char *ch_url, *db_path = "/tmp/fay-bench-store.db";
static long ch_pid;
static int sqlite_only;
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
	double rate, id_ms, id_p99_ms, search_ms, sql_seq_ms, sql_join_ms;
	double cpu_s, server_cpu_s;   /* during ingest: this process, the server */
	size_t found;
};

/* CPU seconds of this process so far */
static double self_cpu(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
	       (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* CPU seconds of the ClickHouse server so far (--ch-pid), else 0 */
static double server_cpu(void)
{
	unsigned long long t;

	if (!ch_pid || proc_cpu_ticks((pid_t)ch_pid, &t))
		return 0;
	return (double)t / (double)sysconf(_SC_CLK_TCK);
}

static int sql_cols(void *ctx, size_t n, const char *const *names)
{
	return 0;
}

static int sql_row(void *ctx, size_t n, const char *const *vals)
{
	*(long *)ctx = n && vals[0] ? atol(vals[0]) : -1;
	return 0;
}

/* Median milliseconds of 5 ad-hoc queries counting a random trace's
 * spans (join: by its id through traces, else by trace_seq), each
 * answering per_trace; -1 on failure. */
static double adhoc_ms(struct store_reader *r, const char *where, int join, uint64_t *lat)
{
	for (unsigned q = 0; q < 5; q++) {
		unsigned t = (unsigned)(rand_u64() % (nspans / per_trace));
		struct zspan s;
		struct zs_tag tag;
		char sql[256], v[24], err[256];
		long n = -1;
		struct store_sql_cb cb = { sql_cols, sql_row, &n };
		uint64_t t0;

		make_span(t * per_trace, &s, &tag, v);
		if (join)
			snprintf(sql, sizeof(sql), "SELECT count(*) FROM traces t JOIN spans s"
				 " ON s.trace_seq = t.seq WHERE t.trace_hi = 0 AND t.trace_lo = %lld",
				 (long long)s.trace_lo);
		else /* traces are numbered in arrival order from 1 in a fresh file */
			snprintf(sql, sizeof(sql), "SELECT count(*) FROM spans WHERE trace_seq = %u",
				 t + 1);
		t0 = clock_monotonic_ns();
		if (store__sql(r, sql, &cb, err, sizeof(err)) || n != (long)per_trace) {
			fprintf(stderr, "bench_store: %s: %s: %ld rows (%s)\n", where, sql, n, err);
			return -1;
		}
		lat[q] = clock_monotonic_ns() - t0;
	}
	qsort(lat, 5, sizeof(*lat), cmp_u64);
	return lat[2] / 1e6;
}

/* Trace by id and search latencies on st (after its ingest) into res;
 * lat: room for nq numbers. */
static int measure_queries(struct store *st, const char *where, uint64_t *lat,
			   struct result *res)
{
	struct store_reader *r;
	uint64_t t0;

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
	res->sql_seq_ms = res->sql_join_ms = -1;
	if (strncmp(where, "clickhouse:", 11)) {
		res->sql_seq_ms = adhoc_ms(r, where, 0, lat);
		res->sql_join_ms = adhoc_ms(r, where, 1, lat);
	}
	store__reader_free(r);
	return 0;
}

static int run(const char *where, struct result *res, int queries)
{
	struct zspan *z = calloc(batch, sizeof(*z));
	struct zs_tag *tags = calloc(batch, sizeof(*tags));
	char (*vals)[24] = calloc(batch, 24);
	uint64_t *lat = calloc(nq, sizeof(*lat)), t0;
	char err[512];
	struct store *st = store__open(where, 0, err, sizeof(err));
	int ret;

	if (!st || !z || !tags || !vals || !lat) {
		fprintf(stderr, "bench_store: %s: %s\n", where, st ? "out of memory" : err);
		return -1;
	}
	res->cpu_s = self_cpu();
	res->server_cpu_s = server_cpu();
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
	res->cpu_s = self_cpu() - res->cpu_s;
	res->server_cpu_s = server_cpu() - res->server_cpu_s;
	ret = queries ? measure_queries(st, where, lat, res) : 0;
	store__close(st);
	free(z);
	free(tags);
	free(vals);
	free(lat);
	return ret;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_rate(const struct result *v, unsigned n)
{
	double r[64];

	for (unsigned i = 0; i < n; i++)
		r[i] = v[i].rate;
	qsort(r, n, sizeof(*r), cmp_double);
	return n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
}

/* "clickhouse:" URL with the database of run k ("_rK" appended; "fay"
 * when URL names none) */
static void run_url(char *out, size_t len, unsigned k)
{
	const char *host = strstr(ch_url, "//");
	const char *path = host ? strchr(host + 2, '/') : NULL;

	if (path && path[1])
		snprintf(out, len, "clickhouse:%s_r%u", ch_url, k);
	else
		snprintf(out, len, "clickhouse:%.*s/fay_r%u",
			 (int)(path ? path - ch_url : (ptrdiff_t)strlen(ch_url)), ch_url, k);
}

static void print_run(const char *name, unsigned k, const struct result *r)
{
	printf("run %u %-10s ingest %9.0f spans/s  cpu: this process %6.2f s", k, name,
	       r->rate, r->cpu_s);
	if (ch_pid && !strcmp(name, "clickhouse"))
		printf(", server %6.2f s", r->server_cpu_s);
	printf("\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct result sq[64], ch[64];
	char where[1024];
	double msq, mch;
	int opt;

	static const char usage[] =
		"usage: bench_store --clickhouse URL|--sqlite-only [-n SPANS] [-b BATCH] [-t SPANS_PER_TRACE]"
		" [-q QUERIES] [-r RUNS] [--db PATH] [--ch-pid PID]\n";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--clickhouse") && i + 1 < argc)
			ch_url = argv[++i], argv[i - 1] = argv[i] = (char *)"-";
		else if (!strcmp(argv[i], "--sqlite-only"))
			sqlite_only = 1, argv[i] = (char *)"-";
		else if (!strcmp(argv[i], "--db") && i + 1 < argc)
			db_path = argv[++i], argv[i - 1] = argv[i] = (char *)"-";
		else if (!strcmp(argv[i], "--ch-pid") && i + 1 < argc)
			ch_pid = strtol(argv[++i], NULL, 10), argv[i - 1] = argv[i] = (char *)"-";
	}
	while ((opt = getopt(argc, argv, "n:b:t:q:r:")) != -1) {
		switch (opt) {
		case 'n': nspans = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'b': batch = (unsigned)strtoul(optarg, NULL, 10); break;
		case 't': per_trace = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'q': nq = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'r': nruns = (unsigned)strtoul(optarg, NULL, 10); break;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (!ch_url && !sqlite_only) {
		fputs(usage, stderr);
		return 2;
	}
	if (!nspans || !batch || !per_trace || !nq || !nruns || nruns > 64) {
		fputs(usage, stderr);
		return 2;
	}
	for (int i = 0; i < 20; i++)
		snprintf(services[i], sizeof(services[i]), "svc%02d", i);
	for (int i = 0; i < 50; i++)
		snprintf(names[i], sizeof(names[i]), "op%02d", i);
	base_us = clock_realtime_ns() / 1000 - (uint64_t)nspans / per_trace * 500;
	printf("# %u spans, traces of %u, writes of %u spans, %u runs, %u queries\n",
	       nspans, per_trace, batch, nruns, nq);
	for (unsigned k = 0; k < nruns; k++) {
		int last = k == nruns - 1;

		unlink(db_path);
		if (run(db_path, &sq[k], last))
			return 1;
		print_run("sqlite", k, &sq[k]);
		if (sqlite_only)
			continue;
		run_url(where, sizeof(where), k);
		if (run(where, &ch[k], last))
			return 1;
		print_run("clickhouse", k, &ch[k]);
	}
	msq = median_rate(sq, nruns);
	printf("sqlite      ingest median %9.0f spans/s  trace-by-id median %7.2f ms p99 %7.2f ms"
	       "  search median %8.2f ms (%zu traces)\n",
	       msq, sq[nruns - 1].id_ms, sq[nruns - 1].id_p99_ms, sq[nruns - 1].search_ms,
	       sq[nruns - 1].found);
	printf("sqlite      fay sql: WHERE trace_seq = N median %8.2f ms;"
	       " traces JOIN spans ON trace_seq by trace id median %8.2f ms\n",
	       sq[nruns - 1].sql_seq_ms, sq[nruns - 1].sql_join_ms);
	if (sqlite_only) {
		printf("(--sqlite-only: no ClickHouse, no ratio)\n");
		unlink(db_path);
		return 0;
	}
	mch = median_rate(ch, nruns);
	printf("clickhouse  ingest median %9.0f spans/s  trace-by-id median %7.2f ms p99 %7.2f ms"
	       "  search median %8.2f ms (%zu traces)\n",
	       mch, ch[nruns - 1].id_ms, ch[nruns - 1].id_p99_ms, ch[nruns - 1].search_ms,
	       ch[nruns - 1].found);
	printf("ratio clickhouse/sqlite ingest (medians) %.2fx\n", mch / msq);
	unlink(db_path);
	return 0;
}
