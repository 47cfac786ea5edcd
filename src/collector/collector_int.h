/* SPDX-License-Identifier: MIT */
/*
 * fay collector internals: the state shared by the wire server, the HTTP
 * API and the ingest (writer) thread (collector.h is the public API).
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
#ifndef FAY_COLLECTOR_COLLECTOR_INT_H
#define FAY_COLLECTOR_COLLECTOR_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "collector/collector.h"
#include "common/budget.h"
#include "store/store.h"

struct ingest;
struct coll_ext;
struct crules;
struct caplog;

/* The collector's one set of counters: bumped and read with M_ADD(),
 * M_SUB(), M_GET() (relaxed atomics), written to /metrics by
 * coll_metrics_write() from its one table (metrics.c). */
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
	uint64_t queries_running;    /* gauge: POST /api/query running now */
	uint64_t queries_total, queries_refused, queries_busy;
	uint64_t otlp_requests, otlp_spans, otlp_rejected; /* HTTP and gRPC */
	uint64_t otlp_spans_rejected, otlp_throttled;
	uint64_t ui_requests;        /* web UI files served */
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
	struct caplog *caplog;	/* DIR/captures.jsonl (capture_log.c) */

	pthread_mutex_t readers_lock;
	struct store_reader *readers[8];
	int nreaders;

	/* Web UI, OTLP, exporters, /api/query (ext_http.h); NULL: none. */
	struct coll_ext *ext;
	/* Cluster queries: query connections, fan-out, merge (cluster.h). */
	struct cluster *cluster;
	/* Standing cluster queries, /metrics series (standing.h). */
	struct standing *standing;
	/* Capture rules (capture_rules.h), started after the rest. */
	struct crules *rules;
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

/* malloc arenas at most (common/heap.h; MALLOC_ARENA_MAX overrides). */
#define COLL_MALLOC_ARENAS 4
/* An agent-port connection must send HELLO this soon, and finish a frame
 * it began this soon (in all, however it trickles). */
#define COLL_HELLO_MS 10000
#define COLL_FRAME_MS 30000
/* The largest frame the agent port takes before a HELLO was accepted (and
 * its token checked): what a HELLO needs (#20), so an unauthenticated
 * client cannot make the collector hold a 16 MiB frame. */
#define COLL_PRE_HELLO_MAX (64u << 10)

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
/* Load the captures DIR/captures.jsonl lists into c->captures (those of
 * a follow the last run did not finish marked so), rewrite it compacted
 * and keep it open for caplog_put() (capture_log.c); DIR is made when
 * absent.  0, or
 * -errno with the reason in err. */
int caplog_open(struct collector *c, const char *dir, char *err, size_t errlen);
/* Close it.  Accepts a collector without one. */
void caplog_close(struct collector *c);
void coll_agents_free(struct collector *c);
/* The counters, the memory budget, the store's and the agents' lines of
 * /metrics, written to f (common/prom.h). */
void coll_metrics_write(struct collector *c, FILE *f);

/* ---- ingest.c ----------------------------------------------------------- */

/* Start c->writers writer threads (at least one) over c->store.  NULL +
 * errno. */
struct ingest *ingest_new(struct collector *c);
/* Stop (finishing queued work) and free. */
void ingest_free(struct ingest *in);
/* Queue b and wait until it is committed (0) or failed (-errno, reason
 * in err).  Any thread; b is an HTTP or gRPC sender's (not an agent's:
 * ingest_write_chain()), which the store's linger counts by how many
 * were queued at once lately (ingest.c). */
int ingest_write(struct ingest *in, struct store_batch *b, char *err, size_t errlen);
/*
 * Queue the n (1..64) batches of b, in order, to be written in ONE store
 * write (never split over two: all are committed or none), and wait for
 * it: 0, or -errno with the reason in err for all of them.  An agent
 * connection's batches read ahead (wire_batch.c); the store's linger
 * counts them by the connected agents.
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
