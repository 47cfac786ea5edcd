/* SPDX-License-Identifier: MIT */
/*
 * The one streaming JSON reader, for the front ends that read a body
 * straight into fay's structures without a tree of values (OTLP/JSON,
 * Zipkin v2 JSON).  yajl (Debian's libyajl-dev; json_tok.c is the one
 * file that includes it) cuts the text into tokens, handed over one at a
 * time; what is JSON is decided as jansson decided it before:
 *
 *   - the text is UTF-8 (common/utf8.c's rules: no overlong forms), with
 *     no \v or \f (yajl takes them for white space) and no \u0000 in a
 *     string or key;
 *   - an integer (no '.', 'e' or 'E') fits int64, a real a double;
 *   - objects and arrays nest at most 2048 deep;
 *   - one value, then only white space.
 *
 * One known difference from jansson: a lone UTF-16 surrogate escape
 * (\ud800 without its pair) reads as "?" where jansson refused the text.
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

/* Why the text is not JSON: msg the reason, at the byte it names (the
 * offset of a byte that is not UTF-8 or not allowed; else the count of
 * bytes read when the reader stopped). */
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
