// SPDX-License-Identifier: MIT
/*
 * The producer side of the shm span ring (include/fay/ring.h).  One thread
 * owns a ring at a time; it never waits, never reads what the consumer does
 * (the consumer writes nothing to the file), takes no lock, makes no
 * syscall and allocates nothing.  The ordering argument is in README.md
 * next to this file.
 */
#include <errno.h>
#include <string.h>

#include "common/atomic.h"
#include "common/err.h"
#include "common/ring/ring.h"

/*
 * Bind p to the ring at base: its struct fay_ring_ctl followed by nslots
 * slots (a power of two).  Continues from the published head and record
 * count, so a ring left by a thread that exited (even in the middle of a
 * record: that record was never committed) is reused without a gap in
 * positions or record numbers.
 */
void ring_prod_init(struct ring_prod *p, void *base, uint32_t nslots)
{
	p->ctl = base;
	p->slots = (struct fay_slot *)((char *)base + FAY_RING_CTL_SIZE);
	p->mask = nslots - 1;
	p->head = smp_load_acquire(&p->ctl->head);
	p->records = smp_load_acquire(&p->ctl->records);
}

/* Largest payload one record can carry in a ring of nslots slots (0 when
 * nslots < 2: such a ring holds no record at all). */
uint32_t ring_max_payload(uint32_t nslots)
{
	uint32_t slots = ring_max_rec_slots(nslots);

	if (!slots)
		return 0;
	return slots * FAY_SLOT_DATA - (uint32_t)sizeof(struct fay_rec_hdr);
}

/* A read position in the caller's pieces. */
struct piece_cursor {
	const struct ring_piece *pc;
	unsigned n, i;
	uint32_t off;           /* bytes of pc[i] already copied */
};

/* Copy k <= FAY_SLOT_DATA bytes with fixed-size moves the compiler inlines
 * (two overlapping ones for odd sizes): a call into libc's memcpy for
 * every piece of every slot would cost more than the copy itself. */
static inline void copy_small(uint8_t *dst, const uint8_t *src, uint32_t k)
{
	if (k >= 32) {
		memcpy(dst, src, 32);
		if (k > 32)
			memcpy(dst + k - 32, src + k - 32, 32);
	} else if (k >= 16) {
		memcpy(dst, src, 16);
		memcpy(dst + k - 16, src + k - 16, 16);
	} else if (k >= 8) {
		memcpy(dst, src, 8);
		memcpy(dst + k - 8, src + k - 8, 8);
	} else if (k >= 4) {
		memcpy(dst, src, 4);
		memcpy(dst + k - 4, src + k - 4, 4);
	} else {
		while (k--)
			*dst++ = *src++;
	}
}

/* Copy up to len (<= FAY_SLOT_DATA) bytes from the cursor to dst; returns
 * the bytes copied (fewer than len only at the end of the pieces). */
static uint32_t cursor_copy(struct piece_cursor *c, uint8_t *dst, uint32_t len)
{
	uint32_t done = 0;

	while (done < len && c->i < c->n) {
		const struct ring_piece *pc = &c->pc[c->i];
		uint32_t k = pc->len - c->off;

		if (k > len - done)
			k = len - done;
		if (k) {
			copy_small(dst + done, (const uint8_t *)pc->p + c->off, k);
			done += k;
			c->off += k;
		}
		if (c->off == pc->len) {
			c->i++;
			c->off = 0;
		}
	}
	return done;
}

/* Records up to this many payload bytes are gathered on the stack first
 * and then copied a whole slot at a time: much faster than walking the
 * pieces slot by slot (about half the time for a 150-byte span). */
#define STAGE_MAX 1024u

/* Open slot i of a record at pos: its seq BUSY, a fence, and in the first
 * slot the record header; *d and *room say where the payload goes and how
 * much of it the slot takes.  The caller fills it and publishes the seq. */
static inline struct fay_slot *slot_begin(struct ring_prod *p, uint64_t pos, uint32_t i,
					  const struct fay_rec_hdr *hdr, uint8_t **d,
					  uint32_t *room)
{
	struct fay_slot *s = &p->slots[pos & p->mask];

	*d = s->data;
	*room = FAY_SLOT_DATA;
	WRITE_ONCE(s->seq, pos << 2 | FAY_SEQ_BUSY);
	smp_wmb();
	if (i == 0) {
		memcpy(*d, hdr, sizeof(*hdr));
		*d += sizeof(*hdr);
		*room -= sizeof(*hdr);
	}
	return s;
}

/* Publish the slots' data one slot at a time: seq BUSY, fence, data, seq
 * committed.  src is the whole record (header + payload), nsl slots long. */
static inline uint64_t put_staged(struct ring_prod *p, uint64_t pos,
				  const uint8_t *src, uint32_t nsl)
{
	for (uint32_t i = 0; i < nsl; i++, pos++, src += FAY_SLOT_DATA) {
		struct fay_slot *s = &p->slots[pos & p->mask];

		WRITE_ONCE(s->seq, pos << 2 | FAY_SEQ_BUSY);
		smp_wmb();
		memcpy(s->data, src, FAY_SLOT_DATA);
		smp_store_release(&s->seq, pos << 2 | (i == 0 ? FAY_SEQ_FIRST : 0));
	}
	return pos;
}

/* Fill the data of slot s (room bytes at d) from src, len bytes left:
 * whole when len >= room, else the tail zeroed first (no stale bytes in
 * the file) and the rest copied.  Returns the bytes taken. */
static inline uint32_t fill_slot(uint8_t *d, uint32_t room, const uint8_t *src,
				 uint32_t len)
{
	if (len >= room) {
		memcpy(d, src, room);
		return room;
	}
	memset(d, 0, room);
	copy_small(d, src, len);
	return len;
}

/* The same straight from one contiguous payload (no staging copy): whole
 * slots are copied with fixed-size moves, the last one's tail is zeroed
 * and then filled.  The first slot (header and the payload's first bytes)
 * is done before the loop over the others, so that every copy has a size
 * the compiler knows. */
static inline uint64_t put_direct(struct ring_prod *p, uint64_t pos,
				  const struct fay_rec_hdr *hdr,
				  const uint8_t *src, uint32_t len)
{
	struct fay_slot *s = &p->slots[pos & p->mask];
	uint32_t k;

	WRITE_ONCE(s->seq, pos << 2 | FAY_SEQ_BUSY);
	smp_wmb();
	memcpy(s->data, hdr, sizeof(*hdr));
	k = fill_slot(s->data + sizeof(*hdr), FAY_SLOT_DATA - sizeof(*hdr), src, len);
	src += k;
	len -= k;
	smp_store_release(&s->seq, pos << 2 | FAY_SEQ_FIRST);
	for (uint32_t i = 1; i < hdr->nslots; i++) {
		pos++;
		s = &p->slots[pos & p->mask];
		WRITE_ONCE(s->seq, pos << 2 | FAY_SEQ_BUSY);
		smp_wmb();
		k = fill_slot(s->data, FAY_SLOT_DATA, src, len);
		src += k;
		len -= k;
		smp_store_release(&s->seq, pos << 2);
	}
	return pos + 1;
}

/* The same for a record too big to stage: copy from the pieces. */
static uint64_t put_pieces(struct ring_prod *p, uint64_t pos,
			   const struct fay_rec_hdr *hdr,
			   const struct ring_piece *pc, unsigned n)
{
	struct piece_cursor cur = { .pc = pc, .n = n };

	for (uint32_t i = 0; i < hdr->nslots; i++, pos++) {
		uint8_t *d;
		uint32_t room;
		struct fay_slot *s = slot_begin(p, pos, i, hdr, &d, &room);

		cursor_copy(&cur, d, room);
		smp_store_release(&s->seq, pos << 2 | (i == 0 ? FAY_SEQ_FIRST : 0));
	}
	return pos;
}

/* The header of the ring's next record: len payload bytes of type. */
static inline struct fay_rec_hdr rec_hdr(const struct ring_prod *p, uint16_t type,
					 uint32_t len)
{
	struct fay_rec_hdr hdr;

	hdr.rec_no = p->records;
	hdr.len = len;
	hdr.type = type;
	hdr.nslots = (uint16_t)ring_rec_slots(len);
	return hdr;
}

/* The record is in: the ring's head moves to pos, counted, and both are
 * published (records, then head, with release). */
static inline void rec_commit(struct ring_prod *p, uint64_t pos)
{
	p->head = pos;
	p->records++;
	smp_store_release(&p->ctl->records, p->records);
	smp_store_release(&p->ctl->head, p->head);
}

/*
 * Write one record of the given type whose payload is the concatenation of
 * the n pieces pc[0..n-1] (gather).  Returns 0, or -E2BIG (nothing
 * written) when the payload is larger than ring_max_payload().  When the
 * consumer is behind, the oldest records are overwritten; the consumer
 * counts them as lost.
 *
 * Per slot: seq = pos<<2|BUSY, write barrier, the data, then seq =
 * pos<<2 (|FIRST on the record's first slot) with release.  After the last
 * slot: ctl->records then ctl->head, both with release.
 */
int ring_write(struct ring_prod *p, uint16_t type, const struct ring_piece *pc,
	       unsigned n)
{
	struct fay_rec_hdr hdr;
	uint64_t total = 0, pos;
	unsigned i;

	for (i = 0; i < n; i++)
		total += pc[i].len;
	if (unlikely(total > ring_max_payload(p->mask + 1)))
		return -E2BIG;

	if (n == 1)
		return ring_write1(p, type, pc[0].p, (uint32_t)total);
	hdr = rec_hdr(p, type, (uint32_t)total);
	if (total <= STAGE_MAX) {
		/* Whole slots are copied: room for the last one's tail. */
		uint8_t buf[sizeof(hdr) + STAGE_MAX + FAY_SLOT_DATA]
			__attribute__((aligned(16)));
		uint32_t off = sizeof(hdr);

		memcpy(buf, &hdr, sizeof(hdr));
		for (i = 0; i < n; i++) {
			if (pc[i].len)
				memcpy(buf + off, pc[i].p, pc[i].len);
			off += pc[i].len;
		}
		/* No stale stack bytes in the file. */
		memset(buf + off, 0, hdr.nslots * FAY_SLOT_DATA - off);
		pos = put_staged(p, p->head, buf, hdr.nslots);
	} else {
		pos = put_pieces(p, p->head, &hdr, pc, n);
	}
	rec_commit(p, pos);
	return 0;
}

int ring_write1(struct ring_prod *p, uint16_t type, const void *payload, uint32_t len)
{
	struct fay_rec_hdr hdr;

	if (unlikely(len > ring_max_payload(p->mask + 1)))
		return -E2BIG;
	hdr = rec_hdr(p, type, len);
	rec_commit(p, put_direct(p, p->head, &hdr, payload, len));
	return 0;
}
