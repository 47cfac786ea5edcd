// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 protobuf decoding over protobuf-c and the C that protoc-c
 * made of src/collector/zipkin.proto (mk/proto.mk).  The only file that
 * includes them.  Field rules follow zipkin2's proto3 reader
 * (Proto3ZipkinFields): see zproto.h.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "collector/zproto.h"
#include "zipkin.pb-c.h"

struct pctx {
	struct zarena *a;
	char *err;
	size_t errlen;
	size_t idx;
};

static int bad(struct pctx *p, const char *field, const char *why)
{
	snprintf(p->err, p->errlen, "span %zu: %s: %s", p->idx, field, why);
	return -EINVAL;
}

static uint64_t be64(const uint8_t *b)
{
	uint64_t v;

	memcpy(&v, b, sizeof(v));
	return be64toh(v);
}

static int get_id(struct pctx *p, ProtobufCBinaryData d, const char *field, uint64_t *out)
{
	if (d.len != 8)
		return bad(p, field, "must be 8 bytes");
	*out = be64(d.data);
	if (!*out)
		return bad(p, field, "must not be all zeros");
	return 0;
}

static int get_str(struct pctx *p, const char *s, struct zs_str *out, int lower)
{
	if (!s || !*s) {
		*out = (struct zs_str){ "", 0 };
		return 0;
	}
	return zarena_str(p->a, out, s, strlen(s), lower);
}

static int get_endpoint(struct pctx *p, const Zipkin__Proto3__Endpoint *in, const char *field,
			struct zs_endpoint *e)
{
	memset(e, 0, sizeof(*e));
	if (!in)
		return 0;
	if (get_str(p, in->service_name, &e->service, 1))
		return -ENOMEM;
	/* zipkin2's Endpoint.Builder.parseIp(byte[]): another length is no address */
	if (in->ipv4.len)
		zs_ep_set_ip_bytes(e, in->ipv4.data, in->ipv4.len);
	if (in->ipv6.len)
		zs_ep_set_ip_bytes(e, in->ipv6.data, in->ipv6.len);
	if (in->port > 65535) {
		char f[64];

		snprintf(f, sizeof(f), "%s.port", field);
		return bad(p, f, "must be an integer up to 65535");
	}
	if (in->port > 0)
		e->port = (uint16_t)in->port;
	return 0;
}

static int span(struct pctx *p, const Zipkin__Proto3__Span *in, struct zspan *s)
{
	int ret;

	memset(s, 0, sizeof(*s));
	if (in->trace_id.len == 16) {
		s->trace_hi = be64(in->trace_id.data);
		s->trace_lo = be64(in->trace_id.data + 8);
	} else if (in->trace_id.len == 8) {
		s->trace_lo = be64(in->trace_id.data);
	} else {
		return bad(p, "traceId", "must be 8 or 16 bytes");
	}
	if (!s->trace_hi && !s->trace_lo)
		return bad(p, "traceId", "must not be all zeros");
	if ((ret = get_id(p, in->id, "id", &s->id)))
		return ret;
	if (in->parent_id.len && (ret = get_id(p, in->parent_id, "parentId", &s->parent_id)))
		return ret;
	if ((int)in->kind > 0 && (int)in->kind < (int)SPAN_KIND_MAX)
		s->kind = (uint8_t)in->kind; /* same numbers; another is ignored */
	if (get_str(p, in->name, &s->name, 1))
		return -ENOMEM;
	s->timestamp_us = in->timestamp;
	s->duration_us = in->duration;
	if ((ret = get_endpoint(p, in->local_endpoint, "localEndpoint", &s->local)) ||
	    (ret = get_endpoint(p, in->remote_endpoint, "remoteEndpoint", &s->remote)))
		return ret;
	s->annotations = zarena_alloc(p->a, sizeof(*s->annotations) * (in->n_annotations + 1));
	s->tags = zarena_alloc(p->a, sizeof(*s->tags) * (in->n_tags + 1));
	if (!s->annotations || !s->tags)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_annotations; i++) {
		struct zs_annotation *an = &s->annotations[s->nannotations++];

		an->ts_us = in->annotations[i]->timestamp;
		if (get_str(p, in->annotations[i]->value, &an->value, 0))
			return -ENOMEM;
	}
	for (size_t i = 0; i < in->n_tags; i++) {
		struct zs_tag *t = &s->tags[s->ntags++];

		if (get_str(p, in->tags[i]->key, &t->key, 0) ||
		    get_str(p, in->tags[i]->value, &t->value, 0))
			return -ENOMEM;
	}
	s->debug = in->debug;
	s->shared = in->shared;
	zspan_normalize(s);
	return 0;
}

int zproto_parse_spans(const void *body, size_t len, struct zarena *a,
		       struct zspan **out, size_t *n, char *err, size_t errlen)
{
	struct pctx p = { .a = a, .err = err, .errlen = errlen };
	Zipkin__Proto3__ListOfSpans *l;
	int ret = 0;

	*out = NULL;
	*n = 0;
	l = zipkin__proto3__list_of_spans__unpack(NULL, len, body);
	if (!l) {
		snprintf(err, errlen, "body: not a Zipkin protobuf ListOfSpans (zipkin.proto)");
		return -EINVAL;
	}
	*out = zarena_alloc(a, sizeof(**out) * (l->n_spans + 1));
	if (!*out) {
		ret = -ENOMEM;
	} else {
		for (p.idx = 0; p.idx < l->n_spans && !ret; p.idx++)
			ret = span(&p, l->spans[p.idx], &(*out)[p.idx]);
		*n = ret ? p.idx : l->n_spans;
	}
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	zipkin__proto3__list_of_spans__free_unpacked(l, NULL);
	return ret;
}
