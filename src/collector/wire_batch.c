// SPDX-License-Identifier: MIT
/*
 * An agent connection's BATCH frames (the collector half of
 * src/common/wire.h): decoded, stored, ACKed.
 *
 * Read-ahead: an agent pipelines up to its window of batches, which wait
 * in the socket.  After a BATCH, the BATCHes that are already there (read
 * without blocking, at most WIRE_AHEAD_BATCHES / WIRE_AHEAD_SPANS) are
 * stored with it as one chain (ingest_write_chain(): one store write,
 * all or none), then ACKed in order; each batch read ahead takes its
 * frame's size from --max-memory's budget until it is ACKed (a full
 * budget just ends the read-ahead).  Without it a connection had one
 * batch in the store's hands at a time, so a store write held at most one
 * batch per agent, whatever --clickhouse-linger waited for.  The rule of
 * wire_server.c is kept: what is committed of a connection is a prefix of
 * what it sent.  A chain that fails is NACKed at its first batch and the
 * connection closed; a frame read ahead that is not a BATCH, or does not
 * decode, is handled after the chain's ACKs as if just read.  Near the
 * store's disk watermark the read-ahead stops at the room left
 * (store__write_room()), so one large chain does not fill the disk.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/collector_int.h"
#include "collector/wire_int.h"
#include "common/budget.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/spanrec.h"
#include "common/wire.h"

#define WIRE_MAX_SEQ_JUMP     (UINT64_C(1) << 32) /* past the last BATCH seq */
#define WIRE_REJECT_LOG_MAX   10     /* rejected-span warnings per connection */
#define WIRE_AHEAD_BATCHES    32     /* a chain: at most this many batches */
#define WIRE_AHEAD_SPANS      50000  /* ... and about this many spans */

/* A batch decoded, waiting for its store write. */
struct pend {
	struct zarena a;          /* its spans and parts */
	struct store_batch b;
	uint64_t seq;
	uint32_t count, rejected; /* records in the frame, records refused */
};

/*
 * Decode BATCH frame f into p.  0, or: quiet, -EAGAIN for anything wrong
 * (nothing said, nothing counted: the frame is handled again later, not
 * quietly); else the answer already given (a violation's -EPROTO, a
 * NACK's 1).
 */
static int decode(struct agent_conn *ac, const struct wire_frame *f, struct pend *p,
		  bool quiet)
{
	struct collector *c = ac->c;
	struct wire_batch_rd rd;
	struct zspan *spans = NULL;
	struct zs_part *parts = NULL;
	size_t nparts = 0, pcap = 0;
	const uint8_t *rec;
	uint32_t rl;
	char err[256];
	int ret;

	memset(p, 0, sizeof(*p));
	p->seq = f->h.seq;
	if (!ac->agent_id[0])
		return quiet ? -EAGAIN : wire_violation(ac, "BATCH seq %" PRIu64 " before HELLO",
							f->h.seq);
	/* A real agent numbers its batches one by one (evicted ones leave
	 * gaps of at most its spool's size): a seq this far ahead would make
	 * every later batch of the agent a "duplicate". */
	if (f->h.seq > ac->hi_seq && f->h.seq - ac->hi_seq > WIRE_MAX_SEQ_JUMP) {
		if (quiet)
			return -EAGAIN;
		M_ADD(c, seq_jumps, 1);
		return wire_violation(ac, "BATCH seq %" PRIu64 " is %" PRIu64 " past the last one "
				      "(%" PRIu64 "): refused, a jump of more than 2^32", f->h.seq,
				      f->h.seq - ac->hi_seq, ac->hi_seq);
	}
	if (wire_get_batch(f, &rd, err, sizeof(err)))
		return quiet ? -EAGAIN : wire_violation(ac, "%s", err);
	spans = zarena_alloc(&p->a, sizeof(*spans) * (rd.count + 1));
	if (!spans) {
		ret = -ENOMEM;
		goto nack;
	}
	while ((ret = wire_batch_next(&rd, &rec, &rl, err, sizeof(err))) > 0) {
		struct spanrec r;
		int n = spanrec_decode(rec, rl, &r, err, sizeof(err));

		if (n >= 0 && (uint32_t)n != rl) {
			snprintf(err, sizeof(err), "span record: %u bytes after its end", rl - (uint32_t)n);
			n = -EBADMSG;
		}
		if (n < 0) {
			p->rejected++;
			if (ac->rejected_logged++ < WIRE_REJECT_LOG_MAX)
				pr_warn("wire: agent %s (%s): BATCH seq %" PRIu64 ": span %u rejected: %s",
					ac->agent_id, ac->host, f->h.seq, rd.i - 1, err);
			continue;
		}
		if (r.f.flags & SPAN_F_PARTIAL)
			ret = zparts_from_rec(&r, &p->a, &parts, &nparts, &pcap);
		else
			ret = zspan_from_rec(&r, &p->a, &spans[p->b.nspans]);
		if (ret < 0)
			goto nack;
		if (!(r.f.flags & SPAN_F_PARTIAL))
			p->b.nspans++;
	}
	if (ret < 0) {
		zarena_reset(&p->a);
		return quiet ? -EAGAIN : wire_violation(ac, "%s", err);
	}
	p->count = rd.count;
	p->b.agent_id = ac->agent_id;
	p->b.host = ac->host[0] ? ac->host : NULL;
	p->b.seq = f->h.seq;
	p->b.spans = spans;
	p->b.parts = parts;
	p->b.nparts = nparts;
	(void)store__prepare(ac->c->store, &p->b, &p->a); /* else the writer does it */
	return 0;
nack:
	zarena_reset(&p->a);
	return quiet ? -EAGAIN : wire_nack(ac, f->h.seq, errstr(ret));
}

/* Count a stored batch and ACK it.  0 or -errno. */
static int ack_one(struct agent_conn *ac, const struct pend *p)
{
	struct collector *c = ac->c;
	struct wire_ack ack = { .seq = p->seq };
	const struct store_batch *b = &p->b;
	int ret;

	if (b->duplicate) {
		M_ADD(c, batches_duplicate, 1);
		M_ADD(c, spans_duplicate, p->count - p->rejected);
	} else {
		M_ADD(c, batches, 1);
		M_ADD(c, spans_stored, b->stored);
	}
	if (ac->agent) {
		pthread_mutex_lock(&c->agents_lock);
		ac->agent->rejected += p->rejected;
		ac->agent->last_seen_us = clock_realtime_ns() / 1000;
		if (b->duplicate) {
			ac->agent->duplicates++;
		} else {
			ac->agent->batches++;
			ac->agent->spans += b->stored;
			ac->agent->last_seq = p->seq;
		}
		pthread_mutex_unlock(&c->agents_lock);
	}
	if (!b->duplicate && p->seq > ac->hi_seq)
		ac->hi_seq = p->seq;
	ack.stored = b->stored;
	ack.duplicate = b->duplicate;
	ack.rejected = p->rejected;
	ret = wire_put_ack(&ac->out, &ack);
	return ret;
}

/* Read ahead the BATCHes waiting behind the first into v[1..]: their
 * number in all.  What stops it (another frame, a batch that does not
 * decode, a read error) is kept for next_frame(). */
static size_t read_ahead(struct agent_conn *ac, struct pend *v, size_t *taken)
{
	size_t n = 1, spans = v[0].b.nspans + v[0].b.nparts;
	uint64_t room = store__write_room(ac->c->store) / STORE_SPAN_DISK;
	struct wire_frame f;

	/* near the disk's watermark (store.h) a chain is no larger than
	 * the room left: the first batch always goes, and one batch over
	 * is what the watermark keeps room for */
	while (n < WIRE_AHEAD_BATCHES && spans < WIRE_AHEAD_SPANS && spans < room) {
		int ret = wire_read(&ac->rd, ac->w->a.fd, &f, ac->held_err, sizeof(ac->held_err));

		if (ret == 0)
			break;
		if (ret < 0) {
			ac->held_ret = ret;
			break;
		}
		if (f.h.type != WIRE_BATCH || mem_budget_take(&ac->c->mem, f.h.len)) {
			ac->held = f;
			ac->has_held = true;
			break;
		}
		if (decode(ac, &f, &v[n], true)) {
			mem_budget_give(&ac->c->mem, f.h.len);
			ac->held = f;
			ac->has_held = true;
			break;
		}
		*taken += f.h.len;
		spans += v[n].b.nspans + v[n].b.nparts;
		n++;
	}
	return n;
}

int wire_on_batch(struct agent_conn *ac, const struct wire_frame *f)
{
	struct pend *v = calloc(WIRE_AHEAD_BATCHES, sizeof(*v));
	struct store_batch *bs[WIRE_AHEAD_BATCHES];
	size_t n, store_n, taken = 0;
	char err[256];
	int ret;

	if (!v)
		return wire_nack(ac, f->h.seq, "out of memory");
	ret = decode(ac, f, &v[0], false);
	if (ret) {
		free(v);
		return ret;
	}
	n = read_ahead(ac, v, &taken);
	for (size_t i = 0; i < n; i++) {
		M_ADD(ac->c, spans_received, v[i].count);
		M_ADD(ac->c, spans_rejected, v[i].rejected);
	}
	/* the test point NACKs a batch as if the store had failed: the
	 * chain stops before it */
	store_n = n;
	for (size_t i = 0; i < n && ac->test_nack_every; i++)
		if (++ac->test_nbatches % ac->test_nack_every == 0) {
			store_n = i;
			break;
		}
	for (size_t i = 0; i < store_n; i++)
		bs[i] = &v[i].b;
	ret = store_n ? ingest_write_chain(ac->c->ingest, bs, store_n, err, sizeof(err)) : 0;
	if (ret) {
		ret = wire_nack(ac, v[0].seq, err);
		goto out;
	}
	for (size_t i = 0; i < store_n && !ret; i++)
		ret = ack_one(ac, &v[i]);
	if (!ret)
		ret = wire_flush_out(ac);
	if (!ret && store_n < n)
		ret = wire_nack(ac, v[store_n].seq, "test point FAY_WIRE_TEST_NACK_EVERY");
out:
	for (size_t i = 0; i < n; i++)
		zarena_reset(&v[i].a);
	free(v);
	mem_budget_give(&ac->c->mem, taken);
	return ret;
}
