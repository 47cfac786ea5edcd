// SPDX-License-Identifier: MIT
/*
 * /api/captures: the flight recorder's captures (#22).
 *
 * POST /api/captures with a JSON body
 *     {"trace_id":"HEX"}                     every span of that trace, or
 *     {"last_ms":N, "host":H, "service":S}   every span overlapping the
 *                                            last N ms (host, service:
 *                                            optional filters)
 * asks every agent for what its flight buffer holds (cluster_capture_run(),
 * through the query connections), stores the spans it gets back, each
 * marked with three tags:
 *     fay.capture      the capture's id ("<ms since the epoch>-<n>")
 *     fay.capture.at   when it was made, RFC 3339 UTC, ms
 *     fay.capture.by   what it asked for ("trace HEX", "last 30000ms")
 * and answers with its account: hosts asked and answered, spans found
 * and stored, and each host's state.  Agents known to the collector
 * whose query connection is down are listed as "not connected", so an
 * agent that was killed is reported, never silently absent.
 *
 * GET /api/captures lists the captures made since the collector started
 * (the newest first, at most CAP_KEEP), with the same accounts.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/cluster.h"
#include "collector/capture_rules.h"
#include "collector/http_int.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/spanrec.h"
#include "store/span.h"

#define CAP_KEEP	256
#define CAP_LAST_MAX_MS	(24ull * 3600 * 1000)

void api_captures_free(struct collector *c)
{
	json_decref(c->captures);
	c->captures = NULL;
}

static const char *state_name(enum cluster_capture_state s)
{
	switch (s) {
	case CCH_ANSWERED: return "answered";
	case CCH_OFF: return "no flight buffer";
	case CCH_MISSING: return "missing";
	case CCH_UNSUPPORTED: return "does not capture";
	}
	return "?";
}

/* What the marks say. */
struct cap_mark {
	char id[48], at[64], by[300];
};

/* The record rec with the capture's three tags appended, decoded into r
 * (buf holds it).  0, or -errno. */
static int mark(const uint8_t *rec, uint32_t len, const struct cap_mark *mk, uint8_t **buf,
		struct spanrec *r)
{
	const char *k[3] = { "fay.capture", "fay.capture.at", "fay.capture.by" };
	const char *v[3] = { mk->id, mk->at, mk->by };
	size_t extra = 0, off = len;
	struct spanrec_fixed f;
	char err[128];
	int n;

	for (int i = 0; i < 3; i++)
		extra += spanrec_item_size(SPAN_ITEM_TAG, strlen(k[i]), strlen(v[i]));
	if (len < sizeof(f))
		return -EBADMSG;
	*buf = malloc(len + extra);
	if (!*buf)
		return -ENOMEM;
	memcpy(*buf, rec, len);
	memcpy(&f, rec, sizeof(f));
	for (int i = 0; i < 3; i++)
		if (!spanrec_put_item(*buf, len + extra, &off, SPAN_ITEM_TAG, 0, k[i], strlen(k[i]),
				      v[i], strlen(v[i])))
			f.nitems++;
	f.items_len += (uint32_t)(off - len);
	memcpy(*buf, &f, sizeof(f));
	n = spanrec_decode(*buf, off, r, err, sizeof(err));
	return n < 0 ? n : 0;
}

/* Store the spans one host answered, marked.  The number stored, or
 * -errno with the reason in err. */
static long store_host(struct collector *c, const struct cluster_capture_host *h,
		       const struct cap_mark *mk, char *err, size_t errlen)
{
	struct zarena a = { 0 };
	struct store_batch b = { 0 };
	struct zs_part *parts = NULL;
	size_t nparts = 0, pcap = 0;
	struct wire_batch_rd rd;
	struct zspan *spans;
	const uint8_t *rec;
	uint32_t rl;
	int ret;

	if (!h->len || wire_batch_open(&rd, h->spans, (uint32_t)h->len, 0, err, errlen))
		return 0;
	if (!rd.count)
		return 0;
	spans = zarena_alloc(&a, sizeof(*spans) * rd.count);
	if (!spans)
		return -ENOMEM;
	while ((ret = wire_batch_next(&rd, &rec, &rl, err, errlen)) > 0) {
		struct spanrec r;
		uint8_t *buf = NULL;

		ret = mark(rec, rl, mk, &buf, &r);
		if (!ret && (r.f.flags & SPAN_F_PARTIAL))
			ret = zparts_from_rec(&r, &a, &parts, &nparts, &pcap);
		else if (!ret)
			ret = zspan_from_rec(&r, &a, &spans[b.nspans]);
		free(buf);
		if (ret == -EBADMSG) {
			M_ADD(c, spans_rejected, 1);
			ret = 0;
			continue;
		}
		if (ret < 0)
			break;
		if (!(r.f.flags & SPAN_F_PARTIAL))
			b.nspans++;
	}
	if (ret < 0) {
		zarena_reset(&a);
		return ret;
	}
	b.spans = spans;
	b.parts = parts;
	b.nparts = nparts;
	ret = b.nspans || nparts ? ingest_write(c->ingest, &b, err, errlen) : 0;
	zarena_reset(&a);
	if (ret)
		return ret;
	M_ADD(c, spans_received, b.nspans + nparts);
	return (long)(b.nspans + nparts);
}

/* Parse the body into rq; NULL, or the reason. */
static const char *parse(json_t *o, struct cluster_capture_req *rq, char *by, size_t bylen)
{
	json_t *t = json_object_get(o, "trace_id"), *l = json_object_get(o, "last_ms");
	json_t *h = json_object_get(o, "host"), *s = json_object_get(o, "service");

	if (!json_is_object(o))
		return "the body must be a JSON object";
	if (!!t == !!l)
		return "give one of \"trace_id\" (hex) and \"last_ms\" (milliseconds)";
	if ((h && !json_is_string(h)) || (s && !json_is_string(s)))
		return "\"host\" and \"service\" are strings";
	rq->host = h && json_string_length(h) ? json_string_value(h) : NULL;
	rq->service = s && json_string_length(s) ? json_string_value(s) : NULL;
	if (rq->service && strlen(rq->service) > WIRE_SERVICE_MAX)
		return "\"service\": longer than 255 bytes";
	if (t) {
		const char *x = json_is_string(t) ? json_string_value(t) : "";

		if (spanrec_parse_trace(x, strlen(x), &rq->trace_hi, &rq->trace_lo) ||
		    (!rq->trace_hi && !rq->trace_lo))
			return "\"trace_id\": want 16 or 32 hex digits, not all zero";
		if (rq->service)
			return "\"service\" goes with \"last_ms\", not with \"trace_id\"";
		rq->kind = WIRE_CK_TRACE;
		snprintf(by, bylen, "trace %s", x);
	} else {
		uint64_t now = clock_realtime_ns(), ms;

		if (!json_is_integer(l) || json_integer_value(l) <= 0 ||
		    (uint64_t)json_integer_value(l) > CAP_LAST_MAX_MS)
			return "\"last_ms\": want an integer from 1 to 86400000 (a day)";
		ms = (uint64_t)json_integer_value(l);
		rq->kind = WIRE_CK_WINDOW;
		rq->from_ns = now - ms * 1000000u;
		rq->to_ns = now;
		snprintf(by, bylen, "last %" PRIu64 "ms%s%s", ms, rq->service ? " service " : "",
			 rq->service ? rq->service : "");
	}
	return NULL;
}

/* Hosts known from their span connections whose query connection did
 * not take part: "not connected" (host: only that one). */
static void add_unconnected(struct collector *c, json_t *hosts, const char *host)
{
	pthread_mutex_lock(&c->agents_lock);
	for (struct coll_agent *ag = c->agents; ag; ag = ag->next) {
		size_t i;
		json_t *v;
		int seen = 0;

		if (!ag->host[0] || (host && strcmp(host, ag->host)))
			continue;
		json_array_foreach(hosts, i, v)
			seen |= !strcmp(json_string_value(json_object_get(v, "host")), ag->host);
		if (!seen)
			json_array_append_new(hosts, json_pack("{s:s, s:s, s:i}", "host", ag->host,
							       "state", "not connected", "spans", 0));
	}
	pthread_mutex_unlock(&c->agents_lock);
}

json_t *capture_make(struct collector *c, const struct cluster_capture_req *cr, const char *by,
		     const struct capture_trigger *tr, int *status)
{
	struct cluster_capture_res res;
	struct cap_mark mk;
	json_t *hosts, *acc;
	uint64_t now = clock_realtime_ns(), found = 0, stored = 0, n;
	unsigned asked = 0, answered = 0;
	char err[512] = "";
	struct tm tm;
	time_t sec;
	int ret = 0;

	*status = 500;
	snprintf(mk.by, sizeof(mk.by), "%s", by);
	pthread_mutex_lock(&c->captures_lock);
	n = ++c->ncaptures;
	pthread_mutex_unlock(&c->captures_lock);
	snprintf(mk.id, sizeof(mk.id), "%" PRIu64 "-%" PRIu64, now / 1000000u, n);
	sec = (time_t)(now / 1000000000u);
	gmtime_r(&sec, &tm);
	snprintf(mk.at, sizeof(mk.at), "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned)(now / 1000000u % 1000u));
	if (cluster_capture_run(c->cluster, cr, &res)) {
		cluster_capture_res_free(&res);
		return NULL;
	}
	hosts = json_array();
	for (size_t i = 0; i < res.n; i++) {
		const struct cluster_capture_host *h = &res.h[i];
		long st = 0;

		asked += h->state != CCH_UNSUPPORTED;
		answered += h->state == CCH_ANSWERED || h->state == CCH_OFF;
		if (h->state == CCH_ANSWERED) {
			found += h->nspans;
			st = store_host(c, h, &mk, err, sizeof(err));
			if (st < 0) {
				pr_warn("capture %s: the spans of %s were not stored: %s", mk.id,
					h->host, err[0] ? err : strerror((int)-st));
				ret = (int)st;
				st = 0;
			}
			stored += (uint64_t)st;
		}
		json_array_append_new(hosts, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:b}",
			"host", h->host, "state", state_name(h->state),
			"spans", (json_int_t)h->nspans, "held", (json_int_t)h->held,
			"dropped", (json_int_t)h->dropped,
			"oldest_ms", (json_int_t)(h->oldest_ns / 1000000u), "cut", h->cut));
	}
	cluster_capture_res_free(&res);
	add_unconnected(c, hosts, cr->host);
	acc = json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:I, s:I, s:o}",
		"id", mk.id, "at", mk.at, "by", mk.by, "at_ms", (json_int_t)(now / 1000000u),
		"hosts_asked", (int)asked, "hosts_answered", (int)answered,
		"spans_found", (json_int_t)found, "spans_stored", (json_int_t)stored,
		"hosts", hosts);
	if (!acc)
		return NULL;
	if (ret)
		json_object_set_new(acc, "error", json_string(err[0] ? err : strerror(-ret)));
	if (tr) {	/* a rule's capture: what matched, and how long it took */
		uint64_t done = clock_realtime_ns();

		json_object_set_new(acc, "rule", json_string(tr->rule));
		json_object_set_new(acc, "match", json_pack("{s:s, s:s, s:I, s:I}",
			"host", tr->host, "span", tr->span,
			"span_end_ms", (json_int_t)(tr->span_end_ns / 1000000u),
			"matched_ms", (json_int_t)(tr->matched_ns / 1000000u)));
		json_object_set_new(acc, "stored_ms", json_integer((json_int_t)(done / 1000000u)));
		/* from the matching span's end to its trace stored */
		json_object_set_new(acc, "latency_ms", json_integer(
			done > tr->span_end_ns ? (json_int_t)((done - tr->span_end_ns) / 1000000u) : 0));
	}
	pr_info("capture %s (%s): %u hosts asked, %u answered, %" PRIu64 " spans found, %"
		PRIu64 " stored", mk.id, mk.by, asked, answered, found, stored);
	pthread_mutex_lock(&c->captures_lock);
	if (!c->captures)
		c->captures = json_array();
	if (c->captures) {
		json_array_insert(c->captures, 0, acc);
		if (json_array_size(c->captures) > CAP_KEEP)
			json_array_remove(c->captures, CAP_KEEP);
	}
	pthread_mutex_unlock(&c->captures_lock);
	/* stored but not all: 503, the account says which */
	*status = ret ? 503 : 200;
	return acc;
}

static int post(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	struct cluster_capture_req cr = { 0 };
	json_error_t je;
	json_t *body, *acc;
	const char *why;
	char by[300];
	int status;

	if (rq->body.too_big)
		return reply_text(c, con, 413, "body over --max-body\n");
	body = json_loadb(rq->body.p ? rq->body.p : "", rq->body.len, 0, &je);
	if (!body)
		return reply_text(c, con, 400, "body: %s\n", je.text);
	why = parse(body, &cr, by, sizeof(by));
	if (why) {
		int ret = reply_text(c, con, 400, "%s\n", why);

		json_decref(body);
		return ret;
	}
	acc = capture_make(c, &cr, by, NULL, &status);
	json_decref(body);
	if (!acc)
		return reply_text(c, con, 500, "out of memory\n");
	return reply_json_status(c, con, status, acc);
}

int api_captures(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	json_t *a;

	if (!strcmp(rq->method, "POST"))
		return post(c, con, rq);
	pthread_mutex_lock(&c->captures_lock);
	a = c->captures ? json_deep_copy(c->captures) : json_array();
	pthread_mutex_unlock(&c->captures_lock);
	if (!a)
		return reply_text(c, con, 500, "out of memory\n");
	return reply_json(c, con, json_pack("{s:o, s:o}", "captures", a, "rules",
					    c->rules ? crules_list(c->rules) : json_array()));
}

/* POST /api/captures/rules {"name":N, "expr":E, "per_s":R, "settle_ms":S}. */
static int rule_add(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	json_error_t je;
	json_t *b, *n, *e, *r, *s;
	char err[4096] = "";
	int line = 0, col = 0, ret;

	if (rq->body.too_big)
		return reply_text(c, con, 413, "body over --max-body\n");
	b = json_loadb(rq->body.p ? rq->body.p : "", rq->body.len, 0, &je);
	if (!b)
		return reply_text(c, con, 400, "body: %s\n", je.text);
	n = json_object_get(b, "name");
	e = json_object_get(b, "expr");
	r = json_object_get(b, "per_s");
	s = json_object_get(b, "settle_ms");
	if (!json_is_string(n) || !json_is_string(e) || (r && !json_is_integer(r)) ||
	    (s && !json_is_integer(s))) {
		json_decref(b);
		return reply_text(c, con, 400, "want {\"name\": NAME, \"expr\": FAYQL predicate, "
				  "\"per_s\": N, \"settle_ms\": N} (per_s, settle_ms optional)\n");
	}
	if ((r && (json_integer_value(r) < 1 || json_integer_value(r) > CRULES_PER_S_MAX)) ||
	    (s && (json_integer_value(s) < 0 || json_integer_value(s) > CRULES_SETTLE_MS_MAX))) {
		json_decref(b);
		return reply_text(c, con, 400, "per_s: 1 to %d; settle_ms: 0 to %d\n",
				  CRULES_PER_S_MAX, CRULES_SETTLE_MS_MAX);
	}
	ret = crules_add(c->rules, json_string_value(n), json_string_value(e),
			 r ? (unsigned)json_integer_value(r) : CRULES_PER_S_DEFAULT,
			 s ? (unsigned)json_integer_value(s) : CRULES_SETTLE_MS_DEFAULT,
			 err, sizeof(err), &line, &col);
	json_decref(b);
	if (ret == -EINVAL || ret == -EEXIST || ret == -ENOSPC)
		return reply_json_status(c, con, ret == -EINVAL ? 400 : 409,
			json_pack("{s:s, s:i, s:i}", "error", err, "line", line, "col", col));
	if (ret)
		return reply_text(c, con, 500, "%s\n", err);
	return reply_json_status(c, con, 201, json_pack("{s:o}", "rules", crules_list(c->rules)));
}

int api_capture_rules(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	/* what follows "/api/captures/rules" */
	const char *rest = rq->url + strlen("/api/captures/rules");

	if (!c->rules)
		return reply_text(c, con, 503, "capture rules are not available\n");
	if (!strcmp(rq->method, "POST") && !*rest)
		return rule_add(c, con, rq);
	if (!strcmp(rq->method, "DELETE") && *rest == '/') {
		if (crules_drop(c->rules, rest + 1))
			return reply_text(c, con, 404, "no capture rule named %s\n", rest + 1);
		return reply_json(c, con, json_pack("{s:s}", "dropped", rest + 1));
	}
	if (*rest)
		return reply_text(c, con, 404, "no such capture rules resource\n");
	return reply_json(c, con, json_pack("{s:o}", "rules", crules_list(c->rules)));
}
