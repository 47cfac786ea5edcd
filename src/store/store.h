/* SPDX-License-Identifier: MIT */
/*
 * The span store: the interface the collector (wire ingest, HTTP API) talks
 * to.  Two backends implement it (store/backend.h): SQLite (store/sqlite*.c,
 * the default, a file) and ClickHouse (store/ch*.c, "clickhouse:URL").
 * store__open() picks one; no backend type leaks out of here.
 *
 * Threads: store__writers() writers.  store__write(), store__agent_hello(),
 * store__agent_stats() and store__retain() are the write side: SQLite
 * takes them from one thread at a time (the collector's ingest thread);
 * ClickHouse from up to store__writers() threads at once (it serializes
 * what must be, and lets the INSERTs of different writes overlap).  A
 * caller never has batches of one agent in two writes at once (the
 * collector: a connection has one chain in the store's hands).  Readers
 * are separate objects (store__reader_new()), one per thread at a time,
 * each with its own connection; they see what the writers committed.
 *
 * Where the BlkKin partial records are merged: at insert.  store__write()
 * keeps the parts (table span_parts) and, in the same transaction, rebuilds
 * the Zipkin spans of every span id a batch touched from all of its parts
 * so far (zparts_merge()), so readers only ever see whole Zipkin spans and
 * parts of one span id may arrive in any batch, from any agent.
 */
#ifndef FAY_STORE_STORE_H
#define FAY_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "store/span.h"

struct store;
struct store_reader;
struct store_prep;   /* the backend's (store__prepare()) */

enum store_open_flags {
	STORE_F_READONLY = 1 << 0,  /* never create or migrate; reads only */
};

/*
 * Open (creating when absent) the store at path and bring its schema up to
 * date.  path "clickhouse:URL" is a ClickHouse server's HTTP interface
 * (see store/ch.c for the URL's form); anything else an SQLite file.  A file that is not a fay store (not SQLite, corrupt, another
 * program's database, a newer schema) is never touched: returns NULL,
 * errno set, and a message naming the file in err.
 * Free with store__close().
 */
struct store *store__open(const char *path, unsigned flags, char *err, size_t errlen);
void store__close(struct store *st);
const char *store__path(const struct store *st);

/* Schema version this build writes into an SQLite store (PRAGMA
 * user_version). */
int store__schema_version(void);
/* The backend's name ("sqlite", "clickhouse") and the schema version this
 * build writes in it. */
const char *store__backend(const struct store *st);
int store__backend_schema_version(const struct store *st);

/*
 * Can the backend take writes and answer reads right now?  0, or -errno
 * (-ECONNREFUSED, -ETIMEDOUT, -EIO ...) with the reason in err.  An SQLite
 * store is always healthy; a ClickHouse store asks its server (cheap: a
 * ping, at most every second; on a cluster a count of the Distributed
 * agents table, so that a shard down is unhealthy too).
 */
int store__health(struct store *st, char *err, size_t errlen);

/*
 * One unit of ingest.  agent_id NULL: spans from the HTTP API, stored
 * unconditionally.  Otherwise a wire batch (seq >= 1): stored only when seq
 * is above the agent's last committed seq, together with the new last_seq,
 * in the same transaction.
 */
struct store_batch {
	const char *agent_id;     /* 32 hex digits, or NULL */
	const char *host;         /* agent's host name (may be NULL) */
	uint64_t seq;
	const struct zspan *spans;
	size_t nspans;
	const struct zs_part *parts;
	size_t nparts;
	/* store__prepare()'s work on spans (in the arena it was given), or
	 * NULL: the write does it all */
	const struct store_prep *prep;
	/* results */
	int duplicate;            /* seq <= last_seq: nothing stored */
	size_t stored;            /* spans + parts written */
	size_t dropped;           /* spans not stored: their trace was full (SQLite:
	                           * 2^20 spans a trace, src/store/schema.sql) */
};

/*
 * Write n batches in ONE transaction, committed before this returns 0 (so
 * the caller may acknowledge them).  On failure nothing of any batch is
 * stored: returns -errno (-EBUSY/-ENOSPC/-EIO ...) with a reason in err.
 */
int store__write(struct store *st, struct store_batch **b, size_t n,
		 char *err, size_t errlen);

/*
 * Do the part of store__write()'s work on batch b that needs no write
 * connection on the calling thread (SQLite: each span's extra blob and
 * its Bloom filter terms), so that the writer, which every batch waits
 * for, does less.  What it made is in arena a, and b->prep points to it:
 * keep a until store__write() of b has returned, and do not change b's
 * spans (or set b->spans) in between.  Optional: a batch not prepared
 * (b->prep NULL) is stored exactly the same, byte for byte.  Any thread,
 * any number at once; ClickHouse: nothing.  0, or -ENOMEM (b->prep is
 * then NULL, b still writable).
 */
int store__prepare(struct store *st, struct store_batch *b, struct zarena *a);

/* How many threads may call the write side at once (>= 1; see Threads
 * above). */
unsigned store__writers(const struct store *st);

/* Register an agent's HELLO (host, version, seen now) and return the seq
 * of its last committed batch (0 if none). */
int store__agent_hello(struct store *st, const char *agent_id, const char *host,
		       const char *version, uint64_t *last_seq);
/* Keep the agent's latest STATS JSON text. */
int store__agent_stats(struct store *st, const char *agent_id, const char *json);
/* Last committed seq of an agent, read on the write connection. */
int store__agent_last_seq(struct store *st, const char *agent_id, uint64_t *last_seq);

/*
 * Retention: delete the traces whose every span ended before before_us
 * (traces without timestamps: stored before it), whole traces at a time,
 * about chunk spans (and partial records) in one short transaction.
 * Standing queries' windows that ended before before_us go too (SQLite:
 * in the same chunks; ClickHouse: their day partitions with the spans').
 * Returns how many rows went (spans, parts and windows; an empty trace
 * counts 1; 0: nothing older is left), or -errno.  Call repeatedly so
 * that writers are never held up for long.  When nothing is left, names
 * no span newer than before_us carried are forgotten too.
 */
int store__retain(struct store *st, uint64_t before_us, unsigned chunk);

/*
 * Tell the store the retention (0: keep forever), so that it expires old
 * spans by itself where the backend can: ClickHouse 19.6+ gets a table
 * TTL on spans, span_index, span_parts and query_windows (and 0 removes
 * one, 21.1+);
 * SQLite and older servers nothing (store__retain() does it all).  Call
 * after opening, from the writer's thread.  0, or -errno with a reason in
 * err.
 */
int store__set_retention(struct store *st, uint64_t retention_us, char *err,
			 size_t errlen);

/*
 * Record the values of tags with these keys (Zipkin's autocompleteKeys),
 * for store__autocomplete_values(): from the next store__write() on, with
 * the names' retention.  Keys are copied; n 0 records none (the default).
 * Call from the writer's thread.  0 or -ENOMEM.
 */
int store__set_autocomplete_keys(struct store *st, const char *const *keys, size_t n);

/* ---- the disk watermark (store/disk.c) ---------------------------------- */

/*
 * A full disk must never wedge the store (#20): below a watermark of free
 * space the collector stops taking new spans (agents keep them in their
 * spool, HTTP senders are told to retry), the backend gives back what it
 * can (SQLite: a TRUNCATE checkpoint, so the WAL's copies of pages go),
 * and once the space is back, writes resume by themselves.
 *
 * SQLite: the watermark is on the file system of the database file
 * (statvfs, checked at most every 200 ms as writes come and at every
 * store__disk()): low when the free space is below --min-free, or below
 * what the WAL holds not yet copied into the database (a checkpoint needs
 * that much room); back when
 * it is an eighth above that again.  The default --min-free is the larger
 * of 2% of the file system and twice the WAL's limit (the size at which
 * the writer waits for a RESTART checkpoint: 64 MiB, less on a file
 * system under 2 GiB: store/sqlite_ckpt.c), so the WAL's copy into the
 * database always fits.  A write that fails with SQLITE_FULL makes it low
 * too.
 * ClickHouse: its data directory is not here; a write that the server
 * refuses for want of space (its "No space left on device", "not enough
 * space") makes the disk low, one write a second is let through to find
 * out whether it is over, and the first that succeeds ends it.
 */
struct store_disk {
	int low;                  /* new spans are refused */
	uint64_t total, avail;    /* the store's file system (0: not here) */
	uint64_t min_free;        /* the watermark in force (bytes; 0: none known) */
	char why[256];            /* when low: why, for /health and logs */
};

/* --min-free: bytes, or pct (1 to 99) percent of the file system when
 * pct is not 0; both 0: the default (above).  Call before writing. */
void store__set_min_free(struct store *st, uint64_t bytes, unsigned pct);

/*
 * May new spans be written now?  0, or -ENOSPC with the reason in err
 * ("disk low: ..."): refuse them, retry later.  Checks the disk (above),
 * and when it goes low starts the backend's giving back.  Any thread.
 */
int store__write_gate(struct store *st, char *err, size_t errlen);

/* The disk's state now (checked again unless checked in the last
 * 200 ms).  Any thread. */
void store__disk(struct store *st, struct store_disk *d);

/* The most bytes one span may take in a write (SQLite: its row, its
 * index entries and their WAL frames; ~350 are stored): what a write is
 * charged against the room below until the disk is looked at again. */
#define STORE_SPAN_DISK 1024

/* Bytes that may still be written before the disk is low: the free space
 * above the watermark when last checked, less STORE_SPAN_DISK for each
 * span written since (0 while low), UINT64_MAX when
 * the store's disk is not here (ClickHouse).  A bound for the size of the
 * next write, so that one large write does not fill the room the
 * watermark keeps.  Any thread. */
uint64_t store__write_room(struct store *st);

/* ---- standing-query windows (table query_windows, docs/SQL.md) ---------- */

/* The host of a window's merged answer (a host's own rows name it). */
#define STORE_WINDOW_MERGED "*"

/*
 * One window of a standing query: the merged answer (host
 * STORE_WINDOW_MERGED) or one host's finalized partial answer.  Its key
 * is (name, end_us, host): a window written again (a retry, an amended
 * window, two collectors on one ClickHouse) is one row, the newest
 * written_us winning.
 */
struct store_window {
	const char *name;         /* the standing query: [A-Za-z0-9_]{1,64} */
	uint64_t start_us, end_us;
	const char *host;
	const char *answer;       /* the window as a JSON object (text) */
	uint32_t asked, answered; /* hosts asked, hosts that answered in time */
	const char *missing;      /* JSON array text of the hosts missing ("[]") */
	uint8_t provisional, amended;
	uint64_t written_us;      /* when written (the row's version) */
};

/*
 * Store n windows (at once where the backend can).  Any thread, besides
 * the write side (SQLite: a connection of its own; ClickHouse: one
 * INSERT under its own lock).  0 once stored, or -errno with a reason in
 * err.
 */
int store__put_windows(struct store *st, const struct store_window *w, size_t n,
		       char *err, size_t errlen);

/*
 * Call fn for the last limit windows of query name and host (by end_us),
 * oldest first, one per key (the newest written_us).  name and host must
 * not hold ' or \ (-EINVAL).  Strings are valid during the call only.
 * fn returning non-zero stops (and is returned); 0 or -errno (a reason
 * in err) otherwise.  store/windows.c, through store__sql().
 */
int store__windows(struct store_reader *r, const char *name, const char *host,
		   unsigned limit, int (*fn)(void *ctx, const struct store_window *w),
		   void *ctx, char *err, size_t errlen);

/* ---- shared standing-query definitions (ClickHouse, docs/SQL.md) ------- */

/*
 * A standing query's definition as the store keeps it for every
 * collector on it (tables standing_queries and standing_lease).  Only a
 * store that several collectors share keeps them (store__standing_shared();
 * SQLite: the collector keeps its own beside the file).
 */
struct store_standing {
	const char *name;         /* [A-Za-z0-9_]{1,64} */
	const char *query;        /* FayQL text */
	uint64_t grace_ms, created_ms;
	uint8_t deleted;          /* 1: dropped (the newest row of a name wins) */
};

/* Does st keep standing definitions for several collectors? */
bool store__standing_shared(const struct store *st);
/* Write d as the newest version of its name (a drop: d->deleted).  Any
 * thread.  0, -EOPNOTSUPP (not shared) or -errno with a reason in err. */
int store__standing_put(struct store *st, const struct store_standing *d, char *err,
			size_t errlen);
/* Call fn with the newest version of every name ever defined (dropped
 * ones with deleted set; strings valid during the call).  fn returning
 * non-zero stops (and is returned); 0, -EOPNOTSUPP or -errno (err). */
int store__standing_list(struct store *st, int (*fn)(void *ctx, const struct store_standing *d),
			 void *ctx, char *err, size_t errlen);
/*
 * The lease that names the one collector running the standing queries:
 * holder (a collector's unique id, at most 127 bytes) takes it if no one
 * holds it or its holder let it run out, and keeps it (renewed until
 * now + lease_us) if it is its own; release gives it back at once.
 * Returns 1 when holder holds it after the call, 0 when another does
 * (*who: its id, if who is not NULL), -EOPNOTSUPP or -errno (err).
 * Two takers at once: the newest write wins, the other sees it at its
 * next call.
 */
int store__standing_lease(struct store *st, const char *holder, uint64_t lease_us,
			  bool release, char *who, size_t wholen, char *err, size_t errlen);

/*
 * A collector on a shared store, as it says itself (table collectors):
 * beside the others (not under --parent), each beats every 2 s, so the
 * lease's holder knows whom to ask for their hosts' answers and whose
 * hosts are missing when one stops beating.
 */
struct store_collector {
	const char *id;           /* the address its peers reach it at (HOST:PORT
	                           * of its agent port, --advertise) */
	const char *run;          /* its id in the lease (store__standing_lease()) */
	const char *hosts;        /* its agents' hosts, a JSON array of strings */
	uint64_t beat_us;         /* when it said so (its clock) */
	uint8_t gone;             /* 1: it stopped (cleanly) */
};

/* Write c as the newest row of its id.  Any thread.  0, -EOPNOTSUPP (not
 * shared) or -errno with a reason in err. */
int store__collector_beat(struct store *st, const struct store_collector *c, char *err,
			  size_t errlen);
/* Call fn with the newest row of every collector id ever written (strings
 * valid during the call).  fn returning non-zero stops (and is
 * returned); 0, -EOPNOTSUPP or -errno (err). */
int store__collectors(struct store *st, int (*fn)(void *ctx, const struct store_collector *c),
		      void *ctx, char *err, size_t errlen);

/* ---- reading ------------------------------------------------------------ */

struct store_reader *store__reader_new(struct store *st);   /* NULL + errno */
void store__reader_free(struct store_reader *r);

/* A list of names; strings live in arena. */
struct store_names {
	struct zarena arena;
	struct zs_str *v;
	size_t n;
};

struct store_trace {
	struct zspan *spans;
	size_t n;
	uint64_t ts_us;           /* root's timestamp, else the earliest */
};

/* Traces found; everything lives in arena. */
struct store_traces {
	struct zarena arena;
	struct store_trace *v;
	size_t n, cap;
};

void store_names_free(struct store_names *n);
void store_traces_free(struct store_traces *t);

/* Sorted service names / span names of a service / remote service names
 * of a service.  Returns 0 or -errno. */
int store__services(struct store_reader *r, struct store_names *out);
int store__span_names(struct store_reader *r, const char *service,
		      struct store_names *out);
int store__remote_services(struct store_reader *r, const char *service,
			   struct store_names *out);

/* Sorted distinct values of the tags with this key seen since the key was
 * configured (store__set_autocomplete_keys()); none for other keys.
 * 0 or -errno. */
int store__autocomplete_values(struct store_reader *r, const char *key,
			       struct store_names *out);

/* Append the trace with this id to out if it has spans (1), else 0;
 * -errno on failure. */
int store__trace(struct store_reader *r, uint64_t hi, uint64_t lo,
		 struct store_traces *out);

/* Zipkin's QueryRequest (zipkin2.storage.QueryRequest). */
struct store_query {
	const char *service;          /* lower case, NULL: any */
	const char *remote_service;
	const char *span_name;
	/* annotationQuery: key with value NULL = an annotation value or a tag
	 * key; key=value = that tag. */
	struct { const char *key, *value; } aq[32];
	unsigned naq;
	uint64_t min_duration_us;     /* 0: none */
	uint64_t max_duration_us;     /* 0: none */
	uint64_t end_ts_ms, lookback_ms;
	unsigned limit;
};

/*
 * Parse Zipkin's annotationQuery ("http.method=GET and error") into q,
 * in place in s (which must stay alive as long as q).  Returns 0, or
 * -EINVAL with a reason in err.
 */
int store_query_parse_aq(struct store_query *q, char *s, char *err, size_t errlen);

/* q's window in microseconds, [*begin_us, *end_us], from endTs and
 * lookback (milliseconds), saturated at INT64_MAX: an endTs past
 * INT64_MAX / 1000 ms used to wrap and find nothing, though spans are
 * stored up to INT64_MAX us (#10). */
void store_query_window(const struct store_query *q, uint64_t *begin_us, uint64_t *end_us);

/* Does the trace match q (zipkin2.storage.QueryRequest.test())? */
int store_query_test(const struct store_query *q, const struct zspan *spans, size_t n);

/*
 * The order of a search's answer, the same on every backend (a qsort()
 * comparator of struct store_trace): newest first (ts_us); traces of the
 * same timestamp by trace id, ascending (the first span's trace_hi, then
 * trace_lo), so that equal timestamps neither reorder nor change which
 * traces a limit keeps.
 */
int store_trace_newer(const void *a, const void *b);

/* The trace's timestamp as Zipkin takes it: the root span's, else the
 * earliest.  0 when no span has one. */
uint64_t store_trace_ts(const struct zspan *spans, size_t n);

/* Traces matching q, newest first, at most q->limit.  0 or -errno. */
int store__traces(struct store_reader *r, const struct store_query *q,
		  struct store_traces *out);

/* Totals for /metrics and tests. */
struct store_counts {
	uint64_t spans, parts, agents;
};
int store__counts(struct store_reader *r, struct store_counts *c);

/* ---- ad-hoc SQL (fay sql) ---------------------------------------------- */

/* Where store__sql() sends its answer: the column names once, then each
 * row (values as text, NULL for SQL NULL), valid during the call.  A
 * non-zero return stops and is returned. */
struct store_sql_cb {
	int (*columns)(void *ctx, size_t n, const char *const *names);
	int (*row)(void *ctx, size_t n, const char *const *vals);
	void *ctx;
};

/*
 * Run one statement that only reads, on a read-only connection of its own
 * (SQLite: opened read-only, refused unless sqlite3_stmt_readonly();
 * ClickHouse: the readonly=1 setting).  0, or -EPERM (it would write),
 * -EINVAL (a bad statement), -ECONNREFUSED/-ETIMEDOUT/-EIO, with the
 * store's reason in err.
 */
int store__sql(struct store_reader *r, const char *sql, const struct store_sql_cb *cb,
	       char *err, size_t errlen);

/* The answer as text (store/sql_out.c): pass store_sql_out_columns/_row
 * and an out as the callbacks, then _end() prints what is left (a table
 * is printed at the end, JSON as it comes), _free() frees. */
struct store_sql_out {
	FILE *f;
	int json;                 /* an array of objects; else an aligned table */
	size_t ncols, nrows, cap;
	char **names;
	char ***rows;
};
int store_sql_out_columns(void *ctx, size_t n, const char *const *names);
int store_sql_out_row(void *ctx, size_t n, const char *const *vals);
int store_sql_out_end(struct store_sql_out *o);
void store_sql_out_free(struct store_sql_out *o);

/* ---- scans for the web UI (store/scan.c) -------------------------------- */

/* The summary of one span a dashboard or dependency graph needs.  Strings
 * point into the store's row and are valid during the callback only. */
struct store_row {
	uint64_t trace_hi, trace_lo, id, parent_id;
	uint8_t kind, shared, error;
	struct zs_str service, remote_service, name;
	struct zs_str ipv4, ipv6;   /* the local endpoint's address (len 0: none) */
	uint16_t port;              /* and port (0: none) */
	uint64_t start_us, duration_us;
};

/*
 * Call fn for every span that started in [from_us, to_us), the spans of
 * one trace together (in start order), the traces in no set order.  fn
 * returns 0 to go on; anything else stops the scan and is returned.
 * Returns 0 or -errno.
 */
int store__scan(struct store_reader *r, uint64_t from_us, uint64_t to_us,
		int (*fn)(void *ctx, const struct store_row *row), void *ctx);

/*
 * Call fn for every span of the traces with a span that started in
 * [from_us, to_us] (Zipkin's dependency window: whole traces, even the
 * parts outside it), the spans of traces whose ids share the low 64 bits
 * together (a 128-bit trace and its 64-bit form are one, as Zipkin links
 * them).  fn and the result as for store__scan().
 */
int store__scan_traces(struct store_reader *r, uint64_t from_us, uint64_t to_us,
		       int (*fn)(void *ctx, const struct store_row *row), void *ctx);

/* One row of the agents table (strings valid during the callback). */
struct store_agent {
	const char *id, *host, *version;
	uint64_t last_seq, first_seen_us, last_seen_us, batches, spans;
	const char *stats;          /* latest STATS JSON, NULL if none */
	uint64_t stats_us;
};

/* Call fn for every agent that ever spoke to this store, by id.  fn
 * returning non-zero stops (and is returned); 0 or -errno otherwise. */
int store__agents(struct store_reader *r,
		  int (*fn)(void *ctx, const struct store_agent *a), void *ctx);

#endif
