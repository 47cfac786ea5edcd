/* SPDX-License-Identifier: MIT */
/*
 * Private to the ClickHouse store (src/store/ch*.c).  The schema and the
 * idempotency argument are in store/ch_schema.c and src/store/README.md.
 */
#ifndef FAY_STORE_CH_INT_H
#define FAY_STORE_CH_INT_H

#include <pthread.h>
#include <stdint.h>

#include "common/bytes.h"
#include "store/store.h"

/* ---- the HTTP client (store/ch_http.c, the one file that sees curl) ---- */

struct ch_conn;

enum {
	CH_READONLY = 1 << 0,     /* the readonly=1 setting on every request */
	CH_SYNC_INSERT = 1 << 1,  /* insert_distributed_sync=1: an INSERT into a
				     Distributed table returns once every shard
				     has its rows */
};

/*
 * A connection to the server at url ("http://host:port") using database
 * db for unqualified names.  NULL + errno, a reason in err (libcurl
 * missing, out of memory).  One thread at a time.
 */
struct ch_conn *ch_conn_new(const char *url, const char *db, unsigned flags,
			    char *err, size_t errlen);
void ch_conn_free(struct ch_conn *c);
/* Send the setting name=value (URL-safe text) with every later request
 * of c.  0 or -ENOMEM. */
int ch_conn_setting(struct ch_conn *c, const char *name, const char *value);
/* Give every later request of c the query id "prefix-N", N counting
 * from 1 (system.processes shows who runs what).  0 or -ENOMEM. */
int ch_conn_query_id(struct ch_conn *c, const char *prefix);
#define CH_TIMEOUT_MS 30000     /* a connection's timeout unless set */
/* Give up on a request after ms milliseconds (default CH_TIMEOUT_MS). */
void ch_conn_timeout(struct ch_conn *c, long ms);
/*
 * Run one statement; its whole answer (when out is not NULL) replaces
 * out's bytes.  0, or -errno (-ECONNREFUSED, -ETIMEDOUT, -EIO for an
 * error of the server, whose first line goes to err).
 */
int ch_query(struct ch_conn *c, const char *sql, struct wbuf *out, char *err,
	     size_t errlen);
/* INSERT: the statement ("INSERT INTO t (...) FORMAT RowBinary") and its
 * rows.  0 once the server accepted them, or -errno as ch_query(). */
int ch_insert(struct ch_conn *c, const char *insert, const void *rows, size_t len,
	      char *err, size_t errlen);

/* ---- the schema (store/ch_schema.c) ---- */

#define CH_SCHEMA_VERSION 5

/* Where the tables are: the database, and with a cluster the suffix of
 * the local tables and the cluster's name. */
struct ch_where {
	const char *db;
	const char *cluster;      /* NULL: one node */
};

/*
 * Create the schema on a node (conn), or bring it up to CH_SCHEMA_VERSION
 * (table fay_schema holds the versions applied).  With a cluster: the
 * local tables (*_local) and the Distributed tables over them.  Tables it
 * creates get the codecs and skip indexes of the node's version (logged).
 * A newer schema is refused.  0, or -errno with a reason in err.
 */
int ch_schema_apply(struct ch_conn *c, const struct ch_where *w, char *err,
		    size_t errlen);
/*
 * Make retention_us the TTL of the node's spans, span_index and
 * span_parts (local tables with a cluster) where the server has TTL
 * (CH_FEAT_TTL); 0 removes a TTL set before where it can, else warns.
 * Nothing on a server without TTL.  0 or -errno with a reason in err.
 */
int ch_schema_ttl(struct ch_conn *c, const struct ch_where *w, uint64_t retention_us,
		  char *err, size_t errlen);
/* The server's version and CH_FEAT_* bits (ch_ddl.c), its "SELECT
 * version()".  0 or -errno with a reason in err. */
int ch_server_features(struct ch_conn *c, char *version, size_t vlen, unsigned *feats,
		       char *err, size_t errlen);

/* ---- the migration lock (store/ch_lock.c, the design in its head) ---- */

/* Who holds a migration lock (a row of its table). */
struct ch_holder {
	char holder[96];          /* "HOST pid PID", for the log */
	char boot_id[48];         /* this machine's boot */
	char pidns[48];           /* "pid:[INODE]": its pid namespace */
	unsigned pid;
	unsigned long long start; /* its start time (proc_start_ticks()) */
	char qid[160];            /* the prefix of its query ids */
};

struct ch_lock {
	struct ch_conn *c;
	const struct ch_where *w;
	unsigned gen;             /* DB.fay_migrate_lock_<gen> is ours; 0: none */
	unsigned stale_s;         /* FAY_CH_MIGRATE_STALE_S */
	struct ch_holder me;
};

/*
 * Take the migration lock of the node's database w->db through c (whose
 * later requests carry this process's query ids), waiting while a live
 * collector holds it (logged: whom it waits for) and breaking it when its
 * holder is dead (logged: why).  The caller reads the schema's version
 * again: the last holder may have migrated it.  0 with the lock in *lk,
 * or -errno with a reason in err.
 */
int ch_lock_take(struct ch_lock *lk, struct ch_conn *c, const struct ch_where *w,
		 char *err, size_t errlen);
/*
 * A point of the migration, named point ("locked", "copied", "stepped"):
 * -EBUSY with a reason in err when another collector broke the lock
 * (the holder must stop; the lock is no longer its own, and
 * ch_lock_give() leaves the table alone), -errno when the check fails,
 * else 0.  Test points (tests only, every build): the process SIGKILLs
 * itself there with FAY_CH_TEST_MIGRATE_KILL=POINT, SIGSTOPs itself with
 * FAY_CH_TEST_MIGRATE_STOP=POINT.
 */
int ch_lock_point(struct ch_lock *lk, const char *point, char *err, size_t errlen);
/* Give the lock back (drop its table); a failure is logged.  A lock not
 * held is ignored. */
void ch_lock_give(struct ch_lock *lk);

/* A table of the schema (ch_schema.c): its columns, its MergeTree
 * clause and the Distributed sharding expression. */
struct ch_table {
	const char *name;
	const char *cols;
	const char *engine;
	const char *shard_key;
};

/* The schema's tables as this build creates them (ch_schema.c), n of
 * them. */
const struct ch_table *ch_schema_tables(size_t *n);

/* ---- what the server offers (ch_ddl.c) ---- */

struct ch_version {
	unsigned major, minor;
};

enum {
	CH_FEAT_TTL = 1 << 0,                /* table TTL (19.6) */
	CH_FEAT_SKIP_INDEX = 1 << 1,         /* minmax, bloom_filter (19.8) */
	CH_FEAT_SKIP_EXPERIMENTAL = 1 << 2,  /* ... behind a setting (< 20.1) */
	CH_FEAT_CODECS = 1 << 3,             /* column codecs (19.10) */
	CH_FEAT_REMOVE_TTL = 1 << 4,         /* ALTER TABLE ... REMOVE TTL */
};

/* "18.16.1", "23.8.2.7" (SELECT version()) into v.  0 or -EINVAL. */
int ch_version_parse(const char *s, struct ch_version *v);
/* The CH_FEAT_* bits a server of version v has. */
unsigned ch_features(const struct ch_version *v);
/* "TTL yes, codecs no, skip indexes no" for the log. */
void ch_features_str(unsigned feats, char *buf, size_t len);
/* Append to out the CREATE TABLE IF NOT EXISTS of t (NAME_local with a
 * cluster) with the codecs and skip indexes feats allow. */
void ch_ddl_create(struct wbuf *out, const struct ch_table *t, const struct ch_where *w,
		   unsigned feats);
/* The same, the table named as instead of t->name (a migration's new
 * table, with t's codecs and indexes). */
void ch_ddl_create_as(struct wbuf *out, const struct ch_table *t, const char *as,
		      const struct ch_where *w, unsigned feats);
/* ClickHouse's murmurHash2_64(s) (MurmurHash64A, seed 0): the service and
 * span name keys of span_index, so SQL can compute them too. */
uint64_t ch_murmur64(const void *p, size_t n);
/* Append to out the ALTER TABLE db.table that makes its TTL the
 * retention (0: none).  0, or -EOPNOTSUPP when the server cannot (no
 * TTL; no REMOVE TTL for 0): nothing appended. */
int ch_ddl_ttl(struct wbuf *out, const char *db, const char *table, uint64_t retention_us,
	       unsigned feats);

/* The spans columns, in the order of the RowBinary rows ch.c writes and
 * ch_read.c reads (CH_SPAN_KEY_COLS first). */
#define CH_SPAN_KEY_COLS "trace_hi, trace_lo, id, origin, src, seq, no, ver"
#define CH_SPAN_COLS CH_SPAN_KEY_COLS ", parent_id, kind, name," \
	" local_service, local_ipv4, local_ipv6, local_port," \
	" remote_service, remote_ipv4, remote_ipv6, remote_port," \
	" start_us, duration_us, shared, debug, error," \
	" annotations.ts_us, annotations.value, tags.key, tags.value"

/* A span's row key (what makes a resent row the same row). */
struct ch_key {
	uint64_t trace_hi, trace_lo, id;
	uint8_t origin;           /* 0 received, 1 merged from partial records */
	uint64_t src, seq;        /* agent (hash of its id) and batch seq; HTTP: random, 0 */
	uint32_t no;              /* place in its batch / among the merged spans */
	uint64_t ver;             /* the newest version of a key wins */
};

/* Append a spans row (CH_SPAN_COLS) to w / read one from r into z
 * (strings in a). */
void ch_put_span(struct wbuf *w, const struct ch_key *k, const struct zspan *z);
int ch_get_span(struct rbuf *r, struct zarena *a, struct ch_key *k, struct zspan *z);
/* Compare two keys of n numbers, the first that differs decides. */
static inline int ch_cmp_keys(const uint64_t *a, const uint64_t *b, int n)
{
	for (int i = 0; i < n; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

/* RowBinary numbers, endpoints and strings (ch_row.c). */
void ch_put_le16(struct wbuf *w, uint16_t v);
void ch_put_ep(struct wbuf *w, const struct zs_endpoint *e);
static inline void ch_put_zs(struct wbuf *w, struct zs_str s)
{
	wbuf_uvar(w, s.len);
	wbuf_put(w, s.p, s.len);
}
void ch_put_str(struct wbuf *w, const char *p, size_t n);
int ch_get_str(struct rbuf *r, struct zarena *a, struct zs_str *out);
/* Days since the epoch of a time in microseconds (a Date). */
uint16_t ch_day(uint64_t us);

/* A String into an endpoint (ch_row.c). */
int ch_get_ep(struct rbuf *r, struct zarena *a, struct zs_endpoint *e);

/* ---- the store (ch.c, ch_write.c, ch_read.c) ---- */

#define CH_NAME_SLOTS 4096
#define CH_NAME_WAYS 4        /* the slots a name may be in, in a row */
/* A name's last_us is rewritten when a span is this much newer. */
#define CH_NAME_SLACK_US 60000000ull
/* The health answer is cached this long. */
#define CH_HEALTH_EVERY_US 1000000ull

struct ch_agent {
	char id[40];
	char *host, *version, *stats;
	uint64_t last_seq, first_seen_us, last_seen_us, batches, spans, stats_us;
	uint64_t new_seq, new_batches, new_spans;   /* the write under way */
	int touched;
};

/* INSERTs of one write sent at once, each on a connection of its own
 * (spans, span_index, names: ch_write.c).  Splitting a table's rows over
 * more INSERTs was tried: more parts, more merging, more server CPU
 * (bench/RESULTS.md). */
#define CH_PAR 3

/* The largest row buffer kept between writes (see ch_slot.keep). */
#define CH_KEEP_ROWS_MAX (32u << 20)

/* Writes that may be under way at once (store__writers()): each has a
 * slot, the connections of its parallel INSERTs and its row buffers. */
#define CH_WRITERS 4

struct ch_slot {
	struct ch_conn *c[CH_PAR];
	/* The row buffers of the slot's last write (spans, span_index,
	 * names, span_parts), emptied and kept for the next one up to
	 * CH_KEEP_ROWS_MAX bytes each: a 50 000-span write is ~15 MB of
	 * rows, and fresh buffers cost a page fault every 4 KiB (a sixth
	 * of the writer's CPU in a profile). */
	struct wbuf keep[4];
	int busy;
};

/*
 * Writers: what every write shares (st->c, the agents and names caches,
 * the merge arena, now_us, the slots' busy flags) is used under wlock; a
 * write holds it to make its rows and store the partial records, lets it
 * go for its data INSERTs (on its slot's connections), and takes it again
 * for its agents' rows (ch_agent.c).  wcv: an agent or a slot came free.
 */
struct store_be {
	struct ch_conn *c;            /* the write side's, under wlock */
	struct ch_slot slot[CH_WRITERS];
	pthread_mutex_t wlock;
	pthread_cond_t wcv;
	char *url;                    /* what followed "clickhouse:" */
	char **urls;                  /* each server listed */
	size_t nurls;
	struct ch_where w;
	char db[64];
	char *cluster;
	unsigned flags;
	uint64_t now_us;
	struct ch_agent **agents;     /* each allocated on its own */
	size_t nagents;
	struct { uint64_t h, last_us; } names[CH_NAME_SLOTS];
	struct zarena merge_arena;
	char **ac_keys;               /* --autocomplete-keys: one block, NULL-ended */
	size_t nac_keys;
	int retained;                 /* retention dropped days since names were pruned */
	/* Test point (tests only, every build): FAY_CH_TEST_KILL_FILE=PATH:
	 * once PATH exists, the next write removes it and SIGKILLs the
	 * process after ClickHouse accepted its data INSERTs, before the
	 * agents' seq row and the ACKs: the agents must resend batches the
	 * store already has (tests/integration/clickhouse_cluster_kill.sh) */
	char *test_kill_file;
	/* store__put_windows(): its own connection, any thread (ch_windows.c) */
	pthread_mutex_t qlock;
	struct ch_conn *qc;
	/* health: its own connection, any thread */
	pthread_mutex_t hlock;
	struct ch_conn *hc;
	uint64_t health_us;
	int health_ret;
	char health_err[256];
};


/* Append printf-style text to a statement being built (ch_read.c). */
void ch_sql_add(struct wbuf *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* FNV-1a of n bytes, continuing from h. */
uint64_t ch_hash(const void *p, size_t n, uint64_t h);

#define CH_AGENT_COLS "agent_id, host, version, last_seq, first_seen_us, last_seen_us," \
	" batches, spans, has_stats, stats, stats_us, ver"
/* The agent's row: from the cache, else from the server (a new agent
 * when it has none).  NULL + errno, a reason in err. */
struct ch_agent *ch_agent_get(struct store_be *st, const char *id, char *err,
			      size_t errlen);
/* Start a write (new_* from the committed values) / make it the agent's
 * committed state. */
void ch_agent_begin(struct ch_agent *a);
void ch_agent_commit(struct ch_agent *a, uint64_t now_us);
/* Replace the agent's host name.  0 or -ENOMEM. */
int ch_agent_host(struct ch_agent *a, const char *host);
/* The agents row (CH_AGENT_COLS) of a's state after the write under way. */
void ch_put_agent(struct wbuf *w, const struct ch_agent *a, uint64_t now_us);
/* Under st->wlock: wait until no write under way has an agent of b. */
void ch_agents_wait(struct store_be *st, struct store_batch **b, size_t n);
/* Forget every cached agent. */
void ch_agents_free(struct store_be *st);

/* The ClickHouse backend's ops (store/backend.h; contracts in store.h). */
struct store_be *ch__open(const char *where, unsigned flags, char *err, size_t errlen);
void ch__close(struct store_be *st);
int ch__health(struct store_be *st, char *err, size_t errlen);
int ch__write(struct store_be *st, struct store_batch **b, size_t n,
	      char *err, size_t errlen);
int ch__agent_hello(struct store_be *st, const char *agent_id, const char *host,
		    const char *version, uint64_t *last_seq);
int ch__agent_stats(struct store_be *st, const char *agent_id, const char *json);
int ch__agent_last_seq(struct store_be *st, const char *agent_id, uint64_t *last_seq);
int ch__retain(struct store_be *st, uint64_t before_us, unsigned chunk);
int ch__put_windows(struct store_be *st, const struct store_window *w, size_t n,
		    char *err, size_t errlen);	/* ch_windows.c */
/* shared standing definitions and their lease (ch_standing.c) */
int ch__standing_put(struct store_be *st, const struct store_standing *d, char *err,
		     size_t errlen);
int ch__standing_list(struct store_be *st, int (*fn)(void *ctx, const struct store_standing *d),
		      void *ctx, char *err, size_t errlen);
int ch__standing_lease(struct store_be *st, const char *holder, uint64_t lease_us,
		       bool release, char *who, size_t wholen, char *err, size_t errlen);
int ch__collector_beat(struct store_be *st, const struct store_collector *c, char *err,
		       size_t errlen);
int ch__collectors(struct store_be *st, int (*fn)(void *ctx, const struct store_collector *c),
		   void *ctx, char *err, size_t errlen);
int ch__set_retention(struct store_be *st, uint64_t retention_us, char *err,
		      size_t errlen);
struct store_rd *ch__reader_new(struct store_be *st);
/* The store a reader reads (ch_read.c). */
struct store_be *ch_reader_store(struct store_rd *r);
int ch__set_autocomplete_keys(struct store_be *st, const char *const *keys, size_t n);
int ch__autocomplete_values(struct store_rd *r, const char *key, struct store_names *out);
int ch__sql(struct store_rd *r, const char *sql, const struct store_sql_cb *cb,
	    char *err, size_t errlen);      /* ch_sql.c */
void ch__reader_free(struct store_rd *r);
int ch__services(struct store_rd *r, struct store_names *out);
int ch__span_names(struct store_rd *r, const char *service, struct store_names *out);
int ch__remote_services(struct store_rd *r, const char *service,
			struct store_names *out);
int ch__trace(struct store_rd *r, uint64_t hi, uint64_t lo, struct store_traces *out);
int ch__traces(struct store_rd *r, const struct store_query *q, struct store_traces *out);
int ch__counts(struct store_rd *r, struct store_counts *c);
int ch__scan(struct store_rd *r, uint64_t from_us, uint64_t to_us,
	     int (*fn)(void *ctx, const struct store_row *row), void *ctx);
int ch__scan_traces(struct store_rd *r, uint64_t from_us, uint64_t to_us,
		    int (*fn)(void *ctx, const struct store_row *row), void *ctx);
int ch__agents(struct store_rd *r,
	       int (*fn)(void *ctx, const struct store_agent *a), void *ctx);

#endif
