/* SPDX-License-Identifier: MIT */
/*
 * Span records into a BATCH frame (batch.c), on top of the frame builder
 * of src/common/wire.h (struct wire_batch, wire_batch_seal ...): what the
 * agent adds is the local endpoint of a process's spans and its
 * container.
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

/* Tags the agent adds to every span of a process (its container, from its
 * cgroup: OpenTelemetry's container.id and container.name), encoded once
 * per process.  len 0: none. */
struct tag_items {
	uint32_t len;
	uint16_t n;
	uint8_t buf[2 * (SPANREC_ITEM_HDR + 16 + 64)];
};

/* Encode the container tags: container.id (the 64-digit id) when id is
 * not empty, container.name when name is not empty and id is.  Strings
 * are cut at 64 bytes. */
void tag_items_container(struct tag_items *t, const char *id, const char *name);

/* The bytes record rec (reclen bytes, decoded into r) takes once ep is
 * added as its local endpoint (when r has none; ep may be NULL) and the
 * tags (may be NULL), and that record written at dst (batch_rec_size()
 * bytes). */
uint64_t batch_rec_size(uint32_t reclen, const struct spanrec *r, const struct ep_item *ep,
			const struct tag_items *tags);
void batch_rec_copy(uint8_t *dst, const void *rec, uint32_t reclen, const struct spanrec *r,
		    const struct ep_item *ep, const struct tag_items *tags);

/*
 * Append the span record rec (reclen bytes, already decoded into r) to b,
 * adding ep as its local endpoint when r has none (ep may be NULL), and
 * the tags (may be NULL).
 * Returns 0, -ENOSPC when the batch is full (nothing appended: flush and
 * retry), or -E2BIG when the span could never fit in an empty batch.
 */
int batch_add(struct wire_batch *b, const void *rec, uint32_t reclen,
	      const struct spanrec *r, const struct ep_item *ep,
	      const struct tag_items *tags);

#endif
