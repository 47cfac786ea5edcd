// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 JSON as POST /api/v2/spans takes it (zjson_parse_spans), and
 * what the collector answers with (zjson_spans).  Property: what was
 * accepted is served as JSON that is accepted again and served
 * identically (encode(decode(encode(decode(x)))) == encode(decode(x))),
 * so a stored span always reads back and re-ingests the same.
 */
#include <jansson.h>
#include <string.h>

#include "collector/zjson.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

/* Decode body and encode what was accepted; NULL when refused. */
static char *cycle(const char *body, size_t len, size_t *nspans)
{
	struct zarena a = { 0 };
	struct zspan *s = NULL;
	char err[512], *text = NULL;
	json_t *j;

	*nspans = 0;
	if (!zjson_parse_spans(body, len, &a, &s, nspans, err, sizeof(err))) {
		j = zjson_spans(s, *nspans);
		FUZZ_CHECK(j, "encoding %zu accepted spans", *nspans);
		text = json_dumps(j, JSON_COMPACT);
		json_decref(j);
	} else {
		FUZZ_CHECK(err[0], "a refusal without a reason");
	}
	zarena_reset(&a);
	return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n1, n2;
	char *t1, *t2;

	if (size > 65536)
		return 0;
	t1 = cycle((const char *)data, size, &n1);
	if (!t1)
		return 0;
	t2 = cycle(t1, strlen(t1), &n2);
	FUZZ_CHECK(t2, "what the collector serves is refused when posted again: %s", t1);
	FUZZ_CHECK(n1 == n2 && !strcmp(t1, t2), "served differently the second time:\n%s\n%s", t1, t2);
	free(t1);
	free(t2);
	return 0;
}
