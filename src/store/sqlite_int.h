/* SPDX-License-Identifier: MIT */
/* Private to the SQLite store (src/store/sqlite*.c, schema.c). */
#ifndef FAY_STORE_SQLITE_INT_H
#define FAY_STORE_SQLITE_INT_H

#include <pthread.h>

#include "store/span.h"

struct store_rd;

/* src/store/schema.sql, NUL-terminated (src/store/schema.c). */
extern const char store_schema_sql[];

#define STORE_APP_ID         0x46415953  /* "FAYS" */
#define STORE_SCHEMA_VERSION 5

struct store_query;
struct store_be;
struct store_rd;
struct store_batch;
struct store_names;
struct store_traces;
struct store_counts;
struct store_row;
struct store_agent;
struct store_sql_cb;
struct store_window;

/* The SQLite backend's ops (store/backend.h; contracts in store.h).
 * sqlite.c: opening; sqlite_write.c, sqlite_batch.c: writing; sqlite_read.c,
 * scan.c: reading. */
struct store_be *sq__open(const char *path, unsigned flags, char *err, size_t errlen);
void sq__close(struct store_be *st);
const char *sq__path(const struct store_be *st);
int sq__write(struct store_be *st, struct store_batch **b, size_t n,
	      char *err, size_t errlen);
int sq__prepare(struct store_be *st, struct store_batch *b, struct zarena *a); /* sqlite_prep.c */
int sq__agent_hello(struct store_be *st, const char *agent_id, const char *host,
		    const char *version, uint64_t *last_seq);
int sq__agent_stats(struct store_be *st, const char *agent_id, const char *json);
int sq__agent_last_seq(struct store_be *st, const char *agent_id, uint64_t *last_seq);
int sq__retain(struct store_be *st, uint64_t before_us, unsigned chunk);
int sq__put_windows(struct store_be *st, const struct store_window *w, size_t n,
		    char *err, size_t errlen);	/* sqlite_windows.c */
/* Close the windows' connection (sqlite_windows.c). */
void sq_windows_close(struct store_be *st);
int sq__set_autocomplete_keys(struct store_be *st, const char *const *keys, size_t n);
int sq__autocomplete_values(struct store_rd *r, const char *key, struct store_names *out);
struct store_rd *sq__reader_new(struct store_be *st);
int sq__sql(struct store_rd *r, const char *sql, const struct store_sql_cb *cb,
	    char *err, size_t errlen);      /* sqlite_sql.c */
void sq__reader_free(struct store_rd *r);
struct store_space;
int sq__space(struct store_be *st, struct store_space *sp);    /* sqlite_ckpt.c */
void sq__disk_low(struct store_be *st);
int sq__services(struct store_rd *r, struct store_names *out);
int sq__span_names(struct store_rd *r, const char *service, struct store_names *out);
int sq__remote_services(struct store_rd *r, const char *service,
			struct store_names *out);
int sq__trace(struct store_rd *r, uint64_t hi, uint64_t lo, struct store_traces *out);
int sq__traces(struct store_rd *r, const struct store_query *q, struct store_traces *out);
int sq__counts(struct store_rd *r, struct store_counts *c);
int sq__scan(struct store_rd *r, uint64_t from_us, uint64_t to_us,
	     int (*fn)(void *ctx, const struct store_row *row), void *ctx);
int sq__scan_traces(struct store_rd *r, uint64_t from_us, uint64_t to_us,
		    int (*fn)(void *ctx, const struct store_row *row), void *ctx);
int sq__agents(struct store_rd *r,
	       int (*fn)(void *ctx, const struct store_agent *a), void *ctx);

/* A growable byte buffer (zero-initialised is empty); free with free(p). */
struct sq_buf {
	uint8_t *p;
	size_t len, cap;
};

/*
 * spans.extra: z's annotations and tags in the compact binary form that
 * schema.sql documents.  b->len is 0 when z has neither (store NULL).
 * Returns 0 or -ENOMEM.
 */
int sq_extra_encode(struct sq_buf *b, const struct zspan *z);
/* Decode an extra blob into z's annotations and tags, strings copied into
 * a.  Returns 0, -ENOMEM, or -EBADMSG for a damaged blob. */
int sq_extra_decode(const void *p, size_t n, struct zarena *a, struct zspan *z);

/* traces.bloom (schema.sql): the search terms of a trace's spans. */
#define SQ_BLOOM_BYTES 64
/* Add the terms of span z to bloom. */
void sq_bloom_span(uint8_t bloom[SQ_BLOOM_BYTES], const struct zspan *z);
/* The bits every trace matching q has set (q's service, span name,
 * remote service and annotationQuery terms).  Returns how many terms. */
unsigned sq_bloom_query(uint8_t mask[SQ_BLOOM_BYTES], const struct store_query *q);
/* Can a trace with bloom b match the terms of mask? */
int sq_bloom_may(const void *b, size_t n, const uint8_t mask[SQ_BLOOM_BYTES]);

/* A term given to a trace of the transaction (sqlite_bloom.c): its
 * strings (x then y) kept, 64 bytes. */
struct sq_term {
	uint64_t h;             /* lookup hash */
	uint64_t svc;           /* the service's hash */
	uint32_t ti;            /* the trace, in st->tm */
	uint32_t gen;           /* a slot of another generation is empty */
	char kind;
	uint8_t xlen, ylen;
	char str[37];
};

/* The terms a transaction gave each of its traces (open addressing;
 * zero-initialised is empty), and the last service hashed. */
struct sq_termset {
	struct sq_term *v;
	size_t nslot, n;
	uint32_t gen;           /* of the terms in v (forgetting them all: +1) */
	uint64_t svc_h;
	uint32_t svc_len;
	int svc_ok;
	char svc[64];
};

/*
 * Add the terms of span z to bloom, the filter of trace ti of the
 * transaction: the bits sq_bloom_span() sets, but a term s records as
 * already given to ti is not hashed again.  Valid while ti's filter only
 * grows: sq_termset_reset() s whenever the transaction's traces are
 * forgotten or a filter is rebuilt from nothing.  Returns how many terms
 * it hashed (the service's, and those not found in s).
 */
unsigned sq_bloom_span_txn(struct sq_termset *s, uint32_t ti, uint8_t bloom[SQ_BLOOM_BYTES],
			   const struct zspan *z);
/* Forget every term (the service hash is kept: it does not depend on
 * the transaction). */
void sq_termset_reset(struct sq_termset *s);
/* Free s's memory; s is empty after. */
void sq_termset_free(struct sq_termset *s);

/*
 * What sq__prepare() made of a batch of n spans (sqlite_prep.c), in the
 * batch's arena.  Span i: bloom[i], the Bloom bits of its terms that no
 * span before it in the batch gave its trace (sq_bloom_span_txn() over
 * the batch, the traces numbered in the batch); extra[i], extra_len[i]
 * its span_rows.extra blob (sq_extra_encode(); length 0: NULL).
 */
struct store_prep {
	const struct zspan *spans;  /* the batch's spans it was made of */
	size_t n;
	uint8_t (*bloom)[SQ_BLOOM_BYTES];
	const uint8_t **extra;
	uint32_t *extra_len;
};

/* sq__prepare()'s scratch, kept in a pool of the store's between batches. */
struct sq_prep_tmp {
	struct sq_termset ts;
	struct sq_buf x;
};
#define SQ_PREP_POOL 4

/* Free the pool of sq__prepare()'s scratch (st closing). */
void sq_prep_pool_free(struct store_be *st);

#ifdef SQLITE_VERSION
/* The span columns of a spans row, in the order sq_row_span() reads. */
#define SQ_SPAN_COLS \
	"id, parent_id, kind, name, local_service, local_ipv4, local_ipv6, local_port," \
	" remote_service, remote_ipv4, remote_ipv6, remote_port, start_us, duration_us," \
	" shared, debug, extra"
/* Columns col.. (SQ_SPAN_COLS) of s as a span (trace id left 0), strings
 * in a, normalized.  0 or -ENOMEM (a damaged extra blob is dropped). */
int sq_row_span(sqlite3_stmt *s, int col, struct zarena *a, struct zspan *z);
/* Column i as a string copied into a (absent: len 0).  0 or -ENOMEM. */
int sq_col_str(sqlite3_stmt *s, int i, struct zarena *a, struct zs_str *out);
/* Columns i..i+3 (service, ipv4, ipv6, port) as an endpoint. */
int sq_col_ep(sqlite3_stmt *s, int i, struct zarena *a, struct zs_endpoint *e);
/* The connection of a reader (store/scan.c prepares its own statements). */
sqlite3 *sq_reader_db(struct store_rd *r);

/* ---- the writer's state (sqlite.c, sqlite_write.c, sqlite_batch.c) ---- */

/* The write statements, prepared by sq_prepare() (SQL in sqlite.c). */
enum {
	ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
	ST_INS_SPAN, ST_INS_SPANS, ST_INS_PART, ST_LAST_SEQ, ST_AGENT_BATCH,
	ST_AGENT_HELLO, ST_AGENT_STATS,
	ST_INS_SERVICE, ST_INS_SPAN_NAME, ST_INS_REMOTE, ST_INS_AUTOCOMPLETE,
	ST_DEL_MERGED, ST_SEL_PARTS,
	ST_SEL_TRACE, ST_SEL_TRACE_SPANS, ST_INS_TRACE, ST_UPD_TRACE, ST_MAX_SEQ,
	ST_RETAIN_SEL, ST_RETAIN_SPANS, ST_RETAIN_PARTS, ST_RETAIN_TRACE,
	ST_RETAIN_WINDOWS,
	ST_MAX,
};

/* The parameters of ST_INS_SPAN (one a column of span_rows). */
#define SQ_SPAN_PARAMS 20
/* The rows of ST_INS_SPANS, one INSERT of SQ_SPAN_ROWS rows (a batch's
 * rows in key order, so many at once: one statement's start and end, and
 * one cursor appending, for all of them). */
#define SQ_SPAN_ROWS 8

/* span_rows' key (schema.sql, version 5): seq_no = trace_seq << 20 | no.
 * A trace holds at most SQ_NO_LIMIT spans; trace seqs stay below
 * SQ_SEQ_LIMIT (the key is a positive 64-bit integer). */
#define SQ_NO_BITS   20
#define SQ_NO_LIMIT  (INT64_C(1) << SQ_NO_BITS)
#define SQ_SEQ_LIMIT (INT64_C(1) << (63 - SQ_NO_BITS))
#define SQ_SEQ_NO(seq, no) ((int64_t)(seq) << SQ_NO_BITS | (int64_t)(no))
/* SQL: span_rows of the trace whose seq is the expression SEQ (the key's
 * range, which SQLite seeks; e.g. SQ_TRACE_RANGE("s", "?1")). */
#define SQ_TRACE_RANGE(T, SEQ) \
	T ".seq_no >= ((" SEQ ") << 20) AND " T ".seq_no < (((" SEQ ") + 1) << 20)"

/* A map of strings to a time (the names already in the name tables, with
 * the last_us written for them). */
struct nameset {
	char **slot;
	uint64_t *val;
	size_t cap, n;
};

/*
 * A trace touched by the transaction under way: its row as it will be
 * written at the end (ts_us is root_us, else min_us).  Strings are in the
 * store's txn arena.
 */
struct tsum {
	uint64_t hi, lo;
	int64_t seq, nspans, next_no;
	uint64_t root_us, min_us, end_us, max_dur_us;
	struct zs_str root_service, root_name;
	uint8_t error;
	uint8_t exists;       /* the row is in the table (UPDATE, not INSERT) */
	uint8_t recompute;    /* spans were deleted: rebuild from the rows */
	uint8_t full;         /* a span was dropped: SQ_NO_LIMIT reached (logged once) */
	uint8_t bloom[SQ_BLOOM_BYTES];
};

/* The traces of a transaction, by id (open addressing over v). */
struct tmap {
	struct tsum *v;
	size_t n, cap;
	uint32_t *slot;       /* index in v + 1; 0 empty */
	size_t nslot;
};

/* A name's last_us is rewritten when a span is this much newer. */
#define NAME_LAST_SLACK_US 60000000ull

/* The background checkpointer (see the top of sqlite.c). */
struct ckpt {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_cond_t restarted;   /* restart went back to 0 */
	sqlite3 *db;
	int pending, stop, running;
	int restart;                /* the writer waits for a RESTART checkpoint */
	int truncate;               /* the disk is low: a TRUNCATE checkpoint */
	int pages;                  /* checkpoint at this many WAL pages */
	int frames;                 /* atomic: the WAL's frames at the last commit */
	int copied;                 /* atomic: ... the last checkpoint copied */
	unsigned page_size;
	uint64_t retry_ns;          /* no RESTART before (monotonic): one failed */
};

/* A span's place in span_rows: (trace_seq, no), its key SQ_SEQ_NO(seq,
 * no), and its trace in st->tm. */
struct sq_row {
	int64_t seq, no;
	uint32_t ti;
	uint32_t span;              /* the span's index in its batch */
};

struct store_be {
	sqlite3 *db;
	char *path;
	unsigned flags;
	sqlite3_stmt *st[ST_MAX];
	struct nameset names;
	char **ac_keys;             /* --autocomplete-keys */
	size_t nac_keys;
	struct sq_buf extra[SQ_SPAN_ROWS]; /* span_rows.extra of the rows being bound */
	struct zarena merge_arena;  /* scratch for merging parts */
	struct zarena txn_arena;    /* strings of the transaction's tsums */
	struct tmap tm;
	struct sq_termset terms;    /* the Bloom terms given to tm's traces */
	/* the spans INSERTs' parameters as bound last (sqlite3_reset() keeps
	 * them), [0] of ST_INS_SPAN, [1] of ST_INS_SPANS: 0 unknown (text,
	 * blob), 1 NULL, 2 the integer in span_int */
	uint8_t span_bound[2][SQ_SPAN_ROWS * SQ_SPAN_PARAMS + 1];
	int64_t span_int[2][SQ_SPAN_ROWS * SQ_SPAN_PARAMS + 1];
	struct sq_row *rows;        /* a batch's rows in key order (sqlite_batch.c) */
	uint32_t *tcount;           /* per st->tm index: rows of a batch (the same) */
	size_t rows_cap, tcount_cap;
	int64_t max_seq;            /* highest traces.seq given */
	size_t dropped;             /* spans of the batch beyond SQ_NO_LIMIT, not stored */
	char why[256];              /* why a write or a migration failed, when not SQLite's message */
	uint64_t now_us;            /* the transaction's time */
	uint64_t retained;          /* rows retention deleted since the last prune */
	uint64_t retain_cutoff_us;  /* the cutoff of that retention */
	struct ckpt ck;
	/* sq__prepare()'s scratch, any thread */
	pthread_mutex_t plock;
	struct sq_prep_tmp *pool[SQ_PREP_POOL];
	unsigned npool;
	/* store__put_windows(): a connection of its own, any thread */
	pthread_mutex_t wlock;
	sqlite3 *wdb;
};


/* Start st's checkpoint thread (sqlite_ckpt.c) and hook it to st->db's
 * commits; if it cannot start, SQLite's own auto-checkpoint stays on. */
void sq_ckpt_start(struct store_be *st);
/* Stop and join it (nothing when it never started); st->db stays open. */
void sq_ckpt_stop(struct store_be *st);
/* The WAL's size at which the writer waits for a RESTART checkpoint
 * (bytes; it scales with the file system: sqlite_ckpt.c). */
uint64_t sq_ckpt_wal_limit(const struct store_be *st);
/* Ask the checkpoint thread for a TRUNCATE checkpoint (the disk is low:
 * the WAL's frames copied and its file cut to zero bytes), without
 * waiting for it.  Nothing when the thread is not running. */
void sq_ckpt_truncate(struct store_be *st);
/* Map an SQLite result code to -errno. */
int sq_errno(int rc);
/* Format a message into err (nothing when err is NULL or errlen 0). */
__attribute__((format(printf, 3, 4)))
void sq_set_err(char *err, size_t errlen, const char *fmt, ...);
/* sqlite3_exec() of sql, no callback.  SQLite rc. */
int sq_exec(sqlite3 *db, const char *sql);
/* Step a write statement to completion and reset it.  SQLite rc (a row
 * counts as done). */
int sq_step_done(sqlite3_stmt *s);
/* Bind the C string v at parameter i of s (NULL or "" as NULL); v must
 * outlive the statement's next reset.  SQLite rc. */
int sq_bind_cstr(sqlite3_stmt *s, int i, const char *v);
/* Forget every name of s and free its memory (s is then empty). */
void sq_nameset_clear(struct nameset *s);
/* Forget the transaction's traces (st->tm and the txn arena). */
void sq_tm_reset(struct store_be *st);
/*
 * The index in st->tm of trace (hi, lo): known to the transaction, else
 * read from its row, else a new trace with the next seq.  SQLite rc.
 */
int sq_trace_get(struct store_be *st, uint64_t hi, uint64_t lo, size_t *ti);

/* ---- the write path, for migrations (store/migrate.c) ---- */
/* A migration: runs inside the transaction that then sets user_version.
 * Returns an SQLite result code. */
typedef int (*sq_migration_fn)(struct store_be *st);
int sq_migrate_1_2(struct store_be *st);
/* 2 -> 3: the autocomplete table (schema.sql). */
int sq_migrate_2_3(struct store_be *st);
/* 3 -> 4: the query_windows table (schema.sql). */
int sq_migrate_3_4(struct store_be *st);
/* 4 -> 5: spans into span_rows, keyed by seq_no; the view spans. */
int sq_migrate_4_5(struct store_be *st);
sqlite3 *sq_db(struct store_be *st);
/* Prepare the write statements (the schema must be there).  SQLite rc. */
int sq_prepare(struct store_be *st);
/* Inside a write transaction: store a span (origin 0 received, 1 merged)
 * or a partial record under its trace; write the rows of the traces
 * touched so far and forget them (do it every few thousand spans).
 * SQLite result codes. */
int sq_insert_span(struct store_be *st, const struct zspan *z, int origin);
/* sq_insert_span() in two halves, so that a batch's rows can be written
 * in key order (appended to the spans B-tree) while everything else
 * happens in arrival order.  sq_span_claim(): z's trace (st->tm), its
 * next row number and z's names; sq_span_row(): the row and z's share of
 * its trace's summary.  Every claim of a transaction must be followed by
 * its row before sq_flush_traces().  SQLite result codes. */
int sq_span_claim(struct store_be *st, const struct zspan *z, struct sq_row *r);
/* sq_span_claim()'s r->no for a span not stored: its trace holds
 * SQ_NO_LIMIT spans already (logged; counted in st->dropped). */
#define SQ_NO_DROPPED (-1)
/* prep: what sq__prepare() made of the batch whose span r->span z is
 * (its blob and Bloom bits are taken from there), or NULL. */
int sq_span_row(struct store_be *st, const struct zspan *z, int origin, const struct sq_row *r,
		const struct store_prep *prep);
/* sq_span_row() of the SQ_SPAN_ROWS rows r[] (in key order) of spans
 * z[r[i].span], in one INSERT. */
int sq_span_rows(struct store_be *st, const struct zspan *z, int origin, const struct sq_row *r,
		 const struct store_prep *prep);
int sq_insert_part(struct store_be *st, const struct zs_part *p);
int sq_flush_traces(struct store_be *st);
#endif

#endif
