// SPDX-License-Identifier: MIT
/* src/common/json_str.c, the one JSON string writer: valid UTF-8 passes
 * through (café-✓, 4-byte forms), quotes, backslashes and control bytes
 * are escaped, every byte outside a valid UTF-8 sequence becomes \u00XX
 * (stray continuation, overlong, surrogate, over U+10FFFF, cut short), and
 * the output always parses as JSON (jansson, which refuses invalid UTF-8)
 * to the same text for valid input; a random fuzz of 20000 byte strings. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_str.h"
#include "test.h"

static char out[4096];

static const char *lit(const char *s, size_t len)
{
	FILE *f = fmemopen(out, sizeof(out), "w");

	json_str(f, s, len);
	fclose(f);
	return out;
}

#define LIT(s) lit(s, sizeof(s) - 1)

/* lit parses back to exactly s (valid input). */
static int round_trips(const char *s, size_t len)
{
	json_t *v = json_loads(lit(s, len), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	int same = v && json_is_string(v) && json_string_length(v) == len &&
		   !memcmp(json_string_value(v), s, len);

	json_decref(v);
	return same;
}

int main(void)
{
	is_str(LIT("caf\xc3\xa9-\xe2\x9c\x93"), "\"caf\xc3\xa9-\xe2\x9c\x93\"", "café-✓ passes through");
	is_str(LIT("\xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"), "\"\xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"",
	       "4-byte forms up to U+10FFFF pass through");
	is_str(LIT("a\"b\\c"), "\"a\\\"b\\\\c\"", "quote and backslash escaped");
	is_str(LIT("\n\t\x01\x1f\x7f"), "\"\\u000a\\u0009\\u0001\\u001f\x7f\"",
	       "control bytes as \\u00XX (DEL is not one)");
	is_str(LIT("x\x80y"), "\"x\\u0080y\"", "a stray continuation byte escaped");
	is_str(LIT("\xc3"), "\"\\u00c3\"", "a sequence cut short escaped");
	is_str(LIT("\xc0\xaf"), "\"\\u00c0\\u00af\"", "an overlong form escaped, byte by byte");
	is_str(LIT("\xed\xa0\x80"), "\"\\u00ed\\u00a0\\u0080\"", "a surrogate escaped");
	is_str(LIT("\xf4\x90\x80\x80"), "\"\\u00f4\\u0090\\u0080\\u0080\"", "over U+10FFFF escaped");
	is_str(LIT("\xe2\x9c"), "\"\\u00e2\\u009c\"", "a 3-byte form cut short escaped");
	is_str(LIT("\xc3\xa9\xff\xc3\xa9"), "\"\xc3\xa9\\u00ff\xc3\xa9\"",
	       "an invalid byte between valid ones: only it escaped");
	is_str(lit("a\0b", 3), "\"a\\u0000b\"", "NUL escaped");
	is_str(LIT(""), "\"\"", "empty");
	ok(round_trips("caf\xc3\xa9-\xe2\x9c\x93 \"q\" \\ \n", 16), "valid input parses back to itself");

	/* random bytes: always valid JSON, always valid UTF-8 (jansson checks both) */
	int bad = 0;
	for (int i = 0; i < 20000; i++) {
		char s[24];
		size_t n = test_xorshift() % sizeof(s);
		json_t *v;

		for (size_t k = 0; k < n; k++) {
			uint64_t r = test_xorshift();
			/* bias towards the interesting bytes */
			s[k] = (char)(r % 3 ? 0x80 + (r >> 8) % 0x80 : (r >> 8) & 0xff);
		}
		v = json_loads(lit(s, n), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		bad += !v || !json_is_string(v);
		json_decref(v);
	}
	is_int(bad, 0, "20000 random byte strings: every output parses as a JSON string");
	return test_done();
}
