// SPDX-License-Identifier: MIT
/*
 * OTLP protobuf through protobuf-c: the one file that includes it (and the
 * code protoc-c generates at build time from src/otlp/proto's .proto
 * files into $(B)/gen/src/otlp/proto, see mk/proto.mk).  Requests are
 * decoded without it (otlp_pb_dec.c reads the wire format directly).
 *
 *   otlp_pb_response()   ExportTraceServiceResponse (partial_success)
 *   otlp_pb_status()     google.rpc.Status (+ RetryInfo): error bodies
 *   otlp_pb_encode()     struct otlp_req -> ExportTraceServiceRequest
 *                        (--export otlp-protobuf=URL)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp/otlp.h"
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

/* ---- encode a request (--export otlp-protobuf=URL) ------------------------ */

struct ectx {
	struct zarena a;
	int oom;
};

/* n zeroed elements in the arena (NULL and oom set on failure). */
static void *enew(struct ectx *e, size_t size, size_t n)
{
	void *p = zarena_zalloc(&e->a, size * (n ? n : 1));

	if (!p)
		e->oom = 1;
	return p;
}

/* A NUL-terminated copy of s for protobuf-c's string fields. */
static char *ecstr(struct ectx *e, const struct otlp_str *s)
{
	char *p = enew(e, 1, s->len + 1);

	if (p && s->len)
		memcpy(p, s->p, s->len);
	return p ? p : (char *)"";
}

static PbKV **ekvs(struct ectx *e, const struct otlp_kv *kv, size_t n);

#define AV(c) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##c

static PbAny *evalue(struct ectx *e, const struct otlp_value *v)
{
	static const Opentelemetry__Proto__Common__V1__AnyValue__ValueCase cases[] = {
		[OTLP_V_STRING] = AV(STRING_VALUE), [OTLP_V_BYTES_B64] = AV(STRING_VALUE),
		[OTLP_V_BOOL] = AV(BOOL_VALUE), [OTLP_V_INT] = AV(INT_VALUE),
		[OTLP_V_DOUBLE] = AV(DOUBLE_VALUE), [OTLP_V_BYTES] = AV(BYTES_VALUE),
		[OTLP_V_ARRAY] = AV(ARRAY_VALUE), [OTLP_V_KVLIST] = AV(KVLIST_VALUE),
	};
	PbAny *a = enew(e, sizeof(*a), 1);

	if (!a)
		return NULL;
	opentelemetry__proto__common__v1__any_value__init(a);
	if (v->type < sizeof(cases) / sizeof(cases[0]))
		a->value_case = cases[v->type];
	switch (v->type) {
	case OTLP_V_STRING:
	case OTLP_V_BYTES_B64:
		a->string_value = ecstr(e, &v->u.s);
		break;
	case OTLP_V_BOOL:
		a->bool_value = v->u.b;
		break;
	case OTLP_V_INT:
		a->int_value = v->u.i;
		break;
	case OTLP_V_DOUBLE:
		a->double_value = v->u.d;
		break;
	case OTLP_V_BYTES:
		a->bytes_value.data = (uint8_t *)v->u.s.p;
		a->bytes_value.len = v->u.s.len;
		break;
	case OTLP_V_ARRAY: {
		PbArr *arr = enew(e, sizeof(*arr), 1);
		PbAny **vs = enew(e, sizeof(*vs), v->u.arr.n);

		if (!arr || !vs) {
			a->value_case = AV(_NOT_SET);
			return a;
		}
		opentelemetry__proto__common__v1__array_value__init(arr);
		for (size_t i = 0; i < v->u.arr.n; i++)
			vs[i] = evalue(e, &v->u.arr.v[i]);
		arr->values = vs;
		arr->n_values = v->u.arr.n;
		a->array_value = arr;
		break;
	}
	case OTLP_V_KVLIST: {
		PbKVL *l = enew(e, sizeof(*l), 1);

		if (!l) {
			a->value_case = AV(_NOT_SET);
			return a;
		}
		opentelemetry__proto__common__v1__key_value_list__init(l);
		l->values = ekvs(e, v->u.kvl.kv, v->u.kvl.n);
		l->n_values = l->values ? v->u.kvl.n : 0;
		a->kvlist_value = l;
		break;
	}
	default:
		break;
	}
	return a;
}

static PbKV **ekvs(struct ectx *e, const struct otlp_kv *kv, size_t n)
{
	PbKV **out = enew(e, sizeof(*out), n), *k = enew(e, sizeof(*k), n);

	if (!out || !k)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		opentelemetry__proto__common__v1__key_value__init(&k[i]);
		k[i].key = ecstr(e, &kv[i].key);
		k[i].value = evalue(e, &kv[i].value);
		out[i] = &k[i];
	}
	return out;
}

static PbSpan *espan(struct ectx *e, const struct otlp_span *s)
{
	PbSpan *p = enew(e, sizeof(*p), 1);
	PbStatus *st = enew(e, sizeof(*st), 1);
	PbEvent **evs = enew(e, sizeof(*evs), s->nevents), *ev = enew(e, sizeof(*ev), s->nevents);

	if (!p || !st || !evs || !ev)
		return p;
	opentelemetry__proto__trace__v1__span__init(p);
	opentelemetry__proto__trace__v1__status__init(st);
	/* an id of another length was not kept by the decoder: none (and
	 * no read past the array) */
	p->trace_id = (ProtobufCBinaryData){ s->trace_len == 16 ? 16 : 0, (uint8_t *)s->trace_id };
	p->span_id = (ProtobufCBinaryData){ s->span_len == 8 ? 8 : 0, (uint8_t *)s->span_id };
	p->parent_span_id = (ProtobufCBinaryData){ s->parent_len == 8 ? 8 : 0,
						   (uint8_t *)s->parent_id };
	p->name = ecstr(e, &s->name);
	p->kind = (Opentelemetry__Proto__Trace__V1__Span__SpanKind)(s->kind < 0 ? 0 : s->kind);
	p->start_time_unix_nano = s->start_ns;
	p->end_time_unix_nano = s->end_ns;
	p->attributes = ekvs(e, s->attrs, s->nattrs);
	p->n_attributes = p->attributes ? s->nattrs : 0;
	for (size_t i = 0; i < s->nevents; i++) {
		opentelemetry__proto__trace__v1__span__event__init(&ev[i]);
		ev[i].time_unix_nano = s->events[i].time_ns;
		ev[i].name = ecstr(e, &s->events[i].name);
		ev[i].attributes = ekvs(e, s->events[i].attrs, s->events[i].nattrs);
		ev[i].n_attributes = ev[i].attributes ? s->events[i].nattrs : 0;
		evs[i] = &ev[i];
	}
	p->events = evs;
	p->n_events = s->nevents;
	st->code = (Opentelemetry__Proto__Trace__V1__Status__StatusCode)
		   (s->status_code < 0 ? 0 : s->status_code);
	st->message = ecstr(e, &s->status_msg);
	p->status = st;
	return p;
}

int otlp_pb_encode(const struct otlp_req *r, void **out, size_t *outlen)
{
	PbReq req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
	struct ectx e = { 0 };
	PbRS **rss = enew(&e, sizeof(*rss), r->nrs), *rs = enew(&e, sizeof(*rs), r->nrs);
	int ret = 0;

	for (size_t i = 0; rss && rs && i < r->nrs; i++) {
		const struct otlp_resource_spans *o = &r->rs[i];
		PbResource *res = enew(&e, sizeof(*res), 1);
		PbSS **sss = enew(&e, sizeof(*sss), o->nss), *ss = enew(&e, sizeof(*ss), o->nss);

		if (!res || !sss || !ss)
			break;
		opentelemetry__proto__trace__v1__resource_spans__init(&rs[i]);
		opentelemetry__proto__resource__v1__resource__init(res);
		res->attributes = ekvs(&e, o->attrs, o->nattrs);
		res->n_attributes = res->attributes ? o->nattrs : 0;
		rs[i].resource = res;
		for (size_t j = 0; j < o->nss; j++) {
			const struct otlp_scope_spans *os = &o->ss[j];
			PbScope *scope = enew(&e, sizeof(*scope), 1);
			PbSpan **spans = enew(&e, sizeof(*spans), os->nspans);

			if (!scope || !spans)
				break;
			opentelemetry__proto__trace__v1__scope_spans__init(&ss[j]);
			opentelemetry__proto__common__v1__instrumentation_scope__init(scope);
			scope->name = ecstr(&e, &os->scope_name);
			scope->version = ecstr(&e, &os->scope_version);
			ss[j].scope = scope;
			for (size_t k = 0; k < os->nspans; k++)
				spans[k] = espan(&e, &os->spans[k]);
			ss[j].spans = spans;
			ss[j].n_spans = os->nspans;
			sss[j] = &ss[j];
		}
		rs[i].scope_spans = sss;
		rs[i].n_scope_spans = o->nss;
		rss[i] = &rs[i];
	}
	*out = NULL;
	*outlen = 0;
	if (!e.oom) {
		req.resource_spans = rss;
		req.n_resource_spans = r->nrs;
		*outlen = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
		*out = malloc(*outlen ? *outlen : 1);
		if (*out)
			opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(
				&req, *out);
	}
	if (e.oom || !*out)
		ret = -ENOMEM;
	zarena_reset(&e.a);
	return ret;
}
