// SPDX-License-Identifier: MIT
/*
 * fay's spans -> struct otlp_req, for --export otlp=URL and
 * otlp-protobuf=URL (otlp_json_encode(), otlp_pb_encode() write it): the
 * way back of otlp_map.c, straight from the span model, no Zipkin JSON in
 * between.  What it writes is what the export wrote when it went through
 * Zipkin JSON and jansson (the oracle: tests/unit/otlp/otlp_export_ref.h):
 *
 *   localEndpoint.serviceName   -> one ResourceSpans per service, in the
 *                                  order of the spans ("unknown_service"
 *                                  when absent), resource attribute
 *                                  service.name; one ScopeSpans, scope
 *                                  name "fay"
 *   trace id                    -> 16 bytes (a 64-bit id left-padded)
 *   id, parent id               -> spanId, parentSpanId (none when 0)
 *   name                        -> name ("" when absent)
 *   kind                        -> SERVER 2, CLIENT 3, PRODUCER 4,
 *                                  CONSUMER 5, none INTERNAL 1
 *   timestamp, duration (us)    -> start, start + duration (ns)
 *   tags                        -> string attributes, in the span's order;
 *                                  an "error" tag also makes status ERROR
 *                                  with its value as the message (else
 *                                  status UNSET)
 *   annotations                 -> events (time, name = the value)
 *   remote endpoint, debug, shared -> nothing (as before)
 *
 * Strings are taken as jansson held them: up to their first NUL byte (the
 * old path read them as C strings), a tag key at most 255 bytes, and a
 * string that is not valid UTF-8 has every byte >= 0x80 replaced by '?'.
 */
#include <errno.h>
#include <string.h>

#include "common/utf8.h"
#include "otlp/otlp.h"

#define KEY_MAX 255     /* the old path cut tag keys at 255 bytes */

static void be64_put(uint8_t *b, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
}

/* p[0, len) as an otlp_str: cut at the first NUL and at max, and, when it
 * is not valid UTF-8, a copy in a with every byte >= 0x80 made '?'. */
static int text(struct zarena *a, struct otlp_str *out, const char *p, size_t len, size_t max)
{
	const char *nul = len ? memchr(p, 0, len) : NULL;
	char *c;

	if (nul)
		len = (size_t)(nul - p);
	if (len > max)
		len = max;
	out->p = p;
	out->len = len;
	if (utf8_invalid_at(p, len) == len)
		return 0;
	c = zarena_alloc(a, len);
	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		c[i] = (unsigned char)p[i] < 0x80 ? p[i] : '?';
	out->p = c;
	return 0;
}

static int map_span(struct zarena *a, const struct zspan *z, struct otlp_span *s)
{
	static const uint8_t kinds[SPAN_KIND_MAX] = {
		[SPAN_KIND_CLIENT] = 3, [SPAN_KIND_SERVER] = 2,
		[SPAN_KIND_PRODUCER] = 4, [SPAN_KIND_CONSUMER] = 5,
	};

	memset(s, 0, sizeof(*s));
	be64_put(s->trace_id, z->trace_hi);
	be64_put(s->trace_id + 8, z->trace_lo);
	s->trace_len = 16;
	be64_put(s->span_id, z->id);
	s->span_len = 8;
	if (z->parent_id) {
		be64_put(s->parent_id, z->parent_id);
		s->parent_len = 8;
	}
	if (text(a, &s->name, z->name.p, z->name.len, SIZE_MAX))
		return -ENOMEM;
	s->kind = z->kind < SPAN_KIND_MAX && kinds[z->kind] ? kinds[z->kind] : 1;
	s->start_ns = z->timestamp_us * 1000;
	s->end_ns = (z->timestamp_us + z->duration_us) * 1000;
	if (z->ntags && !(s->attrs = zarena_alloc(a, sizeof(*s->attrs) * z->ntags)))
		return -ENOMEM;
	for (uint32_t i = 0; i < z->ntags; i++) {
		struct otlp_kv *kv = &s->attrs[s->nattrs++];

		kv->value.type = OTLP_V_STRING;
		if (text(a, &kv->key, z->tags[i].key.p, z->tags[i].key.len, KEY_MAX) ||
		    text(a, &kv->value.u.s, z->tags[i].value.p, z->tags[i].value.len, SIZE_MAX))
			return -ENOMEM;
		if (kv->key.len == 5 && !memcmp(kv->key.p, "error", 5)) {
			s->status_code = 2;
			s->status_msg = kv->value.u.s;
		}
	}
	if (z->nannotations &&
	    !(s->events = zarena_zalloc(a, sizeof(*s->events) * z->nannotations)))
		return -ENOMEM;
	for (uint32_t i = 0; i < z->nannotations; i++) {
		struct otlp_event *ev = &s->events[s->nevents++];

		ev->time_ns = z->annotations[i].ts_us * 1000;
		ev->has_name = 1;
		if (text(a, &ev->name, z->annotations[i].value.p, z->annotations[i].value.len,
			 SIZE_MAX))
			return -ENOMEM;
	}
	return 0;
}

int otlp_req_from_zspans(const struct zspan *z, size_t n, struct zarena *a, struct otlp_req *r)
{
	static const struct otlp_str unknown = { "unknown_service", 15 }, fay = { "fay", 3 };
	struct otlp_str *svc = n ? zarena_alloc(a, sizeof(*svc) * n) : NULL;
	size_t *of = n ? zarena_alloc(a, sizeof(*of) * n) : NULL;  /* span i's group */
	size_t *count;

	memset(r, 0, sizeof(*r));
	if (!n)
		return 0;
	r->rs = zarena_zalloc(a, sizeof(*r->rs) * n);
	count = zarena_zalloc(a, sizeof(*count) * n);
	if (!svc || !of || !r->rs || !count)
		return -ENOMEM;
	/* the groups, in the order their services first appear */
	for (size_t i = 0; i < n; i++) {
		struct otlp_str s = unknown;
		size_t g;

		if (z[i].local.service.len &&
		    text(a, &s, z[i].local.service.p, z[i].local.service.len, SIZE_MAX))
			return -ENOMEM;
		for (g = 0; g < r->nrs; g++)
			if (svc[g].len == s.len && !memcmp(svc[g].p, s.p, s.len))
				break;
		if (g == r->nrs)
			svc[r->nrs++] = s;
		of[i] = g;
		count[g]++;
	}
	for (size_t g = 0; g < r->nrs; g++) {
		struct otlp_resource_spans *rs = &r->rs[g];

		rs->attrs = zarena_zalloc(a, sizeof(*rs->attrs));
		rs->ss = zarena_zalloc(a, sizeof(*rs->ss));
		if (!rs->attrs || !rs->ss ||
		    !(rs->ss->spans = zarena_alloc(a, sizeof(*rs->ss->spans) * count[g])))
			return -ENOMEM;
		rs->attrs->key = (struct otlp_str){ "service.name", 12 };
		rs->attrs->value.type = OTLP_V_STRING;
		rs->attrs->value.u.s = svc[g];
		rs->nattrs = 1;
		rs->ss->scope_name = fay;
		rs->nss = 1;
	}
	for (size_t i = 0; i < n; i++) {
		struct otlp_scope_spans *ss = r->rs[of[i]].ss;

		if (map_span(a, &z[i], &ss->spans[ss->nspans++]))
			return -ENOMEM;
	}
	return 0;
}
