// SPDX-License-Identifier: MIT
/*
 * fay collector: the central service.  Parses options, opens the store,
 * starts the ingest (writer) thread, the agent listener and the HTTP API,
 * and runs until SIGINT/SIGTERM.  Stopping finishes what is in flight:
 * every batch handed to the writer is committed and acknowledged.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "collector/cluster.h"
#include "collector/collector.h"
#include "collector/ext.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/version.h"
#include "common/wire.h"

static void usage(FILE *f)
{
	fprintf(f,
"NAME\n"
"    fay collector - the central service: span store, web UI, Zipkin v2 and OTLP\n"
"    APIs, agent listener\n"
"\n"
"SYNOPSIS\n"
"    fay collector [--listen ADDR] [--http ADDR] [--db PATH] [--retention DUR]\n"
"                  [--token T] [--max-body BYTES] [--thresholds FILE]\n"
"                  [--export zipkin=URL|otlp=URL]...\n"
"\n"
"DESCRIPTION\n"
"    Receives spans from fay agents over the framed TCP protocol (docs/ABI.md,\n"
"    src/common/wire.h) and from Zipkin clients over HTTP, stores them in an\n"
"    SQLite database (WAL), and answers Zipkin's v2 query API.\n"
"\n"
"    An agent's batch is acknowledged only after the transaction holding it\n"
"    committed, together with the agent's last batch number: a resent batch\n"
"    is acknowledged again but stored once, and killing the collector (even\n"
"    with SIGKILL) loses nothing it acknowledged.  BlkKin partial records\n"
"    (one annotation each) are merged into Zipkin spans as they arrive.\n"
"\n"
"    HTTP routes (Zipkin v2 JSON model):\n"
"      POST /api/v2/spans             JSON array of spans (gzip accepted); 202\n"
"      GET  /api/v2/services          service names\n"
"      GET  /api/v2/spans?serviceName=S           span names of a service\n"
"      GET  /api/v2/remoteServices?serviceName=S  remote services of a service\n"
"      GET  /api/v2/traces?serviceName=&remoteServiceName=&spanName=\n"
"           &annotationQuery=&minDuration=&maxDuration=&endTs=&lookback=&limit=\n"
"                                     traces, newest first (durations in us,\n"
"                                     endTs/lookback in ms, limit 10, lookback 1 day)\n"
"      GET  /api/v2/trace/ID          one trace (404 if none)\n"
"      GET  /api/v2/traceMany?traceIds=A,B\n"
"      GET  /health                   {\"status\":\"UP\",...}\n"
"      GET  /metrics                  Prometheus text: spans received, stored,\n"
"                                     rejected, duplicate; batches; agents\n"
"      POST /v1/traces                OTLP/HTTP JSON spans (chunked, gzip); 200 {}\n"
"      GET  /api/v2/dependencies?endTs=MS&lookback=MS  service call graph\n"
"      POST /api/query                a FayQL query; 400 with line:col, or\n"
"                                     NDJSON rows streamed as they come\n"
"      GET  /api/ui/dashboard?window=S&step=S  per service/span latencies\n"
"      GET|PUT /api/ui/thresholds     the dashboard's thresholds (JSON)\n"
"      GET  /api/ui/hosts             agents: up/down, version, losses, probes\n"
"      GET  /                         the web UI: traces, a trace's waterfall at\n"
"                                     /trace/ID, dependencies, dashboard, live\n"
"                                     query, hosts (embedded; works offline)\n"
"    A bad request is answered 400 with the reason (\"span 3: traceId: ...\",\n"
"    span numbers count from 0), an unknown trace 404, a body over the limit 413.\n"
"\n"
"OPTIONS\n"
"    --listen ADDR     agent protocol address (default 127.0.0.1:%d)\n"
"    --http ADDR       HTTP API address (default 127.0.0.1:%d)\n"
"                      ADDR is HOST:PORT, [IPV6]:PORT, :PORT or PORT; without a\n"
"                      host it binds 127.0.0.1; 0.0.0.0:PORT for every interface;\n"
"                      port 0 picks a free one (printed at start)\n"
"    --db PATH         the SQLite store (default ./fay.db); created if absent; a\n"
"                      file that is not a fay store is refused, never replaced\n"
"    --retention DUR   delete spans older than DUR (default 7d; 30s, 12h, 0 = keep\n"
"                      forever), checked in small chunks in the background\n"
"    --token T         agents must send T in their HELLO; HTTP requests must send\n"
"                      'Authorization: Bearer T' (also: FAY_TOKEN): every method\n"
"                      but GET/HEAD, and GET/HEAD of /api/, /v1/ and /metrics\n"
"                      (not /health and the UI's files); checked before a body\n"
"                      is read\n"
"    --max-body BYTES  largest POST body, before and after gzip (default 16M;\n"
"                      suffixes k, M)\n"
"    --thresholds FILE the dashboard's thresholds, JSON: {\"rules\": [{\"service\":\n"
"                      \"S\", \"span\": \"N\", \"p50_us\": X, \"p99_us\": X, \"avg_us\": X,\n"
"                      \"error_rate\": F}]} (\"*\" matches any; the most specific\n"
"                      rule wins); edits in the UI are written back to FILE\n"
"                      (default PATH.thresholds.json next to the store)\n"
"    --export KIND=URL forward every stored span to another backend: zipkin=URL\n"
"                      (Zipkin v2 JSON, e.g. http://zipkin:9411/api/v2/spans) or\n"
"                      otlp=URL (OTLP/HTTP JSON, e.g. http://otel:4318/v1/traces);\n"
"                      batched, retried 3 times, counted in /metrics; repeatable\n"
"    -v, --verbose     more log lines (debug)\n"
"    -h, --help        this manual\n"
"\n"
"EXAMPLES\n"
"    fay collector\n"
"    fay collector --db /var/lib/fay/fay.db --retention 3d --listen 0.0.0.0:9410\n"
"    curl -s localhost:9411/api/v2/services\n"
"    curl -s 'localhost:9411/api/v2/traces?serviceName=mapperd&minDuration=1000&limit=5'\n"
"    curl -s -X POST -H 'Content-Type: application/json' --data @spans.json \\\n"
"         localhost:9411/api/v2/spans\n"
"    fay collector --thresholds /etc/fay/thresholds.json \\\n"
"         --export zipkin=http://127.0.0.1:9412/api/v2/spans\n"
"    xdg-open http://127.0.0.1:9411/\n"
"\n"
"EXIT STATUS\n"
"    0 stopped by SIGINT/SIGTERM, 1 cannot start (address in use, store not\n"
"    usable: the message names the file), 2 usage error.\n"
"\n"
"ENVIRONMENT\n"
"    FAY_TOKEN         default for --token\n"
"    FAY_LOG_LEVEL     debug, info (default), warn, error\n"
"    FAY_STORE_SYNC    'full' fsyncs every commit (survives power loss; slower);\n"
"                      default NORMAL survives any crash of the process\n"
"\n"
"FILES\n"
"    PATH, PATH-wal, PATH-shm   the store; schema in src/store/schema.sql\n"
"    PATH.thresholds.json       the dashboard's thresholds without --thresholds\n",
		FAY_WIRE_DEFAULT_PORT, FAY_HTTP_DEFAULT_PORT);
}

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	if (*end || !v || v > (1ull << 31))
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

int cmd_collector(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "http", required_argument, NULL, 'H' },
		{ "db", required_argument, NULL, 'd' },
		{ "retention", required_argument, NULL, 'r' },
		{ "token", required_argument, NULL, 't' },
		{ "max-body", required_argument, NULL, 'm' },
		{ "thresholds", required_argument, NULL, 'T' },
		{ "export", required_argument, NULL, 'x' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char wire_addr[128], http_addr[128], err[512];
	const char *listen = NULL, *http = NULL, *db = "./fay.db";
	struct collector c = { .max_body = 16u << 20, .retention_us = 7ull * 86400 * 1000000 };
	struct wire_server *ws = NULL;
	struct http_server *hs = NULL;
	struct coll_ext_opts xo = { 0 };
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t set, old;
	uint64_t ns;
	int opt, ret = 1;

	snprintf(wire_addr, sizeof(wire_addr), "127.0.0.1:%d", FAY_WIRE_DEFAULT_PORT);
	snprintf(http_addr, sizeof(http_addr), "127.0.0.1:%d", FAY_HTTP_DEFAULT_PORT);
	c.token = getenv("FAY_TOKEN");
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+vh", lopts, NULL)) != -1) {
		switch (opt) {
		case 'l': listen = optarg; break;
		case 'H': http = optarg; break;
		case 'd': db = optarg; break;
		case 't': c.token = optarg; break;
		case 'r':
			if (!strcmp(optarg, "0")) {
				c.retention_us = 0;
				break;
			}
			if (clock_parse_duration(optarg, &ns) || ns < 1000000000ull) {
				fprintf(stderr, "error: --retention '%s': expected a duration of at least 1s (30s, 12h, 7d) or 0\n",
					optarg);
				return 2;
			}
			c.retention_us = ns / 1000;
			break;
		case 'm':
			if (parse_size(optarg, &c.max_body)) {
				fprintf(stderr, "error: --max-body '%s': expected a size like 512k or 16M\n",
					optarg);
				return 2;
			}
			break;
		case 'T': xo.thresholds = optarg; break;
		case 'x':
			if (coll_ext_add_export(&xo, optarg, err, sizeof(err))) {
				fprintf(stderr, "error: %s\n", err);
				return 2;
			}
			break;
		case 'v': log_set_level(LOG_DEBUG); break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "Run 'fay collector --help' for the manual.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "error: unexpected argument '%s'\n"
			"Run 'fay collector --help' for the manual.\n", argv[optind]);
		return 2;
	}
	if (c.token && !*c.token)
		c.token = NULL;
	if (listen)
		snprintf(wire_addr, sizeof(wire_addr), "%s", listen);
	if (http)
		snprintf(http_addr, sizeof(http_addr), "%s", http);

	/* Threads inherit a blocked SIGINT/SIGTERM; main waits for them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_sigmask(SIG_BLOCK, &set, &old);

	pthread_mutex_init(&c.agents_lock, NULL);
	pthread_mutex_init(&c.readers_lock, NULL);
	c.started_us = clock_realtime_ns() / 1000;
	c.store = store__open(db, 0, err, sizeof(err));
	if (!c.store) {
		fprintf(stderr, "error: store: %s\n", err);
		goto out;
	}
	xo.db = db;
	c.ext = coll_ext_new(&c, &xo, err, sizeof(err));
	if (!c.ext) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	c.cluster = cluster_new();
	if (!c.cluster) {
		fprintf(stderr, "error: out of memory\n");
		goto out;
	}
	c.ingest = ingest_new(&c);
	if (!c.ingest) {
		fprintf(stderr, "error: cannot start the writer thread: %s\n", errstr(errno));
		goto out;
	}
	ws = wire_server_new(&c, wire_addr, err, sizeof(err));
	if (!ws) {
		fprintf(stderr, "error: --listen %s\n", err);
		goto out;
	}
	hs = http_server_new(&c, http_addr, err, sizeof(err));
	if (!hs) {
		fprintf(stderr, "error: --http %s\n", err);
		goto out;
	}
	pr_info("collector %s: agents on %s, HTTP on http://%s, store %s (schema %d), retention %s%" PRIu64 "s",
		FAY_VERSION, wire_server_addr(ws), http_server_addr(hs), db,
		store__schema_version(), c.retention_us ? "" : "off ",
		c.retention_us / 1000000);
	if (c.token)
		pr_info("collector: agents must present the token");

	while (!stop_sig)
		sigsuspend(&old);
	pr_info("collector: signal %d, stopping", (int)stop_sig);
	ret = 0;
out:
	http_server_free(hs);
	wire_server_free(ws);
	cluster_free(c.cluster);	/* after every connection and query ended */
	ingest_free(c.ingest);
	coll_ext_free(c.ext);
	for (int i = 0; i < c.nreaders; i++)
		store__reader_free(c.readers[i]);
	store__close(c.store);
	coll_agents_free(&c);
	pthread_mutex_destroy(&c.agents_lock);
	pthread_mutex_destroy(&c.readers_lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}
