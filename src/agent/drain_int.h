/* SPDX-License-Identifier: MIT */
/*
 * Private to the drain thread (src/agent/drain*.c): drain.c holds the
 * processes' consumers and a pass (drain_pass()), drain_thread.c the
 * thread that runs the passes and the calls of the main thread.  Both run
 * on the drain thread (or, for drain_pass(), the test that calls it):
 * agent_int.h is the main thread's.
 */
#ifndef FAY_AGENT_DRAIN_INT_H
#define FAY_AGENT_DRAIN_INT_H

#include <stdint.h>

#include "agent/drain.h"

/* Note the cursors of the rings d->cur drew from (its trailer, retired
 * processes included) and queue it for the spool writer; d->cur must
 * exist and is NULL after.  now: the monotonic clock, for the flush
 * interval. */
void drain_seal(struct drain *d, uint64_t now);

/* Sum the counts of every process, finished and live (a live one's read
 * again from its header, unless its file shrank), and publish them with
 * the thread's own under d->lock for drain_get_stats(). */
void drain_publish(struct drain *d);

#endif
