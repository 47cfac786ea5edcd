/* SPDX-License-Identifier: MIT */
/*
 * The export's OTLP encoding as it was before it was written straight
 * from the span model (src/otlp/otlp_export.c, otlp_json.c): each span
 * as Zipkin v2 JSON (zjson_span), that turned into an OTLP/JSON tree
 * with jansson, and for protobuf that tree's text decoded by the JSON
 * front end and encoded by otlp_pb_encode().  Kept as the oracle of
 * test_otlp_export.c (the same bytes) and the "before" of
 * bench/bench_export.c.  Header-only: static functions.
 */
#ifndef FAY_TESTS_OTLP_EXPORT_REF_H
#define FAY_TESTS_OTLP_EXPORT_REF_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "otlp/otlp.h"

static json_t *ref_from_zspans_json(const json_t *spans);

static json_t *ref_kv(const char *k, const char *v)
{
	return json_pack("{s:s, s:{s:s}}", "key", k, "value", "stringValue", v);
}

static json_t *ref_span(json_t *z)
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
		json_array_append_new(attrs, ref_kv(k, json_string_value(v) ? json_string_value(v) : ""));
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

static int ref_from_zspans_pb(const json_t *spans, void **out, size_t *outlen)
{
	json_t *doc = ref_from_zspans_json(spans);
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	struct zarena a = { 0 };
	struct otlp_req r;
	char err[256];
	int ret;

	json_decref(doc);
	if (!text)
		return -ENOMEM;
	ret = otlp_json_decode(text, strlen(text), &a, &r, err, sizeof(err));
	if (!ret)
		ret = otlp_pb_encode(&r, out, outlen);
	zarena_reset(&a);
	free(text);
	return ret;
}

static json_t *ref_from_zspans_json(const json_t *spans)
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
				       "resource", "attributes", ref_kv("service.name", svc),
				       "scopeSpans", "scope", "name", "fay", "spans");
			if (!rs)
				continue;
			json_object_set_new(by, svc, rs);
			json_array_append(rss, rs);
		}
		json_array_append_new(json_object_get(json_array_get(json_object_get(rs, "scopeSpans"),
								     0), "spans"), ref_span(z));
	}
	json_decref(by);
	return json_pack("{s:o}", "resourceSpans", rss);
}


#endif
