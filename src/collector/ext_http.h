/* SPDX-License-Identifier: MIT */
/*
 * The modules around the collector's core (issue #4), their state and
 * life cycle: ext_http.c dispatches their routes (the web UI, its JSON
 * API, FayQL over HTTP, OTLP ingest, the dependency graph), writes the
 * extra lines of /metrics, and starts and stops what they need
 * (thresholds.h, export.h).
 */
#ifndef FAY_COLLECTOR_EXT_HTTP_H
#define FAY_COLLECTOR_EXT_HTTP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collector/collector_int.h"
#include "collector/otlp_int.h"

struct thresholds;
struct exporter;

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
	/* per OTLP sender; [OTLP_MAX_SENDERS] is "other" */
	pthread_mutex_t senders_lock;
	struct otlp_sender senders[OTLP_MAX_SENDERS + 1];
	int nsenders;
};

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

/* The extra lines of /metrics (the ingest queue, OTLP senders, exporters,
 * agents' losses from their STATS) appended to f; the counters are
 * coll_metrics_write()'s. */
void coll_ext_metrics(struct collector *c, FILE *f);

#endif
