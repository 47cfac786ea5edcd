// SPDX-License-Identifier: MIT
/*
 * Query connections (cluster.h): each is served by the wire server's
 * thread that accepted it, reading frames until the connection closes,
 * goes silent for WIRE_DEAD_MS (a dead or stopped agent: closing it
 * makes its hosts missing at once rather than at every grace period) or
 * sends something malformed (an ERROR frame names it, then close; no
 * other connection or query is affected).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cluster/cluster_int.h"
#include "common/clock.h"
#include "common/log.h"

struct cluster *cluster_new(void)
{
	struct cluster *cl = calloc(1, sizeof(*cl));

	if (!cl)
		return NULL;
	pthread_mutex_init(&cl->lock, NULL);
	pthread_cond_init(&cl->peers_gone, NULL);
	cl->next_qid = 1;
	cl->next_cid = 1;
	return cl;
}

static void flat_free(struct cflat *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t h = 0; h < v[i].nhosts; h++)
			free(v[i].hosts[h]);
		free(v[i].hosts);
		free(v[i].name);
	}
	free(v);
}

int cluster_set_flat(struct cluster *cl, const struct cluster_flat *v, size_t n)
{
	struct cflat *nv = n ? calloc(n, sizeof(*nv)) : NULL;
	bool oom = n && !nv;

	for (size_t i = 0; !oom && i < n; i++) {
		nv[i].name = strdup(v[i].name);
		nv[i].hosts = v[i].nhosts ? calloc(v[i].nhosts, sizeof(char *)) : NULL;
		oom = !nv[i].name || (v[i].nhosts && !nv[i].hosts);
		for (size_t h = 0; !oom && h < v[i].nhosts; h++) {
			nv[i].hosts[h] = strdup(v[i].hosts[h]);
			oom = !nv[i].hosts[h];
			nv[i].nhosts = h + 1;
		}
	}
	if (oom) {
		flat_free(nv, n);
		return -ENOMEM;
	}
	pthread_mutex_lock(&cl->lock);
	flat_free(cl->flat, cl->nflat);
	cl->flat = nv;
	cl->nflat = n;
	pthread_mutex_unlock(&cl->lock);
	return 0;
}

const struct cflat *cluster_flat_find(const struct cluster *cl, const char *name)
{
	for (size_t i = 0; i < cl->nflat; i++)
		if (!strcmp(cl->flat[i].name, name))
			return &cl->flat[i];
	return NULL;
}

void cluster_free(struct cluster *cl)
{
	if (!cl)
		return;
	pthread_mutex_lock(&cl->lock);
	cl->stop = 1;
	for (struct cquery *q = cl->queries; q; q = q->next)
		pthread_cond_broadcast(&q->cond);
	for (struct cpeer *p = cl->peers; p; p = p->next)
		shutdown(p->fd, SHUT_RDWR);
	while (cl->npeers_threads || cl->queries || cl->captures)
		pthread_cond_wait(&cl->peers_gone, &cl->lock);
	pthread_mutex_unlock(&cl->lock);
	pthread_mutex_destroy(&cl->lock);
	pthread_cond_destroy(&cl->peers_gone);
	flat_free(cl->flat, cl->nflat);
	free(cl);
}

static int send_w(struct cpeer *p, unsigned type, struct wbuf *w)
{
	int err = w->err;

	pthread_mutex_lock(&p->send_lock);
	if (!err)
		err = p->dead ? -ENOTCONN : wire_send_frame(p->fd, type, 0, w->p, (uint32_t)w->len);
	pthread_mutex_unlock(&p->send_lock);
	wbuf_free(w);
	return err;
}

int cpeer_send_query(struct cpeer *p, const struct cquery *q)
{
	struct wire_query wq = {
		.qid = q->qid, .deadline_ns = q->deadline_rt, .window_ns = q->window_ns,
		.text = q->text, .len = q->len,
		/* cluster_query_run()'s callers have decided that the
		 * requester may load probes on every host: say so */
		.flags = WIRE_QF_PROBE,
	};
	struct wbuf w = { 0 };

	wire_query_encode(&wq, &w);
	return send_w(p, WIRE_QUERY, &w);
}

int cpeer_send_cancel(struct cpeer *p, uint32_t qid)
{
	struct wbuf w = { 0 };

	wire_u32_encode(qid, &w);
	return send_w(p, WIRE_CANCEL, &w);
}

/* A protocol violation: an ERROR frame naming it (best effort). */
static void violation(struct cpeer *p, const char *why)
{
	struct wire_error e;
	struct wire_buf b = { 0 };

	pr_warn("query connection of %s (%s): %s; closing it", p->host, p->addr, why);
	snprintf(e.error, sizeof(e.error), "%s", why);
	if (wire_put_error(&b, &e))
		return;
	pthread_mutex_lock(&p->send_lock);
	wire_buf_send(&b, p->fd);
	pthread_mutex_unlock(&p->send_lock);
	wire_buf_free(&b);
}

/* One frame; 0 to go on, -1 to close. */
static int on_frame(struct cluster *cl, struct cpeer *p, const struct wire_hdr *h,
		    const unsigned char *buf)
{
	char why[600];
	int err = 0;

	switch (h->type) {
	case WIRE_BEAT:
		break;
	case WIRE_QSTATUS: {
		struct wire_qstatus s;

		err = wire_qstatus_decode(buf, h->len, &s, why, sizeof(why));
		if (err)
			break;
		pthread_mutex_lock(&cl->lock);
		cquery_on_status(cl, p, &s);
		pthread_mutex_unlock(&cl->lock);
		break;
	}
	case WIRE_CAPTURED: {
		struct wire_captured wc;

		err = wire_captured_decode(buf, h->len, &wc, why, sizeof(why));
		if (err)
			break;
		pthread_mutex_lock(&cl->lock);
		ccap_on_captured(cl, p, &wc, FAY_WIRE_HDR_SIZE + (size_t)h->len);
		pthread_mutex_unlock(&cl->lock);
		break;
	}
	case WIRE_PARTIAL: {
		struct wire_partial wp;

		err = wire_partial_decode(buf, h->len, &wp, why, sizeof(why));
		if (err)
			break;
		pthread_mutex_lock(&cl->lock);
		err = cquery_on_partial(cl, p, &wp, why, sizeof(why));
		pthread_mutex_unlock(&cl->lock);
		free(wp.hosts);
		break;
	}
	default:
		snprintf(why, sizeof(why), "a %s frame on a query connection",
			 wire_type_name(h->type));
		err = -EPROTO;
		break;
	}
	if (err) {
		violation(p, why);
		return -1;
	}
	return 0;
}

void cluster_serve(struct cluster *cl, int fd, const char *peer_addr,
		   const struct cluster_peer_info *info)
{
	struct cpeer *p = calloc(1, sizeof(*p)), **pp;
	unsigned char *buf = NULL;
	size_t cap = 0;

	if (!p)
		return;
	p->fd = fd;
	p->collector = info->collector;
	p->btf = info->btf;
	p->capture = info->capture;
	snprintf(p->host, sizeof(p->host), "%s", info->host);
	snprintf(p->kernel, sizeof(p->kernel), "%s", info->kernel ? info->kernel : "");
	snprintf(p->addr, sizeof(p->addr), "%s", peer_addr);
	p->last_beat = clock_monotonic_ns();
	pthread_mutex_init(&p->send_lock, NULL);
	{
		struct timeval tv = { .tv_sec = 2 };	/* a stuck peer */

		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	pthread_mutex_lock(&cl->lock);
	if (cl->stop) {
		pthread_mutex_unlock(&cl->lock);
		pthread_mutex_destroy(&p->send_lock);
		free(p);
		return;
	}
	p->next = cl->peers;
	cl->peers = p;
	cl->npeers_threads++;
	cquery_peer_joined(cl, p);
	pthread_mutex_unlock(&cl->lock);
	pr_info("query connection from %s (%s%s%s%s)", p->host, p->addr,
		p->collector ? ", a collector" : "", p->kernel[0] ? ", kernel " : "", p->kernel);

	while (!cl->stop) {
		struct wire_hdr h;
		char why[256];
		/* a silent peer is noticed within WIRE_DEAD_MS + WIRE_BEAT_MS;
		 * waking less often keeps 1024 idle connections cheap */
		int err = wire_recv_frame(fd, &h, &buf, &cap, WIRE_BEAT_MS, why, sizeof(why));
		uint64_t now = clock_monotonic_ns();

		if (err == -ETIMEDOUT) {
			if (now - p->last_beat > WIRE_DEAD_MS * 1000000ull) {
				pr_warn("query connection of %s (%s): silent for %u ms; closing it",
					p->host, p->addr, WIRE_DEAD_MS);
				break;
			}
			continue;
		}
		if (err) {
			if (err != 1 && !cl->stop)
				pr_warn("query connection of %s (%s): %s", p->host, p->addr,
					why[0] ? why : strerror(-err));
			if (why[0])
				violation(p, why);
			break;
		}
		p->last_beat = now;
		if (on_frame(cl, p, &h, buf))
			break;
	}
	free(buf);

	pthread_mutex_lock(&p->send_lock);
	p->dead = true;
	pthread_mutex_unlock(&p->send_lock);
	pthread_mutex_lock(&cl->lock);
	cquery_peer_left(cl, p);
	ccap_peer_left(cl, p);
	for (pp = &cl->peers; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	cl->npeers_threads--;
	pthread_cond_broadcast(&cl->peers_gone);
	pthread_mutex_unlock(&cl->lock);
	pr_info("query connection of %s (%s) closed", p->host, p->addr);
	pthread_mutex_destroy(&p->send_lock);
	free(p);
}

char *cluster_peers_json(struct cluster *cl)
{
	json_t *a = json_array();
	char *s;

	pthread_mutex_lock(&cl->lock);
	for (struct cpeer *p = cl->peers; a && p; p = p->next) {
		json_t *qs = json_array();

		for (struct cquery *q = cl->queries; qs && q; q = q->next)
			for (size_t i = 0; i < q->nm; i++) {
				const struct cmember *m = &q->m[i];
				static const char *const st[] = {
					[CM_ASKED] = "asked", [CM_ATTACHED] = "attached",
					[CM_FAILED] = "failed", [CM_ENDED] = "ended",
					[CM_GONE] = "gone",
				};

				if (m->peer != p)
					continue;
				json_array_append_new(qs, json_pack("{s:I, s:s, s:s, s:s}",
					"qid", (json_int_t)q->qid, "query", q->text,
					"state", st[m->state], "probes", m->info));
			}
		json_array_append_new(a, json_pack("{s:s, s:s, s:b, s:s, s:o, s:o}", "host", p->host,
						   "peer", p->addr, "collector", p->collector,
						   "kernel", p->kernel,
						   "btf", p->btf < 0 ? json_null() : json_boolean(p->btf),
						   "queries", qs ? qs : json_array()));
	}
	pthread_mutex_unlock(&cl->lock);
	s = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return s;
}
