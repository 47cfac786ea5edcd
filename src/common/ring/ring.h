/* SPDX-License-Identifier: MIT */
/*
 * The shm span ring, producer and consumer sides.  The layout is the ABI in
 * include/fay/ring.h; the algorithm and its memory-ordering argument are in
 * src/common/ring/README.md.
 *
 * Producer (libfay, one thread per ring): no lock, no syscall, no malloc.
 * Consumer (the agent, another process): never trusts what it reads.
 */
#ifndef FAY_COMMON_RING_H
#define FAY_COMMON_RING_H

#include <stddef.h>
#include <stdint.h>

#include <fay/ring.h>

/* ---- limits shared by both sides ---------------------------------------- */

/* Slots the largest record may take in a ring of nslots slots: half the ring
 * (so at least two records always fit), and no more than the 16-bit
 * fay_rec_hdr.nslots field can say.  0 when nslots < 2 (nothing fits). */
static inline uint32_t ring_max_rec_slots(uint32_t nslots)
{
	uint32_t half = nslots / 2;

	return half > UINT16_MAX ? UINT16_MAX : half;
}

/* Slots a record with a payload of len bytes takes. */
static inline uint64_t ring_rec_slots(uint64_t len)
{
	return (sizeof(struct fay_rec_hdr) + len + FAY_SLOT_DATA - 1) / FAY_SLOT_DATA;
}

/* Record types this build knows (the consumer rejects the others). */
static inline int ring_rec_type_known(unsigned type)
{
	return type == FAY_REC_SPAN;
}

/* ---- producer ---------------------------------------------------------- */

struct ring_prod {
	struct fay_ring_ctl *ctl;
	struct fay_slot *slots;
	uint32_t mask;          /* ring_slots - 1 */
	uint64_t head;          /* private copies of ctl->head / ctl->records */
	uint64_t records;
};

/* Bind to the ring at base (ctl followed by nslots slots, nslots a power of
 * two).  Continues from the ring's published head, so a ring left by an
 * exited thread can be reused by a new one. */
void ring_prod_init(struct ring_prod *p, void *base, uint32_t nslots);

/* Largest payload one record can carry in a ring of nslots slots. */
uint32_t ring_max_payload(uint32_t nslots);

/* Write one record whose payload is the concatenation of n pieces.
 * Returns 0, or -E2BIG when the record cannot fit in the ring at all.
 * Overwrites the oldest records when the consumer is behind. */
struct ring_piece {
	const void *p;
	uint32_t len;
};
int ring_write(struct ring_prod *p, uint16_t type, const struct ring_piece *pc,
	       unsigned n);

/* ring_write() of one contiguous payload of len bytes (a span's pool
 * handle): the same record, without the pieces' bookkeeping. */
int ring_write1(struct ring_prod *p, uint16_t type, const void *payload, uint32_t len);

/* ---- consumer ---------------------------------------------------------- */

struct ring_cons {
	const struct fay_ring_ctl *ctl;
	const struct fay_slot *slots;
	uint32_t nslots, mask;
	uint64_t pos;           /* next slot position to read */
	uint64_t rec_no;        /* next record number expected */
	uint64_t delivered;     /* records handed to the callback */
	uint64_t lost;          /* records overwritten before they were read */
	uint64_t corrupt;       /* slots skipped because they made no sense */
	uint8_t *scratch;       /* one record, header included:
				 * ring_max_rec_slots() * FAY_SLOT_DATA bytes */
	char err[160];          /* the last corruption found, for reports */
	int resync;             /* records were skipped: the next record start
				 * may be anywhere and its rec_no > rec_no */
	uint64_t laps;          /* times the producer was found overwriting
				 * what we were about to read (informational) */
	uint64_t bad_head;      /* last impossible ctl->head seen (counted once) */
	uint64_t end_pos;       /* the slot after the last record delivered (0
				 * until one is): the records lost before the
				 * next one lie in [end_pos, its position), one
				 * slot each at least, which bounds a rec_no gap */
};

/* Prepare to consume the ring at base, resuming at (pos, rec_no) (0, 0 for
 * a new ring).  Returns 0, -EINVAL (nslots not a power of two >= 2) or
 * -ENOMEM.  Free with ring_cons_free() (which accepts a ring_cons that
 * failed to initialise). */
int ring_cons_init(struct ring_cons *c, const void *base, uint32_t nslots,
		   uint64_t pos, uint64_t rec_no);
void ring_cons_free(struct ring_cons *c);

/* Called once per delivered record; payload is valid only during the call.
 * A negative return stops the drain and is returned by ring_drain(); the
 * record is then not consumed (it will be offered again). */
typedef int (*ring_rec_fn)(void *ctx, uint16_t type, const void *payload,
			   uint32_t len, uint64_t rec_no);

/* Deliver up to max records (0 = all available).  Returns the number of
 * records delivered, or the callback's negative value. */
int ring_drain(struct ring_cons *c, ring_rec_fn fn, void *ctx, unsigned max);

/* The producer is gone (its process exited): after a last ring_drain(),
 * count every record it committed but we never got as lost, so that
 * delivered + lost == ctl->records.  Returns the records added to lost. */
uint64_t ring_cons_finish(struct ring_cons *c);

#endif
