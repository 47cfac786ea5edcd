// SPDX-License-Identifier: MIT
/*
 * The streaming JSON reader (json_tok.h) on yajl: yajl's callbacks become
 * tokens, with the checks that make yajl refuse what jansson refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "common/json_tok.h"
#include "common/utf8.h"

/* A token carries the fields of its type only (json_tok.h). */
struct rd {
	yajl_handle h;
	json_tok_fn *fn;
	void *ctx;
	struct json_tok_err *e;
	int depth;
	int ret;                /* fn's stop, or -EINVAL with e set */
	size_t root_end;        /* the byte after the top-level object or array */
};

static int fail(struct rd *r, const char *what)
{
	if (!r->ret) {
		r->e->at = yajl_get_bytes_consumed(r->h);
		snprintf(r->e->msg, sizeof(r->e->msg), "%s", what);
		r->ret = -EINVAL;
	}
	return 0;
}

static int tok(struct rd *r, struct json_tok *t)
{
	int ret;

	t->depth = r->depth;
	if (t->t == JT_MAP || t->t == JT_ARRAY) {
		if (r->depth == JSON_TOK_MAX_NEST)
			return fail(r, "nested deeper than 2048");
		r->depth++;
	}
	ret = r->fn(r->ctx, t);
	if (ret) {
		r->ret = ret;
		return 0;
	}
	return 1;
}

static int cb_null(void *ctx)
{
	struct json_tok t = { .t = JT_NULL };

	return tok(ctx, &t);
}

static int cb_bool(void *ctx, int b)
{
	struct json_tok t = { .t = JT_BOOL, .b = b };

	return tok(ctx, &t);
}

/* A number as jansson reads one: an integer unless it has '.', 'e' or
 * 'E'; an integer beyond 64 bits or a real beyond a double is refused. */
static int cb_number(void *ctx, const char *s, size_t len)
{
	struct rd *r = ctx;
	struct json_tok t = { .t = JT_INT };
	char buf[512], *end;

	if (len >= sizeof(buf))
		return fail(r, "number too long");
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	if (strpbrk(buf, ".eE")) {
		t.t = JT_REAL;
		t.d = strtod(buf, &end);
		if (errno == ERANGE && (t.d > 1 || t.d < -1))
			return fail(r, "real number overflow");
	} else {
		t.i = strtoll(buf, &end, 10);
		if (errno == ERANGE)
			return fail(r, "integer too big for 64 bits");
	}
	return tok(r, &t);
}

/* A string or key (t): no NUL in it (jansson's rule). */
static int str_tok(struct rd *r, enum json_tok_type t, const unsigned char *s, size_t len)
{
	struct json_tok tk;

	if (memchr(s, '\0', len))
		return fail(r, t == JT_KEY ? "\\u0000 is not allowed in a key" :
				"\\u0000 is not allowed in a string");
	tk.t = t;
	tk.s = s;
	tk.len = len;
	return tok(r, &tk);
}

static int cb_string(void *ctx, const unsigned char *s, size_t len)
{
	return str_tok(ctx, JT_STR, s, len);
}

static int cb_key(void *ctx, const unsigned char *s, size_t len)
{
	return str_tok(ctx, JT_KEY, s, len);
}

static int cb_start_map(void *ctx)
{
	struct json_tok t;

	t.t = JT_MAP;

	return tok(ctx, &t);
}

static int cb_start_array(void *ctx)
{
	struct json_tok t;

	t.t = JT_ARRAY;

	return tok(ctx, &t);
}

static int cb_end(void *ctx)
{
	struct rd *r = ctx;
	struct json_tok t;

	t.t = JT_END;

	r->depth--;
	if (!tok(r, &t))
		return 0;
	if (!r->depth)
		r->root_end = yajl_get_bytes_consumed(r->h);
	return 1;
}

static const yajl_callbacks callbacks = {
	.yajl_null = cb_null,
	.yajl_boolean = cb_bool,
	.yajl_number = cb_number,
	.yajl_string = cb_string,
	.yajl_start_map = cb_start_map,
	.yajl_map_key = cb_key,
	.yajl_end_map = cb_end,
	.yajl_start_array = cb_start_array,
	.yajl_end_array = cb_end,
};

/* The length of the JSON white space (RFC 8259: space, tab, LF, CR) at s. */
static size_t strspn_json_ws(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

int json_tok_read(const char *body, size_t len, json_tok_fn *fn, void *ctx,
		  struct json_tok_err *e)
{
	struct rd r = { .fn = fn, .ctx = ctx, .e = e };
	yajl_status st;
	size_t at;

	e->at = 0;
	e->msg[0] = '\0';
	/* JSON text is UTF-8 (RFC 8259), and yajl's own check lets
	 * overlong forms through */
	at = utf8_invalid_at(body, len);
	if (at < len) {
		e->at = at;
		snprintf(e->msg, sizeof(e->msg), "invalid UTF-8 (0x%02x)", (unsigned char)body[at]);
		return -EINVAL;
	}
	/* yajl takes \v and \f for white space; JSON has no such thing
	 * (and no control character in a string either) */
	for (const char *c = "\v\f"; *c; c++) {
		const char *bad = memchr(body, *c, len);

		if (bad) {
			e->at = (size_t)(bad - body);
			snprintf(e->msg, sizeof(e->msg), "invalid character 0x%02x", *c);
			return -EINVAL;
		}
	}
	r.h = yajl_alloc(&callbacks, NULL, &r);
	if (!r.h)
		return -ENOMEM;
	yajl_config(r.h, yajl_dont_validate_strings, 1);       /* done above */
	st = yajl_parse(r.h, (const unsigned char *)body, len);
	at = yajl_get_bytes_consumed(r.h);
	if (st == yajl_status_ok) {
		st = yajl_complete_parse(r.h);
		at = len;       /* what is missing is missing at the end */
	}
	/* yajl lets an unfinished token after the top-level value pass
	 * (it waits for more input that complete_parse never checks) */
	if (st == yajl_status_ok && r.root_end && !r.ret)
		at = r.root_end + strspn_json_ws(body + r.root_end, len - r.root_end);
	if (r.ret) {
		/* fn stopped it, or fail() said why */
	} else if (st != yajl_status_ok) {
		unsigned char *m = yajl_get_error(r.h, 0, (const unsigned char *)body, len);
		const char *msg = m ? (const char *)m : "not JSON";
		size_t n;

		if (!strncmp(msg, "parse error: ", 13))
			msg += 13;
		n = strcspn(msg, "\n");
		e->at = at;
		snprintf(e->msg, sizeof(e->msg), "%.*s", (int)n, msg);
		if (m)
			yajl_free_error(r.h, m);
		r.ret = -EINVAL;
	} else if (r.root_end && at < len) {
		e->at = at;
		snprintf(e->msg, sizeof(e->msg), "trailing garbage after the top-level object");
		r.ret = -EINVAL;
	}
	yajl_free(r.h);
	return r.ret;
}
