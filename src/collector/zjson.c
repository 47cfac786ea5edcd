// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 JSON codec.  Reading validates every field and names the
 * first bad one, except where zipkin2's own reader is lenient: an IP that
 * does not parse is dropped, a negative timestamp or duration is absent,
 * a negative port is none (the span is kept); writing follows zipkin2's V2SpanWriter: field order
 * traceId, parentId, id, kind, name, timestamp, duration, localEndpoint,
 * remoteEndpoint, annotations, tags, debug, shared, with absent fields
 * (and false flags, empty lists) left out.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/zjson.h"
#include "common/err.h"
#include "common/spanrec.h"

static const char *const kind_names[SPAN_KIND_MAX] = {
	[SPAN_KIND_CLIENT] = "CLIENT", [SPAN_KIND_SERVER] = "SERVER",
	[SPAN_KIND_PRODUCER] = "PRODUCER", [SPAN_KIND_CONSUMER] = "CONSUMER",
};

/* ---- hex ids ------------------------------------------------------------ */

int zjson_trace_id(const char *s, size_t len, uint64_t *hi, uint64_t *lo,
		   char *err, size_t errlen)
{
	if (!len || len > 32) {
		snprintf(err, errlen, "trace id '%.40s': must be 1 to 32 lowercase hex characters", s);
		return -EINVAL;
	}
	*hi = 0;
	if (len > 16) {
		if (spanrec_hex_u64(s, len - 16, true, hi) || spanrec_hex_u64(s + len - 16, 16, true, lo))
			goto bad;
	} else if (spanrec_hex_u64(s, len, true, lo)) {
		goto bad;
	}
	if (!*hi && !*lo) {
		snprintf(err, errlen, "trace id '%.*s': is all zeros", (int)len, s);
		return -EINVAL;
	}
	return 0;
bad:
	snprintf(err, errlen, "trace id '%.40s': must be lowercase hex (0-9, a-f)", s);
	return -EINVAL;
}

/* ---- reading ------------------------------------------------------------ */

struct zctx {
	struct zarena *a;
	char *err;
	size_t errlen;
	size_t idx;          /* span index in the array */
};

__attribute__((format(printf, 3, 4)))
static int bad(struct zctx *z, const char *field, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(z->err, z->errlen, "span %zu: %s: ", z->idx, field);

	if (n > 0 && (size_t)n < z->errlen) {
		va_start(ap, fmt);
		vsnprintf(z->err + n, z->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int get_str(struct zctx *z, json_t *v, const char *field, struct zs_str *out,
		   int lower)
{
	if (!json_is_string(v))
		return bad(z, field, "must be a string");
	if (zarena_str(z->a, out, json_string_value(v), json_string_length(v), lower))
		return -ENOMEM;
	return 0;
}

static int get_u64(struct zctx *z, json_t *v, const char *field, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return bad(z, field, "must be a non-negative integer (microseconds)");
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* A span's timestamp or duration: as zipkin2's Span.Builder, a negative
 * one is dropped (absent) and the span kept. */
static int get_time(struct zctx *z, json_t *v, const char *field, uint64_t *out)
{
	if (!json_is_integer(v))
		return bad(z, field, "must be an integer (microseconds)");
	*out = json_integer_value(v) < 0 ? 0 : (uint64_t)json_integer_value(v);
	return 0;
}

static int get_bool(struct zctx *z, json_t *v, const char *field, uint8_t *out)
{
	if (!json_is_boolean(v))
		return bad(z, field, "must be true or false");
	*out = json_is_true(v);
	return 0;
}

static int get_id(struct zctx *z, json_t *v, const char *field, uint64_t *out, int zero_ok)
{
	const char *s = json_string_value(v);
	size_t len = json_string_length(v);

	if (!json_is_string(v) || !len || len > 16 || spanrec_hex_u64(s, len, true, out))
		return bad(z, field, "must be 1 to 16 lowercase hex characters");
	if (!*out && !zero_ok)
		return bad(z, field, "must not be all zeros");
	return 0;
}

static int get_endpoint(struct zctx *z, json_t *o, const char *field,
			struct zs_endpoint *e)
{
	char f[64];
	json_t *v;

	memset(e, 0, sizeof(e[0]));
	if (json_is_null(o))
		return 0;
	if (!json_is_object(o))
		return bad(z, field, "must be an object");
	v = json_object_get(o, "serviceName");
	snprintf(f, sizeof(f), "%s.serviceName", field);
	if (v && !json_is_null(v) && get_str(z, v, f, &e->service, 1))
		return -EINVAL;
	for (int six = 0; six < 2; six++) {
		const char *k = six ? "ipv6" : "ipv4";
		struct zs_endpoint tmp = { 0 };

		v = json_object_get(o, k);
		if (!v || json_is_null(v))
			continue;
		snprintf(f, sizeof(f), "%s.%s", field, k);
		if (!json_is_string(v))
			return bad(z, f, "must be a string");
		if (!json_string_length(v))
			continue;
		/* not an address: the field is dropped and the span kept, as
		 * zipkin2's Endpoint.Builder.parseIp() does */
		if (zs_ep_set_ip(&tmp, json_string_value(v), json_string_length(v)))
			continue;
		if (tmp.ipv4[0])
			memcpy(e->ipv4, tmp.ipv4, sizeof(e->ipv4));
		if (tmp.ipv6[0])
			memcpy(e->ipv6, tmp.ipv6, sizeof(e->ipv6));
	}
	v = json_object_get(o, "port");
	if (v && !json_is_null(v)) {
		snprintf(f, sizeof(f), "%s.port", field);
		if (!json_is_integer(v) || json_integer_value(v) > 65535)
			return bad(z, f, "must be an integer up to 65535");
		if (json_integer_value(v) > 0)
			e->port = (uint16_t)json_integer_value(v);
	}
	return 0;
}

static int get_annotations(struct zctx *z, json_t *arr, struct zspan *s)
{
	char f[48];
	json_t *o;
	size_t j;

	if (json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return bad(z, "annotations", "must be an array");
	s->annotations = zarena_alloc(z->a, sizeof(*s->annotations) * (json_array_size(arr) + 1));
	if (!s->annotations)
		return -ENOMEM;
	json_array_foreach(arr, j, o) {
		struct zs_annotation *an = &s->annotations[s->nannotations];
		json_t *ts = json_object_get(o, "timestamp"), *val = json_object_get(o, "value");

		if (!json_is_object(o)) {
			snprintf(f, sizeof(f), "annotations[%zu]", j);
			return bad(z, f, "must be an object {\"timestamp\":..,\"value\":..}");
		}
		snprintf(f, sizeof(f), "annotations[%zu].timestamp", j);
		if (!ts)
			return bad(z, f, "missing");
		if (get_u64(z, ts, f, &an->ts_us))
			return -EINVAL;
		snprintf(f, sizeof(f), "annotations[%zu].value", j);
		if (!val)
			return bad(z, f, "missing");
		if (get_str(z, val, f, &an->value, 0))
			return -EINVAL;
		s->nannotations++;
	}
	return 0;
}

static int get_tags(struct zctx *z, json_t *obj, struct zspan *s)
{
	char f[160], num[64];
	const char *k;
	json_t *v;

	if (json_is_null(obj))
		return 0;
	if (!json_is_object(obj))
		return bad(z, "tags", "must be an object of strings");
	s->tags = zarena_alloc(z->a, sizeof(*s->tags) * (json_object_size(obj) + 1));
	if (!s->tags)
		return -ENOMEM;
	json_object_foreach(obj, k, v) {
		struct zs_tag *t = &s->tags[s->ntags];
		const char *val = num;
		size_t vlen;

		if (json_is_string(v)) {
			val = json_string_value(v);
			vlen = json_string_length(v);
		} else if (json_is_integer(v)) {
			vlen = (size_t)snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
						json_integer_value(v));
		} else if (json_is_real(v)) {
			vlen = (size_t)snprintf(num, sizeof(num), "%.17g", json_real_value(v));
		} else if (json_is_boolean(v)) {
			val = json_is_true(v) ? "true" : "false";
			vlen = strlen(val);
		} else {
			snprintf(f, sizeof(f), "tags.%.100s", k);
			return bad(z, f, "must be a string (not %s)",
				   json_is_null(v) ? "null" : json_is_array(v) ? "an array" : "an object");
		}
		if (zarena_str(z->a, &t->key, k, strlen(k), 0) ||
		    zarena_str(z->a, &t->value, val, vlen, 0))
			return -ENOMEM;
		s->ntags++;
	}
	return 0;
}

static int parse_span(struct zctx *z, json_t *o, struct zspan *s)
{
	json_t *v;
	int ret;

	memset(s, 0, sizeof(*s));
	if (!json_is_object(o))
		return bad(z, "span", "must be a JSON object");
	v = json_object_get(o, "traceId");
	if (!v)
		return bad(z, "traceId", "missing");
	if (!json_is_string(v) || (json_string_length(v) != 16 && json_string_length(v) != 32))
		return bad(z, "traceId", "must be 16 or 32 lowercase hex characters");
	{
		const char *t = json_string_value(v);
		size_t len = json_string_length(v);

		if (len == 32) {
			if (spanrec_hex_u64(t, 16, true, &s->trace_hi) || spanrec_hex_u64(t + 16, 16, true, &s->trace_lo))
				return bad(z, "traceId", "must be 16 or 32 lowercase hex characters");
		} else if (spanrec_hex_u64(t, 16, true, &s->trace_lo)) {
			return bad(z, "traceId", "must be 16 or 32 lowercase hex characters");
		}
		if (!s->trace_hi && !s->trace_lo)
			return bad(z, "traceId", "must not be all zeros");
	}
	v = json_object_get(o, "id");
	if (!v)
		return bad(z, "id", "missing");
	if (get_id(z, v, "id", &s->id, 0))
		return -EINVAL;
	if ((v = json_object_get(o, "parentId")) && !json_is_null(v) &&
	    get_id(z, v, "parentId", &s->parent_id, 1))
		return -EINVAL;
	if ((v = json_object_get(o, "kind")) && !json_is_null(v)) {
		const char *k = json_string_value(v);

		for (int i = 1; k && i < SPAN_KIND_MAX; i++)
			if (!strcmp(k, kind_names[i]))
				s->kind = (uint8_t)i;
		if (!s->kind)
			return bad(z, "kind", "must be CLIENT, SERVER, PRODUCER or CONSUMER");
	}
	if ((v = json_object_get(o, "name")) && !json_is_null(v) &&
	    (ret = get_str(z, v, "name", &s->name, 1)))
		return ret;
	if ((v = json_object_get(o, "timestamp")) && !json_is_null(v) &&
	    get_time(z, v, "timestamp", &s->timestamp_us))
		return -EINVAL;
	if ((v = json_object_get(o, "duration")) && !json_is_null(v) &&
	    get_time(z, v, "duration", &s->duration_us))
		return -EINVAL;
	if ((v = json_object_get(o, "localEndpoint")) &&
	    (ret = get_endpoint(z, v, "localEndpoint", &s->local)))
		return ret;
	if ((v = json_object_get(o, "remoteEndpoint")) &&
	    (ret = get_endpoint(z, v, "remoteEndpoint", &s->remote)))
		return ret;
	if ((v = json_object_get(o, "annotations")) && (ret = get_annotations(z, v, s)))
		return ret;
	if ((v = json_object_get(o, "tags")) && (ret = get_tags(z, v, s)))
		return ret;
	if ((v = json_object_get(o, "debug")) && !json_is_null(v) &&
	    get_bool(z, v, "debug", &s->debug))
		return -EINVAL;
	if ((v = json_object_get(o, "shared")) && !json_is_null(v) &&
	    get_bool(z, v, "shared", &s->shared))
		return -EINVAL;
	zspan_normalize(s);
	return 0;
}

int zjson_parse_spans(const char *body, size_t len, struct zarena *a,
		      struct zspan **out, size_t *n, char *err, size_t errlen)
{
	struct zctx z = { .a = a, .err = err, .errlen = errlen };
	json_error_t je;
	json_t *root, *o;
	int ret = 0;

	*out = NULL;
	*n = 0;
	root = json_loadb(body, len, 0, &je);
	if (!root) {
		snprintf(err, errlen, "body: invalid JSON at line %d column %d: %s",
			 je.line, je.column, je.text);
		return -EINVAL;
	}
	if (!json_is_array(root)) {
		snprintf(err, errlen, "body: must be a JSON array of spans, not %s",
			 json_is_object(root) ? "an object" : "a scalar");
		json_decref(root);
		return -EINVAL;
	}
	*n = json_array_size(root);
	*out = zarena_alloc(a, sizeof(**out) * (*n + 1));
	if (!*out) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	json_array_foreach(root, z.idx, o) {
		ret = parse_span(&z, o, &(*out)[z.idx]);
		if (ret == -ENOMEM)
			snprintf(err, errlen, "out of memory");
		if (ret)
			break;
	}
out:
	json_decref(root);
	return ret;
}

/* ---- writing ------------------------------------------------------------ */

/* A JSON string of s; bytes that are not valid UTF-8 (a span record may
 * carry any bytes) become '?' rather than failing the whole answer. */
static json_t *jstrn(struct zs_str s)
{
	json_t *v = json_stringn(s.p, s.len);
	char *c;

	if (v || !s.len)
		return v ? v : json_string("");
	c = malloc(s.len);
	if (!c)
		return NULL;
	for (uint32_t i = 0; i < s.len; i++)
		c[i] = (unsigned char)s.p[i] < 0x80 ? s.p[i] : '?';
	v = json_stringn(c, s.len);
	free(c);
	return v;
}

static int set(json_t *o, const char *k, json_t *v)
{
	return v ? json_object_set_new_nocheck(o, k, v) : -1;
}

static json_t *endpoint(const struct zs_endpoint *e)
{
	json_t *o = json_object();
	int r = 0;

	if (!o)
		return NULL;
	if (e->service.len)
		r |= set(o, "serviceName", jstrn(e->service));
	if (e->ipv4[0])
		r |= set(o, "ipv4", json_string(e->ipv4));
	if (e->ipv6[0])
		r |= set(o, "ipv6", json_string(e->ipv6));
	if (e->port)
		r |= set(o, "port", json_integer(e->port));
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *zjson_span(const struct zspan *s)
{
	char hex[33];
	json_t *o = json_object(), *l;
	int r = 0;

	if (!o)
		return NULL;
	spanrec_trace_hex(s->trace_hi, s->trace_lo, hex);
	r |= set(o, "traceId", json_string(hex));
	if (s->parent_id) {
		spanrec_id_hex(s->parent_id, hex);
		r |= set(o, "parentId", json_string(hex));
	}
	spanrec_id_hex(s->id, hex);
	r |= set(o, "id", json_string(hex));
	if (s->kind && s->kind < SPAN_KIND_MAX)
		r |= set(o, "kind", json_string(kind_names[s->kind]));
	if (s->name.len)
		r |= set(o, "name", jstrn(s->name));
	if (s->timestamp_us)
		r |= set(o, "timestamp", json_integer((json_int_t)s->timestamp_us));
	if (s->duration_us)
		r |= set(o, "duration", json_integer((json_int_t)s->duration_us));
	if (zs_ep_present(&s->local))
		r |= set(o, "localEndpoint", endpoint(&s->local));
	if (zs_ep_present(&s->remote))
		r |= set(o, "remoteEndpoint", endpoint(&s->remote));
	if (s->nannotations) {
		l = json_array();
		r |= set(o, "annotations", l);
		for (uint32_t i = 0; l && i < s->nannotations; i++)
			r |= json_array_append_new(l, json_pack("{sIso}",
				"timestamp", (json_int_t)s->annotations[i].ts_us,
				"value", jstrn(s->annotations[i].value)));
	}
	if (s->ntags) {
		l = json_object();
		r |= set(o, "tags", l);
		for (uint32_t i = 0; l && i < s->ntags; i++) {
			char key[256];
			const struct zs_str *k = &s->tags[i].key;

			/* jansson keys are C strings: a key longer than this
			 * or holding NUL is cut (keys are short in practice) */
			snprintf(key, sizeof(key), "%.*s", (int)k->len, k->p);
			r |= set(l, key, jstrn(s->tags[i].value));
		}
	}
	if (s->debug)
		r |= set(o, "debug", json_true());
	if (s->shared)
		r |= set(o, "shared", json_true());
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *zjson_spans(const struct zspan *s, size_t n)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < n; i++) {
		if (json_array_append_new(arr, zjson_span(&s[i]))) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}
