/* SPDX-License-Identifier: MIT */
/*
 * The collector's web UI and ecosystem interfaces, around the core of
 * collector.h (issue #4):
 *
 *   ext_http.c     dispatch of the routes below; extra /metrics lines
 *   ui_http.c      the embedded UI at / (ui_assets.h), SPA paths
 *   api_ui.c       /api/ui/dashboard, /api/ui/thresholds, /api/ui/hosts,
 *                  /api/v2/dependencies
 *   dashboard.c    per service and span name latency series
 *   deps.c         the service dependency graph from parent/child spans
 *   thresholds.c   the dashboard's thresholds (--thresholds FILE, JSON)
 *   api_query.c    POST /api/query: compile FayQL, stream NDJSON results
 *   otlp_*.c       OTLP/HTTP (JSON, protobuf) and OTLP/gRPC receivers
 *                  (otlp_int.h) around src/otlp
 *   export.c       --export zipkin=URL / otlp=URL / otlp-protobuf=URL
 *                  (libcurl, batched)
 */
#ifndef FAY_COLLECTOR_EXT_H
#define FAY_COLLECTOR_EXT_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collector/collector.h"

struct thresholds;
struct exporter;

#define OTLP_MAX_SENDERS 64

/* OTLP counters of one client address (otlp_senders.c). */
struct otlp_sender {
	char name[64];
	uint64_t requests, accepted, rejected, refused;
};

/* POST /api/query: queries running at once, in all and per client (an
 * address: every local client is 127.0.0.1, so for them the per-client
 * cap is a second total). */
#define QUERY_MAX_RUNNING	32
#define QUERY_MAX_PER_CLIENT	16

struct coll_ext {
	struct thresholds *th;
	/* the clients of the running queries (api_query.c) */
	pthread_mutex_t qslots_lock;
	char qslots[QUERY_MAX_RUNNING][64];	/* client address, "" free */
	struct exporter *exp[EXT_MAX_EXPORTS];
	int nexp;
	/* counters (relaxed atomics) */
	uint64_t queries_running, queries_total, queries_refused, queries_busy;
	uint64_t otlp_requests, otlp_spans, otlp_rejected;
	uint64_t otlp_spans_rejected, otlp_throttled;
	uint64_t ui_requests;
	/* per OTLP sender; [OTLP_MAX_SENDERS] is "other" */
	pthread_mutex_t senders_lock;
	struct otlp_sender senders[OTLP_MAX_SENDERS + 1];
	int nsenders;
};

#define X_ADD(c, field, v) __atomic_add_fetch(&(c)->ext->field, (v), __ATOMIC_RELAXED)
#define X_SUB(c, field, v) __atomic_sub_fetch(&(c)->ext->field, (v), __ATOMIC_RELAXED)
#define X_GET(c, field)    __atomic_load_n(&(c)->ext->field, __ATOMIC_RELAXED)

/* ---- ext_http.c ---------------------------------------------------------- */

/*
 * Add one --export argument ("zipkin=URL", "otlp=URL", "otlp-protobuf=URL") to o.  Returns 0,
 * or -EINVAL with the reason in err (unknown kind, not http(s)://, too
 * many).
 */
int coll_ext_add_export(struct coll_ext_opts *o, const char *arg,
			char *err, size_t errlen);
/*
 * Load the thresholds and start the exporters.  NULL + errno with the
 * reason in err (a thresholds file that does not parse, names the file
 * and the place).  Free with coll_ext_free() after the ingest thread
 * stopped (exporters flush what they hold, within a few seconds).
 */
struct coll_ext *coll_ext_new(struct collector *c, const struct coll_ext_opts *o,
			      char *err, size_t errlen);
void coll_ext_free(struct coll_ext *e);

/* The ingest thread committed these batches: hand them to the exporters.
 * c->ext may be NULL (nothing happens). */
void coll_ext_committed(struct collector *c, struct store_batch *const *b, size_t n);

/* The extra lines of /metrics (queries, OTLP, exporters, agents' losses
 * from their STATS) appended to f. */
void coll_ext_metrics(struct collector *c, FILE *f);

/* ---- thresholds.c -------------------------------------------------------- */

/* Latency/error limits of one (service, span name); < 0 = none. */
struct th_limits {
	double p50_us, p99_us, avg_us, error_rate;
};

/*
 * Thresholds kept in path (JSON, see thresholds_check()).  A missing file
 * is an empty rule set (created on the first thresholds_set()); a file
 * that does not parse or check is refused: NULL, errno EINVAL, the file
 * and the problem in err.
 */
struct thresholds *thresholds_new(const char *path, char *err, size_t errlen);
void thresholds_free(struct thresholds *t);
const char *thresholds_path(const struct thresholds *t);
/*
 * Check doc: {"rules": [{"service": S, "span": N, "p50_us": X, "p99_us": X,
 * "avg_us": X, "error_rate": F}, ...]} with service/span strings ("*" or
 * absent: any), limits non-negative numbers, error_rate in [0, 1], no
 * other keys.  0 or -EINVAL with the place ("rules[2].p99_us: ...").
 */
int thresholds_check(const json_t *doc, char *err, size_t errlen);
/* Replace the rules with doc (checked) and write the file atomically.
 * 0, -EINVAL (reason in err) or -errno of the write. */
int thresholds_set(struct thresholds *t, json_t *doc, char *err, size_t errlen);
/* A copy of the rules document (new reference; NULL on ENOMEM). */
json_t *thresholds_get(struct thresholds *t);
/* The limits for (service, span) from doc: the most specific rule wins
 * (service and span > service > span > neither), field by field. */
void thresholds_match(const json_t *doc, const char *service, const char *span,
		      struct th_limits *out);

/* ---- dashboard.c / deps.c ----------------------------------------------- */

/*
 * The dashboard over [end_us - window_us, end_us) in buckets of step_us:
 * per (service, span name) count, errors, rate, p50/p99/avg of durations,
 * each also per bucket, with the thresholds of doc and a state per cell
 * ("ok", "over", "none").  New reference, or NULL with -errno in *ret.
 */
json_t *dashboard_json(struct store_reader *r, uint64_t end_us, uint64_t window_us,
		       uint64_t step_us, const json_t *th_doc, int *ret);

/* Zipkin's dependency links [{"parent","child","callCount","errorCount"}]
 * of the traces with a span that started in [from_us, to_us], every span
 * of them (store__scan_traces()), sorted by parent then child (the order
 * the store hands traces over in is no part of the answer).  NULL with
 * *ret. */
json_t *deps_json(struct store_reader *r, uint64_t from_us, uint64_t to_us, int *ret);

/* ---- export.c ------------------------------------------------------------ */

enum export_kind { EXPORT_ZIPKIN, EXPORT_OTLP, EXPORT_OTLP_PROTOBUF };

/* Start an exporter thread posting to url.  NULL + errno (ELIBACC, logged,
 * when libcurl cannot be loaded). */
struct exporter *exporter_new(enum export_kind kind, const char *url);
/* Flush (bounded by a few seconds) and stop. */
void exporter_free(struct exporter *x);
/* Queue copies of the spans (never blocks; a full queue drops, counted). */
void exporter_push(struct exporter *x, const struct zspan *s, size_t n);
/* The counters of the n exporters as Prometheus lines. */
void exporter_metrics(struct exporter *const *xs, int n, FILE *f);

/* ---- otlp_senders.c ------------------------------------------------------ */

/* The per-sender lines of /metrics (fay_otlp_sender_*). */
void otlp_sender_metrics(struct collector *c, FILE *f);
/* [{"sender", "requests", "spans_accepted", "spans_rejected",
 * "requests_refused"}] for /api/ui/hosts.  New reference. */
json_t *otlp_senders_json(struct collector *c);

#endif
