// SPDX-License-Identifier: MIT
/*
 * struct otlp_req -> OTLP/JSON text, for --export otlp=URL (the OTLP/JSON
 * front end is otlp_json_dec.c; the request comes from
 * otlp_req_from_zspans(), otlp_export.c).  Compact, fields in the order
 * the export always wrote them (jansson's insertion order):
 *
 *   {"resourceSpans":[{"resource":{"attributes":[...]},
 *     "scopeSpans":[{"scope":{"name":..,"version":..},"spans":[
 *       {"traceId":"<32 hex>","spanId":"<16 hex>","name":..,"kind":N,
 *        "startTimeUnixNano":"<ns>","endTimeUnixNano":"<ns>",
 *        "attributes":[{"key":..,"value":{"stringValue":..}}],
 *        "events":[{"timeUnixNano":"<ns>","name":..}],
 *        "status":{"code":N,"message":..},"parentSpanId":"<16 hex>"}]}]}]}
 *
 * Strings through the one JSON string writer (common/json_str.h).
 * What each span field becomes in Zipkin terms: otlp_map.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/json_str.h"
#include "otlp/otlp.h"

static void put(void *ctx, const char *s, size_t n)
{
	wbuf_put(ctx, s, n);
}

static void lit(struct wbuf *o, const char *s)
{
	put(o, s, strlen(s));
}

static void str(struct wbuf *o, const struct otlp_str *s)
{
	json_str_put(put, o, s->p ? s->p : "", s->len);
}

/* A uint64 in decimal; quoted as OTLP/JSON writes 64-bit integers. */
static void u64(struct wbuf *o, uint64_t v, int quoted)
{
	char tmp[24], *e = tmp + sizeof(tmp), *q = e;

	do {
		*--q = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (quoted)
		put(o, "\"", 1);
	put(o, q, (size_t)(e - q));
	if (quoted)
		put(o, "\"", 1);
}

static void hex(struct wbuf *o, const uint8_t *b, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[34];
	size_t k = 0;

	tmp[k++] = '"';
	for (size_t i = 0; i < n; i++) {
		tmp[k++] = digits[b[i] >> 4];
		tmp[k++] = digits[b[i] & 15];
	}
	tmp[k++] = '"';
	put(o, tmp, k);
}

/* [{"key":..,"value":{"stringValue":..}}, ...]; -EINVAL for a value that
 * is not a string. */
static int attrs(struct wbuf *o, const struct otlp_kv *kv, size_t n)
{
	put(o, "[", 1);
	for (size_t i = 0; i < n; i++) {
		if (kv[i].value.type != OTLP_V_STRING && kv[i].value.type != OTLP_V_BYTES_B64)
			return -EINVAL;
		lit(o, i ? ",{\"key\":" : "{\"key\":");
		str(o, &kv[i].key);
		lit(o, ",\"value\":{\"stringValue\":");
		str(o, &kv[i].value.u.s);
		lit(o, "}}");
	}
	put(o, "]", 1);
	return 0;
}

static int span(struct wbuf *o, const struct otlp_span *s)
{
	lit(o, "{\"traceId\":");
	hex(o, s->trace_id, s->trace_len == 16 ? 16 : 0);
	lit(o, ",\"spanId\":");
	hex(o, s->span_id, s->span_len == 8 ? 8 : 0);
	lit(o, ",\"name\":");
	str(o, &s->name);
	lit(o, ",\"kind\":");
	u64(o, s->kind < 0 ? 0 : (uint64_t)s->kind, 0);
	lit(o, ",\"startTimeUnixNano\":");
	u64(o, s->start_ns, 1);
	lit(o, ",\"endTimeUnixNano\":");
	u64(o, s->end_ns, 1);
	lit(o, ",\"attributes\":");
	if (attrs(o, s->attrs, s->nattrs))
		return -EINVAL;
	lit(o, ",\"events\":[");
	for (size_t i = 0; i < s->nevents; i++) {
		lit(o, i ? ",{\"timeUnixNano\":" : "{\"timeUnixNano\":");
		u64(o, s->events[i].time_ns, 1);
		lit(o, ",\"name\":");
		str(o, &s->events[i].name);
		if (s->events[i].nattrs) {
			lit(o, ",\"attributes\":");
			if (attrs(o, s->events[i].attrs, s->events[i].nattrs))
				return -EINVAL;
		}
		put(o, "}", 1);
	}
	lit(o, "],\"status\":{\"code\":");
	u64(o, s->status_code < 0 ? 0 : (uint64_t)s->status_code, 0);
	lit(o, ",\"message\":");
	str(o, &s->status_msg);
	put(o, "}", 1);
	if (s->parent_len == 8) {
		lit(o, ",\"parentSpanId\":");
		hex(o, s->parent_id, 8);
	}
	put(o, "}", 1);
	return 0;
}

int otlp_json_encode(const struct otlp_req *r, char **out, size_t *outlen)
{
	struct wbuf o = { 0 };

	lit(&o, "{\"resourceSpans\":[");
	for (size_t i = 0; i < r->nrs; i++) {
		const struct otlp_resource_spans *rs = &r->rs[i];

		lit(&o, i ? ",{\"resource\":{\"attributes\":" : "{\"resource\":{\"attributes\":");
		if (attrs(&o, rs->attrs, rs->nattrs))
			goto inval;
		lit(&o, "},\"scopeSpans\":[");
		for (size_t j = 0; j < rs->nss; j++) {
			const struct otlp_scope_spans *ss = &rs->ss[j];

			lit(&o, j ? ",{\"scope\":{\"name\":" : "{\"scope\":{\"name\":");
			str(&o, &ss->scope_name);
			if (ss->scope_version.len) {
				lit(&o, ",\"version\":");
				str(&o, &ss->scope_version);
			}
			lit(&o, "},\"spans\":[");
			for (size_t k = 0; k < ss->nspans; k++) {
				if (k)
					put(&o, ",", 1);
				if (span(&o, &ss->spans[k]))
					goto inval;
			}
			lit(&o, "]}");
		}
		lit(&o, "]}");
	}
	lit(&o, "]}");
	put(&o, "", 1);         /* the NUL */
	if (o.err) {
		free(o.p);
		return -ENOMEM;
	}
	*out = (char *)o.p;
	*outlen = o.len - 1;
	return 0;
inval:
	free(o.p);
	return -EINVAL;
}
