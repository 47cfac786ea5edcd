/* SPDX-License-Identifier: MIT */
/*
 * fay collector: what `fay collector` (src/cli/cmd_collector.c) calls --
 * its options and their defaults, start, stop and reload.  The state the
 * collector's parts share is in collector_int.h (private to
 * src/collector/).
 */
#ifndef FAY_COLLECTOR_COLLECTOR_H
#define FAY_COLLECTOR_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct collector;

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

#define EXT_MAX_EXPORTS 8
/* What `fay collector` options configure in the modules around the core
 * (ext_http.h). */
struct coll_ext_opts {
	const char *thresholds;         /* --thresholds FILE, NULL: DB.thresholds.json */
	const char *db;                 /* the store's path (collector_start sets it) */
	const char *exports[EXT_MAX_EXPORTS];   /* --export KIND=URL */
	int nexports;
};

/*
 * Add one --export argument ("zipkin=URL", "otlp=URL", "otlp-protobuf=URL") to o.  Returns 0,
 * or -EINVAL with the reason in err (unknown kind, not http(s)://, too
 * many).
 */
int coll_ext_add_export(struct coll_ext_opts *o, const char *arg,
			char *err, size_t errlen);

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
	/* --advertise HOST:PORT: the agent port as collectors beside this one
	 * on a shared store reach it (NULL: --listen's, the host name for a
	 * wildcard address) */
	const char *advertise;
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
 * SIGHUP: read --token-file and the TLS files (--tls-cert, --tls-key,
 * --tls-client-ca) again.  New requests, HELLOs and handshakes use what
 * was read; connections already open keep their session.  A file that
 * cannot be used leaves that part as it was; each outcome is logged
 * ("reload: ..." with the reason).  Returns 0 when everything was taken,
 * -errno when a part was refused.
 */
int collector_reload(struct collector *c);

#endif
