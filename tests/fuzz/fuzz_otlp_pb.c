// SPDX-License-Identifier: MIT
/*
 * The OTLP protobuf front end (src/otlp/otlp_pb_dec.c, a wire reader of
 * its own) against the protobuf-c one it replaced (otlp_pb_ref.c): the
 * whole input is the body.  Properties: both accept or both refuse it; a
 * refusal always has a reason, and the same text when the old one named
 * the problem (the structural walk's "body: field 2 at byte 17 ...", the
 * resource's UTF-8) rather than protobuf-c's "not a protobuf
 * ExportTraceServiceRequest"; when both accept, the requests are the
 * same: the same spans as Zipkin JSON, the same rejected count and first
 * reason, the same protobuf when encoded again (every field the request
 * holds, the ones the mapping drops included) and the same link counts.
 */
#include <string.h>

#include "otlp/otlp.h"
#include "fuzz.h"
#include "otlp_mapped.h"
#include "otlp_pb_ref.c"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

/* The links of each span, in order, as text (malloc'ed). */
static char *links(const struct otlp_req *r)
{
	size_t cap = 16, len = 0;
	char *out = malloc(cap);

	for (size_t i = 0; out && i < r->nrs; i++)
		for (size_t j = 0; out && j < r->rs[i].nss; j++)
			for (size_t k = 0; out && k < r->rs[i].ss[j].nspans; k++) {
				if (len + 24 > cap)
					out = realloc(out, cap *= 2);
				if (out)
					len += (size_t)sprintf(out + len, "%zu,",
							       r->rs[i].ss[j].spans[k].nlinks);
			}
	if (out)
		out[len] = '\0';
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zarena a = { 0 }, b = { 0 };
	struct otlp_req r1, r2;
	char e1[512] = "", e2[512] = "";
	int ret1, ret2;

	if (size > 65536)
		return 0;
	ret1 = otlp_pb_decode(data, size, &a, &r1, e1, sizeof(e1));
	FUZZ_CHECK(ret1 != -EINVAL || e1[0], "a refusal without a reason");
	ret2 = otlp_pb_ref_decode(data, size, &b, &r2, e2, sizeof(e2));
	if (ret1 == -ENOMEM || ret2 == -ENOMEM)
		goto out;
	FUZZ_CHECK(!ret1 == !ret2, "direct %d (%s), protobuf-c %d (%s)", ret1, e1, ret2, e2);
	if (ret1) {
		if (strncmp(e2, "body: not a protobuf", 20))
			FUZZ_CHECK(!strcmp(e1, e2), "direct \"%s\", protobuf-c \"%s\"", e1, e2);
		else
			FUZZ_CHECK(!strncmp(e1, "body: not a protobuf", 20),
				   "direct \"%s\", protobuf-c \"%s\"", e1, e2);
	} else {
		char *m1 = mapped(&r1, &a), *m2 = mapped(&r2, &b);
		char *l1 = links(&r1), *l2 = links(&r2);
		void *p1 = NULL, *p2 = NULL;
		size_t n1 = 0, n2 = 0;

		FUZZ_CHECK(m1 && m2 && !strcmp(m1, m2), "direct:\n%s\nprotobuf-c:\n%s",
			   m1 ? m1 : "(null)", m2 ? m2 : "(null)");
		FUZZ_CHECK(l1 && l2 && !strcmp(l1, l2), "links: direct %s, protobuf-c %s",
			   l1 ? l1 : "(null)", l2 ? l2 : "(null)");
		if (!otlp_pb_encode(&r1, &p1, &n1) && !otlp_pb_encode(&r2, &p2, &n2))
			FUZZ_CHECK(n1 == n2 && !memcmp(p1, p2, n1),
				   "encoded again: direct %zu bytes, protobuf-c %zu", n1, n2);
		free(p1);
		free(p2);
		free(l1);
		free(l2);
		free(m1);
		free(m2);
	}
out:
	zarena_reset(&a);
	zarena_reset(&b);
	return 0;
}
