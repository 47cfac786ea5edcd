// SPDX-License-Identifier: MIT
/*
 * The OTLP protobuf decoder (otlp_pb_dec.c) and the shared mapping
 * (otlp_map.c) against hostile and hand-encoded protobuf: truncated
 * messages, wrong wire types, huge lengths, groups, AnyValues nested far
 * past the limit (which would overflow protobuf-c's recursion), bad ids,
 * invalid UTF-8; protobuf-c's rules (unknown fields, any wire type for a
 * bool, merges of a value seen twice, 5-byte keys and lengths); and a
 * valid span mapped field by field.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp/otlp.h"
#include "test.h"

struct buf {
	uint8_t *p;
	size_t len;
};

static void put(struct buf *b, const void *p, size_t n)
{
	b->p = realloc(b->p, b->len + n);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void varint(struct buf *b, uint64_t v)
{
	uint8_t c;

	do {
		c = v & 0x7f;
		v >>= 7;
		if (v)
			c |= 0x80;
		put(b, &c, 1);
	} while (v);
}

/* Field f, length-delimited, with the bytes of inner. */
static void field(struct buf *b, unsigned f, const void *p, size_t n)
{
	varint(b, (uint64_t)f << 3 | 2);
	varint(b, n);
	put(b, p, n);
}

static void fixed64(struct buf *b, unsigned f, uint64_t v)
{
	varint(b, (uint64_t)f << 3 | 1);
	put(b, &v, 8);  /* little-endian host */
}

/* b = field f wrapping b. */
static void wrap(struct buf *b, unsigned f)
{
	struct buf o = { 0 };

	field(&o, f, b->p, b->len);
	free(b->p);
	*b = o;
}

/* A request of one span: ids of the given lengths, name, times, plus
 * attrs (the bytes of one KeyValue, or NULL). */
static struct buf request(size_t tlen, const char *name, uint64_t start, uint64_t end,
			  const struct buf *kv)
{
	static const uint8_t id[16] = { 0x5b, 0x8e, 0xff, 0xf7, 0x98, 3, 0x81, 3,
					0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c };
	struct buf s = { 0 }, res = { 0 }, kvs = { 0 };

	field(&s, 1, id, tlen);
	field(&s, 2, id + 8, 8);
	field(&s, 5, name, strlen(name));
	varint(&s, 6 << 3);
	varint(&s, 3);                          /* kind CLIENT */
	fixed64(&s, 7, start);
	fixed64(&s, 8, end);
	if (kv)
		field(&s, 9, kv->p, kv->len);
	wrap(&s, 2);                            /* ScopeSpans.spans */
	field(&kvs, 1, "service.name", 12);
	{
		struct buf v = { 0 };

		field(&v, 1, "Shop", 4);
		field(&kvs, 2, v.p, v.len);
		free(v.p);
	}
	field(&res, 1, kvs.p, kvs.len);          /* Resource.attributes */
	{
		struct buf rs = { 0 };

		field(&rs, 1, res.p, res.len);
		field(&rs, 2, s.p, s.len);
		free(s.p);
		s = rs;
	}
	wrap(&s, 1);                            /* Request.resource_spans */
	free(res.p);
	free(kvs.p);
	return s;
}

static int decode_map(const struct buf *b, struct zarena *a, struct otlp_result *res,
		      char *err, size_t errlen)
{
	struct otlp_req r;
	int ret = otlp_pb_decode(b->p ? (const void *)b->p : "", b->len, a, &r, err, errlen);

	return ret ? ret : otlp_map(&r, a, res);
}

static void hostile(void)
{
	static const struct {
		const char *what;
		const char *bytes;
		size_t len;
		const char *err;
	} cases[] = {
		{ "truncated message", "\x0a\x05\x0a", 3, "runs past the end" },
		{ "huge length", "\x0a\xff\xff\xff\xff\x0f", 6, "runs past the end" },
		{ "length past 2^64", "\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, "runs past" },
		{ "truncated key", "\x80", 1, "truncated field key" },
		{ "group wire type", "\x0b\x0c", 2, "wire type 3" },
		{ "wire type 7", "\x0f", 1, "wire type 7" },
		{ "a varint where a message is", "\x08\x01", 2, "not a protobuf" },
		{ "a fixed32 where a message is", "\x0d\x01\x02\x03\x04", 5, "not a protobuf" },
		{ "a truncated fixed64", "\x0a\x03\x12\x01\x39", 5, "runs past" },
	};
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct buf b = { (uint8_t *)cases[i].bytes, cases[i].len };
		struct zarena a = { 0 };
		struct otlp_result res;

		err[0] = '\0';
		is_int(decode_map(&b, &a, &res, err, sizeof(err)), -EINVAL, "%s: refused",
		       cases[i].what);
		ok(strstr(err, cases[i].err) != NULL, "%s: the reason (%.200s)", cases[i].what, err);
		zarena_reset(&a);
	}
}

/* AnyValue { array_value { values: AnyValue ... } } depth levels deep. */
static void deep(int depth, int want_ok)
{
	struct buf v = { 0 }, kv = { 0 }, b;
	struct zarena a = { 0 };
	struct otlp_result res;
	char err[512] = "";
	int ret;

	field(&v, 1, "x", 1);
	for (int i = 1; i < depth; i++) {
		wrap(&v, 1);                    /* ArrayValue.values */
		wrap(&v, 5);                    /* AnyValue.array_value */
	}
	field(&kv, 1, "deep", 4);
	field(&kv, 2, v.p, v.len);
	b = request(16, "deep", 1000, 2000, &kv);
	ret = decode_map(&b, &a, &res, err, sizeof(err));
	if (want_ok) {
		is_int(ret, 0, "AnyValues nested %d deep: decoded", depth);
		is_int(res.nspans, 1, "... and the span kept");
	} else {
		is_int(ret, -EINVAL, "AnyValues nested %d deep: refused before protobuf-c recurses",
		       depth);
		ok(strstr(err, "nested deeper than") != NULL, "... naming the limit (%.200s)", err);
	}
	zarena_reset(&a);
	free(v.p);
	free(kv.p);
	free(b.p);
}

static void valid(void)
{
	struct buf kv = { 0 }, arr = { 0 }, v = { 0 }, b;
	struct zarena a = { 0 };
	struct otlp_result res;
	char err[512] = "";

	/* tags = AnyValue{array_value{values: ["a", 7, true]}} */
	field(&v, 1, "a", 1);
	varint(&v, 3 << 3);
	varint(&v, 7);
	varint(&v, 2 << 3);
	varint(&v, 1);
	/* three AnyValues of 3, 2 and 2 bytes, each an ArrayValue.values */
	for (size_t off = 0, n; off < v.len; off += n) {
		n = off ? 2 : 3;
		field(&arr, 1, v.p + off, n);
	}
	free(v.p);
	wrap(&arr, 5);
	field(&kv, 1, "tags", 4);
	field(&kv, 2, arr.p, arr.len);
	b = request(16, "GET /x", 1500000000000000000ull, 1500000000002500000ull, &kv);
	is_int(decode_map(&b, &a, &res, err, sizeof(err)), 0, "a valid request decodes (%.200s)", err);
	is_int(res.nspans, 1, "one span");
	is_int(res.rejected, 0, "none rejected");
	if (res.nspans == 1) {
		const struct zspan *z = &res.spans[0];

		is_u64(z->trace_hi, 0x5b8efff798038103ull, "trace id high");
		is_u64(z->trace_lo, 0xd269b633813fc60cull, "trace id low");
		is_u64(z->id, 0xd269b633813fc60cull, "span id");
		is_u64(z->timestamp_us, 1500000000000000ull, "timestamp in us");
		is_u64(z->duration_us, 2500, "duration in us");
		is_int(z->kind, SPAN_KIND_CLIENT, "kind CLIENT");
		ok(z->name.len == 6 && !memcmp(z->name.p, "get /x", 6), "name lower-cased");
		ok(z->local.service.len == 4 && !memcmp(z->local.service.p, "shop", 4),
		   "service.name -> localEndpoint");
		ok(z->ntags == 1 && z->tags[0].value.len == 12 &&
		   !memcmp(z->tags[0].value.p, "[\"a\",7,true]", 12),
		   "an array attribute becomes a JSON array");
	}
	zarena_reset(&a);
	free(kv.p);
	free(arr.p);
	free(b.p);
}

static void rejected(void)
{
	struct buf b;
	struct zarena a = { 0 };
	struct otlp_result res;
	char err[512] = "";

	b = request(3, "short id", 1000, 2000, NULL);
	is_int(decode_map(&b, &a, &res, err, sizeof(err)), 0, "a span with a 3-byte trace id: decoded");
	is_int(res.rejected, 1, "... and rejected alone");
	ok(strstr(res.first_error, "resourceSpans[0].scopeSpans[0].spans[0].traceId: expected 16 bytes") != NULL,
	   "... with the place (%.200s)", res.first_error);
	free(b.p);
	zarena_reset(&a);

	b = request(16, "bad \xff utf8", 1000, 2000, NULL);
	is_int(decode_map(&b, &a, &res, err, sizeof(err)), 0, "a name that is not UTF-8: decoded");
	is_int(res.rejected, 1, "... and the span rejected");
	free(b.p);
	zarena_reset(&a);

	b = request(16, "backwards", 2000, 1000, NULL);
	is_int(decode_map(&b, &a, &res, err, sizeof(err)), 0, "end before start: decoded");
	ok(res.rejected == 1 && strstr(res.first_error, "is before startTimeUnixNano"),
	   "... and rejected (%.200s)", res.first_error);
	free(b.p);
	zarena_reset(&a);

	b = (struct buf){ 0 };
	is_int(decode_map(&b, &a, &res, err, sizeof(err)), 0, "an empty body is an empty request");
	is_int(res.nspans + res.rejected, 0, "... with no span");
	zarena_reset(&a);
}

/* decode -> encode -> decode gives the same spans (the exporter's path). */
static void reencode(void)
{
	struct buf v = { 0 }, kv = { 0 }, b;
	struct zarena a = { 0 };
	struct otlp_req r, r2;
	struct otlp_result x, y;
	void *out = NULL;
	size_t outlen = 0;
	char err[512] = "";

	field(&v, 1, "x", 1);
	wrap(&v, 1);
	wrap(&v, 5);                            /* ["x"] */
	field(&kv, 1, "arr", 3);
	field(&kv, 2, v.p, v.len);
	b = request(16, "Encode Me", 1000000, 3000000, &kv);
	is_int(otlp_pb_decode(b.p, b.len, &a, &r, err, sizeof(err)), 0, "decoded");
	is_int(otlp_pb_encode(&r, &out, &outlen), 0, "encoded again");
	is_int(otlp_pb_decode(out, outlen, &a, &r2, err, sizeof(err)), 0,
	       "what otlp_pb_encode wrote decodes (%.200s)", err);
	ok(!otlp_map(&r, &a, &x) && !otlp_map(&r2, &a, &y) && x.nspans == 1 && y.nspans == 1,
	   "both map to one span");
	if (x.nspans == 1 && y.nspans == 1) {
		ok(x.spans[0].trace_lo == y.spans[0].trace_lo && x.spans[0].id == y.spans[0].id &&
		   x.spans[0].timestamp_us == y.spans[0].timestamp_us &&
		   x.spans[0].duration_us == y.spans[0].duration_us &&
		   x.spans[0].kind == y.spans[0].kind && y.spans[0].ntags == 1 &&
		   y.spans[0].tags[0].value.len == 5 && !memcmp(y.spans[0].tags[0].value.p, "[\"x\"]", 5),
		   "the same span, array attribute included");
	}
	free(out);
	free(v.p);
	free(kv.p);
	free(b.p);
	zarena_reset(&a);
}

static void response(void)
{
	void *p = NULL;
	size_t n = 0;

	is_int(otlp_pb_response(0, NULL, &p, &n), 0, "full success response");
	is_int(n, 0, "... is an empty message");
	free(p);
	is_int(otlp_pb_response(2, "why", &p, &n), 0, "partial success response");
	/* partial_success (1) { rejected_spans (1) = 2, error_message (2) = "why" } */
	ok(n == 9 && !memcmp(p, "\x0a\x07\x08\x02\x12\x03why", 9), "... encodes partial_success");
	free(p);
	is_int(otlp_pb_status(14, "full", 1, &p, &n), 0, "google.rpc.Status with RetryInfo");
	ok(n > 10 && ((uint8_t *)p)[0] == 0x08 && ((uint8_t *)p)[1] == 14, "... code 14 first");
	ok(memmem(p, n, "google.rpc.RetryInfo", 20) != NULL, "... RetryInfo in its details");
	free(p);
}

/* The one KeyValue of a span's attributes (raw bytes) through decode and
 * map: 0 with the tag "key=value" of the kept span in tag, or -EINVAL
 * with the reason in err. */
static int one_kv(const char *kvbytes, size_t kvlen, char *tag, size_t taglen, char *err,
		  size_t errlen)
{
	struct buf kv = { (uint8_t *)kvbytes, kvlen }, b;
	struct zarena a = { 0 };
	struct otlp_result res;
	int ret;

	tag[0] = '\0';
	b = request(16, "op", 1000, 2000, &kv);
	ret = decode_map(&b, &a, &res, err, errlen);
	if (!ret && res.nspans == 1 && res.spans[0].ntags) {
		/* key=value, a byte under 0x20 (a NUL) as \xNN */
		const struct zs_tag *t = &res.spans[0].tags[0];
		size_t o = 0;

		for (int part = 0; part < 2; part++) {
			const struct zs_str *z = part ? &t->value : &t->key;

			if (part && o + 1 < taglen)
				tag[o++] = '=';
			for (uint32_t i = 0; i < z->len && o + 5 < taglen; i++) {
				if ((unsigned char)z->p[i] < 0x20)
					o += (size_t)snprintf(tag + o, taglen - o, "\\x%02x",
							      (unsigned char)z->p[i]);
				else
					tag[o++] = z->p[i];
			}
		}
		tag[o] = '\0';
	} else if (!ret)
		snprintf(tag, taglen, "rejected %zu: %.200s", res.rejected, res.first_error);
	zarena_reset(&a);
	free(b.p);
	return ret;
}

/* The wire format's rules, as protobuf-c applied them (otlp_pb_dec.c). */
static void wire_rules(void)
{
	static const struct {
		const char *what;
		const char *kv;
		size_t len;
		int ret;
		const char *want;       /* the tag, or a piece of the reason */
	} cases[] = {
		{ "unknown fields of wire types 0, 1, 2 and 5 are skipped",
		  "\x0a\x01k\x78\x05\x79\0\0\0\0\0\0\0\0\x7a\x01z\x7d\0\0\0\0\x12\x02\x18\x07", 26,
		  0, "k=7" },
		{ "a known field of the wrong wire type is refused, with its path",
		  "\x0a\x01k\x12\x03\x1a\x01x", 8, -EINVAL,
		  "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue: wire type 2" },
		{ "a bool of any wire type (protobuf-c's reading)", "\x0a\x01k\x12\x03\x12\x01\x01", 8,
		  0, "k=true" },
		{ "a value seen twice: the later one", "\x0a\x01k\x12\x02\x18\x07\x12\x02\x18\x08", 11,
		  0, "k=8" },
		{ "a value seen twice, the later empty: the earlier number",
		  "\x0a\x01k\x12\x02\x18\x07\x12\x00", 9, 0, "k=7" },
		{ "a value seen twice, the later empty: no earlier string",
		  "\x0a\x01k\x12\x03\x0a\x01s\x12\x00", 10, 0, "rejected 1" },
		{ "two empty values are refused (protobuf-c's merge fails)",
		  "\x0a\x01k\x12\x00\x12\x00", 7, -EINVAL, "two empty AnyValues" },
		{ "a key ends at its first NUL", "\x0a\x03k\0x\x12\x02\x18\x07", 9, 0, "k=7" },
		{ "a key of 6 bytes is refused", "\x0a\x01k\x92\x80\x80\x80\x80\x00\x02\x18\x07", 12,
		  -EINVAL, "longer than 5 bytes" },
		{ "a length prefix of 6 bytes is refused", "\x0a\x01k\x12\x82\x80\x80\x80\x80\x00\x18\x07",
		  12, -EINVAL, "a length longer than 5 bytes" },
	};
	char tag[512], err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret;

		err[0] = '\0';
		ret = one_kv(cases[i].kv, cases[i].len, tag, sizeof(tag), err, sizeof(err));
		is_int(ret, cases[i].ret, "%s (%.200s)", cases[i].what, ret ? err : tag);
		ok(strstr(ret ? err : tag, cases[i].want) != NULL, "... %s", cases[i].want);
	}
}

/*
 * KeyValues of the shape SDKs write (key, then a value of one field: read
 * in one go by kv_fast()) and next to it, the same values in shapes read
 * field by field: the same tag, exactly.  Strings of every length around
 * the decoder's eight-byte words, with a NUL or a byte that is not UTF-8
 * in their last word, and strings that end the body (the word read past
 * them is not theirs).
 */
static void kv_shapes(void)
{
	static const struct {
		const char *what;
		const char *kv;
		size_t len;
		const char *want;       /* the tag exactly, or "rejected 1: ..." */
	} cases[] = {
		{ "string", "\x0a\x01k\x12\x03\x0a\x01s", 8, "k=s" },
		{ "string, an unknown field after it (field by field)",
		  "\x0a\x01k\x12\x05\x0a\x01s\x78\x05", 10, "k=s" },
		{ "string, the value before the key (field by field)",
		  "\x12\x03\x0a\x01s\x0a\x01k", 8, "k=s" },
		{ "string ending at a NUL in its last word", "\x0a\x01k\x12\x05\x0a\x03" "ab\0", 10,
		  "k=ab" },
		{ "string of 9 bytes, a NUL in its second word",
		  "\x0a\x01k\x12\x0b\x0a\x09" "abcdefgh\0", 16, "k=abcdefgh" },
		{ "string of 7 bytes, not UTF-8 in its last byte",
		  "\x0a\x01k\x12\x09\x0a\x07" "abcdef\xff", 14, "rejected 1" },
		{ "key of 10 bytes, UTF-8 in its second word",
		  "\x0a\x0a" "abcdefgh\xc3\xa9\x12\x03\x0a\x01s", 17, "abcdefgh\xc3\xa9=s" },
		{ "empty key", "\x0a\x00\x12\x03\x0a\x01s", 7,
		  "rejected 1: resourceSpans[0].scopeSpans[0].spans[0].attributes[0].key: "
		  "expected a non-empty string" },
		{ "int, one byte", "\x0a\x01k\x12\x02\x18\x07", 7, "k=7" },
		{ "int, ten bytes (-1)",
		  "\x0a\x01k\x12\x0b\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 16, "k=-1" },
		{ "int, two bytes then an unknown field (field by field)",
		  "\x0a\x01k\x12\x05\x18\xac\x02\x78\x00", 10, "k=300" },
		{ "bool false, one byte", "\x0a\x01k\x12\x02\x10\x00", 7, "k=false" },
		{ "bool true, one byte", "\x0a\x01k\x12\x02\x10\x02", 7, "k=true" },
		{ "bool, two bytes of zeros (field by field)", "\x0a\x01k\x12\x03\x10\x80\x00", 8,
		  "k=false" },
		{ "double", "\x0a\x01k\x12\x09\x21\0\0\0\0\0\0\xd0\x3f", 14, "k=0.25" },
		{ "bytes (field by field)", "\x0a\x01k\x12\x04\x3a\x02\x01\x02", 9, "k=AQI=" },
	};
	char tag[512], err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret;
		size_t n = strlen(cases[i].want);

		err[0] = '\0';
		ret = one_kv(cases[i].kv, cases[i].len, tag, sizeof(tag), err, sizeof(err));
		is_int(ret, 0, "%s: decoded (%.200s)", cases[i].what, err);
		if (!strncmp(cases[i].want, "rejected", 8))
			ok(!strncmp(tag, cases[i].want, n), "%s: %.100s (%.200s)", cases[i].what,
			   cases[i].want, tag);
		else
			is_str(tag, cases[i].want, "%s", cases[i].what);
	}
}

/* The span (its body's bytes) alone in a request, decoded and summed up
 * as text: every field span() fills. */
static void span_text(const struct buf *body, char *out, size_t outlen)
{
	struct buf s = { 0 }, rs = { 0 };
	struct zarena a = { 0 };
	struct otlp_req r;
	char err[256];
	size_t o = 0;

	put(&s, body->p, body->len);
	wrap(&s, 2);                            /* ScopeSpans.spans */
	field(&rs, 2, s.p, s.len);              /* ResourceSpans.scopeSpans */
	wrap(&rs, 1);                           /* Request.resource_spans */
	if (otlp_pb_decode(rs.p, rs.len, &a, &r, err, sizeof(err))) {
		snprintf(out, outlen, "refused: %s", err);
	} else {
		const struct otlp_span *sp = &r.rs[0].ss[0].spans[0];

		o += (size_t)snprintf(out + o, outlen - o, "t%zu:", sp->trace_len);
		for (int i = 0; i < 16; i++)
			o += (size_t)snprintf(out + o, outlen - o, "%02x", sp->trace_id[i]);
		o += (size_t)snprintf(out + o, outlen - o, " s%zu:", sp->span_len);
		for (int i = 0; i < 8; i++)
			o += (size_t)snprintf(out + o, outlen - o, "%02x", sp->span_id[i]);
		o += (size_t)snprintf(out + o, outlen - o, " p%zu:", sp->parent_len);
		for (int i = 0; i < 8; i++)
			o += (size_t)snprintf(out + o, outlen - o, "%02x", sp->parent_id[i]);
		o += (size_t)snprintf(out + o, outlen - o, " name %.*s kind %d %" PRIu64 "-%" PRIu64
				      " bad %s attrs", (int)sp->name.len, sp->name.p, sp->kind,
				      sp->start_ns, sp->end_ns, sp->bad ? "yes" : "no");
		for (size_t i = 0; i < sp->nattrs && o < outlen; i++)
			o += (size_t)snprintf(out + o, outlen - o, " %.*s=%lld",
					      (int)sp->attrs[i].key.len, sp->attrs[i].key.p,
					      (long long)sp->attrs[i].value.u.i);
		for (size_t i = 0; i < sp->nevents && o < outlen; i++) {
			const struct otlp_event *e = &sp->events[i];

			o += (size_t)snprintf(out + o, outlen - o, " event %" PRIu64 " %.*s",
					      e->time_ns, (int)e->name.len, e->name.p);
			for (size_t k = 0; k < e->nattrs && o < outlen; k++)
				o += (size_t)snprintf(out + o, outlen - o, " %.*s=%lld",
						      (int)e->attrs[k].key.len, e->attrs[k].key.p,
						      (long long)e->attrs[k].value.u.i);
		}
	}
	zarena_reset(&a);
	free(s.p);
	free(rs.p);
}

/*
 * span_head() (the leading fields in the order SDKs write them, read by
 * their keys' bytes) gives what the field-by-field loop gives: the same
 * fields in reverse order (which the head does not take), a field seen
 * twice (the later wins), a long name (a two-byte length ends the head),
 * a kind of two bytes, an attribute of a two-byte length among others.
 */
static void span_shapes(void)
{
	static const uint8_t tid[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
	static const uint8_t sid[8] = { 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28 };
	static const uint8_t pid[8] = { 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38 };
	char longname[201], want[2048], got[2048];
	struct buf f[12] = { 0 }, fwd = { 0 }, rev = { 0 }, b = { 0 };
	int nf = 0;

	memset(longname, 'n', 200);
	longname[200] = '\0';
	/* the fields in field-number order, one a buf */
	field(&f[nf++], 1, tid, 16);
	field(&f[nf++], 2, sid, 8);
	field(&f[nf++], 4, pid, 8);
	field(&f[nf++], 5, "GET /cart", 9);
	varint(&f[nf], 6 << 3);
	varint(&f[nf++], 2);
	fixed64(&f[nf++], 7, 1000);
	fixed64(&f[nf++], 8, 2500);
	for (int k = 0; k < 3; k++) {
		struct buf kv = { 0 }, v = { 0 };
		char key[300];

		memset(key, 'a' + k, sizeof(key));
		field(&kv, 1, key, k == 1 ? 150 : 2);   /* the second: a two-byte length */
		varint(&v, 3 << 3);
		varint(&v, 40 + k);
		field(&kv, 2, v.p, v.len);
		field(&f[nf++], 9, kv.p, kv.len);
		free(kv.p);
		free(v.p);
	}
	for (int i = 0; i < nf; i++)
		put(&fwd, f[i].p, f[i].len);
	for (int i = nf - 4; i >= 0; i--)       /* reversed, the attributes in order */
		put(&rev, f[i].p, f[i].len);
	for (int i = nf - 3; i < nf; i++)
		put(&rev, f[i].p, f[i].len);
	/* an event (time, name, two attributes) in SDK order, and reversed */
	for (int dir = 0; dir < 2; dir++) {
		struct buf ef[4] = { 0 }, ev = { 0 };

		fixed64(&ef[0], 1, 1700);
		field(&ef[1], 2, "retry", 5);
		for (int k = 0; k < 2; k++) {
			struct buf kv = { 0 }, v = { 0 };

			field(&kv, 1, k ? "y" : "x", 1);
			varint(&v, 3 << 3);
			varint(&v, 7 + k);
			field(&kv, 2, v.p, v.len);
			field(&ef[2 + k], 3, kv.p, kv.len);
			free(kv.p);
			free(v.p);
		}
		for (int k = 0; k < 4; k++) {
			static const int order[2][4] = { { 0, 1, 2, 3 },
							 { 2, 3, 1, 0 } };  /* x, y, name, time */

			put(&ev, ef[order[dir][k]].p, ef[order[dir][k]].len);
		}
		field(dir ? &rev : &fwd, 11, ev.p, ev.len);
		for (int k = 0; k < 4; k++)
			free(ef[k].p);
		free(ev.p);
	}
	span_text(&fwd, want, sizeof(want));
	span_text(&rev, got, sizeof(got));
	ok(!strncmp(want, "t16:0102", 8) && strstr(want, " name GET /cart kind 2 1000-2500 bad no") &&
	   strstr(want, " bb") && strstr(want, " event 1700 retry x=7 y=8"), "in SDK order: %.300s",
	   want);
	is_str(got, want, "reversed (the span's and its event's fields): the same span");

	/* a traceId, name and kind seen again after the head: the later ones
	 * (a traceId of 8 bytes: its length kept, no id) */
	put(&b, fwd.p, fwd.len);
	field(&b, 1, pid, 8);
	field(&b, 5, "again", 5);
	varint(&b, 6 << 3);
	varint(&b, 300);                        /* two bytes: no kind (-1) */
	span_text(&b, got, sizeof(got));
	ok(!strncmp(got, "t8:", 3) && strstr(got, " name again kind -1 "),
	   "fields seen twice: the later ones (%.300s)", got);
	free(b.p);

	/* a name of 200 bytes (its length two bytes): the head stops there */
	b = (struct buf){ 0 };
	for (int i = 0; i < nf; i++) {
		if (i == 3)
			field(&b, 5, longname, 200);
		else
			put(&b, f[i].p, f[i].len);
	}
	span_text(&b, got, sizeof(got));
	ok(strstr(got, longname) && strstr(got, " kind 2 1000-2500 bad no attrs aa=40 "),
	   "a long name, then the rest field by field (%.120s)", got);
	free(b.p);

	/* the head cut short: a spanId's length past the end of the span */
	b = (struct buf){ 0 };
	put(&b, f[0].p, f[0].len);
	put(&b, "\x12\x08\x21\x22", 4);
	span_text(&b, got, sizeof(got));
	ok(!strncmp(got, "refused: ", 9) && strstr(got, "field 2"),
	   "a spanId cut short refused (%.300s)", got);
	free(b.p);

	for (int i = 0; i < nf; i++)
		free(f[i].p);
	free(fwd.p);
	free(rev.p);
}

int main(void)
{
	hostile();
	deep(OTLP_MAX_DEPTH, 1);
	deep(OTLP_MAX_DEPTH + 1, 0);
	deep(5000, 0);
	valid();
	rejected();
	reencode();
	response();
	wire_rules();
	kv_shapes();
	span_shapes();
	return test_done();
}
