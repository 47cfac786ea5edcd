// SPDX-License-Identifier: MIT
/*
 * The one mapping of OTLP spans (struct otlp_req, from either front end)
 * to Zipkin spans (OpenTelemetry's Zipkin transformation):
 *
 *   resource attribute service.name  -> localEndpoint.serviceName
 *                                       ("unknown_service" when absent)
 *   kind SERVER/CLIENT/PRODUCER/CONSUMER -> the same Zipkin kind;
 *        INTERNAL, UNSPECIFIED        -> no kind
 *   startTimeUnixNano, endTimeUnixNano -> timestamp, duration (us)
 *   attributes                        -> tags; peer.service also names
 *        the remoteEndpoint
 *   events                            -> annotations ("name", or
 *        "name: {attributes as JSON}")
 *   status ERROR                      -> tag error = the message (or
 *        "true"), otel.status_code = ERROR; OK -> otel.status_code = OK
 *   scope name/version                -> otel.scope.name/.version tags
 *   links                             -> nothing (Zipkin has no links)
 *
 * The way back, for --export: otlp_export.c.  Attribute
 * values follow OpenTelemetry's "mapping to non-OTLP formats": strings as
 * they are, booleans true/false, integers in decimal, doubles in the
 * shortest form that reads back the same, bytes in base64, arrays and
 * maps as JSON (["a","b"], [1,2.5,true], {"k":"v"}).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_str.h"
#include "otlp/otlp.h"

#define OTLP_MAX_TAGS 1024

/* A growing text in malloc'ed memory. */
struct mbuf {
	char *p;
	size_t len, cap;
	int oom;
};

/* b with room for n more bytes and its NUL; 0, or -ENOMEM (b->oom). */
static int mb_grow(struct mbuf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 64;
	char *p;

	if (b->oom)
		return -ENOMEM;
	while (cap < b->len + n + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -ENOMEM;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

static inline void mb_add(struct mbuf *b, const char *s, size_t n)
{
	if ((b->oom || b->len + n + 1 > b->cap) && mb_grow(b, n))
		return;
	if (n == 1)
		b->p[b->len] = s[0];
	else
		memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

__attribute__((format(printf, 2, 3)))
static void mb_printf(struct mbuf *b, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		mb_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* An int64 in decimal (what "%" PRId64 writes) into out (>= 20 bytes):
 * its length. */
static size_t i64_text(int64_t i, char *out)
{
	char tmp[24], *e = tmp + sizeof(tmp), *q = e;
	uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;

	do {
		*--q = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (i < 0)
		*--q = '-';
	memcpy(out, q, (size_t)(e - q));
	return (size_t)(e - q);
}

static void mb_i64(struct mbuf *b, int64_t i)
{
	char tmp[24];

	mb_add(b, tmp, i64_text(i, tmp));
}

/*
 * d as the loop of mb_double() prints it, without printf and strtod, when
 * d is the double nearest to a decimal m / 10^k (m < 10^15, k <= 9) and
 * 1e-4 <= |d| < 1e15: then %.15g prints that decimal in fixed notation
 * (its 15 significant digits hold it, trailing zeros dropped) and it reads
 * back to d.  The length written to out (>= 26 bytes), or 0: use printf.
 */
static size_t mb_decimal(double d, char *out)
{
	static const double p10[] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9 };
	double a = d < 0 ? -d : d;

	if (!(a >= 1e-4 && a < 1e15))
		return 0;
	for (int k = 0; k < 10; k++) {
		double s = a * p10[k];
		char dig[24], *q = dig + sizeof(dig);
		uint64_t m;
		size_t n = 0, nd;

		if (s >= 1e15)
			return 0;
		m = (uint64_t)(s + 0.5);
		if ((double)m / p10[k] != a)
			continue;
		/* the smallest such k: m's last digit is not 0 unless k is 0 */
		do {
			*--q = (char)('0' + m % 10);
			m /= 10;
		} while (m);
		nd = (size_t)(dig + sizeof(dig) - q);
		if (d < 0)
			out[n++] = '-';
		if (nd <= (size_t)k) {          /* 0.000ddd */
			out[n++] = '0';
			out[n++] = '.';
			for (size_t z = nd; z < (size_t)k; z++)
				out[n++] = '0';
			memcpy(out + n, q, nd);
			return n + nd;
		}
		memcpy(out + n, q, nd - (size_t)k);
		n += nd - (size_t)k;
		if (k) {
			out[n++] = '.';
			memcpy(out + n, q + nd - (size_t)k, (size_t)k);
			n += (size_t)k;
		}
		return n;
	}
	return 0;
}

/* A double in the shortest %g form that reads back to the same value. */
static void mb_double(struct mbuf *b, double d, int json)
{
	char tmp[40];
	size_t n;

	if (d != d || d - d != 0) {     /* NaN, Inf: not JSON numbers */
		const char *s = d != d ? "NaN" : d > 0 ? "Infinity" : "-Infinity";

		if (json)
			mb_printf(b, "\"%s\"", s);
		else
			mb_add(b, s, strlen(s));
		return;
	}
	n = mb_decimal(d, tmp);
	if (n) {
		mb_add(b, tmp, n);
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	mb_add(b, tmp, strlen(tmp));
}

static void mb_base64(struct mbuf *b, const struct otlp_str *s)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = (const unsigned char *)s->p;
	char q[4];

	for (size_t i = 0; i < s->len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < s->len)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < s->len)
			v |= p[i + 2];
		q[0] = tab[v >> 18 & 63];
		q[1] = tab[v >> 12 & 63];
		q[2] = i + 1 < s->len ? tab[v >> 6 & 63] : '=';
		q[3] = i + 2 < s->len ? tab[v & 63] : '=';
		mb_add(b, q, 4);
	}
}

static void mb_put(void *b, const char *p, size_t n)
{
	mb_add(b, p, n);
}

/* A JSON string literal of s (common/json_str.h). */
static void mb_json_str(struct mbuf *b, const char *p, size_t len)
{
	if (!json_str_plain(p, len)) {
		json_str_put(mb_put, b, p, len);
		return;
	}
	mb_add(b, "\"", 1);
	mb_add(b, p, len);
	mb_add(b, "\"", 1);
}

/* v as text: a tag value (json 0) or a JSON value inside an array or map.
 * -EINVAL for OTLP_V_NONE/BAD (inside arrays too). */
static int value_text(struct mbuf *b, const struct otlp_value *v, int json, int depth)
{
	if (depth > OTLP_MAX_DEPTH)
		return -EINVAL;
	switch (v->type) {
	case OTLP_V_STRING:
		if (json)
			mb_json_str(b, v->u.s.p, v->u.s.len);
		else
			mb_add(b, v->u.s.p, v->u.s.len);
		return 0;
	case OTLP_V_BOOL:
		if (v->u.b)
			mb_add(b, "true", 4);
		else
			mb_add(b, "false", 5);
		return 0;
	case OTLP_V_INT:
		mb_i64(b, v->u.i);
		return 0;
	case OTLP_V_DOUBLE:
		mb_double(b, v->u.d, json);
		return 0;
	case OTLP_V_BYTES:
	case OTLP_V_BYTES_B64:
		if (json)
			mb_add(b, "\"", 1);
		if (v->type == OTLP_V_BYTES)
			mb_base64(b, &v->u.s);
		else
			mb_add(b, v->u.s.p, v->u.s.len);
		if (json)
			mb_add(b, "\"", 1);
		return 0;
	case OTLP_V_ARRAY:
	case OTLP_V_KVLIST: {
		int map = v->type == OTLP_V_KVLIST;
		size_t n = map ? v->u.kvl.n : v->u.arr.n;

		mb_add(b, map ? "{" : "[", 1);
		for (size_t i = 0; i < n; i++) {
			const struct otlp_kv *kv = map ? &v->u.kvl.kv[i] : NULL;

			if (i)
				mb_add(b, ",", 1);
			if (kv) {
				mb_json_str(b, kv->key.p, kv->key.len);
				mb_add(b, ":", 1);
			}
			if (value_text(b, kv ? &kv->value : &v->u.arr.v[i], 1, depth + 1))
				return -EINVAL;
		}
		mb_add(b, map ? "}" : "]", 1);
		return 0;
	}
	default:
		return -EINVAL;
	}
}

/*
 * A span's tags in zspan_normalize()'s order depend on their keys alone
 * (sorted, the last value of a key kept), and the spans of a request
 * mostly have the same keys in the same order (two sets of them when some
 * spans have an error status): the last two sets of keys as mapped (at
 * most ORD_MAX keys) and the tags normalize kept of each, by their index.
 * A span with the same keys takes that order (normalize then finds them
 * sorted); any other span is normalized whole and its order kept in place
 * of the older set.
 */
#define ORD_MAX 16

struct tag_order {
	struct {
		struct zs_str key[ORD_MAX];
		uint8_t idx[ORD_MAX];
		uint32_t nkeys, nidx;   /* nkeys 0: none kept */
	} set[2];
	unsigned older;                 /* the set to replace next */
};

/* a and b hold the same bytes (key lengths are small: eight bytes a turn) */
static int same_key(struct zs_str a, struct zs_str b)
{
	uint64_t x, y, u, v;

	if (a.len != b.len)
		return 0;
	if (a.p == b.p)
		return 1;
	if (a.len < 8 || a.len > 16)
		return !memcmp(a.p, b.p, a.len);
	memcpy(&x, a.p, 8);
	memcpy(&y, b.p, 8);
	memcpy(&u, a.p + a.len - 8, 8);
	memcpy(&v, b.p + b.len - 8, 8);
	return x == y && u == v;
}

/* z's tags in the order zspan_normalize() gives them, and the error flag,
 * parent and shared as it sets them (zspan_normalize() does it all: the
 * tags' order from o when z's keys are a kept set's). */
static void normalize(struct tag_order *o, struct zspan *z)
{
	struct zs_tag t[ORD_MAX];
	uint32_t n = z->ntags, i;
	unsigned k;

	if (n > ORD_MAX || n < 2) {
		zspan_normalize(z);
		return;
	}
	memcpy(t, z->tags, sizeof(*t) * n);
	for (k = 0; k < 2; k++) {
		if (o->set[k].nkeys != n)
			continue;
		for (i = 0; i < n && same_key(t[i].key, o->set[k].key[i]); i++)
			;
		if (i < n)
			continue;
		for (i = 0; i < o->set[k].nidx; i++)
			z->tags[i] = t[o->set[k].idx[i]];
		z->ntags = o->set[k].nidx;
		o->older = !k;
		zspan_normalize(z);
		return;
	}
	zspan_normalize(z);
	/* the order it chose, by identity of the tags it kept */
	k = o->older;
	o->older = !k;
	o->set[k].nkeys = 0;
	for (i = 0; i < z->ntags; i++) {
		uint32_t j, hit = ORD_MAX, nhit = 0;

		for (j = 0; j < n; j++)
			if (t[j].key.p == z->tags[i].key.p && t[j].key.len == z->tags[i].key.len &&
			    t[j].value.p == z->tags[i].value.p &&
			    t[j].value.len == z->tags[i].value.len) {
				hit = j;
				nhit++;
			}
		if (nhit != 1)
			return;         /* not one tag: keep no order */
		o->set[k].idx[i] = (uint8_t)hit;
	}
	for (i = 0; i < n; i++)
		o->set[k].key[i] = t[i].key;
	o->set[k].nidx = z->ntags;
	o->set[k].nkeys = n;
}

struct mctx {
	struct zarena *a;
	char *err;
	size_t errlen;
	size_t rs, ss, sp;      /* where: resourceSpans[rs].scopeSpans[ss].spans[sp] */
	uint32_t tagcap;
	struct mbuf b;          /* scratch text, reused span after span */
	struct tag_order ord;   /* the last span's tag keys and their order */
};

/* The scratch text, emptied. */
static struct mbuf *scratch(struct mctx *m)
{
	m->b.len = 0;
	m->b.oom = 0;
	return &m->b;
}

__attribute__((format(printf, 2, 3)))
static int bad(struct mctx *m, const char *fmt, ...)
{
	char msg[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(m->err, m->errlen, "resourceSpans[%zu].scopeSpans[%zu].spans[%zu].%s",
		 m->rs, m->ss, m->sp, msg);
	return -EINVAL;
}

/* A tag whose strings outlive the spans (literals, the request's strings,
 * or text copied into the arena): not copied again. */
static int add_tag(struct mctx *m, struct zspan *z, struct zs_str k, struct zs_str v)
{
	if (z->ntags == m->tagcap)
		return bad(m, "attributes: more than %d", OTLP_MAX_TAGS);
	z->tags[z->ntags].key = k;
	z->tags[z->ntags].value = v;
	z->ntags++;
	return 0;
}

/* The request's string s as it is (it lives as long as the spans: see
 * otlp_map() in otlp.h); "" when empty. */
static struct zs_str req_str(const char *p, size_t len)
{
	return len ? (struct zs_str){ p, (uint32_t)len } : (struct zs_str){ "", 0 };
}

static int add_attrs(struct mctx *m, struct zspan *z, const struct otlp_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct otlp_value *v = &kv[i].value;
		struct zs_str val;
		int ret;

		if (!kv[i].key.len)
			return bad(m, "attributes[%zu].key: expected a non-empty string", i);
		if (v->type == OTLP_V_STRING) {
			/* as it is: no text to make, no copy */
			val = req_str(v->u.s.p, v->u.s.len);
		} else if (v->type == OTLP_V_BOOL) {
			val = v->u.b ? (struct zs_str)ZS_STR("true") : (struct zs_str)ZS_STR("false");
		} else if (v->type == OTLP_V_INT) {
			char tmp[24];
			size_t tn = i64_text(v->u.i, tmp);

			if (zarena_str(m->a, &val, tmp, tn, 0))
				return -ENOMEM;
		} else {
			struct mbuf *b = scratch(m);

			if (value_text(b, v, 0, 0))
				return bad(m, "attributes[%zu].value: expected an AnyValue "
					   "({\"stringValue\": ...})", i);
			if (b->oom || zarena_str(m->a, &val, b->p ? b->p : "", b->len, 0))
				return -ENOMEM;
		}
		ret = add_tag(m, z, req_str(kv[i].key.p, kv[i].key.len), val);
		if (!ret && kv[i].key.len == 12 && !memcmp(kv[i].key.p, "peer.service", 12))
			ret = zarena_str(m->a, &z->remote.service, val.p, val.len, 1) ? -ENOMEM : 0;
		if (ret)
			return ret;
	}
	return 0;
}

static int add_event(struct mctx *m, struct zspan *z, const struct otlp_event *ev, size_t i)
{
	struct zs_annotation *an = &z->annotations[z->nannotations];
	struct mbuf *b = scratch(m);
	int ret;

	if (!ev->has_name)
		return bad(m, "events[%zu].name: expected a string", i);
	if (!ev->time_ns)
		return bad(m, "events[%zu].timeUnixNano: expected nanoseconds since the epoch", i);
	an->ts_us = ev->time_ns / 1000;
	if (!ev->nattrs) {
		an->value = req_str(ev->name.p, ev->name.len);
		ret = 0;
	} else {
		struct otlp_value map = { .type = OTLP_V_KVLIST,
					  .u.kvl = { (struct otlp_kv *)ev->attrs, ev->nattrs } };

		mb_add(b, ev->name.p, ev->name.len);
		mb_add(b, ": ", 2);
		if (value_text(b, &map, 0, 0))
			return bad(m, "events[%zu].attributes: expected {key, value: AnyValue}", i);
		ret = b->oom ? -ENOMEM : zarena_str(m->a, &an->value, b->p, b->len, 0);
	}
	if (ret)
		return -ENOMEM;
	z->nannotations++;
	return 0;
}

static uint64_t be64(const uint8_t *b)
{
	uint64_t v;

	memcpy(&v, b, 8);
	return __builtin_bswap64(v);
}

/* The scope's name and version (absent: len 0). */
struct scope {
	struct zs_str name, version;
};

static int map_span(struct mctx *m, const struct otlp_span *s, const struct zs_str *svc,
		    const struct scope *sc, struct zspan *z)
{
	static const uint8_t kinds[] = {
		SPAN_KIND_UNSET, SPAN_KIND_UNSET, SPAN_KIND_SERVER, SPAN_KIND_CLIENT,
		SPAN_KIND_PRODUCER, SPAN_KIND_CONSUMER,
	};
	int ret;

	memset(z, 0, sizeof(*z));
	if (s->bad)
		return bad(m, "%s", s->bad);
	if (s->trace_len != 16)
		return bad(m, "traceId: expected 16 bytes (32 hex digits in JSON), got %zu",
			   s->trace_len);
	z->trace_hi = be64(s->trace_id);
	z->trace_lo = be64(s->trace_id + 8);
	if (!z->trace_hi && !z->trace_lo)
		return bad(m, "traceId: all zeros is not a valid id");
	if (s->span_len != 8 || !(z->id = be64(s->span_id)))
		return bad(m, "spanId: expected 16 hex digits, not all zeros (8 bytes)");
	if (s->parent_len && s->parent_len != 8)
		return bad(m, "parentSpanId: expected 16 hex digits (8 bytes) or none");
	z->parent_id = s->parent_len ? be64(s->parent_id) : 0;
	if (s->name.len && zarena_str(m->a, &z->name, s->name.p, s->name.len, 1))
		return -ENOMEM;
	if (s->kind < 0 || s->kind > 5)
		return bad(m, "kind: expected 0..5 or SPAN_KIND_*");
	z->kind = kinds[s->kind];
	if (!s->start_ns)
		return bad(m, "startTimeUnixNano: expected nanoseconds since the epoch (a string of digits)");
	if (s->end_ns < s->start_ns)
		return bad(m, "endTimeUnixNano: %" PRIu64 " is before startTimeUnixNano %" PRIu64,
			   s->end_ns, s->start_ns);
	z->timestamp_us = s->start_ns / 1000;
	z->duration_us = (s->end_ns - s->start_ns) / 1000;
	if (!z->duration_us)
		z->duration_us = 1;
	z->local.service = *svc;

	if (s->nattrs > OTLP_MAX_TAGS)
		return bad(m, "attributes: more than %d", OTLP_MAX_TAGS);
	m->tagcap = (uint32_t)s->nattrs + 4; /* scope name, version, status x2 */
	z->tags = zarena_alloc(m->a, sizeof(*z->tags) * m->tagcap);
	if (!z->tags)
		return -ENOMEM;
	if ((ret = add_attrs(m, z, s->attrs, s->nattrs)))
		return ret;
	if (sc->name.len &&
	    (ret = add_tag(m, z, (struct zs_str)ZS_STR("otel.scope.name"), sc->name)))
		return ret;
	if (sc->version.len &&
	    (ret = add_tag(m, z, (struct zs_str)ZS_STR("otel.scope.version"), sc->version)))
		return ret;
	if (s->status_code < 0 || s->status_code > 2)
		return bad(m, "status.code: expected 0..2 or STATUS_CODE_*");
	if (s->status_code == 2) {
		if ((ret = add_tag(m, z, (struct zs_str)ZS_STR("otel.status_code"),
					(struct zs_str)ZS_STR("ERROR"))) ||
		    (ret = s->status_msg.len ?
			   add_tag(m, z, (struct zs_str)ZS_STR("error"),
				   req_str(s->status_msg.p, s->status_msg.len)) :
			   add_tag(m, z, (struct zs_str)ZS_STR("error"),
					(struct zs_str)ZS_STR("true"))))
			return ret;
	} else if (s->status_code == 1 &&
		   (ret = add_tag(m, z, (struct zs_str)ZS_STR("otel.status_code"),
				       (struct zs_str)ZS_STR("OK")))) {
		return ret;
	}
	if (s->nevents) {
		z->annotations = zarena_alloc(m->a, sizeof(*z->annotations) * s->nevents);
		if (!z->annotations)
			return -ENOMEM;
	}
	for (size_t i = 0; i < s->nevents; i++)
		if ((ret = add_event(m, z, &s->events[i], i)))
			return ret;
	normalize(&m->ord, z);
	return 0;
}

/* The service.name resource attribute ("unknown_service" when none). */
static int service_of(struct zarena *a, const struct otlp_resource_spans *rs, struct zs_str *svc)
{
	*svc = ZS_STR("unknown_service");
	for (size_t i = 0; i < rs->nattrs; i++) {
		const struct otlp_kv *kv = &rs->attrs[i];

		if (kv->key.len == 12 && !memcmp(kv->key.p, "service.name", 12) &&
		    kv->value.type == OTLP_V_STRING && kv->value.u.s.len)
			return zarena_str(a, svc, kv->value.u.s.p, kv->value.u.s.len, 1) ?
			       -ENOMEM : 0;
	}
	return 0;
}

size_t otlp_req_nspans(const struct otlp_req *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nrs; i++)
		for (size_t j = 0; j < r->rs[i].nss; j++)
			n += r->rs[i].ss[j].nspans;
	return n;
}

int otlp_map(const struct otlp_req *r, struct zarena *a, struct otlp_result *res)
{
	size_t total = otlp_req_nspans(r);
	char err[512];
	struct mctx m = { .a = a, .err = err, .errlen = sizeof(err) };
	int ret = 0;

	memset(res, 0, sizeof(*res));
	if (!total)
		return 0;
	res->spans = zarena_alloc(a, sizeof(*res->spans) * total);
	if (!res->spans)
		return -ENOMEM;
	for (size_t i = 0; i < r->nrs; i++) {
		const struct otlp_resource_spans *rs = &r->rs[i];
		struct zs_str svc;

		if (service_of(a, rs, &svc)) {
			ret = -ENOMEM;
			goto out;
		}
		for (size_t j = 0; j < rs->nss; j++) {
			const struct otlp_scope_spans *ss = &rs->ss[j];
			struct scope sc;

			sc.name = req_str(ss->scope_name.p, ss->scope_name.len);
			sc.version = req_str(ss->scope_version.p, ss->scope_version.len);

			for (size_t k = 0; k < ss->nspans; k++) {
				m.rs = i;
				m.ss = j;
				m.sp = k;
				ret = map_span(&m, &ss->spans[k], &svc, &sc, &res->spans[res->nspans]);
				if (ret == -ENOMEM)
					goto out;
				if (!ret) {
					res->nspans++;
					continue;
				}
				ret = 0;
				if (!res->rejected++)
					snprintf(res->first_error, sizeof(res->first_error), "%s", err);
			}
		}
	}
out:
	free(m.b.p);
	return ret;
}
