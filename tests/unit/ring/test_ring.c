// SPDX-License-Identifier: MIT
/*
 * Producer + consumer together, one thread at a time: byte-exact round trip
 * of every record size across many wraps, overwrite accounting (delivered +
 * lost == written), the callback stopping a drain, max, resuming from a
 * saved cursor, and a producer process killed with SIGKILL in the middle of
 * its writes.
 */
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/atomic.h"
#include "ringtest.h"
#include "test.h"

/* What the callback saw. */
struct seen {
	uint64_t n, bad, last_rec_no;
	int have_last;
	uint64_t first_seq, last_seq;
	int stop_at_seq;        /* >= 0: refuse the record with that seq once */
	uint64_t stop_seq;
};

/* Check each payload: intact, rec_no matching the seq it carries, in order. */
static int on_rec(void *ctx, uint16_t type, const void *payload, uint32_t len,
		  uint64_t rec_no)
{
	struct seen *s = ctx;
	struct tp_hdr h;

	if (s->stop_at_seq >= 0 && rec_no == s->stop_seq) {
		s->stop_at_seq = -1;
		return -EAGAIN;
	}
	if (type != FAY_REC_SPAN || tp_check(payload, len, &h) || h.seq != rec_no ||
	    (s->have_last && rec_no <= s->last_rec_no)) {
		if (s->bad++ < 3)
			diag("bad record: type %u len %u rec_no %llu", type, len,
			     (unsigned long long)rec_no);
	}
	if (!s->n)
		s->first_seq = rec_no;
	s->last_seq = rec_no;
	s->last_rec_no = rec_no;
	s->have_last = 1;
	s->n++;
	return 0;
}

static void seen_init(struct seen *s)
{
	memset(s, 0, sizeof(*s));
	s->stop_at_seq = -1;
}

static int write_tp(struct ring_prod *p, uint32_t len, uint64_t seq)
{
	static uint8_t buf[1 << 17];
	struct ring_piece pc[2];

	tp_make(buf, len, 1, seq);
	/* Two pieces, split at a varying point, as libfay does. */
	pc[0].p = buf;
	pc[0].len = (uint32_t)(seq % (len + 1));
	pc[1].p = buf + pc[0].len;
	pc[1].len = len - pc[0].len;
	return ring_write(p, FAY_REC_SPAN, pc, 2);
}

/* Count and sum the lengths of records (no payload check). */
static int on_len(void *ctx, uint16_t type, const void *payload, uint32_t len,
		  uint64_t rec_no)
{
	uint64_t *n = ctx;

	n[0]++;
	n[1] += len;
	return 0;
}

/* Every size from TP_MIN to max (to 3000 then the last 64 sizes for big
 * rings), consumer keeping up, many wraps. */
static void test_round_trip(uint32_t nslots)
{
	void *m = ringmem_new(nslots);
	uint32_t max = ring_max_payload(nslots), len;
	struct ring_prod p;
	struct ring_cons c;
	struct seen s;
	uint64_t seq = 0;
	int werr = 0;

	seen_init(&s);
	ring_prod_init(&p, m, nslots);
	is_int(ring_cons_init(&c, m, nslots, 0, 0), 0, "[%u slots] consumer init", nslots);
	for (int round = 0; round < 3; round++) {
		for (len = TP_MIN; len <= max; len++) {
			if (len == 3000 && max > 3100)
				len = max - 63;
			werr |= write_tp(&p, len, seq++);
			/* Ask for 1 or all: both must see every record. */
			ring_drain(&c, on_rec, &s, len & 1);
		}
		ring_drain(&c, on_rec, &s, 0);
	}
	is_int(werr, 0, "[%u slots] every size %u..%u written", nslots, (unsigned)TP_MIN, max);
	ok(ringmem_ctl(m)->head > 3ull * nslots, "[%u slots] wrapped %llu times", nslots,
	   (unsigned long long)(ringmem_ctl(m)->head / nslots));
	is_u64(s.bad, 0, "[%u slots] every payload byte-exact and in order", nslots);
	is_u64(c.delivered, seq, "[%u slots] delivered every record", nslots);
	is_u64(c.lost, 0, "[%u slots] nothing lost", nslots);
	is_u64(c.corrupt, 0, "[%u slots] nothing corrupt", nslots);

	/* Empty payloads go through too (type checked, no tp payload). */
	struct ring_piece none = { NULL, 0 };
	is_int(ring_write(&p, FAY_REC_SPAN, &none, 1), 0, "[%u slots] empty record", nslots);
	is_int(ring_write(&p, FAY_REC_SPAN, NULL, 0), 0, "[%u slots] record of no pieces", nslots);
	is_int(write_tp(&p, max + 1, seq), -E2BIG, "[%u slots] max+1 bytes: -E2BIG", nslots);
	uint64_t lens[2] = { 0, 0 };
	is_int(ring_drain(&c, on_len, lens, 0), 2, "[%u slots] both empty records drained", nslots);
	ok(lens[0] == 2 && lens[1] == 0, "[%u slots] as two empty payloads", nslots);
	is_u64(c.delivered + c.lost, seq + 2, "[%u slots] delivered + lost == written", nslots);
	ring_cons_free(&c);
	free(m);
}

/* Payloads too short for a tp_hdr (0..TP_MIN-1 bytes): exact bytes. */
struct raw_want {
	uint32_t len;
	uint8_t byte;
	int bad, n;
};

static int on_raw(void *ctx, uint16_t type, const void *payload, uint32_t len,
		  uint64_t rec_no)
{
	struct raw_want *w = ctx;
	const uint8_t *b = payload;

	w->n++;
	if (len != w->len)
		w->bad++;
	for (uint32_t i = 0; i < len && i < w->len; i++)
		if (b[i] != (uint8_t)(w->byte + i))
			w->bad++;
	return 0;
}

static void test_short_payloads(void)
{
	const uint32_t nslots = 4;
	void *m = ringmem_new(nslots);
	struct raw_want w = { 0 };
	uint8_t buf[TP_MIN];
	struct ring_prod p;
	struct ring_cons c;
	uint64_t written = 0;

	ring_prod_init(&p, m, nslots);
	ring_cons_init(&c, m, nslots, 0, 0);
	for (int round = 0; round < 50; round++) {
		for (uint32_t len = 0; len < TP_MIN; len++) {
			struct ring_piece pc = { buf, len };

			w.len = len;
			w.byte = (uint8_t)(round * 7 + len);
			for (uint32_t i = 0; i < len; i++)
				buf[i] = (uint8_t)(w.byte + i);
			ring_write(&p, FAY_REC_SPAN, &pc, 1);
			written++;
			ring_drain(&c, on_raw, &w, 0);
		}
	}
	ok(w.n == (int)written && w.bad == 0,
	   "sizes 0..%u in a 4-slot ring, 50 wraps: %d of %llu delivered, %d bad bytes",
	   (unsigned)TP_MIN - 1, w.n, (unsigned long long)written, w.bad);
	ring_cons_free(&c);
	free(m);
}

/* No draining for a while: the ring keeps the newest; the rest is lost. */
static void test_overwrite(void)
{
	const uint32_t nslots = 128;
	void *m = ringmem_new(nslots);
	struct ring_prod p;
	struct ring_cons c;
	struct seen s;
	uint64_t seq;

	seen_init(&s);
	ring_prod_init(&p, m, nslots);
	ring_cons_init(&c, m, nslots, 0, 0);
	for (seq = 0; seq < 10000; seq++)
		write_tp(&p, TP_MIN + (uint32_t)(seq % 150), seq);
	ring_drain(&c, on_rec, &s, 0);
	is_u64(s.bad, 0, "overwrite: delivered payloads intact and in order");
	ok(c.delivered > 10 && c.delivered < 128, "overwrite: delivered %llu newest records",
	   (unsigned long long)c.delivered);
	is_u64(s.last_seq, seq - 1, "overwrite: the newest record is among them");
	is_u64(c.delivered + c.lost, seq, "overwrite: delivered + lost == written");
	is_u64(c.corrupt, 0, "overwrite: lapping is not corruption");
	is_u64(c.lost, s.first_seq, "overwrite: lost is exactly the records before the first kept");

	/* Lapped again, then finish with records still unread. */
	for (; seq < 10500; seq++)
		write_tp(&p, TP_MIN + (uint32_t)(seq % 150), seq);
	ring_drain(&c, on_rec, &s, 5);
	is_u64(c.delivered + c.lost, c.rec_no, "partial drain: delivered + lost == next rec_no");
	uint64_t add = ring_cons_finish(&c);
	ok(add > 0, "finish counts %llu unread records lost", (unsigned long long)add);
	is_u64(c.delivered + c.lost, seq, "after finish: delivered + lost == written");
	is_u64(ring_cons_finish(&c), 0, "finish again adds nothing");
	is_u64(c.corrupt, 0, "no corruption");
	ring_cons_free(&c);
	free(m);
}

/* The callback refuses a record: it is offered again; max limits a drain. */
static void test_stop_and_max(void)
{
	const uint32_t nslots = 256;
	void *m = ringmem_new(nslots);
	struct ring_prod p;
	struct ring_cons c;
	struct seen s;

	seen_init(&s);
	ring_prod_init(&p, m, nslots);
	ring_cons_init(&c, m, nslots, 0, 0);
	for (uint64_t seq = 0; seq < 20; seq++)
		write_tp(&p, 40, seq);
	is_int(ring_drain(&c, on_rec, &s, 7), 7, "max 7 delivers 7");
	s.stop_at_seq = 1;
	s.stop_seq = 9;
	is_int(ring_drain(&c, on_rec, &s, 0), -EAGAIN, "callback's error returned");
	is_u64(c.delivered, 9, "records before the refused one consumed");
	is_u64(c.rec_no, 9, "refused record not consumed");
	is_int(ring_drain(&c, on_rec, &s, 0), 11, "refused record offered again, then the rest");
	is_u64(s.bad, 0, "in order, intact");
	is_int(ring_drain(&c, on_rec, &s, 0), 0, "nothing more");
	ring_cons_free(&c);
	is_int(ring_cons_init(&c, m, 100, 0, 0), -EINVAL, "nslots not a power of two: -EINVAL");
	ring_cons_free(&c);
	ring_cons_free(NULL);
	free(m);
}

/* A consumer saved at (pos, rec_no), freed and re-created, gets exactly the
 * rest, also when it was saved while lapped. */
static void test_resume(void)
{
	const uint32_t nslots = 256;
	void *m = ringmem_new(nslots);
	struct ring_prod p;
	struct ring_cons c;
	struct seen s;
	uint64_t seq = 0, pos, rec_no = 0, total_d = 0, total_l = 0;
	int i, bad = 0;

	seen_init(&s);
	ring_prod_init(&p, m, nslots);
	ring_cons_init(&c, m, nslots, 0, 0);
	for (i = 0; i < 200; i++) {
		int nw = (i % 7 == 3) ? 400 : 30; /* sometimes lap the consumer */

		for (int k = 0; k < nw; k++, seq++)
			write_tp(&p, TP_MIN + (uint32_t)((seq * 13) % 120), seq);
		ring_drain(&c, on_rec, &s, i % 5 ? 0 : 1 + i % 17);
		/* This consumer's counts cover exactly the records it passed. */
		if (c.delivered + c.lost != c.rec_no - rec_no)
			bad++;
		pos = c.pos;
		rec_no = c.rec_no;
		total_d += c.delivered;
		total_l += c.lost;
		ring_cons_free(&c);
		if (ring_cons_init(&c, m, nslots, pos, rec_no))
			bad++;
	}
	while (ring_drain(&c, on_rec, &s, 0) > 0)
		;
	total_d += c.delivered;
	total_l += c.lost;
	total_l += ring_cons_finish(&c);
	is_int(bad, 0, "200 stop/resume cycles");
	is_u64(s.bad, 0, "across resumes: payloads intact, strictly increasing rec_no");
	is_u64(total_d, s.n, "deliveries counted once each");
	is_u64(total_d + total_l, seq, "across resumes: delivered + lost == written (%llu + %llu)",
	       (unsigned long long)total_d, (unsigned long long)total_l);
	ok(total_l > 0 && total_d > seq / 4, "some records lapped, most delivered");
	is_u64(c.corrupt, 0, "no corruption");
	ring_cons_free(&c);
	free(m);
}

/* A producer process killed mid-stream (maybe mid-record), then a new
 * producer continuing on the same shared ring. */
static void test_killed_producer(void)
{
	const uint32_t nslots = 512;
	size_t sz = FAY_RING_CTL_SIZE + (size_t)nslots * FAY_SLOT_SIZE;
	void *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct ring_cons c;
	struct seen s;
	pid_t pid;

	ok(m != MAP_FAILED, "shared mapping");
	if (m == MAP_FAILED)
		return;
	seen_init(&s);
	ring_cons_init(&c, m, nslots, 0, 0);
	pid = fork();
	if (pid == 0) {
		struct ring_prod p;

		ring_prod_init(&p, m, nslots);
		for (uint64_t seq = 0;; seq++)
			write_tp(&p, TP_MIN + (uint32_t)(seq % 300), seq);
	}
	ok(pid > 0, "forked a producer");
	if (pid < 0)
		return;
	/* Until the child has written 200000 records (it may die first:
	 * then the checks below still hold, and say so). */
	time_t deadline = time(NULL) + 60;
	int status, gone = 0;

	while (READ_ONCE(ringmem_ctl(m)->records) < 200000 && time(NULL) < deadline &&
	       !(gone = waitpid(pid, &status, WNOHANG) == pid))
		ring_drain(&c, on_rec, &s, 0);
	ok(!gone, "producer still running at 200000 records");
	kill(pid, SIGKILL);
	if (!gone)
		waitpid(pid, &status, 0);
	ring_drain(&c, on_rec, &s, 0);
	is_u64(s.bad, 0, "killed producer: payloads intact and in order");
	ok(c.delivered > 0, "delivered %llu of %llu while it ran",
	   (unsigned long long)c.delivered, (unsigned long long)ringmem_ctl(m)->records);
	is_u64(c.delivered + c.lost, c.rec_no, "delivered + lost == next rec_no");

	/* A new producer continues; the consumer follows with no corruption. */
	struct ring_prod q;
	uint64_t seq0 = ringmem_ctl(m)->records, seq;

	ring_prod_init(&q, m, nslots);
	for (seq = seq0; seq < seq0 + 1000; seq++) {
		write_tp(&q, TP_MIN + (uint32_t)(seq % 300), seq);
		if (seq % 10 == 0)
			ring_drain(&c, on_rec, &s, 0);
	}
	ring_drain(&c, on_rec, &s, 0);
	ring_cons_finish(&c);
	is_u64(c.delivered + c.lost, seq, "after restart and finish: delivered + lost == written");
	is_u64(s.last_seq, seq - 1, "the new producer's records are delivered");
	is_u64(s.bad, 0, "still intact and in order");
	is_u64(c.corrupt, 0, "a killed producer leaves no corruption: %s", c.err);
	ring_cons_free(&c);
	munmap(m, sz);
}

int main(void)
{
	test_round_trip(2);
	test_round_trip(8);
	test_round_trip(64);
	test_round_trip(4096);
	test_short_payloads();
	test_overwrite();
	test_stop_and_max();
	test_resume();
	test_killed_producer();
	return test_done();
}
