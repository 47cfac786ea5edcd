// SPDX-License-Identifier: MIT
/*
 * /api/captures: the flight recorder's captures (#22).
 *
 * POST /api/captures with a JSON body
 *     {"trace_id":"HEX"}                     every span of that trace, or
 *     {"last_ms":N, "host":H, "service":S}   every span overlapping the
 *                                            last N ms (host, service:
 *                                            optional filters; a host
 *                                            under a child collector is
 *                                            asked through it: its entry
 *                                            in the account says "via")
 * asks every agent for what its flight buffer holds (cluster_capture_run(),
 * through the query connections), stores the spans it gets back, each
 * marked with three tags:
 *     fay.capture      the capture's id ("<ms since the epoch>-<n>")
 *     fay.capture.at   when it was made, RFC 3339 UTC, ms
 *     fay.capture.by   what it asked for ("trace HEX", "last 30000ms")
 * and answers with its account: hosts asked and answered, spans found
 * and stored, spans of the trace its hosts had already overwritten
 * ("spans_overwritten", each host's "overwritten"), and each host's
 * state ("missing" also for a host under a child collector that did not
 * answer; "partial": a child some of whose hosts did not).  Agents known to the collector
 * whose query connection is down are listed as "not connected", so an
 * agent that was killed is reported, never silently absent.
 *
 * A rule's capture (capture_rules.c) then follows its trace:
 * capture_follow() asks again and stores only the records it has not
 * stored (struct capture_seen: each record's span id, flags and size),
 * tagged fay.capture.late_ms as well, and its account says what came
 * late (spans_late, last_late_ms, follow_rounds, each host's late, a
 * host that answered only in a later round).
 *
 * {"query":NAME, "last_ms":N, "host":H} captures the events a standing
 * query in keep mode keeps on its hosts instead (api_capture_query.c).
 *
 * GET /api/captures lists the captures (the newest first, at most
 * CAPTURES_KEEP), with the same accounts, kept across restarts in
 * DIR/captures.jsonl (capture_log.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "cluster/standing.h"
#include "collector/capture_rules.h"
#include "collector/http_int.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/spanrec.h"
#include "store/span.h"

#define CAP_LAST_MAX_MS	(24ull * 3600 * 1000)

void api_captures_free(struct collector *c)
{
	json_decref(c->captures);
	c->captures = NULL;
}

const char *capture_state_name(int s)
{
	switch (s) {
	case CCH_ANSWERED: return "answered";
	case CCH_OFF: return "no flight buffer";
	case CCH_MISSING: return "missing";
	case CCH_UNSUPPORTED: return "does not capture";
	case CCH_NOHOST: return "no such host";
	}
	return "?";
}

/* What the marks say (late: "" in a capture's first round). */
struct cap_mark {
	char id[48], at[64], by[300], late[24];
};

/* ---- the spans a capture stored ---------------------------------------- */

/* A record's key: its span, its flags (the server half of a shared span
 * has its client's id) and how much of it there is (a partial record, and
 * the final one of the same span, differ). */
static uint64_t seen_key(const struct spanrec_fixed *f)
{
	uint64_t k = f->span_id * 0x9e3779b97f4a7c15ull;

	k ^= (f->duration_ns + ((uint64_t)f->flags << 56)) * 0xc2b2ae3d27d4eb4full;
	k ^= ((uint64_t)f->items_len << 32 | f->nitems) * 0x165667b19e3779f9ull;
	return k ^ (k >> 29);
}

static int key_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool seen_has(const struct capture_seen *s, uint64_t k)
{
	return s->nsorted && bsearch(&k, s->key, s->nsorted, sizeof(k), key_cmp);
}

static int seen_add(struct capture_seen *s, uint64_t k)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		uint64_t *nk = realloc(s->key, cap * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		s->key = nk;
		s->cap = cap;
	}
	s->key[s->n++] = k;
	return 0;
}

/* The keys added since the last sort, searchable. */
static void seen_sort(struct capture_seen *s)
{
	if (s->n)
		qsort(s->key, s->n, sizeof(*s->key), key_cmp);
	s->nsorted = s->n;
}

void capture_seen_free(struct capture_seen *s)
{
	free(s->key);
	memset(s, 0, sizeof(*s));
}

/* The record rec with the capture's tags appended (three, a fourth when
 * late), decoded into r (buf holds it).  0, or -errno. */
static int mark(const uint8_t *rec, uint32_t len, const struct cap_mark *mk, uint8_t **buf,
		struct spanrec *r)
{
	const char *k[4] = { "fay.capture", "fay.capture.at", "fay.capture.by",
			     "fay.capture.late_ms" };
	const char *v[4] = { mk->id, mk->at, mk->by, mk->late };
	int nk = mk->late[0] ? 4 : 3;
	size_t extra = 0, off = len;
	struct spanrec_fixed f;
	char err[128];
	int n;

	for (int i = 0; i < nk; i++)
		extra += spanrec_item_size(SPAN_ITEM_TAG, strlen(k[i]), strlen(v[i]));
	if (len < sizeof(f))
		return -EBADMSG;
	*buf = malloc(len + extra);
	if (!*buf)
		return -ENOMEM;
	memcpy(*buf, rec, len);
	memcpy(&f, rec, sizeof(f));
	for (int i = 0; i < nk; i++)
		if (!spanrec_put_item(*buf, len + extra, &off, SPAN_ITEM_TAG, 0, k[i], strlen(k[i]),
				      v[i], strlen(v[i])))
			f.nitems++;
	f.items_len += (uint32_t)(off - len);
	memcpy(*buf, &f, sizeof(f));
	n = spanrec_decode(*buf, off, r, err, sizeof(err));
	return n < 0 ? n : 0;
}

/* Store the spans one host answered, marked; with seen, only those not
 * in it, each stored added to it.  The number stored, or -errno with the
 * reason in err. */
static long store_host(struct collector *c, const struct cluster_capture_host *h,
		       const struct cap_mark *mk, struct capture_seen *seen, char *err,
		       size_t errlen)
{
	struct zarena a = { 0 };
	struct store_batch b = { 0 };
	struct zs_part *parts = NULL;
	size_t nparts = 0, pcap = 0;
	struct wire_batch_rd rd;
	struct zspan *spans;
	const uint8_t *rec;
	uint32_t rl;
	size_t n0 = seen ? seen->n : 0;
	int ret;

	if (!h->len || wire_batch_open(&rd, h->spans, (uint32_t)h->len, 0, err, errlen))
		return 0;
	if (!rd.count)
		return 0;
	spans = zarena_alloc(&a, sizeof(*spans) * rd.count);
	if (!spans)
		return -ENOMEM;
	while ((ret = wire_batch_next(&rd, &rec, &rl, err, errlen)) > 0) {
		struct spanrec_fixed f;
		struct spanrec r;
		uint8_t *buf = NULL;

		if (seen && rl >= sizeof(f)) {
			memcpy(&f, rec, sizeof(f));
			if (seen_has(seen, seen_key(&f)))
				continue;
			if (seen_add(seen, seen_key(&f))) {
				ret = -ENOMEM;
				break;
			}
		}
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
	if (ret >= 0) {
		b.spans = spans;
		b.parts = parts;
		b.nparts = nparts;
		(void)store__prepare(c->store, &b, &a); /* else the writer does it */
		ret = b.nspans || nparts ? ingest_write(c->ingest, &b, err, errlen) : 0;
	}
	zarena_reset(&a);
	if (ret < 0 && seen)
		seen->n = n0;	/* not stored: a later round may */
	if (ret < 0)
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
void capture_add_unconnected(struct collector *c, json_t *hosts, const char *host)
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

/* The time t (ns since the epoch) as RFC 3339 UTC with ms. */
static void rfc3339(uint64_t t, char *out, size_t len)
{
	time_t sec = (time_t)(t / 1000000000u);
	struct tm tm;

	gmtime_r(&sec, &tm);
	snprintf(out, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned)(t / 1000000u % 1000u));
}

/* What one round of a capture found. */
struct cap_round {
	json_t *hosts;			/* one object per host */
	unsigned asked, answered;
	uint64_t found, stored;
	uint64_t overwritten;		/* spans of the trace lost before */
	uint64_t wire_bytes;		/* CAPTURE + CAPTURED frames, all hosts */
	int ret;			/* a store failure: -errno, err says */
	char err[512];
};

/* Ask every agent (cr), store what is new (seen: NULL, all), marked mk. */
static int round_run(struct collector *c, const struct cluster_capture_req *cr,
		     const struct cap_mark *mk, struct capture_seen *seen, struct cap_round *rd)
{
	struct cluster_capture_res res;

	memset(rd, 0, sizeof(*rd));
	if (cluster_capture_run(c->cluster, cr, &res)) {
		cluster_capture_res_free(&res);
		return -ENOMEM;
	}
	rd->hosts = json_array();
	for (size_t i = 0; rd->hosts && i < res.n; i++) {
		const struct cluster_capture_host *h = &res.h[i];
		long st = 0;
		json_t *o;

		if (h->state == CCH_NOHOST)
			continue;	/* a child collector without cr->host */
		rd->asked += h->state != CCH_UNSUPPORTED;
		rd->answered += h->state == CCH_ANSWERED || h->state == CCH_OFF;
		rd->wire_bytes += h->wire_bytes;
		rd->overwritten += h->lost;
		if (h->state == CCH_ANSWERED) {
			rd->found += h->nspans;
			st = store_host(c, h, mk, seen, rd->err, sizeof(rd->err));
			if (st < 0) {
				pr_warn("capture %s: the spans of %s were not stored: %s", mk->id,
					h->host, rd->err[0] ? rd->err : strerror((int)-st));
				rd->ret = (int)st;
				st = 0;
			}
			rd->stored += (uint64_t)st;
		}
		o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:b}",
			"host", h->host, "state", capture_state_name(h->state),
			"spans", (json_int_t)h->nspans, "stored", (json_int_t)st,
			"held", (json_int_t)h->held, "dropped", (json_int_t)h->dropped,
			"oldest_ms", (json_int_t)(h->oldest_ns / 1000000u), "cut", h->cut);
		if (o)
			json_object_set_new(o, "overwritten", json_integer((json_int_t)h->lost));
		if (o && h->partial)	/* a child collector: some hosts under it silent */
			json_object_set_new(o, "partial", json_true());
		if (o && h->via[0])
			json_object_set_new(o, "via", json_string(h->via));
		json_array_append_new(rd->hosts, o);
	}
	cluster_capture_res_free(&res);
	if (!rd->hosts)
		return -ENOMEM;
	capture_add_unconnected(c, rd->hosts, cr->host);
	if (rd->ret && !rd->err[0])
		snprintf(rd->err, sizeof(rd->err), "%s", strerror(-rd->ret));
	return 0;
}

void capture_new_id(struct collector *c, uint64_t now, char *id, size_t idlen, char *at,
		    size_t atlen)
{
	uint64_t n;

	pthread_mutex_lock(&c->captures_lock);
	n = ++c->ncaptures;
	pthread_mutex_unlock(&c->captures_lock);
	snprintf(id, idlen, "%" PRIu64 "-%" PRIu64, now / 1000000u, n);
	rfc3339(now, at, atlen);
}

void capture_list_put(struct collector *c, json_t *acc)
{
	pthread_mutex_lock(&c->captures_lock);
	if (!c->captures)
		c->captures = json_array();
	if (c->captures) {
		json_array_insert(c->captures, 0, acc);
		if (json_array_size(c->captures) > CAPTURES_KEEP) {
			json_t *old = json_array_get(c->captures, CAPTURES_KEEP);
			char path[4300];

			/* a capture of events: its file goes with it */
			if (json_object_get(old, "query") &&
			    !caplog_events_path(c, json_string_value(json_object_get(old, "id")),
						path, sizeof(path)))
				unlink(path);
			json_array_remove(c->captures, CAPTURES_KEEP);
		}
	}
	caplog_put(c, acc);
	pthread_mutex_unlock(&c->captures_lock);
}

json_t *capture_make(struct collector *c, const struct cluster_capture_req *cr, const char *by,
		     const struct capture_trigger *tr, struct capture_seen *seen, int *status)
{
	struct cap_mark mk = { 0 };
	struct cap_round rd;
	json_t *acc;
	uint64_t now = clock_realtime_ns();

	*status = 500;
	snprintf(mk.by, sizeof(mk.by), "%s", by);
	capture_new_id(c, now, mk.id, sizeof(mk.id), mk.at, sizeof(mk.at));
	if (round_run(c, cr, &mk, seen, &rd))
		return NULL;
	acc = json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:I, s:I, s:o}",
		"id", mk.id, "at", mk.at, "by", mk.by, "at_ms", (json_int_t)(now / 1000000u),
		"hosts_asked", (int)rd.asked, "hosts_answered", (int)rd.answered,
		"spans_found", (json_int_t)rd.found, "spans_stored", (json_int_t)rd.stored,
		"hosts", rd.hosts);
	if (!acc)
		return NULL;
	json_object_set_new(acc, "wire_bytes", json_integer((json_int_t)rd.wire_bytes));
	/* lost before the capture asked (a trace's; 0 for a window) */
	json_object_set_new(acc, "spans_overwritten", json_integer((json_int_t)rd.overwritten));
	if (rd.ret)
		json_object_set_new(acc, "error", json_string(rd.err));
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
		json_object_set_new(acc, "follow_ms", json_integer((json_int_t)tr->follow_ms));
		json_object_set_new(acc, "following", json_boolean(tr->follow_ms > 0));
		json_object_set_new(acc, "follow_rounds", json_integer(0));
		json_object_set_new(acc, "follow_wire_bytes", json_integer(0));
		json_object_set_new(acc, "spans_late", json_integer(0));
		json_object_set_new(acc, "last_late_ms", json_integer(0));
	}
	if (seen)
		seen_sort(seen);
	pr_info("capture %s (%s): %u hosts asked, %u answered, %" PRIu64 " spans found, %"
		PRIu64 " stored, %" PRIu64 " already overwritten", mk.id, mk.by, rd.asked,
		rd.answered, rd.found, rd.stored, rd.overwritten);
	capture_list_put(c, acc);
	/* stored but not all: 503, the account says which */
	*status = rd.ret ? 503 : 200;
	return acc;
}

/* n added to the integer acc[key].  Under captures_lock. */
static void acc_add(json_t *o, const char *key, json_int_t n)
{
	json_object_set_new(o, key, json_integer(json_integer_value(json_object_get(o, key)) + n));
}

/* A host's entry in the account's hosts, by name (NULL: none). */
static json_t *acc_host(json_t *hosts, const char *name)
{
	size_t i;
	json_t *v;

	json_array_foreach(hosts, i, v)
		if (!strcmp(json_string_value(json_object_get(v, "host")), name))
			return v;
	return NULL;
}

static bool answered(const char *state)
{
	return !strcmp(state, "answered") || !strcmp(state, "no flight buffer");
}

/* Counted asked, as round_run() counts: neither "does not capture" nor
 * "not connected" (an agent known from its spans only). */
static bool asked(const char *state)
{
	return strcmp(state, "does not capture") && strcmp(state, "not connected");
}

/* Fold a follow round's hosts into the account's: late spans, and a
 * host asked or answering now though it was not before.  Under
 * captures_lock. */
static void fold_hosts(json_t *acc, json_t *now)
{
	json_t *hosts = json_object_get(acc, "hosts"), *v;
	size_t i;

	json_array_foreach(now, i, v) {
		const char *name = json_string_value(json_object_get(v, "host"));
		const char *st = json_string_value(json_object_get(v, "state"));
		json_int_t late = json_integer_value(json_object_get(v, "stored"));
		json_t *h = acc_host(hosts, name);
		const char *was;

		if (!h) {	/* a host that joined since */
			h = json_pack("{s:s, s:s, s:i, s:i}", "host", name, "state",
				      "not connected", "spans", 0, "stored", 0);
			if (!h || json_array_append_new(hosts, h))
				continue;
		}
		was = json_string_value(json_object_get(h, "state"));
		if (asked(st) && !asked(was))
			acc_add(acc, "hosts_asked", 1);
		if (answered(st) && !answered(was)) {
			acc_add(acc, "hosts_answered", 1);
			json_object_set_new(h, "answered_late", json_true());
		}
		if (asked(st) && !answered(was))	/* was is freed here */
			json_object_set_new(h, "state", json_string(st));
		if (late)
			acc_add(h, "late", late);
		if (json_is_true(json_object_get(v, "cut")))
			json_object_set_new(h, "cut", json_true());
	}
}

long capture_follow(struct collector *c, json_t *acc, const struct cluster_capture_req *cr,
		    struct capture_seen *seen, bool last)
{
	struct cap_mark mk = { 0 };
	struct cap_round rd;
	uint64_t at_ms, now_ms = clock_realtime_ns() / 1000000u;

	pthread_mutex_lock(&c->captures_lock);
	snprintf(mk.id, sizeof(mk.id), "%s", json_string_value(json_object_get(acc, "id")));
	snprintf(mk.at, sizeof(mk.at), "%s", json_string_value(json_object_get(acc, "at")));
	snprintf(mk.by, sizeof(mk.by), "%s", json_string_value(json_object_get(acc, "by")));
	at_ms = (uint64_t)json_integer_value(json_object_get(acc, "at_ms"));
	pthread_mutex_unlock(&c->captures_lock);
	snprintf(mk.late, sizeof(mk.late), "%" PRIu64, now_ms > at_ms ? now_ms - at_ms : 0);
	if (round_run(c, cr, &mk, seen, &rd))
		return -ENOMEM;
	seen_sort(seen);
	pthread_mutex_lock(&c->captures_lock);
	fold_hosts(acc, rd.hosts);
	acc_add(acc, "follow_rounds", 1);
	acc_add(acc, "follow_wire_bytes", (json_int_t)rd.wire_bytes);
	if (rd.stored) {
		acc_add(acc, "spans_late", (json_int_t)rd.stored);
		acc_add(acc, "spans_stored", (json_int_t)rd.stored);
		acc_add(acc, "spans_found", (json_int_t)rd.stored);
		json_object_set_new(acc, "last_late_ms", json_integer(
			(json_int_t)(now_ms > at_ms ? now_ms - at_ms : 0)));
	}
	if (rd.ret)
		json_object_set_new(acc, "error", json_string(rd.err));
	if (last)
		json_object_set_new(acc, "following", json_false());
	if (rd.stored || last)
		caplog_put(c, acc);
	pthread_mutex_unlock(&c->captures_lock);
	json_decref(rd.hosts);
	if (rd.stored)
		pr_info("capture %s: %" PRIu64 " spans came late (%s ms after it)", mk.id,
			rd.stored, mk.late);
	return rd.ret ? rd.ret : (long)rd.stored;
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
	if (json_object_get(body, "query")) {	/* a query's kept events */
		int ret = capture_query_post(c, con, body);

		json_decref(body);
		return ret;
	}
	why = parse(body, &cr, by, sizeof(by));
	if (why) {
		int ret = reply_text(c, con, 400, "%s\n", why);

		json_decref(body);
		return ret;
	}
	acc = capture_make(c, &cr, by, NULL, NULL, &status);
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

/* A rule's "with_query" (a standing query's name) and "with_last_ms", when
 * given: NULL, or why not. */
static const char *with_check(struct collector *c, json_t *wq, json_t *wl)
{
	char *text;

	if (!wq && !wl)
		return NULL;
	if (!json_is_string(wq) || !json_is_integer(wl) || json_integer_value(wl) < 1 ||
	    json_integer_value(wl) > CRULES_WITH_LAST_MS_MAX)
		return "\"with_query\" (a standing query's name) goes with \"with_last_ms\" "
		       "(1 to 600000)";
	text = c->standing ? standing_text(c->standing, json_string_value(wq)) : NULL;
	free(text);
	return text ? NULL : "\"with_query\": no standing query of that name";
}

/* POST /api/captures/rules {"name":N, "expr":E, "per_s":R, "settle_ms":S,
 * "follow_ms":F, "with_query":Q, "with_last_ms":L}. */
static int rule_add(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	json_error_t je;
	json_t *b, *n, *e, *r, *s, *f, *wq, *wl;
	char err[4096] = "";
	const char *why;
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
	f = json_object_get(b, "follow_ms");
	wq = json_object_get(b, "with_query");
	wl = json_object_get(b, "with_last_ms");
	why = with_check(c, wq, wl);
	if (why) {
		json_decref(b);
		return reply_text(c, con, 400, "%s\n", why);
	}
	if (!json_is_string(n) || !json_is_string(e) || (r && !json_is_integer(r)) ||
	    (s && !json_is_integer(s)) || (f && !json_is_integer(f))) {
		json_decref(b);
		return reply_text(c, con, 400, "want {\"name\": NAME, \"expr\": FAYQL predicate, "
				  "\"per_s\": N, \"settle_ms\": N, \"follow_ms\": N} (per_s, "
				  "settle_ms, follow_ms optional)\n");
	}
	if ((r && (json_integer_value(r) < 1 || json_integer_value(r) > CRULES_PER_S_MAX)) ||
	    (s && (json_integer_value(s) < 0 || json_integer_value(s) > CRULES_SETTLE_MS_MAX)) ||
	    (f && (json_integer_value(f) < 0 || json_integer_value(f) > CRULES_FOLLOW_MS_MAX))) {
		json_decref(b);
		return reply_text(c, con, 400, "per_s: 1 to %d; settle_ms: 0 to %d; "
				  "follow_ms: 0 to %d\n", CRULES_PER_S_MAX, CRULES_SETTLE_MS_MAX,
				  CRULES_FOLLOW_MS_MAX);
	}
	ret = crules_add(c->rules, json_string_value(n), json_string_value(e),
			 r ? (unsigned)json_integer_value(r) : CRULES_PER_S_DEFAULT,
			 s ? (unsigned)json_integer_value(s) : CRULES_SETTLE_MS_DEFAULT,
			 f ? (unsigned)json_integer_value(f) : CRULES_FOLLOW_MS_DEFAULT, err, sizeof(err), &line, &col);
	if (!ret && wq && crules_with_query(c->rules, json_string_value(n), json_string_value(wq),
					     (unsigned)json_integer_value(wl), err, sizeof(err))) {
		crules_drop(c->rules, json_string_value(n));
		json_decref(b);
		return reply_text(c, con, 500, "%s\n", err);
	}
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
