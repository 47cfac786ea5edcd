// SPDX-License-Identifier: MIT
/*
 * The ring producer, checked against the layout of include/fay/ring.h by
 * reading the slots directly (no consumer involved): sequence words, record
 * headers, gathered payload bytes, wrap-around, -E2BIG, and a second
 * producer continuing where the first one stopped.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/ring/ring.h"
#include "test.h"

#define NSLOTS 64u

static struct {
	struct fay_ring_ctl ctl;
	struct fay_slot slots[NSLOTS];
} ring;

/* Reassemble the record whose first slot is at position pos; returns its
 * header and fills out (cap bytes).  -1 when a seq word is not what the
 * layout says. */
static int read_rec(uint64_t pos, struct fay_rec_hdr *h, uint8_t *out, size_t cap)
{
	const struct fay_slot *s = &ring.slots[pos & (NSLOTS - 1)];
	uint8_t all[NSLOTS * FAY_SLOT_DATA];
	unsigned i;

	if (s->seq != (pos << 2 | FAY_SEQ_FIRST))
		return -1;
	memcpy(h, s->data, sizeof(*h));
	if (h->nslots < 1 || h->nslots > NSLOTS / 2)
		return -1;
	for (i = 0; i < h->nslots; i++) {
		s = &ring.slots[(pos + i) & (NSLOTS - 1)];
		if (i && s->seq != (pos + i) << 2)
			return -1;
		memcpy(all + i * FAY_SLOT_DATA, s->data, FAY_SLOT_DATA);
	}
	if (h->len > cap)
		return -1;
	memcpy(out, all + sizeof(*h), h->len);
	return 0;
}

int main(void)
{
	struct ring_prod p;
	uint8_t src[2048], got[2048];
	struct fay_rec_hdr h;
	uint32_t max = ring_max_payload(NSLOTS);
	uint64_t pos = 0, rec = 0;
	int bad = 0;

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 3);

	is_int(max, 32 * 56 - 16, "max payload is half the ring less the header");
	is_int(ring_max_payload(1), 0, "a 1-slot ring holds nothing");
	is_int(ring_max_payload(2), 40, "a 2-slot ring holds one 1-slot record");
	is_int(ring_max_rec_slots(1u << 20), UINT16_MAX, "record slots capped by the 16-bit field");

	ring_prod_init(&p, &ring, NSLOTS);
	is_u64(p.head, 0, "new ring starts at position 0");

	/* One record in three pieces, across slot boundaries. */
	struct ring_piece pc[3] = { { src, 10 }, { NULL, 0 }, { src + 10, 90 } };
	is_int(ring_write(&p, FAY_REC_SPAN, pc, 3), 0, "write a gathered record");
	ok(read_rec(0, &h, got, sizeof(got)) == 0, "first record readable at position 0");
	ok(h.rec_no == 0 && h.len == 100 && h.type == FAY_REC_SPAN && h.nslots == 3,
	   "header: rec_no %llu len %u type %u nslots %u", (unsigned long long)h.rec_no,
	   h.len, h.type, h.nslots);
	ok(!memcmp(got, src, 100), "gathered payload bytes intact");
	is_u64(ring.ctl.head, 3, "head published after the record");
	is_u64(ring.ctl.records, 1, "records published");
	pos = 3;
	rec = 1;

	/* Every size 0..max, wrapping the ring many times. */
	for (uint32_t len = 0; len <= max; len++) {
		struct ring_piece one = { src + (len % 97), len };

		if (ring_write(&p, FAY_REC_SPAN, &one, 1)) {
			bad++;
			continue;
		}
		if (read_rec(pos, &h, got, sizeof(got)) || h.rec_no != rec ||
		    h.len != len || h.nslots != ring_rec_slots(len) ||
		    memcmp(got, src + (len % 97), len)) {
			if (bad++ < 3)
				diag("record of %u bytes at position %llu wrong", len,
				     (unsigned long long)pos);
		}
		pos += ring_rec_slots(len);
		rec++;
	}
	is_int(bad, 0, "records of every size 0..%u written and read back", max);
	is_u64(ring.ctl.head, pos, "head is the sum of record slots");
	is_u64(ring.ctl.records, rec, "records counts every write");
	ok(pos > 20 * NSLOTS, "wrapped the ring %llu times", (unsigned long long)(pos / NSLOTS));

	/* Too big: nothing written. */
	struct ring_piece big[2] = { { src, max }, { src, 1 } };
	is_int(ring_write(&p, FAY_REC_SPAN, big, 2), -E2BIG, "max+1 bytes: -E2BIG");
	is_u64(ring.ctl.head, pos, "head unchanged after -E2BIG");
	is_u64(ring.ctl.records, rec, "records unchanged after -E2BIG");

	/* A new producer (another thread) continues the numbering. */
	struct ring_prod q;
	struct ring_piece five = { "hello", 5 };

	ring_prod_init(&q, &ring, NSLOTS);
	is_u64(q.head, pos, "second producer resumes at the published head");
	is_int(ring_write(&q, FAY_REC_SPAN, &five, 1), 0, "second producer writes");
	ok(read_rec(pos, &h, got, sizeof(got)) == 0 && h.rec_no == rec && h.len == 5 &&
	   !memcmp(got, "hello", 5), "its record follows with rec_no %llu",
	   (unsigned long long)rec);

	return test_done();
}
