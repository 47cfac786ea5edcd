/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the ring unit tests: a ring in exactly-sized heap
 * memory (so ASan sees any read outside it), and self-checking payloads
 * that carry a producer id, a sequence number and a checksum.
 */
#ifndef FAY_TEST_RINGTEST_H
#define FAY_TEST_RINGTEST_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/ring/ring.h"

/* A zeroed ring of nslots slots (ctl + slots), nothing around it. */
static inline void *ringmem_new(uint32_t nslots)
{
	size_t sz = FAY_RING_CTL_SIZE + (size_t)nslots * FAY_SLOT_SIZE;
	void *m = aligned_alloc(64, sz);

	if (m)
		memset(m, 0, sz);
	return m;
}

static inline struct fay_ring_ctl *ringmem_ctl(void *m)
{
	return m;
}

static inline struct fay_slot *ringmem_slot(void *m, uint32_t nslots, uint64_t pos)
{
	return (struct fay_slot *)((char *)m + FAY_RING_CTL_SIZE) + (pos & (nslots - 1));
}

/* A test payload: struct tp_hdr, filler bytes derived from (id, seq),
 * then the 64-bit FNV-1a of everything before it. */
struct tp_hdr {
	uint32_t id;
	uint32_t len;            /* the whole payload */
	uint64_t seq;
};
#define TP_MIN (sizeof(struct tp_hdr) + 8)

static inline uint64_t tp_fnv(const uint8_t *p, size_t n)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	while (n--)
		h = (h ^ *p++) * UINT64_C(0x100000001b3);
	return h;
}

/* Build a payload of len bytes (>= TP_MIN) into buf. */
static inline uint32_t tp_make(uint8_t *buf, uint32_t len, uint32_t id, uint64_t seq)
{
	struct tp_hdr h = { .id = id, .len = len, .seq = seq };
	uint64_t sum;
	uint32_t i;

	memcpy(buf, &h, sizeof(h));
	for (i = sizeof(h); i < len - 8; i++)
		buf[i] = (uint8_t)(seq * 31 + i * 7 + id);
	sum = tp_fnv(buf, len - 8);
	memcpy(buf + len - 8, &sum, 8);
	return len;
}

/* 0 if buf (len bytes) is an intact payload; fills *h. */
static inline int tp_check(const uint8_t *buf, uint32_t len, struct tp_hdr *h)
{
	uint64_t sum;

	if (len < TP_MIN)
		return -1;
	memcpy(h, buf, sizeof(*h));
	memcpy(&sum, buf + len - 8, 8);
	return h->len == len && sum == tp_fnv(buf, len - 8) ? 0 : -1;
}

#endif
