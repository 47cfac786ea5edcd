// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 JSON codec: trace ids, and writing (reading is zjson_dec.c).
 * Reading validates every field and names the first bad one, except
 * where zipkin2's own reader is lenient: an IP that does not parse is
 * dropped, a negative timestamp or duration is absent, a negative port is
 * none (the span is kept); writing follows zipkin2's V2SpanWriter: field order
 * traceId, parentId, id, kind, name, timestamp, duration, localEndpoint,
 * remoteEndpoint, annotations, tags, debug, shared, with absent fields
 * (and false flags, empty lists) left out.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/zjson.h"
#include "common/err.h"
#include "common/spanrec.h"

const char *const zjson_kinds[SPAN_KIND_MAX] = {
	[SPAN_KIND_CLIENT] = "CLIENT", [SPAN_KIND_SERVER] = "SERVER",
	[SPAN_KIND_PRODUCER] = "PRODUCER", [SPAN_KIND_CONSUMER] = "CONSUMER",
};

/* ---- hex ids ------------------------------------------------------------ */

int zjson_trace_id(const char *s, size_t len, uint64_t *hi, uint64_t *lo,
		   char *err, size_t errlen)
{
	if (!len || len > 32) {
		snprintf(err, errlen, "trace id '%.40s': must be 1 to 32 lowercase hex characters", s);
		return -EINVAL;
	}
	*hi = 0;
	if (len > 16) {
		if (spanrec_hex_u64(s, len - 16, true, hi) || spanrec_hex_u64(s + len - 16, 16, true, lo))
			goto bad;
	} else if (spanrec_hex_u64(s, len, true, lo)) {
		goto bad;
	}
	if (!*hi && !*lo) {
		snprintf(err, errlen, "trace id '%.*s': is all zeros", (int)len, s);
		return -EINVAL;
	}
	return 0;
bad:
	snprintf(err, errlen, "trace id '%.40s': must be lowercase hex (0-9, a-f)", s);
	return -EINVAL;
}

/* ---- writing ------------------------------------------------------------ */

/* A JSON string of s; bytes that are not valid UTF-8 (a span record may
 * carry any bytes) become '?' rather than failing the whole answer. */
static json_t *jstrn(struct zs_str s)
{
	json_t *v = json_stringn(s.p, s.len);
	char *c;

	if (v || !s.len)
		return v ? v : json_string("");
	c = malloc(s.len);
	if (!c)
		return NULL;
	for (uint32_t i = 0; i < s.len; i++)
		c[i] = (unsigned char)s.p[i] < 0x80 ? s.p[i] : '?';
	v = json_stringn(c, s.len);
	free(c);
	return v;
}

static int set(json_t *o, const char *k, json_t *v)
{
	return v ? json_object_set_new_nocheck(o, k, v) : -1;
}

static json_t *endpoint(const struct zs_endpoint *e)
{
	json_t *o = json_object();
	int r = 0;

	if (!o)
		return NULL;
	if (e->service.len)
		r |= set(o, "serviceName", jstrn(e->service));
	if (e->ipv4[0])
		r |= set(o, "ipv4", json_string(e->ipv4));
	if (e->ipv6[0])
		r |= set(o, "ipv6", json_string(e->ipv6));
	if (e->port)
		r |= set(o, "port", json_integer(e->port));
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *zjson_span(const struct zspan *s)
{
	char hex[33];
	json_t *o = json_object(), *l;
	int r = 0;

	if (!o)
		return NULL;
	spanrec_trace_hex(s->trace_hi, s->trace_lo, hex);
	r |= set(o, "traceId", json_string(hex));
	if (s->parent_id) {
		spanrec_id_hex(s->parent_id, hex);
		r |= set(o, "parentId", json_string(hex));
	}
	spanrec_id_hex(s->id, hex);
	r |= set(o, "id", json_string(hex));
	if (s->kind && s->kind < SPAN_KIND_MAX)
		r |= set(o, "kind", json_string(zjson_kinds[s->kind]));
	if (s->name.len)
		r |= set(o, "name", jstrn(s->name));
	if (s->timestamp_us)
		r |= set(o, "timestamp", json_integer((json_int_t)s->timestamp_us));
	if (s->duration_us)
		r |= set(o, "duration", json_integer((json_int_t)s->duration_us));
	if (zs_ep_present(&s->local))
		r |= set(o, "localEndpoint", endpoint(&s->local));
	if (zs_ep_present(&s->remote))
		r |= set(o, "remoteEndpoint", endpoint(&s->remote));
	if (s->nannotations) {
		l = json_array();
		r |= set(o, "annotations", l);
		for (uint32_t i = 0; l && i < s->nannotations; i++)
			r |= json_array_append_new(l, json_pack("{sIso}",
				"timestamp", (json_int_t)s->annotations[i].ts_us,
				"value", jstrn(s->annotations[i].value)));
	}
	if (s->ntags) {
		l = json_object();
		r |= set(o, "tags", l);
		for (uint32_t i = 0; l && i < s->ntags; i++) {
			char key[256];
			const struct zs_str *k = &s->tags[i].key;

			/* jansson keys are C strings: a key longer than this
			 * or holding NUL is cut (keys are short in practice) */
			snprintf(key, sizeof(key), "%.*s", (int)k->len, k->p);
			r |= set(l, key, jstrn(s->tags[i].value));
		}
	}
	if (s->debug)
		r |= set(o, "debug", json_true());
	if (s->shared)
		r |= set(o, "shared", json_true());
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *zjson_spans(const struct zspan *s, size_t n)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < n; i++) {
		if (json_array_append_new(arr, zjson_span(&s[i]))) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}
