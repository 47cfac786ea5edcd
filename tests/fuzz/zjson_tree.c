// SPDX-License-Identifier: MIT
/*
 * The Zipkin v2 JSON reader that src/collector/zjson_dec.c replaced: the
 * body read whole into a jansson tree, then each span walked by key.
 * Kept as fuzz_zjson.c's oracle (included there, not built alone).
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "collector/zjson.h"
#include "common/spanrec.h"

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
			if (!strcmp(k, zjson_kinds[i]))
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

static int zjson_tree_parse_spans(const char *body, size_t len, struct zarena *a,
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

