/* SPDX-License-Identifier: MIT */
/*
 * Standing cluster queries: Fay's distributed performance counters.
 *
 * `fay query --cluster URL --keep NAME 'Q'` (POST /api/queries) registers
 * a windowed cluster query that runs until dropped (DELETE
 * /api/queries/NAME).  Definitions live in DIR/queries.json (written to a
 * temporary file and renamed), so they survive a restart of the
 * collector; agents that reconnect are asked again by the cluster layer.
 * Every merged window is a row of the span store's query_windows table
 * (store__put_windows(); the query's history: GET
 * /api/queries/NAME/results, `fay sql`, the collector's --retention) and
 * the latest is exported on /metrics as gauges:
 *
 *   fay_query_NAME{<key columns and string columns as labels>,column="C"} V
 *
 * one series per integer column C of each row.  Names are 1 to 64 of
 * [A-Za-z0-9_] (Prometheus-safe).  DIR is the store's path + ".queries".
 *
 * A store that several collectors share (ClickHouse) keeps the
 * definitions instead (table standing_queries): each collector on it
 * reads them every 2 s, and only the holder of the store's lease
 * (standing_lease, 10 s, renewed at each read) runs them; when it dies,
 * another takes over once the lease ran out, at once when it stopped.
 * The others link to the holder (table collectors: each one's address),
 * which asks them for their hosts' answers as a parent asks a child.
 */
#ifndef FAY_CLUSTER_STANDING_H
#define FAY_CLUSTER_STANDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cluster;
struct standing;
struct plan;
struct json_t;
struct store;

#define STANDING_NAME_MAX	64
#define STANDING_MAX		64	/* standing queries per collector */

/* Is n a name for a standing query (1 to STANDING_NAME_MAX of
 * [A-Za-z0-9_], Prometheus-safe)?  Capture rules' names are the same. */
bool standing_name_ok(const char *n);

/* How a collector meets the others beside it on a shared store. */
struct tls_conf;
struct standing_net {
	const char *advertise;	/* HOST:PORT the others reach its agent port at
				 * (--advertise): its id among them */
	const char *token;	/* presented to the lease's holder (--token) */
	struct tls_conf *tls;	/* TLS to the holder (--parent-tls-ca; NULL: none) */
};

/* Load DIR's definitions (creating DIR) and start each on cl, their
 * windows written into st (which outlives the registry).  With a store
 * several collectors share, the store's definitions instead, run only
 * while this collector holds the store's lease, which it takes only if
 * net is not NULL (a collector under a parent: NULL; its parent runs
 * them).  With net, it beats in the store's collectors table, links to
 * the holder when another holds the lease (its hosts answer through the
 * holder's windows), and as the holder counts every other collector's
 * hosts, missing when one is silent (strings copied; tls must outlive
 * it).  History files
 * of older versions (DIR/NAME.ndjson and .ndjson.1) are imported into st
 * first and renamed NAME.ndjson.imported (once; an import cut short is
 * run again).  NULL with a reason in err: DIR unusable, or queries.json
 * corrupt (named, never overwritten). */
struct standing *standing_new(struct cluster *cl, struct store *st, const char *dir,
			      const struct standing_net *net, char *err, size_t errlen);
/* Stop every standing query (their probes are detached) and free. */
void standing_free(struct standing *s);

/*
 * Register and start a standing query.  0; -EINVAL (a bad name, no
 * 'window', or an error in the query: err holds the formatted line:col
 * diagnostic; *line and *col its place, 0 if none); -EEXIST; -ENOSPC (64
 * already); -errno (the definitions file).
 */
int standing_add(struct standing *s, const char *name, const char *text, uint64_t grace_ns,
		 char *err, size_t errlen, int *line, int *col);
/* The text of standing query NAME (malloc'd), or NULL (none: ENOENT; or
 * ENOMEM).  A capture by query (#22) asks the agents for the events NAME
 * keeps by this text's key. */
char *standing_text(struct standing *s, const char *name);
/* Stop and forget NAME (its windows stay in the store, until the
 * retention; shared: a drop written to the store, which every collector
 * on it reads).  0, -ENOENT, or -EIO (the store refused; logged). */
int standing_drop(struct standing *s, const char *name);

/*
 * The columns of a plan's rows as a JSON array (NULL: no memory):
 * {"name", "type": "int"|"string"|"distribution", "key": true for a
 * group key, "unit", "stack": true for folded frames, "trace": true for
 * the s.trace_id key of a profile(...) query}.  The header line of POST /api/query and the standing
 * queries' listings carry it.
 */
struct json_t *plan_columns_json(const struct plan *p);

/* A JSON array: name, query, columns, grace_ms, created_ms, windows, last
 * (the latest window line), runs (this collector runs it: false on a
 * shared store's collectors but the lease's holder); malloc'd. */
char *standing_list_json(struct standing *s);
/* {"name","query","columns","windows":[the last limit window objects,
 * oldest first]} (from the store: the merged answers) into *json
 * (malloc'd).  trace non-NULL: each window keeps only its rows whose
 * s.trace_id key of a profile(...) query (the column marked "trace") is
 * *trace, the low 64 bits of a trace id (the trace page's profile of a
 * request).  0, -ENOENT, -EINVAL (trace, and the query has no such
 * key), -ENOMEM, or the store's -errno (logged). */
int standing_results(struct standing *s, const char *name, unsigned limit,
		     const uint64_t *trace, char **json);
/* The latest window of each as Prometheus gauges, appended to f. */
void standing_metrics(struct standing *s, FILE *f);

#endif
