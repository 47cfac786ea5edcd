/* SPDX-License-Identifier: MIT */
/*
 * Private to src/store/: what a span store backend provides.  store.c
 * implements store.h by dispatching through the ops table that
 * store__open() chose (SQLite for a path, ClickHouse for "clickhouse:URL");
 * nothing above store.h sees a backend.
 *
 * struct store_be and struct store_rd are each backend's own writer and
 * reader objects: every backend defines them in its own files and store.c
 * only ever passes the pointers back to the backend that made them.  The
 * contracts are those of the store.h function of the same name.
 */
#ifndef FAY_STORE_BACKEND_H
#define FAY_STORE_BACKEND_H

#include <pthread.h>

#include "store/store.h"

struct store_be;
struct store_rd;

/* The disk under a backend's files (store_ops.space). */
struct store_space {
	uint64_t total, avail;    /* the file system's size and free bytes
				     (what an unprivileged writer may use) */
	uint64_t wal;             /* bytes a checkpoint may still need to copy
				     (SQLite: the WAL's frames not copied yet) */
	uint64_t wal_limit;       /* the most wal reaches between checkpoints */
};

struct store_ops {
	const char *name;                 /* "sqlite", "clickhouse" */
	int schema_version;               /* the version this build writes */
	unsigned writers;                 /* store__writers() (0: one) */
	/* where: a path (SQLite) or what follows "clickhouse:" */
	struct store_be *(*open)(const char *where, unsigned flags, char *err,
				 size_t errlen);
	void (*close)(struct store_be *st);
	int (*write)(struct store_be *st, struct store_batch **b, size_t n,
		     char *err, size_t errlen);
	/* store__prepare(); NULL: nothing to prepare */
	int (*prepare)(struct store_be *st, struct store_batch *b, struct zarena *a);
	int (*agent_hello)(struct store_be *st, const char *agent_id, const char *host,
			   const char *version, uint64_t *last_seq);
	int (*agent_stats)(struct store_be *st, const char *agent_id, const char *json);
	int (*agent_last_seq)(struct store_be *st, const char *agent_id,
			      uint64_t *last_seq);
	int (*retain)(struct store_be *st, uint64_t before_us, unsigned chunk);
	/* NULL: nothing to do (store__retain() does all of retention) */
	int (*set_retention)(struct store_be *st, uint64_t retention_us, char *err,
			     size_t errlen);
	/* Is the backend reachable?  0, or -errno with a reason in err.
	 * NULL: always. */
	int (*health)(struct store_be *st, char *err, size_t errlen);
	/* The disk of the backend's files (store/disk.c).  0 or -errno.
	 * NULL: the store's disk is not here (ClickHouse: its disk-full
	 * errors on writes say when it is full). */
	int (*space)(struct store_be *st, struct store_space *sp);
	/* The disk went low: give back what can be given (SQLite: a TRUNCATE
	 * checkpoint), without waiting.  Called again every second while it
	 * lasts.  NULL: nothing to do. */
	void (*disk_low)(struct store_be *st);
	int (*put_windows)(struct store_be *st, const struct store_window *w, size_t n,
			   char *err, size_t errlen);
	/* shared standing definitions (store.h); NULL: not shared */
	int (*standing_put)(struct store_be *st, const struct store_standing *d, char *err,
			    size_t errlen);
	int (*standing_list)(struct store_be *st,
			     int (*fn)(void *ctx, const struct store_standing *d), void *ctx,
			     char *err, size_t errlen);
	int (*standing_lease)(struct store_be *st, const char *holder, uint64_t lease_us,
			      bool release, char *who, size_t wholen, char *err, size_t errlen);
	/* the collectors beside each other on it (store.h); NULL: not shared */
	int (*collector_beat)(struct store_be *st, const struct store_collector *c, char *err,
			      size_t errlen);
	int (*collectors)(struct store_be *st,
			  int (*fn)(void *ctx, const struct store_collector *c), void *ctx,
			  char *err, size_t errlen);
	/* what store__windows() reads: the table, deduplicated (ClickHouse:
	 * "query_windows FINAL") */
	const char *windows_from;
	/* NULL: the backend records no tag values (autocomplete answers []) */
	int (*set_autocomplete_keys)(struct store_be *st, const char *const *keys,
				     size_t n);

	int (*sql)(struct store_rd *r, const char *sql, const struct store_sql_cb *cb,
		   char *err, size_t errlen);
	struct store_rd *(*reader_new)(struct store_be *st);
	void (*reader_free)(struct store_rd *r);
	int (*services)(struct store_rd *r, struct store_names *out);
	int (*span_names)(struct store_rd *r, const char *service,
			  struct store_names *out);
	int (*remote_services)(struct store_rd *r, const char *service,
			       struct store_names *out);
	int (*autocomplete_values)(struct store_rd *r, const char *key,
				   struct store_names *out);
	int (*trace)(struct store_rd *r, uint64_t hi, uint64_t lo,
		     struct store_traces *out);
	int (*traces)(struct store_rd *r, const struct store_query *q,
		      struct store_traces *out);
	int (*counts)(struct store_rd *r, struct store_counts *c);
	int (*scan)(struct store_rd *r, uint64_t from_us, uint64_t to_us,
		    int (*fn)(void *ctx, const struct store_row *row), void *ctx);
	/* NULL: store.c falls back to scan (spans in the window only) */
	int (*scan_traces)(struct store_rd *r, uint64_t from_us, uint64_t to_us,
			   int (*fn)(void *ctx, const struct store_row *row), void *ctx);
	int (*agents)(struct store_rd *r,
		      int (*fn)(void *ctx, const struct store_agent *a), void *ctx);
};

/*
 * The disk watermark (store/disk.c), one a store: whether writes of new
 * spans may go to the backend now.  The contracts are those of store.h's
 * store__set_min_free(), store__write_gate() and store__disk();
 * store_dw_wrote() learns from each write's result (a backend's -ENOSPC
 * makes the disk low; with no space op, a write that succeeds ends it)
 * and charges a successful write's bytes (at most) against the room the
 * last look saw, so that writes between two looks cannot pass the
 * watermark: once the room left is near, the next gate looks again.
 */
struct store_dw {
	pthread_mutex_t lock;
	uint64_t min_bytes;       /* --min-free SIZE (0: not given) */
	unsigned min_pct;         /* --min-free PCT% (0: not given) */
	int low;                  /* writes refused */
	int full;                 /* the backend said ENOSPC since */
	uint64_t checked_ns, probe_ns, freed_ns;   /* monotonic */
	uint64_t total, avail, min_free;
	uint64_t charged;         /* bytes written (at most) since the last look */
	uint64_t need;            /* bytes kept free at the last look (the
				     watermark, or the WAL's copy if larger) */
	char why[256];
};
void store_dw_init(struct store_dw *w);
void store_dw_free(struct store_dw *w);
int store_dw_gate(struct store_dw *w, const struct store_ops *ops, struct store_be *be,
		  char *err, size_t errlen);
void store_dw_wrote(struct store_dw *w, const struct store_ops *ops, int ret,
		    const char *err, uint64_t bytes);
void store_dw_get(struct store_dw *w, const struct store_ops *ops, struct store_be *be,
		  struct store_disk *d);
uint64_t store_dw_room(struct store_dw *w, const struct store_ops *ops);
/* The ops of the backend a reader reads (store.c). */
const struct store_ops *store_reader_ops(const struct store_reader *r);

extern const struct store_ops sq_store_ops;     /* store/sqlite.c */
extern const struct store_ops ch_store_ops;     /* store/ch.c */

#endif
