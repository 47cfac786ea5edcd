// SPDX-License-Identifier: MIT
/*
 * The streaming Zipkin v2 JSON reader (zjson_dec.c) on the cases where a
 * token-at-a-time reader could answer differently from the tree reader
 * it replaced: duplicate keys (the last counts), fields in any order but
 * checked in one, the first bad span named and the rest still counted,
 * syntax errors winning over content, endpoints, annotations and tags.
 */
#include <errno.h>
#include <string.h>

#include "collector/zjson.h"
#include "test.h"

#define IDS "\"traceId\":\"0000000000000001\",\"id\":\"0000000000000002\""

static struct zarena a;
static struct zspan *s;
static size_t n;
static char err[512];

static int rd(const char *body)
{
	zarena_reset(&a);
	err[0] = '\0';
	return zjson_parse_spans(body, strlen(body), &a, &s, &n, err, sizeof(err));
}

static const char *tag(size_t i, const char *key)
{
	for (uint32_t k = 0; k < s[i].ntags; k++)
		if (zs_str_eqc(s[i].tags[k].key, key))
			return s[i].tags[k].value.p;
	return "(none)";
}

int main(void)
{
	static const struct { const char *body, *err; } bad[] = {
		/* fields are checked in one order whatever order they come in */
		{ "[{\"shared\":1,\"name\":2," IDS "}]", "span 0: name: must be a string" },
		{ "[{\"name\":2,\"id\":\"0\",\"traceId\":\"0000000000000001\"}]",
		  "span 0: id: must not be all zeros" },
		{ "[{\"name\":\"x\"}]", "span 0: traceId: missing" },
		{ "[{\"traceId\":\"0000000000000001\"}]", "span 0: id: missing" },
		{ "[{" IDS ",\"tags\":{\"a\":{},\"b\":[]},\"localEndpoint\":{\"port\":70000}}]",
		  "span 0: localEndpoint.port: must be an integer up to 65535" },
		{ "[{" IDS ",\"tags\":{\"a\":{},\"b\":[]}}]",
		  "span 0: tags.a: must be a string (not an object)" },
		{ "[{" IDS ",\"annotations\":[{\"value\":\"v\",\"timestamp\":1},{\"value\":\"w\"}]}]",
		  "span 0: annotations[1].timestamp: missing" },
		{ "[{" IDS ",\"annotations\":[3]}]",
		  "span 0: annotations[0]: must be an object {\"timestamp\":..,\"value\":..}" },
		{ "[{" IDS ",\"localEndpoint\":{\"ipv6\":7,\"serviceName\":[1]}}]",
		  "span 0: localEndpoint.serviceName: must be a string" },
		{ "[{" IDS ",\"remoteEndpoint\":5}]", "span 0: remoteEndpoint: must be an object" },
		{ "[{" IDS ",\"kind\":\"client\"}]",
		  "span 0: kind: must be CLIENT, SERVER, PRODUCER or CONSUMER" },
		{ "[{" IDS ",\"timestamp\":1.5}]", "span 0: timestamp: must be an integer (microseconds)" },
		{ "[{" IDS "},7,{\"x\":1}]", "span 1: span: must be a JSON object" },
		{ "{\"traceId\":1}", "body: must be a JSON array of spans, not an object" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		is_int(rd(bad[i].body), -EINVAL, "%s: refused", bad[i].body);
		is_str(err, bad[i].err, "... named (case %zu)", i);
	}
	/* the spans after a bad one are counted (the drop counter) */
	rd("[{\"x\":1},{" IDS "},{" IDS "}]");
	is_int((int)n, 3, "a refused body's elements are all counted");
	/* a syntax error anywhere wins over a problem of content */
	is_int(rd("[{\"x\":1},{" IDS "},{"), -EINVAL, "a cut body is refused");
	ok(!strncmp(err, "body: invalid JSON at line 1", 28), "... as invalid JSON: %.200s", err);
	is_int((int)n, 0, "... with no count");
	is_int(rd("[{\"traceId\":"), -EINVAL, "a body cut in a span is refused");
	ok(!strncmp(err, "body: invalid JSON at line 1", 28), "... as invalid JSON: %.200s", err);
	is_int(rd("[1]\n[2]"), -EINVAL, "trailing garbage is refused");
	ok(!strncmp(err, "body: invalid JSON at line 2 column", 35), "... naming its line: %.200s", err);
	is_int(rd("7"), -EINVAL, "a scalar body is refused");
	is_int(rd("[\"\\u0000\"]"), -EINVAL, "\\u0000 in a string is refused");
	is_int(rd("[99999999999999999999]"), -EINVAL, "an integer beyond 64 bits is refused");

	/* duplicate keys: the last counts, also for objects and lists */
	is_int(rd("[{\"name\":\"A\",\"traceId\":\"x\"," IDS ",\"name\":\"B\","
		  "\"localEndpoint\":{\"port\":1e9},\"localEndpoint\":{\"serviceName\":\"Svc\","
		  "\"ipv4\":\"::ffff:1.2.3.4\",\"ipv6\":\"::1\",\"port\":-3,\"port\":80,\"x\":[{}]},"
		  "\"tags\":{\"a\":null,\"b\":1.5,\"a\":true,\"c\":-7},"
		  "\"annotations\":[7],\"annotations\":[{\"timestamp\":2,\"value\":\"z\"},"
		  "{\"value\":\"y\",\"timestamp\":1,\"timestamp\":2}],"
		  "\"debug\":true,\"debug\":null,\"shared\":true}]"), 0, "duplicates: read (%.200s)", err);
	is_int((int)n, 1, "... one span");
	if (n == 1) {
		ok(zs_str_eqc(s[0].name, "b"), "... the last name, lower case");
		ok(zs_str_eqc(s[0].local.service, "svc"), "... the last endpoint's service");
		is_str(s[0].local.ipv4, "1.2.3.4", "... an IPv4-mapped ipv4 as the quad");
		is_str(s[0].local.ipv6, "::1", "... and ipv6");
		is_int(s[0].local.port, 80, "... the last port");
		is_int((int)s[0].ntags, 3, "... three tags");
		is_str(tag(0, "a"), "true", "... the last value of a key");
		is_str(tag(0, "b"), "1.5", "... a real as text");
		is_str(tag(0, "c"), "-7", "... an integer as text");
		is_int((int)s[0].nannotations, 2, "... the last annotations");
		ok(s[0].nannotations == 2 && s[0].annotations[0].ts_us == 2 &&
		   zs_str_eqc(s[0].annotations[0].value, "y"), "... sorted, the last timestamp");
		is_int(s[0].debug, 0, "... debug null: absent");
		is_int(s[0].shared, 1, "... shared");
	}
	is_int(rd("[{" IDS ",\"timestamp\":-5,\"duration\":null,\"parentId\":null,\"kind\":null}]"), 0,
	       "null and negative times: read (%.200s)", err);
	ok(n == 1 && !s[0].timestamp_us && !s[0].parent_id && !s[0].kind, "... absent");
	is_int(rd("[]"), 0, "an empty array: read");
	is_int((int)n, 0, "... no spans");
	zarena_reset(&a);
	return test_done();
}
