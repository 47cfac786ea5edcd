// SPDX-License-Identifier: MIT
/*
 * The OTLP/JSON front end: an ExportTraceServiceRequest in proto3's JSON
 * mapping -> struct otlp_req (otlp.h), streamed: common/json_tok.c hands
 * over every key and value; they fill the request as they come,
 * with no tree of values.
 *
 * The answers are those of a decoder that reads the whole document first
 * (as the jansson one before it did, and tests/fuzz/otlp_json_tree.c
 * still does, to compare):
 *
 *   - a key given twice: the last one counts;
 *   - every field in any order; an AnyValue's member is chosen in the
 *     order stringValue (a string), boolValue (a boolean), intValue (when
 *     present), doubleValue (a number), bytesValue (a string), arrayValue,
 *     kvlistValue, whatever order they come in;
 *   - "scope" wins over "instrumentationLibrary", "scopeSpans" over
 *     "instrumentationLibrarySpans" when both are there;
 *   - a syntax error anywhere wins over a problem of content; problems of
 *     content are reported in the order of the resource spans, each one's
 *     resource attributes first, then its scopeSpans, then their spans;
 *   - what is not an object where an object belongs is an empty one (a
 *     span: rejected, "expected a span object");
 *   - what is JSON is json_tok.h's (jansson's) rule: integers beyond
 *     int64, reals beyond double, \u0000 in a string, \v or \f are
 *     errors of the body.
 *
 * Errors of the body name the byte (counted from 1, the last one read):
 * "body: byte 17: invalid object key (must be a string)".  Ids are hex
 * (the spec); 24/12-character base64 ids, which older exporters wrote,
 * are accepted too.  Known differences from jansson: a lone UTF-16
 * surrogate escape reads as "?" (json_tok.h); a NUL byte right after a
 * number, which jansson let through, is refused like any other byte that
 * is not JSON.
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_tok.h"
#include "common/spanrec.h"
#include "otlp/otlp.h"

/* ---- what the callbacks build ------------------------------------------- */

/* A list of {key, value}. */
struct kvlist {
	struct otlp_kv *kv;
	size_t n, cap;
	int einval;             /* not an array of objects with a string key */
	int depth;              /* of the AnyValues in it */
};

/* An AnyValue being read: every member kept until its object ends. */
struct av {
	struct otlp_value *out;
	int depth;
	int s_ok, b_ok, i_set, i_ok, d_ok, by_ok;       /* from s_ok to s: set to 0 */
	int arr_set, arr_bad, kvl_set;                  /*   by av_new() */
	struct otlp_str s, by;
	int b;
	int64_t i;
	double d;
	struct otlp_value *arr;
	size_t narr, caparr;
	struct kvlist kvl;
	struct av *free_next;
};

/* The span being read (spans do not nest: one at a time). */
struct spanb {
	struct otlp_span s;
	int obj;                /* it is an object */
	int name_bad, start_ok, end_ok, st_set;
	struct kvlist attrs;
	int ev_set, ev_notarr, ev_attrs_bad;
	struct otlp_event *ev;
	size_t nev, capev;
};

/* The event being read. */
struct eventb {
	struct otlp_event e;
	struct kvlist attrs;
};

/* A scopeSpans element and whether its spans were not an array. */
struct ss_item {
	struct otlp_scope_spans ss;
	int spans_bad;
};

struct sslist {
	struct ss_item *v;
	size_t n, cap;
	int set, notarr;
};

/* The scope spans being read. */
struct ssb {
	int scope_set;
	struct otlp_str name[2], version[2];    /* [0] scope, [1] instrumentationLibrary */
	struct otlp_span *spans;
	size_t nspans, cap;
	int spans_bad;
};

/* The resource spans being read. */
struct rsb {
	struct kvlist attrs;
	struct sslist ss[2];    /* [0] scopeSpans, [1] instrumentationLibrarySpans */
};

/* What the next value is (the role a map's key or an array gives it). */
enum role {
	R_SKIP, R_ROOT, R_RSS, R_RS, R_RESOURCE, R_KVS, R_KV, R_KEY, R_VALUE,
	R_SSS, R_SS, R_SCOPE, R_SCOPE_NAME, R_SCOPE_VERSION, R_SPANS, R_SPAN,
	R_TRACE, R_SPANID, R_PARENT, R_NAME, R_KIND, R_START, R_END, R_STATUS,
	R_ST_CODE, R_ST_MSG, R_LINKS, R_LINK, R_EVENTS, R_EVENT, R_EV_NAME, R_EV_TIME,
	R_AV, R_AV_S, R_AV_B, R_AV_I, R_AV_D, R_AV_BY, R_AV_ARR, R_AV_VALS, R_AV_ELEM,
	R_AV_KVL,
};

/* An open object or array. */
struct frame {
	enum role t;            /* what it is (R_SKIP: ignored, with what it holds) */
	int array;
	enum role next;         /* an object: the role of the value after its key */
	void *p;                /* kvlist, av, sslist ... */
	int which;              /* scope [0]/[1] */
	int key_ok;             /* R_KV: its key is a string */
	size_t idx;             /* R_KV: the element */
};

/* The strings of a request are packed into blocks of this size taken
 * from the arena (each zarena_alloc() is a call and 16-byte aligned);
 * a longer string gets its own allocation. */
#define STR_BLOCK 4096

struct jd {
	struct zarena *a;
	char *sp, *sp_end;      /* what is left of the current string block */
	struct frame *st;
	size_t nst, capst;
	int oom;

	int root_obj, rss_bad;
	char doc_err[512];      /* the first problem of content (doc_err[0]) */
	struct otlp_resource_spans *rs;
	size_t nrs, caprs;
	struct rsb rb;
	struct ssb sb;
	struct spanb pb;
	struct eventb eb;
	struct av *av_free;
};

/* ---- helpers ---------------------------------------------------------------- */

static int oom(struct jd *j)
{
	j->oom = 1;
	return 0;
}

static inline int grow(struct jd *j, void **v, size_t n, size_t *cap, size_t el)
{
	if (n < *cap)
		return 0;       /* room: no call */
	if (zarena_grow(j->a, v, n, cap, el)) {
		j->oom = 1;
		return -ENOMEM;
	}
	return 0;
}

static int copy_str(struct jd *j, const unsigned char *s, size_t len, struct otlp_str *out)
{
	char *p;

	if ((size_t)(j->sp_end - j->sp) > len) {
		p = j->sp;
		j->sp += len + 1;
	} else if (len >= STR_BLOCK / 4) {
		if (!(p = zarena_alloc(j->a, len + 1)))
			return -ENOMEM;
	} else {
		if (!(p = zarena_alloc(j->a, STR_BLOCK)))
			return -ENOMEM;
		j->sp = p + len + 1;
		j->sp_end = p + STR_BLOCK;
	}
	memcpy(p, s, len);
	p[len] = '\0';
	out->p = p;
	out->len = len;
	return 0;
}

static int key_is(const unsigned char *k, size_t len, const char *name)
{
	return strlen(name) == len && !memcmp(k, name, len);
}

static int b64val(char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+' || ch == '-')
		return 62;
	if (ch == '/' || ch == '_')
		return 63;
	return -1;
}

int otlp_id_parse(const char *s, size_t len, uint8_t *out, size_t n)
{
	size_t i;

	if (len == 2 * n && n % 8 == 0) {
		/* 16 digits at a time, each 8 bytes big-endian */
		for (i = 0; i < n; i += 8) {
			uint64_t v;

			if (spanrec_hex_u64(s + 2 * i, 16, false, &v))
				return -EINVAL;
			v = htobe64(v);
			memcpy(out + i, &v, 8);
		}
		return 0;
	}
	if (len == (n + 2) / 3 * 4) {
		uint32_t acc = 0;
		size_t bits = 0, k = 0;

		for (i = 0; i < len && s[i] != '='; i++) {
			int v = b64val(s[i]);

			if (v < 0)
				return -EINVAL;
			acc = (acc << 6) | (uint32_t)v;
			bits += 6;
			if (bits >= 8) {
				bits -= 8;
				if (k == n)
					return -EINVAL;
				out[k++] = (uint8_t)(acc >> bits);
			}
		}
		return k == n ? 0 : -EINVAL;
	}
	return -EINVAL;
}

/* C's isspace() in the C locale (the decoder's strtoull/strtoll read
 * those before a number). */
static inline int c_space(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The magnitude and sign of s as strtoull/strtoll read it in base 10: white
 * space, one '+' or '-', then at least one digit and nothing else; 0, or
 * -EINVAL (no digit, something after them, or beyond 2^64 - 1). */
static int dec_mag(const char *s, size_t len, uint64_t *mag, int *neg)
{
	const char *p = s, *end = s + len;
	uint64_t v = 0;

	*neg = 0;
	while (p < end && c_space((unsigned char)*p))
		p++;
	if (p < end && (*p == '+' || *p == '-'))
		*neg = *p++ == '-';
	if (p == end)
		return -EINVAL;
	for (; p < end; p++) {
		unsigned d = (unsigned)(unsigned char)*p - '0';

		if (d > 9 || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, d, &v))
			return -EINVAL;
	}
	*mag = v;
	return 0;
}

/* The 8 bytes at s as 8 decimal digits (the first the most significant):
 * 0 and their value in *v, or -1 when one is not a digit.  SWAR: all
 * eight checked and combined in a few operations of 64 bits. */
static inline int dec8(const char *s, uint64_t *v)
{
	uint64_t x;

	memcpy(&x, s, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* every byte 0x30..0x3f, then (+6) none above 0x39 */
	if ((x & 0xf0f0f0f0f0f0f0f0ull) != 0x3030303030303030ull ||
	    ((x + 0x0606060606060606ull) & 0xf0f0f0f0f0f0f0f0ull) != 0x3030303030303030ull)
		return -1;
	x -= 0x3030303030303030ull;
	x = x * 10 + (x >> 8);          /* pairs: byte 2k holds digits 2k, 2k+1 */
	*v = ((x & 0x000000ff000000ffull) * (100 + (1000000ull << 32)) +
	      ((x >> 16) & 0x000000ff000000ffull) * (1 + (10000ull << 32))) >> 32;
	return 0;
#else
	x = 0;
	for (int i = 0; i < 8; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';

		if (d > 9)
			return -1;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
#endif
}

/* The common case: s is 1 to max (at most 19) digits, nothing else, whose
 * value cannot overflow: 0 and the value in *v, or -1 to read it in full. */
static inline int dec_plain(const char *s, size_t len, size_t max, uint64_t *v)
{
	uint64_t x = 0, e;

	if (!len || len > max)
		return -1;
	for (; len >= 8; s += 8, len -= 8) {
		if (dec8(s, &e))
			return -1;
		x = x * 100000000 + e;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';

		if (d > 9)
			return -1;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
}

int otlp_dec_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	int neg;

	if (!dec_plain(s, len, 19, out))
		return 0;
	if (!len || len >= OTLP_DEC_MAX || *s == '-')
		return -EINVAL;
	if (dec_mag(s, len, &v, &neg))
		return -EINVAL;
	*out = neg ? 0 - v : v;
	return 0;
}

int otlp_dec_i64(const char *s, size_t len, int64_t *out)
{
	uint64_t v = 0;
	int neg;

	if (!dec_plain(s, len, 18, &v)) {
		*out = (int64_t)v;
		return 0;
	}
	if (!len || len >= OTLP_DEC_MAX || dec_mag(s, len, &v, &neg))
		return -EINVAL;
	if (v > (neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1))
		return -EINVAL;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

/* A uint64 from a string of digits or an integer; -EINVAL. */
static int u64_of(const struct json_tok *v, uint64_t *out)
{
	if (v->t == JT_INT && v->i >= 0) {
		*out = (uint64_t)v->i;
		return 0;
	}
	if (v->t != JT_STR)
		return -EINVAL;
	return otlp_dec_u64((const char *)v->s, v->len, out);
}

/* An int64 from an integer or a string of digits (proto3 JSON). */
static int i64_of(const struct json_tok *v, int64_t *out)
{
	if (v->t == JT_INT) {
		*out = v->i;
		return 0;
	}
	if (v->t != JT_STR)
		return -EINVAL;
	return otlp_dec_i64((const char *)v->s, v->len, out);
}

/* A number in 0..max from an integer or one of names; -1 otherwise. */
static int enum_of(const struct json_tok *v, const char *const *names, int max)
{
	if (v->t == JT_INT)
		return v->i < 0 || v->i > max ? -1 : (int)v->i;
	for (int i = 0; v->t == JT_STR && i <= max; i++)
		if (key_is(v->s, v->len, names[i]))
			return i;
	return -1;
}

/* An id field: its bytes, 0 absent ("" and null too), 1 when it is not
 * hex/base64 of n bytes (the mapping refuses it). */
static size_t id_of(const struct json_tok *v, uint8_t *out, size_t n)
{
	if (v->t == JT_NULL || (v->t == JT_STR && !v->len))
		return 0;
	if (v->t != JT_STR || otlp_id_parse((const char *)v->s, v->len, out, n))
		return 1;
	return n;
}

static void kvl_reset(struct kvlist *l, int depth)
{
	l->kv = NULL;
	l->n = l->cap = 0;
	l->einval = 0;
	l->depth = depth;
}

static struct av *av_new(struct jd *j, struct otlp_value *out, int depth)
{
	struct av *v = j->av_free;

	if (v)
		j->av_free = v->free_next;
	else if (!(v = zarena_alloc(j->a, sizeof(*v))))
		return NULL;
	/* only the flags: av_end() reads a member's fields when its flag is set,
	 * and the cases that set one fill its fields */
	memset(&v->s_ok, 0, offsetof(struct av, s) - offsetof(struct av, s_ok));
	v->out = out;
	v->depth = depth;
	return v;
}

/* The AnyValue's member, by the precedence above; v goes back to the
 * free list. */
static void av_end(struct jd *j, struct av *v)
{
	struct otlp_value *o = v->out;

	memset(o, 0, sizeof(*o));
	o->type = OTLP_V_BAD;
	if (v->s_ok) {
		o->type = OTLP_V_STRING;
		o->u.s = v->s;
	} else if (v->b_ok) {
		o->type = OTLP_V_BOOL;
		o->u.b = v->b;
	} else if (v->i_set) {
		if (v->i_ok) {
			o->type = OTLP_V_INT;
			o->u.i = v->i;
		}
	} else if (v->d_ok) {
		o->type = OTLP_V_DOUBLE;
		o->u.d = v->d;
	} else if (v->by_ok) {
		o->type = OTLP_V_BYTES_B64;
		o->u.s = v->by;
	} else if (v->arr_set) {
		if (!v->arr_bad) {
			o->type = OTLP_V_ARRAY;
			o->u.arr.v = v->arr;
			o->u.arr.n = v->narr;
		}
	} else if (v->kvl_set) {
		if (!v->kvl.einval) {
			o->type = OTLP_V_KVLIST;
			o->u.kvl.kv = v->kvl.kv;
			o->u.kvl.n = v->kvl.n;
		}
	}
	v->free_next = j->av_free;
	j->av_free = v;
}

/* ---- the frames ---------------------------------------------------------- */

static inline struct frame *push(struct jd *j, enum role t, int array, void *p)
{
	struct frame *f;

	if (__builtin_expect(j->nst == j->capst, 0)) {
		size_t cap = j->capst ? j->capst * 2 : 32;
		struct frame *st = realloc(j->st, cap * sizeof(*st));

		if (!st) {
			oom(j);
			return NULL;
		}
		j->st = st;
		j->capst = cap;
	}
	f = &j->st[j->nst++];
	*f = (struct frame){ .t = t, .array = array, .next = R_SKIP, .p = p };
	return f;
}

/* The role of the value now arriving. */
static enum role role_now(struct jd *j, struct frame **pf)
{
	struct frame *f;

	if (!j->nst) {
		*pf = NULL;
		return R_ROOT;
	}
	f = *pf = &j->st[j->nst - 1];
	if (!f->array)
		return f->next;
	switch (f->t) {
	case R_RSS:     return R_RS;
	case R_KVS:     return R_KV;
	case R_SSS:     return R_SS;
	case R_SPANS:   return R_SPAN;
	case R_LINKS:   return R_LINK;
	case R_EVENTS:  return R_EVENT;
	case R_AV_VALS: return R_AV_ELEM;
	default:        return R_SKIP;
	}
}

/* Begin a resource spans, scope spans, span or event (objects or not). */
static void rs_begin(struct jd *j)
{
	memset(&j->rb, 0, sizeof(j->rb));
}

static void ss_begin(struct jd *j)
{
	memset(&j->sb, 0, sizeof(j->sb));
}

static void span_begin(struct jd *j, int obj)
{
	memset(&j->pb, 0, sizeof(j->pb));
	j->pb.obj = obj;
}

static void event_begin(struct jd *j)
{
	memset(&j->eb, 0, sizeof(j->eb));
}

/* Mark the span unreadable (the mapping rejects it with this reason). */
#define SPAN_BAD(s, why) do { if (!(s)->bad) (s)->bad = (why); } while (0)

static void span_end(struct jd *j)
{
	struct spanb *b = &j->pb;
	struct otlp_span *s = &b->s;
	struct ssb *sb = &j->sb;

	if (grow(j, (void **)&sb->spans, sb->nspans, &sb->cap, sizeof(*sb->spans)))
		return;
	if (!b->obj) {
		memset(s, 0, sizeof(*s));
		s->bad = "expected a span object";
		goto out;
	}
	if (s->trace_len != 16)
		SPAN_BAD(s, "traceId: expected 32 hex digits (or 16 bytes in base64)");
	if (s->parent_len == 1)
		SPAN_BAD(s, "parentSpanId: expected 16 hex digits or \"\"");
	if (b->name_bad)
		SPAN_BAD(s, "name: expected a string");
	if (!b->start_ok)
		s->start_ns = 0;
	if (!b->end_ok)
		SPAN_BAD(s, "endTimeUnixNano: expected nanoseconds since the epoch (a string of digits)");
	if (b->attrs.einval) {
		SPAN_BAD(s, "attributes: expected an array of {key, value}");
		s->attrs = b->attrs.kv;
		s->nattrs = 0;
	} else {
		s->attrs = b->attrs.kv;
		s->nattrs = b->attrs.n;
	}
	if (b->ev_notarr) {
		SPAN_BAD(s, "events: expected an array");
		s->events = NULL;
		s->nevents = 0;
	} else {
		s->events = b->ev;
		s->nevents = b->nev;
		if (b->ev_attrs_bad)
			SPAN_BAD(s, "events: attributes: expected an array of {key, value}");
	}
out:
	sb->spans[sb->nspans++] = *s;
}

static void event_end(struct jd *j)
{
	struct spanb *b = &j->pb;
	struct eventb *e = &j->eb;

	if (grow(j, (void **)&b->ev, b->nev, &b->capev, sizeof(*b->ev)))
		return;
	if (e->attrs.einval)
		b->ev_attrs_bad = 1;
	e->e.attrs = e->attrs.einval ? NULL : e->attrs.kv;
	e->e.nattrs = e->attrs.einval ? 0 : e->attrs.n;
	b->ev[b->nev++] = e->e;
}

static void ss_end(struct jd *j, struct sslist *l)
{
	struct ssb *sb = &j->sb;
	struct ss_item *it;
	int w = sb->scope_set ? 0 : 1;

	if (grow(j, (void **)&l->v, l->n, &l->cap, sizeof(*l->v)))
		return;
	it = &l->v[l->n++];
	memset(it, 0, sizeof(*it));
	it->ss.scope_name = sb->name[w];
	it->ss.scope_version = sb->version[w];
	it->ss.spans = sb->spans;
	it->ss.nspans = sb->spans_bad ? 0 : sb->nspans;
	it->spans_bad = sb->spans_bad;
}

static void rs_end(struct jd *j)
{
	struct rsb *rb = &j->rb;
	struct sslist *l = rb->ss[0].set ? &rb->ss[0] : &rb->ss[1];
	struct otlp_resource_spans *o;
	size_t i = j->nrs;

	if (grow(j, (void **)&j->rs, j->nrs, &j->caprs, sizeof(*j->rs)))
		return;
	o = &j->rs[j->nrs++];
	memset(o, 0, sizeof(*o));
	if (!j->doc_err[0]) {
		if (rb->attrs.einval)
			snprintf(j->doc_err, sizeof(j->doc_err), "resourceSpans[%zu].resource.attributes: "
				 "expected an array of {key, value}", i);
		else if (l->notarr)
			snprintf(j->doc_err, sizeof(j->doc_err),
				 "resourceSpans[%zu].scopeSpans: expected an array", i);
		for (size_t k = 0; !j->doc_err[0] && k < l->n; k++)
			if (l->v[k].spans_bad)
				snprintf(j->doc_err, sizeof(j->doc_err),
					 "resourceSpans[%zu].scopeSpans[%zu].spans: expected an array",
					 i, k);
	}
	if (!rb->attrs.einval) {
		o->attrs = rb->attrs.kv;
		o->nattrs = rb->attrs.n;
	}
	if (l->notarr || !l->n)
		return;
	o->ss = zarena_alloc(j->a, sizeof(*o->ss) * l->n);
	if (!o->ss) {
		j->oom = 1;
		return;
	}
	for (size_t k = 0; k < l->n; k++)
		o->ss[k] = l->v[k].ss;
	o->nss = l->n;
}

/* ---- a value arrives ------------------------------------------------------- */

/* A string value copied for the field (NUL-free: checked by the caller). */
#define COPY(j, v, out) (copy_str((j), (v)->s, (v)->len, (out)) ? oom(j) : 1)

/*
 * A value of role r in frame f: a scalar (its token) or the start of an
 * object (map) or array (arr; then the frame to push).  Returns 0 to stop
 * the parse.  Inlined twice, for scalars and for containers (on_scalar(), on_open()):
 * each copy keeps only its cases' code.
 */
static inline __attribute__((always_inline))
int value(struct jd *j, struct frame *f, enum role r, const struct json_tok *v, int map, int arr)
{
	static const char *const kinds[] = {
		"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
		"SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER",
	};
	static const char *const codes[] = {
		"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR",
	};
	enum role push_as = R_SKIP;     /* a container: what it is read as */
	void *p = NULL;
	struct spanb *sp = &j->pb;

	switch (r) {
	case R_ROOT:
		j->root_obj = map;
		push_as = map ? R_ROOT : R_SKIP;
		break;
	case R_RSS:
		j->nrs = 0;
		j->rs = NULL;
		j->caprs = 0;
		j->doc_err[0] = '\0';
		j->rss_bad = !arr;
		push_as = arr ? R_RSS : R_SKIP;
		break;
	case R_RS:
		rs_begin(j);
		if (map) {
			push_as = R_RS;
			break;
		}
		rs_end(j);
		break;
	case R_RESOURCE:
		kvl_reset(&j->rb.attrs, 0);
		push_as = map ? R_RESOURCE : R_SKIP;
		break;
	case R_KVS: {
		struct kvlist *l = f->p;

		kvl_reset(l, l->depth);
		l->einval = !arr;
		push_as = arr ? R_KVS : R_SKIP;
		p = l;
		break;
	}
	case R_KV: {
		struct kvlist *l = f->p;

		if (!map) {
			l->einval = 1;
			break;
		}
		if (grow(j, (void **)&l->kv, l->n, &l->cap, sizeof(*l->kv)))
			return 0;
		memset(&l->kv[l->n], 0, sizeof(l->kv[l->n]));
		l->kv[l->n].value.type = OTLP_V_BAD;    /* no value: not an AnyValue */
		l->n++;
		push_as = R_KV;
		p = l;
		break;
	}
	case R_KEY: {
		struct kvlist *l = f->p;

		f->key_ok = v->t == JT_STR;
		if (f->key_ok && !COPY(j, v, &l->kv[f->idx].key))
			return 0;
		break;
	}
	case R_VALUE:
	case R_AV_ELEM: {
		struct otlp_value *o;
		int depth;

		if (r == R_VALUE) {
			struct kvlist *l = f->p;

			o = &l->kv[f->idx].value;
			depth = l->depth;
		} else {
			struct av *a = f->p;

			if (grow(j, (void **)&a->arr, a->narr, &a->caparr, sizeof(*a->arr)))
				return 0;
			o = &a->arr[a->narr++];
			depth = a->depth + 1;
		}
		memset(o, 0, sizeof(*o));
		o->type = OTLP_V_BAD;
		if (map && depth <= OTLP_MAX_DEPTH) {
			if (!(p = av_new(j, o, depth)))
				return oom(j);
			push_as = R_AV;
		}
		break;
	}
	case R_AV_S:
	case R_AV_BY: {
		struct av *a = f->p;
		int ok = v->t == JT_STR;

		if (r == R_AV_S) {
			a->s_ok = ok;
			if (ok && !COPY(j, v, &a->s))
				return 0;
		} else {
			a->by_ok = ok;
			if (ok && !COPY(j, v, &a->by))
				return 0;
		}
		break;
	}
	case R_AV_B: {
		struct av *a = f->p;

		a->b_ok = v->t == JT_BOOL;
		a->b = a->b_ok && v->b;
		break;
	}
	case R_AV_I: {
		struct av *a = f->p;

		a->i_set = 1;
		a->i_ok = !i64_of(v, &a->i);
		break;
	}
	case R_AV_D: {
		struct av *a = f->p;

		a->d_ok = v->t == JT_INT || v->t == JT_REAL;
		a->d = v->t == JT_INT ? (double)v->i : v->t == JT_REAL ? v->d : 0;
		break;
	}
	case R_AV_ARR: {
		struct av *a = f->p;

		a->arr_set = map;
		a->arr_bad = 0;
		a->arr = NULL;
		a->narr = a->caparr = 0;
		push_as = map ? R_AV_ARR : R_SKIP;
		p = a;
		break;
	}
	case R_AV_VALS: {
		struct av *a = f->p;

		a->arr = NULL;
		a->narr = a->caparr = 0;
		a->arr_bad = !arr;
		push_as = arr ? R_AV_VALS : R_SKIP;
		p = a;
		break;
	}
	case R_AV_KVL: {
		struct av *a = f->p;

		a->kvl_set = map;
		kvl_reset(&a->kvl, a->depth + 1);
		push_as = map ? R_AV_KVL : R_SKIP;
		p = &a->kvl;
		break;
	}
	case R_SSS: {
		struct sslist *l = &j->rb.ss[f->which];

		memset(l, 0, sizeof(*l));
		l->set = 1;
		l->notarr = !arr;
		push_as = arr ? R_SSS : R_SKIP;
		p = l;
		break;
	}
	case R_SS:
		ss_begin(j);
		if (map) {
			push_as = R_SS;
			p = f->p;
			break;
		}
		ss_end(j, f->p);
		break;
	case R_SCOPE:
		j->sb.name[f->which].p = j->sb.version[f->which].p = NULL;
		j->sb.name[f->which].len = j->sb.version[f->which].len = 0;
		if (!f->which)
			j->sb.scope_set = 1;
		push_as = map ? R_SCOPE : R_SKIP;
		break;
	case R_SCOPE_NAME:
	case R_SCOPE_VERSION: {
		struct otlp_str *o = r == R_SCOPE_NAME ? &j->sb.name[f->which] :
				     &j->sb.version[f->which];

		o->p = NULL;
		o->len = 0;
		if (v->t == JT_STR && !COPY(j, v, o))
			return 0;
		break;
	}
	case R_SPANS:
		j->sb.spans = NULL;
		j->sb.nspans = j->sb.cap = 0;
		j->sb.spans_bad = !arr;
		push_as = arr ? R_SPANS : R_SKIP;
		break;
	case R_SPAN:
		span_begin(j, map);
		if (map) {
			push_as = R_SPAN;
			break;
		}
		span_end(j);
		break;
	case R_TRACE:
		sp->s.trace_len = id_of(v, sp->s.trace_id, 16);
		break;
	case R_SPANID:
		sp->s.span_len = id_of(v, sp->s.span_id, 8);
		break;
	case R_PARENT:
		sp->s.parent_len = id_of(v, sp->s.parent_id, 8);
		break;
	case R_NAME:
		sp->name_bad = v->t != JT_STR;
		sp->s.name.p = NULL;
		sp->s.name.len = 0;
		if (v->t == JT_STR && !COPY(j, v, &sp->s.name))
			return 0;
		break;
	case R_KIND:
		sp->s.kind = enum_of(v, kinds, 5);
		break;
	case R_START:
		sp->start_ok = !u64_of(v, &sp->s.start_ns);
		break;
	case R_END:
		sp->end_ok = !u64_of(v, &sp->s.end_ns);
		break;
	case R_STATUS:
		sp->s.status_code = 0;
		sp->s.status_msg.p = NULL;
		sp->s.status_msg.len = 0;
		push_as = map ? R_STATUS : R_SKIP;
		break;
	case R_ST_CODE:
		sp->s.status_code = enum_of(v, codes, 2);
		break;
	case R_ST_MSG:
		sp->s.status_msg.p = NULL;
		sp->s.status_msg.len = 0;
		if (v->t == JT_STR && !COPY(j, v, &sp->s.status_msg))
			return 0;
		break;
	case R_LINKS:
		sp->s.nlinks = 0;
		push_as = arr ? R_LINKS : R_SKIP;
		break;
	case R_LINK:
		sp->s.nlinks++;
		break;
	case R_EVENTS:
		sp->ev = NULL;
		sp->nev = sp->capev = 0;
		sp->ev_attrs_bad = 0;
		sp->ev_set = 1;
		sp->ev_notarr = !arr;
		push_as = arr ? R_EVENTS : R_SKIP;
		break;
	case R_EVENT:
		event_begin(j);
		if (map) {
			push_as = R_EVENT;
			break;
		}
		event_end(j);
		break;
	case R_EV_NAME:
		j->eb.e.has_name = v->t == JT_STR;
		j->eb.e.name.p = NULL;
		j->eb.e.name.len = 0;
		if (v->t == JT_STR && !COPY(j, v, &j->eb.e.name))
			return 0;
		break;
	case R_EV_TIME:
		if (u64_of(v, &j->eb.e.time_ns))
			j->eb.e.time_ns = 0;
		break;
	default:
		break;
	}
	if (j->oom)
		return 0;
	if (map || arr) {
		struct frame *nf = push(j, push_as, arr, p);

		if (!nf)
			return 0;
		if (push_as == R_KV)
			nf->idx = ((struct kvlist *)p)->n - 1;
		else if (push_as == R_SCOPE)
			nf->which = f->which;
	}
	return 1;
}

/* The role of the value after key k in frame f (an object). */
static enum role key_role(struct frame *f, const unsigned char *k, size_t n)
{
#define K(name) key_is(k, n, name)
	switch (f->t) {
	case R_ROOT:
		return K("resourceSpans") ? R_RSS : R_SKIP;
	case R_RS:
		if (K("resource"))
			return R_RESOURCE;
		if (K("scopeSpans")) {
			f->which = 0;
			return R_SSS;
		}
		if (K("instrumentationLibrarySpans")) {
			f->which = 1;
			return R_SSS;
		}
		return R_SKIP;
	case R_RESOURCE:
		return K("attributes") ? R_KVS : R_SKIP;
	case R_KV:
		return K("key") ? R_KEY : K("value") ? R_VALUE : R_SKIP;
	case R_SS:
		if (K("scope")) {
			f->which = 0;
			return R_SCOPE;
		}
		if (K("instrumentationLibrary")) {
			f->which = 1;
			return R_SCOPE;
		}
		return K("spans") ? R_SPANS : R_SKIP;
	case R_SCOPE:
		return K("name") ? R_SCOPE_NAME : K("version") ? R_SCOPE_VERSION : R_SKIP;
	case R_SPAN:
		switch (n) {
		case 4:
			return K("name") ? R_NAME : K("kind") ? R_KIND : R_SKIP;
		case 5:
			return K("links") ? R_LINKS : R_SKIP;
		case 6:
			return K("spanId") ? R_SPANID : K("status") ? R_STATUS :
			       K("events") ? R_EVENTS : R_SKIP;
		case 7:
			return K("traceId") ? R_TRACE : R_SKIP;
		case 10:
			return K("attributes") ? R_KVS : R_SKIP;
		case 12:
			return K("parentSpanId") ? R_PARENT : R_SKIP;
		case 15:
			return K("endTimeUnixNano") ? R_END : R_SKIP;
		case 17:
			return K("startTimeUnixNano") ? R_START : R_SKIP;
		default:
			return R_SKIP;
		}
	case R_STATUS:
		return K("code") ? R_ST_CODE : K("message") ? R_ST_MSG : R_SKIP;
	case R_EVENT:
		return K("name") ? R_EV_NAME : K("timeUnixNano") ? R_EV_TIME :
		       K("attributes") ? R_KVS : R_SKIP;
	case R_AV:
		/* by the length first (K() compares it too) */
		if (n == 11)
			return K("stringValue") ? R_AV_S : K("doubleValue") ? R_AV_D :
			       K("kvlistValue") ? R_AV_KVL : R_SKIP;
		if (n == 10)
			return K("arrayValue") ? R_AV_ARR : K("bytesValue") ? R_AV_BY : R_SKIP;
		return K("intValue") ? R_AV_I : K("boolValue") ? R_AV_B : R_SKIP;
	case R_AV_ARR:
		return K("values") ? R_AV_VALS : R_SKIP;
	case R_AV_KVL:
		return K("values") ? R_KVS : R_SKIP;
	default:
		return R_SKIP;
	}
#undef K
}

/* ---- the tokens ------------------------------------------------------------ */

/* A scalar value (a string, number, bool or null): 0 or -ENOMEM. */
__attribute__((noinline))
static int on_scalar(struct jd *j, const struct json_tok *v)
{
	struct frame *f;
	enum role r = role_now(j, &f);

	if (f && f->t == R_SKIP)
		return 0;
	return value(j, f, r, v, 0, 0) ? 0 : -ENOMEM;
}

/* An object or array begins: 0 or -ENOMEM. */
__attribute__((noinline))
static int on_open(struct jd *j, const struct json_tok *v)
{
	struct frame *f;
	enum role r = role_now(j, &f);
	int arr = v->t == JT_ARRAY;

	if (f && f->t == R_SKIP)
		return push(j, R_SKIP, arr, NULL) ? 0 : -ENOMEM;
	return value(j, f, r, v, !arr, arr) ? 0 : -ENOMEM;
}

/* The token handlers return 0 or -ENOMEM; not inlined into on_tok(), which
 * then only jumps to them. */
__attribute__((noinline))
static int on_key(struct jd *j, const struct json_tok *t)
{
	struct frame *f = &j->st[j->nst - 1];

	if (f->t == R_SKIP)
		return 0;
	f->next = key_role(f, t->s, t->len);
	if (f->next == R_KVS) {
		/* the kv list the value fills (R_AV_KVL: f->p already) */
		if (f->t == R_SPAN)
			f->p = &j->pb.attrs;
		else if (f->t == R_EVENT)
			f->p = &j->eb.attrs;
		else if (f->t == R_RESOURCE)
			f->p = &j->rb.attrs;
	}
	return 0;
}

/* An object or array ends: what it built is done. */
__attribute__((noinline))
static int on_end(struct jd *j)
{
	struct frame *f = &j->st[j->nst - 1];

	switch (f->t) {
	case R_RS:
		rs_end(j);
		break;
	case R_SS:
		ss_end(j, f->p);
		break;
	case R_SPAN:
		span_end(j);
		break;
	case R_EVENT:
		event_end(j);
		break;
	case R_KV:
		if (!f->key_ok)
			((struct kvlist *)f->p)->einval = 1;
		break;
	case R_AV:
		av_end(j, f->p);
		break;
	default:
		break;
	}
	j->nst--;
	return j->oom ? -ENOMEM : 0;
}

static int on_tok(void *ctx, const struct json_tok *t)
{
	struct jd *j = ctx;

	if (t->t == JT_KEY)
		return on_key(j, t);
	if (t->t == JT_END)
		return on_end(j);
	if (t->t == JT_MAP || t->t == JT_ARRAY)
		return on_open(j, t);
	return on_scalar(j, t);
}

/* ---- the front end -------------------------------------------------------- */

int otlp_json_decode(const char *body, size_t len, struct zarena *a,
		     struct otlp_req *r, char *err, size_t errlen)
{
	struct jd j = { .a = a };
	struct json_tok_err e;
	int ret;

	memset(r, 0, sizeof(*r));
	ret = json_tok_read(body, len, on_tok, &j, &e);
	if (j.oom)
		ret = -ENOMEM;
	if (ret == -ENOMEM) {
		snprintf(err, errlen, "out of memory");
	} else if (ret) {
		snprintf(err, errlen, "body: byte %zu: %s", e.at, e.msg);
	} else if (!j.root_obj || j.rss_bad) {
		snprintf(err, errlen, "resourceSpans: expected {\"resourceSpans\": [...]}");
		ret = -EINVAL;
	} else if (j.doc_err[0]) {
		snprintf(err, errlen, "%s", j.doc_err);
		ret = -EINVAL;
	} else {
		r->rs = j.rs;
		r->nrs = j.nrs;
	}
	free(j.st);
	if (ret)
		memset(r, 0, sizeof(*r));
	return ret;
}
