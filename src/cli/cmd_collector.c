// SPDX-License-Identifier: MIT
/*
 * `fay collector`: options and manual; runs the collector
 * (src/collector/collector.c: store, writer thread, agent listener, HTTP
 * API) until SIGINT/SIGTERM.  Stopping finishes what is in flight: every
 * batch handed to the writer is committed and acknowledged.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "collector/collector.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/wire.h"

static void usage(FILE *f)
{
	fprintf(f,
"NAME\n"
"    fay collector - the central service: span store, web UI, Zipkin v2 and OTLP\n"
"    APIs, agent listener\n"
"\n"
"SYNOPSIS\n"
"    fay collector [--listen ADDR] [--http ADDR] [--otlp-http ADDR|off]\n"
"                  [--otlp-grpc ADDR|off]\n"
"                  [--db PATH] [--retention DUR] [--min-free SIZE|PCT%%]\n"
"                  [--token-file FILE] [--token T] [--insecure]\n"
"                  [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE\n"
"                  [--tls-client-ca-ports LIST]]]\n"
"                  [--max-body BYTES] [--ingest-queue SPANS]\n"
"                  [--thresholds FILE]\n"
"                  [--export zipkin=URL|otlp=URL|otlp-protobuf=URL]...\n"
"                  [--autocomplete-keys K1,K2]\n"
"                  [--parent HOST:PORT [--host NAME] [--parent-tls-ca FILE]]\n"
"                  [--advertise HOST:PORT]\n"
"                  [--max-conns N]\n"
"                  [--max-conns-per-peer N] [--max-memory BYTES]\n"
"                  [--allow-other-users] [--probe-group GROUP]\n"
"\n"
"ACCESS\n"
"    Without tokens the collector listens on loopback only.  Reading and\n"
"    sending spans is open there (as Zipkin's), but loading probes is not:\n"
"    for POST /api/query and standing queries (POST, DELETE /api/queries)\n"
"    the collector finds the local user whose socket the request came from\n"
"    (the kernel's socket tables: sock_diag, /proc/net/tcp) and applies the\n"
"    rule of a local fay query.  Root, the collector's own user and members\n"
"    of --probe-group may probe everything; another user may probe only its\n"
"    own processes (process(PID).function of one of them, function or usdt\n"
"    of a binary it owns), and no source that sees every process or the\n"
"    kernel (syscall, tracepoint, kernel.function, profile, spans), no\n"
"    cluster query and no standing query: 403 with the reason.  At each\n"
"    start the collector writes a new random probe token to DB.probe-token\n"
"    (mode 0600, its user alone reads it); 'Authorization: Bearer TOKEN'\n"
"    with it may probe everything (the web UI: http://HOST:PORT/#token=TOKEN,\n"
"    as make demo prints).  With --token-file the token's probe scope\n"
"    decides instead.  Agents refuse a cluster query that comes without the\n"
"    probe right.  Every decision is logged (\"probe access: ...\").\n"
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
"    An agent connection that goes silent without closing (a pulled cable, a\n"
"    dead host) is dropped after about 8 s (TCP keepalive), and the agent shows\n"
"    as down on the Hosts page and in /api/ui/hosts until it reconnects.\n"
"\n"
"    HTTP routes (Zipkin v2 JSON model):\n"
"      POST /api/v2/spans             JSON array of spans, or protobuf (Content-\n"
"                                     Type application/x-protobuf: Zipkin's\n"
"                                     ListOfSpans); gzip accepted; 202\n"
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
"      POST /v1/traces                OTLP/HTTP spans, application/x-protobuf or\n"
"                                     application/json (chunked, gzip); answered\n"
"                                     in the same encoding: 200 (partial_success\n"
"                                     counts invalid spans), 400, 413, 429 + Retry-After\n"
"      GET  /api/v2/dependencies?endTs=MS&lookback=MS  service call graph\n"
"      GET  /api/v2/autocompleteKeys  the --autocomplete-keys ([] without)\n"
"      GET  /api/v2/autocompleteValues?key=K  values of tag K seen (K one of\n"
"                                     the --autocomplete-keys; else [])\n"
"      POST /api/sql?format=table|json  one read-only SQL statement on the\n"
"                                     store (fay sql --collector, docs/SQL.md)\n"
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
"    --otlp-http ADDR  a second HTTP listener serving POST /v1/traces alone, where\n"
"                      OpenTelemetry SDKs send by default (default %s);\n"
"                      'off' for none.  When the default port is taken (another\n"
"                      collector on this host) the collector warns and runs\n"
"                      without it; an ADDR given must bind or the collector\n"
"                      exits 1.  Tests and several collectors on one host pass\n"
"                      port 0 (a free port, printed at start) or 'off'\n"
"    --otlp-grpc ADDR  OTLP/gRPC (HTTP/2 cleartext): TraceService/Export with the\n"
"                      answers of POST /v1/traces as gRPC statuses (partial_success,\n"
"                      INVALID_ARGUMENT, RESOURCE_EXHAUSTED past --max-body,\n"
"                      UNAVAILABLE + RetryInfo when the ingest queue is full;\n"
"                      grpc-encoding gzip); default %s, the same rules\n"
"                      as --otlp-http for a taken port and 'off'\n"
"    --db PATH         the SQLite store (default ./fay.db); created if absent; a\n"
"                      file that is not a fay store is refused, never replaced\n"
"    --clickhouse URL[,URL...]\n"
"                      store spans in ClickHouse instead (its HTTP interface,\n"
"                      http://HOST:8123[/DATABASE], database fay by default):\n"
"                      schema created on first start and migrated by version;\n"
"                      several collectors may share one, and its standing\n"
"                      queries (one of them runs them: the lease's holder);\n"
"                      --db PATH then only names where thresholds, capture\n"
"                      rules and the list of captures (DB.captures/) are kept.\n"
"                      Tables and SQL: docs/SQL.md\n"
"    --clickhouse-cluster NAME\n"
"                      tables local to every shard of the remote_servers\n"
"                      cluster NAME, written and read through Distributed\n"
"                      tables; list one URL per shard (the schema is created\n"
"                      on each, 18.16 has no ON CLUSTER without ZooKeeper),\n"
"                      the first is the one the collector talks to\n"
"    --clickhouse-linger DUR\n"
"                      with ClickHouse, wait up to DUR (default %s, 0 = never)\n"
"                      after a batch arrives for more before writing, so that\n"
"                      agents' small batches become one INSERT (every INSERT\n"
"                      makes a part of each table: fewer, larger ones cost the\n"
"                      server less); the wait ends early once every connected\n"
"                      agent, and as many OTLP/Zipkin senders as had a request\n"
"                      in the store's hands at once in the last second, have\n"
"                      one waiting (one OTLP exporter never waits).  ACKs and\n"
"                      answers still follow the INSERT that holds their batch\n"
"    --clickhouse-batch SPANS\n"
"                      stop lingering once this many spans wait (default %u)\n"
"    --clickhouse-writers N\n"
"                      write with N threads (1 to 4, default %u): one prepares\n"
"                      its rows while the others' INSERTs run, so the collector\n"
"                      and the server work at once; each keeps a connection\n"
"                      a table.  What one agent sent is still stored in order\n"
"    --retention DUR   delete spans older than DUR (default 7d; 30s, 12h, 0 = keep\n"
"                      forever), checked in small chunks in the background;\n"
"                      ClickHouse drops whole days (partitions) older than DUR;\n"
"                      standing queries' windows (query_windows) go the same way\n"
"    --min-free SIZE|PCT%%\n"
"                      free space the store's file system keeps: below it\n"
"                      the collector takes no new spans (agents keep them\n"
"                      in their spool, HTTP answers 503 with Retry-After,\n"
"                      OTLP/gRPC UNAVAILABLE), copies the SQLite WAL into\n"
"                      the database and truncates it, and resumes by itself\n"
"                      when the space is back (an eighth above it); /health\n"
"                      and /metrics (fay_collector_disk_low) say \"disk low\"\n"
"                      meanwhile.  Default: the larger of 2%% of the file\n"
"                      system and twice the WAL's limit (64 MiB, less on a\n"
"                      file system under 2G: 128M from 2G up), and never\n"
"                      less than the WAL not yet checkpointed; suffixes k,\n"
"                      M, G, or a percentage (5%%).  With --clickhouse,\n"
"                      ClickHouse's own disk-full errors make it low the\n"
"                      same way (one write a second tries again)\n"
"    --token-file FILE the tokens clients must present, one a line:\n"
"                          TOKEN SCOPES [NAME]      # a comment\n"
"                      SCOPES comma-separated: read (the query API, the UI's\n"
"                      API, /api/v2 reads, /api/sql, /metrics), write (ingest:\n"
"                      Zipkin POST, OTLP HTTP and gRPC, agents; the UI's\n"
"                      thresholds), probe (/api/query, standing and cluster\n"
"                      queries: they load BPF).  HTTP: 'Authorization: Bearer\n"
"                      TOKEN' (gRPC: metadata authorization), 401 without a\n"
"                      known token, 403 without the route's scope, checked\n"
"                      before a body is read; /health and the UI's files need\n"
"                      none.  Agents send theirs in HELLO; an agent id is\n"
"                      bound to the token of its first HELLO (PATH.agent-tokens)\n"
"                      and no other token may speak for it.  The file must not\n"
"                      be readable by every user (chmod 600 or 640): a start is\n"
"                      refused otherwise\n"
"    --token T         one token with every scope (also FAY_TOKEN; it is seen in\n"
"                      ps: prefer --token-file); with --parent, this collector's\n"
"                      own token to its parent\n"
"    --tls-cert FILE --tls-key FILE\n"
"                      TLS (1.2 or 1.3; GnuTLS) on every port: the agent port,\n"
"                      HTTP (https://), OTLP/HTTP and OTLP/gRPC.  PEM files: the\n"
"                      certificate (chain) and its key, which must not be\n"
"                      readable by every user.  A missing or unreadable file or\n"
"                      a key that is not the certificate's refuses the start\n"
"    --parent-tls-ca FILE\n"
"                      speak TLS to --parent (a collector with --tls-cert),\n"
"                      whose certificate this CA must have signed; our own\n"
"                      --tls-cert/--tls-key go with it as our certificate\n"
"    --tls-client-ca FILE\n"
"                      every client must present a certificate this CA signed\n"
"                      (mutual TLS: fay agent --tls-cert --tls-key, curl --cert\n"
"                      --key, a gRPC client's key pair), or its handshake is\n"
"                      refused; tokens are still checked on top.  On every\n"
"                      port unless --tls-client-ca-ports says which\n"
"    --tls-client-ca-ports LIST\n"
"                      the ports that require a client certificate, comma-\n"
"                      separated: agent, http, otlp-http, otlp-grpc (default:\n"
"                      all; \"agent\": agents only, as --tls-client-ca was\n"
"                      before, HTTP and gRPC clients identified by tokens)\n"
"    --insecure        allow a non-loopback --listen/--http/--otlp-* address with\n"
"                      no token (refused otherwise: anyone who reaches the port\n"
"                      could read traces and load BPF programs); logged loudly\n"
"    --max-body BYTES  largest POST body, before and after gzip (default 16M;\n"
"                      suffixes k, M, G; at most 2G)\n"
"    --ingest-queue SPANS\n"
"                      spans waiting for the store past which OTLP senders (HTTP,\n"
"                      gRPC) are told to retry: 429 / UNAVAILABLE with\n"
"                      Retry-After: 1 (default 100000; agents and Zipkin POSTs\n"
"                      wait instead)\n"
"    --thresholds FILE the dashboard's thresholds, JSON: {\"rules\": [{\"service\":\n"
"                      \"S\", \"span\": \"N\", \"p50_us\": X, \"p99_us\": X, \"avg_us\": X,\n"
"                      \"error_rate\": F}]} (\"*\" matches any; the most specific\n"
"                      rule wins); edits in the UI are written back to FILE\n"
"                      (default PATH.thresholds.json next to the store)\n"
"    --export KIND=URL forward every stored span to another backend: zipkin=URL\n"
"                      (Zipkin v2 JSON, e.g. http://zipkin:9411/api/v2/spans) or\n"
"                      otlp=URL (OTLP/HTTP JSON, e.g. http://otel:4318/v1/traces)\n"
"                      or otlp-protobuf=URL (OTLP/HTTP protobuf, the same URL);\n"
"                      batched, retried 3 times, counted in /metrics; repeatable\n"
"    --autocomplete-keys K1,K2\n"
"                      tag keys whose values are kept for Zipkin's\n"
"                      /api/v2/autocompleteValues (Lens offers them in its\n"
"                      search); values are recorded as spans arrive (default\n"
"                      none)\n"
"    --parent HOST:PORT\n"
"                      make this collector an intermediate aggregator of a\n"
"                      cluster-query tree: it keeps a query connection to the\n"
"                      parent's agent port, runs the parent's queries on its own\n"
"                      agents and sends up one merged partial per window naming\n"
"                      every host under it (see CLUSTER QUERIES); a capture\n"
"                      (fay capture) from the parent it makes on its own\n"
"                      agents and answers as one host\n"
"    --host NAME       this collector's name to its parent (default: host name)\n"
"    --advertise HOST:PORT\n"
"                      with ClickHouse shared by several collectors side by side\n"
"                      (not --parent): the address of this collector's agent\n"
"                      port the others reach it at (default: --listen's, with\n"
"                      the host name for 0.0.0.0 or [::]).  Each says it in the\n"
"                      store; the one running the standing queries asks the\n"
"                      others for their hosts' answers (they link to it as to a\n"
"                      parent: --token, --parent-tls-ca), and counts a silent\n"
"                      one's hosts missing\n"
"    --max-conns N     connections on the agent port at once (default 8192; an\n"
"                      agent holds two: spans and queries); more are refused\n"
"                      with a reason the agent logs, and it retries.  The open\n"
"                      file limit is raised to its hard limit at start; N is\n"
"                      capped to fit it (a warning says so)\n"
"    --max-conns-per-peer N\n"
"                      connections on the agent port from one address at once\n"
"                      (default 256; 0: no cap); more are refused with the reason\n"
"    --allow-other-users\n"
"                      when the collector runs as a non-root user, let\n"
"                      /api/query probe every user's processes; without it a\n"
"                      query probes only the processes of the collector's own\n"
"                      user (and a requester other than root only its own:\n"
"                      see ACCESS)\n"
"    --probe-group GROUP\n"
"                      without tokens, local users of GROUP (their primary or\n"
"                      a listed group) may probe everything, as root may (see\n"
"                      ACCESS)\n"
"    --max-memory BYTES\n"
"                      what peers can make the collector hold at once: their\n"
"                      connections (64 KiB each, 128 KiB with TLS), frames\n"
"                      being received on the agent port, HTTP and gRPC bodies\n"
"                      being received and gzip bodies as they are decoded\n"
"                      (default: half of the memory the collector may use,\n"
"                      the smallest of its cgroups' limits (v2 memory.max,\n"
"                      v1 memory limit) and MemTotal, at most 1G, at least\n"
"                      32M: logged at start; suffixes k, M, G).  Before its\n"
"                      HELLO is accepted (and its token checked) a frame on\n"
"                      the agent port is at most 64 KiB.  A connection that\n"
"                      does not fit is turned away at accept (the agent port\n"
"                      says \"busy\").  Past it a frame's\n"
"                      connection is closed with \"busy\" (the agent keeps the\n"
"                      batch and retries) and an HTTP body, or its decoded\n"
"                      bytes, is answered 503 with Retry-After (gRPC:\n"
"                      UNAVAILABLE); /metrics: fay_collector_memory_bytes.  On\n"
"                      the agent port a connection must also send HELLO within\n"
"                      10 s and finish a frame within 30 s of its first byte.\n"
"                      The collector's RSS stays under this plus a fixed base\n"
"                      and the store's caches (SQLite: 64 MiB and 2 MiB per\n"
"                      reader; ClickHouse: the row buffers each writer keeps\n"
"                      for its next write, about 20 MiB after 50 000-span\n"
"                      writes, at most 4 x 32 MiB)\n"
"    -v, --verbose     more log lines (debug)\n"
"    -h, --help        this manual\n"
"\n"
"CLUSTER QUERIES\n"
"    Agents keep a second connection to their collector (HELLO role \"query\")\n"
"    over which it sends FayQL queries and they answer with one partial\n"
"    aggregate per wall-clock-aligned window.  POST /api/query with a\n"
"    cluster.X or host(\"name\").X source (or fay query --cluster URL) fans a\n"
"    query out to the agents that can run it, merges their windows as they\n"
"    arrive and streams merged rows back with each window's completeness\n"
"    (hosts asked, answered, late, missing, failed).  A window waits for its\n"
"    hosts until its end plus the grace period (default 1s, twice that for\n"
"    child collectors).  GET /api/cluster/peers lists the query connections\n"
"    and what each runs.  With --parent, collectors form a tree: order by,\n"
"    limit and final quantile/distinct values run only at the root.\n"
"\n"
"EXAMPLES\n"
"    fay collector\n"
"    fay collector --db /var/lib/fay/fay.db --retention 3d --listen 0.0.0.0:9410 \\\n"
"         --token-file /etc/fay/tokens\n"
"    fay collector --clickhouse http://127.0.0.1:8123/fay\n"
"    curl -s localhost:9411/api/v2/services\n"
"    curl -s 'localhost:9411/api/v2/traces?serviceName=mapperd&minDuration=1000&limit=5'\n"
"    curl -s -X POST -H 'Content-Type: application/json' --data @spans.json \\\n"
"         localhost:9411/api/v2/spans\n"
"    fay collector --thresholds /etc/fay/thresholds.json \\\n"
"         --export zipkin=http://127.0.0.1:9412/api/v2/spans\n"
"    xdg-open http://127.0.0.1:9411/\n"
"    fay collector --listen 0.0.0.0:9410 --token-file /etc/fay/tokens \\\n"
"         --parent root.example:9410 --host rack7\n"
"\n"
"SIGNALS\n"
"    SIGHUP reads --token-file and the TLS files (--tls-cert, --tls-key,\n"
"    --tls-client-ca) again, without a restart: new requests, agents' HELLOs\n"
"    and handshakes use them at once (a rotated token: the old one gets 401;\n"
"    a renewed certificate: new handshakes present it); connections already\n"
"    open keep their session.  A file that cannot be used (unreadable, not\n"
"    PEM, a key that is not the certificate's, a mode every user can read)\n"
"    is refused: the log says why (\"reload: ...\") and what was read before\n"
"    goes on.  SIGINT/SIGTERM stop: what is in flight is finished first.\n"
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
"    FAY_CH_TEST_KILL_FILE PATH\n"
"                      tests only: with --clickhouse, once PATH exists the next\n"
"                      write deletes it and kills the collector (SIGKILL) after\n"
"                      ClickHouse accepted the write's spans and before the\n"
"                      agents' seq and the ACKs, so agents resend batches the\n"
"                      store already has (which must not show twice)\n"
"    FAY_CH_MIGRATE_STALE_S N\n"
"                      with --clickhouse: a schema migration lock whose holder\n"
"                      ran on another machine is broken once none of its\n"
"                      queries was seen running for N seconds (default 60)\n"
"    FAY_CH_TEST_MIGRATE_KILL POINT\n"
"                      tests only: the collector holding the migration lock\n"
"                      kills itself (SIGKILL) at POINT: 'locked', 'copied'\n"
"                      (schema 1 -> 2, rows copied, not yet renamed), 'stepped'\n"
"    FAY_CH_TEST_MIGRATE_STOP POINT\n"
"                      tests only: ... stops itself (SIGSTOP) at POINT instead\n"
"\n"
"FILES\n"
"    PATH, PATH-wal, PATH-shm   the store; schema in src/store/schema.sql\n"
"    PATH.thresholds.json       the dashboard's thresholds without --thresholds\n"
"    PATH.agent-tokens          agent id -> the token it is bound to (--token-file)\n"
"    PATH.probe-token           without tokens: this start's probe token (ACCESS)\n",
		FAY_WIRE_DEFAULT_PORT, FAY_HTTP_DEFAULT_PORT, COLL_OTLP_HTTP_DEFAULT,
		COLL_OTLP_GRPC_DEFAULT, COLL_CH_LINGER_DEFAULT, COLL_CH_BATCH_DEFAULT,
		COLL_CH_WRITERS_DEFAULT);
}

static volatile sig_atomic_t stop_sig, hup;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		hup = 1;
	else
		stop_sig = sig;
}

/* --NAME N: a count from lo to 1000000 (0: no cap, when lo is 0). */
static int count_arg(const char *name, const char *arg, unsigned lo, unsigned *out)
{
	uint64_t v;

	if (opt_parse_size(arg, &v) || v < lo || v > 1000000) {
		fprintf(stderr, "error: --%s '%s': expected a number from %s to 1000000\n",
			name, arg, lo ? "1" : "0 (no cap)");
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/* --min-free SIZE or PCT% into *bytes or *pct.  0, or -1 (said why). */
static int min_free_arg(const char *arg, uint64_t *bytes, unsigned *pct)
{
	size_t n = strlen(arg);
	char *end;

	*bytes = 0;
	*pct = 0;
	if (n && arg[n - 1] == '%') {
		unsigned long v = strtoul(arg, &end, 10);

		if (end != arg + n - 1 || end == arg || v < 1 || v > 99) {
			fprintf(stderr, "error: --min-free '%s': a percentage from 1%% to 99%%\n",
				arg);
			return -1;
		}
		*pct = (unsigned)v;
		return 0;
	}
	if (opt_parse_size(arg, bytes) || !*bytes) {
		fprintf(stderr, "error: --min-free '%s': expected a size (like 512M or 2G) or a "
			"percentage of the file system (like 5%%)\n", arg);
		return -1;
	}
	return 0;
}

/* The store's options (ClickHouse's, --retention): 0, or 2 after saying why. */
static int store_opt(int opt, const char *arg, struct collector_opts *o)
{
	uint64_t ns, size;

	switch (opt) {
	case 1009:
		if (clock_parse_duration(arg, &ns) || ns > 10000000000ull) {
			fprintf(stderr, "error: --clickhouse-linger '%s': expected a duration"
				" of at most 10s (50ms, 1s) or 0\n", arg);
			return 2;
		}
		o->ch_linger_ns = ns;
		o->ch_linger_set = true;
		return 0;
	case 1010:
		if (opt_parse_size(arg, &size) || !size || size > 1000000) {
			fprintf(stderr, "error: --clickhouse-batch '%s': expected a number of"
				" spans from 1 to 1000000 (like 50000 or 50k)\n", arg);
			return 2;
		}
		o->ch_batch = (size_t)size;
		return 0;
	case 1012:
		if (opt_parse_size(arg, &size) || !size || size > 4) {
			fprintf(stderr, "error: --clickhouse-writers '%s': expected a number"
				" of writer threads from 1 to 4\n", arg);
			return 2;
		}
		o->ch_writers = (unsigned)size;
		return 0;
	default:	/* 'r' */
		if (!strcmp(arg, "0")) {
			o->retention_us = 0;
			return 0;
		}
		if (clock_parse_duration(arg, &ns) || ns < 1000000000ull) {
			fprintf(stderr, "error: --retention '%s': expected a duration of at least 1s (30s, 12h, 7d) or 0\n",
				arg);
			return 2;
		}
		o->retention_us = ns / 1000;
		return 0;
	}
}

/* The limits on what clients may take: 0, or 2 after saying why. */
static int limit_opt(int opt, const char *arg, struct collector_opts *o)
{
	uint64_t size;

	switch (opt) {
	case 'm':
	case 'Q':
		if (opt_parse_size(arg, &size) || !size || size > (1ull << 31)) {
			fprintf(stderr, "error: %s '%s': expected %s\n",
				opt == 'm' ? "--max-body" : "--ingest-queue", arg,
				opt == 'm' ? "a size like 512k or 16M" :
					     "a number of spans like 100000 or 100k");
			return 2;
		}
		*(opt == 'm' ? &o->max_body : &o->ingest_queue) = (size_t)size;
		return 0;
	case 'C':
		return count_arg("max-conns", arg, 1, &o->max_conns) ? 2 : 0;
	case 'E':
		return count_arg("max-conns-per-peer", arg, 0, &o->max_conns_per_peer) ? 2 : 0;
	case 'M':
		if (opt_parse_size(arg, &size) || size < (1u << 20)) {
			fprintf(stderr, "error: --max-memory '%s': expected a size of at least 1M (like 256M or 2G)\n",
				arg);
			return 2;
		}
		o->max_memory = size;
		return 0;
	default:	/* 1014 */
		return min_free_arg(arg, &o->min_free, &o->min_free_pct) ? 2 : 0;
	}
}

/* The options that need another: 0, or 2 after saying which. */
static int check_opts(const struct collector_opts *o)
{
	const char *why = NULL;

	if (o->clickhouse_cluster && !o->clickhouse)
		why = "--clickhouse-cluster needs --clickhouse URL";
	else if (o->ch_writers && !o->clickhouse)
		why = "--clickhouse-writers needs --clickhouse URL (SQLite"
		      " has one writer: one write transaction at a time)";
	else if ((o->ch_linger_set || o->ch_batch) && !o->clickhouse)
		why = "--clickhouse-linger and --clickhouse-batch need"
		      " --clickhouse URL (SQLite commits many batches at once already)";
	if (why)
		fprintf(stderr, "error: %s\n", why);
	return why ? 2 : 0;
}

/*
 * The options of argv into *out (its defaults already there): -1 to go
 * on, else the exit status: 0 when --help printed the manual, 2 after
 * printing why the options are wrong.
 */
static int parse_opts(int argc, char **argv, struct collector_opts *out)
{
	static const struct option lopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "http", required_argument, NULL, 'H' },
		{ "db", required_argument, NULL, 'd' },
		{ "clickhouse", required_argument, NULL, 1001 },
		{ "clickhouse-cluster", required_argument, NULL, 1002 },
		{ "clickhouse-linger", required_argument, NULL, 1009 },
		{ "clickhouse-batch", required_argument, NULL, 1010 },
		{ "clickhouse-writers", required_argument, NULL, 1012 },
		{ "retention", required_argument, NULL, 'r' },
		{ "token", required_argument, NULL, 't' },
		{ "token-file", required_argument, NULL, 'K' },
		{ "insecure", no_argument, NULL, 1004 },
		{ "tls-cert", required_argument, NULL, 1005 },
		{ "tls-key", required_argument, NULL, 1006 },
		{ "tls-client-ca", required_argument, NULL, 1007 },
		{ "tls-client-ca-ports", required_argument, NULL, 1011 },
		{ "parent-tls-ca", required_argument, NULL, 1008 },
		{ "max-body", required_argument, NULL, 'm' },
		{ "ingest-queue", required_argument, NULL, 'Q' },
		{ "otlp-http", required_argument, NULL, 'O' },
		{ "otlp-grpc", required_argument, NULL, 'G' },
		{ "thresholds", required_argument, NULL, 'T' },
		{ "export", required_argument, NULL, 'x' },
		{ "parent", required_argument, NULL, 'P' },
		{ "host", required_argument, NULL, 'n' },
		{ "advertise", required_argument, NULL, 1015 },
		{ "autocomplete-keys", required_argument, NULL, 'A' },
		{ "max-conns", required_argument, NULL, 'C' },
		{ "max-conns-per-peer", required_argument, NULL, 'E' },
		{ "max-memory", required_argument, NULL, 'M' },
		{ "min-free", required_argument, NULL, 1014 },
		{ "allow-other-users", no_argument, NULL, 1003 },
		{ "probe-group", required_argument, NULL, 1013 },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct collector_opts o = *out;
	char err[512];
	int opt, rc = 0;

	optind = 1;
	while (!rc && (opt = getopt_long(argc, argv, "+vh", lopts, NULL)) != -1) {
		switch (opt) {
		case 'l': o.listen = optarg; break;
		case 'H': o.http = optarg; break;
		case 'd': o.db = optarg; break;
		case 1001: o.clickhouse = optarg; break;
		case 1002: o.clickhouse_cluster = optarg; break;
		case 1003: o.allow_other_users = true; break;
		case 1013: o.probe_group = optarg; break;
		case 't': o.token = optarg; break;
		case 'K': o.token_file = optarg; break;
		case 1004: o.insecure = true; break;
		case 1005: o.tls_cert = optarg; break;
		case 1006: o.tls_key = optarg; break;
		case 1007: o.tls_client_ca = optarg; break;
		case 1008: o.parent_tls_ca = optarg; break;
		case 1011:
			if (coll_ports_parse(optarg, &o.tls_client_ca_ports, err, sizeof(err))) {
				fprintf(stderr, "error: --tls-client-ca-ports %s\n", err);
				rc = 2;
			}
			break;
		case 1009: case 1010: case 1012: case 'r':
			rc = store_opt(opt, optarg, &o);
			break;
		case 'm': case 'Q': case 'C': case 'E': case 'M': case 1014:
			rc = limit_opt(opt, optarg, &o);
			break;
		case 'O': o.otlp_http = optarg; break;
		case 'G': o.otlp_grpc = optarg; break;
		case 'T': o.ext.thresholds = optarg; break;
		case 'P': o.parent = optarg; break;
		case 'n': o.host = optarg; break;
		case 1015: o.advertise = optarg; break;
		case 'A': o.autocomplete_keys = optarg; break;
		case 'x':
			if (coll_ext_add_export(&o.ext, optarg, err, sizeof(err))) {
				fprintf(stderr, "error: %s\n", err);
				rc = 2;
			}
			break;
		case 'v': log_set_level(LOG_DEBUG); break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "Run 'fay collector --help' for the manual.\n");
			return 2;
		}
	}
	if (rc)
		return rc;
	if (optind < argc) {
		fprintf(stderr, "error: unexpected argument '%s'\n"
			"Run 'fay collector --help' for the manual.\n", argv[optind]);
		return 2;
	}
	if (o.token && !*o.token)
		o.token = NULL;
	rc = check_opts(&o);
	if (rc)
		return rc;
	*out = o;
	return -1;
}

/* Serve with o until SIGINT or SIGTERM (SIGHUP: collector_reload()):
 * the exit status. */
static int serve(const struct collector_opts *o)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct collector *c;
	sigset_t set, old;
	char err[512];

	/* Threads inherit a blocked SIGINT/SIGTERM; main waits for them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_sigmask(SIG_BLOCK, &set, &old);

	c = collector_start(o, err, sizeof(err));
	if (!c) {
		fprintf(stderr, "error: %s\n", err);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return 1;
	}
	while (!stop_sig) {
		sigsuspend(&old);
		if (hup) {
			hup = 0;
			collector_reload(c);
		}
	}
	pr_info("collector: signal %d, stopping", (int)stop_sig);
	collector_stop(c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

int cmd_collector(int argc, char **argv)
{
	char wire_addr[128], http_addr[128];
	struct collector_opts o = {
		.db = "./fay.db",
		.max_body = 16u << 20,
		.retention_us = 7ull * 86400 * 1000000,
		.max_conns_per_peer = COLL_MAX_CONNS_PER_PEER,
	};
	int rc;

	snprintf(wire_addr, sizeof(wire_addr), "127.0.0.1:%d", FAY_WIRE_DEFAULT_PORT);
	snprintf(http_addr, sizeof(http_addr), "127.0.0.1:%d", FAY_HTTP_DEFAULT_PORT);
	o.listen = wire_addr;
	o.http = http_addr;
	o.token = opt_env_token();
	rc = parse_opts(argc, argv, &o);
	return rc >= 0 ? rc : serve(&o);
}
