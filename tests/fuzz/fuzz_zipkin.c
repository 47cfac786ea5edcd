// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 JSON as POST /api/v2/spans takes it (zjson_parse_spans, the
 * streaming reader of src/collector/zjson_dec.c), and what the collector
 * answers with (zjson_spans).  The whole input is the body.  Properties:
 *
 *   - against the tree reader it replaced (zjson_tree.c, jansson): both
 *     accept or both refuse it, with the same count of array elements;
 *     when both accept, the spans are the same (written as the collector
 *     serves them); when the tree refuses the content (not the syntax),
 *     the reason is the same text.  Inputs where jansson and json_tok are
 *     known to read JSON itself differently are not compared
 *     (common/json_tok.h): a lone UTF-16 surrogate escape, a NUL byte;
 *   - a refusal always has a reason;
 *   - what was accepted is served as JSON that is accepted again and
 *     served identically (encode(decode(encode(decode(x)))) ==
 *     encode(decode(x))), so a stored span always reads back and
 *     re-ingests the same.
 */
#include <jansson.h>
#include <string.h>

#include "collector/zjson.h"
#include "fuzz.h"
#include "zjson_tree.c"

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
		    (s[i + 2] == 'd' || s[i + 2] == 'D') && s[i + 3] &&
		    strchr("89abcdefABCDEF", s[i + 3]))
			return 1;
	return 0;
}

/* The spans as the collector serves them; malloc'ed. */
static char *served(const struct zspan *s, size_t n)
{
	json_t *j = zjson_spans(s, n);
	char *text;

	FUZZ_CHECK(j, "encoding %zu accepted spans", n);
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return text;
}

/* What the collector served (n spans) is accepted again and served the
 * same. */
static void again(const char *text, size_t n)
{
	struct zarena a = { 0 };
	struct zspan *s;
	size_t n2;
	char err[512], *t2;

	FUZZ_CHECK(!zjson_parse_spans(text, strlen(text), &a, &s, &n2, err, sizeof(err)),
		   "what the collector serves is refused when posted again: %s: %s", err, text);
	t2 = served(s, n2);
	FUZZ_CHECK(n == n2 && !strcmp(text, t2), "served differently the second time:\n%s\n%s",
		   text, t2);
	free(t2);
	zarena_reset(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zarena a = { 0 }, b = { 0 };
	struct zspan *s1, *s2;
	size_t n1, n2;
	char e1[512] = "", e2[512] = "", *m1 = NULL;
	const char *body = (const char *)data;
	int ret1, ret2;

	if (size > 65536)
		return 0;
	ret1 = zjson_parse_spans(body, size, &a, &s1, &n1, e1, sizeof(e1));
	FUZZ_CHECK(!ret1 || e1[0], "a refusal without a reason");
	if (!ret1) {
		m1 = served(s1, n1);
		again(m1, n1);
	}
	if (has_surrogate(body, size) || memchr(body, '\0', size))
		goto out;
	ret2 = zjson_tree_parse_spans(body, size, &b, &s2, &n2, e2, sizeof(e2));
	if (ret1 == -ENOMEM || ret2 == -ENOMEM)
		goto out;
	FUZZ_CHECK(!ret1 == !ret2, "streaming %d (%s), tree %d (%s)", ret1, e1, ret2, e2);
	FUZZ_CHECK(n1 == n2, "streaming counted %zu elements, tree %zu (%s)", n1, n2, e2);
	if (ret1) {
		if (strncmp(e2, "body: invalid JSON", 18))
			FUZZ_CHECK(!strcmp(e1, e2), "streaming \"%s\", tree \"%s\"", e1, e2);
	} else {
		char *m2 = served(s2, n2);

		FUZZ_CHECK(m2 && !strcmp(m1, m2), "streaming:\n%s\ntree:\n%s", m1,
			   m2 ? m2 : "(null)");
		free(m2);
	}
out:
	free(m1);
	zarena_reset(&a);
	zarena_reset(&b);
	return 0;
}
