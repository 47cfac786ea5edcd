/* SPDX-License-Identifier: MIT */
/*
 * A plan's partial results as bytes, and a table that merges them: what
 * an agent sends for each window (its per-host merge of the per-CPU
 * partials), what an intermediate collector merges and forwards, and what
 * the root merges before ordering, limiting and final values.
 *
 * Shape (sent once per window, checked before any row is merged):
 *   u8 mode (0 aggregate, 1 stream), uvar nkeys, nkeys x (u8 type, uvar
 *   size), uvar naggrs, naggrs x aggregate descriptor (aggr_wire.c);
 *   streams: uvar ncols, ncols x (u8 type, uvar size)
 * Rows: uvar n, then per row the key components (integers svar, strings
 * uvar length + bytes up to the NUL) and every aggregate's state
 * (aggr_state_encode); records of a stream: their columns likewise.
 *
 * Two plans of the same query text have the same shape whatever kernel
 * they were planned on (offsets of tracepoint fields do not enter it).
 */
#ifndef FAY_QUERY_PARTIAL_H
#define FAY_QUERY_PARTIAL_H

#include <stddef.h>

#include "common/bytes.h"
#include "query/plan.h"

void partial_shape_encode(const struct plan *p, struct wbuf *w);
/* 0 when the shape read from r is p's; -EPROTO (names the key or
 * aggregate that differs) or -EBADMSG with a sentence in why. */
int partial_shape_check(const struct plan *p, struct rbuf *r, char *why, size_t len);

/* One aggregated row: key (key_size bytes) and value (value_size). */
void partial_row_encode(const struct plan *p, const void *key, const void *val,
			struct wbuf *w);
/* Decode one row into key (key_size bytes) and val (value_size), both
 * zeroed first.  0 or -EBADMSG (r->why). */
int partial_row_decode(const struct plan *p, struct rbuf *r, void *key, void *val);

/* One streamed record (record_size bytes). */
void partial_record_encode(const struct plan *p, const void *rec, struct wbuf *w);
int partial_record_decode(const struct plan *p, struct rbuf *r, void *rec);

/* ---- merging ---------------------------------------------------------- */

struct ptable;

/* An empty table for plan p's rows; NULL on ENOMEM.  Free with ptable_free. */
struct ptable *ptable_new(const struct plan *p);
void ptable_free(struct ptable *t);
/* Merge one row (aggr_merge of every aggregate); a new key is added.
 * 0 or -ENOMEM. */
int ptable_merge(struct ptable *t, const void *key, const void *val);
/* Decode "uvar n, n rows" from r and merge each.  0, -EBADMSG (r->why;
 * rows before the bad one stay merged: decode into a scratch table
 * first when that matters) or -ENOMEM. */
int ptable_merge_rows(struct ptable *t, struct rbuf *r);
/* Merge every row of src into t (same plan). */
int ptable_merge_table(struct ptable *t, const struct ptable *src);
size_t ptable_count(const struct ptable *t);
/* Row i (0 <= i < count), in insertion order. */
void ptable_row(const struct ptable *t, size_t i, const void **key, const void **val);
/* Append "uvar n, n rows" of every row of t to w. */
void ptable_encode(const struct ptable *t, struct wbuf *w);

#endif
