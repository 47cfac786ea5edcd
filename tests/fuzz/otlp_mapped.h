/* SPDX-License-Identifier: MIT */
/*
 * For the differential OTLP targets (fuzz_otlp_json.c, fuzz_otlp_pb.c):
 * a decoded request as the text that must be the same whichever front
 * end decoded it.
 */
#ifndef FAY_TESTS_FUZZ_OTLP_MAPPED_H
#define FAY_TESTS_FUZZ_OTLP_MAPPED_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/zjson.h"
#include "otlp/otlp.h"

/* The mapped request as text: Zipkin JSON of the kept spans, then the
 * rejected count and first reason (malloc'ed; NULL: out of memory). */
static inline char *mapped(const struct otlp_req *r, struct zarena *a)
{
	struct otlp_result res;
	json_t *j;
	char *t, *out = NULL;

	if (otlp_map(r, a, &res))
		return strdup("ENOMEM");
	j = zjson_spans(res.spans, res.nspans);
	t = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (t && asprintf(&out, "%s\n%zu %s", t, res.rejected, res.first_error) < 0)
		out = NULL;
	free(t);
	return out;
}

#endif
