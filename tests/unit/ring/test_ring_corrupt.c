// SPDX-License-Identifier: MIT
/*
 * A ring scribbled by a buggy or hostile process: every kind of impossible
 * value in a sequence word, a record header or the ring's ctl is reported
 * (c->corrupt, c->err naming the position and the field), skipped, and the
 * consumer keeps going with exact counts.  Then random fuzz: seq words and
 * headers, and any byte of the ring, under ASan (which checks that nothing
 * is read outside the ring or the scratch buffer).
 */
#include <errno.h>
#include <time.h>

#include "ringtest.h"
#include "test.h"

#define NSLOTS 64u
#define RECLEN 100u      /* 3 slots a record: record k starts at 3k */

struct seen {
	uint64_t n, bad, next_min;
};

static int on_rec(void *ctx, uint16_t type, const void *payload, uint32_t len,
		  uint64_t rec_no)
{
	struct seen *s = ctx;
	struct tp_hdr h;

	if (tp_check(payload, len, &h) || h.seq != rec_no || rec_no < s->next_min)
		s->bad++;
	s->next_min = rec_no + 1;
	s->n++;
	return 0;
}

static void write_n(struct ring_prod *p, uint64_t *seq, unsigned n, uint32_t len)
{
	uint8_t buf[4096];

	while (n--) {
		struct ring_piece pc = { buf, tp_make(buf, len, 0, *seq) };

		ring_write(p, FAY_REC_SPAN, &pc, 1);
		(*seq)++;
	}
}

static struct fay_rec_hdr *hdr_of(void *m, uint64_t pos)
{
	return (struct fay_rec_hdr *)ringmem_slot(m, NSLOTS, pos)->data;
}

enum what {
	SEQ_ZERO, SEQ_NO_FIRST, SEQ_BUSY, SEQ_FUTURE_OTHER_INDEX, NSLOTS_ZERO,
	NSLOTS_BIG, LEN_BIG, LEN_SHORT, TYPE_BAD, RECNO_HIGH, RECNO_LOW,
	MIDDLE_SEQ, NCASES
};

static const struct {
	const char *name;
	const char *in_err;      /* the field the message must name */
	uint64_t err_pos;        /* the position it must name */
} cases[NCASES] = {
	[SEQ_ZERO]      = { "first slot seq zeroed", "holds position 0", 9 },
	[SEQ_NO_FIRST]  = { "FIRST bit cleared", "middle slot", 9 },
	[SEQ_BUSY]      = { "BUSY bit left set", "busy", 9 },
	[SEQ_FUTURE_OTHER_INDEX] = { "seq from another index", "holds position 1000001", 9 },
	[NSLOTS_ZERO]   = { "header nslots 0", "nslots 0", 9 },
	[NSLOTS_BIG]    = { "header nslots 60000", "nslots 60000", 9 },
	[LEN_BIG]       = { "header len 4000000000", "len 4000000000", 9 },
	[LEN_SHORT]     = { "header len 10 (1 slot, nslots 3)", "len 10", 9 },
	[TYPE_BAD]      = { "header type 99", "type 99", 9 },
	[RECNO_HIGH]    = { "header rec_no 7 where 3 is next", "rec_no 7", 9 },
	[RECNO_LOW]     = { "header rec_no 1 where 3 is next", "rec_no 1", 9 },
	[MIDDLE_SEQ]    = { "middle slot seq scribbled", "slot seq 0xdeadbeef", 10 },
};

/* 10 records (rec_no 0..9, record 3 at position 9), scribble record 3,
 * drain; then 10 more clean records, drain, finish. */
static void one_case(enum what w)
{
	void *m = ringmem_new(NSLOTS);
	struct fay_slot *s3 = ringmem_slot(m, NSLOTS, 9);
	struct fay_rec_hdr *h3 = hdr_of(m, 9);
	struct ring_prod p;
	struct ring_cons c;
	struct seen s = { 0 };
	uint64_t seq = 0;
	char pos_str[40];

	ring_prod_init(&p, m, NSLOTS);
	ring_cons_init(&c, m, NSLOTS, 0, 0);
	write_n(&p, &seq, 10, RECLEN);
	switch (w) {
	case SEQ_ZERO:      s3->seq = 0; break;
	case SEQ_NO_FIRST:  s3->seq &= ~FAY_SEQ_FIRST; break;
	case SEQ_BUSY:      s3->seq |= FAY_SEQ_BUSY; break;
	case SEQ_FUTURE_OTHER_INDEX: s3->seq = 1000001 << 2 | FAY_SEQ_FIRST; break;
	case NSLOTS_ZERO:   h3->nslots = 0; break;
	case NSLOTS_BIG:    h3->nslots = 60000; break;
	case LEN_BIG:       h3->len = 4000000000u; break;
	case LEN_SHORT:     h3->len = 10; break;
	case TYPE_BAD:      h3->type = 99; break;
	case RECNO_HIGH:    h3->rec_no = 7; break;
	case RECNO_LOW:     h3->rec_no = 1; break;
	case MIDDLE_SEQ:    ringmem_slot(m, NSLOTS, 10)->seq = 0xdeadbeef; break;
	case NCASES:        break;
	}
	ring_drain(&c, on_rec, &s, 0);
	snprintf(pos_str, sizeof(pos_str), "ring pos %llu:", (unsigned long long)cases[w].err_pos);
	is_u64(c.corrupt, 1, "%s: counted corrupt once", cases[w].name);
	ok(strstr(c.err, pos_str) && strstr(c.err, cases[w].in_err),
	   "%s: message names position and field: %s", cases[w].name, c.err);
	is_u64(c.delivered, 9, "%s: the other 9 delivered", cases[w].name);
	is_u64(c.lost, 1, "%s: the scribbled record counted lost", cases[w].name);

	write_n(&p, &seq, 10, RECLEN);
	ring_drain(&c, on_rec, &s, 0);
	ring_cons_finish(&c);
	ok(c.delivered == 19 && c.lost == 1 && c.corrupt == 1 && s.bad == 0,
	   "%s: keeps going (delivered %llu lost %llu corrupt %llu bad %llu)", cases[w].name,
	   (unsigned long long)c.delivered, (unsigned long long)c.lost,
	   (unsigned long long)c.corrupt, (unsigned long long)s.bad);
	ring_cons_free(&c);
	free(m);
}

/* Damage to the ring's ctl. */
static void ctl_cases(void)
{
	void *m = ringmem_new(NSLOTS);
	struct fay_ring_ctl *ctl = ringmem_ctl(m);
	struct ring_prod p;
	struct ring_cons c;
	struct seen s = { 0 };
	uint64_t seq = 0, head;

	ring_prod_init(&p, m, NSLOTS);
	ring_cons_init(&c, m, NSLOTS, 0, 0);
	write_n(&p, &seq, 10, RECLEN);

	head = ctl->head;
	ctl->head = UINT64_C(1) << 40;
	is_int(ring_drain(&c, on_rec, &s, 0), 0, "ctl.head 2^40: nothing delivered");
	ok(c.corrupt == 1 && strstr(c.err, "ctl.head 1099511627776"),
	   "ctl.head 2^40: reported, not jumped to: %s", c.err);
	is_u64(c.pos, 0, "ctl.head 2^40: consumer stays put");
	ring_drain(&c, on_rec, &s, 0);
	is_u64(c.corrupt, 1, "ctl.head 2^40 again: counted once");
	ctl->head = head;
	is_int(ring_drain(&c, on_rec, &s, 0), 10, "ctl.head restored: all 10 delivered");

	ctl->head = 5;
	is_int(ring_drain(&c, on_rec, &s, 0), 0, "ctl.head behind the consumer: nothing");
	ok(strstr(c.err, "behind"), "reported: %s", c.err);
	write_n(&p, &seq, 3, RECLEN); /* the producer republishes its head */
	is_int(ring_drain(&c, on_rec, &s, 0), 3, "producer's next write repairs ctl.head");

	ctl->records = 2;
	is_u64(ring_cons_finish(&c), 0, "ctl.records below the next rec_no: adds nothing");
	ok(c.corrupt == 2 && strstr(c.err, "ctl.records 2"), "reported: %s", c.err);
	ctl->records = ctl->head + 1;
	is_u64(ring_cons_finish(&c), 0, "ctl.records above ctl.head: adds nothing");
	ctl->records = 13;
	is_u64(ring_cons_finish(&c), 0, "ctl.records sane: finish adds the 0 unread");
	is_u64(c.delivered + c.lost, 13, "delivered + lost == 13 written");
	is_u64(s.bad, 0, "every delivered payload intact");
	ring_cons_free(&c);
	free(m);
}

/*
 * A forged rec_no or ctl.records far beyond what the slots can hold must
 * not become a loss (issue #10: a corrupt ring pushed a host's overwrite
 * counter to 4.6e18): each lost record took a slot at least.
 */
static void inflated_counts(void)
{
	struct seen s = { 0 };
	struct ring_cons c;
	struct ring_prod p;
	uint64_t seq = 0;
	void *m = ringmem_new(NSLOTS);
	struct fay_ring_ctl *ctl = ringmem_ctl(m);

	ring_prod_init(&p, m, NSLOTS);
	write_n(&p, &seq, 10, RECLEN);   /* record k at 3k */
	ring_cons_init(&c, m, NSLOTS, 0, 0);
	ctl->records = UINT64_C(1) << 62;
	ringmem_slot(m, NSLOTS, 6)->seq = 0;          /* record 2: resync */
	hdr_of(m, 9)->rec_no = (UINT64_C(1) << 62) - 5; /* record 3: forged */
	ring_drain(&c, on_rec, &s, 0);
	ok(c.lost < 10, "forged rec_no 2^62-5 after a resync: lost stays %llu, not ~2^62",
	   (unsigned long long)c.lost);
	ok(c.corrupt == 2 && strstr(c.err, "records lost in the 3 slots"),
	   "forged rec_no counted corrupt and named: %s", c.err);
	is_u64(c.delivered + c.lost, 10, "delivered + lost == 10 written");
	ctl->records = 10;
	is_u64(ring_cons_finish(&c), 0, "finish with the real ctl.records: adds 0");
	ctl->records = ctl->head;        /* 30 records in 30 slots, after rec 9? */
	is_u64(ring_cons_finish(&c), 0, "ctl.records 30 with no slot left after the last record: adds 0");
	ok(c.corrupt == 3 && strstr(c.err, "ctl.records 30"), "reported: %s", c.err);
	is_u64(s.bad, 0, "every delivered payload intact");
	ring_cons_free(&c);
	free(m);
}

/* Reproducible randomness: FAY_TEST_SEED=N replays a run. */
static uint64_t rng_state;

static uint64_t rand64(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t n)
{
	return rand64() % n;
}

/* Scribble seq words and header fields (not payload bytes) at random
 * between writes and drains.  The counts stay exact after finish: every
 * record committed is delivered or lost, once. */
static void fuzz_meta(void)
{
	uint64_t tot_corrupt = 0, bad_counts = 0, bad_order = 0, clean_fail = 0;

	for (int iter = 0; iter < 300; iter++) {
		void *m = ringmem_new(NSLOTS);
		struct ring_prod p;
		struct ring_cons c;
		struct seen s = { 0 };
		uint64_t seq = 0, before;

		ring_prod_init(&p, m, NSLOTS);
		ring_cons_init(&c, m, NSLOTS, 0, 0);
		for (int round = 0; round < 40; round++) {
			write_n(&p, &seq, (unsigned)rnd(40), TP_MIN + (uint32_t)rnd(400));
			for (int k = (int)rnd(4); k > 0; k--) {
				uint64_t pos = p.head - 1 - rnd(NSLOTS);
				struct fay_slot *sl = ringmem_slot(m, NSLOTS, pos);
				struct fay_rec_hdr *h = (void *)sl->data;

				switch (rnd(7)) {
				case 0: sl->seq = rand64(); break;
				case 1: sl->seq ^= UINT64_C(1) << rnd(64); break;
				case 2: h->rec_no = rnd(2) ? rand64() : h->rec_no + rnd(5) - 2; break;
				case 3: h->len = rnd(2) ? (uint32_t)rand64() : h->len + (uint32_t)rnd(120) - 60; break;
				case 4: h->type = (uint16_t)rnd(4); break;
				case 5: h->nslots = (uint16_t)(rnd(2) ? rand64() : rnd(40)); break;
				case 6: sl->seq = (pos + NSLOTS * rnd(3)) << 2 | rnd(4); break;
				}
			}
			s.next_min = 0; /* scribbled rec_nos may be delivered: order checked below */
			before = c.rec_no;
			ring_drain(&c, on_rec, &s, (unsigned)rnd(3) * 7);
			if (c.rec_no < before)
				bad_order++;
			if (c.delivered + c.lost != c.rec_no)
				bad_counts++;
		}
		/* A clean stretch longer than the ring: all of it comes through. */
		uint64_t d0 = c.delivered, first = seq;
		for (int k = 0; k < 200; k++) {
			write_n(&p, &seq, 1, 40);
			ring_drain(&c, on_rec, &s, 0);
		}
		if (c.delivered - d0 < seq - first - 40)
			clean_fail++;
		ring_cons_finish(&c);
		if (c.delivered + c.lost != seq)
			bad_counts++;
		tot_corrupt += c.corrupt;
		ring_cons_free(&c);
		free(m);
	}
	ok(tot_corrupt > 100, "meta fuzz: %llu corrupt slots found", (unsigned long long)tot_corrupt);
	is_u64(bad_counts, 0, "meta fuzz: delivered + lost == rec_no always, == written after finish");
	is_u64(bad_order, 0, "meta fuzz: rec_no never goes back");
	is_u64(clean_fail, 0, "meta fuzz: after the scribbling stops, clean records are delivered");
}

/* Any byte of the ring, ctl included, at random: only safety can be asked
 * (no crash, no read outside, every drain ends, counts consistent). */
static int on_any(void *ctx, uint16_t type, const void *payload, uint32_t len,
		  uint64_t rec_no)
{
	const volatile uint8_t *b = payload;
	uint64_t *sum = ctx;

	/* Touch every byte so ASan checks the whole range. */
	for (uint32_t i = 0; i < len; i++)
		*sum += b[i];
	return 0;
}

static void fuzz_bytes(void)
{
	const size_t sz = FAY_RING_CTL_SIZE + (size_t)NSLOTS * FAY_SLOT_SIZE;
	uint64_t bad_counts = 0, sum = 0, drains = 0, too_many = 0;

	for (int iter = 0; iter < 300; iter++) {
		void *m = ringmem_new(NSLOTS);
		uint8_t *b = m;
		struct ring_prod p;
		struct ring_cons c;
		uint64_t seq = 0;

		ring_prod_init(&p, m, NSLOTS);
		ring_cons_init(&c, m, NSLOTS, rnd(4) ? 0 : rand64() >> 3, 0);
		for (int round = 0; round < 30; round++) {
			write_n(&p, &seq, (unsigned)rnd(30), TP_MIN + (uint32_t)rnd(300));
			for (int k = (int)rnd(20); k > 0; k--)
				b[rnd(sz)] = (uint8_t)rand64();
			if (!rnd(10))
				memcpy(b + rnd(sz - 8), &(uint64_t){ rand64() }, 8);
			int n = ring_drain(&c, on_any, &sum, 0);
			if (n > (int)NSLOTS)
				too_many++;
			drains++;
			if (c.delivered + c.lost != c.rec_no - 0)
				bad_counts++;
		}
		ring_cons_finish(&c);
		ring_cons_free(&c);
		free(m);
	}
	ok(drains == 300 * 30, "byte fuzz: %llu drains all returned", (unsigned long long)drains);
	is_u64(too_many, 0, "byte fuzz: no drain delivered more than the ring holds");
	is_u64(bad_counts, 0, "byte fuzz: delivered + lost == rec_no throughout");
}

int main(void)
{
	const char *env = getenv("FAY_TEST_SEED");

	rng_state = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	diag("FAY_TEST_SEED=%llu", (unsigned long long)rng_state);
	for (int w = 0; w < NCASES; w++)
		one_case(w);
	ctl_cases();
	inflated_counts();
	fuzz_meta();
	fuzz_bytes();
	return test_done();
}
