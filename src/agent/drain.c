// SPDX-License-Identifier: MIT
/*
 * The drain thread: every tick, every ring of every traced process is read
 * into the batch being filled; a batch is sealed (its ring cursors noted in
 * its trailer) and queued for the spool writer when it is full, or when the
 * writer has nothing queued and a flush interval has passed since the last
 * one.  This thread makes no system call on the drain path except reading
 * its timer: no file, no /proc, no socket, no allocation per record.
 *
 * Why a batch is sealed only when the writer is idle (or it is full): when
 * the spool writer is slow (the disk stalls), the batch being filled grows
 * instead of the queue, so a stall turns into fewer, bigger batches and
 * fewer files to write afterwards.
 *
 * When every batch buffer is in use (the writer is --queue-max behind),
 * the drain stops reading rings until one is free.  The alternatives are
 * worse: reading on and dropping records loses the same number of records
 * (counted all the same) but throws away ones the rings could still hold,
 * and reading on into more memory has no bound.  Records left in a ring
 * stay there until the producer overwrites them; the consumer then finds
 * the gap in the record numbers and counts every overwritten record lost
 * (ring_overwrite): the loss is counted, never silent, and the memory of
 * the agent stays bounded.
 *
 * Crash safety does not depend on this thread: a batch counts only once
 * the main thread spooled it (agent.h).  Killed with batches still in
 * memory, the agent restarts from the spooled cursors and reads those
 * records again from the rings, or counts them lost where the producer
 * has overwritten them since.
 *
 * This file: the processes' consumers and a pass over them (drain_pass());
 * the thread that runs the passes and the calls of the main thread are in
 * drain_thread.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/drain.h"
#include "agent/drain_int.h"
#include "agent/flight.h"
#include "agent/spantap.h"
#include "common/atomic.h"
#include "common/err.h"
#include "common/log.h"
#include "common/tsc.h"

#define BAD_REPORTS_MAX 10

void proc_counts_add(struct proc_counts *to, const struct proc_counts *from)
{
	const uint64_t *f = (const uint64_t *)from;
	uint64_t *t = (uint64_t *)to;

	for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
		t[i] += f[i];
}

/* ---- processes ------------------------------------------------------------ */

/* Refresh the LOCAL_EP item when the process changed its endpoint
 * (fay_init again).  The strings are copied bounded: a torn read gives a
 * wrong name at worst, never a bad record. */
static void refresh_ep(struct proc *p)
{
	char key[sizeof(p->ep_key)];
	const struct fay_shm_hdr *h = p->live;
	uint16_t port = READ_ONCE(h->port);

	memcpy(key, (const void *)h->service, 64);
	memcpy(key + 64, (const void *)h->ip, 48);
	memcpy(key + 112, &port, 2);
	memset(key + 114, 0, sizeof(key) - 114);
	if (!memcmp(key, p->ep_key, sizeof(key)))
		return;
	memcpy(p->ep_key, key, sizeof(key));
	key[63] = '\0';
	key[64 + 47] = '\0';
	ep_item_init(&p->ep, key, key + 64, port);
	memcpy(p->service, key, sizeof(p->service));
}

/* p's TSC line (version 2 files), for the ticks of SPAN_F_TICKS records:
 * read under the header's sequence lock, and followed by p's map without
 * a step back (common/tscmap.h: a parent drained after a new line would
 * start after its child).  A line being rewritten, or one whose rate is
 * not 0.01 to 10 ns a tick, leaves the map as it was. */
static void refresh_clk(struct proc *p)
{
	const struct fay_shm_hdr *h = p->live;

	if (p->snap.version < 2)
		return;
	for (int i = 0; i < 64; i++) {
		uint32_t s = smp_load_acquire(&h->clk_seq);
		uint64_t tsc0 = READ_ONCE(h->clk_tsc0), ns0 = READ_ONCE(h->clk_ns0);
		uint64_t mult = READ_ONCE(h->clk_mult);

		smp_rmb();
		if ((s & 1) || s != READ_ONCE(h->clk_seq))
			continue;
		if (mult < (UINT64_C(1) << 32) / 100 || mult > UINT64_C(10) << 32)
			return;
		/* the TSC after the line, before the records it converts */
		tsc_map_follow(&p->clk, tsc0, ns0, mult, tsc_now());
		return;
	}
}

int proc_init_cons(struct proc *p, const struct cursor_tab *t)
{
	int resumed = 0;

	p->cons = calloc(p->snap.nrings, sizeof(*p->cons));
	p->in_batch = calloc(p->snap.nrings, 1);
	if (!p->cons || !p->in_batch)
		return -ENOMEM;
	for (uint32_t r = 0; r < p->snap.nrings; r++) {
		const uint8_t *rb = p->base + p->snap.rings_off + (uint64_t)r * p->snap.ring_stride;
		const struct fay_ring_ctl *ctl = (const void *)rb;
		const struct cursor *c = cursor_tab_get(t, p->instance, r);
		uint64_t pos = c ? c->pos : 0, rec_no = c ? c->rec_no : 0;
		int ret;

		if (c && (pos > READ_ONCE(ctl->head) || rec_no > READ_ONCE(ctl->records))) {
			pr_warn("%s ring %u: saved cursor (pos %" PRIu64 ", record %" PRIu64
				") is past the ring (head %" PRIu64 ", records %" PRIu64
				"); reading it from its oldest record", p->name, r, pos, rec_no,
				(uint64_t)READ_ONCE(ctl->head), (uint64_t)READ_ONCE(ctl->records));
			pos = rec_no = 0;
		}
		resumed += pos || rec_no;
		/* Fault the control page in here, in the main thread: on a
		 * file system the first read of a page the producer never
		 * wrote allocates and zeroes it (ext4 even reads ahead),
		 * which must not happen in the middle of a drain. */
		(void)READ_ONCE(ctl->head);
		ret = ring_cons_init(&p->cons[r], rb, p->snap.ring_slots, pos, rec_no);
		if (ret)
			return ret;
	}
	refresh_ep(p);
	return resumed;
}

void proc_release(struct proc *p)
{
	if (p->cons)
		for (uint32_t r = 0; r < p->snap.nrings; r++)
			ring_cons_free(&p->cons[r]);
	free(p->cons);
	free(p->in_batch);
	p->cons = NULL;
	p->in_batch = NULL;
	if (p->base)
		munmap((void *)p->base, p->size);
	p->base = NULL;
}

void proc_read_counts(struct proc *p)
{
	const struct fay_shm_hdr *h = p->live;

	p->n.lost_no_handle = READ_ONCE(h->lost_no_handle);
	p->n.lost_no_ring = READ_ONCE(h->lost_no_ring);
	p->n.lost_too_big = READ_ONCE(h->lost_too_big);
	p->n.truncated = READ_ONCE(h->truncated);
	p->n.spans_started = READ_ONCE(h->spans_started);
	p->n.spans_unsampled = READ_ONCE(h->spans_unsampled);
	p->n.bad_traceparent = READ_ONCE(h->bad_traceparent);
	p->n.lost_nested = READ_ONCE(h->lost_nested);
	p->n.lost_no_room = READ_ONCE(h->lost_no_room);
	p->n.ring_lost = 0;
	p->n.corrupt = 0;
	for (uint32_t r = 0; r < p->snap.nrings; r++) {
		p->n.ring_lost += p->cons[r].lost;
		p->n.corrupt += p->cons[r].corrupt;
	}
}

/* ---- batches ---------------------------------------------------------------- */

static void trail_add(struct qbatch *qb, struct proc *p)
{
	for (uint32_t r = 0; r < p->snap.nrings; r++) {
		if (!p->in_batch[r])
			continue;
		p->in_batch[r] = 0;
		if (qb->ntrail == qb->trail_cap) {
			uint32_t cap = qb->trail_cap ? qb->trail_cap * 2 : 64;
			struct cursor *v = realloc(qb->trail, cap * sizeof(*v));

			if (!v) {
				/* Without this cursor a restart would read the
				 * ring's records again: never let that happen
				 * silently.  (Memory for a few cursors.) */
				pr_err("out of memory for batch cursors: aborting");
				abort();
			}
			qb->trail = v;
			qb->trail_cap = cap;
		}
		qb->trail[qb->ntrail++] = (struct cursor){
			.instance = p->instance, .ring = r,
			.pos = p->cons[r].pos, .rec_no = p->cons[r].rec_no,
		};
	}
}

/* Note the cursors of the rings the current batch drew from, and queue it. */
void drain_seal(struct drain *d, uint64_t now)
{
	struct qbatch *qb = d->cur;

	for (struct proc *p = d->procs; p; p = p->dnext)
		trail_add(qb, p);
	for (struct proc *p = qb->retired; p; p = p->dnext)
		trail_add(qb, p);
	bqueue_push(d->q, qb);
	d->cur = NULL;
	d->last_seal_ns = now;
	d->my.sealed++;
}

/* Make sure there is a batch to fill.  0, or -ENOBUFS when every buffer
 * waits for the spool writer. */
static int get_cur(struct drain *d, uint64_t now)
{
	if (d->cur)
		return 0;
	d->cur = bqueue_get(d->q);
	if (d->cur) {
		if (d->stall_start_ns) {
			uint64_t ns = now - d->stall_start_ns;

			d->my.stalled_ns += ns;
			d->stall_start_ns = 0;
			pr_info("drain: the spool writer caught up after %" PRIu64 " ms; draining again",
				ns / 1000000);
		}
		return 0;
	}
	if (!d->stall_start_ns) {
		d->stall_start_ns = now ? now : 1;
		d->my.stalls++;
		pr_warn("drain: all %u batch buffers wait for the spool writer; rings are not "
			"drained until it catches up (what they overwrite meanwhile is counted as "
			"ring_overwrite)", d->q->max);
	}
	return -ENOBUFS;
}

struct drain_ctx {
	struct drain *d;
	struct proc *p;
	uint32_t ring;
};

static int on_record(void *ctx, uint16_t type, const void *payload, uint32_t len,
		     uint64_t rec_no)
{
	struct drain_ctx *dc = ctx;
	struct proc *p = dc->p;
	struct spanrec r;
	char err[200];
	int n, ret;

	if (unlikely(type != FAY_REC_SPAN)) {
		p->n.other++;
		return 0;
	}
	n = spanrec_decode(payload, len, &r, err, sizeof(err));
	if (unlikely(n < 0)) {
		if (p->n.bad++ < BAD_REPORTS_MAX)
			pr_warn("%s ring %u record %" PRIu64 " (slot pos %" PRIu64 "): bad span record: %s; skipped%s",
				p->name, dc->ring, rec_no, p->cons[dc->ring].pos, err,
				p->n.bad == BAD_REPORTS_MAX ? " (further bad records of this file are only counted)" : "");
		return 0;
	}
	if (r.f.flags & SPAN_F_TICKS) {
		/* TSC ticks (docs/ABI.md 1.2.2): to ns with the file's line,
		 * in place (payload is the consumer's own copy of the
		 * record), before anything reads a time */
		const char *why = p->snap.version < 2 ? "TSC ticks (flag bit 7) in a version-1 file" :
				  !p->clk.n ? "TSC ticks but the file publishes no TSC line" : NULL;

		if (unlikely(why)) {
			if (p->n.bad++ < BAD_REPORTS_MAX)
				pr_warn("%s ring %u record %" PRIu64 ": %s; skipped", p->name,
					dc->ring, rec_no, why);
			return 0;
		}
		tsc_map_span(&p->clk, (void *)payload, &r);
	}
	if (unlikely(r.f.flags & SPAN_F_UNSAMPLED)) {
		/* recorded though not sampled (FAY_RECORD=all): kept on this
		 * host for captures, never shipped; its ring's cursor goes
		 * with the next batch all the same */
		p->n.unsampled++;
		if (dc->d->flight)
			flight_add(dc->d->flight, payload, (uint32_t)n, &r, &p->ep, &p->tags);
		else
			p->n.unsampled_off++;
		p->in_batch[dc->ring] = 1;
		/* spans(...) queries see every span recorded, sampled or
		 * not: a capture rule (#22) is one, and triggers on them */
		if (dc->d->tap)
			spantap_feed(dc->d->tap, &r, p->service, p->pid, p->cgroup, p->container);
		return 0;
	}
	ret = batch_add(&dc->d->cur->b, payload, (uint32_t)n, &r, &p->ep, &p->tags);
	if (unlikely(ret == -ENOSPC))
		return ret;
	if (unlikely(ret == -E2BIG)) {
		if (p->n.too_big++ < BAD_REPORTS_MAX)
			pr_warn("%s ring %u record %" PRIu64 ": span of %d bytes is larger than a batch; dropped",
				p->name, dc->ring, rec_no, n);
		return 0;
	}
	p->in_batch[dc->ring] = 1;
	p->n.drained++;
	if (dc->d->tap)		/* spans(...) queries (nothing when none runs) */
		spantap_feed(dc->d->tap, &r, p->service, p->pid, p->cgroup, p->container);
	return 0;
}

/* Drain every ring of p, sealing batches as they fill.  Returns 0, or
 * -ENOBUFS when no batch buffer is free (the rest stays in the rings). */
static int drain_proc(struct drain *d, struct proc *p, uint64_t now)
{
	struct drain_ctx dc = { .d = d, .p = p };

	refresh_ep(p);
	refresh_clk(p);
	for (dc.ring = 0; dc.ring < p->snap.nrings; dc.ring++) {
		struct ring_cons *c = &p->cons[dc.ring];
		uint64_t backlog = smp_load_acquire(&c->ctl->head) - c->pos;

		/* How full the ring was (an untrusted head only makes this
		 * a hint: clamp it). */
		if (backlog > c->nslots)
			backlog = c->nslots;
		if (backlog * 1024 / c->nslots > d->my.max_fill)
			d->my.max_fill = (uint32_t)(backlog * 1024 / c->nslots);
		for (;;) {
			int ret;

			if (get_cur(d, now))
				return -ENOBUFS;
			ret = ring_drain(c, on_record, &dc, 0);
			if (ret != -ENOSPC)
				break;
			drain_seal(d, now);
		}
	}
	return 0;
}

/* p leaves the drain thread with the batch being filled (d->cur exists):
 * its cursors go into this batch's trailer (seal walks retired). */
static void retire_proc(struct drain *d, struct proc *p)
{
	p->why = p->shrunk ? "its file shrank under the agent" : smp_load_acquire(&p->gone_why);
	proc_counts_add(&d->finished, &p->n);
	for (struct proc **pp = &d->procs; *pp; pp = &(*pp)->dnext) {
		if (*pp == p) {
			*pp = p->dnext;
			break;
		}
	}
	p->dnext = d->cur->retired;
	d->cur->retired = p;
}

/* p's process is gone: a last drain, then count what can no longer
 * arrive and retire p with the batch holding its last records.  Returns
 * 0, or -ENOBUFS (tried again next pass: a dead producer overwrites
 * nothing). */
static int finish_proc(struct drain *d, struct proc *p, uint64_t now)
{
	int ret = drain_proc(d, p, now);

	if (ret)
		return ret;
	for (uint32_t r = 0; r < p->snap.nrings; r++) {
		ring_cons_finish(&p->cons[r]);
		if (p->cons[r].corrupt && p->cons[r].err[0])
			pr_warn("%s ring %u: %" PRIu64 " corrupt slots, last: %s", p->name, r,
				p->cons[r].corrupt, p->cons[r].err);
	}
	proc_read_counts(p);
	p->n.died_mid_span = shm_pool_open_count(p->base, &p->snap);
	retire_proc(d, p);
	return 0;
}

struct pass_arg {
	struct drain *d;
	struct proc *p;
	uint64_t now;
};

/* One process's share of a pass (under shm_guarded). */
static int pass_proc(void *arg)
{
	struct pass_arg *a = arg;

	if (smp_load_acquire(&a->p->gone_why))
		return finish_proc(a->d, a->p, a->now);
	return drain_proc(a->d, a->p, a->now);
}

/*
 * Drain (or finish) p; a SIGBUS while reading its mapping means the
 * process shrank its file: what its rings still held and its counters
 * since the last pass are gone with the pages.  Say so, never read the
 * mapping again, and retire p with what was drained.  Returns 0 or
 * -ENOBUFS.
 */
static int pass_one(struct drain *d, struct proc *p, uint64_t now)
{
	struct pass_arg a = { d, p, now };
	int ret;

	if (!p->shrunk) {
		ret = shm_guarded(pass_proc, &a);
		if (ret != -EFAULT)
			return ret;
		p->shrunk = 1;
		d->my.shrunk_files++;
		pr_err("%s: the file shrank under the agent (SIGBUS reading it): %" PRIu64
		       " records drained; what its rings still held is lost, and no longer "
		       "counted; the file is not read again", p->name, p->n.drained);
	}
	if (get_cur(d, now))
		return -ENOBUFS;
	retire_proc(d, p);
	return 0;
}

static int read_counts(void *arg)
{
	proc_read_counts(arg);
	return 0;
}

void drain_publish(struct drain *d)
{
	struct drain_stats st = d->my;

	st.n = d->finished;
	st.nrings = 0;
	for (struct proc *p = d->procs; p; p = p->dnext) {
		/* a fault here is found again (and handled) by the next pass */
		if (!p->shrunk)
			shm_guarded(read_counts, p);
		proc_counts_add(&st.n, &p->n);
		st.nrings += p->snap.nrings;
	}
	pthread_mutex_lock(&d->lock);
	d->st = st;
	pthread_mutex_unlock(&d->lock);
}

void drain_pass(struct drain *d, uint64_t now)
{
	struct proc *in;
	int stop, blocked = 0;

	pthread_mutex_lock(&d->lock);
	in = d->incoming;
	d->incoming = NULL;
	stop = d->stop;
	pthread_mutex_unlock(&d->lock);
	while (in) {
		struct proc *p = in;

		in = p->dnext;
		p->dnext = d->procs;
		d->procs = p;
	}
	if (d->last_pass_ns && now - d->last_pass_ns > d->my.max_gap_ns)
		d->my.max_gap_ns = now - d->last_pass_ns;
	d->last_pass_ns = now;
	d->my.ticks++;
	d->my.max_fill = 0;

	for (struct proc *p = d->procs, *nx; p && !blocked; p = nx) {
		nx = p->dnext;
		blocked = pass_one(d, p, now) != 0;
	}
	if (d->cur && (d->cur->b.count || d->cur->retired) &&
	    (d->cur->retired || stop || d->cur->b.count >= d->cur->b.max_count ||
	     (!bqueue_len(d->q) && now - d->last_seal_ns >= d->flush_ns / 4 * 3)))
		drain_seal(d, now);
	if (d->tap)
		spantap_pass_end(d->tap);
	drain_publish(d);
}
