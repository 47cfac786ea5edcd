/* SPDX-License-Identifier: MIT */
/*
 * Where spans(...) cluster queries get their spans: the drain thread
 * hands every span it drains to the tap (spantap_feed()), and the tap
 * runs each running spans(...) query's program on it in fay's VM
 * (engine_span_feed(), the query's own context layout filled by
 * spanctx_fill()).  BlkKin's partial records become whole spans first
 * (spanmerge.h).  A query joins with spantap_attach() and leaves with
 * spantap_detach(), the spans_attach / spans_detach of the query driver
 * (engine/driver.h), from its own thread.
 *
 * Without a query attached a feed costs one atomic load: parts are not
 * even merged.  A query sees the spans drained while it is attached:
 * those of a window are the ones the agent drained in it (a span is
 * drained within a drain tick, --flush-interval, default 20 ms, of its
 * end).
 */
#ifndef FAY_AGENT_SPANTAP_H
#define FAY_AGENT_SPANTAP_H

#include <stdint.h>

#include "common/spanrec.h"

#define SPANTAP_MAX_QUERIES	64

struct engine;
struct spantap;

/* NULL and errno. */
struct spantap *spantap_new(void);
/* No query may be attached any more.  Accepts NULL. */
void spantap_free(struct spantap *t);

/* driver.h's spans_attach(tap, e): 0, -ENOSPC (SPANTAP_MAX_QUERIES
 * running), -ENOMEM. */
int spantap_attach(void *tap, struct engine *e);
/* driver.h's spans_detach(tap, e): once it returns no feed touches e. */
void spantap_detach(void *tap, struct engine *e);

/*
 * The drain thread: span r (decoded), drained from process pid whose
 * service is proc_service (when the span names no endpoint), in cgroup
 * cgroup and container container (NULL or "": none known).  Runs every
 * attached query that asks for it.
 */
void spantap_feed(struct spantap *t, const struct spanrec *r, const char *proc_service,
		  uint32_t pid, const char *cgroup, const char *container);
/* The drain thread, after a pass: wake the streaming queries fed in it. */
void spantap_pass_end(struct spantap *t);

/* Whole spans fed, and BlkKin spans given up (never ended, evicted). */
void spantap_counts(struct spantap *t, uint64_t *fed, uint64_t *merge_dropped);

#endif
