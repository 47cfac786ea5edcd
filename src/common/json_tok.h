/* SPDX-License-Identifier: MIT */
/*
 * The one streaming JSON reader, for the front ends that read a body
 * straight into fay's structures without a tree of values (OTLP/JSON,
 * Zipkin v2 JSON).  json_tok.c cuts the text into tokens in one pass (no
 * library: see there why), handed over one at a time; what is JSON is
 * decided as jansson decided it before:
 *
 *   - the text is UTF-8 (common/utf8.c's rules: no overlong forms, no
 *     surrogates), with no \v or \f and no control byte in a string, and
 *     no \u0000 in a string or key;
 *   - an integer (no '.', 'e' or 'E') fits int64, a real a double (a real
 *     is the double strtod reads; one below the least denormal is 0);
 *   - objects and arrays nest at most 2048 deep;
 *   - one value, then only white space (space, tab, LF, CR).
 *
 * One known difference from jansson: a lone UTF-16 surrogate escape (a
 * \ud800-\udbff not followed by a \udc00-\udfff escape, or a
 * \udc00-\udfff not after one) reads as "?" where jansson refused the
 * text.
 *
 * Where an error is: a byte that may never stand where it is (not UTF-8,
 * a control byte) is named by its offset, as is trailing garbage; a byte
 * of JSON's that is wrong where it stands (a '}' closing an array) by the
 * count of bytes read with it (its offset + 1); a text cut short by its
 * length.
 */
#ifndef FAY_COMMON_JSON_TOK_H
#define FAY_COMMON_JSON_TOK_H

#include <stddef.h>
#include <stdint.h>

#define JSON_TOK_MAX_NEST 2048

enum json_tok_type {
	JT_NULL, JT_BOOL, JT_INT, JT_REAL, JT_STR, JT_MAP, JT_ARRAY,
	JT_KEY,         /* an object's key (s, len) */
	JT_END,         /* the end of the innermost object or array */
};

/* A token: t and depth, and only the fields of its type (the others are
 * not set). */
struct json_tok {
	enum json_tok_type t;
	int b;                  /* JT_BOOL */
	long long i;            /* JT_INT */
	double d;               /* JT_REAL */
	const unsigned char *s; /* JT_STR, JT_KEY: len bytes, no NUL among them, */
	size_t len;             /*   valid only during the call */
	int depth;              /* open objects and arrays around the token */
};

/*
 * Called for every token of the text, in order.  Returns 0 to go on, or a
 * negative errno (-ENOMEM) that stops the reading and is returned.
 */
typedef int json_tok_fn(void *ctx, const struct json_tok *t);

/* Why the text is not JSON: msg the reason, at the byte it names (see
 * the top of this file). */
struct json_tok_err {
	size_t at;
	char msg[160];
};

/*
 * Read the len bytes of body as one JSON value, calling fn(ctx, token)
 * for each token.  Returns 0; -EINVAL when body is not JSON (e says where
 * and why; tokens before the problem were handed over); -ENOMEM; or what
 * fn returned to stop.
 */
int json_tok_read(const char *body, size_t len, json_tok_fn *fn, void *ctx,
		  struct json_tok_err *e);

#endif
