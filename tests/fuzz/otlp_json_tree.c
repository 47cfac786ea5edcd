// SPDX-License-Identifier: MIT
/*
 * The OTLP/JSON front end as it was before the streaming one
 * (src/otlp/otlp_json_dec.c): jansson reads the whole document into a
 * tree, then the tree is walked by key.  Kept here only as the oracle of
 * fuzz_otlp_json.c, which checks that both give the same request.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "otlp/otlp.h"

struct jctx {
	struct zarena *a;
	int depth;
};

/* A copy of a JSON string's bytes in the arena; -ENOMEM. */
static int jstr(struct jctx *j, json_t *v, struct otlp_str *out)
{
	size_t len = json_string_length(v);
	char *p = zarena_alloc(j->a, len + 1);

	if (!p)
		return -ENOMEM;
	memcpy(p, json_string_value(v), len);
	p[len] = '\0';
	out->p = p;
	out->len = len;
	return 0;
}

/* A uint64 from a JSON string of digits or an integer; -EINVAL. */
static int u64_of(json_t *v, uint64_t *out)
{
	const char *s;
	char *end;

	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return -EINVAL;
	s = json_string_value(v);
	errno = 0;
	*out = strtoull(s, &end, 10);
	return !*s || *end || errno || *s == '-' ? -EINVAL : 0;
}

/* An int64 from a JSON integer or a string of digits (proto3 JSON). */
static int i64_of(json_t *v, int64_t *out)
{
	const char *s;
	char *end;

	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return -EINVAL;
	s = json_string_value(v);
	errno = 0;
	*out = strtoll(s, &end, 10);
	return !*s || *end || errno ? -EINVAL : 0;
}

static int attrs_of(struct jctx *j, json_t *arr, struct otlp_kv **out, size_t *n);

/* An AnyValue ({"stringValue": ...}); what it is not is OTLP_V_BAD. */
static int value_of(struct jctx *j, json_t *v, struct otlp_value *out)
{
	json_t *x;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	out->type = OTLP_V_BAD;
	if (!json_is_object(v) || j->depth > OTLP_MAX_DEPTH)
		return 0;
	if ((x = json_object_get(v, "stringValue")) && json_is_string(x)) {
		out->type = OTLP_V_STRING;
		return jstr(j, x, &out->u.s);
	}
	if ((x = json_object_get(v, "boolValue")) && json_is_boolean(x)) {
		out->type = OTLP_V_BOOL;
		out->u.b = json_is_true(x);
	} else if ((x = json_object_get(v, "intValue"))) {
		if (!i64_of(x, &out->u.i))
			out->type = OTLP_V_INT;
	} else if ((x = json_object_get(v, "doubleValue")) && json_is_number(x)) {
		out->type = OTLP_V_DOUBLE;
		out->u.d = json_number_value(x);
	} else if ((x = json_object_get(v, "bytesValue")) && json_is_string(x)) {
		out->type = OTLP_V_BYTES_B64;
		return jstr(j, x, &out->u.s);
	} else if ((x = json_object_get(v, "arrayValue")) && json_is_object(x)) {
		json_t *vals = json_object_get(x, "values"), *e;
		size_t i;

		if (vals && !json_is_array(vals))
			return 0;
		out->type = OTLP_V_ARRAY;
		out->u.arr.n = json_array_size(vals);
		out->u.arr.v = zarena_zalloc(j->a, sizeof(*out->u.arr.v) * (out->u.arr.n + 1));
		if (!out->u.arr.v)
			return -ENOMEM;
		j->depth++;
		json_array_foreach(vals, i, e)
			if ((ret = value_of(j, e, &out->u.arr.v[i])))
				break;
		j->depth--;
	} else if ((x = json_object_get(v, "kvlistValue")) && json_is_object(x)) {
		out->type = OTLP_V_KVLIST;
		j->depth++;
		ret = attrs_of(j, json_object_get(x, "values"), &out->u.kvl.kv, &out->u.kvl.n);
		j->depth--;
		if (ret == -EINVAL) {
			out->type = OTLP_V_BAD;
			ret = 0;
		}
	}
	return ret;
}

/* [{key, value}]: -EINVAL when arr is not an array of objects with a
 * string key (absent: none). */
static int attrs_of(struct jctx *j, json_t *arr, struct otlp_kv **out, size_t *n)
{
	json_t *kv, *k;
	size_t i;
	int ret;

	*out = NULL;
	*n = 0;
	if (!arr)
		return 0;
	if (!json_is_array(arr))
		return -EINVAL;
	*out = zarena_zalloc(j->a, sizeof(**out) * (json_array_size(arr) + 1));
	if (!*out)
		return -ENOMEM;
	json_array_foreach(arr, i, kv) {
		k = json_object_get(kv, "key");
		if (!json_is_string(k))
			return -EINVAL;
		if ((ret = jstr(j, k, &(*out)[i].key)) ||
		    (ret = value_of(j, json_object_get(kv, "value"), &(*out)[i].value)))
			return ret;
	}
	*n = json_array_size(arr);
	return 0;
}

static int span_kind(json_t *k)
{
	static const char *const names[] = {
		"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
		"SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER",
	};

	if (!k)
		return 0;
	if (json_is_integer(k))
		return json_integer_value(k) < 0 || json_integer_value(k) > 5 ? -1 :
		       (int)json_integer_value(k);
	for (int i = 0; json_is_string(k) && i < 6; i++)
		if (!strcmp(json_string_value(k), names[i]))
			return i;
	return -1;
}

/* Status code: 0 unset, 1 ok, 2 error; -1 unknown. */
static int status_code(json_t *c)
{
	static const char *const names[] = {
		"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR",
	};

	if (!c)
		return 0;
	if (json_is_integer(c) && json_integer_value(c) >= 0 && json_integer_value(c) <= 2)
		return (int)json_integer_value(c);
	for (int i = 0; json_is_string(c) && i < 3; i++)
		if (!strcmp(json_string_value(c), names[i]))
			return i;
	return -1;
}

/* An id field: its bytes, 0 absent ("" too), or a length that the
 * mapping refuses (1) when it is not hex/base64 of n bytes. */
static size_t id_of(json_t *v, uint8_t *out, size_t n)
{
	if (!v || json_is_null(v) || (json_is_string(v) && !json_string_length(v)))
		return 0;
	if (!json_is_string(v) || otlp_id_parse(json_string_value(v), json_string_length(v), out, n))
		return 1;
	return n;
}

/* Mark the span unreadable (the mapping rejects it with this reason). */
#define SPAN_BAD(s, why) do { if (!(s)->bad) (s)->bad = (why); } while (0)

static int span_of(struct jctx *j, json_t *js, struct otlp_span *s)
{
	json_t *v, *ev, *status;
	size_t i;
	int ret;

	memset(s, 0, sizeof(*s));
	if (!json_is_object(js)) {
		s->bad = "expected a span object";
		return 0;
	}
	s->trace_len = id_of(json_object_get(js, "traceId"), s->trace_id, 16);
	if (s->trace_len != 16)
		SPAN_BAD(s, "traceId: expected 32 hex digits (or 16 bytes in base64)");
	s->span_len = id_of(json_object_get(js, "spanId"), s->span_id, 8);
	s->parent_len = id_of(json_object_get(js, "parentSpanId"), s->parent_id, 8);
	if (s->parent_len == 1)
		SPAN_BAD(s, "parentSpanId: expected 16 hex digits or \"\"");
	v = json_object_get(js, "name");
	if (v && !json_is_string(v))
		SPAN_BAD(s, "name: expected a string");
	else if (v && (ret = jstr(j, v, &s->name)))
		return ret;
	s->kind = span_kind(json_object_get(js, "kind"));
	if (u64_of(json_object_get(js, "startTimeUnixNano"), &s->start_ns))
		s->start_ns = 0;
	if (u64_of(json_object_get(js, "endTimeUnixNano"), &s->end_ns))
		SPAN_BAD(s, "endTimeUnixNano: expected nanoseconds since the epoch (a string of digits)");
	ret = attrs_of(j, json_object_get(js, "attributes"), &s->attrs, &s->nattrs);
	if (ret == -EINVAL)
		SPAN_BAD(s, "attributes: expected an array of {key, value}");
	else if (ret)
		return ret;
	status = json_object_get(js, "status");
	s->status_code = status_code(json_object_get(status, "code"));
	v = json_object_get(status, "message");
	if (json_is_string(v) && (ret = jstr(j, v, &s->status_msg)))
		return ret;
	s->nlinks = json_array_size(json_object_get(js, "links"));
	v = json_object_get(js, "events");
	if (v && !json_is_array(v)) {
		SPAN_BAD(s, "events: expected an array");
		return 0;
	}
	s->events = zarena_zalloc(j->a, sizeof(*s->events) * (json_array_size(v) + 1));
	if (!s->events)
		return -ENOMEM;
	json_array_foreach(v, i, ev) {
		struct otlp_event *e = &s->events[i];
		json_t *name = json_object_get(ev, "name");

		if (json_is_string(name)) {
			e->has_name = 1;
			if ((ret = jstr(j, name, &e->name)))
				return ret;
		}
		if (u64_of(json_object_get(ev, "timeUnixNano"), &e->time_ns))
			e->time_ns = 0;
		ret = attrs_of(j, json_object_get(ev, "attributes"), &e->attrs, &e->nattrs);
		if (ret == -EINVAL)
			SPAN_BAD(s, "events: attributes: expected an array of {key, value}");
		else if (ret)
			return ret;
	}
	s->nevents = json_array_size(v);
	return 0;
}

/* An array member of o named name (or its older name), NULL when absent;
 * -EINVAL in *ret when present but not an array. */
static json_t *array_of(json_t *o, const char *name, const char *old, int *ret)
{
	json_t *v = json_object_get(o, name);

	if (!v && old)
		v = json_object_get(o, old);
	if (v && !json_is_array(v))
		*ret = -EINVAL;
	return v;
}

static int tree_decode_doc(json_t *root, struct zarena *a, struct otlp_req *r,
			 char *err, size_t errlen)
{
	struct jctx j = { .a = a };
	json_t *rss, *rs, *sss, *ss, *spans, *js;
	size_t i, k, m;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	err[0] = '\0';
	rss = array_of(root, "resourceSpans", NULL, &ret);
	if (!json_is_object(root) || ret) {
		snprintf(err, errlen, "resourceSpans: expected {\"resourceSpans\": [...]}");
		ret = -EINVAL;
		goto out;
	}
	r->rs = zarena_zalloc(a, sizeof(*r->rs) * (json_array_size(rss) + 1));
	if (!r->rs)
		goto oom;
	json_array_foreach(rss, i, rs) {
		struct otlp_resource_spans *o = &r->rs[i];

		ret = attrs_of(&j, json_object_get(json_object_get(rs, "resource"), "attributes"),
			       &o->attrs, &o->nattrs);
		if (ret == -EINVAL)
			snprintf(err, errlen, "resourceSpans[%zu].resource.attributes: expected an array of {key, value}", i);
		sss = array_of(rs, "scopeSpans", "instrumentationLibrarySpans", &ret);
		if (ret == -EINVAL && !err[0])
			snprintf(err, errlen, "resourceSpans[%zu].scopeSpans: expected an array", i);
		if (ret)
			goto out;
		o->ss = zarena_zalloc(a, sizeof(*o->ss) * (json_array_size(sss) + 1));
		if (!o->ss)
			goto oom;
		json_array_foreach(sss, k, ss) {
			struct otlp_scope_spans *os = &o->ss[k];
			json_t *scope = json_object_get(ss, "scope"), *v;

			if (!scope)
				scope = json_object_get(ss, "instrumentationLibrary");
			if (json_is_string(v = json_object_get(scope, "name")) &&
			    jstr(&j, v, &os->scope_name))
				goto oom;
			if (json_is_string(v = json_object_get(scope, "version")) &&
			    jstr(&j, v, &os->scope_version))
				goto oom;
			spans = array_of(ss, "spans", NULL, &ret);
			if (ret) {
				snprintf(err, errlen, "resourceSpans[%zu].scopeSpans[%zu].spans: expected an array",
					 i, k);
				goto out;
			}
			os->spans = zarena_zalloc(a, sizeof(*os->spans) * (json_array_size(spans) + 1));
			if (!os->spans)
				goto oom;
			json_array_foreach(spans, m, js)
				if ((ret = span_of(&j, js, &os->spans[m])))
					goto out;
			os->nspans = json_array_size(spans);
		}
		o->nss = json_array_size(sss);
	}
	r->nrs = json_array_size(rss);
	goto out;
oom:
	ret = -ENOMEM;
out:
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return ret;
}

static int otlp_json_tree_decode(const char *body, size_t len, struct zarena *a,
				 struct otlp_req *r, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je);
	int ret;

	memset(r, 0, sizeof(*r));
	if (!root) {
		snprintf(err, errlen, "body: line %d column %d: %s", je.line, je.column, je.text);
		return -EINVAL;
	}
	ret = tree_decode_doc(root, a, r, err, errlen);
	json_decref(root);
	return ret;
}
