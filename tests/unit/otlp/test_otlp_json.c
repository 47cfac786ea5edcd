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
		is_int(dec(cases[i].body), -EINVAL, "%s: refused", cases[i].body);
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

int main(void)
{
	anyvalue();
	fields();
	errors();
	deep();
	tag_orders();
	zarena_reset(&a);
	return test_done();
}
