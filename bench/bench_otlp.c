// SPDX-License-Identifier: MIT
/*
 * OTLP ingest, protobuf vs JSON, on the same spans in one run.
 *
 *   bench_otlp [-s SPANS_PER_REQUEST] [-r ROUNDS] [-t SECONDS] [--fay PATH]
 *
 * The spans: SDK-like (hex ids, a parent, kind, 8 attributes of every
 * type with an array, 2 events, a status), 16 distinct traces per
 * request.  The same request is written as OTLP/JSON, then decoded by
 * fay's JSON front end and written as protobuf by otlp_pb_encode(), so
 * both bodies carry exactly the same spans.
 *
 *   1. decode + map, in this process (no store): otlp_json_decode or
 *      otlp_pb_decode, then otlp_map(), spans/s;
 *   2. with --fay: end to end, a running `fay collector` (a temporary
 *      store) taking POST /v1/traces on --otlp-http from 4 keep-alive
 *      connections, each request answered after its COMMIT, spans/s.
 *
 * Rounds alternate protobuf and JSON; medians of ROUNDS; the ratio
 * protobuf / JSON is printed.
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "otlp/otlp.h"

#define CONNS 4

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* An OTLP/JSON request of n spans; malloc'ed. */
static char *json_request(int n, unsigned seed)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	uint64_t start = 1795600000000000000ull + (uint64_t)seed * 1000000000ull;

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
	double t0 = now_s(), t;
	size_t spans = 0;

	do {
		spans += decode_map(body, len, pb);
		t = now_s();
	} while (t - t0 < secs);
	return spans / (t - t0);
}

/* ---- end to end ---------------------------------------------------------- */

struct body {
	const void *p;
	size_t len;
	int pb;
};

struct worker {
	int port;
	const struct body *bodies;      /* nbodies, used in turn */
	int nbodies;
	double secs;
	size_t spans_per_req;
	size_t spans, refused;
	pthread_t t;
};

static int conn(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

/* One POST on a keep-alive connection; the HTTP status, -1 on error. */
static int post(int fd, const struct body *b)
{
	char hdr[256], buf[8192];
	size_t have = 0;
	int n, status = -1;
	char *end;
	long clen;

	n = snprintf(hdr, sizeof(hdr), "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		     "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n",
		     b->pb ? "application/x-protobuf" : "application/json", b->len);
	if (send_all(fd, hdr, (size_t)n) || send_all(fd, b->p, b->len))
		return -1;
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
	int fd = conn(w->port), i = 0;
	double t0 = now_s();

	while (fd >= 0 && now_s() - t0 < w->secs) {
		int st = post(fd, &w->bodies[i++ % w->nbodies]);

		if (st == 200)
			w->spans += w->spans_per_req;
		else if (st > 0)
			w->refused++;
		else
			break;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static double rate_http(int port, const struct body *bodies, int nbodies, size_t spr, double secs)
{
	struct worker w[CONNS];
	double t0 = now_s(), t;
	size_t spans = 0, refused = 0;

	for (int i = 0; i < CONNS; i++) {
		w[i] = (struct worker){ .port = port, .bodies = bodies, .nbodies = nbodies,
					.secs = secs, .spans_per_req = spr };
		pthread_create(&w[i].t, NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < CONNS; i++) {
		pthread_join(w[i].t, NULL);
		spans += w[i].spans;
		refused += w[i].refused;
	}
	t = now_s();
	if (refused)
		fprintf(stderr, "  (%zu requests refused, e.g. 429)\n", refused);
	return spans / (t - t0);
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

static pid_t start_collector(const char *fay, int port, char *dir)
{
	char otlp[32], wire[32], http[32], db[300];
	pid_t pid;

	snprintf(otlp, sizeof(otlp), "127.0.0.1:%d", port);
	snprintf(wire, sizeof(wire), "127.0.0.1:%d", free_port());
	snprintf(http, sizeof(http), "127.0.0.1:%d", free_port());
	snprintf(db, sizeof(db), "%s/bench.db", dir);
	fflush(stdout);
	pid = fork();
	if (!pid) {
		if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
			_exit(127);
		execl(fay, fay, "collector", "--listen", wire, "--http", http, "--otlp-http", otlp,
		      "--otlp-grpc", "off", "--db", db, "--retention", "0", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100; i++) {
		int fd = conn(port);

		if (fd >= 0) {
			close(fd);
			return pid;
		}
		usleep(50000);
	}
	kill(pid, SIGTERM);
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = { { "fay", required_argument, NULL, 'f' }, { 0 } };
	int spr = 100, rounds = 5, nbodies = 8;
	double secs = 1.0;
	const char *fay = NULL;
	struct body jb[8], pb[8];
	double dj[32], dp[32], hj[32], hp[32];
	size_t jbytes = 0, pbytes = 0;

	for (int o; (o = getopt_long(argc, argv, "s:r:t:", lopts, NULL)) != -1;) {
		switch (o) {
		case 's': spr = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 't': secs = atof(optarg); break;
		case 'f': fay = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-s SPANS_PER_REQUEST] [-r ROUNDS] [-t SECONDS] "
				"[--fay PATH]\n", argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || rounds > 32 || spr < 1)
		return 2;
	for (int i = 0; i < nbodies; i++) {
		struct zarena a = { 0 };
		struct otlp_req r;
		char err[256];
		void *out;
		size_t outlen;
		char *j = json_request(spr, (unsigned)i + 1);

		if (otlp_json_decode(j, strlen(j), &a, &r, err, sizeof(err)) ||
		    otlp_pb_encode(&r, &out, &outlen)) {
			fprintf(stderr, "cannot build the requests: %s\n", err);
			return 1;
		}
		zarena_reset(&a);
		jb[i] = (struct body){ j, strlen(j), 0 };
		pb[i] = (struct body){ out, outlen, 1 };
		jbytes += jb[i].len;
		pbytes += outlen;
		if (decode_map(j, strlen(j), 0) != (size_t)spr || decode_map(out, outlen, 1) != (size_t)spr) {
			fprintf(stderr, "the requests do not map to %d spans each\n", spr);
			return 1;
		}
	}
	printf("requests of %d spans: JSON %zu bytes, protobuf %zu bytes (%.2fx smaller)\n",
	       spr, jbytes / nbodies, pbytes / nbodies, (double)jbytes / pbytes);

	for (int r = 0; r < rounds; r++) {
		dp[r] = rate_decode(pb[r % nbodies].p, pb[r % nbodies].len, 1, secs);
		dj[r] = rate_decode(jb[r % nbodies].p, jb[r % nbodies].len, 0, secs);
	}
	double mp = median(dp, (unsigned)rounds), mj = median(dj, (unsigned)rounds);

	printf("decode + map (no store), median of %d:  protobuf %.0f spans/s  JSON %.0f spans/s  "
	       "ratio protobuf/JSON %.2f\n", rounds, mp, mj, mp / mj);
	if (fay) {
		char dir[] = "/tmp/fay-bench-otlp.XXXXXX";
		int port = free_port();
		pid_t pid;
		int st;

		if (!mkdtemp(dir))
			return 1;
		pid = start_collector(fay, port, dir);
		if (pid < 0) {
			fprintf(stderr, "fay collector did not start\n");
			return 1;
		}
		for (int r = 0; r < rounds; r++) {
			/* alternate which goes first */
			if (r % 2) {
				hj[r] = rate_http(port, jb, nbodies, (size_t)spr, secs * 2);
				hp[r] = rate_http(port, pb, nbodies, (size_t)spr, secs * 2);
			} else {
				hp[r] = rate_http(port, pb, nbodies, (size_t)spr, secs * 2);
				hj[r] = rate_http(port, jb, nbodies, (size_t)spr, secs * 2);
			}
		}
		kill(pid, SIGTERM);
		waitpid(pid, &st, 0);
		{
			char cmd[400];

			snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
			if (system(cmd))
				fprintf(stderr, "could not remove %s\n", dir);
		}
		mp = median(hp, (unsigned)rounds);
		mj = median(hj, (unsigned)rounds);
		printf("POST /v1/traces into fay collector (%d connections, SQLite, ACK after "
		       "COMMIT), median of %d:  protobuf %.0f spans/s  JSON %.0f spans/s  ratio "
		       "protobuf/JSON %.2f\n", CONNS, rounds, mp, mj, mp / mj);
	}
	return 0;
}
