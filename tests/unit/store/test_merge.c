// SPDX-License-Identifier: MIT
/*
 * BlkKin partial records -> Zipkin v2 spans (zparts_merge, the
 * V1SpanConverter rule), span records -> zspan, normalisation, and the
 * QueryRequest matcher.  Pure functions: no store.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "store/store.h"
#include "test.h"

static struct zarena A;

static struct zs_endpoint ep(const char *svc)
{
	struct zs_endpoint e = { 0 };

	e.service = (struct zs_str){ svc, (uint32_t)strlen(svc) };
	snprintf(e.ipv4, sizeof(e.ipv4), "10.0.0.%u", (unsigned)strlen(svc) % 100);
	e.port = 80;
	return e;
}

static struct zs_part ann(const char *svc, const char *v, uint64_t ts)
{
	struct zs_part p = { .trace_lo = 0xabc, .id = 0x10, .parent_id = 0x1,
			     .name = ZS_STR("get"), .ts_us = ts };

	if (svc)
		p.local = ep(svc);
	p.key = (struct zs_str){ v, (uint32_t)strlen(v) };
	return p;
}

static struct zs_part tag(const char *svc, const char *k, const char *v)
{
	struct zs_part p = ann(svc, k, 0);

	p.is_tag = 1;
	p.value = (struct zs_str){ v, (uint32_t)strlen(v) };
	return p;
}

static const struct zspan *find(const struct zspan *s, int n, const char *svc, int kind)
{
	for (int i = 0; i < n; i++)
		if (zs_str_eqc(s[i].local.service, svc) && s[i].kind == kind)
			return &s[i];
	return NULL;
}

static int has_ann(const struct zspan *s, const char *v, uint64_t ts)
{
	for (uint32_t i = 0; i < s->nannotations; i++)
		if (zs_str_eqc(s->annotations[i].value, v) && s->annotations[i].ts_us == ts)
			return 1;
	return 0;
}

static const char *tagval(const struct zspan *s, const char *k)
{
	static char buf[128];

	for (uint32_t i = 0; i < s->ntags; i++)
		if (zs_str_eqc(s->tags[i].key, k)) {
			snprintf(buf, sizeof(buf), "%.*s", (int)s->tags[i].value.len, s->tags[i].value.p);
			return buf;
		}
	return NULL;
}

static void rpc_two_services(void)
{
	struct zs_part p[] = {
		ann("frontend", "cs", 1000), ann("backend", "sr", 1100),
		ann("backend", "cache miss", 1150), tag("backend", "rows", "42"),
		ann("backend", "ss", 1400), ann("frontend", "cr", 1500),
		tag("frontend", "http.path", "/x"),
	};
	struct zspan *s;
	const struct zspan *c, *v;
	int n = zparts_merge(p, 7, &A, &s);

	is_int(n, 2, "cs/sr/ss/cr on two services: two spans");
	c = find(s, n, "frontend", SPAN_KIND_CLIENT);
	v = find(s, n, "backend", SPAN_KIND_SERVER);
	ok(c && v, "a CLIENT span on frontend and a SERVER span on backend");
	if (!c || !v)
		return;
	is_u64(c->timestamp_us, 1000, "client timestamp = cs");
	is_u64(c->duration_us, 500, "client duration = cr - cs");
	is_int(c->shared, 0, "client not shared");
	is_u64(v->timestamp_us, 1100, "server timestamp = sr");
	is_u64(v->duration_us, 300, "server duration = ss - sr");
	is_int(v->shared, 1, "server shared (same span id has cs)");
	is_int(c->nannotations, 0, "core annotations are not kept as annotations (client)");
	is_int(v->nannotations, 1, "server keeps its one custom annotation");
	ok(has_ann(v, "cache miss", 1150), "custom annotation on the server span");
	is_str(tagval(v, "rows"), "42", "key-value -> tag on the span of its endpoint");
	is_str(tagval(c, "http.path"), "/x", "client tag on the client span");
	ok(!tagval(c, "rows"), "server tag not on the client span");
	is_u64(c->id, 0x10, "span id kept");
	is_u64(c->parent_id, 0x1, "parent id kept");
	is_str(c->name.p, "get", "name kept");
	is_str(v->local.ipv4, "10.0.0.7", "endpoint from the record");
}

static void server_only(void)
{
	struct zs_part p[] = { ann("backend", "sr", 2000), ann("backend", "ss", 2600) };
	struct zspan *s;
	int n = zparts_merge(p, 2, &A, &s);

	is_int(n, 1, "sr/ss: one span");
	is_int(s[0].kind, SPAN_KIND_SERVER, "sr/ss: SERVER");
	is_u64(s[0].timestamp_us, 2000, "sr/ss: timestamp = sr");
	is_u64(s[0].duration_us, 600, "sr/ss: duration = ss - sr");
	is_int(s[0].shared, 0, "sr/ss without cs: not shared");
}

static void client_only(void)
{
	struct zs_part p[] = { ann("frontend", "cr", 3900), ann("frontend", "cs", 3000) };
	struct zspan *s;
	int n = zparts_merge(p, 2, &A, &s);

	is_int(n, 1, "cs/cr: one span");
	is_int(s[0].kind, SPAN_KIND_CLIENT, "cs/cr: CLIENT");
	is_u64(s[0].timestamp_us, 3000, "cs/cr: timestamp = cs (order of parts does not matter)");
	is_u64(s[0].duration_us, 900, "cs/cr: duration");
}

/* sr and ss (or cs and cr) in the same microsecond: a known duration under
 * 1 us is 1 us (Zipkin's rule, and a whole record's), never 0 ("none"). */
static void same_microsecond(void)
{
	struct zs_part p[] = { ann("backend", "sr", 5000), ann("backend", "ss", 5000) };
	struct zs_part q[] = {
		ann("frontend", "cs", 6000), ann("backend", "sr", 6100),
		ann("backend", "ss", 6100), ann("frontend", "cr", 6300),
	};
	struct zs_part r[] = { ann("frontend", "cs", 7000), ann("frontend", "cr", 7000) };
	struct zs_part back[] = { ann("frontend", "cs", 8000), ann("frontend", "cr", 7900) };
	const struct zspan *v;
	struct zspan *s;
	int n = zparts_merge(p, 2, &A, &s);

	is_int(n, 1, "sr = ss: one span");
	is_u64(s[0].timestamp_us, 5000, "sr = ss: timestamp = sr");
	is_u64(s[0].duration_us, 1, "sr = ss: duration 1 us, not none");
	n = zparts_merge(q, 4, &A, &s);
	v = find(s, n, "backend", SPAN_KIND_SERVER);
	ok(v && v->shared && v->duration_us == 1, "shared server half with sr = ss: duration 1 us");
	v = find(s, n, "frontend", SPAN_KIND_CLIENT);
	ok(v && v->duration_us == 300, "its client half: cr - cs as before");
	n = zparts_merge(r, 2, &A, &s);
	is_u64(n == 1 ? s[0].duration_us : 0, 1, "cs = cr: duration 1 us");
	n = zparts_merge(back, 2, &A, &s);
	ok(n == 1 && s[0].timestamp_us == 8000 && !s[0].duration_us,
	   "cr before cs (the clock stepped back): no duration, as zipkin2's builder");
}

static void loopback(void)
{
	struct zs_part p[] = {
		ann("svc", "cs", 100), ann("svc", "sr", 110), ann("svc", "ss", 190),
		ann("svc", "cr", 200),
	};
	struct zspan *s;
	const struct zspan *c, *v;
	int n = zparts_merge(p, 4, &A, &s);

	is_int(n, 2, "loopback (cs and sr on one service): two spans");
	c = find(s, n, "svc", SPAN_KIND_CLIENT);
	v = find(s, n, "svc", SPAN_KIND_SERVER);
	ok(c && v && c != v, "loopback: client and server forked");
	if (c && v) {
		is_u64(c->duration_us, 100, "loopback client duration");
		is_u64(v->duration_us, 80, "loopback server duration");
		is_int(v->shared, 1, "loopback server shared");
	}
}

static void incomplete(void)
{
	struct zs_part p[] = { ann("frontend", "cs", 500), ann("frontend", "work", 600) };
	struct zs_part q[] = { ann("backend", "sr", 700), ann("backend", "cr", 900) };
	struct zspan *s;
	int n = zparts_merge(p, 2, &A, &s);

	is_int(n, 1, "cs alone: one span");
	is_int(s[0].kind, SPAN_KIND_CLIENT, "cs alone: CLIENT");
	is_u64(s[0].timestamp_us, 500, "cs alone: timestamp = cs");
	is_u64(s[0].duration_us, 0, "cs alone: no duration");
	ok(has_ann(&s[0], "work", 600), "cs alone: other annotation kept");

	/* sr + cr on one service (an odd pair): V1 makes it SERVER then
	 * CLIENT on the same span; incomplete RPC keeps cr as an annotation */
	n = zparts_merge(q, 2, &A, &s);
	is_int(n, 1, "sr+cr on one service: one span");
	is_int(s[0].kind, SPAN_KIND_CLIENT, "sr+cr: the last core annotation sets the kind (V1)");
	ok(has_ann(&s[0], "cr", 900), "sr+cr: cr kept as an annotation (incomplete RPC)");
}

static void no_endpoint(void)
{
	struct zs_part p[] = { ann(NULL, "cs", 10), ann(NULL, "cr", 20), tag(NULL, "k", "v") };
	struct zspan *s;
	int n = zparts_merge(p, 3, &A, &s);

	is_int(n, 1, "no endpoint: one span");
	is_int(s[0].kind, SPAN_KIND_UNSET, "no endpoint: core annotations are plain (V1 needs an endpoint)");
	is_int(s[0].nannotations, 2, "no endpoint: cs and cr kept as annotations");
	is_str(tagval(&s[0], "k"), "v", "no endpoint: tag kept");
	is_u64(s[0].timestamp_us, 10, "no endpoint: timestamp = first annotation (Zipkin 1.x)");
	is_u64(s[0].duration_us, 10, "no endpoint: duration = last - first");
}

/* A BlkKin program's own events (no cs/sr): Zipkin 1.x's rule gives the
 * span a timestamp and duration from its first and last annotation. */
static void blkin_events(void)
{
	struct zs_part p[] = { ann("osd", "end", 950), ann("osd", "start", 200),
			       ann("osd", "queued", 400), tag("osd", "bytes", "4096") };
	struct zs_part q[] = { ann("osd", "only", 300) };
	struct zspan *s;
	int n = zparts_merge(p, 4, &A, &s);

	is_int(n, 1, "start/queued/end: one span");
	is_u64(s[0].timestamp_us, 200, "timestamp = the earliest annotation");
	is_u64(s[0].duration_us, 750, "duration = last - first");
	is_int(s[0].nannotations, 3, "the annotations stay");
	n = zparts_merge(q, 1, &A, &s);
	ok(n == 1 && s[0].timestamp_us == 300 && !s[0].duration_us,
	   "one annotation: its timestamp, no duration");
}

static void messaging(void)
{
	struct zs_part p[] = {
		ann("prod", "ms", 100), ann("prod", "ws", 120),
		ann("cons", "wr", 300), ann("cons", "mr", 350),
	};
	struct zspan *s;
	const struct zspan *pr, *co;
	int n = zparts_merge(p, 4, &A, &s);

	pr = find(s, n, "prod", SPAN_KIND_PRODUCER);
	co = find(s, n, "cons", SPAN_KIND_CONSUMER);
	ok(n == 2 && pr && co, "ms/ws/wr/mr: PRODUCER and CONSUMER spans");
	if (pr && co) {
		is_u64(pr->duration_us, 20, "producer duration = ws - ms");
		is_u64(co->timestamp_us, 300, "consumer timestamp = wr");
		is_u64(co->duration_us, 50, "consumer duration = mr - wr");
	}
}

static void from_record(void)
{
	uint8_t buf[512];
	size_t off = 64;
	struct spanrec_fixed f = { .trace_lo = 7, .span_id = 9, .start_ns = 5000000,
				   .duration_ns = 1500, .kind = SPAN_KIND_SERVER,
				   .flags = SPAN_F_ERROR | SPAN_F_SHARED, .dropped_items = 2 };
	struct spanrec r;
	struct zspan z;
	char err[128];

	spanrec_put_item(buf, sizeof(buf), &off, SPAN_ITEM_NAME, 0, "Read", 4, NULL, 0);
	spanrec_put_item(buf, sizeof(buf), &off, SPAN_ITEM_TAG_INT, (uint64_t)-5, "n", 1, NULL, 0);
	spanrec_put_item(buf, sizeof(buf), &off, SPAN_ITEM_LOCAL_EP, 99, "Disk", 4, "::ffff:1.2.3.4", 14);
	spanrec_put_item(buf, sizeof(buf), &off, SPAN_ITEM_EVENT, 5500000, "b", 1, NULL, 0);
	spanrec_put_item(buf, sizeof(buf), &off, SPAN_ITEM_EVENT, 5200000, "a", 1, NULL, 0);
	f.items_len = (uint32_t)(off - 64);
	f.nitems = 5;
	memcpy(buf, &f, 64);
	ok(spanrec_decode(buf, off, &r, err, sizeof(err)) > 0, "record decodes");
	is_int(zspan_from_rec(&r, &A, &z), 1, "record -> span");
	is_u64(z.timestamp_us, 5000, "ns -> us");
	is_u64(z.duration_us, 2, "1.5 us from a whole microsecond: 2 us, the end rounded up");
	is_str(z.name.p, "read", "name lower-cased (Zipkin)");
	is_str(z.local.service.p, "disk", "service lower-cased");
	is_str(z.local.ipv4, "1.2.3.4", "IPv4-mapped IPv6 -> ipv4");
	is_int(z.local.port, 99, "port");
	is_str(tagval(&z, "n"), "-5", "int tag in decimal");
	is_str(tagval(&z, "error"), "true", "SPAN_F_ERROR -> error tag");
	is_str(tagval(&z, "fay.dropped_items"), "2", "dropped items are visible");
	is_int(z.error, 1, "error flag");
	is_int(z.shared, 1, "shared");
	ok(z.nannotations == 2 && z.annotations[0].ts_us == 5200, "annotations sorted by time");
	f.duration_ns = 0;
	memcpy(buf, &f, 64);
	ok(spanrec_decode(buf, off, &r, err, sizeof(err)) > 0 && zspan_from_rec(&r, &A, &z) == 1 &&
	   z.duration_us == 1, "a record that ended in the ns it began: duration 1 us, not absent");
}

static void normalize(void)
{
	struct zs_tag t[] = { { ZS_STR("b"), ZS_STR("1") }, { ZS_STR("a"), ZS_STR("x") },
			      { ZS_STR("b"), ZS_STR("2") } };
	struct zs_annotation an[] = { { 5, ZS_STR("y") }, { 5, ZS_STR("y") }, { 1, ZS_STR("z") } };
	struct zspan s = { .id = 3, .parent_id = 3, .kind = SPAN_KIND_CLIENT, .shared = 1,
			   .tags = t, .ntags = 3, .annotations = an, .nannotations = 3 };

	zspan_normalize(&s);
	is_int(s.ntags, 2, "duplicate tag keys collapse");
	ok(zs_str_eqc(s.tags[0].key, "a") && zs_str_eqc(s.tags[1].value, "2"),
	   "tags sorted by key, the last value wins");
	is_int(s.nannotations, 2, "duplicate annotations dropped");
	is_u64(s.parent_id, 0, "parentId == id dropped");
	is_int(s.shared, 0, "shared dropped on a CLIENT span");
}

/* memcmp()'s order, then the shorter first: the order of a span's tags. */
static int ref_cmp(struct zs_str a, struct zs_str b)
{
	uint32_t n = a.len < b.len ? a.len : b.len;
	int c = n ? memcmp(a.p, b.p, n) : 0;

	return c ? c : (a.len > b.len) - (a.len < b.len);
}

/*
 * Tags sorted against a plain reference (the last value of a key wins,
 * keys in ref_cmp's order), 2-40 tags a span (a few are sorted by their
 * first eight bytes, many by qsort), keys that share their first eight
 * bytes, end inside them, hold NULs and bytes over 0x7f.
 */
static void normalize_random(void)
{
	static const char alpha[] = { 'a', 'b', '\0', (char)0xff };
	unsigned seed = 26;
	int bad = 0, round;

	for (round = 0; round < 20000 && !bad; round++) {
		char keys[40][13], vals[40][8];
		struct zs_tag t[40], want[40];
		uint32_t n = 2 + (uint32_t)rand_r(&seed) % 39, nw = 0;
		struct zspan s = { .id = 1 };

		for (uint32_t i = 0; i < n; i++) {
			uint32_t len = (uint32_t)rand_r(&seed) % 13;
			int shared = rand_r(&seed) % 2;

			for (uint32_t k = 0; k < len; k++)
				keys[i][k] = shared && k < 8 ? "abababab"[k] : alpha[rand_r(&seed) % 4];
			snprintf(vals[i], sizeof(vals[i]), "v%u", i);
			t[i] = (struct zs_tag){ { keys[i], len }, { vals[i], (uint32_t)strlen(vals[i]) } };
		}
		for (uint32_t i = 0; i < n; i++) {
			uint32_t j = i + 1;

			while (j < n && ref_cmp(t[i].key, t[j].key))
				j++;
			if (j == n)     /* no later value of this key */
				want[nw++] = t[i];
		}
		for (uint32_t i = 1; i < nw; i++)
			for (uint32_t j = i; j && ref_cmp(want[j - 1].key, want[j].key) > 0; j--) {
				struct zs_tag x = want[j];

				want[j] = want[j - 1];
				want[j - 1] = x;
			}
		s.tags = t;
		s.ntags = n;
		zspan_normalize(&s);
		bad = s.ntags != nw;
		for (uint32_t i = 0; i < nw && !bad; i++)
			bad = ref_cmp(s.tags[i].key, want[i].key) ||
			      ref_cmp(s.tags[i].value, want[i].value);
	}
	ok(!bad, "tags sorted and deduplicated as the reference does (%d spans of 2-40 tags%s)",
	   round, bad ? ": the last one differs" : "");
}

/* zarena_str(..., lower): every byte value at every place of a word and of
 * the tail after it, among upper and lower case letters, as tolower(). */
static void lower_bytes(void)
{
	int bad = 0;

	for (int b = 0; b < 256 && !bad; b++)
		for (size_t at = 0; at < 19 && !bad; at++) {
			char in[19];
			struct zs_str out;

			for (size_t k = 0; k < sizeof(in); k++)
				in[k] = (char)(k % 3 ? 'A' + (int)k : 'z' - (int)k);
			in[at] = (char)b;
			bad = zarena_str(&A, &out, in, sizeof(in), 1) || out.len != sizeof(in);
			for (size_t k = 0; k < sizeof(in) && !bad; k++)
				bad = (unsigned char)out.p[k] != tolower((unsigned char)in[k]);
			if (bad)
				diag("byte 0x%02x at %zu", b, at);
		}
	ok(!bad, "lower-cased copies: every byte at every place, as tolower()");
}

/* zipkin2.Endpoint.parseIp(): the cases and answers of Zipkin's
 * EndpointTest (openzipkin/zipkin zipkin/src/test/java/zipkin2). */
static void endpoint_ips(void)
{
	static const struct { const char *in, *v4, *v6; } c[] = {
		{ "43.0.192.2", "43.0.192.2", "" },
		{ "2001:db8::c001", "", "2001:db8::c001" },
		{ "2001:DB8::C001", "", "2001:db8::c001" },          /* ipv6_downcases */
		{ "::FFFF:43.0.192.2", "43.0.192.2", "" },           /* mappedIpv4 */
		{ "::0000:43.0.192.2", "43.0.192.2", "" },           /* compatIpv4 */
		{ "::43.0.192.2", "43.0.192.2", "" },                /* compressed */
		{ "::1", "", "::1" },                                /* ipv6_localhost */
		{ "::2", "", "::2" },                                /* ipv6_notLocalhost */
		{ "::", "", "::" },
		{ "2001:0:0:4:0:0:0:8", "", "2001:0:0:4::8" },
		{ "1:0:0:0:0:0:0:0", "", "1::" },
		{ "fe80:0:0:0:0:0:0:1", "", "fe80::1" },
	};
	static const char *const bad[] = { "::ffef:43.0.192.2", "1.2.3", "", "x::1",
					   "256.0.0.1", "1:2:3:4:5:6:7:8:9" };
	static const unsigned char lo6[16] = { [15] = 1 }, compat[16] = { [12] = 43, [14] = 192, [15] = 2 };

	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		struct zs_endpoint e = { 0 };

		ok(!zs_ep_set_ip(&e, c[i].in, strlen(c[i].in)) && !strcmp(e.ipv4, c[i].v4) &&
		   !strcmp(e.ipv6, c[i].v6), "ip '%s' -> ipv4 '%s' ipv6 '%s' (got '%s' '%s')",
		   c[i].in, c[i].v4, c[i].v6, e.ipv4, e.ipv6);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct zs_endpoint e = { 0 };

		ok(zs_ep_set_ip(&e, bad[i], strlen(bad[i])) == -EINVAL && !e.ipv4[0] && !e.ipv6[0],
		   "'%s' is not an address (dropped)", bad[i]);
	}
	{
		struct zs_endpoint e = { 0 }, f = { 0 };

		ok(!zs_ep_set_ip_bytes(&e, lo6, 16) && !strcmp(e.ipv6, "::1") && !e.ipv4[0],
		   "bytes ::1 stay IPv6");
		ok(!zs_ep_set_ip_bytes(&f, compat, 16) && !strcmp(f.ipv4, "43.0.192.2"),
		   "bytes of an IPv4-compatible address -> ipv4");
	}
}

static void query_match(void)
{
	struct zs_tag t1[] = { { ZS_STR("http.method"), ZS_STR("GET") } };
	struct zs_annotation a2[] = { { 1000100, ZS_STR("retried") } };
	struct zspan tr[2] = {
		{ .trace_lo = 1, .id = 1, .name = ZS_STR("get"), .timestamp_us = 1000000,
		  .duration_us = 500, .local = ep("front"), .tags = t1, .ntags = 1 },
		{ .trace_lo = 1, .id = 2, .parent_id = 1, .name = ZS_STR("query"),
		  .timestamp_us = 1000100, .duration_us = 90, .local = ep("db"),
		  .annotations = a2, .nannotations = 1 },
	};
	struct store_query q = { .end_ts_ms = 2000, .lookback_ms = 1500, .limit = 10 };
	char s1[] = "http.method=GET and retried", s2[] = "http.method=POST", err[128];

	tr[0].remote.service = (struct zs_str)ZS_STR("db");
	ok(store_query_test(&q, tr, 2), "no criteria: trace in the window matches");
	q.end_ts_ms = 900;
	ok(!store_query_test(&q, tr, 2), "trace after endTs: no match");
	q.end_ts_ms = 2000;
	q.lookback_ms = 500;
	ok(!store_query_test(&q, tr, 2), "trace before endTs - lookback: no match");
	q.lookback_ms = 1500;
	q.service = "db";
	q.span_name = "get";
	ok(!store_query_test(&q, tr, 2), "spanName must be on a span of serviceName");
	q.span_name = "query";
	ok(store_query_test(&q, tr, 2), "service + its span name");
	q.service = "front";
	q.span_name = NULL;
	q.remote_service = "db";
	ok(store_query_test(&q, tr, 2), "remoteServiceName");
	q.remote_service = NULL;
	q.service = NULL;
	ok(!store_query_parse_aq(&q, s1, err, sizeof(err)) && q.naq == 2, "annotationQuery parses");
	ok(store_query_test(&q, tr, 2), "annotationQuery: tag on one span, annotation on another");
	ok(!store_query_parse_aq(&q, s2, err, sizeof(err)), "annotationQuery 2 parses");
	ok(!store_query_test(&q, tr, 2), "annotationQuery: wrong tag value");
	q.naq = 0;
	q.min_duration_us = 100;
	ok(store_query_test(&q, tr, 2), "minDuration 100: the root (500) matches");
	q.max_duration_us = 400;
	ok(!store_query_test(&q, tr, 2), "min 100 max 400: no span in range");
	q.min_duration_us = 50;
	ok(store_query_test(&q, tr, 2), "min 50 max 400: the child (90) matches");
	is_u64(store_trace_ts(tr, 2), 1000000, "trace timestamp = the root's");
	{
		char bad[] = " = x";

		ok(store_query_parse_aq(&q, bad, err, sizeof(err)) == -EINVAL,
		   "annotationQuery with an empty key is refused: %s", err);
	}
}

int main(void)
{
	rpc_two_services();
	server_only();
	client_only();
	same_microsecond();
	loopback();
	incomplete();
	no_endpoint();
	blkin_events();
	messaging();
	from_record();
	normalize();
	normalize_random();
	lower_bytes();
	endpoint_ips();
	query_match();
	zarena_reset(&A);
	return test_done();
}
