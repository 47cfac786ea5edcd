// SPDX-License-Identifier: MIT
/*
 * libfay: ceph/blkin's C API (include/fay/blkin.h), written afresh.
 *
 * blkin_record() writes one record per annotation at once: a span record
 * flagged SPAN_F_PARTIAL | SPAN_F_SAMPLED with the blkin trace's ids (a
 * 64-bit trace id: trace_hi 0), start = now, duration 0, and the items
 * NAME (the trace's name), LOCAL_EP (the annotation's endpoint) and one of
 * EVENT (a timestamp annotation, at now), TAG or TAG_INT.  The collector
 * merges the partial records of one span id.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fay/blkin.h>

#include "common/clock.h"
#include "common/rand.h"
#include "lib/libfay.h"

#define BLKIN_REC_MAX 1024u      /* items of one record, on the stack */

const char *const CLIENT_SEND = "cs";
const char *const CLIENT_RECV = "cr";
const char *const SERVER_SEND = "ss";
const char *const SERVER_RECV = "sr";
const char *const WIRE_SEND = "ws";
const char *const WIRE_RECV = "wr";
const char *const CLIENT_SEND_FRAGMENT = "csf";
const char *const CLIENT_RECV_FRAGMENT = "crf";
const char *const SERVER_SEND_FRAGMENT = "ssf";
const char *const SERVER_RECV_FRAGMENT = "srf";

int blkin_init(void)
{
	char name[64];
	const char *e;

	if (READ_ONCE(lib.inited))
		return 0;
	e = getenv("FAY_SERVICE");
	if (!e || !*e)
		e = program_invocation_short_name;
	if (!e || !*e)
		e = "blkin";
	/* cut a long program name to what the header holds */
	snprintf(name, sizeof(name), "%s", e);
	return fay_init(name, NULL, 0);
}

/* A positive 63-bit id (BlkKin's ids are non-negative int64). */
static int64_t new_id(void)
{
	int64_t id = (int64_t)(rand_u64() >> 1);

	return id ? id : 1;
}

void blkin_init_trace_info(struct blkin_trace_info *trace_info)
{
	int64_t id = new_id();

	if (!trace_info)
		return;
	if (!lib_root_sampled(&lib_t)) {
		id = (int64_t)((uint64_t)id | (UINT64_C(1) << 63));
	}
	trace_info->trace_id = id;
	trace_info->span_id = id;
	trace_info->parent_span_id = 0;
}

int blkin_init_new_trace(struct blkin_trace *new_trace, const char *name,
			 const struct blkin_endpoint *endpoint)
{
	if (!new_trace)
		return -EINVAL;
	new_trace->name = name;
	blkin_init_trace_info(&new_trace->info);
	new_trace->endpoint = endpoint;
	return 0;
}

int blkin_init_child_info(struct blkin_trace *child,
			  const struct blkin_trace_info *info,
			  const struct blkin_endpoint *endpoint,
			  const char *child_name)
{
	if (!child || !info || !endpoint)
		return -EINVAL;
	child->info.trace_id = info->trace_id;
	child->info.span_id = new_id();
	child->info.parent_span_id = info->span_id;
	child->name = child_name;
	child->endpoint = endpoint;
	return 0;
}

int blkin_init_child(struct blkin_trace *child, const struct blkin_trace *parent,
		     const struct blkin_endpoint *endpoint, const char *child_name)
{
	if (!parent)
		return -EINVAL;
	return blkin_init_child_info(child, &parent->info,
				     endpoint ? endpoint : parent->endpoint,
				     child_name);
}

int blkin_init_endpoint(struct blkin_endpoint *endpoint, const char *ip,
			int16_t port, const char *name)
{
	if (!endpoint)
		return -EINVAL;
	endpoint->ip = ip ? ip : "NaN";
	endpoint->port = port;
	endpoint->name = name;
	return 0;
}

/* The fields every kind of annotation sets. */
static int annot_init(struct blkin_annotation *a, blkin_annotation_type type,
		      const char *key, const struct blkin_endpoint *endpoint)
{
	a->type = type;
	a->key = key;
	a->endpoint = endpoint;
	return 0;
}

int blkin_init_string_annotation(struct blkin_annotation *annotation,
				 const char *key, const char *val,
				 const struct blkin_endpoint *endpoint)
{
	if (!annotation || !key || !val)
		return -EINVAL;
	annotation->val_str = val;
	return annot_init(annotation, ANNOT_STRING, key, endpoint);
}

int blkin_init_integer_annotation(struct blkin_annotation *annotation,
				  const char *key, int64_t val,
				  const struct blkin_endpoint *endpoint)
{
	if (!annotation || !key)
		return -EINVAL;
	annotation->val_int = val;
	return annot_init(annotation, ANNOT_INTEGER, key, endpoint);
}

int blkin_init_timestamp_annotation(struct blkin_annotation *annot,
				    const char *event,
				    const struct blkin_endpoint *endpoint)
{
	if (!annot || !event)
		return -EINVAL;
	annot->val_str = event;
	return annot_init(annot, ANNOT_TIMESTAMP, NULL, endpoint);
}

/* Is the annotation complete for its type? */
static int annot_ok(const struct blkin_annotation *a)
{
	switch (a->type) {
	case ANNOT_STRING:
		return a->key && a->val_str;
	case ANNOT_INTEGER:
		return a->key != NULL;
	case ANNOT_TIMESTAMP:
		return a->val_str != NULL;
	}
	return 0;
}

int blkin_record(const struct blkin_trace *trace,
		 const struct blkin_annotation *annotation)
{
	const struct blkin_endpoint *ep;
	struct {
		struct spanrec_fixed f;         /* items follow: one piece */
		uint8_t buf[BLKIN_REC_MAX];
	} rec;
	struct spanrec_fixed *f = &rec.f;
	uint8_t *buf = rec.buf;
	uint32_t used = 0;
	size_t nlen;
	int err;

	if (!annotation || !trace || !trace->name)
		return -EINVAL;
	ep = annotation->endpoint ? annotation->endpoint : trace->endpoint;
	if (!ep || !ep->ip || !ep->name || !annot_ok(annotation))
		return -EINVAL;
	if (trace->info.trace_id < 0)
		return 0;                       /* not sampled */
	if (!trace->info.trace_id || !trace->info.span_id)
		return -EINVAL;
	if (unlikely(!READ_ONCE(lib.inited)))
		blkin_init();
	if (!READ_ONCE(lib.recording))
		return 0;
	if (lib_enter())
		return -EBUSY;

	memset(f, 0, sizeof(*f));
	f->trace_lo = (uint64_t)trace->info.trace_id;
	f->span_id = (uint64_t)trace->info.span_id;
	f->parent_id = (uint64_t)trace->info.parent_span_id;
	f->flags = SPAN_F_PARTIAL | SPAN_F_SAMPLED | lib_ticks_flag(lib_tls());
	f->start_ns = lib_stamp(lib_tls(), f->flags & SPAN_F_TICKS);
	nlen = strnlen(trace->name, LIB_NAME_MAX);
	lib_put(f, buf, BLKIN_REC_MAX, &used, SPAN_ITEM_NAME, 0, trace->name, nlen,
		NULL, 0);
	lib_put(f, buf, BLKIN_REC_MAX, &used, SPAN_ITEM_LOCAL_EP, (uint16_t)ep->port,
		ep->name, strnlen(ep->name, LIB_NAME_MAX),
		ep->ip, strnlen(ep->ip, LIB_NAME_MAX));
	switch (annotation->type) {
	case ANNOT_STRING:
		lib_put(f, buf, BLKIN_REC_MAX, &used, SPAN_ITEM_TAG, 0,
			annotation->key, strlen(annotation->key),
			annotation->val_str, strlen(annotation->val_str));
		break;
	case ANNOT_INTEGER:
		lib_put(f, buf, BLKIN_REC_MAX, &used, SPAN_ITEM_TAG_INT,
			(uint64_t)annotation->val_int,
			annotation->key, strlen(annotation->key), NULL, 0);
		break;
	case ANNOT_TIMESTAMP:
		lib_put(f, buf, BLKIN_REC_MAX, &used, SPAN_ITEM_EVENT, f->start_ns,
			annotation->val_str, strlen(annotation->val_str), NULL, 0);
		break;
	}
	err = lib_write_record(f, buf, used);
	lib_leave();
	return err == -ENODEV ? 0 : err;
}

int blkin_get_trace_info(const struct blkin_trace *trace,
			 struct blkin_trace_info *info)
{
	if (!trace || !info)
		return -EINVAL;
	*info = trace->info;
	return 0;
}

int blkin_set_trace_info(struct blkin_trace *trace,
			 const struct blkin_trace_info *info)
{
	if (!trace || !info)
		return -EINVAL;
	trace->info = *info;
	return 0;
}

int blkin_set_trace_properties(struct blkin_trace *trace,
			       const struct blkin_trace_info *info,
			       const char *name,
			       const struct blkin_endpoint *endpoint)
{
	if (!trace || !info || !name || !endpoint)
		return -EINVAL;
	trace->info = *info;
	trace->name = name;
	trace->endpoint = endpoint;
	return 0;
}

int blkin_pack_trace_info(const struct blkin_trace_info *info,
			  struct blkin_trace_info_packed *pinfo)
{
	if (!info || !pinfo)
		return -EINVAL;
	pinfo->trace_id = __cpu_to_be64((uint64_t)info->trace_id);
	pinfo->span_id = __cpu_to_be64((uint64_t)info->span_id);
	pinfo->parent_span_id = __cpu_to_be64((uint64_t)info->parent_span_id);
	return 0;
}

int blkin_unpack_trace_info(const struct blkin_trace_info_packed *pinfo,
			    struct blkin_trace_info *info)
{
	if (!info || !pinfo)
		return -EINVAL;
	info->trace_id = (int64_t)__be64_to_cpu(pinfo->trace_id);
	info->span_id = (int64_t)__be64_to_cpu(pinfo->span_id);
	info->parent_span_id = (int64_t)__be64_to_cpu(pinfo->parent_span_id);
	return 0;
}
