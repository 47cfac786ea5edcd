// SPDX-License-Identifier: MIT
/*
 * OTLP protobuf through protobuf-c: the one file that includes it (and the
 * code protoc-c generates at build time from src/collector/proto's .proto
 * files into $(B)/gen/src/collector/proto, see mk/proto.mk).
 *
 *   otlp_pb_decode()     ExportTraceServiceRequest -> struct otlp_req
 *   otlp_pb_response()   ExportTraceServiceResponse (partial_success)
 *   otlp_pb_status()     google.rpc.Status (+ RetryInfo): error bodies
 *   otlp_pb_export()     Zipkin spans -> ExportTraceServiceRequest
 *
 * protobuf-c checks lengths and wire types but recurses once per nested
 * message with no limit, so a body of nested AnyValues (2 bytes a level)
 * could overflow a connection thread's stack: scan() walks the message
 * first, along the schema, and refuses one nested deeper than
 * OTLP_MAX_DEPTH AnyValues.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/otlp_int.h"
#include "rpc_status.pb-c.h"
#include "trace_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest PbReq;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse PbResp;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess PbPartial;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans PbRS;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans PbSS;
typedef Opentelemetry__Proto__Trace__V1__Span PbSpan;
typedef Opentelemetry__Proto__Trace__V1__Span__Event PbEvent;
typedef Opentelemetry__Proto__Trace__V1__Status PbStatus;
typedef Opentelemetry__Proto__Resource__V1__Resource PbResource;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope PbScope;
typedef Opentelemetry__Proto__Common__V1__KeyValue PbKV;
typedef Opentelemetry__Proto__Common__V1__AnyValue PbAny;
typedef Opentelemetry__Proto__Common__V1__ArrayValue PbArr;
typedef Opentelemetry__Proto__Common__V1__KeyValueList PbKVL;

/* ---- the depth scan ------------------------------------------------------- */

enum msg { M_REQ, M_RS, M_RES, M_SS, M_SCOPE, M_SPAN, M_EVENT, M_LINK, M_KV, M_ANY,
	   M_ARR, M_KVL };

/* The message type of field f of a t, or -1 when it is not a message
 * that can nest further. */
static int child(int t, uint64_t f)
{
	switch (t) {
	case M_REQ:   return f == 1 ? M_RS : -1;
	case M_RS:    return f == 1 ? M_RES : f == 2 ? M_SS : -1;
	case M_RES:   return f == 1 ? M_KV : -1;
	case M_SS:    return f == 1 ? M_SCOPE : f == 2 ? M_SPAN : -1;
	case M_SCOPE: return f == 3 ? M_KV : -1;
	case M_SPAN:  return f == 9 ? M_KV : f == 11 ? M_EVENT : f == 13 ? M_LINK : -1;
	case M_EVENT: return f == 3 ? M_KV : -1;
	case M_LINK:  return f == 4 ? M_KV : -1;
	case M_KV:    return f == 2 ? M_ANY : -1;
	case M_ANY:   return f == 5 ? M_ARR : f == 6 ? M_KVL : -1;
	case M_ARR:   return f == 1 ? M_ANY : -1;
	case M_KVL:   return f == 1 ? M_KV : -1;
	}
	return -1;
}

static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -EINVAL;
}

/* Walk a message of type t in [p, end).  depth counts AnyValues. */
static int scan(const uint8_t *p, const uint8_t *end, int t, int depth,
		const uint8_t *base, char *err, size_t errlen)
{
	if (t == M_ANY && ++depth > OTLP_MAX_DEPTH) {
		snprintf(err, errlen, "body: attribute values nested deeper than %d (at byte %td)",
			 OTLP_MAX_DEPTH, p - base);
		return -EINVAL;
	}
	while (p < end) {
		const uint8_t *at = p;
		uint64_t key, len;
		int c, ret;

		if (varint(&p, end, &key)) {
			snprintf(err, errlen, "body: truncated field key at byte %td", at - base);
			return -EINVAL;
		}
		switch (key & 7) {
		case 0:
			if (varint(&p, end, &len))
				goto truncated;
			break;
		case 1:
			if (end - p < 8)
				goto truncated;
			p += 8;
			break;
		case 5:
			if (end - p < 4)
				goto truncated;
			p += 4;
			break;
		case 2:
			if (varint(&p, end, &len) || len > (uint64_t)(end - p))
				goto truncated;
			c = child(t, key >> 3);
			if (c >= 0 && (ret = scan(p, p + len, c, depth, base, err, errlen)))
				return ret;
			p += len;
			break;
		default:
			snprintf(err, errlen, "body: field %llu at byte %td: wire type %d is not "
				 "used by OTLP", (unsigned long long)(key >> 3), at - base, (int)(key & 7));
			return -EINVAL;
		}
		continue;
truncated:
		snprintf(err, errlen, "body: field %llu at byte %td runs past the end of its "
			 "message (truncated, or a wrong length)", (unsigned long long)(key >> 3),
			 at - base);
		return -EINVAL;
	}
	return 0;
}

/* ---- decode ------------------------------------------------------------- */

/* p = n + 1 zeroed elements in x's arena; 0 or -ENOMEM. */
#define ARENA_ARRAY(x, p, n) \
	(((p) = zarena_zalloc((x)->a, sizeof(*(p)) * ((n) + 1))) ? 0 : -ENOMEM)

struct pctx {
	struct zarena *a;
	int utf8_bad;           /* a string of the current span is not UTF-8 */
};

static int utf8_ok(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t k;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

/* A protobuf-c string (NUL-terminated, owned by the unpacked message)
 * copied into the arena. */
static int pstr(struct pctx *x, const char *s, struct otlp_str *out)
{
	size_t len = s ? strlen(s) : 0;
	char *p;

	if (!utf8_ok((const unsigned char *)s, len))
		x->utf8_bad = 1;
	p = zarena_alloc(x->a, len + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, s ? s : "", len);
	p[len] = '\0';
	out->p = p;
	out->len = len;
	return 0;
}

static int pattrs(struct pctx *x, PbKV *const *kv, size_t n, struct otlp_kv **out, size_t *nout);

static int pvalue(struct pctx *x, const PbAny *v, struct otlp_value *out)
{
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (!v)
		return 0;
	switch (v->value_case) {
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
		out->type = OTLP_V_STRING;
		return pstr(x, v->string_value, &out->u.s);
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
		out->type = OTLP_V_BOOL;
		out->u.b = v->bool_value;
		return 0;
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
		out->type = OTLP_V_INT;
		out->u.i = v->int_value;
		return 0;
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
		out->type = OTLP_V_DOUBLE;
		out->u.d = v->double_value;
		return 0;
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE: {
		char *p = zarena_alloc(x->a, v->bytes_value.len + 1);

		if (!p)
			return -ENOMEM;
		if (v->bytes_value.len)
			memcpy(p, v->bytes_value.data, v->bytes_value.len);
		out->type = OTLP_V_BYTES;
		out->u.s.p = p;
		out->u.s.len = v->bytes_value.len;
		return 0;
	}
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE: {
		const PbArr *arr = v->array_value;
		size_t n = arr ? arr->n_values : 0;

		out->type = OTLP_V_ARRAY;
		if (ARENA_ARRAY(x, out->u.arr.v, n))
			return -ENOMEM;
		for (size_t i = 0; i < n && !ret; i++)
			ret = pvalue(x, arr->values[i], &out->u.arr.v[i]);
		out->u.arr.n = n;
		return ret;
	}
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
		out->type = OTLP_V_KVLIST;
		if (!v->kvlist_value)
			return 0;
		return pattrs(x, v->kvlist_value->values, v->kvlist_value->n_values,
			      &out->u.kvl.kv, &out->u.kvl.n);
	default:
		return 0;       /* OTLP_V_NONE: an empty AnyValue */
	}
}

static int pattrs(struct pctx *x, PbKV *const *kv, size_t n, struct otlp_kv **out, size_t *nout)
{
	int ret;

	*nout = 0;
	if (ARENA_ARRAY(x, *out, n))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if ((ret = pstr(x, kv[i]->key, &(*out)[i].key)) ||
		    (ret = pvalue(x, kv[i]->value, &(*out)[i].value)))
			return ret;
	*nout = n;
	return 0;
}

static size_t pid(const ProtobufCBinaryData *b, uint8_t *out, size_t n)
{
	if (b->len == n)
		memcpy(out, b->data, n);
	return b->len;
}

static int pspan(struct pctx *x, const PbSpan *ps, struct otlp_span *s)
{
	int ret;

	memset(s, 0, sizeof(*s));
	x->utf8_bad = 0;
	s->trace_len = pid(&ps->trace_id, s->trace_id, 16);
	s->span_len = pid(&ps->span_id, s->span_id, 8);
	s->parent_len = pid(&ps->parent_span_id, s->parent_id, 8);
	if ((ret = pstr(x, ps->name, &s->name)))
		return ret;
	s->kind = (int)ps->kind >= 0 && (int)ps->kind <= 5 ? (int)ps->kind : -1;
	s->start_ns = ps->start_time_unix_nano;
	s->end_ns = ps->end_time_unix_nano;
	if ((ret = pattrs(x, ps->attributes, ps->n_attributes, &s->attrs, &s->nattrs)))
		return ret;
	s->nlinks = ps->n_links;
	if (ps->status) {
		s->status_code = (int)ps->status->code >= 0 && (int)ps->status->code <= 2 ?
				 (int)ps->status->code : -1;
		if ((ret = pstr(x, ps->status->message, &s->status_msg)))
			return ret;
	}
	if (ARENA_ARRAY(x, s->events, ps->n_events))
		return -ENOMEM;
	for (size_t i = 0; i < ps->n_events; i++) {
		const PbEvent *pe = ps->events[i];
		struct otlp_event *e = &s->events[i];

		e->time_ns = pe->time_unix_nano;
		e->has_name = 1;
		if ((ret = pstr(x, pe->name, &e->name)) ||
		    (ret = pattrs(x, pe->attributes, pe->n_attributes, &e->attrs, &e->nattrs)))
			return ret;
	}
	s->nevents = ps->n_events;
	if (x->utf8_bad)
		s->bad = "a string (name, attribute, event or status) is not valid UTF-8";
	return 0;
}

static int convert(struct pctx *x, const PbReq *pr, struct otlp_req *r, char *err, size_t errlen)
{
	int ret;

	if (ARENA_ARRAY(x, r->rs, pr->n_resource_spans))
		return -ENOMEM;
	for (size_t i = 0; i < pr->n_resource_spans; i++) {
		const PbRS *prs = pr->resource_spans[i];
		struct otlp_resource_spans *rs = &r->rs[i];

		x->utf8_bad = 0;
		if (prs->resource && (ret = pattrs(x, prs->resource->attributes,
						   prs->resource->n_attributes, &rs->attrs, &rs->nattrs)))
			return ret;
		if (ARENA_ARRAY(x, rs->ss, prs->n_scope_spans))
			return -ENOMEM;
		for (size_t j = 0; j < prs->n_scope_spans; j++) {
			const PbSS *pss = prs->scope_spans[j];
			struct otlp_scope_spans *ss = &rs->ss[j];

			if (pss->scope && ((ret = pstr(x, pss->scope->name, &ss->scope_name)) ||
					   (ret = pstr(x, pss->scope->version, &ss->scope_version))))
				return ret;
			if (x->utf8_bad) {
				snprintf(err, errlen, "resourceSpans[%zu]: a resource attribute or the "
					 "scope's name or version is not valid UTF-8", i);
				return -EINVAL;
			}
			if (ARENA_ARRAY(x, ss->spans, pss->n_spans))
				return -ENOMEM;
			for (size_t k = 0; k < pss->n_spans; k++)
				if ((ret = pspan(x, pss->spans[k], &ss->spans[k])))
					return ret;
			ss->nspans = pss->n_spans;
		}
		rs->nss = prs->n_scope_spans;
	}
	r->nrs = pr->n_resource_spans;
	return 0;
}

int otlp_pb_decode(const void *body, size_t len, struct zarena *a,
		   struct otlp_req *r, char *err, size_t errlen)
{
	struct pctx x = { .a = a };
	PbReq *pr;
	int ret;

	memset(r, 0, sizeof(*r));
	ret = scan(body, (const uint8_t *)body + len, M_REQ, 0, body, err, errlen);
	if (ret)
		return ret;
	pr = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
		NULL, len, body);
	if (!pr) {
		snprintf(err, errlen, "body: not a protobuf ExportTraceServiceRequest (a field "
			 "of the wrong type, or out of memory)");
		return -EINVAL;
	}
	ret = convert(&x, pr, r, err, errlen);
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
		pr, NULL);
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return ret;
}

/* ---- encode ------------------------------------------------------------- */

int otlp_pb_response(uint64_t rejected, const char *msg, void **out, size_t *outlen)
{
	PbResp resp = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
	PbPartial ps = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;
	size_t n;

	*out = NULL;
	*outlen = 0;
	if (rejected) {
		ps.rejected_spans = (int64_t)rejected;
		ps.error_message = (char *)(msg ? msg : "");
		resp.partial_success = &ps;
	}
	n = opentelemetry__proto__collector__trace__v1__export_trace_service_response__get_packed_size(&resp);
	if (!n)
		return 0;
	*out = malloc(n);
	if (!*out)
		return -ENOMEM;
	*outlen = opentelemetry__proto__collector__trace__v1__export_trace_service_response__pack(
		&resp, *out);
	return 0;
}

int otlp_pb_status(int code, const char *msg, unsigned retry_s, void **out, size_t *outlen)
{
	Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
	Google__Rpc__RetryInfo ri = GOOGLE__RPC__RETRY_INFO__INIT;
	Google__Rpc__Duration d = GOOGLE__RPC__DURATION__INIT;
	Google__Rpc__Any any = GOOGLE__RPC__ANY__INIT, *anys[1] = { &any };
	uint8_t *ribuf = NULL;
	size_t n;

	st.code = code;
	st.message = (char *)(msg ? msg : "");
	if (retry_s) {
		d.seconds = retry_s;
		ri.retry_delay = &d;
		n = google__rpc__retry_info__get_packed_size(&ri);
		ribuf = malloc(n);
		if (!ribuf)
			return -ENOMEM;
		any.type_url = "type.googleapis.com/google.rpc.RetryInfo";
		any.value.data = ribuf;
		any.value.len = google__rpc__retry_info__pack(&ri, ribuf);
		st.details = anys;
		st.n_details = 1;
	}
	n = google__rpc__status__get_packed_size(&st);
	*out = malloc(n ? n : 1);
	if (!*out) {
		free(ribuf);
		return -ENOMEM;
	}
	*outlen = google__rpc__status__pack(&st, *out);
	free(ribuf);
	return 0;
}
