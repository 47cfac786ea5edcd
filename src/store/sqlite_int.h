/* SPDX-License-Identifier: MIT */
/* Private to the SQLite store (src/store/sqlite*.c, schema.c). */
#ifndef FAY_STORE_SQLITE_INT_H
#define FAY_STORE_SQLITE_INT_H

#include "store/span.h"

struct store_rd;

/* src/store/schema.sql, NUL-terminated (src/store/schema.c). */
extern const char store_schema_sql[];

#define STORE_APP_ID         0x46415953  /* "FAYS" */
#define STORE_SCHEMA_VERSION 3

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

/* The SQLite backend's ops (store/backend.h; contracts in store.h).
 * sqlite.c: opening and writing; sqlite_read.c, scan.c: reading. */
struct store_be *sq__open(const char *path, unsigned flags, char *err, size_t errlen);
void sq__close(struct store_be *st);
const char *sq__path(const struct store_be *st);
int sq__write(struct store_be *st, struct store_batch **b, size_t n,
	      char *err, size_t errlen);
int sq__agent_hello(struct store_be *st, const char *agent_id, const char *host,
		    const char *version, uint64_t *last_seq);
int sq__agent_stats(struct store_be *st, const char *agent_id, const char *json);
int sq__agent_last_seq(struct store_be *st, const char *agent_id, uint64_t *last_seq);
int sq__retain(struct store_be *st, uint64_t before_us, unsigned chunk);
int sq__set_autocomplete_keys(struct store_be *st, const char *const *keys, size_t n);
int sq__autocomplete_values(struct store_rd *r, const char *key, struct store_names *out);
struct store_rd *sq__reader_new(struct store_be *st);
int sq__sql(struct store_rd *r, const char *sql, const struct store_sql_cb *cb,
	    char *err, size_t errlen);      /* sqlite_sql.c */
void sq__reader_free(struct store_rd *r);
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

/* ---- the write path, for migrations (store/migrate.c) ---- */
struct store_be;
/* A migration: runs inside the transaction that then sets user_version.
 * Returns an SQLite result code. */
typedef int (*sq_migration_fn)(struct store_be *st);
int sq_migrate_1_2(struct store_be *st);
/* 2 -> 3: the autocomplete table (schema.sql). */
int sq_migrate_2_3(struct store_be *st);
sqlite3 *sq_db(struct store_be *st);
/* Prepare the write statements (the schema must be there).  SQLite rc. */
int sq_prepare(struct store_be *st);
/* Inside a write transaction: store a span (origin 0 received, 1 merged)
 * or a partial record under its trace; write the rows of the traces
 * touched so far and forget them (do it every few thousand spans).
 * SQLite result codes. */
int sq_insert_span(struct store_be *st, const struct zspan *z, int origin);
int sq_insert_part(struct store_be *st, const struct zs_part *p);
int sq_flush_traces(struct store_be *st);
#endif

#endif
