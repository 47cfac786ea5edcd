// SPDX-License-Identifier: MIT
/*
 * OTLP/HTTP JSON (opentelemetry-proto, ExportTraceServiceRequest) <->
 * Zipkin v2 spans, the mapping of OpenTelemetry's Zipkin exporter:
 *
 *   resource attribute service.name  -> localEndpoint.serviceName
 *                                       ("unknown_service" when absent)
 *   kind SERVER/CLIENT/PRODUCER/CONSUMER -> the same Zipkin kind;
 *        INTERNAL, UNSPECIFIED        -> no kind
 *   startTimeUnixNano, endTimeUnixNano -> timestamp, duration (us)
 *   attributes                        -> tags (ints in decimal, bools
 *        true/false, arrays and maps as JSON); peer.service also names
 *        the remoteEndpoint
 *   events                            -> annotations ("name", or
 *        "name: {attributes as JSON}")
 *   status ERROR                      -> tag error = the message (or
 *        "true"), otel.status_code = ERROR; OK -> otel.status_code = OK
 *   scope name/version                -> otel.scope.name/.version tags
 *
 * Ids are hex in OTLP/JSON (the spec); 24/12-character base64 ids, which
 * older exporters wrote, are accepted too.  POST /v1/traces answers 200
 * {} when every span was stored, 400 {"code":3,"message":...} naming the
 * bad field, 415 for protobuf, 413 over --max-body.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collector/ext.h"
#include "collector/http_int.h"
#include "collector/zjson.h"
#include "common/log.h"

#define OTLP_MAX_TAGS 1024

struct octx {
	struct zarena *a;
	char *err;
	size_t errlen;
	char where[160];          /* resourceSpans[i].scopeSpans[j].spans[k] */
	uint32_t tagcap;          /* tags the span's array holds */
};

__attribute__((format(printf, 2, 3)))
static int bad(struct octx *o, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(o->err, o->errlen, "%s%s%s", o->where, o->where[0] ? "." : "", msg);
	return -EINVAL;
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

/* An id of n bytes (16 trace, 8 span) from hex (2n digits) or base64. */
static int parse_id(const char *s, size_t len, uint8_t *out, size_t n)
{
	size_t i;

	if (len == 2 * n) {
		for (i = 0; i < len; i++) {
			int ch = s[i], v;

			if (ch >= '0' && ch <= '9')
				v = ch - '0';
			else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
				v = (ch | 0x20) - 'a' + 10;
			else
				return -EINVAL;
			if (i % 2)
				out[i / 2] |= (uint8_t)v;
			else
				out[i / 2] = (uint8_t)(v << 4);
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

static uint64_t be64(const uint8_t *b)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
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

/* The text of an AnyValue (malloc'ed), NULL when it is not one. */
static char *anyvalue_text(json_t *v)
{
	json_t *x;
	char *s = NULL;

	if ((x = json_object_get(v, "stringValue")) && json_is_string(x))
		return strdup(json_string_value(x));
	if ((x = json_object_get(v, "boolValue")) && json_is_boolean(x))
		return strdup(json_is_true(x) ? "true" : "false");
	if ((x = json_object_get(v, "intValue"))) {
		uint64_t u;

		if (json_is_string(x) && json_string_value(x)[0] == '-' &&
		    asprintf(&s, "%s", json_string_value(x)) >= 0)
			return s;
		if (!u64_of(x, &u) && asprintf(&s, "%" PRIu64, u) >= 0)
			return s;
		if (json_is_integer(x) &&
		    asprintf(&s, "%" JSON_INTEGER_FORMAT, json_integer_value(x)) >= 0)
			return s;
		return NULL;
	}
	if ((x = json_object_get(v, "doubleValue")) && json_is_number(x) &&
	    asprintf(&s, "%.17g", json_number_value(x)) >= 0)
		return s;
	if ((x = json_object_get(v, "bytesValue")) && json_is_string(x))
		return strdup(json_string_value(x));
	if ((x = json_object_get(v, "arrayValue")) || (x = json_object_get(v, "kvlistValue")))
		return json_dumps(x, JSON_COMPACT);
	return NULL;
}

/* Append attributes [{key, value}] to the tag array. */
static int add_attrs(struct octx *o, json_t *attrs, struct zs_tag *tags, uint32_t *n,
		     struct zs_str *peer, const char *what)
{
	json_t *kv;
	size_t i;

	if (attrs && !json_is_array(attrs))
		return bad(o, "%s: expected an array of {key, value}", what);
	json_array_foreach(attrs, i, kv) {
		const char *k = json_string_value(json_object_get(kv, "key"));
		char *val;
		int ret;

		if (!k || !*k)
			return bad(o, "%s[%zu].key: expected a non-empty string", what, i);
		val = anyvalue_text(json_object_get(kv, "value"));
		if (!val)
			return bad(o, "%s[%zu].value: expected an AnyValue ({\"stringValue\": ...})",
				   what, i);
		if (*n == o->tagcap) {
			free(val);
			return bad(o, "%s: more than %d attributes", what, OTLP_MAX_TAGS);
		}
		ret = zarena_str(o->a, &tags[*n].key, k, strlen(k), 0) ||
		      zarena_str(o->a, &tags[*n].value, val, strlen(val), 0);
		if (!ret && peer && !strcmp(k, "peer.service"))
			ret = zarena_str(o->a, peer, val, strlen(val), 1);
		free(val);
		if (ret)
			return -ENOMEM;
		(*n)++;
	}
	return 0;
}

static int add_tag(struct octx *o, struct zs_tag *tags, uint32_t *n, const char *k,
		   const char *v)
{
	if (*n == o->tagcap)
		return bad(o, "more than %d attributes", OTLP_MAX_TAGS);
	if (zarena_str(o->a, &tags[*n].key, k, strlen(k), 0) ||
	    zarena_str(o->a, &tags[*n].value, v, strlen(v), 0))
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int span_kind(json_t *k, uint8_t *out)
{
	static const char *const names[] = {
		"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
		"SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER",
	};
	static const uint8_t map[] = {
		SPAN_KIND_UNSET, SPAN_KIND_UNSET, SPAN_KIND_SERVER, SPAN_KIND_CLIENT,
		SPAN_KIND_PRODUCER, SPAN_KIND_CONSUMER,
	};
	json_int_t v = -1;

	if (!k) {
		*out = SPAN_KIND_UNSET;
		return 0;
	}
	if (json_is_integer(k))
		v = json_integer_value(k);
	for (int i = 0; json_is_string(k) && i < 6; i++)
		if (!strcmp(json_string_value(k), names[i]))
			v = i;
	if (v < 0 || v > 5)
		return -EINVAL;
	*out = map[v];
	return 0;
}

/* Status code: 0 unset, 1 ok, 2 error; -EINVAL. */
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
	return -EINVAL;
}

static int parse_span(struct octx *o, json_t *js, const struct zs_str *svc,
		      json_t *scope, struct zspan *z)
{
	uint8_t tid[16] = { 0 }, sid[8] = { 0 }, pid[8] = { 0 };
	json_t *v, *ev, *status;
	const char *s;
	uint64_t start, end;
	struct zs_tag *tags;
	size_t i;
	int ret, code;

	memset(z, 0, sizeof(*z));
	if (!json_is_object(js))
		return bad(o, "expected a span object");
	s = json_string_value(v = json_object_get(js, "traceId"));
	if (!s || parse_id(s, json_string_length(v), tid, 16))
		return bad(o, "traceId: expected 32 hex digits (or 16 bytes in base64)");
	z->trace_hi = be64(tid);
	z->trace_lo = be64(tid + 8);
	if (!z->trace_hi && !z->trace_lo)
		return bad(o, "traceId: all zeros is not a valid id");
	s = json_string_value(v = json_object_get(js, "spanId"));
	if (!s || parse_id(s, json_string_length(v), sid, 8) || !(z->id = be64(sid)))
		return bad(o, "spanId: expected 16 hex digits, not all zeros (or 8 bytes in base64)");
	v = json_object_get(js, "parentSpanId");
	if (v && !json_is_null(v) && (!json_is_string(v) ||
	    (json_string_length(v) && parse_id(json_string_value(v), json_string_length(v), pid, 8))))
		return bad(o, "parentSpanId: expected 16 hex digits or \"\"");
	z->parent_id = be64(pid);
	v = json_object_get(js, "name");
	if (v && !json_is_string(v))
		return bad(o, "name: expected a string");
	if (v && zarena_str(o->a, &z->name, json_string_value(v), json_string_length(v), 1))
		return -ENOMEM;
	if (span_kind(json_object_get(js, "kind"), &z->kind))
		return bad(o, "kind: expected 0..5 or SPAN_KIND_*");
	if (u64_of(json_object_get(js, "startTimeUnixNano"), &start) || !start)
		return bad(o, "startTimeUnixNano: expected nanoseconds since the epoch (a string of digits)");
	if (u64_of(json_object_get(js, "endTimeUnixNano"), &end))
		return bad(o, "endTimeUnixNano: expected nanoseconds since the epoch (a string of digits)");
	if (end < start)
		return bad(o, "endTimeUnixNano: %" PRIu64 " is before startTimeUnixNano %" PRIu64,
			   end, start);
	z->timestamp_us = start / 1000;
	z->duration_us = (end - start) / 1000;
	if (!z->duration_us)
		z->duration_us = 1;
	z->local.service = *svc;

	v = json_object_get(js, "attributes");
	if (json_array_size(v) > OTLP_MAX_TAGS)
		return bad(o, "attributes: more than %d", OTLP_MAX_TAGS);
	o->tagcap = (uint32_t)json_array_size(v) + 4; /* scope name, version, status x2 */
	tags = zarena_alloc(o->a, sizeof(*tags) * o->tagcap);
	if (!tags)
		return -ENOMEM;
	z->tags = tags;
	ret = add_attrs(o, json_object_get(js, "attributes"), tags, &z->ntags,
			&z->remote.service, "attributes");
	if (ret)
		return ret;
	if ((s = json_string_value(json_object_get(scope, "name"))) && *s &&
	    (ret = add_tag(o, tags, &z->ntags, "otel.scope.name", s)))
		return ret;
	if ((s = json_string_value(json_object_get(scope, "version"))) && *s &&
	    (ret = add_tag(o, tags, &z->ntags, "otel.scope.version", s)))
		return ret;
	status = json_object_get(js, "status");
	code = status_code(json_object_get(status, "code"));
	if (code < 0)
		return bad(o, "status.code: expected 0..2 or STATUS_CODE_*");
	s = json_string_value(json_object_get(status, "message"));
	if (code == 2) {
		if ((ret = add_tag(o, tags, &z->ntags, "otel.status_code", "ERROR")) ||
		    (ret = add_tag(o, tags, &z->ntags, "error", s && *s ? s : "true")))
			return ret;
	} else if (code == 1 && (ret = add_tag(o, tags, &z->ntags, "otel.status_code", "OK"))) {
		return ret;
	}

	v = json_object_get(js, "events");
	if (v && !json_is_array(v))
		return bad(o, "events: expected an array");
	if (json_array_size(v)) {
		z->annotations = zarena_alloc(o->a, sizeof(*z->annotations) * json_array_size(v));
		if (!z->annotations)
			return -ENOMEM;
	}
	json_array_foreach(v, i, ev) {
		struct zs_annotation *an = &z->annotations[z->nannotations];
		const char *name = json_string_value(json_object_get(ev, "name"));
		json_t *attrs = json_object_get(ev, "attributes");
		uint64_t t;
		char *text = NULL;

		if (!name)
			return bad(o, "events[%zu].name: expected a string", i);
		if (u64_of(json_object_get(ev, "timeUnixNano"), &t) || !t)
			return bad(o, "events[%zu].timeUnixNano: expected nanoseconds since the epoch", i);
		an->ts_us = t / 1000;
		if (json_array_size(attrs)) {
			json_t *o2 = json_object(), *kv;
			size_t k;
			char *dump;

			json_array_foreach(attrs, k, kv) {
				const char *key = json_string_value(json_object_get(kv, "key"));
				char *val = anyvalue_text(json_object_get(kv, "value"));

				if (key && val)
					json_object_set_new(o2, key, json_string(val));
				free(val);
			}
			dump = json_dumps(o2, JSON_COMPACT | JSON_SORT_KEYS);
			json_decref(o2);
			if (!dump || asprintf(&text, "%s: %s", name, dump) < 0)
				text = NULL;
			free(dump);
			if (!text)
				return -ENOMEM;
		}
		ret = zarena_str(o->a, &an->value, text ? text : name,
				 strlen(text ? text : name), 0);
		free(text);
		if (ret)
			return -ENOMEM;
		z->nannotations++;
	}
	zspan_normalize(z);
	return 0;
}

int otlp_parse(const char *body, size_t len, struct zarena *a,
	       struct zspan **out, size_t *n, char *err, size_t errlen)
{
	struct octx o = { .a = a, .err = err, .errlen = errlen };
	json_t *root, *rss, *rs, *sss, *ss, *spans, *js;
	size_t i, j, k, cap = 0;
	json_error_t je;
	int ret = 0;

	*out = NULL;
	*n = 0;
	root = json_loadb(body, len, 0, &je);
	if (!root) {
		snprintf(err, errlen, "body: line %d column %d: %s", je.line, je.column, je.text);
		return -EINVAL;
	}
	rss = json_object_get(root, "resourceSpans");
	if (!json_is_object(root) || (rss && !json_is_array(rss))) {
		ret = bad(&o, "resourceSpans: expected {\"resourceSpans\": [...]}");
		goto out;
	}
	json_array_foreach(rss, i, rs) {
		struct zs_str svc = ZS_STR("unknown_service");
		json_t *attrs = json_object_get(json_object_get(rs, "resource"), "attributes"), *kv;
		size_t m;

		json_array_foreach(attrs, m, kv) {
			const char *k2 = json_string_value(json_object_get(kv, "key"));
			const char *v = json_string_value(json_object_get(json_object_get(kv, "value"),
									 "stringValue"));

			if (k2 && v && *v && !strcmp(k2, "service.name") &&
			    zarena_str(a, &svc, v, strlen(v), 1)) {
				ret = -ENOMEM;
				goto out;
			}
		}
		sss = json_object_get(rs, "scopeSpans");
		if (!sss)
			sss = json_object_get(rs, "instrumentationLibrarySpans");
		if (sss && !json_is_array(sss)) {
			snprintf(o.where, sizeof(o.where), "resourceSpans[%zu]", i);
			ret = bad(&o, "scopeSpans: expected an array");
			goto out;
		}
		json_array_foreach(sss, j, ss) {
			json_t *scope = json_object_get(ss, "scope");

			if (!scope)
				scope = json_object_get(ss, "instrumentationLibrary");
			spans = json_object_get(ss, "spans");
			if (spans && !json_is_array(spans)) {
				snprintf(o.where, sizeof(o.where), "resourceSpans[%zu].scopeSpans[%zu]", i, j);
				ret = bad(&o, "spans: expected an array");
				goto out;
			}
			json_array_foreach(spans, k, js) {
				snprintf(o.where, sizeof(o.where),
					 "resourceSpans[%zu].scopeSpans[%zu].spans[%zu]", i, j, k);
				if (zarena_grow(a, (void **)out, *n, &cap, sizeof(**out))) {
					ret = -ENOMEM;
					goto out;
				}
				ret = parse_span(&o, js, &svc, scope, &(*out)[*n]);
				if (ret)
					goto out;
				(*n)++;
			}
		}
	}
out:
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	json_decref(root);
	return ret;
}

/* ---- Zipkin JSON -> OTLP JSON (export.c) ----------------------------------- */

static json_t *kv(const char *k, const char *v)
{
	return json_pack("{s:s, s:{s:s}}", "key", k, "value", "stringValue", v);
}

static json_t *otlp_span(json_t *z)
{
	static const char *const kinds[] = { "CLIENT", "SERVER", "PRODUCER", "CONSUMER" };
	static const int codes[] = { 3, 2, 4, 5 };
	const char *kind = json_string_value(json_object_get(z, "kind"));
	json_int_t ts = json_integer_value(json_object_get(z, "timestamp"));
	json_int_t dur = json_integer_value(json_object_get(z, "duration"));
	json_t *attrs = json_array(), *events = json_array(), *v, *s;
	const char *k, *parent = json_string_value(json_object_get(z, "parentId"));
	const char *tid = json_string_value(json_object_get(z, "traceId"));
	char tid32[33], start[24], end[24];
	const char *err = NULL;
	int code = 1;
	size_t i;

	for (i = 0; kind && i < 4; i++)
		if (!strcmp(kind, kinds[i]))
			code = codes[i];
	/* OTLP trace ids are 16 bytes: a 64-bit Zipkin id is left-padded */
	snprintf(tid32, sizeof(tid32), "%s%s", tid && strlen(tid) == 16 ? "0000000000000000" : "",
		 tid ? tid : "");
	json_object_foreach(json_object_get(z, "tags"), k, v) {
		if (!strcmp(k, "error"))
			err = json_string_value(v) ? json_string_value(v) : "true";
		json_array_append_new(attrs, kv(k, json_string_value(v) ? json_string_value(v) : ""));
	}
	json_array_foreach(json_object_get(z, "annotations"), i, v) {
		snprintf(start, sizeof(start), "%" JSON_INTEGER_FORMAT "000",
			 json_integer_value(json_object_get(v, "timestamp")));
		json_array_append_new(events, json_pack("{s:s, s:O}", "timeUnixNano", start,
			"name", json_object_get(v, "value")));
	}
	snprintf(start, sizeof(start), "%" JSON_INTEGER_FORMAT "000", ts);
	snprintf(end, sizeof(end), "%" JSON_INTEGER_FORMAT "000", ts + dur);
	s = json_pack("{s:s, s:O, s:s, s:i, s:s, s:s, s:o, s:o, s:{s:i, s:s}}",
		      "traceId", tid32, "spanId", json_object_get(z, "id"),
		      "name", json_string_value(json_object_get(z, "name")) ?: "",
		      "kind", code, "startTimeUnixNano", start, "endTimeUnixNano", end,
		      "attributes", attrs, "events", events,
		      "status", "code", err ? 2 : 0, "message", err ? err : "");
	if (s && parent)
		json_object_set_new(s, "parentSpanId", json_string(parent));
	return s;
}

json_t *otlp_from_zspans_json(const json_t *spans)
{
	json_t *rss = json_array(), *by = json_object(), *z, *rs;
	const char *svc;
	size_t i;

	json_array_foreach((json_t *)spans, i, z) {
		svc = json_string_value(json_object_get(json_object_get(z, "localEndpoint"),
							"serviceName"));
		if (!svc)
			svc = "unknown_service";
		rs = json_object_get(by, svc);
		if (!rs) {
			rs = json_pack("{s:{s:[o]}, s:[{s:{s:s}, s:[]}]}",
				       "resource", "attributes", kv("service.name", svc),
				       "scopeSpans", "scope", "name", "fay", "spans");
			if (!rs)
				continue;
			json_object_set_new(by, svc, rs);
			json_array_append(rss, rs);
		}
		json_array_append_new(json_object_get(json_array_get(json_object_get(rs, "scopeSpans"),
								     0), "spans"), otlp_span(z));
	}
	json_decref(by);
	return json_pack("{s:o}", "resourceSpans", rss);
}

/* ---- POST /v1/traces ---------------------------------------------------------- */

static enum MHD_Result otlp_bad(struct collector *c, struct MHD_Connection *con,
				unsigned status, const char *msg)
{
	X_ADD(c, otlp_rejected, 1);
	M_ADD(c, http_spans_dropped, 1);
	return reply_json_status(c, con, status, json_pack("{s:i, s:s}", "code",
		status == 400 ? 3 : status == 413 ? 8 : status == 401 ? 16 : 3, "message", msg));
}

enum MHD_Result api_otlp(struct collector *c, struct MHD_Connection *con,
			 const struct http_body *body)
{
	const char *type = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Type");
	const char *enc = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Encoding");
	const char *p = body->p ? body->p : "";
	struct store_batch b = { 0 };
	struct zarena a = { 0 };
	struct zspan *spans;
	char err[512], *plain = NULL, msg[600];
	size_t len = body->len, n = 0;
	int ret;

	X_ADD(c, otlp_requests, 1);
	if (!http_token_ok(c, con))
		return otlp_bad(c, con, 401, "POST needs 'Authorization: Bearer TOKEN' (the collector runs with --token)");
	if (body->too_big) {
		snprintf(msg, sizeof(msg), "body: larger than the %zu-byte limit (--max-body)", c->max_body);
		return otlp_bad(c, con, 413, msg);
	}
	if (type && (strcasestr(type, "protobuf") || !strcasestr(type, "json"))) {
		snprintf(msg, sizeof(msg), "Content-Type %.100s: only OTLP/JSON (application/json) is accepted", type);
		return otlp_bad(c, con, 415, msg);
	}
	if (enc && !strcasecmp(enc, "gzip")) {
		ret = gunzip(p, len, c->max_body, &plain, &len, err, sizeof(err));
		if (ret)
			return otlp_bad(c, con, ret == -E2BIG ? 413 : 400, err);
		p = plain;
	} else if (enc && strcasecmp(enc, "identity")) {
		snprintf(msg, sizeof(msg), "Content-Encoding %.60s: only gzip is accepted", enc);
		return otlp_bad(c, con, 415, msg);
	}
	ret = otlp_parse(p, len, &a, &spans, &n, err, sizeof(err));
	free(plain);
	if (ret) {
		zarena_reset(&a);
		M_ADD(c, spans_rejected, n + 1);
		pr_debug("http: POST /v1/traces refused: %s", err);
		return ret == -ENOMEM ? reply_text(c, con, 500, "out of memory\n") :
					otlp_bad(c, con, 400, err);
	}
	M_ADD(c, spans_received, n);
	X_ADD(c, otlp_spans, n);
	b.spans = spans;
	b.nspans = n;
	ret = n ? ingest_write(c->ingest, &b, err, sizeof(err)) : 0;
	zarena_reset(&a);
	if (ret) {
		M_ADD(c, http_spans_dropped, n);
		return reply_text(c, con, 503, "store: %s\n", err);
	}
	M_ADD(c, spans_stored, b.stored);
	return reply_json(c, con, json_object());
}
