// SPDX-License-Identifier: MIT
/*
 * The OTLP protobuf front end as it was before the direct wire reader
 * (src/otlp/otlp_pb_dec.c): protobuf-c unpacks the whole request into its
 * message tree (in the request's arena), then the tree is walked into
 * struct otlp_req.  Kept here only as the oracle of fuzz_otlp_pb.c, which
 * checks that both accept, refuse and give the same request.  One fix
 * against the original: a span's UTF-8 mark no longer leaks into the
 * check of the next scopeSpans' scope (which refused the whole request
 * when the last span of a scopeSpans had a string that is not UTF-8).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "otlp/otlp.h"
#include "trace_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest PbReq;
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

/* ---- decode ------------------------------------------------------------- */

/* p = n + 1 zeroed elements in x's arena; 0 or -ENOMEM. */
#define ARENA_ARRAY(x, p, n) \
	(((p) = zarena_zalloc((x)->a, sizeof(*(p)) * ((n) + 1))) ? 0 : -ENOMEM)

struct pctx {
	struct zarena *a;
	int utf8_bad;           /* a string of the current span is not UTF-8 */
};

/* A protobuf-c string (NUL-terminated, unpacked into the request's
 * arena, so it lives as long as *out: not copied). */
static int pstr(struct pctx *x, const char *s, struct otlp_str *out)
{
	size_t len = s ? strlen(s) : 0;

	if (utf8_invalid_at(s, len) != len)
		x->utf8_bad = 1;
	out->p = s ? s : "";
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
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE:
		/* in the request's arena too */
		out->type = OTLP_V_BYTES;
		out->u.s.p = v->bytes_value.len ? (const char *)v->bytes_value.data : "";
		out->u.s.len = v->bytes_value.len;
		return 0;
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
			x->utf8_bad = 0;        /* the fix: see the header */
			ss->nspans = pss->n_spans;
		}
		rs->nss = prs->n_scope_spans;
	}
	r->nrs = pr->n_resource_spans;
	return 0;
}

/* protobuf-c's allocations for one unpack, from the request's arena: no
 * malloc() and free() per message and string, all dropped with the
 * request, and its strings are the request's (no copy). */
static void *pb_alloc(void *arena, size_t size)
{
	return zarena_alloc(arena, size ? size : 1);
}

static void pb_free(void *arena, void *p)
{
	(void)arena;
	(void)p;
}

static int otlp_pb_ref_decode(const void *body, size_t len, struct zarena *a,
		   struct otlp_req *r, char *err, size_t errlen)
{
	struct pctx x = { .a = a };
	ProtobufCAllocator alloc = { .alloc = pb_alloc, .free = pb_free, .allocator_data = a };
	PbReq *pr;
	int ret;

	memset(r, 0, sizeof(*r));
	ret = otlp_pb_scan(body, len, err, errlen);
	if (ret)
		return ret;
	pr = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
		&alloc, len, body);
	if (!pr) {
		snprintf(err, errlen, "body: not a protobuf ExportTraceServiceRequest (a field "
			 "of the wrong type, or out of memory)");
		return -EINVAL;
	}
	ret = convert(&x, pr, r, err, errlen);
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return ret;
}
