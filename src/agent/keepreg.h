/* SPDX-License-Identifier: MIT */
/*
 * The keep buffers of the cluster queries running on this host in keep
 * mode ('keep DUR', #22 item 4), found by their query's key: a hash of the
 * query's text (common/wire_cluster.h wire_query_key()), which the
 * collector computes from the text it sent, so a capture by query needs
 * no new name on the QUERY frame.
 *
 * A runner adds its buffer when the query attaches and removes it before
 * freeing it; a capture reads through keepreg_each() under the registry's
 * lock, so a buffer is never freed while read.  stats.json shows the sum
 * (keepreg_totals()).
 */
#ifndef FAY_AGENT_KEEPREG_H
#define FAY_AGENT_KEEPREG_H

#include <stddef.h>
#include <stdint.h>

#include "engine/keepbuf.h"

struct keepreg;

/* NULL with errno. */
struct keepreg *keepreg_new(void);
/* Accepts NULL; the buffers are their runners' (removed before). */
void keepreg_free(struct keepreg *r);

struct plan;

/* Register kb, the buffer of plan p's records, under key (several runners
 * may share a key: each is read).  0 or -ENOMEM. */
int keepreg_add(struct keepreg *r, uint64_t key, struct keepbuf *kb, const struct plan *p);
/* Forget kb (before keepbuf_free()). */
void keepreg_remove(struct keepreg *r, struct keepbuf *kb);

/* keepbuf_each() over every buffer of key, fn also given the buffer's
 * plan, its counts summed into st (zeroed first).  Returns the number of
 * buffers of key (0: none: no query of that text runs here in keep mode). */
int keepreg_each(struct keepreg *r, uint64_t key, uint64_t from_ns, uint64_t to_ns,
		 uint64_t now_ns,
		 int (*fn)(void *ctx, const struct plan *p, const void *rec, uint64_t t_ns),
		 void *ctx, uint64_t *n, struct keepbuf_stats *st);

/* The counts of every buffer summed (oldest_ns: the oldest); *nbufs: how
 * many. */
void keepreg_totals(struct keepreg *r, uint64_t now_ns, struct keepbuf_stats *st, int *nbufs);

#endif
