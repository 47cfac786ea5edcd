// SPDX-License-Identifier: MIT
/*
 * QUERY frames of the cluster protocol (src/common/wire_cluster.c) carry
 * the requester's probe right (#20): WIRE_QF_PROBE round trips; a QUERY
 * of a collector before #20 (no flags byte) decodes with no flag, which
 * qlink.c refuses; a flags byte followed by more bytes is refused.
 * CAPTURE and CAPTURED (the flight recorder, #22) round trip, and damage
 * to them is refused with the field named.
 */
#include <errno.h>
#include <string.h>

#include "common/bytes.h"
#include "common/wire_cluster.h"
#include "test.h"

static void encode(unsigned flags, struct wbuf *w)
{
	struct wire_query q = {
		.qid = 7, .deadline_ns = 11, .window_ns = 1000000000ull,
		.text = "from s in cluster.syscall(\"read\") select count()",
		.flags = flags,
	};

	q.len = strlen(q.text);
	wire_query_encode(&q, w);
}

static void test_capture(void)
{
	struct wire_capture c = {
		.cid = 9, .kind = WIRE_CK_WINDOW, .from_ns = 100, .to_ns = 200,
		.service = "mapperd", .service_len = 7,
	}, d;
	struct wire_captured r = { .cid = 9, .state = WIRE_CS_ANSWERED, .flags = WIRE_CF_CUT,
				   .held = 1234, .dropped = 56, .oldest_ns = 99 }, e;
	uint8_t rec[5] = { 1, 2, 3, 4, 5 };
	struct wbuf w = { 0 };
	char why[256] = "";

	wire_capture_encode(&c, &w);
	ok(!wire_capture_decode(w.p, w.len, &d, why, sizeof(why)), "CAPTURE by time: decoded");
	ok(d.cid == 9 && d.kind == WIRE_CK_WINDOW && d.from_ns == 100 && d.to_ns == 200,
	   "... its cid, kind and window");
	ok(d.service_len == 7 && !memcmp(d.service, "mapperd", 7), "... its service");
	ok(wire_capture_decode(w.p, w.len - 1, &d, why, sizeof(why)) == -EBADMSG,
	   "CAPTURE cut short: refused");
	diag("%s", why);
	w.p[4] = 4;		/* kind */
	ok(wire_capture_decode(w.p, w.len, &d, why, sizeof(why)) == -EBADMSG &&
	   strstr(why, "kind"), "CAPTURE of an unknown kind: refused, naming it");
	diag("%s", why);
	wbuf_free(&w);

	c = (struct wire_capture){ .cid = 10, .kind = WIRE_CK_TRACE, .trace_hi = 1, .trace_lo = 2 };
	wire_capture_encode(&c, &w);
	ok(!wire_capture_decode(w.p, w.len, &d, why, sizeof(why)) && d.kind == WIRE_CK_TRACE &&
	   d.trace_hi == 1 && d.trace_lo == 2 && !d.service_len, "CAPTURE by trace id: decoded");
	wbuf_free(&w);
	/* a query's kept events (#22 item 4): kind 3, the key of its text */
	c = (struct wire_capture){ .cid = 13, .kind = WIRE_CK_QUERY,
				   .trace_lo = wire_query_key("a", 1), .from_ns = 1, .to_ns = 9 };
	wire_capture_encode(&c, &w);
	ok(!wire_capture_decode(w.p, w.len, &d, why, sizeof(why)) && d.kind == WIRE_CK_QUERY &&
	   d.trace_lo == 0xaf63dc4c8601ec8cull && d.from_ns == 1 && d.to_ns == 9,
	   "CAPTURE of a query's events: decoded, its key FNV-1a of the text");
	ok(wire_query_key("", 0) == 0xcbf29ce484222325ull &&
	   wire_query_key("ab", 2) != wire_query_key("ba", 2), "... the key: FNV-1a 64");
	wbuf_free(&w);
	c = (struct wire_capture){ .cid = 11, .kind = WIRE_CK_WINDOW, .from_ns = 5, .to_ns = 4 };
	wire_capture_encode(&c, &w);
	ok(wire_capture_decode(w.p, w.len, &d, why, sizeof(why)) == -EBADMSG,
	   "CAPTURE whose window ends before it starts: refused");
	diag("%s", why);
	wbuf_free(&w);
	/* to a child collector: the host under it (--host through a tree) */
	c = (struct wire_capture){ .cid = 12, .kind = WIRE_CK_WINDOW, .from_ns = 1, .to_ns = 2,
				   .host = "a1", .host_len = 2 };
	wire_capture_encode(&c, &w);
	ok(!wire_capture_decode(w.p, w.len, &d, why, sizeof(why)) && d.host_len == 2 &&
	   !memcmp(d.host, "a1", 2) && !d.service_len, "CAPTURE with a host: decoded");
	ok(wire_capture_decode(w.p, w.len - 1, &d, why, sizeof(why)) == -EBADMSG &&
	   strstr(why, "host"), "... its host cut short: refused, naming it");
	diag("%s", why);
	wbuf_free(&w);

	/* CAPTURED with two records */
	wire_captured_encode_head(&r, &w);
	wbuf_le32(&w, 2);
	wbuf_le32(&w, 5);
	wbuf_put(&w, rec, 5);
	wbuf_le32(&w, 3);
	wbuf_put(&w, rec, 3);
	ok(!wire_captured_decode(w.p, w.len, &e, why, sizeof(why)), "CAPTURED: decoded");
	ok(e.cid == 9 && e.state == WIRE_CS_ANSWERED && e.flags == WIRE_CF_CUT &&
	   e.held == 1234 && e.dropped == 56 && e.oldest_ns == 99, "... its account");
	is_int((int)e.nspans, 2, "... its two spans");
	ok(e.body_len == 4 + 4 + 5 + 4 + 3, "... its body");
	ok(wire_captured_decode(w.p, w.len - 12, &e, why, sizeof(why)) == -EBADMSG,
	   "CAPTURED whose records are cut short: refused");
	diag("%s", why);
	w.p[4] = 7;		/* state */
	ok(wire_captured_decode(w.p, w.len, &e, why, sizeof(why)) == -EBADMSG &&
	   strstr(why, "state"), "CAPTURED of an unknown state: refused, naming it");
	wbuf_free(&w);

	r = (struct wire_captured){ .cid = 3, .state = WIRE_CS_OFF };
	wire_captured_encode_head(&r, &w);
	wbuf_le32(&w, 0);
	ok(!wire_captured_decode(w.p, w.len, &e, why, sizeof(why)) && e.state == WIRE_CS_OFF &&
	   !e.nspans, "CAPTURED from a host without a flight buffer: decoded");
	wbuf_free(&w);
	r = (struct wire_captured){ .cid = 4, .state = WIRE_CS_NOHOST };
	wire_captured_encode_head(&r, &w);
	wbuf_le32(&w, 0);
	ok(!wire_captured_decode(w.p, w.len, &e, why, sizeof(why)) && e.state == WIRE_CS_NOHOST,
	   "CAPTURED from a child collector without the host asked for: decoded");
	wbuf_free(&w);
	r = (struct wire_captured){ .cid = 5, .state = WIRE_CS_MISSING };
	wire_captured_encode_head(&r, &w);
	wbuf_le32(&w, 0);
	ok(!wire_captured_decode(w.p, w.len, &e, why, sizeof(why)) && e.state == WIRE_CS_MISSING &&
	   !(e.flags & WIRE_CF_LOST) && !e.lost,
	   "CAPTURED from a child collector whose hosts did not answer: decoded, nothing lost");
	wbuf_free(&w);
	/* a lost count: flagged, after oldest_ns, before the records */
	r = (struct wire_captured){ .cid = 6, .state = WIRE_CS_ANSWERED, .held = 3, .lost = 300,
				    .oldest_ns = 7, .flags = WIRE_CF_PARTIAL };
	wire_captured_encode_head(&r, &w);
	wbuf_le32(&w, 0);
	ok(!wire_captured_decode(w.p, w.len, &e, why, sizeof(why)) && e.lost == 300 &&
	   e.flags == (WIRE_CF_LOST | WIRE_CF_PARTIAL) && e.held == 3 && e.oldest_ns == 7 &&
	   !e.nspans, "CAPTURED with spans already overwritten: the count round-trips");
	ok(wire_captured_decode(w.p, 4 + 1 + 1 + 1 + 1 + 8 + 1, &e, why, sizeof(why)) == -EBADMSG &&
	   strstr(why, "lost"), "... cut inside it: refused, naming it (%s)", why);
	wbuf_free(&w);
}

int main(void)
{
	test_capture();
	struct wbuf w = { 0 };
	struct wire_query q;
	char why[256] = "";

	encode(WIRE_QF_PROBE, &w);
	ok(!wire_query_decode(w.p, w.len, &q, why, sizeof(why)), "QUERY with the probe flag: decoded");
	is_int((int)q.flags, WIRE_QF_PROBE, "... the flag is there");
	is_int((int)q.qid, 7, "... the qid");
	ok(q.len == strlen("from s in cluster.syscall(\"read\") select count()"), "... the text");
	wbuf_free(&w);

	encode(0, &w);
	ok(!wire_query_decode(w.p, w.len, &q, why, sizeof(why)), "QUERY without: decoded");
	is_int((int)q.flags, 0, "... no flag");
	/* a collector before #20: the same frame without its last byte */
	ok(!wire_query_decode(w.p, w.len - 1, &q, why, sizeof(why)),
	   "a QUERY of a collector before #20 (no flags byte): decoded");
	is_int((int)q.flags, 0, "... as no flag");
	wbuf_u8(&w, 0);
	ok(wire_query_decode(w.p, w.len, &q, why, sizeof(why)) == -EBADMSG,
	   "a byte after the flags: refused");
	diag("%s", why);
	wbuf_free(&w);
	return test_done();
}
