// SPDX-License-Identifier: MIT
/*
 * --export's OTLP encoding straight from the span model
 * (otlp_req_from_zspans(), then otlp_json_encode() / otlp_pb_encode())
 * against the path it replaced (tests/unit/otlp/otlp_export_ref.h: each
 * span as Zipkin JSON, an OTLP/JSON tree with jansson, for protobuf that
 * tree's text decoded again): the same bytes, protobuf and JSON, on
 * hand-made spans (64-bit and 128-bit trace ids, every kind, no name,
 * services interleaved, an error tag, annotations, UTF-8 and invalid
 * UTF-8 text) and on 300 random ones.  Where the JSON is allowed to
 * differ it is the same JSON value: control characters are escaped by
 * the one JSON string writer (\u000a where jansson wrote \n), and a span
 * with no timestamp starts at "0" (jansson's path wrote "0000").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "collector/zjson.h"
#include "otlp_export_ref.h"
#include "test.h"

static struct zarena arena;

static struct zs_str S(const char *s)
{
	return (struct zs_str){ s, (uint32_t)strlen(s) };
}

static char *old_json(const struct zspan *s, size_t n)
{
	json_t *z = zjson_spans(s, n), *doc = ref_from_zspans_json(z);
	char *text = json_dumps(doc, JSON_COMPACT);

	json_decref(z);
	json_decref(doc);
	return text;
}

static int old_pb(const struct zspan *s, size_t n, void **out, size_t *len)
{
	json_t *z = zjson_spans(s, n);
	int ret = ref_from_zspans_pb(z, out, len);

	json_decref(z);
	return ret;
}

/* The old JSON with its "0000" times (a span without timestamp) as "0". */
static void zero_times(char *j)
{
	for (char *p; (p = strstr(j, "\"0000\""));)
		memmove(p + 2, p + 5, strlen(p + 5) + 1);
}

/* 1: the same bytes, 2: the same JSON value (3: once the old "0000"
 * times read "0"), 0: different. */
static int compare(const char *what, const struct zspan *s, size_t n)
{
	struct zarena a = { 0 };
	struct otlp_req r;
	char *oj = old_json(s, n), *nj = NULL;
	void *op = NULL, *np = NULL;
	size_t ol = 0, nl = 0, jl = 0;
	int same = 0, pb_same;

	if (otlp_req_from_zspans(s, n, &a, &r) || otlp_json_encode(&r, &nj, &jl) ||
	    otlp_pb_encode(&r, &np, &nl) || old_pb(s, n, &op, &ol) || !oj) {
		diag("%s: an encoder failed", what);
		goto out;
	}
	pb_same = ol == nl && !memcmp(op, np, nl);
	if (!pb_same)
		diag("%s: protobuf differs (%zu vs %zu bytes)", what, ol, nl);
	if (jl == strlen(nj) && !strcmp(oj, nj)) {
		same = pb_same ? 1 : 0;
	} else {
		json_t *x = json_loads(oj, 0, NULL), *y = json_loads(nj, 0, NULL);

		same = pb_same && x && y && json_equal(x, y) ? 2 : 0;
		if (!same && pb_same && strstr(oj, "\"0000\"")) {
			zero_times(oj);
			same = !strcmp(oj, nj) ? 3 : 0;
		}
		if (!same)
			diag("%s:\n#  old %s\n#  new %s", what, oj, nj);
		json_decref(x);
		json_decref(y);
	}
out:
	free(oj);
	free(nj);
	free(op);
	free(np);
	zarena_reset(&a);
	return same;
}

static struct zspan span(uint64_t hi, uint64_t lo, uint64_t id, const char *svc, const char *name)
{
	struct zspan z = { .trace_hi = hi, .trace_lo = lo, .id = id,
			   .timestamp_us = 1700000000000000ull + id, .duration_us = 5000 };

	z.local.service = S(svc);
	z.name = S(name);
	return z;
}

static void hand_made(void)
{
	static struct zs_tag tags1[] = { { { "error", 5 }, { "boom", 4 } },
					 { { "http.path", 9 }, { "/x", 2 } } };
	static struct zs_annotation ann1[] = { { 1700000000000010ull, { "ws", 2 } },
					       { 1700000000000020ull, { "wr", 2 } } };
	static struct zs_tag tags_utf8[] = {
		{ { "bad", 3 }, { "\xff\xfe" "ab", 4 } },
		{ { "caf\xc3\xa9", 5 }, { "caf\xc3\xa9-\xe2\x9c\x93", 9 } },
		{ { "error", 5 }, { "", 0 } },
		{ { "q", 1 }, { "\"quoted\" \\ /", 12 } },
	};
	static struct zs_tag tags_ctl[] = { { { "ctl", 3 }, { "a\nb\tc\x01", 6 } } };
	struct zspan s[8];

	s[0] = span(0, 0xe01, 0xa1, "web", "get");
	s[0].kind = SPAN_KIND_SERVER;
	s[0].tags = tags1;
	s[0].ntags = 2;
	s[0].annotations = ann1;
	s[0].nannotations = 2;
	s[1] = span(0x5b8efff798038103ull, 0xd269b633813fc60cull, 0xa2, "web", "map");
	s[1].kind = SPAN_KIND_CLIENT;
	s[1].parent_id = 0xa1;
	s[1].remote.service = S("mapperd");
	s[2] = span(0, 0xe01, 0xa3, "", "");               /* unknown_service, no name */
	s[2].debug = s[2].shared = 1;
	s[3] = span(0, 0xe01, 0xa4, "db", "put");
	s[3].kind = SPAN_KIND_PRODUCER;
	s[4] = span(0, 0xe01, 0xa5, "web", "caf\xc3\xa9");
	s[4].kind = SPAN_KIND_CONSUMER;
	s[4].tags = tags_utf8;
	s[4].ntags = 4;
	s[5] = span(0, 0xe01, 0xa6, "\xe2\x9c\x93svc", "n\xff");
	is_int(compare("two spans of api_export.sh", s, 2), 1, "api_export.sh's spans: same bytes");
	is_int(compare("services interleaved, every kind, UTF-8", s, 6), 1,
	       "6 spans, 4 services interleaved, every kind, no name, UTF-8 and invalid UTF-8: same bytes");
	s[6] = span(0, 0xe02, 0xb1, "web", "ctl");
	s[6].tags = tags_ctl;
	s[6].ntags = 1;
	is_int(compare("control characters", s + 6, 1), 2,
	       "control characters: the same JSON value, protobuf the same bytes");
	s[7] = span(0, 0xe02, 0xb2, "web", "notime");
	s[7].timestamp_us = s[7].duration_us = 0;
	is_int(compare("no timestamp", s + 7, 1), 3,
	       "no timestamp: the same JSON but times \"0\" (was \"0000\"), protobuf the same bytes");
}

/* A random printable string of UTF-8 (ASCII, 2- and 3-byte characters). */
static struct zs_str rnd_str(int maxlen)
{
	static const char *const bits[] = { "a", "b", "z", "0", "-", ".", "/", " ", "\"",
					    "\\", "\xc3\xa9", "\xe2\x9c\x93", "_" };
	int n = (int)(test_xorshift() % (unsigned)(maxlen + 1));
	char *p = zarena_alloc(&arena, (size_t)n * 3 + 1), *q = p;

	for (int i = 0; i < n; i++) {
		const char *b = bits[test_xorshift() % (sizeof(bits) / sizeof(bits[0]))];

		memcpy(q, b, strlen(b));
		q += strlen(b);
	}
	return (struct zs_str){ p, (uint32_t)(q - p) };
}

static void random_spans(void)
{
	static const char *const svcs[] = { "web", "db", "", "cache", "caf\xc3\xa9" };
	enum { N = 300 };
	struct zspan *s = zarena_zalloc(&arena, sizeof(*s) * N);
	int bad = 0;

	for (int i = 0; i < N; i++) {
		struct zspan *z = &s[i];
		uint32_t nt = (uint32_t)(test_xorshift() % 6);

		z->trace_hi = test_xorshift() % 2 ? test_xorshift() : 0;
		z->trace_lo = test_xorshift() | 1;
		z->id = test_xorshift() | 1;
		z->parent_id = test_xorshift() % 3 ? test_xorshift() | 1 : 0;
		z->kind = (uint8_t)(test_xorshift() % SPAN_KIND_MAX);
		z->timestamp_us = 1700000000000000ull + test_xorshift() % 1000000000ull;
		z->duration_us = test_xorshift() % 3 ? test_xorshift() % 100000000ull : 0;
		z->local.service = S(svcs[test_xorshift() % 5]);
		z->name = rnd_str(12);
		z->tags = zarena_alloc(&arena, sizeof(*z->tags) * (nt + 1));
		for (uint32_t t = 0; t < nt; t++) {
			char *k = zarena_alloc(&arena, 16);

			/* distinct keys, one of them "error" now and then */
			snprintf(k, 16, t == 0 && test_xorshift() % 4 == 0 ? "error" : "k%u", t);
			z->tags[z->ntags].key = S(k);
			z->tags[z->ntags++].value = rnd_str(20);
		}
		z->nannotations = (uint32_t)(test_xorshift() % 4);
		z->annotations = zarena_alloc(&arena, sizeof(*z->annotations) * (z->nannotations + 1));
		for (uint32_t k = 0; k < z->nannotations; k++) {
			z->annotations[k].ts_us = z->timestamp_us + k;
			z->annotations[k].value = rnd_str(10);
		}
	}
	for (int i = 0; i < N; i += 50)
		if (compare("random spans", s + i, 50) != 1)
			bad++;
	is_int(bad, 0, "300 random spans in batches of 50: the same bytes, JSON and protobuf");
}

static void dup(void)
{
	static struct zs_tag tags[] = { { { "k", 1 }, { "v", 1 } } };
	static struct zs_annotation ann[] = { { 5, { "ev", 2 } } };
	struct zspan z = span(1, 2, 3, "web", "get"), *d;

	z.tags = tags;
	z.ntags = 1;
	z.annotations = ann;
	z.nannotations = 1;
	z.remote.service = S("db");
	d = zspan_dup(&z);
	ok(d && d->tags != z.tags && d->name.p != z.name.p && d->annotations != z.annotations,
	   "zspan_dup: its own arrays and strings");
	ok(d && zs_str_eq(d->name, z.name) && zs_str_eq(d->local.service, z.local.service) &&
	   zs_str_eq(d->remote.service, z.remote.service) && zs_str_eq(d->tags[0].value, S("v")) &&
	   zs_str_eq(d->annotations[0].value, S("ev")) && d->annotations[0].ts_us == 5,
	   "zspan_dup: the same span");
	is_int(compare("a copy", d, 1), 1, "a copy encodes as the original");
	free(d);
}

int main(void)
{
	hand_made();
	random_spans();
	dup();
	zarena_reset(&arena);
	return test_done();
}
