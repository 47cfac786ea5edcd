// SPDX-License-Identifier: MIT
/*
 * One cluster query at the collector (cluster.h).
 *
 * Members.  Every host the scope names that has a query connection is
 * asked (QUERY); it answers QSTATUS attached (its probes) or failed (its
 * reason).  A query no member can run is an error naming each host's
 * reason; one some members cannot run goes on with the others and says
 * which could not and why (the "progress" line).
 *
 * Windows.  Hosts align windows on wall-clock multiples of the window, so
 * window [S, S+W) means the same on every host.  The query thread opens
 * each window as the clock reaches it and emits it when every expected
 * member has reported it, or once its end plus the grace period has
 * passed (then it is provisional and the members that did not report are
 * listed missing).  A member's PARTIAL that arrives after its window was
 * emitted is merged and counted late, and the window is emitted again
 * marked amended.  A member whose connection is gone is not waited for:
 * it is listed missing until it comes back and rejoins.
 *
 * Without a window, members send cumulative snapshots every second: the
 * latest of each is kept, their merge is emitted every second, and the
 * final merge once every member sent its last (or the deadline plus the
 * grace period passed: then it is provisional, merges only the members
 * whose final came and lists the others missing; a final that comes
 * within one more grace period is merged and the result emitted again,
 * amended, counting it late).  A stream forwards records as they arrive.
 *
 * This file: the members and what they send (QSTATUS, PARTIAL), merged
 * into the windows or snapshots; the query thread that opens and emits
 * them, and the run itself, are in cquery_run.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_int.h"
#include "common/clock.h"
#include "common/log.h"

/* ---- members ---------------------------------------------------------- */

static struct cquery *find_query(struct cluster *cl, uint32_t qid)
{
	for (struct cquery *q = cl->queries; q; q = q->next)
		if (q->qid == qid)
			return q;
	return NULL;
}

static struct cmember *member_of(struct cquery *q, const struct cpeer *p)
{
	for (size_t i = 0; i < q->nm; i++)
		if (q->m[i].peer == p)
			return &q->m[i];
	return NULL;
}

bool cq_in_scope(const struct cquery *q, const struct cpeer *p)
{
	if (q->from_flat && p->collector && cluster_flat_find(q->cl, p->host))
		return false;
	return !q->scope_host || p->collector || !strcmp(q->scope_host, p->host);
}

/* Ask p to run q (a new member, or a member back after a reconnect). */
int cq_ask(struct cquery *q, struct cpeer *p)
{
	struct cmember *m = NULL;

	for (size_t i = 0; i < q->nm; i++)
		if (!strcmp(q->m[i].host, p->host))
			m = &q->m[i];
	if (!m) {
		if (q->nm == q->capm) {
			size_t nc = q->capm ? 2 * q->capm : 16;
			struct cmember *nm = realloc(q->m, nc * sizeof(*nm));

			if (!nm)
				return -ENOMEM;
			q->m = nm;
			q->capm = nc;
			for (struct cwin *w = q->wins; w; w = w->next) {
				unsigned char *ng = realloc(w->got, nc);

				if (!ng)
					return -ENOMEM;
				memset(ng + w->ngot, 0, nc - w->ngot);
				w->got = ng;
				if (w->ht) {
					struct ptable **nh = realloc(w->ht, nc * sizeof(*nh));

					if (!nh)
						return -ENOMEM;
					memset(nh + w->ngot, 0, (nc - w->ngot) * sizeof(*nh));
					w->ht = nh;
				}
				w->ngot = nc;
			}
		}
		m = &q->m[q->nm++];
		memset(m, 0, sizeof(*m));
		snprintf(m->host, sizeof(m->host), "%s", p->host);
	}
	m->peer = p;
	m->state = CM_ASKED;
	if (p->collector)
		q->has_collectors = true;
	free(m->subs);
	m->subs = NULL;
	m->nsubs = 0;
	m->replied = m->final = false;
	m->attached_rt = 0;
	m->info[0] = '\0';
	ptable_free(m->snap);
	m->snap = NULL;
	return cpeer_send_query(p, q);
}

void cquery_peer_joined(struct cluster *cl, struct cpeer *p)
{
	for (struct cquery *q = cl->queries; q; q = q->next) {
		if (!cq_in_scope(q, p))
			continue;
		if (q->deadline_rt && clock_realtime_ns() >= q->deadline_rt)
			continue;
		if (cq_ask(q, p))
			pr_warn("query %" PRIu32 ": cannot ask %s", q->qid, p->host);
		pthread_cond_broadcast(&q->cond);
	}
}

void cquery_peer_left(struct cluster *cl, struct cpeer *p)
{
	for (struct cquery *q = cl->queries; q; q = q->next) {
		struct cmember *m = member_of(q, p);

		if (!m)
			continue;
		m->peer = NULL;
		if (m->state == CM_ASKED || m->state == CM_ATTACHED) {
			m->state = CM_GONE;
			snprintf(m->info, sizeof(m->info), "its connection was lost");
		}
		pthread_cond_broadcast(&q->cond);
	}
}

void cquery_on_status(struct cluster *cl, struct cpeer *p, const struct wire_qstatus *s)
{
	struct cquery *q = find_query(cl, s->qid);
	struct cmember *m = q ? member_of(q, p) : NULL;
	size_t n;

	if (!m)
		return;		/* a query that ended meanwhile */
	m->replied = true;
	if (s->state == WIRE_QS_ATTACHED) {
		m->state = CM_ATTACHED;
		/* a child collector says attached when its hosts answered or
		 * 2 s passed: not when their probes attached; it judges its own
		 * hosts' attach (its final PARTIAL names them missing) */
		if (!p->collector)
			m->attached_rt = clock_realtime_ns();
	}
	else if (s->state == WIRE_QS_FAILED)
		m->state = CM_FAILED;
	else
		m->state = CM_ENDED;
	if (s->state != WIRE_QS_ENDED) {
		n = s->len < sizeof(m->info) - 1 ? s->len : sizeof(m->info) - 1;
		memcpy(m->info, s->text, n);
		m->info[n] = '\0';
		while (n && m->info[n - 1] == '\n')
			m->info[--n] = '\0';
	}
	pthread_cond_broadcast(&q->cond);
}

/* ---- windows ---------------------------------------------------------- */

struct cwin *cq_window_at(struct cquery *q, uint64_t start, bool create)
{
	struct cwin **pp = &q->wins, *w;

	for (; *pp && (*pp)->start < start; pp = &(*pp)->next)
		;
	if (*pp && (*pp)->start == start)
		return *pp;
	if (!create)
		return NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->t = ptable_new(q->p);
	w->got = calloc(q->capm ? q->capm : 1, 1);
	if (q->host_answers)
		w->ht = calloc(q->capm ? q->capm : 1, sizeof(*w->ht));
	if (!w->t || !w->got || (q->host_answers && !w->ht)) {
		ptable_free(w->t);
		free(w->ht);
		free(w->got);
		free(w);
		return NULL;
	}
	w->ngot = q->capm ? q->capm : 1;
	w->start = start;
	w->end = start + q->window_ns;
	if (q->deadline_rt && w->end > q->deadline_rt)
		w->end = q->deadline_rt;
	w->next = *pp;
	*pp = w;
	return w;
}

void cq_window_free(struct cwin *w)
{
	ptable_free(w->t);
	ptable_free(w->late_t);
	for (size_t i = 0; w->ht && i < w->ngot; i++)
		ptable_free(w->ht[i]);
	free(w->ht);
	free(w->got);
	free(w);
}

/* Hosts a PARTIAL says answered (a child collector counts its own). */
static unsigned answered_in(const struct wire_partial *wp)
{
	unsigned n = 0;

	for (unsigned i = 0; i < wp->nhosts; i++)
		n += wp->hosts[i].state == WIRE_HS_ANSWERED;
	return n ? n : 1;
}

int cquery_on_partial(struct cluster *cl, struct cpeer *p, const struct wire_partial *wp,
		      char *why, size_t len)
{
	struct cquery *q = find_query(cl, wp->qid);
	struct cmember *m = q ? member_of(q, p) : NULL;
	struct ptable *t = NULL;
	struct rbuf r;
	int err;

	if (!m)
		return 0;	/* a query that ended meanwhile */
	rbuf_init(&r, wp->body, wp->body_len);
	err = partial_shape_check(q->p, &r, why, len);
	if (err == -EPROTO) {
		/* another version or shape: refuse it by name, keep the link */
		m->state = CM_FAILED;
		snprintf(m->info, sizeof(m->info), "its partial results cannot be merged here: %s",
			 why);
		pr_warn("query %" PRIu32 ": %s: %s", q->qid, m->host, m->info);
		pthread_cond_broadcast(&q->cond);
		return 0;
	}
	if (err)
		return err;
	/* the hosts under a child collector (a stream's records name only
	 * the host they came from: its final names them all) */
	if (p->collector && wp->nhosts &&
	    (!(wp->flags & WIRE_PF_STREAM) || (wp->flags & WIRE_PF_FINAL))) {
		struct wire_phost *subs = malloc(wp->nhosts * sizeof(*subs));

		if (subs) {
			memcpy(subs, wp->hosts, wp->nhosts * sizeof(*subs));
			free(m->subs);
			m->subs = subs;
			m->nsubs = wp->nhosts;
		}
	}
	if (wp->flags & WIRE_PF_STREAM) {
		struct cchunk *c = calloc(1, sizeof(*c));

		if (!c || !(c->body = malloc(r.len - r.off + 1))) {
			free(c);
			return -ENOMEM;
		}
		c->len = r.len - r.off;
		memcpy(c->body, r.p + r.off, c->len);
		snprintf(c->host, sizeof(c->host), "%s", m->host);
		for (unsigned k = 0; k < ENGINE_NCOUNTERS && k < wp->ncounters; k++)
			q->stream_counters[k] += wp->counters[k];
		*q->chunks_tail = c;
		q->chunks_tail = &c->next;
		if (wp->flags & WIRE_PF_FINAL)
			m->final = true;
		pthread_cond_broadcast(&q->cond);
		return 0;
	}
	/* decode all of it before anything is merged */
	t = ptable_new(q->p);
	if (!t)
		return -ENOMEM;
	err = ptable_merge_rows(t, &r);
	if (!err && r.off != r.len)
		rbuf_fail(&r, "rows (bytes after the last row)");
	if (err || r.err) {
		snprintf(why, len, "PARTIAL of query %" PRIu32 ": %s", wp->qid,
			 r.err ? r.why : strerror(-err));
		ptable_free(t);
		return -EBADMSG;
	}
	if (wp->flags & WIRE_PF_WINDOW) {
		struct cwin *w = cq_window_at(q, wp->start_ns, true);
		size_t i = (size_t)(m - q->m);

		if (!w) {
			ptable_free(t);
			return -ENOMEM;
		}
		err = ptable_merge_table(w->t, t);
		for (unsigned k = 0; k < ENGINE_NCOUNTERS && k < wp->ncounters; k++)
			w->counters[k] += wp->counters[k];
		if (!w->got[i]) {
			w->answered += answered_in(wp);
			w->nreports++;
		}
		w->got[i] = 1;
		/* wake the query thread when the window may be complete (or
		 * must be amended); otherwise its tick finds it */
		if (w->nreports >= q->nm || w->emitted)
			pthread_cond_broadcast(&q->cond);
		if (w->emitted) {
			w->late++;
			w->amend = true;
			if (!w->late_t)
				w->late_t = ptable_new(q->p);
			if (w->late_t)
				ptable_merge_table(w->late_t, t);
		}
		if (w->ht && !w->emitted && i < w->ngot) {	/* the host's own rows */
			if (!w->ht[i]) {
				w->ht[i] = t;
				t = NULL;
			} else {
				ptable_merge_table(w->ht[i], t);
			}
		}
		ptable_free(t);
	} else {
		pthread_cond_broadcast(&q->cond);
		ptable_free(m->snap);
		m->snap = t;
		for (unsigned k = 0; k < ENGINE_NCOUNTERS; k++)
			m->snap_counters[k] = k < wp->ncounters ? wp->counters[k] : 0;
	}
	if (wp->flags & WIRE_PF_FINAL) {
		m->final = true;
		m->nfinal++;
		pthread_cond_broadcast(&q->cond);
	}
	return err;
}
