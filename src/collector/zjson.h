/* SPDX-License-Identifier: MIT */
/*
 * Zipkin v2 JSON (the model of zipkin2.Span, as zipkin2's V2SpanReader and
 * V2SpanWriter read and write it) <-> struct zspan.
 */
#ifndef FAY_COLLECTOR_ZJSON_H
#define FAY_COLLECTOR_ZJSON_H

#include <jansson.h>
#include <stddef.h>

#include "store/span.h"

/* The names of the span kinds (CLIENT ...), indexed by SPAN_KIND_*. */
extern const char *const zjson_kinds[SPAN_KIND_MAX];

/*
 * Parse a POST /api/v2/spans body (a JSON array of spans) into *out (*n
 * spans, arena-allocated, normalized).  Returns 0, or -EINVAL with the
 * first problem in err, naming the span (0-based) and the field: "span 3:
 * traceId: must be 16 or 32 lowercase hex characters".  *n is then the
 * number of array elements (for the drop counter), 0 if no array.
 * Streamed, with no tree of values (zjson_dec.c).
 */
int zjson_parse_spans(const char *body, size_t len, struct zarena *a,
		      struct zspan **out, size_t *n, char *err, size_t errlen);

/* The JSON object of one span, absent fields omitted.  New reference,
 * NULL on ENOMEM. */
json_t *zjson_span(const struct zspan *s);
/* A JSON array of the spans.  New reference, NULL on ENOMEM. */
json_t *zjson_spans(const struct zspan *s, size_t n);

/*
 * Normalize a trace id as Zipkin's API does (Span.normalizeTraceId):
 * 1..32 lowercase hex digits, left-padded to 16 or 32, a 32-digit id with
 * 16 leading zeros taken as 64-bit.  0 or -EINVAL with a reason.
 */
int zjson_trace_id(const char *s, size_t len, uint64_t *hi, uint64_t *lo,
		   char *err, size_t errlen);

#endif
