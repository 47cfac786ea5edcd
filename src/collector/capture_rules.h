/* SPDX-License-Identifier: MIT */
/*
 * Capture rules (#22 item 2, retroactive tail sampling): a rule is a
 * FayQL predicate over spans, the `where` of a `spans` query
 * (`sp.name == "leaf" && sp.duration > 50ms`).  The collector runs it as
 * a streaming cluster query on every agent,
 *
 *     from sp in spans where
 *     EXPR
 *     select { sp.trace_id_hi, sp.trace_id, sp.time + sp.duration, sp.name }
 *
 * so each agent evaluates it in its VM on every span it drains, the
 * unsampled ones of FAY_RECORD=all included (agent/drain.c feeds them to
 * spans(...) queries), and streams one row per matching span.  A row
 * schedules a capture of its trace (capture_make(): every agent's flight
 * buffer, stored marked) once the rule's settle time has passed since
 * the row arrived, so that the spans of the trace that end after the
 * matching one (its parents, on other hosts) are drained too.  Settling
 * is a guess: a span that ends (or is drained) later still is brought
 * by the capture's follow rounds, which ask every agent for the trace
 * again 250 ms, 500 ms, 1 s, 2 s ... after the capture, the last at the
 * rule's follow_ms, and store what is new (capture_follow(): marked
 * fay.capture.late_ms, counted in the capture's account as spans_late).
 *
 * Bounds: a trace pending or captured lately (the last CRULES_RECENT) is
 * not captured again (counted: deduplicated); each rule has a budget of
 * per_s captures a second (a token bucket of per_s tokens), the rows over
 * it are counted (over_budget) and dropped; at most CRULES_PENDING
 * captures wait; at most CRULES_FOLLOWING captures follow at once (the
 * rest are counted: unfollowed).  The counts are in GET
 * /api/captures/rules and /metrics.
 *
 * Rules live in memory and in DIR/rules.json (written whole, renamed), so
 * they survive a restart of the collector.
 */
#ifndef FAY_COLLECTOR_CAPTURE_RULES_H
#define FAY_COLLECTOR_CAPTURE_RULES_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

struct collector;
struct crules;

#define CRULES_MAX		64	/* rules per collector */
#define CRULES_NAME_MAX		64	/* STANDING_NAME_MAX: standing_name_ok() */
#define CRULES_PER_S_DEFAULT	10
#define CRULES_PER_S_MAX	1000
#define CRULES_SETTLE_MS_DEFAULT 300
#define CRULES_SETTLE_MS_MAX	60000
#define CRULES_FOLLOW_MS_DEFAULT 10000
#define CRULES_FOLLOW_MS_MAX	600000
#define CRULES_FOLLOWING	1024
#define CRULES_RECENT		4096
#define CRULES_PENDING		4096

/* Start the registry (its capture thread) and the rules of DIR/rules.json
 * (DIR is made when absent).  NULL with a reason in err. */
struct crules *crules_new(struct collector *c, const char *dir, char *err, size_t errlen);
/* Stop every rule and the capture thread (pending captures are dropped).
 * Accepts NULL. */
void crules_free(struct crules *rs);

/*
 * Register rule name (1 to 64 of [A-Za-z0-9_]) with predicate expr,
 * per_s captures a second at most (1..CRULES_PER_S_MAX), settle_ms
 * (0..CRULES_SETTLE_MS_MAX) between a match and its capture, follow_ms
 * (0..CRULES_FOLLOW_MS_MAX; 0: none) of follow rounds after it.  0;
 * -EINVAL with the reason in err (an error in expr: "rule:LINE:COL:
 * error: ..." with the rule's line and a caret under the column, *line
 * and *col set, else 0); -EEXIST; -ENOSPC; -errno (rules.json).
 */
int crules_add(struct crules *rs, const char *name, const char *expr, unsigned per_s,
	       unsigned settle_ms, unsigned follow_ms, char *err, size_t errlen, int *line,
	       int *col);
/* The most hosts of a trace a rule's --with-query capture asks. */
#define CRULES_WITH_HOSTS	64
#define CRULES_WITH_LAST_MS_MAX	600000

/*
 * Rule name's captures also capture the events standing query query (in
 * keep mode) kept on the trace's hosts in the last last_ms
 * (1..CRULES_WITH_LAST_MS_MAX) before the capture (#22 item 4: fay
 * capture --when ... --with-query NAME --last DUR); the trace's account
 * names that capture ("events_capture"), which names it back
 * ("trace_capture").  Kept in rules.json.  0; -EINVAL, -ENOENT with err;
 * -errno (rules.json).
 */
int crules_with_query(struct crules *rs, const char *name, const char *query,
		      unsigned last_ms, char *err, size_t errlen);
/* Stop and forget rule name.  0 or -ENOENT. */
int crules_drop(struct crules *rs, const char *name);

/* The rules and their counts as a JSON array (a new reference; NULL: no
 * memory): name, expr, per_s, settle_ms, follow_ms, created_ms, matches,
 * captures, deduplicated, over_budget, spans_late (stored by follow
 * rounds), unfollowed, running (its query runs on the agents). */
json_t *crules_list(struct crules *rs);

/* Their counts as Prometheus counters, appended to f. */
void crules_metrics(struct crules *rs, FILE *f);

#endif
