// SPDX-License-Identifier: MIT
/* Cluster query frames: payload codecs and blocking frame I/O (wire_cluster.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire_cluster.h"

static void put_text(struct wbuf *w, const char *s, size_t len)
{
	wbuf_uvar(w, len);
	wbuf_put(w, s, len);
}

void wire_query_encode(const struct wire_query *q, struct wbuf *w)
{
	wbuf_le32(w, q->qid);
	wbuf_le64(w, q->deadline_ns);
	wbuf_le64(w, q->window_ns);
	put_text(w, q->text, q->len);
	wbuf_u8(w, (uint8_t)q->flags);
}

void wire_qstatus_encode(const struct wire_qstatus *s, struct wbuf *w)
{
	wbuf_le32(w, s->qid);
	wbuf_u8(w, (uint8_t)s->state);
	put_text(w, s->text ? s->text : "", s->text ? s->len : 0);
}

void wire_partial_encode_head(const struct wire_partial *p, struct wbuf *w)
{
	wbuf_le32(w, p->qid);
	wbuf_u8(w, (uint8_t)p->flags);
	wbuf_le64(w, p->start_ns);
	wbuf_le64(w, p->end_ns);
	wbuf_uvar(w, p->ncounters);
	for (unsigned i = 0; i < p->ncounters; i++)
		wbuf_uvar(w, p->counters[i]);
	wbuf_uvar(w, p->nhosts);
	for (unsigned i = 0; i < p->nhosts; i++) {
		put_text(w, p->hosts[i].name, strnlen(p->hosts[i].name, WIRE_HOST_MAX));
		wbuf_u8(w, (uint8_t)p->hosts[i].state);
	}
}

void wire_u32_encode(uint32_t qid, struct wbuf *w)
{
	wbuf_le32(w, qid);
}

/* The reason of a failed read, or of trailing bytes, into why. */
static int finish(struct rbuf *r, bool rest_ok, const char *frame, char *why, size_t len)
{
	if (!r->err && !rest_ok && r->off != r->len) {
		snprintf(why, len, "%s: %zu bytes after the end at byte %zu", frame,
			 r->len - r->off, r->off);
		return -EBADMSG;
	}
	if (r->err) {
		snprintf(why, len, "%s: %s", frame, r->why);
		return -EBADMSG;
	}
	return 0;
}

static const char *get_text(struct rbuf *r, size_t max, size_t *len, const char *what)
{
	*len = (size_t)rbuf_uvar_max(r, max, what);
	return rbuf_get(r, *len, what);
}

int wire_query_decode(const void *p, size_t len, struct wire_query *q,
		      char *why, size_t whylen)
{
	struct rbuf r;

	rbuf_init(&r, p, len);
	q->qid = rbuf_le32(&r, "qid");
	q->deadline_ns = rbuf_le64(&r, "deadline");
	q->window_ns = rbuf_le64(&r, "window");
	q->text = get_text(&r, WIRE_QTEXT_MAX, &q->len, "query text");
	/* a collector before #20 sent no flags: none */
	q->flags = !r.err && r.off < r.len ? rbuf_u8(&r, "flags") : 0;
	return finish(&r, false, "QUERY", why, whylen);
}

int wire_qstatus_decode(const void *p, size_t len, struct wire_qstatus *s,
			char *why, size_t whylen)
{
	struct rbuf r;
	unsigned st;

	rbuf_init(&r, p, len);
	s->qid = rbuf_le32(&r, "qid");
	st = rbuf_u8(&r, "state");
	if (!r.err && (st < WIRE_QS_ATTACHED || st > WIRE_QS_ENDED)) {
		r.off--;
		rbuf_fail(&r, "state");
	}
	s->state = (enum wire_qstate)st;
	s->text = get_text(&r, 65536, &s->len, "status text");
	return finish(&r, false, "QSTATUS", why, whylen);
}

int wire_partial_decode(const void *p, size_t len, struct wire_partial *out,
			char *why, size_t whylen)
{
	struct rbuf r;
	uint64_t n;
	int err;

	memset(out, 0, sizeof(*out));
	rbuf_init(&r, p, len);
	out->qid = rbuf_le32(&r, "qid");
	out->flags = rbuf_u8(&r, "flags");
	out->start_ns = rbuf_le64(&r, "window start");
	out->end_ns = rbuf_le64(&r, "window end");
	if (!r.err && out->end_ns < out->start_ns)
		rbuf_fail(&r, "window end (before its start)");
	out->ncounters = (unsigned)rbuf_uvar_max(&r, WIRE_NCOUNTERS_MAX, "counter count");
	for (unsigned i = 0; i < out->ncounters && !r.err; i++)
		out->counters[i] = rbuf_uvar(&r, "counter");
	/* a host takes at least two bytes */
	n = rbuf_uvar_max(&r, WIRE_NHOSTS_MAX, "host count");
	if (!r.err && n > (r.len - r.off) / 2)
		rbuf_fail(&r, "host count");
	if (!r.err && n) {
		out->hosts = calloc((size_t)n, sizeof(*out->hosts));
		if (!out->hosts) {
			snprintf(why, whylen, "PARTIAL: out of memory");
			return -ENOMEM;
		}
	}
	out->nhosts = r.err ? 0 : (unsigned)n;
	for (unsigned i = 0; i < out->nhosts && !r.err; i++) {
		size_t l;
		const char *s = get_text(&r, WIRE_HOST_MAX, &l, "host name");
		unsigned st = rbuf_u8(&r, "host state");

		if (s)
			memcpy(out->hosts[i].name, s, l);
		if (!r.err && (st < WIRE_HS_ANSWERED || st > WIRE_HS_LATE)) {
			r.off--;
			rbuf_fail(&r, "host state");
		}
		out->hosts[i].state = (enum wire_hstate)st;
	}
	err = finish(&r, true, "PARTIAL", why, whylen);
	if (err) {
		free(out->hosts);
		out->hosts = NULL;
		out->nhosts = 0;
		return err;
	}
	out->body = r.p + r.off;
	out->body_len = r.len - r.off;
	return 0;
}

int wire_u32_decode(const void *p, size_t len, uint32_t *qid, char *why, size_t whylen)
{
	struct rbuf r;

	rbuf_init(&r, p, len);
	*qid = rbuf_le32(&r, "qid");
	return finish(&r, false, "CANCEL", why, whylen);
}

/* ---- the flight recorder: CAPTURE, CAPTURED ------------------------------- */

uint64_t wire_query_key(const char *text, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)text[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

void wire_capture_encode(const struct wire_capture *c, struct wbuf *w)
{
	wbuf_le32(w, c->cid);
	wbuf_u8(w, (uint8_t)c->kind);
	wbuf_le64(w, c->trace_hi);
	wbuf_le64(w, c->trace_lo);
	wbuf_le64(w, c->from_ns);
	wbuf_le64(w, c->to_ns);
	put_text(w, c->service ? c->service : "", c->service ? c->service_len : 0);
	/* only to a child collector (the caller's choice): an agent of a
	 * fay before it refuses bytes after the service */
	if (c->host && c->host_len)
		put_text(w, c->host, c->host_len);
}

void wire_captured_encode_head(const struct wire_captured *c, struct wbuf *w)
{
	wbuf_le32(w, c->cid);
	wbuf_u8(w, (uint8_t)c->state);
	wbuf_u8(w, (uint8_t)((c->flags & ~(unsigned)WIRE_CF_LOST) | (c->lost ? WIRE_CF_LOST : 0)));
	wbuf_uvar(w, c->held);
	wbuf_uvar(w, c->dropped);
	wbuf_le64(w, c->oldest_ns);
	if (c->lost)
		wbuf_uvar(w, c->lost);
}

int wire_capture_decode(const void *p, size_t len, struct wire_capture *c,
			char *why, size_t whylen)
{
	struct rbuf r;
	unsigned k;

	memset(c, 0, sizeof(*c));
	rbuf_init(&r, p, len);
	c->cid = rbuf_le32(&r, "cid");
	k = rbuf_u8(&r, "kind");
	if (!r.err && k != WIRE_CK_TRACE && k != WIRE_CK_WINDOW && k != WIRE_CK_QUERY) {
		r.off--;
		rbuf_fail(&r, "kind");
	}
	c->kind = (enum wire_ckind)k;
	c->trace_hi = rbuf_le64(&r, "trace_hi");
	c->trace_lo = rbuf_le64(&r, "trace_lo");
	c->from_ns = rbuf_le64(&r, "from");
	c->to_ns = rbuf_le64(&r, "to");
	if (!r.err && c->to_ns < c->from_ns)
		rbuf_fail(&r, "to (before from)");
	c->service = get_text(&r, WIRE_SERVICE_MAX, &c->service_len, "service");
	/* a parent before --host through trees sent no host: none */
	if (!r.err && r.off < r.len)
		c->host = get_text(&r, WIRE_HOST_MAX, &c->host_len, "host");
	return finish(&r, false, "CAPTURE", why, whylen);
}

int wire_captured_decode(const void *p, size_t len, struct wire_captured *c,
			 char *why, size_t whylen)
{
	struct wire_batch_rd rd;
	struct rbuf r;
	unsigned st;
	char e[256];
	int err;

	memset(c, 0, sizeof(*c));
	rbuf_init(&r, p, len);
	c->cid = rbuf_le32(&r, "cid");
	st = rbuf_u8(&r, "state");
	if (!r.err && st != WIRE_CS_ANSWERED && st != WIRE_CS_OFF && st != WIRE_CS_NOHOST &&
	    st != WIRE_CS_MISSING) {
		r.off--;
		rbuf_fail(&r, "state");
	}
	c->state = (enum wire_cstate)st;
	c->flags = rbuf_u8(&r, "flags");
	c->held = rbuf_uvar(&r, "held");
	c->dropped = rbuf_uvar(&r, "dropped");
	c->oldest_ns = rbuf_le64(&r, "oldest");
	if (c->flags & WIRE_CF_LOST)
		c->lost = rbuf_uvar(&r, "lost");
	err = finish(&r, true, "CAPTURED", why, whylen);
	if (err)
		return err;
	c->body = r.p + r.off;
	c->body_len = r.len - r.off;
	if (wire_batch_open(&rd, c->body, (uint32_t)c->body_len, 0, e, sizeof(e))) {
		snprintf(why, whylen, "CAPTURED: spans at byte %zu: %s", r.off, e);
		return -EBADMSG;
	}
	c->nspans = rd.count;
	return 0;
}
