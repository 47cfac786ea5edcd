// SPDX-License-Identifier: MIT
/*
 * The consumer side of the shm span ring (include/fay/ring.h), run by the
 * agent on a ring another process writes.  It writes nothing to the ring,
 * trusts nothing it reads there, and keeps its own cursor (pos, rec_no),
 * which the agent may persist and resume from.
 *
 * Every record committed to the ring ends up exactly once in either
 * c->delivered or c->lost (after ring_cons_finish()): records are
 * delivered only when every slot's sequence word was right before and
 * after its copy, and lost records are counted from the gap in rec_no
 * numbers.  Values that no correct producer can write are counted in
 * c->corrupt and described in c->err; the consumer then moves forward.
 * The argument is in README.md next to this file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic.h"
#include "common/err.h"
#include "common/ring/ring.h"

/* What reading the slot(s) at c->pos found. */
enum rd {
	RD_RECORD,      /* a whole record is in scratch */
	RD_SKIP,        /* c->pos moved on; nothing to deliver */
};

static inline const struct fay_slot *slot_at(const struct ring_cons *c,
					     uint64_t pos)
{
	return &c->slots[pos & c->mask];
}

/* Record one corrupt slot at the current position: count it, describe it,
 * and resynchronise from the next slot. */
__attribute__((format(printf, 2, 3)))
static enum rd corrupt(struct ring_cons *c, const char *fmt, ...)
{
	int n = snprintf(c->err, sizeof(c->err), "ring pos %" PRIu64 ": ", c->pos);
	va_list ap;

	if (n > 0 && (size_t)n < sizeof(c->err)) {
		va_start(ap, fmt);
		vsnprintf(c->err + n, sizeof(c->err) - n, fmt, ap);
		va_end(ap);
	}
	c->corrupt++;
	c->pos++;
	c->resync = 1;
	return RD_SKIP;
}

/*
 * Is head a value the producer can have published?  It only publishes head
 * after committing the slot at head - 1, so that slot's sequence word holds
 * position head - 1, or a later position of the same ring index if the
 * producer has moved on since.  This keeps a scribbled ctl->head from
 * making the consumer jump past the records still to come.
 */
static int head_plausible(const struct ring_cons *c, uint64_t head)
{
	uint64_t seq, spos;

	if (!head)
		return 1;
	seq = smp_load_acquire(&slot_at(c, head - 1)->seq);
	spos = FAY_SEQ_POS(seq);
	return spos >= head - 1 && !((spos ^ (head - 1)) & c->mask);
}

/*
 * Does seq, found in the slot for position pos, belong to a later lap of
 * the same ring index, i.e. has the producer overwritten (or is it
 * overwriting) the slot?  There is no useful upper bound: a producer that
 * is faster than us can be any number of laps ahead.  A scribbled seq that
 * passes this test only makes us skip to the oldest position the ring
 * still holds (see lapped()), which loses nothing that was still there.
 */
static inline int is_later_lap(const struct ring_cons *c, uint64_t pos,
			       uint64_t seq)
{
	uint64_t spos = FAY_SEQ_POS(seq);

	return spos > pos && !((spos ^ pos) & c->mask);
}

/*
 * We have been lapped at c->pos: what was there is gone (counted lost later
 * from the rec_no gap).  Move to the oldest position the ring can still
 * hold, and look for the next record start from there.
 */
static enum rd lapped(struct ring_cons *c)
{
	uint64_t head = smp_load_acquire(&c->ctl->head);
	uint64_t next = c->pos + 1;

	if (head > c->nslots && head - c->nslots > next && head_plausible(c, head))
		next = head - c->nslots;
	c->pos = next;
	c->resync = 1;
	c->laps++;
	return RD_SKIP;
}

/* The slot at c->pos is not the start of a committed record. */
static enum rd not_first(struct ring_cons *c, uint64_t seq)
{
	uint64_t pos = c->pos;

	if (seq == pos << 2) {
		/* A committed middle slot: expected while resynchronising. */
		if (c->resync) {
			c->pos++;
			return RD_SKIP;
		}
		return corrupt(c, "slot seq %#" PRIx64 " is a record's middle slot "
			       "where a record should start", seq);
	}
	if (is_later_lap(c, pos, seq))
		return lapped(c);
	if (FAY_SEQ_POS(seq) == pos && (seq & FAY_SEQ_BUSY))
		return corrupt(c, "slot seq %#" PRIx64 " still busy below ctl.head",
			       seq);
	return corrupt(c, "slot seq %#" PRIx64 " holds position %" PRIu64
		       ", not %" PRIu64, seq, FAY_SEQ_POS(seq), pos);
}

/* What a seqlock read of one slot found. */
enum cp {
	CP_OK,          /* copied, seq was the one wanted before and after */
	CP_WRONG,       /* seq was not the one wanted: nothing copied */
	CP_TORN,        /* seq changed during the copy: being overwritten */
};

/* Copy slot s into dst if its seq is want before and after the copy. */
static inline enum cp copy_slot(const struct fay_slot *s, uint64_t want,
				uint8_t *dst, uint64_t *found)
{
	uint64_t seq = smp_load_acquire(&s->seq);

	if (seq != want) {
		*found = seq;
		return CP_WRONG;
	}
	memcpy(dst, s->data, FAY_SLOT_DATA);
	smp_rmb();
	return READ_ONCE(s->seq) == want ? CP_OK : CP_TORN;
}

/*
 * Read the record starting at c->pos (head and records are the published
 * values loaded for this drain).  On RD_RECORD, *h is its validated header
 * and scratch holds its slots' data; c->pos has not moved.
 */
static enum rd read_record(struct ring_cons *c, uint64_t head, uint64_t records,
			   struct fay_rec_hdr *h)
{
	uint64_t pos = c->pos, want = pos << 2 | FAY_SEQ_FIRST, seq;
	uint32_t maxsl = ring_max_rec_slots(c->nslots), i;

	switch (copy_slot(slot_at(c, pos), want, c->scratch, &seq)) {
	case CP_OK:
		break;
	case CP_WRONG:
		return not_first(c, seq);
	case CP_TORN:
		return lapped(c);
	}
	memcpy(h, c->scratch, sizeof(*h));

	if (h->nslots < 1 || h->nslots > maxsl)
		return corrupt(c, "record nslots %u not in 1..%u", h->nslots, maxsl);
	if (ring_rec_slots(h->len) != h->nslots)
		return corrupt(c, "record len %u takes %" PRIu64 " slots, nslots says %u",
			       h->len, ring_rec_slots(h->len), h->nslots);
	if (!ring_rec_type_known(h->type))
		return corrupt(c, "record type %u unknown", h->type);
	if (h->rec_no < c->rec_no || (!c->resync && h->rec_no != c->rec_no))
		return corrupt(c, "record rec_no %" PRIu64 ", expected %s%" PRIu64,
			       h->rec_no, c->resync ? ">= " : "", c->rec_no);
	if (h->rec_no >= records)
		return corrupt(c, "record rec_no %" PRIu64 " not below ctl.records %"
			       PRIu64, h->rec_no, records);
	/* Each record skipped since the last one delivered took a slot at
	 * least: a bigger gap is a scribbled rec_no, not a loss. */
	if (h->rec_no - c->rec_no > pos - c->end_pos)
		return corrupt(c, "record rec_no %" PRIu64 " would mean %" PRIu64
			       " records lost in the %" PRIu64 " slots since the last one",
			       h->rec_no, h->rec_no - c->rec_no, pos - c->end_pos);
	if (pos + h->nslots > head)
		return corrupt(c, "record of %u slots runs past ctl.head %" PRIu64,
			       h->nslots, head);

	for (i = 1; i < h->nslots; i++) {
		uint64_t p = pos + i;

		switch (copy_slot(slot_at(c, p), p << 2,
				  c->scratch + (size_t)i * FAY_SLOT_DATA, &seq)) {
		case CP_OK:
			continue;
		case CP_TORN:
			return lapped(c);
		case CP_WRONG:
			if (is_later_lap(c, p, seq))
				return lapped(c);
			/* Skip the record up to and including the bad slot. */
			c->pos = p;
			return corrupt(c, "slot seq %#" PRIx64 " where the record's "
				       "slot %u (seq %#" PRIx64 ") should be",
				       seq, i, p << 2);
		}
	}
	return RD_RECORD;
}

int ring_cons_init(struct ring_cons *c, const void *base, uint32_t nslots,
		   uint64_t pos, uint64_t rec_no)
{
	memset(c, 0, sizeof(*c));
	if (nslots < 2 || (nslots & (nslots - 1)))
		return -EINVAL;
	c->ctl = base;
	c->slots = (const struct fay_slot *)((const char *)base + FAY_RING_CTL_SIZE);
	c->nslots = nslots;
	c->mask = nslots - 1;
	c->pos = pos;
	c->rec_no = rec_no;
	/* A resumed cursor may have been saved while resynchronising. */
	c->resync = pos || rec_no;
	c->scratch = malloc((size_t)ring_max_rec_slots(nslots) * FAY_SLOT_DATA);
	if (!c->scratch)
		return -ENOMEM;
	return 0;
}

void ring_cons_free(struct ring_cons *c)
{
	if (!c)
		return;
	free(c->scratch);
	c->scratch = NULL;
}

/*
 * Deliver up to max records (0: every record published when the call
 * began) to fn, oldest first.  Work per call is bounded by the ring size
 * whatever the ring contains.  Returns the records delivered, or fn's
 * negative value (that record stays unconsumed).
 */
int ring_drain(struct ring_cons *c, ring_rec_fn fn, void *ctx, unsigned max)
{
	uint64_t head = smp_load_acquire(&c->ctl->head), records;
	struct fay_rec_hdr h;
	unsigned n = 0;
	int ret;

	if (head == c->pos)
		return 0;
	if (head < c->pos) {
		snprintf(c->err, sizeof(c->err), "ring pos %" PRIu64 ": ctl.head %"
			 PRIu64 " is behind the consumer", c->pos, head);
		return 0;
	}
	if (!head_plausible(c, head)) {
		if (head == c->bad_head)
			return 0;       /* already counted and reported */
		c->bad_head = head;
		c->corrupt++;
		snprintf(c->err, sizeof(c->err), "ring pos %" PRIu64 ": ctl.head %"
			 PRIu64 " impossible: slot seq before it is %#" PRIx64,
			 c->pos, head, READ_ONCE(slot_at(c, head - 1)->seq));
		return 0;
	}
	records = smp_load_acquire(&c->ctl->records);

	while (c->pos < head && (!max || n < max) && n < INT32_MAX) {
		if (head - c->pos > c->nslots) {
			c->pos = head - c->nslots;
			c->resync = 1;
			c->laps++;
		}
		if (read_record(c, head, records, &h) != RD_RECORD)
			continue;
		ret = fn(ctx, h.type, c->scratch + sizeof(h), h.len, h.rec_no);
		if (ret < 0)
			return ret;
		c->lost += h.rec_no - c->rec_no;
		c->rec_no = h.rec_no + 1;
		c->delivered++;
		c->pos += h.nslots;
		c->end_pos = c->pos;
		c->resync = 0;
		n++;
	}
	return (int)n;
}

/*
 * The producer's process is gone: every record it committed that we have
 * not delivered is lost.  Call after a last ring_drain().  Returns the
 * records added to c->lost (0 and c->corrupt bumped when ctl->records is
 * impossible).  Calling it again adds nothing.
 */
uint64_t ring_cons_finish(struct ring_cons *c)
{
	uint64_t records = smp_load_acquire(&c->ctl->records);
	uint64_t head = smp_load_acquire(&c->ctl->head);
	uint64_t add;

	/* Every record takes at least one slot: records <= head, and the
	 * ones not delivered lie after the last one that was. */
	if (records < c->rec_no || records > head || head < c->end_pos ||
	    records - c->rec_no > head - c->end_pos) {
		c->corrupt++;
		snprintf(c->err, sizeof(c->err), "ring pos %" PRIu64 ": ctl.records %"
			 PRIu64 " impossible (next rec_no %" PRIu64 ", ctl.head %"
			 PRIu64 ")", c->pos, records, c->rec_no, head);
		return 0;
	}
	add = records - c->rec_no;
	c->lost += add;
	c->rec_no = records;
	if (c->pos < head)
		c->pos = head;
	return add;
}
