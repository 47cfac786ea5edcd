/* SPDX-License-Identifier: MIT */
/*
 * Private to the spool (src/agent/spool*.c): spool.c keeps the spool while
 * the agent runs (spool_put, ACKs, drops, cursor saves), spool_load.c reads
 * it back and checks it at start (spool_open), spool_cursor.c holds the
 * cursor table and the cursor file.
 *
 * A spool file is the complete wire frame followed by a trailer:
 *   uint32 magic SPOOL_TRAILER_MAGIC ("FAYC"), uint32 n,
 *   n x struct cursor (32 bytes), uint32 crc32 of magic..cursors.
 */
#ifndef FAY_AGENT_SPOOL_INT_H
#define FAY_AGENT_SPOOL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "agent/spool.h"

#define SPOOL_TRAILER_MAGIC UINT32_C(0x43594146) /* "FAYC" */

/* ---- spool.c ---- */

/* The name of batch seq's spool file ("<20 digits>.batch") into buf. */
void spool_ent_name(char *buf, size_t len, uint64_t seq);
/* Link e into sp's list in seq order and count it (bytes, nbatches,
 * max_seq). */
void spool_list_insert_sorted(struct spool *sp, struct spool_ent *e);

#endif
