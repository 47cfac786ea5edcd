// SPDX-License-Identifier: MIT
/*
 * OTLP ingest, protobuf vs JSON vs gRPC, on the same spans in one run.
 *
 *   bench_otlp [-s SPANS_PER_REQUEST] [-r ROUNDS] [-t SECONDS] [-R] [-F] [-T TRANSPORT]
 *              [--fay PATH [--clickhouse URL]]
 *   bench_otlp -P N [-s SPANS_PER_REQUEST] [-T json]
 *
 * The spans: SDK-like (hex ids, a parent, kind, 8 attributes of every
 * type with an array, 2 events, a status), 16 distinct traces per
 * request.  Each request sent to the collector carries traces of its
 * own, as an SDK's batches do (40 bits of each trace id set from a
 * counter of the run before it is sent); -R sends the same 8 bodies in
 * turn instead, so every request adds spans to the same 128 traces
 * (growing through the run: the store inserts into the middle of its
 * span table, the worst case).  Each request's timestamps are moved
 * with its trace ids: a request's spans start as many seconds after the
 * bodies' base (+ 8 s) as the run has lasted when it is sent, so the
 * store sees times that grow with the clock as a live SDK's do;
 * -F keeps them as built (every request's spans in the same 8 seconds,
 * the traces' time index then written in 128 places at once: the
 * bench's figures before 2026-11-30), as does -R.  Before each cell the
 * bench waits for the collector to be idle (at most 10 s), so that no
 * cell pays for what the one before left to do.  The same request is
 * written as OTLP/JSON, then decoded by fay's JSON front end and written
 * as protobuf by otlp_pb_encode(), so every body carries exactly the
 * same spans.  Requests of 100 and of 512 spans (the BatchSpanProcessor's
 * default), or of -s alone.
 *
 *   1. decode + map, in this process (no store): otlp_json_decode or
 *      otlp_pb_decode, then otlp_map(), spans/s;
 *   2. with --fay: end to end, a running `fay collector` (a temporary
 *      SQLite store) taking OTLP/HTTP protobuf and JSON (POST /v1/traces
 *      on --otlp-http, keep-alive), OTLP/gRPC (Export on --otlp-grpc)
 *      and Zipkin v2 JSON of the same spans (POST /api/v2/spans on
 *      --http, keep-alive)
 *      from 1 and from 4 connections, each with one request in flight
 *      answered after its COMMIT, as SDK exporters send them (head and
 *      body in one write, TCP_NODELAY): spans/s, the collector's CPU
 *      (user + system, /proc) per span, each request's latency p50/p99.
 *
 * --clickhouse URL: a second collector beside the first, storing into
 * ClickHouse at URL (fay collector --clickhouse URL); every cell runs on
 * the SQLite one and then on the ClickHouse one, and a second table
 * gives ClickHouse's figures and its spans/s over SQLite's.
 *
 * -P N: decode + map N protobuf requests (-T json: JSON) in pb_rounds()
 * and exit, no timing: the run to count instructions a span under
 * callgrind (bench/otlp_callgrind.sh -P; --toggle-collect=pb_rounds).
 *
 * -T pb|json|grpc|zipkin: that transport's cells alone (to profile one
 * path).  Every cell runs SECONDS per round; the order of transports turns each
 * round; medians of ROUNDS.  The load average is printed before and
 * after: the machine may be shared.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "collector/zjson.h"
#include "common/procstat.h"
#include "otlp/otlp.h"
#include "otlp_h2.h"

#define NBODIES 8
#define TS_BASE_S 1795600000ull /* json_request()'s spans: seconds past the epoch */
#define TS_SPAN_S 100           /* every timestamp of a body within TS_SPAN_S of it */

/* An OTLP/JSON request of n spans; malloc'ed. */
static char *json_request(int n, unsigned seed)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	uint64_t start = (TS_BASE_S + seed) * 1000000000ull;

	fprintf(f, "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
		"{\"key\":\"service.name\",\"value\":{\"stringValue\":\"checkout\"}},"
		"{\"key\":\"host.name\",\"value\":{\"stringValue\":\"web-7\"}}]},"
		"\"scopeSpans\":[{\"scope\":{\"name\":\"io.opentelemetry.http\",\"version\":\"1.2.0\"},"
		"\"spans\":[");
	for (int i = 0; i < n; i++) {
		uint64_t s = start + (uint64_t)i * 1000000;

		fprintf(f, "%s{\"traceId\":\"%08x%08x0000000000%06x\",\"spanId\":\"%08x%08x\","
			"\"parentSpanId\":\"%08x%08x\",\"name\":\"GET /api/cart/%d\",\"kind\":%d,"
			"\"startTimeUnixNano\":\"%" PRIu64 "\",\"endTimeUnixNano\":\"%" PRIu64 "\","
			"\"attributes\":["
			"{\"key\":\"http.method\",\"value\":{\"stringValue\":\"GET\"}},"
			"{\"key\":\"http.url\",\"value\":{\"stringValue\":\"https://shop.example/api/cart/%d?x=1\"}},"
			"{\"key\":\"http.status_code\",\"value\":{\"intValue\":\"200\"}},"
			"{\"key\":\"net.peer.port\",\"value\":{\"intValue\":\"443\"}},"
			"{\"key\":\"sampled.ratio\",\"value\":{\"doubleValue\":0.25}},"
			"{\"key\":\"cache.hit\",\"value\":{\"boolValue\":true}},"
			"{\"key\":\"user.roles\",\"value\":{\"arrayValue\":{\"values\":[{\"stringValue\":\"admin\"},{\"stringValue\":\"buyer\"}]}}},"
			"{\"key\":\"thread.name\",\"value\":{\"stringValue\":\"worker-%d\"}}],"
			"\"events\":[{\"timeUnixNano\":\"%" PRIu64 "\",\"name\":\"cache lookup\"},"
			"{\"timeUnixNano\":\"%" PRIu64 "\",\"name\":\"retry\",\"attributes\":"
			"[{\"key\":\"attempt\",\"value\":{\"intValue\":\"2\"}}]}],"
			"\"status\":{\"code\":%d}}",
			i ? "," : "", seed, (unsigned)(i % 16), (unsigned)(i % 16),
			seed, (unsigned)i + 1, seed, (unsigned)(i % 16) + 100000, i % 50, 2 + i % 2,
			s, s + 2500000, i % 50, i % 8, s + 100000, s + 900000, i % 10 ? 1 : 2);
	}
	fprintf(f, "]}]}]}");
	fclose(f);
	return buf;
}

/* decode + map one body; the spans mapped. */
static size_t decode_map(const void *body, size_t len, int pb)
{
	struct zarena a = { 0 };
	struct otlp_req r;
	struct otlp_result res;
	char err[256];
	size_t n = 0;

	if (!(pb ? otlp_pb_decode(body, len, &a, &r, err, sizeof(err)) :
		   otlp_json_decode(body, len, &a, &r, err, sizeof(err))) &&
	    !otlp_map(&r, &a, &res))
		n = res.nspans;
	zarena_reset(&a);
	return n;
}

static double rate_decode(const void *body, size_t len, int pb, double secs)
{
	double t0 = bench_now_s(), t;
	size_t spans = 0;

	do {
		spans += decode_map(body, len, pb);
		t = bench_now_s();
	} while (t - t0 < secs);
	return spans / (t - t0);
}

/* ---- end to end ---------------------------------------------------------- */

enum { T_PB, T_JSON, T_GRPC, T_ZIPKIN, NT };
static const char *const topt[NT] = { "pb", "json", "grpc", "zipkin" };
static const char *const tname[NT] = { "HTTP protobuf", "HTTP JSON", "gRPC", "Zipkin v2 JSON" };

struct body {
	const void *p;
	size_t len;
	size_t *tid;            /* where its trace ids' 5 zero bytes (10 hex
				   digits in JSON) are: set per request */
	size_t ntid;
	int hex;
	size_t *ts;             /* where its timestamps are: shifted per request */
	size_t nts;
	int ts_kind;            /* TS_NS_DEC, TS_US_DEC or TS_NS_LE64 */
	unsigned seed;          /* json_request()'s: its spans start at seed s past TS_BASE_S */
};

static int reuse_traces;        /* -R */
static int fixed_times;         /* -F (and -R): every request's spans in the same 8 seconds */
static double run_t0;           /* when the run began (bench_now_s()) */
static int only = -1;           /* -T: that transport alone */
static uint64_t next_trace = 1; /* the 40-bit part of the next request's trace ids */

struct worker {
	int port, transport;
	const struct body *bodies;      /* NBODIES, used in turn */
	double secs;
	size_t spans_per_req;
	size_t spans, refused;
	double *lat;                    /* each request's seconds */
	size_t nlat, caplat;
	pthread_t t;
	char *copy;                     /* a body with this request's trace ids */
	size_t copycap;
};

enum { TS_NS_DEC, TS_US_DEC, TS_NS_LE64 };

/* Adds v to the decimal number of w digits at d, in place (the sum has
 * as many digits: the shifts are far below the numbers' leading digit). */
static void dec_add(char *d, int w, uint64_t v)
{
	for (int i = w - 1; i >= 0 && v; i--) {
		uint64_t x = (uint64_t)(d[i] - '0') + v % 10;

		v /= 10;
		d[i] = (char)('0' + x % 10);
		v += x / 10;
	}
}

/* The copy buf of body b with its timestamps moved as a live SDK's would
 * be: its spans start at_ns past TS_BASE_S + NBODIES seconds whatever
 * body it is (at_ns: the time since the run began), so that a store
 * sees timestamps that grow with the clock, not the same 8 seconds over
 * and over (-F). */
static void shift_times(const struct body *b, char *buf, uint64_t at_ns)
{
	uint64_t s = (NBODIES - b->seed) * 1000000000ull + at_ns; /* b->seed <= NBODIES */

	for (size_t i = 0; i < b->nts; i++) {
		char *d = buf + b->ts[i];
		uint64_t v;

		switch (b->ts_kind) {
		case TS_NS_DEC: dec_add(d, 19, s); break;
		case TS_US_DEC: dec_add(d, 16, s / 1000); break;
		default:
			memcpy(&v, d, 8);       /* protobuf's fixed64: little-endian, as x86 */
			v += s;
			memcpy(d, &v, 8);
		}
	}
}

/* Whether the n digits at p are a timestamp of json_request()'s spans in
 * the unit of scale (1: ns, 1000: us). */
static int is_ts_digits(const char *p, const char *end, int n, uint64_t scale)
{
	uint64_t v = 0;

	if (end - p < n + 1 || (p[n] >= '0' && p[n] <= '9'))
		return 0;
	for (int i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return 0;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	return v >= TS_BASE_S * 1000000000ull / scale &&
	       v < (TS_BASE_S + TS_SPAN_S) * 1000000000ull / scale;
}

/* Where the timestamps of body b are (kind: TS_*): JSON's
 * "...UnixNano":"<19 digits>", Zipkin's "timestamp":<16 digits>, or a
 * protobuf fixed64 (tags 0x39 start, 0x41 end of a span, 0x09 an event's
 * time) holding one; 0, or 1 when none is found. */
static int find_times(struct body *b, int kind)
{
	const char *p = b->p, *end = p + b->len;
	size_t cap = 0;

	b->ts_kind = kind;
	while (p < end) {
		const char *at = NULL;

		if (kind == TS_NS_DEC) {
			const char *q = memmem(p, (size_t)(end - p), "UnixNano\":\"", 11);

			if (!q)
				break;
			p = q + 11;
			at = is_ts_digits(p, end, 19, 1) ? p : NULL;
		} else if (kind == TS_US_DEC) {
			const char *q = memmem(p, (size_t)(end - p), "\"timestamp\":", 12);

			if (!q)
				break;
			p = q + 12;
			at = is_ts_digits(p, end, 16, 1000) ? p : NULL;
		} else {
			uint64_t v;

			if (end - p >= 9 && ((uint8_t)*p == 0x39 || (uint8_t)*p == 0x41 ||
					     (uint8_t)*p == 0x09)) {
				memcpy(&v, p + 1, 8);
				if (v >= TS_BASE_S * 1000000000ull &&
				    v < (TS_BASE_S + TS_SPAN_S) * 1000000000ull)
					at = p + 1;
			}
			p = at ? at + 8 : p + 1;
		}
		if (!at)
			continue;
		if (b->nts == cap) {
			size_t *nt = realloc(b->ts, (cap = cap ? 2 * cap : 256) * sizeof(*nt));

			if (!nt)
				return 1;
			b->ts = nt;
		}
		b->ts[b->nts++] = (size_t)(at - (const char *)b->p);
	}
	return b->nts ? 0 : 1;
}

/* Body b with trace ids no request sent before (the counter's next value
 * in every trace id's 5 zero bytes) and, unless -F, its timestamps on the
 * run's clock (shift_times()), in *buf (grown as needed);
 * NULL when out of memory. */
static const void *with_new_traces(const struct body *b, char **buf, size_t *cap)
{
	uint64_t n = __atomic_fetch_add(&next_trace, 1, __ATOMIC_RELAXED);
	static const char hexd[] = "0123456789abcdef";

	if (*cap < b->len) {
		char *nb = realloc(*buf, b->len);

		if (!nb)
			return NULL;
		*buf = nb;
		*cap = b->len;
	}
	memcpy(*buf, b->p, b->len);
	for (size_t i = 0; i < b->ntid; i++) {
		char *d = *buf + b->tid[i];

		for (int k = 0; k < 5; k++) {
			uint8_t v = (uint8_t)(n >> (8 * (4 - k)));

			if (b->hex) {
				d[2 * k] = hexd[v >> 4];
				d[2 * k + 1] = hexd[v & 15];
			} else {
				d[k] = (char)v;
			}
		}
	}
	if (!fixed_times)
		shift_times(b, *buf, (uint64_t)((bench_now_s() - run_t0) * 1e9));
	return *buf;
}

/* Where the trace ids of the body of seed are in b (json_request()'s ids:
 * seed, k, 5 zero bytes, k for k < 16): the offsets of their zero bytes.
 * 0, or 1 when none is found (the request would reuse its traces). */
static int find_traces(struct body *b, unsigned seed, int hex)
{
	size_t cap = 0;

	b->hex = hex;
	for (unsigned k = 0; k < 16; k++) {
		char pat[40];
		size_t plen, zero;

		if (hex) {
			snprintf(pat, sizeof(pat), "%08x%08x0000000000%06x", seed, k, k);
			plen = 32;
			zero = 16;
		} else {
			uint8_t *q = (uint8_t *)pat;

			memset(q, 0, 16);
			q[0] = (uint8_t)(seed >> 24), q[1] = (uint8_t)(seed >> 16);
			q[2] = (uint8_t)(seed >> 8), q[3] = (uint8_t)seed;
			q[7] = (uint8_t)k;
			q[15] = (uint8_t)k;
			plen = 16;
			zero = 8;
		}
		for (const char *p = b->p, *end = (const char *)b->p + b->len;
		     (p = memmem(p, (size_t)(end - p), pat, plen)); p += plen) {
			if (b->ntid == cap) {
				size_t *nt = realloc(b->tid, (cap = cap ? 2 * cap : 64) * sizeof(*nt));

				if (!nt)
					return 1;
				b->tid = nt;
			}
			b->tid[b->ntid++] = (size_t)(p - (const char *)b->p) + zero;
		}
	}
	return b->ntid ? 0 : 1;
}

static int conn(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* One POST of transport t on a keep-alive connection, head and body in
 * one write (as SDK exporters do); the HTTP status, -1 on error. */
static int post(int fd, const struct body *b, int t)
{
	char hdr[256], buf[8192];
	size_t have = 0;
	int n, status = -1;
	char *end;
	long clen;
	struct iovec iov[2];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	n = snprintf(hdr, sizeof(hdr), "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		     "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n",
		     t == T_ZIPKIN ? "/api/v2/spans" : "/v1/traces",
		     t == T_PB ? "application/x-protobuf" : "application/json", b->len);
	iov[0] = (struct iovec){ hdr, (size_t)n };
	iov[1] = (struct iovec){ (void *)b->p, b->len };
	while (mh.msg_iovlen) {
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		while (mh.msg_iovlen && (size_t)w >= mh.msg_iov->iov_len) {
			w -= (ssize_t)mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + w;
			mh.msg_iov->iov_len -= (size_t)w;
		}
	}
	for (;;) {
		ssize_t r = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);

		if (r <= 0)
			return -1;
		have += (size_t)r;
		buf[have] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")))
			break;
	}
	sscanf(buf, "HTTP/1.1 %d", &status);
	clen = 0;
	for (char *h = buf; h && h < end; h = strstr(h, "\r\n") ? strstr(h, "\r\n") + 2 : NULL)
		if (!strncasecmp(h, "Content-Length:", 15))
			clen = strtol(h + 15, NULL, 10);
	for (size_t got = have - (size_t)(end + 4 - buf); got < (size_t)clen;) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return status;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct h2c *h = NULL;
	int fd = -1, i = 0;
	double t0 = bench_now_s(), t = t0;

	if (w->transport == T_GRPC)
		h = h2c_open(w->port);
	else
		fd = conn(w->port);
	while ((h || fd >= 0) && t - t0 < w->secs) {
		const struct body *b = &w->bodies[i++ % NBODIES];
		struct body own;
		double t1;
		int st;

		if (!reuse_traces) {
			own = *b;
			own.p = with_new_traces(b, &w->copy, &w->copycap);
			if (!own.p)
				break;
			b = &own;
		}

		st = h ? h2c_export(h, b->p, b->len) : post(fd, b, w->transport);
		if (h && st >= 0)
			st = st ? 503 : 200;    /* a gRPC status: refused or not */
		if (w->transport == T_ZIPKIN && st == 202)
			st = 200;               /* Zipkin's "accepted" */
		t1 = bench_now_s();
		if (st == 200) {
			w->spans += w->spans_per_req;
			if (w->nlat == w->caplat) {
				w->caplat = w->caplat ? 2 * w->caplat : 1024;
				w->lat = realloc(w->lat, w->caplat * sizeof(*w->lat));
				if (!w->lat)
					break;
			}
			w->lat[w->nlat++] = t1 - t;
		} else if (st > 0) {
			w->refused++;
		} else {
			break;
		}
		t = t1;
	}
	if (fd >= 0)
		close(fd);
	h2c_close(h);
	return NULL;
}

/* The collector's CPU seconds so far (user + system). */
static double cpu_of(pid_t pid)
{
	unsigned long long t;

	return proc_cpu_ticks(pid, &t) ? 0 : (double)t / (double)sysconf(_SC_CLK_TCK);
}

struct cell {
	double rate, cpu_us, p50_ms, p99_ms;
};

/* Waits until the collector pid is idle (at most 10 ms of CPU in 200 ms),
 * for up to 10 s: what the cell before left it to do (its checkpoint
 * copies the WAL into the database) is not counted in the next cell. */
static void settle(pid_t pid)
{
	double c = cpu_of(pid), t0 = bench_now_s();

	do {
		double c1;

		usleep(200000);
		c1 = cpu_of(pid);
		if (c1 - c <= 0.01)
			return;
		c = c1;
	} while (bench_now_s() - t0 < 10);
}

static void run_cell(pid_t pid, int port, int transport, int conns, const struct body *bodies,
		     size_t spr, double secs, struct cell *out)
{
	struct worker w[4];
	double t0, c0, t, *all = NULL;
	size_t spans = 0, refused = 0, nall = 0;

	settle(pid);
	t0 = bench_now_s();
	c0 = cpu_of(pid);

	for (int i = 0; i < conns; i++) {
		w[i] = (struct worker){ .port = port, .transport = transport, .bodies = bodies,
					.secs = secs, .spans_per_req = spr };
		pthread_create(&w[i].t, NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < conns; i++) {
		pthread_join(w[i].t, NULL);
		spans += w[i].spans;
		refused += w[i].refused;
		all = realloc(all, (nall + w[i].nlat + 1) * sizeof(*all));
		if (all && w[i].nlat)
			memcpy(all + nall, w[i].lat, w[i].nlat * sizeof(*all));
		nall += all ? w[i].nlat : 0;
		free(w[i].lat);
		free(w[i].copy);
	}
	t = bench_now_s();
	if (refused)
		fprintf(stderr, "  (%s, %d conns: %zu requests refused, e.g. 429)\n", tname[transport],
			conns, refused);
	out->rate = spans / (t - t0);
	out->cpu_us = spans ? (cpu_of(pid) - c0) / spans * 1e6 : 0;
	out->p50_ms = out->p99_ms = 0;
	if (nall) {
		qsort(all, nall, sizeof(*all), bench_cmp_double);
		out->p50_ms = all[nall / 2] * 1e3;
		out->p99_ms = all[(size_t)((double)(nall - 1) * 0.99)] * 1e3;
	}
	free(all);
}

static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t l = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &l);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* A fay collector on OTLP/HTTP port, gRPC gport and a Zipkin port of its
 * own (*hport), storing into dir's SQLite file, or into ClickHouse at ch
 * when ch is not NULL.  Its pid, or -1 when it did not start in 30 s. */
static pid_t start_collector(const char *fay, const char *ch, int port, int gport, int *hport,
			     char *dir)
{
	char otlp[32], grpc[32], wire[32], http[32], db[300];
	pid_t pid;

	*hport = free_port();
	while (*hport == port || *hport == gport)
		*hport = free_port();

	snprintf(otlp, sizeof(otlp), "127.0.0.1:%d", port);
	snprintf(grpc, sizeof(grpc), "127.0.0.1:%d", gport);
	snprintf(wire, sizeof(wire), "127.0.0.1:%d", free_port());
	snprintf(http, sizeof(http), "127.0.0.1:%d", *hport);
	/* the ClickHouse collector's --db too: where its side files go
	 * (captures, the probe token), not the working directory */
	snprintf(db, sizeof(db), "%s/bench%s.db", dir, ch ? "-ch" : "");
	fflush(stdout);
	pid = fork();
	if (!pid) {
		if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
			_exit(127);
		char *argv[] = { (char *)fay, "collector", "--listen", wire, "--http", http,
				 "--otlp-http", otlp, "--otlp-grpc", grpc, "--db", db,
				 "--retention", "0", ch ? "--clickhouse" : NULL, (char *)ch, NULL };

		execv(fay, argv);
		_exit(127);
	}
	/* up to 30 s: a loaded machine, or the collector under valgrind */
	for (int i = 0; i < 600; i++) {
		int fd = conn(port), fd2 = fd >= 0 ? conn(gport) : -1;

		if (fd >= 0)
			close(fd);
		if (fd2 >= 0) {
			close(fd2);
			return pid;
		}
		usleep(50000);
	}
	kill(pid, SIGTERM);
	return -1;
}

/* The Zipkin v2 JSON of the spans r maps to; malloc'ed, NULL on error. */
static char *zipkin_request(const struct otlp_req *r, struct zarena *a)
{
	struct otlp_result res;
	json_t *j;
	char *text;

	if (otlp_map(r, a, &res))
		return NULL;
	j = zjson_spans(res.spans, res.nspans);
	text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return text;
}

/* Whether body b (JSON, or protobuf when pb) sent 100 s into the run
 * maps to the spans it maps to as itself, each start 100 + NBODIES -
 * seed seconds later; 0 or 1. */
static int check_shift(const struct body *b, int pb)
{
	struct zarena a0 = { 0 }, a1 = { 0 };
	struct otlp_req r0, r1;
	struct otlp_result m0, m1;
	char err[256], *copy = malloc(b->len);
	uint64_t d = (100 + NBODIES - b->seed) * 1000000ull;
	int bad = !copy;

	if (copy) {
		memcpy(copy, b->p, b->len);
		shift_times(b, copy, 100000000000ull);
		bad = (pb ? otlp_pb_decode(b->p, b->len, &a0, &r0, err, sizeof(err)) ||
			    otlp_pb_decode(copy, b->len, &a1, &r1, err, sizeof(err)) :
			    otlp_json_decode(b->p, b->len, &a0, &r0, err, sizeof(err)) ||
			    otlp_json_decode(copy, b->len, &a1, &r1, err, sizeof(err))) ||
		      otlp_map(&r0, &a0, &m0) || otlp_map(&r1, &a1, &m1) || m0.nspans != m1.nspans;
		for (size_t i = 0; !bad && i < m0.nspans; i++)
			bad = m1.spans[i].timestamp_us != m0.spans[i].timestamp_us + d ||
			      m1.spans[i].duration_us != m0.spans[i].duration_us;
	}
	zarena_reset(&a0);
	zarena_reset(&a1);
	free(copy);
	return bad;
}

/* The requests of spr spans: OTLP/JSON, protobuf, gRPC messages and the
 * Zipkin v2 JSON of the same spans; 0 or 1. */
static int make_bodies(int spr, struct body *jb, struct body *pb, struct body *gb,
		       struct body *zb)
{
	size_t jbytes = 0, pbytes = 0;

	for (int i = 0; i < NBODIES; i++) {
		struct zarena a = { 0 };
		struct otlp_req r;
		char err[256];
		void *out;
		size_t outlen;
		uint8_t *g;
		char *j = json_request(spr, (unsigned)i + 1), *zj;

		if (otlp_json_decode(j, strlen(j), &a, &r, err, sizeof(err)) ||
		    otlp_pb_encode(&r, &out, &outlen) || !(zj = zipkin_request(&r, &a))) {
			fprintf(stderr, "cannot build the requests: %s\n", err);
			return 1;
		}
		zarena_reset(&a);
		zb[i] = (struct body){ .p = zj, .len = strlen(zj) };
		g = malloc(outlen + 5);
		if (!g)
			return 1;
		g[0] = 0;
		g[1] = (uint8_t)(outlen >> 24);
		g[2] = (uint8_t)(outlen >> 16);
		g[3] = (uint8_t)(outlen >> 8);
		g[4] = (uint8_t)outlen;
		memcpy(g + 5, out, outlen);
		jb[i] = (struct body){ .p = j, .len = strlen(j) };
		pb[i] = (struct body){ .p = out, .len = outlen };
		gb[i] = (struct body){ .p = g, .len = outlen + 5 };
		jbytes += jb[i].len;
		pbytes += outlen;
		if (find_traces(&jb[i], (unsigned)i + 1, 1) || find_traces(&pb[i], (unsigned)i + 1, 0) ||
		    find_traces(&gb[i], (unsigned)i + 1, 0) || find_traces(&zb[i], (unsigned)i + 1, 1)) {
			fprintf(stderr, "cannot find the trace ids in the requests\n");
			return 1;
		}
		jb[i].seed = pb[i].seed = gb[i].seed = zb[i].seed = (unsigned)i + 1;
		if (find_times(&jb[i], TS_NS_DEC) || find_times(&pb[i], TS_NS_LE64) ||
		    find_times(&gb[i], TS_NS_LE64) || find_times(&zb[i], TS_US_DEC) ||
		    jb[i].nts != 4 * (size_t)spr || pb[i].nts != jb[i].nts || gb[i].nts != jb[i].nts ||
		    zb[i].nts != 3 * (size_t)spr) {
			fprintf(stderr, "the requests' timestamps: %zu in JSON, %zu in protobuf, %zu "
				"in gRPC, %zu in Zipkin; want %d, %d, %d, %d\n", jb[i].nts, pb[i].nts,
				gb[i].nts, zb[i].nts, 4 * spr, 4 * spr, 4 * spr, 3 * spr);
			return 1;
		}
		if (check_shift(&jb[i], 0) || check_shift(&pb[i], 1)) {
			fprintf(stderr, "the requests' timestamps do not move as they should\n");
			return 1;
		}
		if (decode_map(j, strlen(j), 0) != (size_t)spr || decode_map(out, outlen, 1) != (size_t)spr) {
			fprintf(stderr, "the requests do not map to %d spans each\n", spr);
			return 1;
		}
	}
	printf("requests of %d spans: JSON %zu bytes, protobuf %zu bytes (%.2fx smaller), "
	       "Zipkin v2 JSON %zu bytes\n", spr, jbytes / NBODIES, pbytes / NBODIES,
	       (double)jbytes / pbytes, zb[0].len);
	return 0;
}

/* -P N: decode + map N protobuf requests (JSON with -T json), nothing
 * else (callgrind: --toggle-collect=pb_rounds, instructions over N x
 * spans a request). */
__attribute__((noipa)) static size_t pb_rounds(const struct body *b, int n, int pb)
{
	size_t spans = 0;

	for (int i = 0; i < n; i++)
		spans += decode_map(b[i % NBODIES].p, b[i % NBODIES].len, pb);
	return spans;
}

#define MAXR 32

int main(int argc, char **argv)
{
	static const struct option lopts[] = { { "fay", required_argument, NULL, 'f' },
					       { "clickhouse", required_argument, NULL, 'c' },
					       { 0 } };
	int sizes[2] = { 100, 512 }, nsizes = 2, rounds = 5;
	static const int conns[2] = { 1, 4 };
	double secs = 0.5;
	int pbn = 0;
	const char *fay = NULL, *ch = NULL;
	static struct body jb[2][NBODIES], pb[2][NBODIES], gb[2][NBODIES], zb[2][NBODIES];
	static struct cell cells[2][2][2][NT][MAXR]; /* [store: SQLite, ClickHouse] */

	for (int o; (o = getopt_long(argc, argv, "s:r:t:RFT:P:", lopts, NULL)) != -1;) {
		switch (o) {
		case 's': sizes[0] = atoi(optarg); nsizes = 1; break;
		case 'r': rounds = atoi(optarg); break;
		case 't': secs = atof(optarg); break;
		case 'R': reuse_traces = fixed_times = 1; break;
		case 'F': fixed_times = 1; break;
		case 'P': pbn = atoi(optarg); break;
		case 'T':
			for (int t = 0; t < NT; t++)
				if (!strcmp(optarg, topt[t]))
					only = t;
			if (only < 0) {
				fprintf(stderr, "-T %s: pb, json, grpc or zipkin\n", optarg);
				return 2;
			}
			break;
		case 'f': fay = optarg; break;
		case 'c': ch = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-s SPANS_PER_REQUEST] [-r ROUNDS] [-t SECONDS] [-R] [-F] "
				"[-T pb|json|grpc|zipkin] [--fay PATH [--clickhouse URL]] | -P N [-s SPANS]\n", argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAXR || sizes[0] < 1 || (ch && !fay) || pbn < 0)
		return 2;
	if (pbn) {
		size_t spans;

		if (make_bodies(sizes[0], jb[0], pb[0], gb[0], zb[0]))
			return 1;
		spans = only == T_JSON ? pb_rounds(jb[0], pbn, 0) : pb_rounds(pb[0], pbn, 1);
		printf("decode + map: %d %s requests, %zu spans\n", pbn,
		       only == T_JSON ? "JSON" : "protobuf", spans);
		return spans == (size_t)pbn * (size_t)sizes[0] ? 0 : 1;
	}
	run_t0 = bench_now_s();
	bench_loadavg("at the start");
	for (int z = 0; z < nsizes; z++) {
		double dj[MAXR], dp[MAXR], mp, mj;

		if (make_bodies(sizes[z], jb[z], pb[z], gb[z], zb[z]))
			return 1;
		for (int r = 0; r < rounds; r++) {
			dp[r] = rate_decode(pb[z][r % NBODIES].p, pb[z][r % NBODIES].len, 1, secs);
			dj[r] = rate_decode(jb[z][r % NBODIES].p, jb[z][r % NBODIES].len, 0, secs);
		}
		mp = median(dp, (unsigned)rounds);
		mj = median(dj, (unsigned)rounds);
		printf("  decode + map (no store), median of %d:  protobuf %.0f spans/s  JSON %.0f "
		       "spans/s  ratio protobuf/JSON %.2f\n", rounds, mp, mj, mp / mj);
	}
	if (fay) {
		char dir[] = "/tmp/fay-bench-otlp.XXXXXX", cmd[400];
		int port[2], gport[2], hport[2], nstores = ch ? 2 : 1;
		pid_t pid[2];
		int st;

		if (!mkdtemp(dir))
			return 1;
		for (int s = 0; s < nstores; s++) {
			port[s] = free_port();
			gport[s] = free_port();
			while (gport[s] == port[s])
				gport[s] = free_port();
			pid[s] = start_collector(fay, s ? ch : NULL, port[s], gport[s], &hport[s], dir);
			if (pid[s] < 0) {
				fprintf(stderr, "fay collector (%s) did not start\n", s ? ch : "SQLite");
				if (s) {
					kill(pid[0], SIGTERM);
					waitpid(pid[0], &st, 0);
				}
				return 1;
			}
		}
		for (int r = 0; r < rounds; r++)
			for (int z = 0; z < nsizes; z++)
				for (int c = 0; c < 2; c++)
					for (int k = 0; k < NT; k++) {
						int t = (k + r) % NT;

						if (only >= 0 && t != only)
							continue;
						for (int s = 0; s < nstores; s++)
							run_cell(pid[s], t == T_GRPC ? gport[s] :
								 t == T_ZIPKIN ? hport[s] : port[s],
								 t, conns[c],
								 t == T_PB ? pb[z] : t == T_JSON ? jb[z] :
								 t == T_GRPC ? gb[z] : zb[z],
								 (size_t)sizes[z], secs, &cells[s][z][c][t][r]);
					}
		for (int s = 0; s < nstores; s++) {
			kill(pid[s], SIGTERM);
			waitpid(pid[s], &st, 0);
		}
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			fprintf(stderr, "could not remove %s\n", dir);
		for (int s = 0; s < nstores; s++) {
			printf("into fay collector (%s, each request answered after its %s; %s), "
			       "medians of %d rounds of %.1f s:\n", s ? "ClickHouse" : "SQLite", s ? "INSERTs" : "COMMIT",
			       reuse_traces ? "-R: the same 128 traces in every round" :
			       "each request with traces of its own", rounds, secs);
			printf("| spans/request | connections | transport | spans/s | collector CPU "
			       "us/span | latency p50 ms | p99 ms |%s\n|---|---|---|---|---|---|---|%s\n",
			       s ? " spans/s ClickHouse / SQLite |" : "", s ? "---|" : "");
			for (int z = 0; z < nsizes; z++)
				for (int c = 0; c < 2; c++)
					for (int t = 0; t < NT; t++) {
						double v[5][MAXR];

						if (only >= 0 && t != only)
							continue;
						for (int r = 0; r < rounds; r++) {
							v[0][r] = cells[s][z][c][t][r].rate;
							v[1][r] = cells[s][z][c][t][r].cpu_us;
							v[2][r] = cells[s][z][c][t][r].p50_ms;
							v[3][r] = cells[s][z][c][t][r].p99_ms;
							v[4][r] = cells[0][z][c][t][r].rate;
						}
						printf("| %d | %d | %s | %.0f | %.1f | %.2f | %.2f |", sizes[z],
						       conns[c], tname[t], median(v[0], (unsigned)rounds),
						       median(v[1], (unsigned)rounds),
						       median(v[2], (unsigned)rounds),
						       median(v[3], (unsigned)rounds));
						if (s)
							printf(" %.2f |", median(v[0], (unsigned)rounds) /
									  median(v[4], (unsigned)rounds));
						printf("\n");
					}
		}
	}
	bench_loadavg("at the end");
	return 0;
}
