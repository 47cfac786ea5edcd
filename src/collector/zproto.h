/* SPDX-License-Identifier: MIT */
/*
 * Zipkin v2 protobuf (zipkin.proto's ListOfSpans, the body of POST
 * /api/v2/spans with Content-Type application/x-protobuf) -> struct zspan.
 * No protobuf-c type here: zproto.c is the one file that includes it.
 */
#ifndef FAY_COLLECTOR_ZPROTO_H
#define FAY_COLLECTOR_ZPROTO_H

#include <stddef.h>

#include "store/span.h"

/*
 * Decode a ListOfSpans into *out (*n spans, arena-allocated, normalized),
 * with the rules of zipkin2's proto3 reader: ids of 8 (trace: or 16)
 * bytes, an unknown kind ignored, an address of 4 or 16 bytes (another
 * length dropped), a port over 65535 refused.  Returns 0, or -EINVAL with
 * the first problem in err ("span 2: id: ..."; "body: ..." when the bytes
 * are not a ListOfSpans) or -ENOMEM.  *n is then the number of spans
 * decoded so far (for the drop counter).
 */
int zproto_parse_spans(const void *body, size_t len, struct zarena *a,
		       struct zspan **out, size_t *n, char *err, size_t errlen);

#endif
