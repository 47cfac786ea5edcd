// SPDX-License-Identifier: MIT
/*
 * OTLP/HTTP request bodies as POST /v1/traces decodes them: the first
 * byte picks the encoding (even: JSON, odd: protobuf), the rest is the
 * body.  Decoded requests are mapped to Zipkin spans (OpenTelemetry's
 * Zipkin transformation).  Properties: every span of the request is
 * either kept or counted rejected (kept + rejected == spans, the
 * partial_success arithmetic); every kept span encodes as Zipkin JSON
 * that the Zipkin route accepts again (what fay stores from OTLP can be
 * served and re-ingested).
 */
#include <jansson.h>
#include <string.h>

#include "collector/zjson.h"
#include "otlp/otlp.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zarena a = { 0 }, b = { 0 };
	struct otlp_req r = { 0 };
	struct otlp_result res = { 0 };
	char err[512];
	int ret;

	if (size < 1 || size > 65536)
		return 0;
	ret = data[0] & 1 ? otlp_pb_decode(data + 1, size - 1, &a, &r, err, sizeof(err))
			  : otlp_json_decode((const char *)data + 1, size - 1, &a, &r, err, sizeof(err));
	if (ret) {
		FUZZ_CHECK(ret != -EINVAL || err[0], "a refusal without a reason");
		goto out;
	}
	if (otlp_map(&r, &a, &res))
		goto out;
	FUZZ_CHECK(res.nspans + res.rejected == otlp_req_nspans(&r),
		   "kept %zu + rejected %zu != %zu spans", res.nspans, res.rejected,
		   otlp_req_nspans(&r));
	if (res.nspans) {
		json_t *j = zjson_spans(res.spans, res.nspans);
		char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
		struct zspan *s;
		size_t n;

		FUZZ_CHECK(t, "encoding %zu spans", res.nspans);
		FUZZ_CHECK(!zjson_parse_spans(t, strlen(t), &b, &s, &n, err, sizeof(err)) &&
			   n == res.nspans, "a span kept from OTLP is refused by the Zipkin route: %s\n%s",
			   err, t);
		free(t);
		json_decref(j);
	}
out:
	zarena_reset(&a);
	zarena_reset(&b);
	return 0;
}
