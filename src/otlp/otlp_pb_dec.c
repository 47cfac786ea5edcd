// SPDX-License-Identifier: MIT
/*
 * otlp_pb_decode(): an OTLP protobuf ExportTraceServiceRequest read
 * straight from the wire format into struct otlp_req, in one walk, with
 * no message tree in between (protobuf-c's unpack cost about three
 * quarters of the decode).  Strings and bytes point into one copy of the
 * body in the request's arena.
 *
 * It accepts and refuses exactly what protobuf-c 1.4's unpack (the
 * previous front end, kept as the oracle of tests/fuzz/fuzz_otlp_pb.c)
 * does, with the same result:
 *   - a known field of the wrong wire type is refused (a bool takes any:
 *     protobuf-c reads it as "any of its bytes non-zero", length prefix
 *     included); unknown fields of wire types 0, 1, 2 and 5 are skipped,
 *     groups (3, 4) and 6, 7 refused;
 *   - keys of at most 5 bytes, the first not field 0; varints of at most
 *     10 bytes; length prefixes of at most 5 bytes and 2^31-1;
 *   - repeated fields are all messages here (no packed encoding arises);
 *   - a non-repeated message seen twice is merged (protobuf-c's
 *     merge_messages()): repeated fields concatenated, strings the later
 *     one's when it is present, scalars the later one's (protobuf-c takes
 *     a proto3 scalar from the later message even when it was absent
 *     there).  For KeyValue.value (an AnyValue, a oneof): the later one
 *     when it holds a value; else the earlier one's number, bool or
 *     message, but no value for an earlier string or empty bytes; both
 *     empty is refused;
 *   - strings end at their first NUL (protobuf-c's are C strings) and a
 *     span with one that is not UTF-8 (common/utf8.c) is marked bad; a
 *     resource attribute or scope name/version that is not refuses the
 *     request, after every wire-format check.
 * AnyValues nest at most OTLP_MAX_DEPTH deep.  A refusal names the first
 * problem: the text of otlp_pb_scan() (otlp_scan.c) when that walk finds
 * it, else the field's path ("body: not a protobuf ExportTraceServiceRequest:
 * resourceSpans[0].scopeSpans[0].spans[2].name: wire type 0, not a
 * length-delimited field (field 5)").
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "otlp/otlp.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "cstr() reads words as little-endian"
#endif

#define MAX_SEGS 48

struct dctx {
	struct zarena *a;
	/* a span's attributes and events, an event's attributes, as read
	 * (malloc'ed, reused from span to span), copied to the arena when the
	 * span (event) ends: no count */
	struct otlp_kv *kvbuf, *ekvbuf;         /* the span's, an event's */
	struct otlp_event *evbuf;
	size_t kvcap, ekvcap, evcap;
	/* a refusal, unwinding: the path (innermost first) and the reason */
	struct { const char *name; long idx; } seg[MAX_SEGS];
	int nseg;
	char why[160];
};

/* One field as read: its number, wire type and value. */
struct fld {
	uint32_t num;
	unsigned wt;
	uint64_t v;             /* 0: the varint; 1, 5: the fixed bytes */
	const uint8_t *at;      /* the value's first byte (a length prefix included) */
	const uint8_t *p;       /* 2: the payload and its length */
	size_t n;
	const uint8_t *end;     /* the value's end */
};

static int fail(struct dctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct dctx *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->why, sizeof(x->why), fmt, ap);
	va_end(ap);
	x->nseg = 0;
	return -EINVAL;
}

/* Unwinding ret (a failure in field name[idx], idx -1: not repeated). */
static int at(struct dctx *x, int ret, const char *name, long idx)
{
	if (ret == -EINVAL && x->nseg < MAX_SEGS) {
		x->seg[x->nseg].name = name;
		x->seg[x->nseg].idx = idx;
		x->nseg++;
	}
	return ret;
}

/*
 * The next field of [*pp, end): 1 (in *f, *pp past it), 0 at the end,
 * or -EINVAL.  protobuf-c's rules: see the header.
 */
static inline __attribute__((always_inline)) int next(struct dctx *x, const uint8_t **pp,
						      const uint8_t *end, struct fld *f)
{
	const uint8_t *p = *pp;
	uint64_t v;
	size_t rem;

	if (p >= end)
		return 0;
	if (!(p[0] & 0xf8))
		return fail(x, "a field key of field number 0");
	f->wt = p[0] & 7;
	if (!(p[0] & 0x80)) {
		f->num = p[0] >> 3;
		p++;
	} else {
		uint32_t num = (p[0] & 0x7f) >> 3;
		unsigned shift = 4, i, max = end - p > 5 ? 5 : (unsigned)(end - p);

		for (i = 1; i < max && (p[i] & 0x80); i++, shift += 7)
			num |= (uint32_t)(p[i] & 0x7f) << shift;
		if (i == max)
			return fail(x, "a field key longer than 5 bytes or cut short");
		num |= (uint32_t)p[i] << shift;
		f->num = num;
		p += i + 1;
	}
	f->at = p;
	rem = end - p;
	switch (f->wt) {
	case 0:
		if (rem && !(p[0] & 0x80)) {
			f->v = p[0];
			p++;
			break;
		}
		v = 0;
		for (unsigned i = 0;; i++) {
			if (i == rem || i == 10)
				return fail(x, "field %u: a varint longer than 10 bytes or cut short",
					    f->num);
			v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
			if (!(p[i] & 0x80)) {
				p += i + 1;
				break;
			}
		}
		f->v = v;
		break;
	case 1:
		if (rem < 8)
			return fail(x, "field %u: 8 bytes cut short", f->num);
		memcpy(&f->v, p, 8);
		p += 8;
		break;
	case 5:
		if (rem < 4)
			return fail(x, "field %u: 4 bytes cut short", f->num);
		f->v = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
		       (uint64_t)p[3] << 24;
		p += 4;
		break;
	case 2: {
		unsigned i, max = rem < 5 ? (unsigned)rem : 5;

		if (rem && !(p[0] & 0x80)) {    /* a length under 128: most */
			if (p[0] > rem - 1)
				return fail(x, "field %u: a length of %u runs past the end of its "
					    "message", f->num, p[0]);
			f->p = p + 1;
			f->n = p[0];
			p = f->p + f->n;
			break;
		}
		v = 0;
		for (i = 0; i < max; i++) {
			v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
			if (!(p[i] & 0x80))
				break;
		}
		if (i == max)
			return fail(x, "field %u: a length longer than 5 bytes or cut short",
				    f->num);
		if (v > 0x7fffffff || v > rem - i - 1)
			return fail(x, "field %u: a length of %llu runs past the end of its "
				    "message", f->num, (unsigned long long)v);
		f->p = p + i + 1;
		f->n = v;
		p = f->p + v;
		break;
	}
	default:
		return fail(x, "field %u: wire type %u is not used by OTLP", f->num, f->wt);
	}
	f->end = p;
	*pp = p;
	return 1;
}

static const char *const wt_name[] = {
	"a varint", "8 fixed bytes", "a length-delimited field", "", "", "4 fixed bytes",
};

/* Field f is not of wire type wt. */
static int wrong(struct dctx *x, const struct fld *f, const char *name, unsigned wt)
{
	at(x, fail(x, "wire type %u, not %s (field %u)", f->wt, wt_name[wt], f->num), name, -1);
	return -EINVAL;
}

#define WANT(x, f, name, w) do { if ((f)->wt != (w)) return wrong(x, f, name, w); } while (0)

/* A one-byte key k then a length under 128 that fits in [p, end). */
#define LEN1(p, end, k) ((end) - (p) >= 2 && (p)[0] == (k) && !((p)[1] & 0x80) && \
			 (size_t)(p)[1] <= (size_t)((end) - (p)) - 2)

/* A protobuf-c string: the payload up to its first NUL; *bad: it is not
 * UTF-8.  One pass over a string of ASCII without NUL (the common case),
 * eight bytes a turn: the last turn reads up to seven bytes past the
 * string, which the body's copy has room for (DEC_PAD), and does not
 * look at them. */
#define DEC_PAD 8
static inline struct otlp_str cstr(const struct fld *f, int *bad)
{
	const uint8_t *p = f->p, *z;
	size_t n = f->n, i = 0;
	struct otlp_str s;
	uint64_t w;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		if ((w | ((w - 0x0101010101010101ull) & ~w)) & 0x8080808080808080ull)
			goto slow;
	}
	if (i < n) {
		/* the last 1-7 bytes, the rest of the word made 0x01 (little
		 * endian: the string's bytes are the low ones) */
		uint64_t m = ~0ull >> (8 * (8 - (n - i)));

		memcpy(&w, p + i, 8);
		w = (w & m) | (0x0101010101010101ull & ~m);
		if ((w | ((w - 0x0101010101010101ull) & ~w)) & 0x8080808080808080ull)
			goto slow;
	}
	*bad = 0;
	return (struct otlp_str){ (const char *)p, n };
slow:
	z = memchr(p, 0, n);
	s.p = (const char *)p;
	s.len = z ? (size_t)(z - p) : n;
	*bad = utf8_invalid_at(s.p, s.len) != s.len;
	return s;
}

/* protobuf-c's bool: any byte of the value non-zero (7 low bits). */
static int pbool(const struct fld *f)
{
	for (const uint8_t *p = f->at; p < f->end; p++)
		if (*p & 0x7f)
			return 1;
	return 0;
}

/*
 * How many fields numbered num [p, end) holds, any wire type: arrays
 * other than a span's are sized before they are filled.  Keys of one
 * byte and lengths of one are skimmed here, the rest read by next(); at
 * the first malformed field it stops (the decode that follows refuses it
 * there, having filled no more than counted).
 */
static size_t count(const uint8_t *p, const uint8_t *end, uint32_t num)
{
	struct dctx dummy;
	struct fld f = { 0 };
	size_t n = 0;

	while (p < end) {
		uint8_t k = p[0];

		if (!(k & 0x80) && (k & 0xf8) && end - p >= 2 &&
		    ((k & 7) != 2 || !(p[1] & 0x80))) {
			f.num = k >> 3;
			switch (k & 7) {
			case 0:
				for (p++; p < end && (*p & 0x80); p++)
					;
				p++;
				break;
			case 1:
				p += 9;
				break;
			case 5:
				p += 5;
				break;
			case 2:
				p += 2 + p[1];
				break;
			default:
				return n;
			}
			if (p > end)
				return n;
		} else if (next(&dummy, &p, end, &f) <= 0) {
			return n;
		}
		n += f.num == num;
	}
	return n;
}

/* *buf (malloc'ed, *cap elements of size el) twice as large; -ENOMEM. */
static int grow(void **buf, size_t *cap, size_t el)
{
	size_t n = *cap ? *cap * 2 : 16;
	void *p = realloc(*buf, n * el);

	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

/* n elements of size el, not zeroed (each is set whole as it is read);
 * NULL: ENOMEM. */
static void *arr(struct dctx *x, size_t n, size_t el)
{
	return zarena_alloc(x->a, el * (n ? n : 1));
}

static inline int kv(struct dctx *x, const uint8_t *p, const uint8_t *end,
		     struct otlp_kv *out, int depth, int *bad);

/* The KeyValues numbered num of [p, end) into *out (n of them), their
 * strings' UTF-8 problems ORed into *bad. */
static int kvs(struct dctx *x, const uint8_t *p, const uint8_t *end, uint32_t num,
	       struct otlp_kv **out, size_t *nout, int depth, int *bad, const char *name)
{
	size_t n = count(p, end, num), i = 0;
	struct fld f = { 0 };
	int r;

	*nout = 0;
	if (!(*out = arr(x, n, sizeof(**out))))
		return -ENOMEM;
	while ((r = next(x, &p, end, &f)) > 0) {
		if (f.num != num)
			continue;
		WANT(x, &f, name, 2);
		if (i >= n)
			return -EINVAL;
		if ((r = kv(x, f.p, f.p + f.n, &(*out)[i], depth, bad)))
			return at(x, r, name, i);
		i++;
	}
	*nout = i;
	return r;
}

/* An AnyValue at nesting depth (1: an attribute's value). */
static int any(struct dctx *x, const uint8_t *p, const uint8_t *end, struct otlp_value *out,
	       int depth, int *bad)
{
	struct fld f = { 0 };
	int r;

	memset(out, 0, sizeof(*out));
	*bad = 0;
	if (depth > OTLP_MAX_DEPTH)
		return fail(x, "attribute values nested deeper than %d", OTLP_MAX_DEPTH);
	while ((r = next(x, &p, end, &f)) > 0) {
		switch (f.num) {
		case 1:
			WANT(x, &f, "stringValue", 2);
			out->type = OTLP_V_STRING;
			out->u.s = cstr(&f, bad);
			break;
		case 2:
			out->type = OTLP_V_BOOL;
			out->u.b = pbool(&f);
			*bad = 0;
			break;
		case 3:
			WANT(x, &f, "intValue", 0);
			out->type = OTLP_V_INT;
			out->u.i = (int64_t)f.v;
			*bad = 0;
			break;
		case 4:
			WANT(x, &f, "doubleValue", 1);
			out->type = OTLP_V_DOUBLE;
			memcpy(&out->u.d, &f.v, sizeof(out->u.d));
			*bad = 0;
			break;
		case 5: {
			const uint8_t *q, *qend;
			size_t n, i = 0;
			struct fld g = { 0 };
			int b;

			WANT(x, &f, "arrayValue", 2);
			q = f.p;
			qend = f.p + f.n;
			n = count(q, qend, 1);
			out->type = OTLP_V_ARRAY;
			out->u.arr.n = 0;
			*bad = 0;
			if (!(out->u.arr.v = arr(x, n, sizeof(*out->u.arr.v))))
				return -ENOMEM;
			while ((r = next(x, &q, qend, &g)) > 0) {
				if (g.num != 1)
					continue;
				if (g.wt != 2)
					return at(x, wrong(x, &g, "values", 2), "arrayValue", -1);
				if (i >= n)
					return -EINVAL;
				if ((r = any(x, g.p, g.p + g.n, &out->u.arr.v[i], depth + 1, &b)))
					return at(x, at(x, r, "values", i), "arrayValue", -1);
				*bad |= b;
				i++;
			}
			if (r)
				return at(x, r, "arrayValue", -1);
			out->u.arr.n = i;
			break;
		}
		case 6:
			WANT(x, &f, "kvlistValue", 2);
			out->type = OTLP_V_KVLIST;
			*bad = 0;
			if ((r = kvs(x, f.p, f.p + f.n, 1, &out->u.kvl.kv, &out->u.kvl.n, depth + 1,
				     bad, "values")))
				return at(x, r, "kvlistValue", -1);
			break;
		case 7:
			WANT(x, &f, "bytesValue", 2);
			out->type = OTLP_V_BYTES;
			out->u.s.p = f.n ? (const char *)f.p : "";
			out->u.s.len = f.n;
			*bad = 0;
			break;
		}
	}
	return r;
}

/*
 * The KeyValue nearly every SDK writes, read in one go: the key (field 1)
 * then the value (field 2) holding one string, int, double or one-byte
 * bool field and nothing else, every length under 128.  1: read (the same
 * result as field by field), 0: not that shape (read it field by field).
 */
static inline int kv_fast(const uint8_t *p, const uint8_t *end, struct otlp_kv *out,
			  int *bad)
{
	size_t n = (size_t)(end - p), kl, vl;
	const uint8_t *v;
	struct fld f;
	int kbad, vbad = 0;

	if (n < 6 || p[0] != 0x0a || (p[1] & 0x80))
		return 0;
	kl = p[1];
	if (kl + 6 > n || p[2 + kl] != 0x12 || (p[3 + kl] & 0x80))
		return 0;
	vl = p[3 + kl];
	v = p + 4 + kl;
	if (v + vl != end || vl < 2)
		return 0;
	memset(&out->value, 0, sizeof(out->value));
	switch (v[0]) {
	case 0x0a:      /* stringValue */
		if (v[1] & 0x80 || (size_t)v[1] + 2 != vl)
			return 0;
		f.p = v + 2;
		f.n = v[1];
		out->value.type = OTLP_V_STRING;
		out->value.u.s = cstr(&f, &vbad);
		break;
	case 0x10:      /* boolValue, one byte */
		if (vl != 2 || v[1] & 0x80)
			return 0;
		out->value.type = OTLP_V_BOOL;
		out->value.u.b = v[1] != 0;
		break;
	case 0x18: {    /* intValue */
		uint64_t i = 0;
		size_t k;

		if (vl > 11)
			return 0;
		for (k = 1; k < vl && v[k] & 0x80; k++)
			i |= (uint64_t)(v[k] & 0x7f) << (7 * (k - 1));
		if (k != vl - 1)
			return 0;
		i |= (uint64_t)v[k] << (7 * (k - 1));
		out->value.type = OTLP_V_INT;
		out->value.u.i = (int64_t)i;
		break;
	}
	case 0x21:      /* doubleValue */
		if (vl != 9)
			return 0;
		out->value.type = OTLP_V_DOUBLE;
		memcpy(&out->value.u.d, v + 1, 8);
		break;
	default:
		return 0;
	}
	f.p = p + 2;
	f.n = kl;
	out->key = cstr(&f, &kbad);
	*bad |= kbad | vbad;
	return 1;
}

/* A KeyValue field by field (any shape kv_fast() does not take). */
static __attribute__((noinline)) int kv_fields(struct dctx *x, const uint8_t *p,
					       const uint8_t *end, struct otlp_kv *out,
					       int depth, int *bad)
{
	struct otlp_value v;
	int r, vbad = 0, kbad = 0, b, have = 0;
	struct fld f = { 0 };

	out->key.p = "";
	out->key.len = 0;
	memset(&out->value, 0, sizeof(out->value));
	while ((r = next(x, &p, end, &f)) > 0) {
		if (f.num == 1) {
			WANT(x, &f, "key", 2);
			out->key = cstr(&f, &kbad);
		} else if (f.num == 2) {
			WANT(x, &f, "value", 2);
			if ((r = any(x, f.p, f.p + f.n, &v, depth, &b)))
				return at(x, r, "value", -1);
			if (!have || v.type != OTLP_V_NONE) {
				out->value = v;
				vbad = b;
			} else if (out->value.type == OTLP_V_NONE) {
				/* protobuf-c's merge_messages() fails on two empty oneofs */
				return at(x, fail(x, "two empty AnyValues"), "value", -1);
			} else if (out->value.type == OTLP_V_STRING ||
				   (out->value.type == OTLP_V_BYTES && !out->value.u.s.len)) {
				/* ... and drops an earlier string or empty bytes */
				memset(&out->value, 0, sizeof(out->value));
				vbad = 0;
			}
			have = 1;
		}
	}
	if (!r)
		*bad |= vbad | kbad;
	return r;
}

/* A KeyValue: kv_fast() inline (no frame of kv_fields() for the common
 * shape), else kv_fields(). */
static inline __attribute__((always_inline)) int kv(struct dctx *x, const uint8_t *p,
						    const uint8_t *end, struct otlp_kv *out,
						    int depth, int *bad)
{
	if (depth <= OTLP_MAX_DEPTH && kv_fast(p, end, out, bad))
		return 0;
	return kv_fields(x, p, end, out, depth, bad);
}

static int event(struct dctx *x, const uint8_t *p, const uint8_t *end, struct otlp_event *e,
		 int *bad)
{
	size_t i = 0;
	struct fld f = { 0 };
	int r, nbad = 0;

	e->has_name = 1;
	e->name.p = "";
	/* the fields as SDKs write them (time, name, attributes; one-byte
	 * keys and lengths) by their keys' bytes, as span_head() does; the
	 * rest field by field */
	if (end - p >= 9 && p[0] == 0x09) {
		memcpy(&e->time_ns, p + 1, 8);
		p += 9;
	}
	if (LEN1(p, end, 0x12)) {
		f.p = p + 2;
		f.n = p[1];
		e->name = cstr(&f, &nbad);
		p += 2 + p[1];
	}
	while (LEN1(p, end, 0x1a)) {
		if (i == x->ekvcap && grow((void **)&x->ekvbuf, &x->ekvcap, sizeof(*x->ekvbuf)))
			return -ENOMEM;
		if ((r = kv(x, p + 2, p + 2 + p[1], &x->ekvbuf[i], 1, bad)))
			return at(x, r, "attributes", i);
		i++;
		p += 2 + p[1];
	}
	while ((r = next(x, &p, end, &f)) > 0) {
		switch (f.num) {
		case 1:
			WANT(x, &f, "timeUnixNano", 1);
			e->time_ns = f.v;
			break;
		case 2:
			WANT(x, &f, "name", 2);
			e->name = cstr(&f, &nbad);
			break;
		case 3:
			WANT(x, &f, "attributes", 2);
			if (i == x->ekvcap && grow((void **)&x->ekvbuf, &x->ekvcap, sizeof(*x->ekvbuf)))
				return -ENOMEM;
			if ((r = kv(x, f.p, f.p + f.n, &x->ekvbuf[i], 1, bad)))
				return at(x, r, "attributes", i);
			i++;
			break;
		case 4:
			WANT(x, &f, "droppedAttributesCount", 0);
			break;
		}
	}
	if (r)
		return r;
	if (i) {
		if (!(e->attrs = arr(x, i, sizeof(*e->attrs))))
			return -ENOMEM;
		memcpy(e->attrs, x->ekvbuf, i * sizeof(*e->attrs));
	}
	e->nattrs = i;
	*bad |= nbad;
	return 0;
}

/* A Link: read and checked, not kept (Zipkin has no links). */
static int link(struct dctx *x, const uint8_t *p, const uint8_t *end)
{
	struct otlp_kv one;
	long i = 0;
	struct fld f = { 0 };
	int r, bad = 0;

	while ((r = next(x, &p, end, &f)) > 0) {
		switch (f.num) {
		case 1:
			WANT(x, &f, "traceId", 2);
			break;
		case 2:
			WANT(x, &f, "spanId", 2);
			break;
		case 3:
			WANT(x, &f, "traceState", 2);
			break;
		case 4:
			WANT(x, &f, "attributes", 2);
			if ((r = kv(x, f.p, f.p + f.n, &one, 1, &bad)))
				return at(x, r, "attributes", i);
			i++;
			break;
		case 5:
			WANT(x, &f, "droppedAttributesCount", 0);
			break;
		case 6:
			WANT(x, &f, "flags", 5);
			break;
		}
	}
	return r;
}

/* A Status into *code and *msg (*msg_bad: that is not UTF-8). */
static int status(struct dctx *x, const uint8_t *p, const uint8_t *end, int32_t *code,
		  struct otlp_str *msg, int *msg_bad)
{
	struct fld f = { 0 };
	int r;

	*code = 0;      /* protobuf-c: the later Status's code, even absent */
	while ((r = next(x, &p, end, &f)) > 0) {
		if (f.num == 2) {
			WANT(x, &f, "message", 2);
			*msg = cstr(&f, msg_bad);
		} else if (f.num == 3) {
			WANT(x, &f, "code", 0);
			*code = (int32_t)(uint32_t)f.v;
		}
	}
	return r;
}

/*
 * The leading fields of a span as every SDK writes them (protobuf-c,
 * the Go and Java encoders: field-number order, one-byte keys and
 * lengths): traceId, spanId, parentSpanId, name, kind (a one-byte
 * varint), startTimeUnixNano, endTimeUnixNano, then its attributes, each
 * recognised by its key's bytes instead of through next() and the
 * switch.  Each is optional; the first byte that is not the next
 * expected key ends it, and span()'s loop reads the rest field by field.
 * The result is what that loop gives for the same fields: the same
 * assignments in the same order.  The pointer past what was read, or
 * NULL (*r: the error of an attribute).
 */
static inline __attribute__((always_inline)) const uint8_t *
span_head(struct dctx *x, const uint8_t *p, const uint8_t *end, struct otlp_span *s,
	  const uint8_t **tid, const uint8_t **sid, const uint8_t **pid, int32_t *kind,
	  int *name_bad, size_t *ia, int *bad, int *r)
{
	struct fld f;

	if (LEN1(p, end, 0x0a)) {
		*tid = p + 2;
		s->trace_len = p[1];
		p += 2 + p[1];
	}
	if (LEN1(p, end, 0x12)) {
		*sid = p + 2;
		s->span_len = p[1];
		p += 2 + p[1];
	}
	if (LEN1(p, end, 0x22)) {
		*pid = p + 2;
		s->parent_len = p[1];
		p += 2 + p[1];
	}
	if (LEN1(p, end, 0x2a)) {
		f.p = p + 2;
		f.n = p[1];
		s->name = cstr(&f, name_bad);
		p += 2 + p[1];
	}
	if (end - p >= 2 && p[0] == 0x30 && !(p[1] & 0x80)) {
		*kind = p[1];
		p += 2;
	}
	if (end - p >= 9 && p[0] == 0x39) {
		memcpy(&s->start_ns, p + 1, 8);
		p += 9;
	}
	if (end - p >= 9 && p[0] == 0x41) {
		memcpy(&s->end_ns, p + 1, 8);
		p += 9;
	}
	while (LEN1(p, end, 0x4a)) {
		if (*ia == x->kvcap && grow((void **)&x->kvbuf, &x->kvcap, sizeof(*x->kvbuf))) {
			*r = -ENOMEM;
			return NULL;
		}
		if ((*r = kv(x, p + 2, p + 2 + p[1], &x->kvbuf[*ia], 1, bad))) {
			*r = at(x, *r, "attributes", *ia);
			return NULL;
		}
		++*ia;
		p += 2 + p[1];
	}
	return p;
}

static int span(struct dctx *x, const uint8_t *p, const uint8_t *end, struct otlp_span *s)
{
	const uint8_t *tid = NULL, *sid = NULL, *pid = NULL;
	size_t ia = 0, ie = 0;
	struct otlp_str smsg = { "", 0 };
	int32_t kind = 0, code = 0;
	int r, bad = 0, has_status = 0, msg_bad = 0, name_bad = 0;
	struct fld f = { 0 };

	memset(s, 0, sizeof(*s));
	s->name.p = "";
	if (!(p = span_head(x, p, end, s, &tid, &sid, &pid, &kind, &name_bad, &ia, &bad, &r)))
		return r;
	while ((r = next(x, &p, end, &f)) > 0) {
		switch (f.num) {
		case 1:
			WANT(x, &f, "traceId", 2);
			tid = f.p;
			s->trace_len = f.n;
			break;
		case 2:
			WANT(x, &f, "spanId", 2);
			sid = f.p;
			s->span_len = f.n;
			break;
		case 3:
			WANT(x, &f, "traceState", 2);
			break;
		case 4:
			WANT(x, &f, "parentSpanId", 2);
			pid = f.p;
			s->parent_len = f.n;
			break;
		case 5:
			WANT(x, &f, "name", 2);
			s->name = cstr(&f, &name_bad);
			break;
		case 6:
			WANT(x, &f, "kind", 0);
			kind = (int32_t)(uint32_t)f.v;
			break;
		case 7:
			WANT(x, &f, "startTimeUnixNano", 1);
			s->start_ns = f.v;
			break;
		case 8:
			WANT(x, &f, "endTimeUnixNano", 1);
			s->end_ns = f.v;
			break;
		case 9:
			WANT(x, &f, "attributes", 2);
			if (ia == x->kvcap && grow((void **)&x->kvbuf, &x->kvcap, sizeof(*x->kvbuf)))
				return -ENOMEM;
			if ((r = kv(x, f.p, f.p + f.n, &x->kvbuf[ia], 1, &bad)))
				return at(x, r, "attributes", ia);
			ia++;
			break;
		case 11:
			WANT(x, &f, "events", 2);
			if (ie == x->evcap && grow((void **)&x->evbuf, &x->evcap, sizeof(*x->evbuf)))
				return -ENOMEM;
			memset(&x->evbuf[ie], 0, sizeof(x->evbuf[ie]));
			if ((r = event(x, f.p, f.p + f.n, &x->evbuf[ie], &bad)))
				return at(x, r, "events", ie);
			ie++;
			break;
		case 13:
			WANT(x, &f, "links", 2);
			if ((r = link(x, f.p, f.p + f.n)))
				return at(x, r, "links", s->nlinks);
			s->nlinks++;
			break;
		case 15:
			WANT(x, &f, "status", 2);
			if ((r = status(x, f.p, f.p + f.n, &code, &smsg, &msg_bad)))
				return at(x, r, "status", -1);
			has_status = 1;
			break;
		case 10:
		case 12:
		case 14:
			WANT(x, &f, f.num == 10 ? "droppedAttributesCount" : f.num == 12 ?
			     "droppedEventsCount" : "droppedLinksCount", 0);
			break;
		case 16:
			WANT(x, &f, "flags", 5);
			break;
		}
	}
	if (r)
		return r;
	if (!(s->attrs = arr(x, ia, sizeof(*s->attrs))) ||
	    !(s->events = arr(x, ie, sizeof(*s->events))))
		return -ENOMEM;
	if (ia)
		memcpy(s->attrs, x->kvbuf, ia * sizeof(*s->attrs));
	if (ie)
		memcpy(s->events, x->evbuf, ie * sizeof(*s->events));
	s->nattrs = ia;
	s->nevents = ie;
	if (s->trace_len == 16)
		memcpy(s->trace_id, tid, 16);
	if (s->span_len == 8)
		memcpy(s->span_id, sid, 8);
	if (s->parent_len == 8)
		memcpy(s->parent_id, pid, 8);
	s->kind = kind >= 0 && kind <= 5 ? kind : -1;
	if (has_status) {
		s->status_code = code >= 0 && code <= 2 ? code : -1;
		s->status_msg = smsg;
		bad |= msg_bad;
	}
	if (bad || name_bad)
		s->bad = "a string (name, attribute, event or status) is not valid UTF-8";
	return 0;
}

/* An InstrumentationScope: its name and version (*has_*: present). */
static int scope(struct dctx *x, const uint8_t *p, const uint8_t *end, struct otlp_scope_spans *ss,
		 int *has_name, int *has_version, int sbad[2])
{
	struct otlp_kv *kvl;
	size_t n;
	struct fld f = { 0 };
	int r, bad = 0;

	if ((r = kvs(x, p, end, 3, &kvl, &n, 1, &bad, "attributes")))
		return r;
	while ((r = next(x, &p, end, &f)) > 0) {
		switch (f.num) {
		case 1:
			WANT(x, &f, "name", 2);
			ss->scope_name = cstr(&f, &sbad[0]);
			*has_name = 1;
			break;
		case 2:
			WANT(x, &f, "version", 2);
			ss->scope_version = cstr(&f, &sbad[1]);
			*has_version = 1;
			break;
		case 4:
			WANT(x, &f, "droppedAttributesCount", 0);
			break;
		}
	}
	return r;
}

/* *bad: the scope's name or version is not UTF-8. */
static int scope_spans(struct dctx *x, const uint8_t *p, const uint8_t *end,
		       struct otlp_scope_spans *ss, int *bad)
{
	size_t n = count(p, end, 2), k = 0;
	int r, has_scope = 0, has_name = 0, has_version = 0, sbad[2] = { 0, 0 };
	struct fld f = { 0 };

	memset(ss, 0, sizeof(*ss));
	if (!(ss->spans = arr(x, n, sizeof(*ss->spans))))
		return -ENOMEM;
	while ((r = next(x, &p, end, &f)) > 0) {
		switch (f.num) {
		case 1:
			WANT(x, &f, "scope", 2);
			/* merged: a string the later scope lacks is the earlier one's */
			if ((r = scope(x, f.p, f.p + f.n, ss, &has_name, &has_version, sbad)))
				return at(x, r, "scope", -1);
			has_scope = 1;
			break;
		case 2:
			WANT(x, &f, "spans", 2);
			if (k >= n)
				return -EINVAL;
			if ((r = span(x, f.p, f.p + f.n, &ss->spans[k])))
				return at(x, r, "spans", k);
			k++;
			break;
		case 3:
			WANT(x, &f, "schemaUrl", 2);
			break;
		}
	}
	ss->nspans = k;
	if (has_scope) {
		if (!has_name)
			ss->scope_name = (struct otlp_str){ "", 0 };
		if (!has_version)
			ss->scope_version = (struct otlp_str){ "", 0 };
		*bad = sbad[0] | sbad[1];
	}
	return r;
}

/* A Resource's attributes appended to rs's (a Resource seen twice is
 * merged: its attributes concatenated). */
static int resource(struct dctx *x, const uint8_t *p, const uint8_t *end,
		    struct otlp_resource_spans *rs, int *bad)
{
	struct otlp_kv *kvl;
	size_t n;
	struct fld f = { 0 };
	int r;

	if ((r = kvs(x, p, end, 1, &kvl, &n, 1, bad, "attributes")))
		return r;
	while ((r = next(x, &p, end, &f)) > 0)
		if (f.num == 2)
			WANT(x, &f, "droppedAttributesCount", 0);
	if (r)
		return r;
	if (!rs->nattrs) {
		rs->attrs = kvl;
		rs->nattrs = n;
	} else if (n) {
		struct otlp_kv *all = arr(x, rs->nattrs + n, sizeof(*all));

		if (!all)
			return -ENOMEM;
		memcpy(all, rs->attrs, rs->nattrs * sizeof(*all));
		memcpy(all + rs->nattrs, kvl, n * sizeof(*all));
		rs->attrs = all;
		rs->nattrs += n;
	}
	return 0;
}

/* *bad: the request must be refused for a resource attribute or a scope
 * string that is not UTF-8. */
static int resource_spans(struct dctx *x, const uint8_t *p, const uint8_t *end,
			  struct otlp_resource_spans *rs, int *bad)
{
	size_t n = count(p, end, 2), j = 0;
	int r, res_bad = 0, scope_bad = 0;
	struct fld f = { 0 };

	memset(rs, 0, sizeof(*rs));
	if (!(rs->ss = arr(x, n, sizeof(*rs->ss))))
		return -ENOMEM;
	while ((r = next(x, &p, end, &f)) > 0) {
		switch (f.num) {
		case 1:
			WANT(x, &f, "resource", 2);
			if ((r = resource(x, f.p, f.p + f.n, rs, &res_bad)))
				return at(x, r, "resource", -1);
			break;
		case 2: {
			int b = 0;

			WANT(x, &f, "scopeSpans", 2);
			if (j >= n)
				return -EINVAL;
			if ((r = scope_spans(x, f.p, f.p + f.n, &rs->ss[j], &b)))
				return at(x, r, "scopeSpans", j);
			scope_bad |= b;
			j++;
			break;
		}
		case 3:
			WANT(x, &f, "schemaUrl", 2);
			break;
		}
	}
	rs->nss = j;
	*bad = j && (res_bad || scope_bad);
	return r;
}

static int request(struct dctx *x, const uint8_t *p, const uint8_t *end, struct otlp_req *r,
		   long *bad_rs)
{
	size_t n = count(p, end, 1), i = 0;
	struct fld f = { 0 };
	int ret;

	if (!(r->rs = arr(x, n, sizeof(*r->rs))))
		return -ENOMEM;
	while ((ret = next(x, &p, end, &f)) > 0) {
		int b = 0;

		if (f.num != 1)
			continue;
		WANT(x, &f, "resourceSpans", 2);
		if (i >= n)
			return -EINVAL;
		if ((ret = resource_spans(x, f.p, f.p + f.n, &r->rs[i], &b)))
			return at(x, ret, "resourceSpans", i);
		if (b && *bad_rs < 0)
			*bad_rs = (long)i;
		i++;
	}
	r->nrs = i;
	return ret;
}

int otlp_pb_decode(const void *body, size_t len, struct zarena *a,
		   struct otlp_req *r, char *err, size_t errlen)
{
	struct dctx x = { .a = a };
	long bad_rs = -1;
	uint8_t *copy;
	int ret;

	memset(r, 0, sizeof(*r));
	/* one copy of the body: every string and id of r points into it */
	copy = zarena_alloc(a, len + DEC_PAD);
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (len)
		memcpy(copy, body, len);
	ret = request(&x, copy, copy + len, r, &bad_rs);
	free(x.kvbuf);
	free(x.ekvbuf);
	free(x.evbuf);
	if (ret == -ENOMEM) {
		snprintf(err, errlen, "out of memory");
		memset(r, 0, sizeof(*r));
		return ret;
	}
	if (ret) {
		size_t o;

		/* the structural walk's text when it finds the problem */
		if (otlp_pb_scan(body, len, err, errlen))
			return -EINVAL;
		o = (size_t)snprintf(err, errlen, "body: not a protobuf ExportTraceServiceRequest: ");
		for (int i = x.nseg - 1; i >= 0 && o < errlen; i--) {
			if (x.seg[i].idx >= 0)
				o += (size_t)snprintf(err + o, errlen - o, "%s[%ld]%s", x.seg[i].name,
						      x.seg[i].idx, i ? "." : ": ");
			else
				o += (size_t)snprintf(err + o, errlen - o, "%s%s", x.seg[i].name,
						      i ? "." : ": ");
		}
		if (o < errlen)
			snprintf(err + o, errlen - o, "%s", x.why);
		memset(r, 0, sizeof(*r));
		return -EINVAL;
	}
	if (bad_rs >= 0) {
		snprintf(err, errlen, "resourceSpans[%ld]: a resource attribute or the scope's "
			 "name or version is not valid UTF-8", bad_rs);
		memset(r, 0, sizeof(*r));
		return -EINVAL;
	}
	return 0;
}
