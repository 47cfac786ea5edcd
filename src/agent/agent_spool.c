// SPDX-License-Identifier: MIT
/*
 * The agent's main thread, its side of the durability protocol
 * (agent.h, agent_int.h): each batch the drain thread sealed is written
 * to the spool, in order, before anything depends on it; the processes
 * whose last records it holds are then retired (file removed, cursors
 * forgotten); the cursor file is saved now and then.  And the stats
 * (STATE-DIR/stats.json, the STATS message), mostly these counters.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "agent/flight.h"
#include "agent/keepreg.h"
#include "agent/spantap.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/file_atomic.h"
#include "common/log.h"
#include "common/version.h"

#define CURSOR_SAVE_NS     (1000 * 1000000ull)

/* ---- spooling (the drain thread's batches) ------------------------------- */

static void save_cursors(struct agent *a, uint64_t now)
{
	uint64_t t0 = clock_monotonic_ns(), dt;
	int ret = spool_save_cursors(&a->spool);

	dt = clock_monotonic_ns() - t0;
	if (dt > a->max_save_ns)
		a->max_save_ns = dt;
	a->next_save_ns = now + CURSOR_SAVE_NS;
	if (ret)
		pr_err("cannot write %s: %s (the spooled batch trailers still hold the cursors)",
		       a->cursors_path, errstr(ret));
}

/* The cursor file: at most once per CURSOR_SAVE_NS, when it is behind
 * the spool or ACKed batch files wait for it (force: now). */
void agent_maybe_save(struct agent *a, uint64_t now, int force)
{
	if (!a->spool.dirty && !a->spool.nacked)
		return;
	if (force || now >= a->next_save_ns)
		save_cursors(a, now);
}

/*
 * p's last records are spooled: remove its file, then forget its cursors
 * (killed in between, the next agent finds stale cursors, pruned at start,
 * rather than the file without cursors, which it would ship again).
 */
static void retire(struct agent *a, struct proc *p)
{
	const struct proc_counts *n = &p->n;

	if (unlinkat(p->dir->fd, p->name, 0) && errno != ENOENT)
		pr_warn("cannot remove %s: %s; keeping its cursors", p->path, errstr(errno));
	else
		spool_forget(&a->spool, p->instance);
	pr_info("process %u (%s) gone (%s): %" PRIu64 " spans shipped to the spool; lost: "
		"%" PRIu64 " ring overwrite, %" PRIu64 " died mid-span, %" PRIu64 " no handle, %"
		PRIu64 " no ring, %" PRIu64 " no room, %" PRIu64 " too big, %" PRIu64
		" bad records, %" PRIu64 " nested; %" PRIu64 " truncated", p->pid, p->service,
		p->why, n->drained, n->ring_lost, n->died_mid_span, n->lost_no_handle,
		n->lost_no_ring, n->lost_no_room, n->lost_too_big + n->too_big, n->bad,
		n->lost_nested, n->truncated);
	if (n->died_mid_span)
		pr_warn("process %u (%s): %" PRIu64 " spans lost: process died mid-span",
			p->pid, p->service, n->died_mid_span);
	a->procs_gone++;
	for (struct proc **pp = &a->procs; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	p->next = a->dead;
	a->dead = p;
}

/* Write one sealed batch to the spool.  Returns 0 or -errno (kept in the
 * queue, tried again on the next tick). */
static int spool_batch(struct agent *a, struct qbatch *qb, uint64_t now)
{
	uint64_t seq = a->next_seq, t0, dt;
	uint32_t flen;
	int ret;

	if (!qb->b.count)
		return 0;
	flen = wire_batch_seal(&qb->b, seq);
	t0 = clock_monotonic_ns();
	ret = spool_put(&a->spool, qb->b.buf, flen, qb->b.count, qb->trail, qb->ntrail);
	dt = clock_monotonic_ns() - t0;
	if (dt > a->max_put_ns)
		a->max_put_ns = dt;
	if (ret) {
		if (!a->spool_blocked)
			pr_err("spool: cannot write batch %" PRIu64 " to %s: %s; holding it (batches "
			       "wait in memory, up to --queue-max, then the rings)",
			       seq, a->spool.dir, errstr(ret));
		a->spool_blocked = 1;
		return ret;
	}
	if (a->spool_blocked)
		pr_info("spool: writing again (batch %" PRIu64 ")", seq);
	a->spool_blocked = 0;
	a->next_seq = seq + 1;
	if (a->crash_after_spool && !--a->crash_after_spool) {
		pr_warn("testpoint: batch %" PRIu64 " spooled, cursors not saved: SIGKILL", seq);
		raise(SIGKILL);
	}
	a->batches_spooled++;
	a->spans_spooled += qb->b.count;
	(void)now;
	return 0;
}

/* Spool every queued batch, in order, and retire what they carry. */
void agent_on_queue(struct agent *a, uint64_t now)
{
	uint64_t v;
	int n = 0;

	if (read(a->q.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	for (;;) {
		struct qbatch *qb = bqueue_peek(&a->q);

		if (!qb)
			break;
		if (a->hold_spool && !access(a->hold_spool, F_OK))
			break;
		if (spool_batch(a, qb, now))
			break;
		while (qb->retired) {
			struct proc *p = qb->retired;

			qb->retired = p->dnext;
			retire(a, p);
		}
		bqueue_pop(&a->q);
		n++;
	}
	if (n)
		ship_pump(&a->ship, clock_monotonic_ns());
}

/* ---- stats ------------------------------------------------------------------ */

/* The containers' part of the stats: the directories looked into, and
 * each container with live traced processes: its tag (container.name or
 * container.id), its processes and their services. */
static json_t *containers_json(struct agent *a)
{
	json_int_t dirs = 0;
	json_t *live = json_object();

	for (struct shmdir *d = a->dirs; d; d = d->next)
		dirs += !d->host;
	for (struct proc *p = a->procs; live && p; p = p->next) {
		const uint8_t *t = p->tags.buf;	/* one TAG item: key, value */
		char key[16], val[65], svc[sizeof(p->snap.service)];
		unsigned klen, vlen;
		json_t *c, *ss;

		if (!p->tags.len || p->gone_why)
			continue;
		klen = (unsigned)(t[2] | t[3] << 8);
		vlen = (unsigned)(t[4] | t[5] << 8);
		snprintf(key, sizeof(key), "%.*s", (int)klen, (const char *)t + SPANREC_ITEM_HDR);
		snprintf(val, sizeof(val), "%.*s", (int)vlen,
			 (const char *)t + SPANREC_ITEM_HDR + klen);
		memcpy(svc, p->snap.service, sizeof(svc));
		svc[sizeof(svc) - 1] = '\0';
		c = json_object_get(live, val);
		if (!c) {
			c = json_pack("{s:s, s:I, s:[]}", "tag", key, "processes", (json_int_t)0,
				      "services");
			if (!c || json_object_set_new(live, val, c))
				continue;
		}
		json_object_set_new(c, "processes",
				    json_integer(json_integer_value(json_object_get(c, "processes")) + 1));
		ss = json_object_get(c, "services");
		{
			size_t i;
			json_t *v;
			int have = 0;

			json_array_foreach(ss, i, v)
				have |= !strcmp(json_string_value(v), svc);
			if (!have)
				json_array_append_new(ss, json_string(svc));
		}
	}
	return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:o*}", "looked_into", !a->roots_off,
			 "shm_dirs", dirs, "shm_dirs_seen", (json_int_t)a->ctr_dirs_seen,
			 "root_scans", (json_int_t)a->root_scans,
			 "max_root_scan_ms", (json_int_t)(a->root_scan_max_ns / 1000000),
			 "last_root_scan_us", (json_int_t)(a->root_scan_last_ns / 1000),
			 "live", live);
}

static char *stats_json(struct agent *a, uint64_t now)
{
	struct drain_stats ds;
	struct proc_counts t;
	json_t *j;
	char *s;

	drain_get_stats(&a->drain, &ds);
	t = ds.n;
	j = json_pack("{s:s, s:s, s:s, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:I, s:I, s:I, s:I,"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I},"
		      " s:I, s:I, s:I,"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I},"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I},"
		      " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}}",
		      "agent_id", a->agent_id, "host", a->o->host, "version", FAY_VERSION,
		      "uptime_s", (json_int_t)((now - a->start_ns) / 1000000000u),
		      "processes", "live", (json_int_t)(a->procs_seen - a->procs_gone),
		      "seen", (json_int_t)a->procs_seen, "gone", (json_int_t)a->procs_gone,
		      "corrupt_files", (json_int_t)a->corrupt_files,
		      "shrunk_files", (json_int_t)ds.shrunk_files,
		      "rings", (json_int_t)ds.nrings,
		      "records_drained", (json_int_t)t.drained,
		      "bad_records", (json_int_t)t.bad,
		      "other_records", (json_int_t)t.other,
		      "lost",
		      "ring_overwrite", (json_int_t)t.ring_lost,
		      "died_mid_span", (json_int_t)t.died_mid_span,
		      "no_handle", (json_int_t)t.lost_no_handle,
		      "no_ring", (json_int_t)t.lost_no_ring,
		      "no_room", (json_int_t)t.lost_no_room,
		      "too_big", (json_int_t)(t.lost_too_big + t.too_big),
		      "nested", (json_int_t)t.lost_nested,
		      "bad_record", (json_int_t)t.bad,
		      "spool_evicted", (json_int_t)a->spool.evicted_spans,
		      "spool_damaged", (json_int_t)a->spool.damaged_spans,
		      "collector_rejected", (json_int_t)a->ship.spans_rejected,
		      "truncated", (json_int_t)t.truncated,
		      "spans_started", (json_int_t)t.spans_started,
		      "corrupt_slots", (json_int_t)t.corrupt,
		      "spool",
		      "bytes", (json_int_t)a->spool.bytes,
		      "batches", (json_int_t)spool_unacked(&a->spool),
		      "evicted_batches", (json_int_t)a->spool.evicted_batches,
		      "evicted_spans", (json_int_t)a->spool.evicted_spans,
		      "damaged_files", (json_int_t)a->spool.corrupt_files,
		      "cursor_saves", (json_int_t)a->spool.saves,
		      "max_write_ms", (json_int_t)(a->max_put_ns / 1000000),
		      "max_cursor_save_ms", (json_int_t)(a->max_save_ns / 1000000),
		      "shipping",
		      "batches_spooled", (json_int_t)a->batches_spooled,
		      "spans_spooled", (json_int_t)a->spans_spooled,
		      "batches_acked", (json_int_t)a->ship.batches_acked,
		      "spans_acked", (json_int_t)a->ship.spans_acked,
		      "batches_nacked", (json_int_t)a->ship.batches_nacked,
		      "connects", (json_int_t)a->ship.connects,
		      "connected", (json_int_t)(a->ship.state == SHIP_READY),
		      "drain",
		      "passes", (json_int_t)ds.ticks,
		      "max_gap_ms", (json_int_t)(ds.max_gap_ns / 1000000),
		      "max_pass_ms", (json_int_t)(ds.max_pass_ns / 1000000),
		      "batches", (json_int_t)ds.sealed,
		      "queue_max", (json_int_t)a->q.max,
		      "queue_hwm", (json_int_t)a->q.hwm,
		      "stalls", (json_int_t)ds.stalls,
		      "stalled_ms", (json_int_t)(ds.stalled_ns / 1000000),
		      "fast_tick", ds.fast_tick);
	if (!j)
		return NULL;
	if (a->tap) {
		uint64_t fed, dropped;

		spantap_counts(a->tap, &fed, &dropped);
		json_object_set_new(j, "span_queries",
				    json_pack("{s:I, s:I}", "spans_fed", (json_int_t)fed,
					      "blkin_given_up", (json_int_t)dropped));
	}
	json_object_set_new(j, "unsampled", json_pack("{s:I, s:I}",
			    "records", (json_int_t)t.unsampled,
			    "dropped_no_flight", (json_int_t)t.unsampled_off));
	if (a->flight) {
		struct flight_stats fs;

		flight_get_stats(a->flight, &fs);
		json_object_set_new(j, "flight", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
				    "bytes", (json_int_t)fs.bytes, "used", (json_int_t)fs.used,
				    "spans", (json_int_t)fs.held, "added", (json_int_t)fs.added,
				    "dropped", (json_int_t)fs.dropped,
				    "too_big", (json_int_t)fs.too_big,
				    "oldest_ns", (json_int_t)fs.oldest_ns,
				    "captures", (json_int_t)fs.captures));
		if (fs.dropped && !a->flight_dropped_logged)
			pr_info("flight buffer full (%" PRIu64 " bytes): the oldest spans make room "
				"for new ones (counted: flight.dropped in stats.json)", fs.bytes);
		a->flight_dropped_logged = fs.dropped;
	}
	if (a->keeps) {
		struct keepbuf_stats ks;
		int nq;

		keepreg_totals(a->keeps, clock_realtime_ns(), &ks, &nq);
		json_object_set_new(j, "keep", json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I}",
				    "queries", nq, "bytes", (json_int_t)ks.bytes,
				    "held", (json_int_t)ks.held, "added", (json_int_t)ks.added,
				    "overwritten", (json_int_t)ks.overwritten,
				    "expired", (json_int_t)ks.expired,
				    "oldest_ns", (json_int_t)ks.oldest_ns));
	}
	json_object_set_new(j, "containers", containers_json(a));
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

void agent_do_stats(struct agent *a, uint64_t now, int send)
{
	char *s = stats_json(a, now);
	int ret;

	if (!s)
		return;
	ret = file_write_atomic(a->stats_path, s, strlen(s), 0600, FILE_ATOMIC_NOSYNC);
	if (ret)
		pr_debug("cannot write %s: %s", a->stats_path, errstr(ret));
	if (send)
		ship_send_stats(&a->ship, s, strlen(s), now);
	free(s);
}
