/* SPDX-License-Identifier: MIT */
/*
 * fay collector internals: the state shared by the wire server, the HTTP
 * API and the ingest (writer) thread.
 *
 *   wire_server.c  TCP 9410: agents' HELLO / BATCH / STATS, ACK after commit
 *   http.c         HTTP 9411: Zipkin v2 API, /health, /metrics (libmicrohttpd);
 *                  also --otlp-http 4318 (POST /v1/traces alone)
 *   otlp_grpc.c    --otlp-grpc 4317: OTLP/gRPC over HTTP/2 (nghttp2);
 *                  its listener and connection threads in otlp_grpc_conn.c
 *   ingest.c       the store's writer threads (one on SQLite, --clickhouse-
 *                  writers on ClickHouse): a queue of batches, group commit,
 *                  retention
 *   zjson.c        Zipkin v2 JSON <-> struct zspan (jansson)
 *   metrics.c      counters, per-agent state, Prometheus text
 */
#ifndef FAY_COLLECTOR_COLLECTOR_H
#define FAY_COLLECTOR_COLLECTOR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/budget.h"
#include "store/store.h"

struct ingest;
struct coll_ext;

/* Counters (relaxed atomics; read for /metrics). */
struct coll_metrics {
	uint64_t spans_received;     /* records in wire batches + spans POSTed */
	uint64_t spans_stored;       /* whole spans and partial records committed */
	uint64_t spans_rejected;     /* records that failed to decode, bad POST bodies */
	uint64_t spans_duplicate;    /* records of duplicate batches (not stored again) */
	uint64_t batches;            /* wire batches committed (not duplicates) */
	uint64_t batches_duplicate;
	uint64_t batches_nacked;     /* store failed: the agent resends */
	uint64_t wire_errors;        /* ERROR frames sent (protocol violations) */
	uint64_t agent_id_clashes;   /* HELLOs refused: the id is connected elsewhere */
	uint64_t seq_jumps;          /* BATCHes refused: seq far past the last */
	uint64_t wire_timeouts;      /* connections closed: no HELLO, or a frame too slow */
	uint64_t wire_busy;          /* connections closed: --max-memory taken */
	uint64_t wire_peer_refused;  /* connections refused: --max-conns-per-peer */
	uint64_t http_busy;          /* bodies refused 503: --max-memory taken */
	uint64_t conn_busy;          /* connections refused at accept: --max-memory taken */
	uint64_t wire_connections;   /* accepted, total */
	uint64_t agents_connected;   /* gauge: HELLO done, connection open */
	uint64_t http_requests;
	uint64_t http_bad_requests;  /* 4xx answers */
	uint64_t http_spans_dropped; /* spans in POST bodies refused (400/413/...) */
	uint64_t store_errors;
	uint64_t store_writes;       /* store__write()s of batches (groups) committed */
	uint64_t store_writes_overlapped; /* ... started while another was under way */
	uint64_t retention_deleted;
	uint64_t disk_low_refused;   /* writes of spans refused: the disk is low */
};

#define M_ADD(c, field, v) __atomic_add_fetch(&(c)->m.field, (v), __ATOMIC_RELAXED)
#define M_SUB(c, field, v) __atomic_sub_fetch(&(c)->m.field, (v), __ATOMIC_RELAXED)
#define M_GET(c, field)    __atomic_load_n(&(c)->m.field, __ATOMIC_RELAXED)

/* What the collector knows of one agent (for /metrics and a Hosts page). */
struct coll_agent {
	char id[33];
	char host[256];
	char version[64];
	char peer[64];               /* address of its connection */
	int connected;               /* open connections of this agent */
	int conn_fd;                 /* the newest of them */
	char session[33];            /* its HELLO's session ("" none) */
	uint64_t batches, spans, rejected, duplicates;
	uint64_t last_seq;
	uint64_t last_seen_us;
	char *stats;                 /* latest STATS JSON, malloc'ed */
	struct coll_agent *next;
};

/* What a token allows (--token-file; auth.c): a route or a frame needs one. */
enum coll_scope {
	COLL_SCOPE_READ  = 1u << 0,     /* query API, UI, /api/v2 reads, /api/sql */
	COLL_SCOPE_WRITE = 1u << 1,     /* ingest: Zipkin, OTLP, agents' batches */
	COLL_SCOPE_PROBE = 1u << 2,     /* /api/query, cluster queries: load BPF */
};

struct tls_conf;

struct collector {
	struct store *store;
	struct ingest *ingest;
	const char *token;           /* NULL: none (--token: our own, to --parent) */
	struct auth *auth;           /* who may do what (auth.h) */
	struct tls_conf *tls;        /* --tls-cert: every port speaks TLS (NULL: none) */
	/* What SIGHUP reads again (collector_reload()); NULL: not given. */
	const char *token_file, *tls_cert, *tls_key, *tls_client_ca;
	unsigned mtls_ports;         /* COLL_PORT_*: those where a client must present
					a certificate --tls-client-ca signed */
	struct tls_conf *parent_tls; /* --parent-tls-ca: TLS to --parent (NULL: none) */
	size_t max_body;
	size_t ingest_queue;         /* spans waiting for the store before
					HTTP/gRPC senders are told to retry */
	uint64_t write_linger_ns;    /* ingest.c's linger (0: none) */
	size_t write_batch;          /* ... until this many spans wait */
	unsigned writers;            /* ingest writer threads (1 with SQLite) */
	uint64_t retention_us;
	struct coll_metrics m;
	uint64_t started_us;
	int gate;                    /* atomic: 0 starting, 1 serving, -1 stopping
					(coll_gate_wait()) */

	pthread_mutex_t agents_lock;
	struct coll_agent *agents;

	/* The captures made since the start (api_capture.c), newest first:
	 * a jansson array, under captures_lock. */
	pthread_mutex_t captures_lock;
	void *captures;
	uint64_t ncaptures;

	pthread_mutex_t readers_lock;
	struct store_reader *readers[8];
	int nreaders;

	/* Web UI, OTLP, exporters, /api/query (ext.h); NULL: none. */
	struct coll_ext *ext;
	/* Cluster queries: query connections, fan-out, merge (cluster.h). */
	struct cluster *cluster;
	/* Standing cluster queries, /metrics series (standing.h). */
	struct standing *standing;
	/* --autocomplete-keys, in the order given (api_zipkin.c). */
	char **ac_keys;
	size_t nac_keys;
	/* --max-memory: what peers make the collector hold at once (frames
	 * in flight on the agent port, HTTP bodies being received). */
	struct mem_budget mem;
	bool allow_other_users;      /* collector_opts.allow_other_users */
	/* --probe-group: its members may probe everything (requester.h) */
	bool has_probe_group;
	gid_t probe_gid;
	char probe_group[64];
	/* without tokens: the probe token and its file (requester.h) */
	char probe_token[65];
	char probe_token_path[4200];
};

/* ---- collector.c: the whole service ------------------------------------ */

/*
 * What one connection costs against --max-memory, on every port: taken
 * when it is accepted, given back when it closes; a connection that does
 * not fit is turned away at once (agent port: an ERROR "busy" frame; HTTP
 * and OTLP/gRPC: closed), counted in conn_busy.  COLL_CONN_MEM: its
 * thread's touched stack, the protocol's buffers and the library's state
 * (libmicrohttpd's 32 KiB pool, an nghttp2 session); COLL_CONN_TLS_MEM
 * more for TLS (the session's record buffers, the pump's two 16 KiB
 * buffers and its thread).  Measured with bench/hostile_mem --idle
 * (bench/RESULTS.md): 15-30 KiB and 40-72 KiB idle.
 */
#define COLL_CONN_MEM     (64u << 10)
#define COLL_CONN_TLS_MEM (64u << 10)
/* The cost of one connection of c (with its TLS when c has TLS). */
size_t coll_conn_mem(const struct collector *c);

#define EXT_MAX_EXPORTS 8
/* malloc arenas at most (common/heap.h; MALLOC_ARENA_MAX overrides). */
#define COLL_MALLOC_ARENAS 4
/* Spans waiting for the store past which OTLP senders get 429/UNAVAILABLE. */
#define COLL_INGEST_QUEUE 100000
/* OTLP/HTTP's default address (the OpenTelemetry SDKs' default endpoint). */
#define COLL_OTLP_HTTP_DEFAULT "127.0.0.1:4318"
#define COLL_OTLP_GRPC_DEFAULT "127.0.0.1:4317"

/* The ports, as --tls-client-ca-ports names them (bits). */
#define COLL_PORT_AGENT     1u
#define COLL_PORT_HTTP      2u
#define COLL_PORT_OTLP_HTTP 4u
#define COLL_PORT_OTLP_GRPC 8u
#define COLL_PORTS_ALL      15u
/* "agent,http,otlp-http,otlp-grpc" (a comma-separated subset) as bits in
 * *ports: 0, or -EINVAL naming the word not understood in err. */
int coll_ports_parse(const char *list, unsigned *ports, char *err, size_t errlen);

/* What `fay collector` options configure in ext.h's extensions. */
struct coll_ext_opts {
	const char *thresholds;         /* --thresholds FILE, NULL: DB.thresholds.json */
	const char *db;                 /* the store's path (collector_start sets it) */
	const char *exports[EXT_MAX_EXPORTS];   /* --export KIND=URL */
	int nexports;
};

struct collector_opts {
	const char *listen;          /* agent protocol address (net_parse_addr) */
	const char *http;            /* HTTP address */
	const char *otlp_http;       /* --otlp-http: NULL the default, "off" none */
	const char *otlp_grpc;       /* --otlp-grpc: NULL the default, "off" none */
	const char *db;              /* the SQLite store; with clickhouse, where the
					collector's own files go (PATH.queries ...) */
	const char *clickhouse;      /* NULL, or the ClickHouse store: URL[,URL...] */
	const char *clickhouse_cluster;  /* NULL, or the cluster of its tables */
	const char *token;           /* NULL: none */
	const char *token_file;      /* --token-file: tokens and scopes (auth.h) */
	bool insecure;               /* --insecure: no token on a non-loopback address */
	const char *tls_cert, *tls_key; /* --tls-cert, --tls-key (PEM files) */
	const char *tls_client_ca;   /* --tls-client-ca: clients must present a cert */
	unsigned tls_client_ca_ports; /* --tls-client-ca-ports: where (COLL_PORT_*);
					0: every port */
	const char *parent_tls_ca;   /* --parent-tls-ca: the parent's CA (TLS to it) */
	size_t max_body;
	size_t ingest_queue;         /* --ingest-queue SPANS (0: the default) */
	/* --clickhouse-linger, --clickhouse-batch (ingest.c); unset: the
	 * defaults below with ClickHouse, no linger with SQLite */
	uint64_t ch_linger_ns;
	bool ch_linger_set;
	size_t ch_batch;             /* 0: the default */
	unsigned ch_writers;         /* --clickhouse-writers (0: the default) */
	uint64_t retention_us;       /* 0: keep forever */
	/* --min-free: bytes, or a percentage of the store's file system;
	 * both 0: the store's default (store.h, the disk watermark) */
	uint64_t min_free;
	unsigned min_free_pct;
	struct coll_ext_opts ext;
	const char *parent;          /* --parent HOST:PORT: an intermediate aggregator */
	const char *host;            /* our name to the parent (NULL: gethostname) */
	const char *autocomplete_keys;  /* "k1,k2": tags whose values are kept */
	unsigned max_conns;          /* agent-port connections (0: COLL_MAX_CONNS) */
	unsigned max_conns_per_peer; /* from one address (0: no cap) */
	uint64_t max_memory;         /* bytes (0: COLL_MAX_MEMORY) */
	/* --allow-other-users: /api/query probes every user's processes even
	 * when the collector runs as a non-root user (engine.h,
	 * engine_opts_requester()) */
	bool allow_other_users;
	/* --probe-group NAME: without tokens, local users of this group may
	 * load probes as root may (requester.h); NULL: none */
	const char *probe_group;
};

/* Defaults of --clickhouse-linger (as printed) and --clickhouse-batch. */
#define COLL_CH_LINGER_DEFAULT "100ms"
#define COLL_CH_LINGER_DEFAULT_NS 100000000ull
#define COLL_CH_BATCH_DEFAULT 50000u
/* Default --clickhouse-writers: two, one preparing a write while the
 * other's INSERTs run (bench/RESULTS.md). */
#define COLL_CH_WRITERS_DEFAULT 2u

/* Default --max-conns: an agent holds two connections (spans, queries). */
#define COLL_MAX_CONNS 8192
/* Default --max-conns-per-peer and --max-memory. */
#define COLL_MAX_CONNS_PER_PEER 256
#define COLL_MAX_MEMORY (1ull << 30)
/* Without --max-memory: half of what the collector may use (its cgroups'
 * memory limits, else MemTotal: common/memlimit.h), at most
 * COLL_MAX_MEMORY and at least COLL_MIN_MEMORY (#20). */
#define COLL_MIN_MEMORY (32ull << 20)
/* An agent-port connection must send HELLO this soon, and finish a frame
 * it began this soon (in all, however it trickles). */
#define COLL_HELLO_MS 10000
#define COLL_FRAME_MS 30000
/* The largest frame the agent port takes before a HELLO was accepted (and
 * its token checked): what a HELLO needs (#20), so an unauthenticated
 * client cannot make the collector hold a 16 MiB frame. */
#define COLL_PRE_HELLO_MAX (64u << 10)

/*
 * Open the store, start the writer thread, the extensions, the agent
 * listener and the HTTP API.  Call with SIGINT/SIGTERM blocked if the
 * caller waits for them (threads inherit the mask).  Returns the running
 * collector, or NULL with errno set and the reason in err (which option
 * or file is wrong).  collector_stop() finishes what is in flight (every
 * batch handed to the writer is committed and acknowledged) and frees it.
 * The strings of o must outlive the collector.
 */
struct collector *collector_start(const struct collector_opts *o, char *err, size_t errlen);
void collector_stop(struct collector *c);

/*
 * For every listener's connection (or new HTTP request) before it is
 * served: wait until collector_start() has finished (every listener open,
 * the exposure checked, the standing queries loaded), so that nothing is
 * answered -- /health included -- by a collector that is not whole yet or
 * that will refuse to run (a non-loopback address without a token).
 * 1: serve it; 0: the collector is stopping (or its start failed): close
 * it unserved.
 */
int coll_gate_wait(struct collector *c);
/*
 * SIGHUP: read --token-file and the TLS files (--tls-cert, --tls-key,
 * --tls-client-ca) again.  New requests, HELLOs and handshakes use what
 * was read; connections already open keep their session.  A file that
 * cannot be used leaves that part as it was; each outcome is logged
 * ("reload: ..." with the reason).  Returns 0 when everything was taken,
 * -errno when a part was refused.
 */
int collector_reload(struct collector *c);

/* ---- readers.c ---------------------------------------------------------- */

/* A reader from the pool (or a new one); give it back with coll_reader_put. */
struct store_reader *coll_reader_get(struct collector *c);
void coll_reader_put(struct collector *c, struct store_reader *r);

/* ---- metrics.c ---------------------------------------------------------- */

/* Find or create the agent (locked inside).  Callers change fields under
 * c->agents_lock. */
struct coll_agent *coll_agent_get(struct collector *c, const char *id);
/* The list of captures (api_capture.c), at the collector's end. */
void api_captures_free(struct collector *c);
void coll_agents_free(struct collector *c);
/* Prometheus text exposition of the counters; malloc'ed, NULL on ENOMEM. */
char *coll_metrics_text(struct collector *c, size_t *len);

/* ---- ingest.c ----------------------------------------------------------- */

/* Start c->writers writer threads (at least one) over c->store.  NULL +
 * errno. */
struct ingest *ingest_new(struct collector *c);
/* Stop (finishing queued work) and free. */
void ingest_free(struct ingest *in);
/* Queue b and wait until it is committed (0) or failed (-errno, reason
 * in err).  Any thread. */
int ingest_write(struct ingest *in, struct store_batch *b, char *err, size_t errlen);
/*
 * Queue the n (1..64) batches of b, in order, to be written in ONE store
 * write (never split over two: all are committed or none), and wait for
 * it: 0, or -errno with the reason in err for all of them.  An agent
 * connection's batches read ahead (wire_batch.c).
 */
int ingest_write_chain(struct ingest *in, struct store_batch **b, size_t n, char *err,
		       size_t errlen);
/*
 * The same for senders that can retry later (OTLP over HTTP and gRPC):
 * when the spans already waiting for the store plus b's would pass
 * c->ingest_queue, nothing is queued and -EAGAIN comes back at once
 * ("ingest queue full ..." in err).  A batch is taken whenever the queue
 * is empty, however large.
 */
int ingest_try_write(struct ingest *in, struct store_batch *b, char *err, size_t errlen);
/* Spans submitted and not yet committed or failed (a gauge). */
size_t ingest_queued(struct ingest *in);
int ingest_hello(struct ingest *in, const char *agent_id, const char *host,
		 const char *version, uint64_t *last_seq);
int ingest_stats(struct ingest *in, const char *agent_id, const char *json);

/* ---- wire_server.c ------------------------------------------------------ */

struct wire_server;
/* Listen on addr; at most max_conns connections at once (more are
 * refused with a reason the peer logs). */
struct wire_server *wire_server_new(struct collector *c, const char *addr, unsigned max_conns,
				    unsigned max_per_peer, char *err, size_t errlen);
void wire_server_free(struct wire_server *ws);
/* The address it listens on. */
const char *wire_server_addr(const struct wire_server *ws);

/* ---- http.c ------------------------------------------------------------- */

struct http_server;
/*
 * Listen on addr and serve the HTTP API (Zipkin, UI, OTLP, queries), or
 * with otlp_only POST /v1/traces alone (--otlp-http).  NULL + errno
 * (EADDRINUSE when the port is taken) with the reason in err.
 */
struct http_server *http_server_new(struct collector *c, const char *addr, int otlp_only,
				    char *err, size_t errlen);
void http_server_free(struct http_server *hs);
const char *http_server_addr(const struct http_server *hs);

/* ---- otlp_grpc_conn.c --------------------------------------------------- */

struct otlp_grpc;
/*
 * Listen on addr for OTLP/gRPC (HTTP/2 cleartext, TraceService/Export) and
 * serve it on threads of its own.  NULL + errno (EADDRINUSE when the port
 * is taken) with the reason in err.  otlp_grpc_free() stops accepting and
 * waits for the connections' threads (each notices within 200 ms).
 */
struct otlp_grpc *otlp_grpc_new(struct collector *c, const char *addr, char *err, size_t errlen);
void otlp_grpc_free(struct otlp_grpc *g);
/* The address it listens on. */
const char *otlp_grpc_addr(const struct otlp_grpc *g);

#endif
