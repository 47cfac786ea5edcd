// SPDX-License-Identifier: MIT
/*
 * bench_ingest: spans per second into SQLite.
 *
 *   bench_ingest [-n SPANS] [-b BATCH] [-t SPANS_PER_TRACE] [-r RUNS]
 *                [--only-fay|--only-peer] [--fay PATH --client PATH]
 *   bench_ingest --query [-T TRACES] [-t SPANS_PER_TRACE] [-r RUNS]
 *
 * 1. fay: span records (the bytes agents send) decoded, converted and
 *    stored through the collector's store path (spanrec_decode ->
 *    zspan_from_rec -> store__write, one transaction per batch of -b
 *    spans, agent seq bookkeeping included).
 *    -t N: traces of N spans (a root and N - 1 children; default 1, a
 *    random trace id per span, the worst case for the trace index).
 * 2. peer, same run: bare SQLite (no fay code) inserting the same rows,
 *    already rendered, into the same schema (src/store/schema.sql), same
 *    pragmas (WAL, synchronous=NORMAL, cache), one transaction per batch,
 *    per span one prepared upsert of the trace row (RETURNING its seq)
 *    and one prepared INSERT of the span, SQLite's default in-line
 *    auto-checkpoint (fay checkpoints on a background thread: part of
 *    what is measured).
 * 3. over the wire (with --fay and --client): a running 'fay collector'
 *    receiving batches of 1000 spans from 4 agent connections of the
 *    test client, ACK after COMMIT.
 * Each figure is the median of -r runs on a fresh database.
 *
 * --query: trace search (store__traces, what GET /api/v2/traces runs)
 * over -T traces (default 100 000) of -t spans (default 8) stored through
 * the store path: eight queries with Zipkin's filters, limit 10 (one with
 * limit 1000), each timed -r times on a warm reader; prints the median
 * milliseconds and how many traces matched.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/rand.h"
#include "common/spanrec.h"
#include "store/store.h"
#include "bench.h"

static unsigned nspans = 200000, batch = 1000, runs = 5, per_trace = 1;
static int only; /* 1: fay only, 2: peer only (profiling) */
static unsigned ntraces = 100000;
static int per_trace_set;
static char dir[64];

/* One encoded record per span, plus the rendered row for the peer. */
struct rec {
	uint8_t buf[512];
	size_t len;
	uint64_t hi, lo, id, parent, start_us, dur_us;
	const char *name, *svc;
	char ann[128], tags[128];
};

static const char *const svcs[] = { "frontend", "mapper", "blocker", "disk", "cache",
				    "auth", "search", "index" };
static const char *const names[] = { "get", "put", "read", "write", "lookup", "flush" };

static struct rec *make_recs(void)
{
	struct rec *r = calloc(nspans, sizeof(*r));
	uint64_t now = clock_realtime_ns();

	for (unsigned i = 0; r && i < nspans; i++) {
		struct spanrec_fixed f = { 0 };
		size_t off = sizeof(f);
		char v[32];
		int n = 0;

		if (i % per_trace == 0) {
			r[i].hi = rand_u64();
			r[i].lo = rand_u64();
			r[i].parent = per_trace > 1 ? 0 : i % 4 ? rand_u64() : 0;
		} else {
			/* -t N: traces of N spans, a root and its children */
			r[i].hi = r[i - i % per_trace].hi;
			r[i].lo = r[i - i % per_trace].lo;
			r[i].parent = r[i - i % per_trace].id;
		}
		r[i].id = rand_u64();
		r[i].name = names[i % 6];
		r[i].svc = svcs[i % 8];
		r[i].start_us = (now + i * 1000ull) / 1000;
		r[i].dur_us = 100 + i % 1000;
		snprintf(v, sizeof(v), "%u", i % 97);
		n += !spanrec_put_item(r[i].buf, sizeof(r[i].buf), &off, SPAN_ITEM_NAME, 0,
				       r[i].name, strlen(r[i].name), NULL, 0);
		n += !spanrec_put_item(r[i].buf, sizeof(r[i].buf), &off, SPAN_ITEM_LOCAL_EP, 6800,
				       r[i].svc, strlen(r[i].svc), "10.0.0.7", 8);
		n += !spanrec_put_item(r[i].buf, sizeof(r[i].buf), &off, SPAN_ITEM_EVENT,
				       now + i * 1000ull + 50000, "queued", 6, NULL, 0);
		n += !spanrec_put_item(r[i].buf, sizeof(r[i].buf), &off, SPAN_ITEM_TAG, 0,
				       "shard", 5, v, strlen(v));
		n += !spanrec_put_item(r[i].buf, sizeof(r[i].buf), &off, SPAN_ITEM_TAG, 0,
				       "op", 2, "rados", 5);
		f.trace_hi = r[i].hi;
		f.trace_lo = r[i].lo;
		f.span_id = r[i].id;
		f.parent_id = r[i].parent;
		f.start_ns = now + i * 1000ull;
		f.duration_ns = r[i].dur_us * 1000;
		f.kind = SPAN_KIND_SERVER;
		f.flags = SPAN_F_SAMPLED;
		f.items_len = (uint32_t)(off - sizeof(f));
		f.nitems = (uint16_t)n;
		memcpy(r[i].buf, &f, sizeof(f));
		r[i].len = off;
		snprintf(r[i].ann, sizeof(r[i].ann), "[{\"timestamp\":%" PRIu64 ",\"value\":\"queued\"}]",
			 r[i].start_us + 50);
		snprintf(r[i].tags, sizeof(r[i].tags), "{\"op\":\"rados\",\"shard\":\"%s\"}", v);
	}
	return r;
}

static void fresh(char *path, size_t len, const char *name)
{
	char cmd[256];

	snprintf(path, len, "%s/%s.db", dir, name);
	snprintf(cmd, sizeof(cmd), "rm -f '%s' '%s-wal' '%s-shm'", path, path, path);
	if (system(cmd))
		fprintf(stderr, "bench_ingest: rm failed\n");
}

static double run_fay(const struct rec *r)
{
	char path[128], err[256];
	struct store *st;
	struct zspan *spans = calloc(batch, sizeof(*spans));
	struct zarena a = { 0 };
	uint64_t t0, seq = 0;
	double secs;

	fresh(path, sizeof(path), "fay");
	st = store__open(path, 0, err, sizeof(err));
	if (!st || !spans) {
		fprintf(stderr, "bench_ingest: %s\n", err);
		exit(1);
	}
	t0 = clock_monotonic_ns();
	for (unsigned i = 0; i < nspans; i += batch) {
		unsigned n = nspans - i < batch ? nspans - i : batch;
		struct store_batch b = { .agent_id = "0123456789abcdef0123456789abcdef",
					 .host = "bench", .seq = ++seq, .spans = spans,
					 .nspans = n };
		struct store_batch *bp = &b;

		for (unsigned j = 0; j < n; j++) {
			struct spanrec sr;

			if (spanrec_decode(r[i + j].buf, r[i + j].len, &sr, err, sizeof(err)) < 0 ||
			    zspan_from_rec(&sr, &a, &spans[j]) < 0) {
				fprintf(stderr, "bench_ingest: %s\n", err);
				exit(1);
			}
		}
		if (store__write(st, &bp, 1, err, sizeof(err))) {
			fprintf(stderr, "bench_ingest: %s\n", err);
			exit(1);
		}
		zarena_reset(&a);
	}
	secs = (double)(clock_monotonic_ns() - t0) / 1e9;
	store__close(st);
	free(spans);
	return nspans / secs;
}

static char *read_file(const char *p)
{
	FILE *f = fopen(p, "r");
	char *s;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	s = malloc((size_t)n + 1);
	if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	if (s)
		s[n] = '\0';
	fclose(f);
	return s;
}

/* x evaluated once (a second sqlite3_step() would insert the row again) */
#define CK(x) do { int rc_ = (x); if (rc_ != SQLITE_OK && rc_ != SQLITE_DONE) { \
	fprintf(stderr, "bench_ingest: sqlite: %s\n", sqlite3_errmsg(db)); exit(1); } } while (0)

static double run_peer(const struct rec *r, const char *schema)
{
	char path[128], extra[256];
	sqlite3 *db;
	sqlite3_stmt *s, *t;
	uint64_t t0;
	double secs;

	fresh(path, sizeof(path), "peer");
	CK(sqlite3_open(path, &db));
	CK(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
			    "PRAGMA cache_size=-65536; PRAGMA temp_store=MEMORY;", NULL, NULL, NULL));
	CK(sqlite3_exec(db, schema, NULL, NULL, NULL));
	/* the trace row, per span, in SQL: an upsert that returns the seq and
	 * the span's number in the trace */
	CK(sqlite3_prepare_v2(db,
		"INSERT INTO traces (trace_hi, trace_lo, ts_us, root_us, min_us, end_us,"
		" max_dur_us, nspans, next_no, error, root_service, root_name, bloom)"
		" VALUES (?1, ?2, ?3, CASE WHEN ?4 THEN ?3 END, ?3, ?3 + ?5, ?5, 1, 1, 0,"
		" CASE WHEN ?4 THEN ?6 END, CASE WHEN ?4 THEN ?7 END, zeroblob(64))"
		" ON CONFLICT (trace_hi, trace_lo) DO UPDATE SET"
		" root_us = CASE WHEN ?4 THEN min(coalesce(root_us, ?3), ?3) ELSE root_us END,"
		" min_us = min(min_us, ?3),"
		" ts_us = coalesce(CASE WHEN ?4 THEN min(coalesce(root_us, ?3), ?3) ELSE root_us END,"
		" min(min_us, ?3)), end_us = max(end_us, ?3 + ?5), max_dur_us = max(max_dur_us, ?5),"
		" nspans = nspans + 1, next_no = next_no + 1 RETURNING seq, next_no - 1",
		-1, &t, NULL));
	CK(sqlite3_prepare_v2(db,
		"INSERT INTO span_rows (seq_no, id, parent_id, kind, name,"
		" local_service, local_ipv4, local_ipv6, local_port,"
		" remote_service, remote_ipv4, remote_ipv6, remote_port,"
		" start_us, duration_us, shared, debug, error, origin, extra)"
		" VALUES (?1 << 20 | ?2, ?3, ?4, 2, ?5, ?6, '10.0.0.7', NULL, 6800,"
		" NULL, NULL, NULL, NULL, ?7, ?8, 0, 0, 0, 0, ?9)",
		-1, &s, NULL));
	t0 = clock_monotonic_ns();
	for (unsigned i = 0; i < nspans; i++) {
		int n;

		if (i % batch == 0)
			CK(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL));
		sqlite3_bind_int64(t, 1, (sqlite3_int64)r[i].hi);
		sqlite3_bind_int64(t, 2, (sqlite3_int64)r[i].lo);
		sqlite3_bind_int64(t, 3, (sqlite3_int64)r[i].start_us);
		sqlite3_bind_int(t, 4, !r[i].parent);
		sqlite3_bind_int64(t, 5, (sqlite3_int64)r[i].dur_us);
		sqlite3_bind_text(t, 6, r[i].svc, -1, SQLITE_STATIC);
		sqlite3_bind_text(t, 7, r[i].name, -1, SQLITE_STATIC);
		if (sqlite3_step(t) != SQLITE_ROW)
			CK(SQLITE_ERROR);
		sqlite3_bind_int64(s, 1, sqlite3_column_int64(t, 0));
		sqlite3_bind_int64(s, 2, sqlite3_column_int64(t, 1));
		sqlite3_reset(t);
		sqlite3_bind_int64(s, 3, (sqlite3_int64)r[i].id);
		if (r[i].parent)
			sqlite3_bind_int64(s, 4, (sqlite3_int64)r[i].parent);
		else
			sqlite3_bind_null(s, 4);
		sqlite3_bind_text(s, 5, r[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 6, r[i].svc, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 7, (sqlite3_int64)r[i].start_us);
		sqlite3_bind_int64(s, 8, (sqlite3_int64)r[i].dur_us);
		/* annotations and tags: their JSON text as the blob (same size class) */
		n = snprintf(extra, sizeof(extra), "%s%s", r[i].ann, r[i].tags);
		sqlite3_bind_blob(s, 9, extra, n, SQLITE_STATIC);
		CK(sqlite3_step(s));
		sqlite3_reset(s);
		if (i % batch == batch - 1 || i == nspans - 1)
			CK(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL));
	}
	secs = (double)(clock_monotonic_ns() - t0) / 1e9;
	sqlite3_finalize(t);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return nspans / secs;
}

/* ---- --query ------------------------------------------------------------ */

static struct zs_str zstr(const char *s)
{
	return (struct zs_str){ s, (uint32_t)strlen(s) };
}

/* Store ntraces traces of per_trace spans, one per millisecond up to
 * now: a root on frontend, auth or search, children on random services
 * with random names, durations from 10 us to ~100 ms, tags op and shard,
 * an annotation on a third of them.  Returns the newest timestamp (us). */
static uint64_t query_fill(struct store *st)
{
	static const char *const ops[] = { "read", "write", "stat", "delete" };
	static char shard[97][4];
	struct zspan *sp = calloc(batch + per_trace, sizeof(*sp));
	struct zs_tag *tg = calloc(batch + per_trace, 2 * sizeof(*tg));
	struct zs_annotation *an = calloc(batch + per_trace, sizeof(*an));
	uint64_t now = clock_realtime_ns() / 1000, seq = 0, t0 = clock_monotonic_ns();
	uint64_t first = now - ntraces * 1000ull;
	char err[256];
	size_t n = 0;

	if (!sp || !tg || !an)
		exit(1);
	for (int i = 0; i < 97; i++)
		snprintf(shard[i], sizeof(shard[i]), "%d", i);
	for (unsigned k = 0; k < ntraces; k++) {
		uint64_t hi = rand_u64(), lo = rand_u64(), root = rand_u64();
		uint64_t ts = first + k * 1000ull;

		for (unsigned j = 0; j < per_trace; j++, n++) {
			struct zspan *z = &sp[n];
			uint64_t rnd = rand_u64();

			memset(z, 0, sizeof(*z));
			z->trace_hi = hi;
			z->trace_lo = lo;
			z->id = j ? rand_u64() : root;
			z->parent_id = j ? root : 0;
			z->kind = j ? SPAN_KIND_CLIENT : SPAN_KIND_SERVER;
			z->local.service = zstr(j ? svcs[rnd % 8] : svcs[(k % 3) * 3 % 8]);
			z->name = zstr(names[(rnd >> 8) % 6]);
			snprintf(z->local.ipv4, sizeof(z->local.ipv4), "10.0.0.%u", j % 8);
			z->timestamp_us = ts + j * 10;
			z->duration_us = 10 + ((rnd >> 16) % 1000) * ((rnd >> 32) % 100 + 1);
			z->tags = &tg[2 * n];
			tg[2 * n] = (struct zs_tag){ zstr("op"), zstr(ops[(rnd >> 40) % 4]) };
			tg[2 * n + 1] = (struct zs_tag){ zstr("shard"), zstr(shard[(rnd >> 44) % 97]) };
			z->ntags = 2;
			if ((rnd >> 52) % 3 == 0) {
				an[n] = (struct zs_annotation){ ts + j * 10 + 5, zstr("queued") };
				z->annotations = &an[n];
				z->nannotations = 1;
			}
		}
		if (n >= batch || k == ntraces - 1) {
			struct store_batch b = { .agent_id = "0123456789abcdef0123456789abcdef",
						 .seq = ++seq, .spans = sp, .nspans = n };
			struct store_batch *bp = &b;

			if (store__write(st, &bp, 1, err, sizeof(err))) {
				fprintf(stderr, "bench_ingest: %s\n", err);
				exit(1);
			}
			n = 0;
		}
	}
	printf("stored %u traces of %u spans in %.1f s\n", ntraces, per_trace,
	       (double)(clock_monotonic_ns() - t0) / 1e9);
	free(sp);
	free(tg);
	free(an);
	return first + (ntraces - 1) * 1000ull;
}

static int run_query(void)
{
	static const struct {
		const char *what, *svc, *name, *aq;
		uint64_t min_dur;
		unsigned limit;
	} qs[] = {
		{ "no filter", NULL, NULL, NULL, 0, 10 },
		{ "serviceName=frontend", "frontend", NULL, NULL, 0, 10 },
		{ "serviceName=mapper spanName=read", "mapper", "read", NULL, 0, 10 },
		{ "serviceName=disk minDuration=90000", "disk", NULL, NULL, 90000, 10 },
		{ "annotationQuery=shard=42", NULL, NULL, "shard=42", 0, 10 },
		{ "serviceName=blocker spanName=write annotationQuery='op=write and"
		  " shard=7 and queued' minDuration=20000", "blocker", "write",
		  "op=write and shard=7 and queued", 20000, 10 },
		{ "annotationQuery=nosuch (no match: the whole window)", NULL, NULL,
		  "nosuch", 0, 10 },
		{ "no filter, limit=1000", NULL, NULL, NULL, 0, 1000 },
	};
	char path[128], err[256];
	struct store_reader *r;
	struct store *st;
	uint64_t newest;
	double t[32];

	if (!per_trace_set)
		per_trace = 8;
	fresh(path, sizeof(path), "query");
	st = store__open(path, 0, err, sizeof(err));
	if (!st) {
		fprintf(stderr, "bench_ingest: %s\n", err);
		return 1;
	}
	newest = query_fill(st);
	/* closing checkpoints the WAL into the file: the queries then run
	 * without a checkpoint going on beside them */
	store__close(st);
	st = store__open(path, 0, err, sizeof(err));
	r = st ? store__reader_new(st) : NULL;
	if (!r)
		return 1;
	for (size_t i = 0; i < ARRAY_SIZE(qs); i++) {
		struct store_query q = { .service = qs[i].svc, .span_name = qs[i].name,
					 .min_duration_us = qs[i].min_dur, .limit = qs[i].limit,
					 .end_ts_ms = newest / 1000 + 1,
					 .lookback_ms = 86400000 };
		size_t found = 0, spans = 0;
		char aq[128];

		if (qs[i].aq) {
			snprintf(aq, sizeof(aq), "%s", qs[i].aq);
			store_query_parse_aq(&q, aq, err, sizeof(err));
		}
		for (unsigned k = 0; k <= runs; k++) {
			struct store_traces res = { 0 };
			uint64_t t0 = clock_monotonic_ns();

			if (store__traces(r, &q, &res)) {
				fprintf(stderr, "bench_ingest: query %zu failed\n", i + 1);
				return 1;
			}
			if (k) /* the first run warms the cache */
				t[k - 1] = (double)(clock_monotonic_ns() - t0) / 1e6;
			found = res.n;
			spans = 0;
			for (size_t j = 0; j < res.n; j++)
				spans += res.v[j].n;
			store_traces_free(&res);
		}
		printf("  %-60s %8.2f ms  (%zu traces, %zu spans)\n", qs[i].what,
		       median(t, runs), found, spans);
	}
	store__reader_free(r);
	store__close(st);
	return 0;
}

static int free_port(void)
{
	FILE *f = popen("python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])'", "r");
	int p = 0;

	if (f) {
		if (fscanf(f, "%d", &p) != 1)
			p = 0;
		pclose(f);
	}
	return p;
}

/* Start a collector, stream batches with the client, return its rate. */
static double run_wire(const char *fay, const char *client)
{
	char path[128], wa[32], ha[32], cmd[512], line[256];
	int wp = free_port(), hp = free_port();
	double rate = 0;
	pid_t pid;
	FILE *f;

	fresh(path, sizeof(path), "wire");
	snprintf(wa, sizeof(wa), "127.0.0.1:%d", wp);
	snprintf(ha, sizeof(ha), "127.0.0.1:%d", hp);
	pid = fork();
	if (pid == 0) {
		execl(fay, fay, "collector", "--listen", wa, "--http", ha, "--db", path,
		      (char *)NULL);
		_exit(127);
	}
	snprintf(cmd, sizeof(cmd), "for i in $(seq 50); do curl -sf http://%s/health >/dev/null && exit 0; sleep 0.1; done; exit 1", ha);
	if (system(cmd)) {
		fprintf(stderr, "bench_ingest: the collector did not start\n");
		kill(pid, SIGKILL);
		exit(1);
	}
	snprintf(cmd, sizeof(cmd), "'%s' -a %s -c 4 -n %u -m 1000 -W 4 -q send", client, wa,
		 nspans / 4000 ? nspans / 4000 : 1);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "rate %lf", &rate);
	if (f)
		pclose(f);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return rate;
}

int main(int argc, char **argv)
{
	const char *fay = NULL, *client = NULL;
	int query = 0;
	char path_rm[128];
	double f[32], p[32], w[32], mf, mp;
	struct rec *r;
	char *schema;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			nspans = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "-b") && i + 1 < argc)
			batch = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "-r") && i + 1 < argc)
			runs = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			per_trace = (unsigned)atoi(argv[++i]), per_trace_set = 1;
		else if (!strcmp(argv[i], "-T") && i + 1 < argc)
			ntraces = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--query"))
			query = 1;
		else if (!strcmp(argv[i], "--only-fay"))
			only = 1;
		else if (!strcmp(argv[i], "--only-peer"))
			only = 2;
		else if (!strcmp(argv[i], "--fay") && i + 1 < argc)
			fay = argv[++i];
		else if (!strcmp(argv[i], "--client") && i + 1 < argc)
			client = argv[++i];
		else {
			fprintf(stderr, "usage: bench_ingest [-n SPANS] [-b BATCH] [-t SPANS_PER_TRACE] [-r RUNS]\n"
				"                    [--only-fay|--only-peer] [--fay PATH --client PATH]\n"
				"       bench_ingest --query [-T TRACES] [-t SPANS_PER_TRACE] [-r RUNS]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > 32 || !nspans || !batch || !per_trace || !ntraces)
		return 2;
	schema = read_file("src/store/schema.sql");
	if (!schema) {
		fprintf(stderr, "bench_ingest: run from the top of the tree (needs src/store/schema.sql)\n");
		return 1;
	}
	snprintf(dir, sizeof(dir), "/tmp/fay-bench-ingest.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	if (query) {
		double la[3] = { 0 };
		int ret;

		getloadavg(la, 3);
		printf("bench_ingest --query: trace search, median of %u runs (load average %.1f)\n",
		       runs, la[0]);
		ret = run_query();
		snprintf(path_rm, sizeof(path_rm), "rm -rf '%s'", dir);
		if (system(path_rm))
			fprintf(stderr, "bench_ingest: cleanup failed\n");
		free(schema);
		return ret;
	}
	r = make_recs();
	if (!r)
		return 1;
	{
		double la[3] = { 0 };

		getloadavg(la, 3);
		printf("bench_ingest: %u spans (5 items each) in traces of %u, batches of %u,"
		       " median of %u runs (load average %.1f)\n", nspans, per_trace, batch, runs,
		       la[0]);
	}
	for (unsigned i = 0; i < runs; i++) {
		/* alternate the order, so drift and the write-back of the
		 * previous run's pages hit both alike */
		f[i] = p[i] = 1;
		if (i % 2) {
			if (only != 1)
				p[i] = run_peer(r, schema);
			if (only != 2)
				f[i] = run_fay(r);
		} else {
			if (only != 2)
				f[i] = run_fay(r);
			if (only != 1)
				p[i] = run_peer(r, schema);
		}
		printf("  run %u: fay %.0f spans/s, bare sqlite %.0f spans/s\n", i + 1, f[i], p[i]);
		fflush(stdout);
	}
	mf = median(f, runs);
	mp = median(p, runs);
	if (only != 2)
		printf("store path (decode + convert + store__write): %.0f spans/s\n", mf);
	if (only != 1)
		printf("bare SQLite insert, same rows and schema:     %.0f spans/s\n", mp);
	if (!only)
		printf("ratio fay/sqlite: %.2f\n", mf / mp);
	if (only != 2)
		printf("goal >= 200000 spans/s: %s\n", mf >= 200000 ? "met" : "NOT met");
	if (fay && client) {
		for (unsigned i = 0; i < runs; i++) {
			w[i] = run_wire(fay, client);
			printf("  wire run %u: %.0f spans/s\n", i + 1, w[i]);
		}
		printf("over the wire (4 agents, 1000-span batches, ACK after COMMIT): %.0f spans/s\n",
		       median(w, runs));
	}
	snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "%s", "");
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			fprintf(stderr, "bench_ingest: cleanup failed\n");
	}
	free(r);
	free(schema);
	return 0;
}
