// SPDX-License-Identifier: MIT
/*
 * The streaming OTLP/JSON front end (src/otlp/otlp_json_dec.c) against
 * the tree decoder it replaced (otlp_json_tree.c, jansson): the whole
 * input is the body.  Properties: both accept or both refuse it; when
 * both accept, the mapped requests are the same (the same spans as
 * Zipkin JSON, the same rejected count and first reason); when the tree
 * refuses the content (not the syntax), the reason is the same text; a
 * refusal always has a reason.  Inputs where jansson and json_tok are known
 * to read JSON itself differently are not compared: a lone UTF-16
 * surrogate escape (json_tok: "?"), a NUL byte (jansson lets one through
 * right after a number; it is not JSON, and refused now).
 */
#include <jansson.h>
#include <string.h>
#include <strings.h>

#include "collector/zjson.h"
#include "otlp/otlp.h"
#include "fuzz.h"
#include "otlp_mapped.h"
#include "otlp_json_tree.c"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

/* Whether s holds a \uD800-\uDFFF escape (any case). */
static int has_surrogate(const char *s, size_t n)
{
	for (size_t i = 0; i + 3 < n; i++)
		if (s[i] == '\\' && (s[i + 1] == 'u' || s[i + 1] == 'U') &&
		    (s[i + 2] == 'd' || s[i + 2] == 'D') && strchr("89abcdefABCDEF", s[i + 3]) &&
		    s[i + 3])
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zarena a = { 0 }, b = { 0 };
	struct otlp_req r1, r2;
	char e1[512] = "", e2[512] = "";
	const char *body = (const char *)data;
	int ret1, ret2;

	if (size > 65536)
		return 0;
	ret1 = otlp_json_decode(body, size, &a, &r1, e1, sizeof(e1));
	FUZZ_CHECK(ret1 != -EINVAL || e1[0], "a refusal without a reason");
	if (has_surrogate(body, size) || memchr(body, '\0', size))
		goto out;
	ret2 = otlp_json_tree_decode(body, size, &b, &r2, e2, sizeof(e2));
	if (ret1 == -ENOMEM || ret2 == -ENOMEM)
		goto out;
	FUZZ_CHECK(!ret1 == !ret2, "streaming %d (%s), tree %d (%s)", ret1, e1, ret2, e2);
	if (ret1) {
		if (strncmp(e2, "body:", 5))
			FUZZ_CHECK(!strcmp(e1, e2), "streaming \"%s\", tree \"%s\"", e1, e2);
	} else {
		char *m1 = mapped(&r1, &a), *m2 = mapped(&r2, &b);

		FUZZ_CHECK(m1 && m2 && !strcmp(m1, m2), "streaming:\n%s\ntree:\n%s",
			   m1 ? m1 : "(null)", m2 ? m2 : "(null)");
		free(m1);
		free(m2);
	}
out:
	zarena_reset(&a);
	zarena_reset(&b);
	return 0;
}
