// SPDX-License-Identifier: MIT
/* src/common/json_tok.c, the streaming JSON reader: every token type and
 * its depth, escapes (\uXXXX pairs, lone surrogates read as "?"), strings
 * handed over in place when they have no escape, every error with the
 * byte it names, the nesting limit, UTF-8 (overlong, truncated,
 * surrogates, at each position around the sixteen-byte blocks), numbers
 * at the int64 and double limits and reals against strtod, a callback
 * that stops the reading, and random bytes and mutated documents (no
 * crash; run under ASan/UBSan by make SAN=1). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_tok.h"
#include "test.h"

static char out[1 << 16];
static size_t outn;
static const char *cur_body;
static size_t cur_len;
static int in_place, stop_at, ntok;

static int rec(void *ctx, const struct json_tok *t)
{
	char b[64];
	int n;

	(void)ctx;
	if (stop_at && ++ntok == stop_at)
		return -ENOMEM;
	switch (t->t) {
	case JT_NULL: n = snprintf(b, sizeof(b), "N%d ", t->depth); break;
	case JT_BOOL: n = snprintf(b, sizeof(b), "B%d:%d ", t->depth, t->b); break;
	case JT_INT: n = snprintf(b, sizeof(b), "I%d:%lld ", t->depth, t->i); break;
	case JT_REAL: n = snprintf(b, sizeof(b), "R%d:%.17g ", t->depth, t->d); break;
	case JT_MAP: n = snprintf(b, sizeof(b), "M%d ", t->depth); break;
	case JT_ARRAY: n = snprintf(b, sizeof(b), "A%d ", t->depth); break;
	case JT_END: n = snprintf(b, sizeof(b), "E%d ", t->depth); break;
	case JT_STR:
	case JT_KEY:
		if ((const char *)t->s >= cur_body && (const char *)t->s + t->len <= cur_body + cur_len)
			in_place++;
		n = snprintf(b, sizeof(b), "%c%d:", t->t == JT_STR ? 'S' : 'K', t->depth);
		if (outn + (size_t)n + t->len + 2 < sizeof(out)) {
			memcpy(out + outn, b, (size_t)n);
			memcpy(out + outn + n, t->s, t->len);
			outn += (size_t)n + t->len;
			out[outn++] = ' ';
			out[outn] = '\0';
		}
		return 0;
	default:
		n = snprintf(b, sizeof(b), "?? ");
	}
	if (outn + (size_t)n + 1 < sizeof(out)) {
		memcpy(out + outn, b, (size_t)n + 1);
		outn += (size_t)n;
	}
	return 0;
}

static struct json_tok_err err;

static int rd_n(const char *s, size_t n)
{
	outn = 0;
	out[0] = '\0';
	in_place = 0;
	ntok = 0;
	cur_body = s;
	cur_len = n;
	memset(&err, 0x55, sizeof(err));
	return json_tok_read(s, n, rec, NULL, &err);
}

#define RD(s) rd_n(s, sizeof(s) - 1)

/* A text read: the tokens it gives (rec()'s form) and how many strings
 * were handed over in place. */
struct tcase {
	const char *what, *body, *tokens;
	int in_place;
};

static const struct tcase tcases[] = {
	{ "every token, in order, with depths",
	  "{\"a\":[null,true,false,1,-2,1.5,\"s\",{},[]],\"b\":{\"c\":0}}",
	  "M0 K1:a A1 N2 B2:1 B2:0 I2:1 I2:-2 R2:1.5 S2:s M2 E2 A2 E2 E1 K1:b M1 K2:c I2:0 E1 E0 ", 4 },
	{ "white space around everything", " \t\r\n[ 1 , \"x\" ] \n", "A0 I1:1 S1:x E0 ", 1 },
	{ "a scalar at the top", "7", "I0:7 ", 0 },
	{ "an empty string", "\"\"", "S0: ", 1 },
	{ "-0: an integer", "-0", "I0:0 ", 0 },
	{ "-0.0: a real", "-0.0", "R0:-0 ", 0 },
	{ "the short escapes, copied", "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]",
	  "A0 S1:\"\\/\b\f\n\r\t E0 ", 0 },
	{ "\\u escapes: UTF-8, a pair is one code point",
	  "\"a\\u00e9b\\u20ACc\\ud83d\\ude00d\\u0041\"",
	  "S0:a\xc3\xa9" "b\xe2\x82\xac" "c\xf0\x9f\x98\x80" "dA ", 0 },
	{ "a pair in upper case: U+1D11E",
	  "\"\\uD834\\uDD1E\"", "S0:\xf0\x9d\x84\x9e ", 0 },
	{ "a lone high surrogate is ?",
	  "\"\\ud800\"", "S0:? ", 0 },
	{ "a lone low surrogate is ?",
	  "\"\\udc00x\"", "S0:?x ", 0 },
	{ "a high surrogate before another escape: ? then it",
	  "\"\\ud800\\u0041\"", "S0:?A ", 0 },
	{ "a high surrogate before a pair: ? then the pair", "\"\\ud800\\ud800\\udc00\"",
	  "S0:?\xf0\x90\x80\x80 ", 0 },
	{ "an escape in a key",
	  "{\"k\\n\":\"v\"}", "M0 K1:k\n S1:v E0 ", 1 },
};

static void tokens(void)
{
	for (size_t i = 0; i < sizeof(tcases) / sizeof(tcases[0]); i++) {
		const struct tcase *c = &tcases[i];

		is_int(rd_n(c->body, strlen(c->body)), 0, "%s: read", c->what);
		is_str(out, c->tokens, "... the tokens");
		is_int(in_place, c->in_place, "... strings in place");
	}
}

static void escapes(void)
{
	/* escapes at every position around a block of sixteen */
	for (int i = 0; i < 40; i++) {
		char b[64], want[64];

		memset(b, 'x', sizeof(b));
		b[0] = '"';
		memcpy(b + 1 + i, "\\n", 2);
		b[45] = '"';
		memset(want, 'x', sizeof(want));
		memcpy(want, "S0:", 3);
		want[3 + i] = '\n';
		memcpy(want + 3 + 43, " ", 2);
		is_int(rd_n(b, 46), 0, "an escape at %d", i);
		is_str(out, want, "... decoded at %d", i);
	}
}

struct ecase {
	const char *body;
	size_t at;
	const char *msg;
};

static void errors(void)
{
	static const struct ecase c[] = {
		{ "", 0, "premature EOF" },
		{ "  ", 2, "premature EOF" },
		{ "[", 1, "premature EOF" },
		{ "{\"a\"", 4, "premature EOF" },
		{ "{\"a\":", 5, "premature EOF" },
		{ "[1,", 3, "premature EOF" },
		{ "\"abc", 4, "premature EOF" },
		{ "\"abc\\", 5, "premature EOF" },
		{ "\"\\u12", 5, "premature EOF" },
		{ "tru", 3, "premature EOF" },
		{ "-", 1, "premature EOF" },
		{ "1.", 2, "premature EOF" },
		{ "1e", 2, "premature EOF" },
		{ "1e+", 3, "premature EOF" },
		{ "[}", 2, "unexpected '}'" },
		{ "{]", 2, "unexpected ']'" },
		{ "{1:2}", 2, "unexpected '1' (an object key" },
		{ "{\"a\" 1}", 6, "unexpected '1' (':')" },
		{ "{\"a\":1 \"b\"}", 8, "unexpected '\"' (',' or '}')" },
		{ "[1 2]", 4, "unexpected '2' (',' or ']')" },
		{ "[1,]", 4, "unexpected ']' (a value)" },
		{ "{\"a\":1,}", 8, "unexpected '}' (an object key" },
		{ "trux", 4, "unexpected 'x' (a literal)" },
		{ "nul", 3, "premature EOF" },
		{ "[01]", 3, "unexpected '1'" },
		{ "-a", 2, "unexpected 'a' (a digit after '-')" },
		{ "1.e5", 3, "unexpected 'e' (a digit after '.')" },
		{ "1e+x", 4, "unexpected 'x' (a digit in an exponent)" },
		{ ".5", 1, "unexpected '.' (a value)" },
		{ "+1", 1, "unexpected '+' (a value)" },
		{ "\"\\x\"", 3, "unexpected 'x' (not an escape)" },
		{ "\"\\u12g4\"", 6, "invalid \\u escape (0x67)" },
		{ "\"a\\u0000b\"", 8, "\\u0000 is not allowed in a string" },
		{ "{\"a\\u0000\":1}", 9, "\\u0000 is not allowed in a key" },
		{ "\"a\tb\"", 2, "invalid character 0x09" },
		{ "\"a\nb\"", 2, "invalid character 0x0a" },
		{ "[1]\v", 3, "invalid character 0x0b" },
		{ "\f[1]", 0, "invalid character 0x0c" },
		{ "[1,\v2]", 3, "invalid character 0x0b" },
		{ "{\"a\":1} x", 8, "trailing garbage after the top-level object" },
		{ "[1]\n[2]", 4, "trailing garbage after the top-level object" },
		{ "1 2", 2, "trailing garbage after the top-level value" },
		{ "01", 1, "trailing garbage after the top-level value" },
		/* yajl let an unfinished token after a top-level scalar pass */
		{ "1\"", 1, "trailing garbage after the top-level value" },
		{ "[]\"unfinished", 2, "trailing garbage after the top-level object" },
		/* UTF-8: overlong, truncated, surrogates, beyond U+10FFFF */
		{ "\"ab\xc0\x80\"", 3, "invalid UTF-8 (0xc0)" },
		{ "\"ab\xc1\x81\"", 3, "invalid UTF-8 (0xc1)" },
		{ "\"ab\xe0\x80\x80\"", 3, "invalid UTF-8 (0xe0)" },
		{ "\"ab\xf0\x80\x80\x80\"", 3, "invalid UTF-8 (0xf0)" },
		{ "\"ab\xe2\x82\"", 3, "invalid UTF-8 (0xe2)" },
		{ "\"ab\xe2\x82", 3, "invalid UTF-8 (0xe2)" },
		{ "\"ab\xed\xa0\x80\"", 3, "invalid UTF-8 (0xed)" },
		{ "\"ab\xed\xbf\xbf\"", 3, "invalid UTF-8 (0xed)" },
		{ "\"ab\xf4\x90\x80\x80\"", 3, "invalid UTF-8 (0xf4)" },
		{ "\"ab\xf5\x80\x80\x80\"", 3, "invalid UTF-8 (0xf5)" },
		{ "\"ab\x80\"", 3, "invalid UTF-8 (0x80)" },
		{ "\"ab\xff\"", 3, "invalid UTF-8 (0xff)" },
		{ "[\xc3\xa9]", 1, "invalid character 0xc3" },
		{ "[\xff]", 1, "invalid UTF-8 (0xff)" },
		/* numbers at the limits */
		{ "9223372036854775808", 19, "integer too big for 64 bits" },
		{ "-9223372036854775809", 20, "integer too big for 64 bits" },
		{ "[100000000000000000000]", 22, "integer too big for 64 bits" },
		{ "1e309", 5, "real number overflow" },
		{ "-1.8e308", 8, "real number overflow" },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		size_t n = strlen(c[i].body);

		if (!strcmp(c[i].body, "\"ab\xe2\x82"))
			n = 5;
		is_int(rd_n(c[i].body, n), -EINVAL, "%s: refused", c[i].body);
		is_int((long long)err.at, (long long)c[i].at, "... at byte %zu", c[i].at);
		ok(!strncmp(err.msg, c[i].msg, strlen(c[i].msg)), "... \"%s\" (%s)", c[i].msg, err.msg);
	}
	/* valid UTF-8 of every length, at every position around a block */
	for (int i = 0; i < 40; i++) {
		static const char *const seq[] = { "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
						   "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf" };
		for (int k = 0; k < 5; k++) {
			char b[64];
			size_t sl = strlen(seq[k]);

			memset(b, 'x', sizeof(b));
			b[0] = '"';
			memcpy(b + 1 + i, seq[k], sl);
			b[50] = '"';
			if (rd_n(b, 51) || !in_place)
				ok(0, "UTF-8 sequence %d at %d: %s", k, i, err.msg);
			/* cut short at the end of the text, and a bad byte in it */
			if (rd_n(b, 1 + (size_t)i + sl - 1) != -EINVAL || err.at != (size_t)i + 1)
				ok(0, "sequence %d cut at %d: %d %zu %s", k, i, -EINVAL, err.at, err.msg);
			b[1 + i + sl - 1] = 'x';
			if (rd_n(b, 51) != -EINVAL || err.at != (size_t)i + 1 ||
			    strncmp(err.msg, "invalid UTF-8", 13))
				ok(0, "sequence %d broken at %d: %zu %s", k, i, err.at, err.msg);
		}
		/* a quote, a control byte at each position */
		{
			char b[64];

			memset(b, 'y', sizeof(b));
			b[0] = '"';
			b[1 + i] = '\x1f';
			b[50] = '"';
			if (rd_n(b, 51) != -EINVAL || err.at != (size_t)i + 1)
				ok(0, "control byte at %d: %zu %s", i, err.at, err.msg);
			b[1 + i] = '"';
			if (rd_n(b, 2 + (size_t)i) || outn != (size_t)i + 4)
				ok(0, "closing quote at %d: %.100s", i, out);
		}
	}
	ok(1, "UTF-8, control bytes and quotes at 0-39 in a string");
}

static void depth(void)
{
	static char b[2 * 2049 + 1];
	int ret;

	memset(b, '[', 2048);
	memset(b + 2048, ']', 2048);
	is_int(rd_n(b, 4096), 0, "2048 arrays deep: read");
	ok(strstr(out, "A2047 E2047 E2046") != NULL, "... the innermost at depth 2047");
	memset(b, '{', 1);
	memset(b, '[', 2049);
	memset(b + 2049, ']', 2049);
	ret = rd_n(b, 2 * 2049);
	is_int(ret, -EINVAL, "2049 deep: refused");
	is_int((long long)err.at, 2049, "... at the 2049th '['");
	is_str(err.msg, "nested deeper than 2048", "... why");
	/* a million deep: no recursion, the limit */
	{
		size_t n = 1000000;
		char *d = malloc(n);

		memset(d, '{', n);
		is_int(rd_n(d, n), -EINVAL, "a million '{': refused");
		free(d);
	}
}

static void numbers(void)
{
	is_int(RD("[9223372036854775807,-9223372036854775808,0,-1,123456789012345678]"), 0,
	       "integers at the int64 limits");
	is_str(out, "A0 I1:9223372036854775807 I1:-9223372036854775808 I1:0 I1:-1 I1:123456789012345678 E0 ",
	       "... exact");
	is_int(RD("[1.7976931348623157e308,-1.7976931348623157e308,4.9e-324,1e-400,2.2250738585072014e-308]"),
	       0, "reals at the double limits");
	is_str(out, "A0 R1:1.7976931348623157e+308 R1:-1.7976931348623157e+308 R1:4.9406564584124654e-324 "
	       "R1:0 R1:2.2250738585072014e-308 E0 ", "... DBL_MAX, the least denormal, underflow to 0");
	is_int(RD("[1E2,1e+2,1e-2,0.1,12345678901234567890.5,1e22,1e23,9007199254740993.0]"), 0,
	       "reals in every form");
	is_str(out, "A0 R1:100 R1:100 R1:0.01 R1:0.10000000000000001 R1:1.2345678901234567e+19 "
	       "R1:1e+22 R1:9.9999999999999992e+22 R1:9007199254740992 E0 ", "... as strtod reads them");
	/* the same double as strtod: printed shortest and longest, random digits */
	{
		int bad = 0;

		for (int i = 0; i < 200000; i++) {
			char s[64];
			struct json_tok_err e;
			double want, d;
			int len;

			if (i % 2) {
				union { uint64_t u; double d; } u = { .u = test_xorshift() };

				if (!isfinite(u.d))
					continue;
				if (i % 4 == 1)
					len = snprintf(s, sizeof(s), "%.17g", u.d);
				else
					len = snprintf(s, sizeof(s), "%.*g",
						       1 + (int)(test_xorshift() % 17), u.d);
				if (!strpbrk(s, ".e"))
					continue;
			} else {
				/* digits.digits e exp: up to 20 digits, exponents -30..30 */
				int nd = 1 + (int)(test_xorshift() % 20), dot = (int)(test_xorshift() % nd);

				len = 0;
				if (test_xorshift() % 2)
					s[len++] = '-';
				s[len++] = (char)('1' + test_xorshift() % 9);
				for (int k = 1; k < nd; k++) {
					if (k == dot + 1)
						s[len++] = '.';
					s[len++] = (char)('0' + test_xorshift() % 10);
				}
				if (dot + 1 >= nd)
					len += sprintf(s + len, ".%d", (int)(test_xorshift() % 10));
				if (test_xorshift() % 2)
					len += sprintf(s + len, "e%d", (int)(test_xorshift() % 61) - 30);
				s[len] = '\0';
			}
			want = strtod(s, NULL);
			if (isinf(want))
				continue;       /* refused: overflow (tested above) */
			outn = 0;
			cur_body = s;
			cur_len = (size_t)len;
			if (json_tok_read(s, (size_t)len, rec, NULL, &e)) {
				if (bad++ < 5)
					diag("%s: %s", s, e.msg);
				continue;
			}
			d = strtod(out + 3, NULL);
			if (memcmp(&d, &want, sizeof(d)) && bad++ < 5)
				diag("%s: %s, strtod %.17g", s, out, want);
		}
		is_int(bad, 0, "200000 reals: the same double as strtod");
	}
}

static void stop(void)
{
	stop_at = 3;
	is_int(RD("[1,2,3,4]"), -ENOMEM, "a callback's stop is returned");
	is_str(out, "A0 I1:1 ", "... no token after it");
	stop_at = 0;
}

static void garbage(void)
{
	static const char doc[] =
		"{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
		"\"value\":{\"stringValue\":\"caf\xc3\xa9 \\u00e9\\ud83d\\ude00\"}}]},\"scopeSpans\":"
		"[{\"spans\":[{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"startTimeUnixNano\":"
		"\"1544712660000000000\",\"x\":[1.5e3,-2,true,false,null,{}]}]}]}]}";
	static const char alpha[] = "{}[]\",:\\u0123456789.eE+-tfnrl \t\n\x80\xc3\xed\xf4\xff\v";
	char b[sizeof(doc) + 64];
	int okn = 0, einval = 0, other = 0;

	is_int(RD(doc), 0, "the document for mutations reads");
	for (int i = 0; i < 300000; i++) {
		size_t n;
		int r;

		if (i % 3 == 0) {
			n = test_xorshift() % sizeof(b);
			for (size_t k = 0; k < n; k++)
				b[k] = i % 6 ? alpha[test_xorshift() % (sizeof(alpha) - 1)] :
					(char)test_xorshift();
		} else {
			n = sizeof(doc) - 1;
			memcpy(b, doc, n);
			for (int k = 1 + (int)(test_xorshift() % 3); k > 0; k--) {
				size_t at = test_xorshift() % n;

				if (test_xorshift() % 4 == 0 && n > 1)
					n = at + 1;     /* cut */
				else
					b[at] = alpha[test_xorshift() % (sizeof(alpha) - 1)];
			}
		}
		/* read from a buffer of exactly n bytes (ASan sees a read past) */
		{
			char *h = malloc(n ? n : 1);

			memcpy(h, b, n);
			r = rd_n(h, n);
			if (r == 0)
				okn++;
			else if (r == -EINVAL && err.msg[0] && err.at <= n)
				einval++;
			else
				other++;
			free(h);
		}
	}
	diag("%d read, %d refused", okn, einval);
	is_int(other, 0, "300000 random and mutated texts: read, or refused with a reason and a byte");
	ok(okn > 1000 && einval > 1000, "... both outcomes seen");
}

int main(void)
{
	tokens();
	escapes();
	errors();
	depth();
	numbers();
	stop();
	garbage();
	return test_done();
}
