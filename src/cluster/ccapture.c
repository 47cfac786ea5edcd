// SPDX-License-Identifier: MIT
/*
 * Captures (cluster.h, the flight recorder of #22): a CAPTURE to every
 * query peer that answers them, each CAPTURED's spans kept for the
 * caller, and an account of who answered.  The caller (the collector's
 * POST /api/captures) stores the spans; this file only gathers them.
 *
 * A capture waits on its own condition, under cl->lock like everything
 * of the cluster: its members point at their peers until the peer's
 * connection goes (ccap_peer_left(): the member is missing at once, so a
 * killed agent is reported, never waited for to the timeout).
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

#define CCAP_TIMEOUT_NS	5000000000ull	/* rq->timeout_ns 0 */
#define CCAP_TICK_NS	50000000ull

struct ccmember {
	struct cpeer *peer;	/* NULL once answered or gone */
	bool asked;
};

struct ccap {
	struct ccap *next;
	uint32_t cid;
	pthread_cond_t cond;
	struct cluster_capture_res *res;
	struct ccmember *m;	/* one per res->h */
	size_t waiting;		/* members asked and not answered or gone */
};

static struct ccap *find(struct cluster *cl, uint32_t cid)
{
	for (struct ccap *c = cl->captures; c; c = c->next)
		if (c->cid == cid)
			return c;
	return NULL;
}

void ccap_on_captured(struct cluster *cl, struct cpeer *p, const struct wire_captured *wc,
		      size_t frame_len)
{
	struct ccap *c = find(cl, wc->cid);

	if (!c)
		return;		/* it timed out meanwhile: counted missing */
	for (size_t i = 0; i < c->res->n; i++) {
		struct cluster_capture_host *h = &c->res->h[i];

		if (c->m[i].peer != p)
			continue;
		c->m[i].peer = NULL;
		c->waiting--;
		h->state = wc->state == WIRE_CS_OFF ? CCH_OFF :
			   wc->state == WIRE_CS_NOHOST ? CCH_NOHOST :
			   wc->state == WIRE_CS_MISSING ? CCH_MISSING : CCH_ANSWERED;
		h->cut = wc->flags & WIRE_CF_CUT;
		h->partial = wc->flags & WIRE_CF_PARTIAL;
		h->lost = wc->lost;
		h->nspans = wc->nspans;
		h->held = wc->held;
		h->dropped = wc->dropped;
		h->oldest_ns = wc->oldest_ns;
		h->wire_bytes += frame_len;
		if (h->state == CCH_MISSING) {	/* a child: no host under it answered */
			pthread_cond_broadcast(&c->cond);
			return;
		}
		h->spans = malloc(wc->body_len ? wc->body_len : 1);
		if (h->spans) {
			memcpy(h->spans, wc->body, wc->body_len);
			h->len = wc->body_len;
		} else {
			pr_warn("capture %" PRIu32 ": out of memory for the %" PRIu32
				" spans of %s", wc->cid, wc->nspans, h->host);
			h->state = CCH_MISSING;
		}
		pthread_cond_broadcast(&c->cond);
		return;
	}
}

void ccap_peer_left(struct cluster *cl, struct cpeer *p)
{
	for (struct ccap *c = cl->captures; c; c = c->next)
		for (size_t i = 0; i < c->res->n; i++)
			if (c->m[i].peer == p) {
				c->m[i].peer = NULL;
				if (c->m[i].asked)
					c->waiting--;
				c->res->h[i].state = CCH_MISSING;
				pthread_cond_broadcast(&c->cond);
			}
}

/* Is p asked by rq: every peer, or only rq->host, or a child collector
 * that may have it under it? */
static bool capture_member(const struct cpeer *p, const struct cluster_capture_req *rq)
{
	return !p->dead && (!rq->host || !strcmp(rq->host, p->host) || (p->collector && p->capture));
}

/* Send rq to p; its frame's bytes (header included) into *bytes. */
static int send_capture(struct cpeer *p, const struct cluster_capture_req *rq, uint32_t cid,
			uint64_t *bytes)
{
	/* the host travels to a child collector not of that name itself */
	bool below = rq->host && p->collector && strcmp(rq->host, p->host);
	struct wire_capture wc = {
		.cid = cid, .kind = rq->kind, .trace_hi = rq->trace_hi, .trace_lo = rq->trace_lo,
		.from_ns = rq->from_ns, .to_ns = rq->to_ns, .service = rq->service,
		.service_len = rq->service ? strlen(rq->service) : 0,
		.host = below ? rq->host : NULL, .host_len = below ? strlen(rq->host) : 0,
	};
	struct wbuf w = { 0 };
	int err;

	wire_capture_encode(&wc, &w);
	err = w.err;
	pthread_mutex_lock(&p->send_lock);
	if (!err)
		err = p->dead ? -ENOTCONN : wire_send_frame(p->fd, WIRE_CAPTURE, 0, w.p,
							    (uint32_t)w.len);
	pthread_mutex_unlock(&p->send_lock);
	if (!err)
		*bytes += FAY_WIRE_HDR_SIZE + w.len;
	wbuf_free(&w);
	return err;
}

static void unlink_cap(struct cluster *cl, struct ccap *c)
{
	for (struct ccap **pp = &cl->captures; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	pthread_cond_broadcast(&cl->peers_gone);	/* cluster_free() waits */
}

int cluster_capture_run(struct cluster *cl, const struct cluster_capture_req *rq,
			struct cluster_capture_res *res)
{
	uint64_t deadline = clock_monotonic_ns() + (rq->timeout_ns ? rq->timeout_ns : CCAP_TIMEOUT_NS);
	struct ccap c = { 0 };
	size_t n = 0;

	memset(res, 0, sizeof(*res));
	pthread_mutex_lock(&cl->lock);
	for (struct cpeer *p = cl->peers; p; p = p->next)
		n += capture_member(p, rq);
	res->h = calloc(n ? n : 1, sizeof(*res->h));
	c.m = calloc(n ? n : 1, sizeof(*c.m));
	if (!res->h || !c.m) {
		pthread_mutex_unlock(&cl->lock);
		free(c.m);
		return -ENOMEM;
	}
	pthread_cond_init(&c.cond, NULL);
	c.cid = cl->next_cid++;
	c.res = res;
	for (struct cpeer *p = cl->peers; p; p = p->next) {
		struct cluster_capture_host *h = &res->h[res->n];

		if (!capture_member(p, rq))
			continue;
		if (rq->host && strcmp(rq->host, p->host)) {	/* a child collector */
			snprintf(h->host, sizeof(h->host), "%s", rq->host);
			snprintf(h->via, sizeof(h->via), "%s", p->host);
		} else {
			snprintf(h->host, sizeof(h->host), "%s", p->host);
		}
		if (p->capture) {
			h->state = CCH_MISSING;		/* until it answers */
			c.m[res->n].peer = p;
			c.m[res->n].asked = true;
			c.waiting++;
		} else {
			h->state = CCH_UNSUPPORTED;
		}
		res->n++;
	}
	c.next = cl->captures;
	cl->captures = &c;
	/* Send under cl->lock: a peer's send lock may be taken with it held
	 * (cluster.h); the peer cannot be freed meanwhile. */
	for (size_t i = 0; i < res->n; i++) {
		struct cpeer *p = c.m[i].peer;

		if (p && send_capture(p, rq, c.cid, &res->h[i].wire_bytes)) {
			c.m[i].peer = NULL;
			c.waiting--;
		}
	}
	while (c.waiting && !cl->stop) {
		uint64_t now = clock_monotonic_ns(), t;
		struct timespec ts;

		if (now >= deadline)
			break;
		t = clock_realtime_ns() + (deadline - now < CCAP_TICK_NS ? deadline - now : CCAP_TICK_NS);
		ts.tv_sec = (time_t)(t / 1000000000u);
		ts.tv_nsec = (long)(t % 1000000000u);
		pthread_cond_timedwait(&c.cond, &cl->lock, &ts);
	}
	unlink_cap(cl, &c);
	pthread_mutex_unlock(&cl->lock);
	pthread_cond_destroy(&c.cond);
	free(c.m);
	return 0;
}

void cluster_capture_res_free(struct cluster_capture_res *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->n; i++)
		free(res->h[i].spans);
	free(res->h);
	memset(res, 0, sizeof(*res));
}
