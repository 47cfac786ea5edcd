// SPDX-License-Identifier: MIT
/*
 * Zipkin -> OTLP/JSON for --export otlp=URL (the OTLP/JSON front end is
 * otlp_json_dec.c).  What every front end's spans become (otlp_map.c,
 * OpenTelemetry's Zipkin transformation):
 *
 *   resource attribute service.name  -> localEndpoint.serviceName
 *                                       ("unknown_service" when absent)
 *   kind SERVER/CLIENT/PRODUCER/CONSUMER -> the same Zipkin kind;
 *        INTERNAL, UNSPECIFIED        -> no kind
 *   startTimeUnixNano, endTimeUnixNano -> timestamp, duration (us)
 *   attributes                        -> tags (ints in decimal, bools
 *        true/false, doubles shortest, bytes base64, arrays and maps as
 *        JSON: ["a","b"], [1,2], {"k":"v"}); peer.service also names the
 *        remoteEndpoint
 *   events                            -> annotations ("name", or
 *        "name: {attributes as JSON}")
 *   status ERROR                      -> tag error = the message (or
 *        "true"), otel.status_code = ERROR; OK -> otel.status_code = OK
 *   scope name/version                -> otel.scope.name/.version tags
 *   links                             -> nothing (Zipkin has no links)
 *
 * The HTTP and gRPC answers are in src/collector/otlp_http.c and
 * otlp_grpc.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "common/log.h"
#include "otlp/otlp.h"

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

int otlp_from_zspans_pb(const json_t *spans, void **out, size_t *outlen)
{
	json_t *doc = otlp_from_zspans_json(spans);
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

