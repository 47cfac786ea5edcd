// SPDX-License-Identifier: MIT
/*
 * Zipkin's protobuf decoder (zproto.c) on hand-encoded ListOfSpans bytes
 * (field numbers of Zipkin's zipkin.proto): zipkin2's proto3 reader rules
 * (a zero high half makes a 64-bit trace id, an unknown kind is ignored,
 * an address of another length than 4/16 bytes is dropped, IPv6 ::1 stays
 * IPv6 and an IPv4-compatible one becomes ipv4, parentId == id and shared
 * on a CLIENT are dropped), and bad bodies named by span and field.
 */
#include <errno.h>
#include <string.h>

#include "collector/zproto.h"
#include "test.h"

/* Two spans.  0: trace 00..01 (16 bytes), id 2, kind 9, name "Get /X",
 * timestamp 1000, duration 5, local {Svc, ipv4 of 3 bytes, ipv6 ::1, port
 * 80}, remote {ipv6 ::1.2.3.4}, annotation (1001, a), tag k=v, shared.
 * 1: trace 00..03 (16 bytes), id 4, parent 4, CLIENT, shared. */
static const char two[] =
	"\x0a\x7d\x0a\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
	"\x00\x00\x00\x01\x1a\x08\x00\x00\x00\x00\x00\x00\x00\x02\x20\x09"
	"\x2a\x06\x47\x65\x74\x20\x2f\x58\x31\xe8\x03\x00\x00\x00\x00\x00"
	"\x00\x38\x05\x42\x1e\x0a\x03\x53\x76\x63\x12\x03\x01\x02\x03\x1a"
	"\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
	"\x01\x20\x50\x4a\x12\x1a\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00"
	"\x00\x00\x00\x01\x02\x03\x04\x52\x0c\x09\xe9\x03\x00\x00\x00\x00"
	"\x00\x00\x12\x01\x61\x5a\x06\x0a\x01\x6b\x12\x01\x76\x68\x01\x0a"
	"\x2a\x0a\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
	"\x00\x00\x03\x1a\x08\x00\x00\x00\x00\x00\x00\x00\x04\x12\x08\x00"
	"\x00\x00\x00\x00\x00\x00\x04\x20\x01\x68\x01";
#define TWO_LEN 171
/* One span with an id and no trace id. */
static const char no_trace[] =
	"\x0a\x0a\x1a\x08\x00\x00\x00\x00\x00\x00\x00\x01";
#define NO_TRACE_LEN 12
/* One span whose local endpoint has port 70000. */
static const char big_port[] =
	"\x0a\x1a\x0a\x08\x00\x00\x00\x00\x00\x00\x00\x01\x1a\x08\x00\x00"
	"\x00\x00\x00\x00\x00\x01\x42\x04\x20\xf0\xa2\x04";
#define BIG_PORT_LEN 28

int main(void)
{
	struct zarena a = { 0 };
	struct zspan *s;
	size_t n;
	char err[256];

	is_int(zproto_parse_spans(two, TWO_LEN, &a, &s, &n, err, sizeof(err)), 0,
	       "two spans decode: %s", err);
	is_int((int)n, 2, "two spans");
	if (n == 2) {
		ok(!s[0].trace_hi && s[0].trace_lo == 1, "16-byte trace id with a zero high half: 64-bit");
		ok(s[0].id == 2 && !s[0].parent_id, "id, no parent");
		is_int(s[0].kind, 0, "kind 9 (unknown) is ignored");
		is_str(s[0].name.p, "get /x", "name lower-cased");
		ok(s[0].timestamp_us == 1000 && s[0].duration_us == 5, "timestamp (fixed64), duration");
		is_str(s[0].local.service.p, "svc", "service lower-cased");
		is_str(s[0].local.ipv4, "", "a 3-byte ipv4 is no address: dropped");
		is_str(s[0].local.ipv6, "::1", "ipv6 ::1 stays IPv6");
		is_int(s[0].local.port, 80, "port");
		is_str(s[0].remote.ipv4, "1.2.3.4", "IPv4-compatible ipv6 bytes -> ipv4");
		ok(s[0].nannotations == 1 && s[0].annotations[0].ts_us == 1001 &&
		   s[0].annotations[0].value.len == 1, "annotation");
		ok(s[0].ntags == 1 && zs_str_eqc(s[0].tags[0].key, "k") &&
		   zs_str_eqc(s[0].tags[0].value, "v"), "tag (map entry)");
		is_int(s[0].shared, 1, "shared");
		ok(s[1].trace_lo == 3 && s[1].id == 4 && !s[1].parent_id, "parentId == id dropped");
		ok(s[1].kind == SPAN_KIND_CLIENT && !s[1].shared, "shared dropped on a CLIENT");
	}
	is_int(zproto_parse_spans(no_trace, NO_TRACE_LEN, &a, &s, &n, err, sizeof(err)), -EINVAL,
	       "a span without a trace id is refused");
	is_str(err, "span 0: traceId: must be 8 or 16 bytes", "... naming span and field");
	is_int(zproto_parse_spans(big_port, BIG_PORT_LEN, &a, &s, &n, err, sizeof(err)), -EINVAL,
	       "port 70000 is refused");
	is_str(err, "span 0: localEndpoint.port: must be an integer up to 65535", "... naming it");
	is_int(zproto_parse_spans(two, 60, &a, &s, &n, err, sizeof(err)), -EINVAL,
	       "a truncated body is refused");
	ok(!strncmp(err, "body: not a Zipkin protobuf ListOfSpans", 39), "... as not a ListOfSpans: %s", err);
	is_int(zproto_parse_spans("", 0, &a, &s, &n, err, sizeof(err)), 0, "an empty body is no spans");
	is_int((int)n, 0, "... zero of them");
	zarena_reset(&a);
	return test_done();
}
