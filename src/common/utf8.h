/* SPDX-License-Identifier: MIT */
/*
 * The one UTF-8 validator (RFC 3629's table: no overlong forms, no
 * surrogates, nothing over U+10FFFF, no sequence cut short), for every
 * place that takes text from outside: the JSON string writer, OTLP/JSON
 * bodies and OTLP protobuf strings.
 */
#ifndef FAY_COMMON_UTF8_H
#define FAY_COMMON_UTF8_H

#include <stddef.h>

/* The length (1-4) of the valid UTF-8 sequence at s, which has len > 0
 * bytes left, or 0 when s[0] does not start one. */
size_t utf8_seq_len(const unsigned char *s, size_t len);

/* The offset of the first byte of s (len bytes) that is not part of a
 * valid UTF-8 sequence, or len when all of s is valid UTF-8. */
size_t utf8_invalid_at(const char *s, size_t len);

#endif
