// SPDX-License-Identifier: MIT
/*
 * The drain thread's work (drain_pass), driven pass by pass on in-memory
 * shm files with real rings, and the batch queue between it and the spool
 * writer: every record in exactly one batch and in order; each batch's
 * trailer holds, for every ring it drew from, the cursor right after its
 * last record; a batch is sealed only when the writer has nothing queued
 * (or it is full); with every buffer in use the drain leaves the rings
 * alone and what they overwrite meanwhile is counted, exactly; a process
 * that is gone is drained a last time and retired with the batch holding
 * its last records, its open spans counted; and the thread itself starts,
 * drains on its tick, and stops after a last pass.  Times: a version-1
 * file's records (ns) are shipped as they are; a version-2 file's
 * SPAN_F_TICKS records are converted with its TSC line (start, duration,
 * events) and shipped without the flag; ticks in a version-1 file, or in
 * a file with no line, are counted bad, not shipped; a line published
 * after a child was drained does not move its parent's start after the
 * child's (common/tscmap.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/drain.h"
#include "common/clock.h"
#include "common/tsc.h"
#include "test.h"

#define NPOOL  4u
#define STRIDE 1024u
#define MS     1000000ull

struct fake {
	uint8_t *mem;
	struct fay_shm_hdr *h;
	struct ring_prod prod[4];
	uint64_t produced[4];
	struct proc *p;
};

/* A shm file of nrings rings of slots slots, in memory, and its proc. */
static void fake_init(struct fake *f, uint32_t pid, uint32_t nrings, uint32_t slots)
{
	struct fay_shm_hdr *h;
	uint64_t size;
	struct cursor_tab none = { 0 };
	struct proc *p;

	f->mem = aligned_alloc(4096, (FAY_SHM_HDR_SIZE + NPOOL * STRIDE +
				      nrings * (FAY_RING_CTL_SIZE + (uint64_t)slots * FAY_SLOT_SIZE) +
				      4095) / 4096 * 4096);
	h = (struct fay_shm_hdr *)f->mem;
	memset(h, 0, FAY_SHM_HDR_SIZE + NPOOL * STRIDE);
	h->magic = FAY_SHM_MAGIC;
	h->version = FAY_SHM_VERSION;
	h->hdr_size = FAY_SHM_HDR_SIZE;
	h->instance = 0xabc0000000000000ull | pid;
	h->pid = pid;
	h->state = FAY_SHM_LIVE;
	h->pool_off = FAY_SHM_HDR_SIZE;
	h->npool = NPOOL;
	h->pool_stride = STRIDE;
	h->rings_off = FAY_SHM_HDR_SIZE + NPOOL * STRIDE;
	h->nrings = nrings;
	h->ring_slots = slots;
	h->ring_stride = FAY_RING_CTL_SIZE + (uint64_t)slots * FAY_SLOT_SIZE;
	size = h->rings_off + nrings * h->ring_stride;
	h->file_size = size;
	strcpy(h->service, "svc");
	f->h = h;
	for (uint32_t r = 0; r < nrings; r++) {
		uint8_t *rb = f->mem + h->rings_off + r * h->ring_stride;

		memset(rb, 0, h->ring_stride);
		ring_prod_init(&f->prod[r], rb, slots);
		f->produced[r] = 0;
	}
	p = calloc(1, sizeof(*p));
	p->pidfd = -1;
	snprintf(p->name, sizeof(p->name), "fay-%u-%016llx.shm", pid,
		 (unsigned long long)h->instance);
	p->base = NULL;         /* not a mapping: proc_release must not unmap */
	p->live = h;
	p->snap = *h;
	p->pid = pid;
	p->instance = h->instance;
	p->base = f->mem;
	p->size = 0;
	is_int(proc_init_cons(p, &none), 0, "consumers of %s set up (nothing resumed)", p->name);
	f->p = p;
}

static void fake_free(struct fake *f)
{
	f->p->base = NULL;
	proc_release(f->p);
	free(f->p);
	free(f->mem);
}

/* Span ids: pid << 40 | ring << 32 | n (n from 1). */
static void produce(struct fake *f, uint32_t ring, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint8_t rec[128];
		struct spanrec_fixed fx = { .trace_lo = 1 };
		size_t off = 0;
		struct ring_piece pc;

		fx.span_id = (uint64_t)f->h->pid << 40 | (uint64_t)ring << 32 | ++f->produced[ring];
		spanrec_put_item(rec + 64, sizeof(rec) - 64, &off, SPAN_ITEM_NAME, 0, "op", 2,
				 NULL, 0);
		fx.items_len = (uint32_t)off;
		fx.nitems = 1;
		memcpy(rec, &fx, 64);
		pc = (struct ring_piece){ rec, (uint32_t)(64 + off) };
		ring_write(&f->prod[ring], FAY_REC_SPAN, &pc, 1);
	}
}

/* What the spool writer saw, per (pid, ring): spans in order. */
struct seen {
	uint64_t next[8][4];    /* next n expected, by pid index and ring */
	uint64_t spans, out_of_order, unknown;
	uint32_t pids[8];
};

static int pid_ix(struct seen *s, uint32_t pid)
{
	for (int i = 0; i < 8; i++) {
		if (s->pids[i] == pid)
			return i;
		if (!s->pids[i]) {
			s->pids[i] = pid;
			return i;
		}
	}
	return 0;
}

static int seen_span(void *ctx, const void *rec, uint32_t len)
{
	struct seen *s = ctx;
	struct spanrec_fixed fx;
	int ix;
	uint32_t ring;
	uint64_t n;

	(void)len;
	memcpy(&fx, rec, sizeof(fx));
	ix = pid_ix(s, (uint32_t)(fx.span_id >> 40));
	ring = (uint32_t)(fx.span_id >> 32) & 0xff;
	n = fx.span_id & 0xffffffffu;
	if (ring >= 4) {
		s->unknown++;
		return 0;
	}
	/* In order; a gap is allowed (records counted lost), a repeat not. */
	if (n < s->next[ix][ring] + 1)
		s->out_of_order++;
	s->next[ix][ring] = n;
	s->spans++;
	return 0;
}

/* Pop every queued batch, walking its spans and checking its trailer:
 * it names every ring it holds records of, and for each the cursor's
 * rec_no is one past the last of them.  Returns the number of batches. */
static int take_all(struct bqueue *q, struct seen *s, int *bad_trailers,
		    struct proc **retired)
{
	struct qbatch *qb;
	int n = 0;
	char err[200];

	while ((qb = bqueue_peek(q))) {
		struct seen before = *s;

		wire_batch_walk(qb->b.buf + FAY_WIRE_HDR_SIZE, qb->b.len, seen_span, s, err,
			   sizeof(err));
		{
			uint32_t touched = 0;

			for (int ix = 0; ix < 8; ix++)
				for (int r = 0; r < 4; r++)
					touched += s->next[ix][r] != before.next[ix][r];
			if (touched != qb->ntrail)
				(*bad_trailers)++;      /* a ring missing */
		}
		for (uint32_t i = 0; i < qb->ntrail; i++) {
			const struct cursor *c = &qb->trail[i];
			int ix = pid_ix(s, (uint32_t)(c->instance & 0xffffffu));

			/* rec_no counts from 0, span n from 1: the last
			 * record n of this ring is record n - 1. */
			if (c->rec_no != s->next[ix][c->ring] ||
			    s->next[ix][c->ring] == before.next[ix][c->ring])
				(*bad_trailers)++;
		}
		while (qb->retired) {
			struct proc *p = qb->retired;

			qb->retired = p->dnext;
			if (retired)
				*retired = p;
		}
		bqueue_pop(q);
		n++;
	}
	return n;
}

static void test_exact_and_trailers(void)
{
	struct bqueue q;
	struct drain d;
	struct fake a, b;
	struct seen s = { 0 };
	struct drain_stats st;
	int bad = 0, nb = 0;
	uint64_t now = 1000 * MS;

	is_int(bqueue_init(&q, 4), 0, "queue of 4 buffers");
	is_int(drain_init(&d, &q, 20 * MS), 0, "drain set up (no thread)");
	fake_init(&a, 101, 2, 1024);
	fake_init(&b, 102, 3, 1024);
	drain_add(&d, a.p);
	drain_add(&d, b.p);
	for (int round = 0; round < 20; round++) {
		produce(&a, 0, 50 + round);
		produce(&a, 1, 7 * round);
		produce(&b, (uint32_t)round % 3, 120);
		now += 20 * MS;
		drain_pass(&d, now);
		/* The writer is quick every other pass only. */
		if (round & 1)
			nb += take_all(&q, &s, &bad, NULL);
	}
	now += 20 * MS;
	drain_pass(&d, now);
	nb += take_all(&q, &s, &bad, NULL);
	now += 20 * MS;
	drain_pass(&d, now);
	nb += take_all(&q, &s, &bad, NULL);
	drain_get_stats(&d, &st);
	{
		uint64_t want = a.produced[0] + a.produced[1] + b.produced[0] + b.produced[1] +
				b.produced[2];

		is_u64(s.spans, want, "every record in a batch (%llu)", (unsigned long long)want);
		is_u64(st.n.drained, want, "drained count");
		is_u64(st.n.ring_lost, 0, "nothing lost");
	}
	is_u64(s.out_of_order + s.unknown, 0, "each ring's records in order, none twice");
	is_int(bad, 0, "every trailer cursor sits right after its ring's last record in the batch");
	ok(nb >= 10 && nb < 22, "batches sealed only when the writer was idle (%d batches in 22 passes)",
	   nb);
	is_u64(st.nrings, 5, "5 rings published");
	drain_free(&d);
	bqueue_free(&q);
	fake_free(&a);
	fake_free(&b);
}

static void test_queue_full(void)
{
	struct bqueue q;
	struct drain d;
	struct fake a;
	struct seen s = { 0 };
	struct drain_stats st;
	int bad = 0;
	uint64_t now = 1000 * MS, lost;

	bqueue_init(&q, 2);
	drain_init(&d, &q, 20 * MS);
	fake_init(&a, 201, 1, 8192);   /* holds 4096 records of 2 slots */
	drain_add(&d, a.p);
	/* Nobody takes batches: the first is sealed at once (idle writer),
	 * the second fills up to BATCH_MAX_SPANS, then no buffer is left. */
	for (int i = 0; i < 6; i++) {
		produce(&a, 0, 2000);
		now += 20 * MS;
		drain_pass(&d, now);
	}
	drain_get_stats(&d, &st);
	is_int(bqueue_len(&q), 2, "both buffers queued");
	is_u64(st.stalls, 1, "the drain found every buffer in use, once");
	is_u64(st.n.drained, 2000 + BATCH_MAX_SPANS, "it stopped draining: %llu drained",
	       (unsigned long long)st.n.drained);
	produce(&a, 0, 9000);          /* laps the ring meanwhile */
	now += 20 * MS;
	drain_pass(&d, now);
	drain_get_stats(&d, &st);
	is_u64(st.n.drained, 2000 + BATCH_MAX_SPANS, "still not draining");
	take_all(&q, &s, &bad, NULL);  /* the writer catches up */
	for (int i = 0; i < 3; i++) {
		now += 20 * MS;
		drain_pass(&d, now);
		take_all(&q, &s, &bad, NULL);
	}
	drain_get_stats(&d, &st);
	lost = st.n.ring_lost;
	ok(lost > 0, "records overwritten while the drain waited: %llu counted lost",
	   (unsigned long long)lost);
	is_u64(s.spans + lost, a.produced[0], "delivered %llu + lost %llu == produced %llu",
	       (unsigned long long)s.spans, (unsigned long long)lost,
	       (unsigned long long)a.produced[0]);
	is_u64(s.out_of_order, 0, "in order, nothing twice");
	is_int(bad, 0, "trailers right");
	ok(st.stalled_ns >= 20 * MS, "stall time counted (%llu ms)",
	   (unsigned long long)(st.stalled_ns / MS));
	drain_free(&d);
	bqueue_free(&q);
	fake_free(&a);
}

static void test_retire(void)
{
	struct bqueue q;
	struct drain d;
	struct fake a, b;
	struct seen s = { 0 };
	struct proc *ret = NULL;
	struct fay_pool_slot *slot;
	int bad = 0;
	uint64_t now = 1000 * MS;

	bqueue_init(&q, 4);
	drain_init(&d, &q, 20 * MS);
	fake_init(&a, 301, 2, 1024);
	fake_init(&b, 302, 1, 1024);
	drain_add(&d, a.p);
	drain_add(&d, b.p);
	produce(&a, 0, 100);
	produce(&b, 0, 10);
	now += 20 * MS;
	drain_pass(&d, now);
	take_all(&q, &s, &bad, NULL);
	/* a dies with 30 more records and one span still open. */
	produce(&a, 1, 30);
	slot = (struct fay_pool_slot *)(a.mem + a.h->pool_off + 2 * STRIDE);
	slot->state = FAY_POOL_OPEN;
	drain_gone(&d, a.p, "exited");
	now += 1 * MS;              /* sooner than a flush interval */
	drain_pass(&d, now);
	is_int(bqueue_len(&q), 1, "retiring seals the batch at once");
	take_all(&q, &s, &bad, &ret);
	ok(ret == a.p, "the process came back with the batch holding its last records");
	is_u64(a.p->n.drained, 130, "its 130 records drained");
	is_u64(a.p->n.died_mid_span, 1, "its open span counted: died mid-span");
	ok(a.p->why && !strcmp(a.p->why, "exited"), "the reason kept");
	is_int(bad, 0, "its last cursors in that batch's trailer");
	produce(&b, 0, 5);
	now += 20 * MS;
	drain_pass(&d, now);
	take_all(&q, &s, &bad, NULL);
	is_u64(s.spans, 145, "the other process drained on");
	{
		struct drain_stats st;

		drain_get_stats(&d, &st);
		is_u64(st.n.drained, 145, "finished processes stay in the totals");
		is_u64(st.n.died_mid_span, 1, "and their losses");
		is_u64(st.nrings, 1, "only the live process's rings");
	}
	drain_free(&d);
	bqueue_free(&q);
	fake_free(&a);
	fake_free(&b);
}

static void test_thread(void)
{
	struct bqueue q;
	struct drain d;
	struct fake a;
	struct seen s = { 0 };
	int bad = 0, got = 0;

	bqueue_init(&q, 4);
	drain_init(&d, &q, 5 * MS);
	fake_init(&a, 401, 1, 1024);
	is_int(drain_start(&d), 0, "thread started");
	drain_add(&d, a.p);
	produce(&a, 0, 200);
	for (int i = 0; i < 200 && s.spans < 200; i++) {
		usleep(5000);
		got += take_all(&q, &s, &bad, NULL);
	}
	is_u64(s.spans, 200, "the thread drained on its tick (%d batches)", got);
	produce(&a, 0, 77);
	drain_stop(&d);
	for (int i = 0; i < 400 && !drain_done(&d); i++)
		usleep(5000);
	ok(drain_done(&d), "stop: a last pass, then done");
	take_all(&q, &s, &bad, NULL);
	is_u64(s.spans, 277, "the last pass drained what was left");
	is_int(bad, 0, "trailers right");
	drain_free(&d);
	bqueue_free(&q);
	fake_free(&a);
}

/* One record of span id id: start, duration and one EVENT at ev, flags. */
static void produce_timed(struct fake *f, uint64_t id, uint64_t start, uint64_t dur,
			  uint64_t ev, uint8_t flags)
{
	uint8_t rec[128];
	struct spanrec_fixed fx = { .trace_lo = 1, .span_id = id, .start_ns = start,
				    .duration_ns = dur, .flags = flags, .nitems = 2 };
	size_t off = 0;
	struct ring_piece pc;

	spanrec_put_item(rec + 64, sizeof(rec) - 64, &off, SPAN_ITEM_NAME, 0, "op", 2, NULL, 0);
	spanrec_put_item(rec + 64, sizeof(rec) - 64, &off, SPAN_ITEM_EVENT, ev, "ev", 2, NULL, 0);
	fx.items_len = (uint32_t)off;
	memcpy(rec, &fx, 64);
	pc = (struct ring_piece){ rec, (uint32_t)(64 + off) };
	ring_write(&f->prod[0], FAY_REC_SPAN, &pc, 1);
}

/* The times of the shipped spans, by span id (1..4). */
struct times {
	uint64_t start[5], dur[5], ev[5];
	uint8_t flags[5];
	int n;
};

static int times_span(void *ctx, const void *rec, uint32_t len)
{
	struct times *t = ctx;
	struct spanrec r;
	struct spanrec_item it;
	uint32_t off = 0;

	if (spanrec_decode(rec, len, &r, NULL, 0) < 0 || r.f.span_id > 4)
		return 0;
	t->start[r.f.span_id] = r.f.start_ns;
	t->dur[r.f.span_id] = r.f.duration_ns;
	t->flags[r.f.span_id] = r.f.flags;
	while (spanrec_next(&r, &off, &it))
		if (it.type == SPAN_ITEM_EVENT)
			t->ev[r.f.span_id] = it.val;
	t->n++;
	return 0;
}

static void test_versions(void)
{
	struct bqueue q;
	struct drain d;
	struct fake v1, v2, noline;
	struct times t = { 0 };
	struct qbatch *qb;
	struct drain_stats st;
	char err[200];
	const uint64_t tsc0 = 1000000, ns0 = 1700000000000000000ull;
	const uint64_t mult = UINT64_C(1) << 31;         /* 2 GHz: half a ns a tick */

	is_int(bqueue_init(&q, 4), 0, "versions: queue");
	is_int(drain_init(&d, &q, 20 * MS), 0, "versions: drain");
	fake_init(&v1, 201, 1, 64);
	v1.h->version = v1.p->snap.version = 1;
	fake_init(&v2, 202, 1, 64);
	v2.h->clk_tsc0 = tsc0;
	v2.h->clk_ns0 = ns0;
	v2.h->clk_mult = mult;
	v2.h->clk_seq = 2;
	fake_init(&noline, 203, 1, 64);
	/* version 1: ns, shipped as they are; ticks: bad */
	produce_timed(&v1, 1, ns0 + 5, 700, ns0 + 300, SPAN_F_SAMPLED);
	produce_timed(&v1, 4, tsc0, 700, tsc0, SPAN_F_SAMPLED | SPAN_F_TICKS);
	/* version 2: ticks converted, ns left alone */
	produce_timed(&v2, 2, tsc0 + 2000, 4000, tsc0 + 3000, SPAN_F_SAMPLED | SPAN_F_TICKS);
	produce_timed(&v2, 3, ns0 + 9, 11, ns0 + 10, SPAN_F_SAMPLED);
	/* version 2 without a line yet: ticks are bad */
	produce_timed(&noline, 4, tsc0, 10, tsc0, SPAN_F_SAMPLED | SPAN_F_TICKS);
	drain_add(&d, v1.p);
	drain_add(&d, v2.p);
	drain_add(&d, noline.p);
	drain_pass(&d, 1000 * MS);
	drain_pass(&d, 1100 * MS);
	while ((qb = bqueue_peek(&q))) {
		wire_batch_walk(qb->b.buf + FAY_WIRE_HDR_SIZE, qb->b.len, times_span, &t, err,
				sizeof(err));
		bqueue_pop(&q);
	}
	drain_get_stats(&d, &st);
	is_int(t.n, 3, "three spans shipped (%d)", t.n);
	ok(t.start[1] == ns0 + 5 && t.dur[1] == 700 && t.ev[1] == ns0 + 300,
	   "version 1: start, duration and event ns shipped as they were");
	ok(t.start[2] == ns0 + 1000 && t.dur[2] == 2000 && t.ev[2] == ns0 + 1500,
	   "version 2, TICKS: start %llu, duration %llu, event %llu ns from the line",
	   (unsigned long long)(t.start[2] - ns0), (unsigned long long)t.dur[2],
	   (unsigned long long)(t.ev[2] - ns0));
	ok(!(t.flags[2] & SPAN_F_TICKS) && (t.flags[2] & SPAN_F_SAMPLED),
	   "the converted span is shipped without the TICKS bit, its other flags kept");
	ok(t.start[3] == ns0 + 9 && t.dur[3] == 11 && t.ev[3] == ns0 + 10,
	   "version 2 without TICKS: ns shipped as they were");
	is_u64(t.start[4], 0, "ticks in a version-1 file, or with no line: not shipped");
	is_u64(st.n.bad, 2, "... and each counted bad");
	drain_free(&d);
	bqueue_free(&q);
	fake_free(&v1);
	fake_free(&v2);
	fake_free(&noline);
}

/* Publish the TSC line (tsc0, ns0, mult) in f's header, as a thread of
 * the process does (clock.c's publish()). */
static void publish_line(struct fake *f, uint64_t tsc0, uint64_t ns0, uint64_t mult)
{
	f->h->clk_seq++;
	f->h->clk_tsc0 = tsc0;
	f->h->clk_ns0 = ns0;
	f->h->clk_mult = mult;
	f->h->clk_seq++;
}

/* Ship what the passes sealed into t. */
static void take_times(struct bqueue *q, struct times *t)
{
	struct qbatch *qb;
	char err[200];

	while ((qb = bqueue_peek(q))) {
		wire_batch_walk(qb->b.buf + FAY_WIRE_HDR_SIZE, qb->b.len, times_span, t, err,
				sizeof(err));
		bqueue_pop(q);
	}
}

/*
 * e2e/blockstack_traces' inversion, made deterministic: a child span
 * (begun 100 ns after its parent, in the same thread) ends first and is
 * drained with the line its process published then; another thread then
 * publishes its own line, 800 ns ahead (two pairs taken 64 ms apart
 * disagree by that much under load), and the parent, ended later, is
 * drained after it.  The parent must still start before its child and
 * end after it.  Ticks are the machine's TSC, as libfay's are: the agent
 * reads the TSC to know which ticks it has drained.
 */
static void test_line_change(void)
{
	struct bqueue q;
	struct drain d;
	struct fake f;
	struct times t = { 0 };
	const uint64_t mult = UINT64_C(1) << 31;         /* 2 GHz */
	const uint64_t ns0 = 1700000000000000000ull;
	uint64_t t0 = tsc_now(), tc = t0 + 1000, tp = tc - 200;

	bqueue_init(&q, 4);
	drain_init(&d, &q, 20 * MS);
	fake_init(&f, 401, 1, 64);
	publish_line(&f, t0, ns0, mult);
	drain_add(&d, f.p);
	/* the child: begun at tc, 400 ticks long, an event 100 in */
	produce_timed(&f, 2, tc, 400, tc + 100, SPAN_F_SAMPLED | SPAN_F_TICKS);
	drain_pass(&d, 1000 * MS);
	take_times(&q, &t);
	is_u64(t.start[2], ns0 + 500, "the child starts 500 ns after the first line's origin");
	usleep(20000);          /* the next drain pass comes 20 ms later */
	publish_line(&f, t0 + 3000, ns0 + 1500 + 800, mult);
	/* the parent: begun 200 ticks before the child, ended 1000 after it */
	produce_timed(&f, 1, tp, 1600, tp + 10, SPAN_F_SAMPLED | SPAN_F_TICKS);
	drain_pass(&d, 1020 * MS);
	take_times(&q, &t);
	is_int(t.n, 2, "both spans shipped");
	ok(t.start[1] < t.start[2],
	   "the parent, drained after a line 800 ns ahead, still starts before its child "
	   "(parent %lld ns, child %lld ns from the first origin)",
	   (long long)(t.start[1] - ns0), (long long)(t.start[2] - ns0));
	ok(t.start[1] + t.dur[1] >= t.start[2] + t.dur[2],
	   "and ends after it (parent %lld ns, child %lld ns)",
	   (long long)(t.start[1] + t.dur[1] - ns0), (long long)(t.start[2] + t.dur[2] - ns0));
	is_u64(t.start[2] - t.start[1], 100, "the two starts 200 ticks (100 ns) apart, as stamped");
	drain_free(&d);
	bqueue_free(&q);
	fake_free(&f);
}

int main(void)
{
	test_exact_and_trailers();
	test_queue_full();
	test_retire();
	test_thread();
	test_versions();
	test_line_change();
	return test_done();
}
