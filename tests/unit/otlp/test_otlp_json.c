// SPDX-License-Identifier: MIT
/*
 * The streaming OTLP/JSON decoder (otlp_json_dec.c) on the cases where a
 * token-at-a-time reader could answer differently from one that reads
 * the whole document first: duplicate keys, members in any order, the
 * AnyValue precedence, old field names, errors of syntax (with the byte)
 * and of content (with the field's path) and their order, what a
 * lax reader lets through (\v, \u0000, integers beyond 64 bits),
 * nesting limits.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp/otlp.h"
#include "test.h"

#define TID "\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"0000000000000001\""
#define TIMES "\"startTimeUnixNano\":\"1000\",\"endTimeUnixNano\":\"3000\""
#define DOC(spans) "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[" spans "]}]}]}"

static struct zarena a;
static struct otlp_req r;
static struct otlp_result res;
static char err[512];

/* Decode and map body: the decoder's return. */
static int dec(const char *body)
{
	int ret;

	zarena_reset(&a);
	memset(&res, 0, sizeof(res));
	err[0] = '\0';
	ret = otlp_json_decode(body, strlen(body), &a, &r, err, sizeof(err));
	if (!ret)
		ret = otlp_map(&r, &a, &res);
	return ret;
}

/* The value of tag key of the first span kept ("" when none). */
static const char *tag(const char *key)
{
	static char v[256];

	if (!res.nspans)
		return "";
	for (uint32_t i = 0; i < res.spans[0].ntags; i++)
		if (strlen(key) == res.spans[0].tags[i].key.len &&
		    !memcmp(key, res.spans[0].tags[i].key.p, res.spans[0].tags[i].key.len)) {
			snprintf(v, sizeof(v), "%.*s", (int)res.spans[0].tags[i].value.len,
				 res.spans[0].tags[i].value.p);
			return v;
		}
	return "(none)";
}

#define ATTR(v) "\"attributes\":[{\"key\":\"k\",\"value\":" v "}]"

static void anyvalue(void)
{
	static const struct { const char *v, *want; } cases[] = {
		{ "{\"stringValue\":\"s\"}", "s" },
		{ "{\"intValue\":\"-42\"}", "-42" },
		{ "{\"intValue\":7}", "7" },
		{ "{\"doubleValue\":0.25}", "0.25" },
		{ "{\"doubleValue\":3}", "3" },
		{ "{\"boolValue\":false}", "false" },
		{ "{\"bytesValue\":\"AQID\"}", "AQID" },
		{ "{\"arrayValue\":{\"values\":[{\"stringValue\":\"a\"},{\"intValue\":1}]}}", "[\"a\",1]" },
		{ "{\"arrayValue\":{}}", "[]" },
		{ "{\"kvlistValue\":{\"values\":[{\"key\":\"x\",\"value\":{\"boolValue\":true}}]}}",
		  "{\"x\":true}" },
		/* precedence whatever the order: string, bool, int, double, bytes, array, kvlist */
		{ "{\"intValue\":\"5\",\"stringValue\":\"s\"}", "s" },
		{ "{\"arrayValue\":{},\"boolValue\":true}", "true" },
		{ "{\"doubleValue\":1.5,\"intValue\":\"9\"}", "9" },
		{ "{\"stringValue\":7,\"doubleValue\":2.5}", "2.5" },
		/* a duplicate key: the last counts */
		{ "{\"stringValue\":\"first\",\"stringValue\":\"last\"}", "last" },
		{ "{\"stringValue\":\"s\",\"stringValue\":null,\"intValue\":\"3\"}", "3" },
		/* unknown members are skipped, whatever they hold */
		{ "{\"x\":{\"y\":[1,{\"z\":[]}]},\"stringValue\":\"ok\"}", "ok" },
	};
	char body[1024];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(body, sizeof(body),
			 "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{" TID "," TIMES
			 ",\"attributes\":[{\"key\":\"k\",\"value\":%s}]}]}]}]}", cases[i].v);
		is_int(dec(body), 0, "%s: decoded (%.200s)", cases[i].v, err);
		is_str(tag("k"), cases[i].want, "%s -> %s", cases[i].v, cases[i].want);
	}
	/* an intValue that is not an integer: the value is bad, the span rejected */
	is_int(dec(DOC("{" TID "," TIMES "," ATTR("{\"intValue\":1.5,\"stringValue\":3}") "}")), 0,
	       "intValue 1.5: decoded");
	is_int(res.rejected, 1, "... and the span rejected");
	ok(strstr(res.first_error, "attributes[0].value: expected an AnyValue") != NULL,
	   "... with the reason (%.200s)", res.first_error);
}

static void fields(void)
{
	/* members in any order, the span's own fields duplicated: last wins */
	is_int(dec(DOC("{\"name\":\"a\",\"events\":[{\"name\":\"e\",\"timeUnixNano\":\"2000\"}],"
		       TIMES ",\"name\":\"b\"," TID ",\"kind\":\"SPAN_KIND_CLIENT\","
		       "\"status\":{\"message\":\"m\",\"code\":\"STATUS_CODE_ERROR\"}}")), 0,
	       "fields in any order: decoded (%.200s)", err);
	is_int(res.nspans, 1, "... one span");
	is_str(res.nspans ? res.spans[0].name.p : "", "b", "... the last name");
	is_int(res.nspans ? res.spans[0].kind : -1, SPAN_KIND_CLIENT, "... kind by name");
	is_str(tag("error"), "m", "... status ERROR with its message");
	is_int(res.nspans ? (int)res.spans[0].nannotations : -1, 1, "... the event");
	/* old names */
	is_int(dec("{\"resourceSpans\":[{\"instrumentationLibrarySpans\":[{\"instrumentationLibrary\":"
		   "{\"name\":\"old\"},\"spans\":[{" TID "," TIMES "}]}]}]}"), 0,
	       "instrumentationLibrarySpans: decoded (%.200s)", err);
	is_str(tag("otel.scope.name"), "old", "... its scope name");
	is_int(dec("{\"resourceSpans\":[{\"scopeSpans\":[{\"instrumentationLibrary\":{\"name\":\"old\"},"
		   "\"scope\":{\"name\":\"new\"},\"spans\":[{" TID "," TIMES "}]}]}]}"), 0,
	       "scope and instrumentationLibrary: decoded");
	is_str(tag("otel.scope.name"), "new", "... scope wins");
	/* a span that is not an object is rejected alone */
	is_int(dec(DOC("3,{" TID "," TIMES "}")), 0, "a span that is a number: decoded");
	is_int(res.nspans, 1, "... the other kept");
	is_int(res.rejected, 1, "... it rejected");
	ok(strstr(res.first_error, "spans[0].expected a span object") != NULL, "... why (%.200s)",
	   res.first_error);
	/* resourceSpans given twice: the last one */
	is_int(dec("{\"resourceSpans\":7,\"resourceSpans\":[]}"), 0, "resourceSpans twice: the last");
}

static void errors(void)
{
	static const struct { const char *body, *err; } cases[] = {
		{ "{\"resourceSpans\": [", "body: byte 19: premature EOF" },
		{ "{\"resourceSpans\": [}", "body: byte 20: " },
		{ "", "body: byte 0: " },
		{ "[]", "resourceSpans: expected {\"resourceSpans\": [...]}" },
		{ "{\"resourceSpans\":{}}", "resourceSpans: expected" },
		{ "{\"resourceSpans\":[]} x", "body: byte " },
		{ "{\"resourceSpans\":[]}\v", "body: byte 20: invalid character 0x0b" },
		/* an unfinished token after the top-level object (yajl waited for
		 * more input and let it pass) */
		{ "{\"resourceSpans\":[]}\"instrumentationLibrar{}",
		  "body: byte 20: trailing garbage after the top-level object" },
		{ "{\"resourceSpans\":[]} \n\"x", "body: byte 22: trailing garbage" },
		/* an overlong form (yajl, the reader before json_tok, let 0xc1 0x81 through) */
		{ "{\"resourceSpans\":[{\"x\":\"\xc1\x81\"}]}",
		  "body: byte 24: invalid UTF-8 (0xc1)" },
		{ "{\"resourceSpans\":[{\"x\":\"\xed\xa0\x80\"}]}", "body: byte 24: invalid UTF-8" },
		{ "{\"resourceSpans\":[{\"x\":\"a\\u0000b\"}]}", "\\u0000 is not allowed" },
		{ "{\"resourceSpans\":[{\"x\":99999999999999999999}]}", "integer too big" },
		{ "{\"resourceSpans\":[{\"x\":1e999}]}", "real number overflow" },
		{ "{\"resourceSpans\":[{\"x\":\"\xff\"}]}", "body: byte " },
		{ "{\"resourceSpans\":[{\"resource\":{\"attributes\":5}}]}",
		  "resourceSpans[0].resource.attributes: expected an array of {key, value}" },
		{ "{\"resourceSpans\":[{},{\"scopeSpans\":{}}]}",
		  "resourceSpans[1].scopeSpans: expected an array" },
		{ "{\"resourceSpans\":[{\"scopeSpans\":[{},{\"spans\":3}]}]}",
		  "resourceSpans[0].scopeSpans[1].spans: expected an array" },
		/* in the resource spans' order, the resource's attributes first */
		{ "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":3}],\"resource\":{\"attributes\":[{}]}},"
		  "{\"scopeSpans\":7}]}",
		  "resourceSpans[0].resource.attributes: expected" },
		/* a syntax error after a content error: the syntax error */
		{ "{\"resourceSpans\":[{\"scopeSpans\":7}],}", "body: byte " },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char shown[80];

		/* the body as one TAP line: its control bytes as '?' */
		snprintf(shown, sizeof(shown), "%s", cases[i].body);
		for (char *q = shown; *q; q++)
			if ((unsigned char)*q < 0x20)
				*q = '?';
		is_int(dec(cases[i].body), -EINVAL, "%s: refused", shown);
		ok(strstr(err, cases[i].err) != NULL, "... with \"%s\" (%.200s)", cases[i].err, err);
	}
}

static void deep(void)
{
	char body[70000];
	size_t n = 0;

	/* AnyValues deeper than OTLP_MAX_DEPTH: the value bad, the span rejected */
	n += (size_t)snprintf(body + n, sizeof(body) - n, "%s",
			      "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{" TID "," TIMES
			      ",\"attributes\":[{\"key\":\"k\",\"value\":");
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "{\"arrayValue\":{\"values\":[");
	n += (size_t)snprintf(body + n, sizeof(body) - n, "{\"stringValue\":\"x\"}");
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "]}}");
	snprintf(body + n, sizeof(body) - n, "}]}]}]}]}");
	is_int(dec(body), 0, "AnyValues 40 deep: decoded (%.200s)", err);
	is_int(res.rejected, 1, "... the span rejected");
	/* JSON nested past 2048: refused as a body */
	n = 0;
	for (int i = 0; i < 3000; i++)
		body[n++] = '[';
	body[n] = '\0';
	is_int(dec(body), -EINVAL, "3000 nested arrays: refused");
	ok(strstr(err, "nested deeper than 2048") != NULL, "... naming the limit (%.200s)", err);
}

/* One span of tag_orders(): keys ks[0..n) with values "v<j>_<i>" and a
 * status code (2 with a message "m<j>" when j is odd). */
static void order_span(FILE *f, const char *const *ks, int n, int j, int code)
{
	fprintf(f, "{" TID "," TIMES ",\"attributes\":[");
	for (int i = 0; i < n; i++)
		fprintf(f, "%s{\"key\":\"%s\",\"value\":{\"stringValue\":\"v%d_%d\"}}", i ? "," : "",
			ks[i], j, i);
	fprintf(f, "],\"status\":{\"code\":%d%s}}", code, code == 2 && j % 2 ? ",\"message\":\"m\"" : "");
}

/* The tags of s and t are the same, in the same order. */
static int same_tags(const struct zspan *s, const struct zspan *t)
{
	if (s->ntags != t->ntags || s->error != t->error)
		return 0;
	for (uint32_t i = 0; i < s->ntags; i++)
		if (s->tags[i].key.len != t->tags[i].key.len ||
		    s->tags[i].value.len != t->tags[i].value.len ||
		    memcmp(s->tags[i].key.p, t->tags[i].key.p, s->tags[i].key.len) ||
		    memcmp(s->tags[i].value.p, t->tags[i].value.p, s->tags[i].value.len))
			return 0;
	return 1;
}

#define ORD_SPANS 40

struct ord_req {
	const char *ks[ORD_SPANS][16];
	int nk[ORD_SPANS], code[ORD_SPANS];
};

/* Spans [j0, j0 + n) of q in one request, decoded and mapped into *out
 * (in *za): 0, or -1 when it does not map to n spans. */
static int map_spans(const struct ord_req *q, int j0, int n, struct zarena *za,
		     struct otlp_result *out)
{
	char *doc = NULL, e[512];
	size_t len = 0;
	FILE *f = open_memstream(&doc, &len);
	struct otlp_req rq;
	int ret;

	fprintf(f, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[");
	for (int j = j0; j < j0 + n; j++) {
		if (j > j0)
			fputc(',', f);
		order_span(f, q->ks[j], q->nk[j], j, q->code[j]);
	}
	fprintf(f, "]}]}]}");
	fclose(f);
	ret = otlp_json_decode(doc, len, za, &rq, e, sizeof(e)) || otlp_map(&rq, za, out) ||
	      out->nspans != (size_t)n ? -1 : 0;
	free(doc);
	return ret;
}

/*
 * otlp_map() keeps the order of the last sets of keys it normalized and
 * gives it to a span with the same keys: each span of a request mapped
 * among the others has the tags it has mapped alone.  Spans that repeat
 * the keys before them (or the set before that one), keys repeated in a
 * span (the last value wins), keys that the status adds too ("error",
 * "otel.status_code"), 1-18 tags (the kept orders hold up to 16).
 */
static void tag_orders(void)
{
	static const char *const pool[] = { "a", "b", "http.method", "http.methodx", "http.url",
					    "error", "otel.status_code", "zz", "http.method",
					    "net.peer.port" };
	unsigned seed = 26;
	int bad = 0, round, spans = 0;

	for (round = 0; round < 100 && !bad; round++) {
		struct ord_req q;
		struct zarena all = { 0 };
		struct otlp_result rall;

		for (int j = 0; j < ORD_SPANS; j++) {
			int pick = j >= 2 ? rand_r(&seed) % 4 : 3;

			if (pick < 2) {         /* the keys of the span before (or the one before it) */
				q.nk[j] = q.nk[j - 1 - pick];
				memcpy(q.ks[j], q.ks[j - 1 - pick], sizeof(q.ks[j]));
			} else {
				q.nk[j] = 1 + rand_r(&seed) % 16;
				for (int i = 0; i < q.nk[j]; i++)
					q.ks[j][i] = pool[rand_r(&seed) % 10];
			}
			q.code[j] = rand_r(&seed) % 3;
		}
		bad = map_spans(&q, 0, ORD_SPANS, &all, &rall);
		for (int j = 0; j < ORD_SPANS && !bad; j++) {
			struct zarena a1 = { 0 };
			struct otlp_result res1;

			bad = map_spans(&q, j, 1, &a1, &res1) || !same_tags(&rall.spans[j], &res1.spans[0]);
			spans++;
			zarena_reset(&a1);
		}
		zarena_reset(&all);
	}
	ok(!bad, "%d spans mapped among %d have the tags each has alone%s", spans, ORD_SPANS,
	   bad ? " (the last one differs)" : "");
}

/*
 * otlp_dec_u64/otlp_dec_i64 (the string-encoded 64-bit numbers): the edges
 * by their known values, then 20,000 strings of digits, spaces and signs
 * against the strtoull/strtoll reading they replaced (the old u64_of's
 * and i64_of's rules), then through the decoder.
 */
/* s for a test's line: control bytes as '.' (a line of TAP). */
static const char *shown(const char *s)
{
	static char b[80];
	size_t n = 0;

	for (; *s && n < sizeof(b) - 1; s++)
		b[n++] = (unsigned char)*s < 0x20 ? '.' : *s;
	b[n] = '\0';
	return b;
}

static void numbers(void)
{
	static const struct { const char *s; int ok; uint64_t v; } u[] = {
		{ "0", 1, 0 },
		{ "1", 1, 1 },
		{ "18446744073709551615", 1, UINT64_MAX },
		{ "18446744073709551616", 0, 0 },
		{ "18446744073709551620", 0, 0 },
		{ "99999999999999999999", 0, 0 },
		{ "1844674407370955161500", 0, 0 },
		{ "9999999999999999999", 1, 9999999999999999999ull },
		{ "10000000000000000000", 1, 10000000000000000000ull },
		{ "000000000000000000000000000000018446744073709551615", 1, UINT64_MAX },
		{ "00042", 1, 42 },
		{ "1795600000000000000", 1, 1795600000000000000ull },
		{ "+7", 1, 7 },
		{ " 7", 1, 7 },
		{ "\t\n\v\f\r 7", 1, 7 },
		{ " -5", 1, (uint64_t)0 - 5 },          /* strtoull's negation */
		{ " -18446744073709551615", 1, 1 },
		{ " -18446744073709551616", 0, 0 },
		{ "-5", 0, 0 },
		{ "-0", 0, 0 },
		{ "", 0, 0 },
		{ " ", 0, 0 },
		{ "+", 0, 0 },
		{ " -", 0, 0 },
		{ "++1", 0, 0 },
		{ "+-1", 0, 0 },
		{ "7 ", 0, 0 },
		{ "1a", 0, 0 },
		{ "a1", 0, 0 },
		{ "0x10", 0, 0 },
		{ "1.0", 0, 0 },
		{ "1e3", 0, 0 },
		{ "12:", 0, 0 },
		{ "12/", 0, 0 },
		/* the bytes next to the digits, in the 8-digit blocks */
		{ "1234567:", 0, 0 },
		{ "/2345678", 0, 0 },
		{ "12345678901234?6", 0, 0 },
		{ "1795600000;00000000", 0, 0 },
		{ "17956000\x10" "000000000", 0, 0 },
		{ "17956000\xb0" "000000000", 0, 0 },
		{ "\xd9\xa1", 0, 0 },                   /* an Arabic-Indic digit one */
		/* 63 bytes: read; 64: refused, whatever they are */
		{ "000000000000000000000000000000000000000000000000000000000000001", 1, 1 },
		{ "0000000000000000000000000000000000000000000000000000000000000001", 0, 0 },
	};
	static const struct { const char *s; int ok; int64_t v; } i[] = {
		{ "0", 1, 0 },
		{ "-0", 1, 0 },
		{ "9223372036854775807", 1, INT64_MAX },
		{ "9223372036854775808", 0, 0 },
		{ "-9223372036854775808", 1, INT64_MIN },
		{ "-9223372036854775809", 0, 0 },
		{ "18446744073709551615", 0, 0 },
		{ "18446744073709551616", 0, 0 },
		{ "-42", 1, -42 },
		{ "+42", 1, 42 },
		{ " \t-0042", 1, -42 },
		{ "0000000000000000000009223372036854775807", 1, INT64_MAX },
		{ "", 0, 0 },
		{ "-", 0, 0 },
		{ "--1", 0, 0 },
		{ "1-", 0, 0 },
		{ "4 2", 0, 0 },
		{ "x", 0, 0 },
		{ "000000000000000000000000000000000000000000000000000000000000042", 1, 42 },
		{ "-000000000000000000000000000000000000000000000000000000000000042", 0, 0 },
	};
	int bad = 0;

	/* both tables in one loop: u64's first, then i64's (its value's bits) */
	size_t nu = sizeof(u) / sizeof(u[0]), ni = sizeof(i) / sizeof(i[0]);

	for (size_t k = 0; k < nu + ni; k++) {
		int is_u = k < nu, want_ok = is_u ? u[k].ok : i[k - nu].ok;
		const char *s = is_u ? u[k].s : i[k - nu].s;
		uint64_t want = is_u ? u[k].v : (uint64_t)i[k - nu].v, v = 12345;
		int64_t w = 12345;
		int ret = is_u ? otlp_dec_u64(s, strlen(s), &v) : otlp_dec_i64(s, strlen(s), &w);

		if (!is_u)
			v = (uint64_t)w;
		if (want_ok)
			ok(!ret && v == want, "%s \"%s\": %s%" PRIu64 " (%d)", is_u ? "u64" : "i64", shown(s),
			   !is_u && w < 0 ? "-" : "", !is_u && w < 0 ? 0 - v : v, ret);
		else
			ok(ret == -EINVAL && v == 12345, "%s \"%s\" refused (%d), out untouched",
			   is_u ? "u64" : "i64", shown(s), ret);
	}
	/* not NUL-terminated: the length bounds the reading */
	{
		uint64_t v = 0;
		int64_t w = 0;

		ok(!otlp_dec_u64("123456", 3, &v) && v == 123, "u64 of \"123\" out of \"123456\"");
		ok(!otlp_dec_i64("-12x", 3, &w) && w == -12, "i64 of \"-12\" out of \"-12x\"");
	}
	/* the strtoull/strtoll readings they replaced, on random strings (every
	 * other one of digits alone: the 8-digits-at-a-time path) */
	for (int k = 0; k < 20000; k++) {
		static const char alpha[] = "0123456789999999 +-\tx:;?/";
		char s[72];
		size_t n = test_xorshift() % 8 ? test_xorshift() % 24 : test_xorshift() % 70;
		uint64_t v = 1, rv;
		int64_t w = 1, rw;
		char *end;
		int ru, ri;

		for (size_t c = 0; c < n; c++)
			s[c] = k % 2 || test_xorshift() % 4 ? (char)('0' + test_xorshift() % 10) :
						    alpha[test_xorshift() % (sizeof(alpha) - 1)];
		s[n] = '\0';
		errno = 0;
		rv = strtoull(s, &end, 10);
		ru = n && n < 64 && !*end && !errno && *s != '-';
		errno = 0;
		rw = strtoll(s, &end, 10);
		ri = n && n < 64 && !*end && !errno;
		int gu = otlp_dec_u64(s, n, &v) == 0, gi = otlp_dec_i64(s, n, &w) == 0;

		if (gu != ru || (ru && v != rv) || gi != ri || (ri && w != rw)) {
			if (!bad++)
				diag("\"%s\": u64 %d %" PRIu64 " (strtoull %d %" PRIu64 "), i64 %d %" PRId64
				     " (strtoll %d %" PRId64 ")", shown(s), gu, v, ru, rv, gi, w, ri, rw);
		}
	}
	ok(!bad, "20000 random strings read as strtoull/strtoll read them (%d differ)", bad);

	/* through the decoder: the times and an intValue */
	is_int(dec(DOC("{" TID ",\"startTimeUnixNano\":\"18446744073709551615\","
		       "\"endTimeUnixNano\":\"18446744073709551615\"," ATTR("{\"intValue\":\"-9223372036854775808\"}") "}")),
	       0, "2^64 - 1 end: decoded");
	ok(res.nspans == 1 && res.spans[0].timestamp_us == 18446744073709551ull,
	   "2^64 - 1 ns: kept, at %" PRIu64 " us", res.nspans ? res.spans[0].timestamp_us : 0);
	is_str(tag("k"), "-9223372036854775808", "intValue -2^63 as a string");
	is_int(dec(DOC("{" TID ",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"18446744073709551616\"}")),
	       0, "2^64 end: decoded");
	ok(res.nspans == 0 && res.rejected == 1 && strstr(res.first_error, "endTimeUnixNano"),
	   "2^64 end: the span rejected (%.200s)", res.first_error);
	is_int(dec(DOC("{" TID ",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"-3\"}")),
	       0, "-3 end: decoded");
	ok(res.nspans == 0 && res.rejected == 1, "-3 end: the span rejected");
	is_int(dec(DOC("{" TID ",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"\"}")),
	       0, "empty end: decoded");
	ok(res.nspans == 0 && res.rejected == 1, "empty end: the span rejected");
	is_int(dec(DOC("{" TID "," TIMES "," ATTR("{\"intValue\":\"9223372036854775808\"}") "}")),
	       0, "intValue 2^63: decoded");
	ok(res.nspans == 0 && res.rejected == 1, "intValue 2^63: the span rejected (a bad value)");
}

/* A span's name and a string attribute of every length around the
 * decoder's string blocks (4096 bytes, strings of 1024 and more alone):
 * each one read back whole, next to the others. */
static void strings(void)
{
	enum { N = 300 };
	char *doc = NULL, *want = malloc(6000);
	size_t dlen = 0;
	FILE *f = open_memstream(&doc, &dlen);
	int bad = 0;

	fputs("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[", f);
	for (int i = 0; i < N; i++) {
		int nl = i == 7 ? 5000 : i == 8 ? 1023 : i == 9 ? 1024 : (i * 7) % 120 + 1;
		int vl = (i * 13) % 200;

		fprintf(f, "%s{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"%016x\","
			TIMES ",\"name\":\"", i ? "," : "", i + 1);
		for (int c = 0; c < nl; c++)
			fputc('a' + (i + c) % 26, f);
		fputs(i % 10 == 3 ? "\\n\",\"attributes\":[{\"key\":\"k\",\"value\":{\"stringValue\":\"" :
			 "\",\"attributes\":[{\"key\":\"k\",\"value\":{\"stringValue\":\"", f);
		for (int c = 0; c < vl; c++)
			fputc('A' + (i + c) % 26, f);
		fputs("\"}}]}", f);
	}
	fputs("]}]}]}", f);
	fclose(f);
	is_int(dec(doc), 0, "%d spans of names and values of 0 to 5000 bytes: decoded", N);
	ok(res.nspans == N, "... %zu spans kept", res.nspans);
	for (size_t i = 0; i < res.nspans && i < N; i++) {
		const struct zspan *z = &res.spans[i];
		int nl = i == 7 ? 5000 : i == 8 ? 1023 : i == 9 ? 1024 : ((int)i * 7) % 120 + 1;
		int vl = ((int)i * 13) % 200, n = 0;

		if (z->id != i + 1) {
			bad++;
			continue;
		}
		for (int c = 0; c < nl; c++)
			want[n++] = (char)('a' + ((int)i + c) % 26);
		if (i % 10 == 3)
			want[n++] = '\n';
		if (z->name.len != (size_t)n || memcmp(z->name.p, want, (size_t)n))
			bad++;
		for (int c = 0; c < vl; c++)
			want[c] = (char)('A' + ((int)i + c) % 26);
		for (uint32_t t = 0; t < z->ntags; t++)
			if (z->tags[t].key.len == 1 && z->tags[t].key.p[0] == 'k' &&
			    (z->tags[t].value.len != (size_t)vl || memcmp(z->tags[t].value.p, want, (size_t)vl)))
				bad++;
	}
	ok(!bad, "... every name and value read back whole (%d differ)", bad);
	free(doc);
	free(want);
}

int main(void)
{
	numbers();
	strings();
	anyvalue();
	fields();
	errors();
	deep();
	tag_orders();
	zarena_reset(&a);
	return test_done();
}
