// SPDX-License-Identifier: MIT
/*
 * The streaming JSON reader (json_tok.h), made for this job: one pass over
 * the bytes, no recursion (a stack of JSON_TOK_MAX_NEST bytes says which
 * containers are open), strings scanned sixteen bytes at a time (SSE2:
 * quote, backslash, control bytes and high bytes found at once; UTF-8
 * checked only where a high byte is), a string without escapes handed over
 * in place, integers parsed here, reals parsed here where that is exact
 * (Clinger's fast path: at most 15 digits, a power of ten up to 1e22, one
 * correctly rounded multiplication or division: the double strtod gives)
 * and by strtod otherwise.
 *
 * Why not a library: Debian's C JSON readers are jansson (a tree of
 * values), json-c (a tree), yajl (a stream, and the fast one there: it was
 * used here, and its tokenizer was ~28k of the ~46.5k instructions a span
 * of the OTLP/JSON decode, ~18 a byte) and cJSON (a tree); none scans a
 * block at a time.  simdjson is C++ and builds a tape of the whole text.
 *
 * Against yajl (300,000 mutated OTLP bodies through both, a harness run
 * once at the change and not kept): the same acceptance but for a top-level scalar followed by
 * an unfinished token ("1\""), which yajl let through and jansson and
 * this reader refuse.  Of the refusals 84% name the same byte; the
 * others: a lexical error one byte later (the count of bytes read with
 * the bad one, as the other errors), a wrong token at its first byte
 * where yajl named its last, and bad UTF-8, \v or \f where the reading
 * reaches them (yajl's wrapper checked the whole text for those first).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/grow.h"
#include "common/json_tok.h"
#include "common/utf8.h"

typedef unsigned char uc;

struct rd {
	const uc *base, *end;
	json_tok_fn *fn;
	void *ctx;
	struct json_tok_err *e;
	uc *buf;                /* a string with escapes, decoded */
	size_t cap;
	int depth;
	char open[JSON_TOK_MAX_NEST];   /* '{' or '[' for each open container */
};

/* Say why the text is not JSON: at the byte offset at (json_tok.h). */
__attribute__((format(printf, 3, 4)))
static int fail(struct rd *r, size_t at, const char *fmt, ...)
{
	va_list ap;

	r->e->at = at;
	va_start(ap, fmt);
	vsnprintf(r->e->msg, sizeof(r->e->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int premature(struct rd *r)
{
	return fail(r, (size_t)(r->end - r->base), "premature EOF");
}

/* A byte that is JSON's but not allowed where it stands (named by the
 * count of bytes read, itself included, as yajl named it), or one that is
 * never allowed there (a control or high byte: named by its offset). */
static int unexpected(struct rd *r, const uc *p, const char *what)
{
	size_t at = (size_t)(p - r->base);

	if (*p >= 0x80 && !utf8_seq_len(p, (size_t)(r->end - p)))
		return fail(r, at, "invalid UTF-8 (0x%02x)", *p);
	if (*p < 0x20 || *p >= 0x7f)
		return fail(r, at, "invalid character 0x%02x", *p);
	return fail(r, at + 1, "unexpected '%c' (%s)", *p, what);
}

/* Past JSON's white space (space, tab, LF, CR) at p: one test for a byte
 * above the space, the common case. */
static inline const uc *skip_ws(const uc *p, const uc *end)
{
	while (p < end && *p <= ' ' && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

/* The first byte at or after p that ends a run of plain string bytes: '"',
 * '\\', below 0x20 or from 0x80; end when there is none. */
static inline __attribute__((always_inline))
const uc *scan_str(const uc *p, const uc *end)
{
#if defined(__SSE2__)
	const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');
	const __m128i sp = _mm_set1_epi8(0x20);

	while (end - p >= 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)p);
		/* signed: below 0x20 is a control byte or a high one */
		__m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, bs)),
					 _mm_cmplt_epi8(x, sp));
		unsigned bits = (unsigned)_mm_movemask_epi8(m);

		if (bits)
			return p + __builtin_ctz(bits);
		p += 16;
	}
#endif
	while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80)
		p++;
	return p;
}

/* Append n bytes to r->buf (at *len). */
static int put(struct rd *r, size_t *len, const uc *s, size_t n)
{
	while (*len + n + 4 > r->cap)
		if (array_grow((void **)&r->buf, r->cap, &r->cap, 1, 256))
			return -ENOMEM;
	memcpy(r->buf + *len, s, n);
	*len += n;
	return 0;
}

static int is_hex(uc c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* The four hex digits at p (all there), or -1 when one is not hex. */
static int hex4(const uc *p, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		uc c = p[i];

		if (!is_hex(c))
			return -1;
		v = v << 4 | (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	*out = v;
	return 0;
}

static size_t utf8_put(uc *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (uc)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (uc)(0xc0 | cp >> 6);
		o[1] = (uc)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (uc)(0xe0 | cp >> 12);
		o[1] = (uc)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (uc)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (uc)(0xf0 | cp >> 18);
	o[1] = (uc)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (uc)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (uc)(0x80 | (cp & 0x3f));
	return 4;
}

/* The escape after the backslash at *pp, decoded onto r->buf; *pp moves
 * past it.  A UTF-16 surrogate without its other half is "?". */
static int escape(struct rd *r, const uc **pp, size_t *len, int key)
{
	const uc *p = *pp + 1, *end = r->end;
	uc o[4];
	unsigned cp, lo;
	size_t n = 1;

	if (p == end)
		return premature(r);
	switch (*p) {
	case '"': case '\\': case '/':
		o[0] = *p;
		break;
	case 'b': o[0] = '\b'; break;
	case 'f': o[0] = '\f'; break;
	case 'n': o[0] = '\n'; break;
	case 'r': o[0] = '\r'; break;
	case 't': o[0] = '\t'; break;
	case 'u':
		for (int i = 1; i <= 4; i++) {
			if (p + i == end)
				return premature(r);
			if (!is_hex(p[i]))
				return fail(r, (size_t)(p + i - r->base) + 1,
					    "invalid \\u escape (0x%02x)", p[i]);
		}
		hex4(p + 1, &cp);
		p += 4;
		if (!cp)
			return fail(r, (size_t)(p - r->base) + 1,
				    "\\u0000 is not allowed in a %s", key ? "key" : "string");
		if (cp >= 0xd800 && cp <= 0xdbff && end - p >= 7 && p[1] == '\\' && p[2] == 'u' &&
		    !hex4(p + 3, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			p += 6;
		} else if (cp >= 0xd800 && cp <= 0xdfff) {
			cp = '?';
		}
		n = utf8_put(o, cp);
		break;
	default:
		return unexpected(r, p, "not an escape");
	}
	*pp = p + 1;
	return put(r, len, o, n);
}

/* The string whose opening quote is at *pp: (s, n), in place when it has
 * no escape, else in r->buf; *pp moves past the closing quote. */
static inline __attribute__((always_inline))
int string(struct rd *r, const uc **pp, const uc **s, size_t *n, int key)
{
	const uc *p = *pp + 1, *start = p, *end = r->end;
	size_t len = 0;
	int copied = 0, ret;

	for (;;) {
		p = scan_str(p, end);
		if (p == end)
			return premature(r);
		if (*p == '"')
			break;
		if (*p >= 0x80) {
			size_t k = utf8_seq_len(p, (size_t)(end - p));

			if (!k)
				return fail(r, (size_t)(p - r->base), "invalid UTF-8 (0x%02x)", *p);
			p += k;
			continue;
		}
		if (*p < 0x20)
			return fail(r, (size_t)(p - r->base), "invalid character 0x%02x", *p);
		/* a backslash */
		ret = put(r, &len, start, (size_t)(p - start));
		if (!ret)
			ret = escape(r, &p, &len, key);
		if (ret)
			return ret;
		copied = 1;
		start = p;
	}
	if (copied) {
		ret = put(r, &len, start, (size_t)(p - start));
		if (ret)
			return ret;
		*s = r->buf;
		*n = len;
	} else {
		*s = start;
		*n = (size_t)(p - start);
	}
	*pp = p + 1;
	return 0;
}

static const double pow10_exact[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* A real through strtod (the text copied to end in a NUL). */
static int real_strtod(struct rd *r, const uc *p, size_t n, double *d)
{
	char sbuf[128], *b = sbuf;

	if (n >= sizeof(sbuf)) {
		b = malloc(n + 1);
		if (!b)
			return -ENOMEM;
	}
	memcpy(b, p, n);
	b[n] = '\0';
	errno = 0;
	*d = strtod(b, NULL);
	if (b != sbuf)
		free(b);
	if (errno == ERANGE && (*d > 1 || *d < -1))
		return fail(r, (size_t)(p - r->base) + n, "real number overflow");
	return 0;
}

/* The number at *pp: JSON's grammar; an integer (no '.', 'e' or 'E') must
 * fit int64, a real a double (jansson's rules). */
static int number(struct rd *r, const uc **pp, struct json_tok *t)
{
	const uc *p = *pp, *end = r->end, *q = p;
	int neg = 0, real = 0, ndig = 0;
	uint64_t m = 0;
	long fexp = 0, ex = 0;

	if (*q == '-') {
		neg = 1;
		if (++q == end)
			return premature(r);
	}
	if (*q == '0') {
		q++;
	} else if (*q >= '1' && *q <= '9') {
		for (; q < end && *q >= '0' && *q <= '9'; q++)
			if (ndig < 19)
				m = m * 10 + (uint64_t)(*q - '0'), ndig++;
			else
				ndig = 99;
	} else {
		return unexpected(r, q, "a digit after '-'");
	}
	if (q < end && *q == '.') {
		real = 1;
		if (++q == end)
			return premature(r);
		if (*q < '0' || *q > '9')
			return unexpected(r, q, "a digit after '.'");
		for (; q < end && *q >= '0' && *q <= '9'; q++) {
			if (!m && *q == '0') {
				fexp--;
				continue;
			}
			if (ndig < 19)
				m = m * 10 + (uint64_t)(*q - '0'), ndig++, fexp--;
			else
				ndig = 99;
		}
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		int eneg = 0;

		real = 1;
		if (++q < end && (*q == '+' || *q == '-'))
			eneg = *q++ == '-';
		if (q == end)
			return premature(r);
		if (*q < '0' || *q > '9')
			return unexpected(r, q, "a digit in an exponent");
		for (; q < end && *q >= '0' && *q <= '9'; q++)
			if (ex < 100000)
				ex = ex * 10 + (*q - '0');
		if (eneg)
			ex = -ex;
	}
	*pp = q;
	if (!real) {
		uint64_t lim = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;

		/* 19 digits kept in m: compare; more: too big */
		if (ndig > 19 || m > lim)
			return fail(r, (size_t)(q - r->base), "integer too big for 64 bits");
		t->t = JT_INT;
		t->i = neg ? (long long)(0 - m) : (long long)m;
		return 0;
	}
	t->t = JT_REAL;
	ex += fexp;
	if (ndig <= 15 && ex >= -22 && ex <= 22) {
		double d = (double)m;

		d = ex < 0 ? d / pow10_exact[-ex] : d * pow10_exact[ex];
		t->d = neg ? -d : d;
		return 0;
	}
	return real_strtod(r, p, (size_t)(q - p), &t->d);
}

/* true, false or null at *pp. */
static int literal(struct rd *r, const uc **pp, struct json_tok *t)
{
	static const char *const w[] = { "true", "false", "null" };
	const uc *p = *pp;
	const char *s = w[*p == 't' ? 0 : *p == 'f' ? 1 : 2];
	size_t n = strlen(s);

	for (size_t i = 1; i < n; i++) {
		if (p + i == r->end)
			return premature(r);
		if (p[i] != (uc)s[i])
			return unexpected(r, p + i, "a literal");
	}
	*pp = p + n;
	if (*s == 'n') {
		t->t = JT_NULL;
	} else {
		t->t = JT_BOOL;
		t->b = *s == 't';
	}
	return 0;
}

static int emit(struct rd *r, struct json_tok *t)
{
	t->depth = r->depth;
	return r->fn(r->ctx, t);
}

static int run(struct rd *r)
{
	const uc *p = r->base, *end = r->end;
	struct json_tok t;
	int ret, root_box = 0;

value:
	if (p == end)
		return premature(r);
	/* the common values first, each by one test: a string, an object, an
	 * array (a switch tests numbers and white space before them) */
	if (*p == '"') {
		t.t = JT_STR;
		if ((ret = string(r, &p, &t.s, &t.len, 0)))
			return ret;
		goto scalar;
	}
	if (*p == '{' || *p == '[') {
		int obj = *p == '{';

		if (r->depth == JSON_TOK_MAX_NEST)
			return fail(r, (size_t)(p - r->base) + 1, "nested deeper than %d", JSON_TOK_MAX_NEST);
		if (!r->depth)
			root_box = 1;
		t.t = obj ? JT_MAP : JT_ARRAY;
		if ((ret = emit(r, &t)))
			return ret;
		r->open[r->depth++] = (char)*p;
		p = skip_ws(p + 1, end);
		if (p == end)
			return premature(r);
		if (*p == (obj ? '}' : ']'))
			goto close;
		if (obj)
			goto key;
		goto value;
	}
	switch (*p) {
	case ' ': case '\t': case '\n': case '\r':
		p = skip_ws(p + 1, end);
		goto value;
	case '-': case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		if ((ret = number(r, &p, &t)))
			return ret;
		break;
	case 't': case 'f': case 'n':
		if ((ret = literal(r, &p, &t)))
			return ret;
		break;
	default:
		return unexpected(r, p, "a value");
	}
scalar:
	if ((ret = emit(r, &t)))
		return ret;
after:
	if (!r->depth) {
		p = skip_ws(p, end);
		if (p < end) {
			if (*p < 0x20 || *p >= 0x80)
				return unexpected(r, p, "");
			return fail(r, (size_t)(p - r->base), "trailing garbage after the top-level %s",
				    root_box ? "object" : "value");
		}
		return 0;
	}
	/* white space (none in compact JSON): skipped only where there is some */
	if (p == end || *p <= ' ') {
		p = skip_ws(p, end);
		if (p == end)
			return premature(r);
	}
	if (*p == ',') {
		p++;
		if (r->open[r->depth - 1] == '{')
			goto key;
		goto value;
	}
	if (*p != (r->open[r->depth - 1] == '{' ? '}' : ']'))
		return unexpected(r, p, r->open[r->depth - 1] == '{' ? "',' or '}'" : "',' or ']'");
close:
	p++;
	r->depth--;
	t.t = JT_END;
	if ((ret = emit(r, &t)))
		return ret;
	goto after;
key:
	if (p == end || *p <= ' ') {
		p = skip_ws(p, end);
		if (p == end)
			return premature(r);
	}
	if (*p != '"')
		return unexpected(r, p, "an object key, a string");
	t.t = JT_KEY;
	if ((ret = string(r, &p, &t.s, &t.len, 1)))
		return ret;
	if ((ret = emit(r, &t)))
		return ret;
	if (p == end || *p <= ' ') {
		p = skip_ws(p, end);
		if (p == end)
			return premature(r);
	}
	if (*p != ':')
		return unexpected(r, p, "':'");
	p++;
	goto value;
}

int json_tok_read(const char *body, size_t len, json_tok_fn *fn, void *ctx,
		  struct json_tok_err *e)
{
	struct rd r;
	int ret;

	r.base = (const uc *)body;
	r.end = r.base + len;
	r.fn = fn;
	r.ctx = ctx;
	r.e = e;
	r.buf = NULL;
	r.cap = 0;
	r.depth = 0;
	e->at = 0;
	e->msg[0] = '\0';
	ret = run(&r);
	free(r.buf);
	return ret;
}
