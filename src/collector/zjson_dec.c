// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 JSON (POST /api/v2/spans) -> struct zspan, streamed:
 * common/json_tok.c hands over every key and value and they fill the span
 * being read, with no tree of values (zjson_parse_spans(), zjson.h).
 *
 * The answers are those of the tree reader it replaced (jansson; kept as
 * tests/fuzz/zjson_tree.c, fuzz_zjson.c's oracle):
 *
 *   - a key given twice: the last one counts (a tag keeps the place of
 *     its first key, which only matters to which bad tag is named);
 *   - a span's fields are checked in one order whatever order they come
 *     in: traceId, id, parentId, kind, name, timestamp, duration,
 *     localEndpoint, remoteEndpoint, annotations, tags, debug, shared;
 *     an endpoint's serviceName, ipv4, ipv6, port; an annotation's
 *     timestamp, value; the first problem is named, the spans after it
 *     are only counted;
 *   - a syntax error anywhere wins over a problem of content; then a body
 *     that is an object, not an array.
 *
 * Leniencies are zipkin2's (zjson.c's header): an IP that does not parse
 * is dropped, a negative timestamp or duration is absent, a port of 0 or
 * less is none.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/zjson.h"
#include "common/json_tok.h"
#include "common/spanrec.h"

/* A span's fields, in the order they are checked. */
enum field {
	F_TRACE, F_ID, F_PARENT, F_KIND, F_NAME, F_TS, F_DUR, F_LOCAL, F_REMOTE,
	F_ANN, F_TAGS, F_DEBUG, F_SHARED, F_N, F_NONE = F_N,
};

/* An endpoint's fields, in the order they are checked. */
enum epfield { E_SVC, E_IPV4, E_IPV6, E_PORT, E_N, E_NONE = E_N };

static const char *const ep_names[E_N] = { "serviceName", "ipv4", "ipv6", "port" };

/* The endpoint being read. */
struct epb {
	struct zs_endpoint *out;
	const char *field;              /* "localEndpoint" ... */
	enum epfield k;                 /* the field whose value comes next */
	uint8_t bad[E_N];
	struct zs_str svc;
	struct zs_endpoint ip[2];       /* what ipv4 and ipv6 gave */
	uint16_t port;
};

/* The annotation being read: 0 absent, 1 read, 2 not of its type. */
struct annb {
	int k;                          /* 0 timestamp, 1 value, -1 other */
	int ts_st, v_st;
	uint64_t ts;
	struct zs_str v;
};

struct zd {
	struct zarena *a;
	int skip;                       /* the depth of the container skipped, or -1 */
	int root;                       /* the body is 1 an array, 2 an object */
	int scalar_root;
	size_t idx;                     /* elements of the array so far */
	int refused;                    /* doc_err holds the first problem */
	char doc_err[512];
	struct zspan *spans;
	size_t nspans, cap;

	/* the span being read (spans do not nest) */
	struct zspan s;
	int in_span;
	enum field f;                   /* the field whose value comes next */
	uint8_t seen[F_N];
	char msg[F_N][200];             /* "field: problem", when seen */
	struct epb ep;
	struct annb an;
	size_t nann_el, capann;         /* annotations: elements read, room */
	size_t captags, cur_tag;
	uint8_t *tag_bad;               /* per tag: 0, or 1 null, 2 array, 3 object */
	size_t cap_tag_bad;
};

__attribute__((format(printf, 3, 4)))
static void bad(struct zd *z, enum field f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(z->msg[f], sizeof(z->msg[f]), fmt, ap);
	va_end(ap);
}

static enum field field_of(const unsigned char *k, size_t n)
{
#define K(s) (n == sizeof(s) - 1 && !memcmp(k, s, n))
	switch (n) {
	case 2:
		return K("id") ? F_ID : F_NONE;
	case 4:
		return K("kind") ? F_KIND : K("name") ? F_NAME : K("tags") ? F_TAGS : F_NONE;
	case 5:
		return K("debug") ? F_DEBUG : F_NONE;
	case 6:
		return K("shared") ? F_SHARED : F_NONE;
	case 7:
		return K("traceId") ? F_TRACE : F_NONE;
	case 8:
		return K("parentId") ? F_PARENT : K("duration") ? F_DUR : F_NONE;
	case 9:
		return K("timestamp") ? F_TS : F_NONE;
	case 11:
		return K("annotations") ? F_ANN : F_NONE;
	case 13:
		return K("localEndpoint") ? F_LOCAL : F_NONE;
	case 14:
		return K("remoteEndpoint") ? F_REMOTE : F_NONE;
	default:
		return F_NONE;
	}
#undef K
}

/* A container not read: skipped with what it holds. */
static int skip(struct zd *z, const struct json_tok *t)
{
	if (t->t == JT_MAP || t->t == JT_ARRAY)
		z->skip = t->depth;
	return 0;
}

/* ---- a span's scalar fields ----------------------------------------------- */

/* A span id: 1..16 lowercase hex digits. */
static void id_value(struct zd *z, enum field f, const struct json_tok *t, uint64_t *out,
		     int zero_ok)
{
	const char *name = f == F_ID ? "id" : "parentId";

	*out = 0;
	if (t->t != JT_STR || !t->len || t->len > 16 ||
	    spanrec_hex_u64((const char *)t->s, t->len, true, out))
		bad(z, f, "%s: must be 1 to 16 lowercase hex characters", name);
	else if (!*out && !zero_ok)
		bad(z, f, "%s: must not be all zeros", name);
}

static void trace_value(struct zd *z, const struct json_tok *t)
{
	struct zspan *s = &z->s;
	const char *p = (const char *)t->s;

	s->trace_hi = s->trace_lo = 0;
	if (t->t != JT_STR || (t->len != 16 && t->len != 32) ||
	    (t->len == 32 && (spanrec_hex_u64(p, 16, true, &s->trace_hi) ||
			      spanrec_hex_u64(p + 16, 16, true, &s->trace_lo))) ||
	    (t->len == 16 && spanrec_hex_u64(p, 16, true, &s->trace_lo)))
		bad(z, F_TRACE, "traceId: must be 16 or 32 lowercase hex characters");
	else if (!s->trace_hi && !s->trace_lo)
		bad(z, F_TRACE, "traceId: must not be all zeros");
}

/* A timestamp or duration: as zipkin2's Span.Builder, a negative one is
 * dropped (absent) and the span kept. */
static void time_value(struct zd *z, enum field f, const struct json_tok *t, uint64_t *out)
{
	*out = 0;
	if (t->t == JT_NULL)
		return;
	if (t->t != JT_INT)
		bad(z, f, "%s: must be an integer (microseconds)",
		    f == F_TS ? "timestamp" : "duration");
	else if (t->i > 0)
		*out = (uint64_t)t->i;
}

static void flag_value(struct zd *z, enum field f, const struct json_tok *t, uint8_t *out)
{
	*out = 0;
	if (t->t == JT_BOOL)
		*out = (uint8_t)!!t->b;
	else if (t->t != JT_NULL)
		bad(z, f, "%s: must be true or false", f == F_DEBUG ? "debug" : "shared");
}

/* ---- endpoints ---------------------------------------------------------------- */

static void ep_begin(struct zd *z, enum field f)
{
	struct epb *e = &z->ep;

	memset(e, 0, sizeof(*e));
	e->out = f == F_LOCAL ? &z->s.local : &z->s.remote;
	e->field = f == F_LOCAL ? "localEndpoint" : "remoteEndpoint";
	e->k = E_NONE;
}

static int ep_value(struct zd *z, const struct json_tok *t)
{
	struct epb *e = &z->ep;

	if (e->k == E_NONE)
		return skip(z, t);
	e->bad[e->k] = 0;
	switch (e->k) {
	case E_SVC:
		e->svc = (struct zs_str){ 0 };
		if (t->t == JT_STR)
			return zarena_str(z->a, &e->svc, (const char *)t->s, t->len, 1);
		e->bad[E_SVC] = t->t != JT_NULL;
		break;
	case E_IPV4:
	case E_IPV6: {
		struct zs_endpoint *ip = &e->ip[e->k == E_IPV6];

		memset(ip, 0, sizeof(*ip));
		/* not an address: the field is dropped and the span kept, as
		 * zipkin2's Endpoint.Builder.parseIp() does */
		if (t->t == JT_STR && t->len)
			zs_ep_set_ip(ip, (const char *)t->s, t->len);
		e->bad[e->k] = t->t != JT_STR && t->t != JT_NULL;
		break;
	}
	case E_PORT:
		e->port = 0;
		if (t->t == JT_INT && t->i <= 65535)
			e->port = t->i > 0 ? (uint16_t)t->i : 0;
		else
			e->bad[E_PORT] = t->t != JT_NULL;
		break;
	default:
		break;
	}
	return skip(z, t);
}

static void ep_end(struct zd *z, enum field f)
{
	struct epb *e = &z->ep;

	for (int k = 0; k < E_N; k++)
		if (e->bad[k]) {
			bad(z, f, "%s.%s: %s", e->field, ep_names[k],
			    k == E_PORT ? "must be an integer up to 65535" : "must be a string");
			return;
		}
	e->out->service = e->svc;
	for (int six = 0; six < 2; six++) {
		if (e->ip[six].ipv4[0])
			memcpy(e->out->ipv4, e->ip[six].ipv4, sizeof(e->out->ipv4));
		if (e->ip[six].ipv6[0])
			memcpy(e->out->ipv6, e->ip[six].ipv6, sizeof(e->out->ipv6));
	}
	e->out->port = e->port;
}

/* ---- annotations ---------------------------------------------------------------- */

static int ann_value(struct zd *z, const struct json_tok *t)
{
	struct annb *an = &z->an;

	if (an->k == 0) {
		an->ts_st = t->t == JT_INT && t->i >= 0 ? 1 : 2;
		an->ts = an->ts_st == 1 ? (uint64_t)t->i : 0;
	} else if (an->k == 1) {
		an->v_st = t->t == JT_STR ? 1 : 2;
		if (an->v_st == 1 && zarena_str(z->a, &an->v, (const char *)t->s, t->len, 0))
			return -ENOMEM;
	}
	return skip(z, t);
}

/* An element of annotations ends (an object when obj). */
static int ann_end(struct zd *z, int obj)
{
	struct annb *an = &z->an;
	struct zspan *s = &z->s;
	size_t j = z->nann_el++;

	if (z->msg[F_ANN][0])
		return 0;
	if (!obj)
		bad(z, F_ANN, "annotations[%zu]: must be an object {\"timestamp\":..,\"value\":..}", j);
	else if (an->ts_st != 1)
		bad(z, F_ANN, "annotations[%zu].timestamp: %s", j,
		    an->ts_st ? "must be a non-negative integer (microseconds)" : "missing");
	else if (an->v_st != 1)
		bad(z, F_ANN, "annotations[%zu].value: %s", j, an->v_st ? "must be a string" : "missing");
	if (z->msg[F_ANN][0])
		return 0;
	if (zarena_grow(z->a, (void **)&s->annotations, s->nannotations, &z->capann,
			sizeof(*s->annotations)))
		return -ENOMEM;
	s->annotations[s->nannotations++] = (struct zs_annotation){ an->ts, an->v };
	return 0;
}

/* ---- tags --------------------------------------------------------------------- */

/* A tag's key: its place (the first time the key came) is the current tag. */
static int tag_key(struct zd *z, const struct json_tok *t)
{
	struct zspan *s = &z->s;
	size_t i;

	for (i = 0; i < s->ntags; i++)
		if (s->tags[i].key.len == t->len && !memcmp(s->tags[i].key.p, t->s, t->len))
			break;
	z->cur_tag = i;
	if (i < s->ntags)
		return 0;
	if (zarena_grow(z->a, (void **)&s->tags, s->ntags, &z->captags, sizeof(*s->tags)))
		return -ENOMEM;
	if (s->ntags == z->cap_tag_bad) {
		size_t cap = z->cap_tag_bad ? z->cap_tag_bad * 2 : 16;
		uint8_t *b = realloc(z->tag_bad, cap);

		if (!b)
			return -ENOMEM;
		z->tag_bad = b;
		z->cap_tag_bad = cap;
	}
	if (zarena_str(z->a, &s->tags[i].key, (const char *)t->s, t->len, 0))
		return -ENOMEM;
	s->tags[i].value = (struct zs_str){ "", 0 };
	z->tag_bad[i] = 0;
	s->ntags++;
	return 0;
}

/* A tag's value: a string, or a number or boolean as its text. */
static int tag_value(struct zd *z, const struct json_tok *t)
{
	struct zs_tag *tag = &z->s.tags[z->cur_tag];
	const char *val;
	char num[64];
	size_t vlen;

	z->tag_bad[z->cur_tag] = 0;
	switch (t->t) {
	case JT_STR:
		val = (const char *)t->s;
		vlen = t->len;
		break;
	case JT_INT:
		val = num;
		vlen = (size_t)snprintf(num, sizeof(num), "%lld", t->i);
		break;
	case JT_REAL:
		val = num;
		vlen = (size_t)snprintf(num, sizeof(num), "%.17g", t->d);
		break;
	case JT_BOOL:
		val = t->b ? "true" : "false";
		vlen = strlen(val);
		break;
	default:
		z->tag_bad[z->cur_tag] = t->t == JT_NULL ? 1 : t->t == JT_ARRAY ? 2 : 3;
		return skip(z, t);
	}
	return zarena_str(z->a, &tag->value, val, vlen, 0);
}

static void tags_end(struct zd *z)
{
	static const char *const what[] = { "", "null", "an array", "an object" };
	struct zspan *s = &z->s;

	for (size_t i = 0; i < s->ntags; i++)
		if (z->tag_bad[i]) {
			bad(z, F_TAGS, "tags.%.*s: must be a string (not %s)",
			    (int)(s->tags[i].key.len < 100 ? s->tags[i].key.len : 100),
			    s->tags[i].key.p, what[z->tag_bad[i]]);
			return;
		}
}

/* ---- a span ------------------------------------------------------------------- */

static void span_begin(struct zd *z)
{
	memset(&z->s, 0, sizeof(z->s));
	memset(z->seen, 0, sizeof(z->seen));
	z->in_span = 1;
	z->f = F_NONE;
}

/* A value of the span's field z->f (depth 2). */
static int span_value(struct zd *z, const struct json_tok *t)
{
	struct zspan *s = &z->s;
	enum field f = z->f;

	if (f == F_NONE)
		return skip(z, t);
	z->seen[f] = 1;
	z->msg[f][0] = '\0';
	switch (f) {
	case F_TRACE:
		trace_value(z, t);
		break;
	case F_ID:
		id_value(z, f, t, &s->id, 0);
		break;
	case F_PARENT:
		s->parent_id = 0;
		if (t->t != JT_NULL)
			id_value(z, f, t, &s->parent_id, 1);
		break;
	case F_KIND:
		s->kind = 0;
		if (t->t == JT_NULL)
			break;
		for (int i = 1; t->t == JT_STR && i < SPAN_KIND_MAX; i++)
			if (zjson_kinds[i] && strlen(zjson_kinds[i]) == t->len &&
			    !memcmp(t->s, zjson_kinds[i], t->len))
				s->kind = (uint8_t)i;
		if (!s->kind)
			bad(z, f, "kind: must be CLIENT, SERVER, PRODUCER or CONSUMER");
		break;
	case F_NAME:
		s->name = (struct zs_str){ 0 };
		if (t->t == JT_STR)
			return zarena_str(z->a, &s->name, (const char *)t->s, t->len, 1);
		if (t->t != JT_NULL)
			bad(z, f, "name: must be a string");
		break;
	case F_TS:
		time_value(z, f, t, &s->timestamp_us);
		break;
	case F_DUR:
		time_value(z, f, t, &s->duration_us);
		break;
	case F_LOCAL:
	case F_REMOTE:
		memset(f == F_LOCAL ? &s->local : &s->remote, 0, sizeof(s->local));
		if (t->t == JT_MAP) {
			ep_begin(z, f);
			return 0;
		}
		if (t->t != JT_NULL)
			bad(z, f, "%s: must be an object", f == F_LOCAL ? "localEndpoint" : "remoteEndpoint");
		break;
	case F_ANN:
		s->annotations = NULL;
		s->nannotations = 0;
		z->capann = z->nann_el = 0;
		if (t->t == JT_ARRAY)
			return 0;
		if (t->t != JT_NULL)
			bad(z, f, "annotations: must be an array");
		break;
	case F_TAGS:
		s->tags = NULL;
		s->ntags = 0;
		z->captags = 0;
		if (t->t == JT_MAP)
			return 0;
		if (t->t != JT_NULL)
			bad(z, f, "tags: must be an object of strings");
		break;
	case F_DEBUG:
		flag_value(z, f, t, &s->debug);
		break;
	case F_SHARED:
		flag_value(z, f, t, &s->shared);
		break;
	default:
		break;
	}
	return skip(z, t);
}

/* The span object ends: its first problem refuses the body, else it is kept. */
static int span_end(struct zd *z)
{
	static const char *const missing[] = { [F_TRACE] = "traceId", [F_ID] = "id" };

	z->in_span = 0;
	for (int f = 0; f < F_N; f++) {
		const char *m = z->msg[f];

		if (!z->seen[f]) {
			if (f != F_TRACE && f != F_ID)
				continue;
			m = NULL;
		} else if (!m[0]) {
			continue;
		}
		if (m)
			snprintf(z->doc_err, sizeof(z->doc_err), "span %zu: %s", z->idx, m);
		else
			snprintf(z->doc_err, sizeof(z->doc_err), "span %zu: %s: missing", z->idx,
				 missing[f]);
		z->refused = 1;
		return 0;
	}
	zspan_normalize(&z->s);
	if (zarena_grow(z->a, (void **)&z->spans, z->nspans, &z->cap, sizeof(*z->spans)))
		return -ENOMEM;
	z->spans[z->nspans++] = z->s;
	return 0;
}

/* ---- the tokens ---------------------------------------------------------------- */

/* An element of the body's array (depth 1). */
static int element(struct zd *z, const struct json_tok *t)
{
	if (t->t == JT_END) {
		int ret = z->in_span ? span_end(z) : 0;

		z->idx++;
		return ret;
	}
	if (t->t == JT_MAP && !z->refused) {
		span_begin(z);
		return 0;
	}
	if (!z->refused) {
		snprintf(z->doc_err, sizeof(z->doc_err), "span %zu: span: must be a JSON object",
			 z->idx);
		z->refused = 1;
	}
	if (t->t == JT_MAP || t->t == JT_ARRAY)
		z->skip = t->depth;
	z->idx++;
	return 0;
}

/* A key or value inside the span's field z->f (depth 3 and 4). */
static int inner(struct zd *z, const struct json_tok *t)
{
	switch (z->f) {
	case F_LOCAL:
	case F_REMOTE:
		if (t->t == JT_KEY) {
			z->ep.k = E_NONE;
			for (int k = 0; k < E_N; k++)
				if (strlen(ep_names[k]) == t->len && !memcmp(t->s, ep_names[k], t->len))
					z->ep.k = (enum epfield)k;
			return 0;
		}
		return ep_value(z, t);
	case F_ANN:
		if (t->depth == 3) {
			if (t->t == JT_END)
				return ann_end(z, 1);
			if (t->t == JT_MAP) {
				memset(&z->an, 0, sizeof(z->an));
				z->an.k = -1;
				return 0;
			}
			skip(z, t);
			return ann_end(z, 0);
		}
		if (t->t == JT_KEY) {
			z->an.k = t->len == 9 && !memcmp(t->s, "timestamp", 9) ? 0 :
				  t->len == 5 && !memcmp(t->s, "value", 5) ? 1 : -1;
			return 0;
		}
		return ann_value(z, t);
	case F_TAGS:
		if (t->t == JT_KEY)
			return tag_key(z, t);
		return tag_value(z, t);
	default:
		return skip(z, t);
	}
}

static int on_tok(void *ctx, const struct json_tok *t)
{
	struct zd *z = ctx;

	if (z->skip >= 0) {
		if (t->t == JT_END && t->depth == z->skip)
			z->skip = -1;
		return 0;
	}
	switch (t->depth) {
	case 0:
		if (t->t == JT_ARRAY)
			z->root = 1;
		else if (t->t == JT_MAP)
			z->root = 2, z->skip = 0;
		else if (t->t != JT_END)
			z->scalar_root = 1;
		return 0;
	case 1:
		return element(z, t);
	case 2:
		if (t->t == JT_KEY) {
			z->f = field_of(t->s, t->len);
			return 0;
		}
		if (t->t == JT_END) {
			/* the end of an endpoint, annotations or tags */
			if (z->f == F_LOCAL || z->f == F_REMOTE)
				ep_end(z, z->f);
			else if (z->f == F_TAGS)
				tags_end(z);
			return 0;
		}
		return span_value(z, t);
	default:
		return inner(z, t);
	}
}

/* ---- the front end ---------------------------------------------------------------- */

int zjson_parse_spans(const char *body, size_t len, struct zarena *a,
		      struct zspan **out, size_t *n, char *err, size_t errlen)
{
	struct zd z = { .a = a, .skip = -1 };
	struct json_tok_err e;
	int ret;

	*out = NULL;
	*n = 0;
	ret = json_tok_read(body, len, on_tok, &z, &e);
	if (ret == -ENOMEM) {
		snprintf(err, errlen, "out of memory");
	} else if (ret) {
		size_t line = 1, col = 1;

		for (size_t i = 0; i < e.at && i < len; i++, col++)
			if (body[i] == '\n')
				line++, col = 0;
		snprintf(err, errlen, "body: invalid JSON at line %zu column %zu: %s", line, col,
			 e.msg);
	} else if (z.scalar_root) {
		snprintf(err, errlen, "body: invalid JSON at line 1 column 1: '[' or '{' expected");
		ret = -EINVAL;
	} else if (z.root == 2) {
		snprintf(err, errlen, "body: must be a JSON array of spans, not an object");
		ret = -EINVAL;
	} else {
		*n = z.idx;
		if (z.refused) {
			snprintf(err, errlen, "%s", z.doc_err);
			ret = -EINVAL;
		} else {
			*out = z.spans;
		}
	}
	free(z.tag_bad);
	return ret;
}
