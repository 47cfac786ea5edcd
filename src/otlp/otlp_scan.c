// SPDX-License-Identifier: MIT
/*
 * A walk over an OTLP protobuf ExportTraceServiceRequest's structure: it
 * follows the schema's nested messages, refuses AnyValues nested deeper
 * than OTLP_MAX_DEPTH, and names the first truncated field or unknown
 * wire type with its byte offset.  otlp_pb_decode() (otlp_pb_dec.c) checks
 * all this as it reads and calls this walk only for a refusal's text,
 * which stays the one protobuf-c's front end gave before it (the walk ran
 * first there: protobuf-c recursed without a limit).  No protobuf-c here.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "otlp/otlp.h"

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

int otlp_pb_scan(const void *body, size_t len, char *err, size_t errlen)
{
	const uint8_t *p = body;

	return scan(p, p + len, M_REQ, 0, p, err, errlen);
}
