// SPDX-License-Identifier: MIT
/*
 * The query thread of one cluster query (cluster_query_run()): it asks
 * the members, then every CQ_TICK_MS opens the windows the clock reached,
 * emits those complete or past their grace, or the snapshots and the final
 * result of a query without a window, and notes the progress (the rules
 * are in cquery.c's head; what the members send is merged there).
 *
 * Lines are built under the cluster lock into a buffer and emitted after
 * it is released, so a slow HTTP client never holds up the peers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/cluster_int.h"
#include "common/clock.h"
#include "common/log.h"
#include "query/query.h"

#define CQ_SNAPSHOT_NS	1000000000ull
#define CQ_STATUS_WAIT_NS 2000000000ull	/* for every member's QSTATUS */

/* ---- the query thread's tick --------------------------------------------- */

static void tick_windows(struct cq_run *run, uint64_t now)
{
	struct cquery *q = run->q;
	unsigned kept = 0;

	while (q->next_wstart <= now && (!q->deadline_rt || q->next_wstart < q->deadline_rt)) {
		cq_window_at(q, q->next_wstart, true);
		q->next_wstart += q->window_ns;
	}
	for (struct cwin *w = q->wins; w && !run->done; w = w->next) {
		bool complete = true;

		if (w->emitted) {
			if (w->amend) {
				cq_emit_window(run, w, true);
				w->amend = false;
			}
			continue;
		}
		for (size_t i = 0; i < q->nm; i++)
			if (cq_expected(&q->m[i]) && !w->got[i])
				complete = false;
		if (now < w->end && !(complete && q->deadline_rt && w->end >= q->deadline_rt &&
				      q->nm))
			break;
		/* a child collector waits its own grace before it reports */
		if (!complete && now < w->end + q->grace_ns * (q->has_collectors ? 2 : 1))
			break;
		cq_emit_window(run, w, false);
		w->emitted = true;
	}
	/* keep the last few emitted windows for late partials */
	for (struct cwin *w = q->wins; w && w->emitted; w = w->next)
		kept++;
	while (kept-- > CQ_KEEP_WINDOWS) {
		struct cwin *w = q->wins;

		q->wins = w->next;
		cq_window_free(w);
	}
}

/* Emit the merge of the members' latest snapshots; the final result merges
 * only the members whose final PARTIAL came (a host whose final is late is
 * missing from it, not answered by a stale snapshot; one that attached
 * after the deadline traced none of the time: missing too), and notes
 * which finals it holds so that a late one is seen. */
static void emit_snapshots(struct cq_run *run, uint64_t now, bool final, bool amended)
{
	struct cquery *q = run->q;
	struct ptable *t = ptable_new(q->p);
	unsigned char *got = calloc(q->nm + 1, 1);
	uint64_t c[ENGINE_NCOUNTERS] = { 0 };
	unsigned answered = 0;
	bool provisional = false;

	if (!t || !got) {
		ptable_free(t);
		free(got);
		return;
	}
	for (size_t i = 0; i < q->nm; i++) {
		struct cmember *m = &q->m[i];

		if ((cq_expected(m) && !m->final) || (final && cq_attached_late(q, m)))
			provisional = true;
		if (final)
			m->nfinal_seen = m->nfinal;
		if (!m->snap || (final && (!m->final || cq_attached_late(q, m))))
			continue;
		got[i] = 1;
		answered += m->nsubs ? m->nsubs : 1;
		ptable_merge_table(t, m->snap);
		for (int k = 0; k < ENGINE_NCOUNTERS; k++)
			c[k] += m->snap_counters[k];
	}
	cq_emit_snapshot(run, t, now, c, got, answered, run->late, final, provisional, amended);
	ptable_free(t);
	free(got);
}

/* A query without a window: a snapshot every second; the final result when
 * every member sent its final or the deadline plus the grace period passed
 * (a child collector's own grace first); then, for one grace period more,
 * the final result again, amended, whenever a late final arrives. */
static void tick_snapshots(struct cq_run *run, uint64_t now)
{
	struct cquery *q = run->q;
	uint64_t due = q->deadline_rt + q->grace_ns * (q->has_collectors ? 2 : 1);
	bool all_final = q->nm > 0;
	unsigned late = 0;

	for (size_t i = 0; i < q->nm; i++) {
		const struct cmember *m = &q->m[i];

		if (cq_expected(m) && !m->final)
			all_final = false;
		if (m->nfinal != m->nfinal_seen)
			late += m->nsubs ? m->nsubs : 1;
	}
	if (run->final_sent) {
		if (late) {
			run->late += late;
			emit_snapshots(run, now, true, true);
		}
		run->done = all_final || now >= due + q->grace_ns;
		return;
	}
	if (all_final || (q->deadline_rt && now >= due)) {
		emit_snapshots(run, now, true, false);
		run->final_sent = true;
		run->done = all_final;
	} else if (now >= run->next_snapshot) {
		emit_snapshots(run, now, false, false);
		run->next_snapshot = now + CQ_SNAPSHOT_NS;
	}
}

static void tick(struct cq_run *run)
{
	struct cquery *q = run->q;
	uint64_t now = clock_realtime_ns();
	unsigned replied = 0, failed = 0, statuses = 0;

	for (size_t i = 0; i < q->nm; i++) {
		replied += q->m[i].replied || q->m[i].state == CM_GONE;
		failed += q->m[i].state == CM_FAILED;
		statuses += q->m[i].state * 7 + q->m[i].replied;	/* changes */
	}
	if ((replied == q->nm || now - q->start_rt > CQ_STATUS_WAIT_NS) &&
	    (!run->status_sent || statuses != run->nstatus)) {
		cq_emit_progress(run);
		run->status_sent = true;
		run->nstatus = statuses;
	}
	if (q->nm && failed == q->nm) {
		size_t n = (size_t)snprintf(run->err, sizeof(run->err),
					    "no host can run this query:");

		for (size_t i = 0; i < q->nm && n < sizeof(run->err); i++)
			n += (size_t)snprintf(run->err + n, sizeof(run->err) - n, "%s %s: %s",
					      i ? ";" : "", q->m[i].host, q->m[i].info);
		run->done = true;
		return;
	}
	if (q->p->mode == PLAN_STREAM) {
		bool all_ended = q->nm > 0;

		cq_emit_rows(run);
		for (size_t i = 0; i < q->nm; i++)
			if (cq_expected(&q->m[i]) && !q->m[i].final)
				all_ended = false;
		if (all_ended || (q->deadline_rt && now >= q->deadline_rt + q->grace_ns))
			run->done = true;
	} else if (q->window_ns) {
		tick_windows(run, now);
		if (q->deadline_rt && now >= q->deadline_rt + 2 * q->grace_ns)
			run->done = true;	/* nothing more will come */
	} else {
		tick_snapshots(run, now);
	}
}

/* ---- running ------------------------------------------------------------- */

static void cq_free(struct cquery *q)
{
	while (q->wins) {
		struct cwin *w = q->wins;

		q->wins = w->next;
		cq_window_free(w);
	}
	while (q->chunks) {
		struct cchunk *c = q->chunks;

		q->chunks = c->next;
		free(c->body);
		free(c);
	}
	for (size_t i = 0; i < q->nm; i++) {
		ptable_free(q->m[i].snap);
		free(q->m[i].subs);
	}
	free(q->m);
	pthread_cond_destroy(&q->cond);
	free(q);
}

/* The names of the connected peers, for "not connected" errors. */
static void peer_names(struct cluster *cl, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (struct cpeer *p = cl->peers; p && n < len; p = p->next)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", p->host);
	if (!n)
		snprintf(buf, len, "none");
}

static int start(struct cluster *cl, struct cquery *q, char *err, size_t errlen)
{
	for (struct cpeer *p = cl->peers; p; p = p->next)
		if (!p->dead && cq_in_scope(q, p) && cq_ask(q, p))
			pr_warn("query %" PRIu32 ": cannot ask %s", q->qid, p->host);
	if (q->nm)
		return 0;
	{
		char names[1024];

		peer_names(cl, names, sizeof(names));
		if (q->scope_host)
			snprintf(err, errlen, "host '%s' has no agent connected to this collector (connected: %s)",
				 q->scope_host, names);
		else
			snprintf(err, errlen, "no agent is connected to this collector: start fay agent --collector ADDR on the hosts to query");
	}
	return -EHOSTUNREACH;
}

/* Emit what the tick queued: lines through env->emit at the root,
 * frames up the tree.  Called without cl->lock.  0 or -errno. */
static int flush(struct cq_run *run, const struct qengine_env *env)
{
	struct wbuf lines = run->lines, frames = run->frames;
	int ret = lines.err ? lines.err : frames.err;

	memset(&run->lines, 0, sizeof(run->lines));
	memset(&run->frames, 0, sizeof(run->frames));
	for (size_t at = 0; !ret && at < lines.len;) {
		unsigned char *nl = memchr(lines.p + at, '\n', lines.len - at);
		size_t l = (size_t)(nl - (lines.p + at));

		ret = env->emit(env->ctx, (const char *)lines.p + at, l);
		at += l + 1;
	}
	for (size_t at = 0; !ret && at + 5 <= frames.len;) {
		struct wbuf w = { .p = frames.p + at + 5 };
		uint32_t l;

		memcpy(&l, frames.p + at + 1, 4);	/* le32, written on this host */
		w.len = l;
		/* a lost link: the upper collector asks again when it is back */
		qlink_send(run->o->up->link, frames.p[at], &w);
		at += 5 + l;
	}
	wbuf_free(&lines);
	wbuf_free(&frames);
	return ret;
}

int cluster_query_run(struct cluster *cl, struct query *qq, const struct plan *p,
		      const char *text, const struct cluster_qopts *o,
		      const struct qengine_env *env, char *err, size_t errlen)
{
	const struct ast_query *aq = query_ast(qq);
	struct cquery *q = calloc(1, sizeof(*q)), **pp;
	struct cq_run run = { .q = q, .o = o };
	int ret = 0;

	if (!q)
		return -ENOMEM;
	q->cl = cl;
	q->text = text;
	q->len = strlen(text);
	q->p = p;
	q->scope_host = aq->src.scope == SCOPE_HOST ? aq->src.scope_host : NULL;
	q->start_rt = clock_realtime_ns();
	q->window_ns = p->mode == PLAN_STREAM ? 0 : p->window_ns;
	q->deadline_rt = o->up ? o->up->deadline_ns :
			 p->for_ns ? q->start_rt + p->for_ns : 0;
	q->grace_ns = o->grace_ns ? o->grace_ns : CLUSTER_GRACE_NS;
	q->host_answers = o->host_answers && !o->up;
	q->flat = o->flat && !o->up && !q->scope_host;
	q->from_flat = o->from_flat;
	if (q->window_ns)
		q->next_wstart = q->start_rt / q->window_ns * q->window_ns;
	q->chunks_tail = &q->chunks;
	pthread_cond_init(&q->cond, NULL);
	run.next_snapshot = q->start_rt + CQ_SNAPSHOT_NS;

	pthread_mutex_lock(&cl->lock);
	q->qid = cl->next_qid++;
	q->next = cl->queries;
	cl->queries = q;
	ret = start(cl, q, err, errlen);
	while (!ret && !run.done && !cl->stop && !*env->stop) {
		struct timespec ts;
		uint64_t at = clock_realtime_ns() + CQ_TICK_MS * 1000000ull;

		ts.tv_sec = (time_t)(at / 1000000000ull);
		ts.tv_nsec = (long)(at % 1000000000ull);
		pthread_cond_timedwait(&q->cond, &cl->lock, &ts);
		tick(&run);
		if (run.done)
			cq_emit_end(&run);
		if (run.lines.len || run.lines.err || run.frames.len || run.frames.err) {
			pthread_mutex_unlock(&cl->lock);
			ret = flush(&run, env);
			pthread_mutex_lock(&cl->lock);
		}
	}
	if (!ret && run.err[0]) {
		snprintf(err, errlen, "%s", run.err);
		ret = -EHOSTUNREACH;
	}
	/* every member detaches its probes */
	for (size_t i = 0; i < q->nm; i++)
		if (q->m[i].peer)
			cpeer_send_cancel(q->m[i].peer, q->qid);
	for (pp = &cl->queries; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	pthread_cond_broadcast(&cl->peers_gone);
	pthread_mutex_unlock(&cl->lock);
	wbuf_free(&run.lines);
	wbuf_free(&run.frames);
	engine_cats_free(run.cat_prev);
	cq_free(q);
	return *env->stop ? -EPIPE : ret;
}
