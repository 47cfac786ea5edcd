/* SPDX-License-Identifier: MIT */
/*
 * The one JSON string writer (RFC 8259), for every place that writes JSON
 * by hand (query results and plans, SQL answers, OTLP attribute values):
 *
 *   - '"' and '\\' are escaped with a backslash;
 *   - control characters (below 0x20) are written \u00XX;
 *   - valid UTF-8 passes through as it is (so "café-✓" stays "café-✓");
 *   - a byte that does not start or continue a valid UTF-8 sequence
 *     (a stray continuation byte, an overlong form, a surrogate, a code
 *     point over U+10FFFF, a sequence cut short) is written \u00XX, its
 *     value as a code point, so the output is always valid JSON and
 *     always valid UTF-8.
 */
#ifndef FAY_COMMON_JSON_STR_H
#define FAY_COMMON_JSON_STR_H

#include <stddef.h>
#include <stdio.h>

/* Where the text goes: n bytes at p. */
typedef void json_put_fn(void *ctx, const char *p, size_t n);

/* Write the len bytes of s as a JSON string literal, quotes included,
 * through put(ctx, ...). */
void json_str_put(json_put_fn *put, void *ctx, const char *s, size_t len);

/* 1 when s needs no escape (every byte printable ASCII, neither '"' nor
 * '\\'): its literal is then '"', s, '"' as they are; else 0. */
int json_str_plain(const char *s, size_t len);

/* The same to f. */
void json_str(FILE *f, const char *s, size_t len);

#endif
