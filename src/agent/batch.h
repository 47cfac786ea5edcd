/* SPDX-License-Identifier: MIT */
/*
 * Span records into a BATCH frame (batch.c), on top of the frame builder
 * of src/common/wire.h (struct wire_batch, wire_batch_seal ...): what the
 * agent adds is the local endpoint of a process's spans.
 */
#ifndef FAY_AGENT_BATCH_H
#define FAY_AGENT_BATCH_H

#include <stdint.h>

#include "common/spanrec.h"
#include "common/wire.h"

#define BATCH_MAX_BYTES (1u << 20)
#define BATCH_MAX_SPANS 8192u

/* The LOCAL_EP item a process's spans get when they carry none, encoded
 * once per process. */
struct ep_item {
	uint32_t len;           /* 0: none */
	uint8_t buf[SPANREC_ITEM_HDR + 8 + 64 + 48];
};

/* Encode the endpoint (service, ip text, port) as a LOCAL_EP item.
 * Strings are cut at their field size. */
void ep_item_init(struct ep_item *ep, const char *service, const char *ip,
		  uint16_t port);

/* The bytes record rec (reclen bytes, decoded into r) takes once ep is
 * added as its local endpoint (when r has none; ep may be NULL), and
 * that record written at dst (batch_rec_size() bytes). */
uint64_t batch_rec_size(uint32_t reclen, const struct spanrec *r, const struct ep_item *ep);
void batch_rec_copy(uint8_t *dst, const void *rec, uint32_t reclen, const struct spanrec *r,
		    const struct ep_item *ep);

/*
 * Append the span record rec (reclen bytes, already decoded into r) to b,
 * adding ep as its local endpoint when r has none (ep may be NULL).
 * Returns 0, -ENOSPC when the batch is full (nothing appended: flush and
 * retry), or -E2BIG when the span could never fit in an empty batch.
 */
int batch_add(struct wire_batch *b, const void *rec, uint32_t reclen,
	      const struct spanrec *r, const struct ep_item *ep);

#endif
