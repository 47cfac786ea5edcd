// SPDX-License-Identifier: MIT
/* The one JSON string writer: see json_str.h for the rules. */
#include <stdint.h>

#include "common/json_str.h"

/* The length of the valid UTF-8 sequence at s (len bytes left), or 0 when
 * s[0] does not start one (RFC 3629's table: no overlong forms, no
 * surrogates, nothing over U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t len)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > len)
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

void json_str_put(json_put_fn *put, void *ctx, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t run = 0, i = 0;	/* s[run, i): bytes that pass as they are */

	put(ctx, "\"", 1);
	while (i < len) {
		size_t n = utf8_len(u + i, len - i);
		char esc[6] = { '\\', 'u', '0', '0', 0, 0 };

		if (n && u[i] >= 0x20 && u[i] != '"' && u[i] != '\\') {
			i += n;
			continue;
		}
		if (i > run)
			put(ctx, s + run, i - run);
		if (u[i] == '"' || u[i] == '\\') {
			esc[1] = (char)u[i];
			put(ctx, esc, 2);
		} else {
			esc[4] = hex[u[i] >> 4];
			esc[5] = hex[u[i] & 15];
			put(ctx, esc, 6);
		}
		run = ++i;
	}
	if (i > run)
		put(ctx, s + run, i - run);
	put(ctx, "\"", 1);
}

static void put_file(void *f, const char *p, size_t n)
{
	fwrite(p, 1, n, f);
}

void json_str(FILE *f, const char *s, size_t len)
{
	json_str_put(put_file, f, s, len);
}
