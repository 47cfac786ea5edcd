// SPDX-License-Identifier: MIT
/*
 * FayQL lexer: the whole text into one token array in the query's arena.
 *
 * Tokens: identifiers and keywords, integers (decimal, 0x hex), durations
 * (an integer followed at once by ns, us, ms, s, m or h; value in ns),
 * strings in double quotes with C escapes, operators and punctuation.
 * Comments run from '//' or '#' to the end of the line.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "query/query.h"

static const struct {
	const char *word;
	enum tok_kind kind;
} keywords[] = {
	{ "from", T_FROM }, { "in", T_IN }, { "where", T_WHERE },
	{ "let", T_LET }, { "group", T_GROUP }, { "by", T_BY },
	{ "into", T_INTO }, { "select", T_SELECT }, { "window", T_WINDOW },
	{ "for", T_FOR }, { "order", T_ORDER }, { "desc", T_DESC },
	{ "asc", T_ASC }, { "limit", T_LIMIT }, { "categorize", T_CATEGORIZE },
};

static const char *const tok_names[T_NTOKENS] = {
	[T_EOF] = "end of query", [T_IDENT] = "identifier",
	[T_INT] = "integer", [T_FLOAT] = "number", [T_STRING] = "string", [T_DURATION] = "duration",
	[T_FROM] = "'from'", [T_IN] = "'in'", [T_WHERE] = "'where'",
	[T_LET] = "'let'", [T_GROUP] = "'group'", [T_BY] = "'by'",
	[T_INTO] = "'into'", [T_SELECT] = "'select'", [T_WINDOW] = "'window'",
	[T_FOR] = "'for'", [T_ORDER] = "'order'", [T_DESC] = "'desc'",
	[T_ASC] = "'asc'", [T_LIMIT] = "'limit'", [T_CATEGORIZE] = "'categorize'",
	[T_LPAREN] = "'('", [T_RPAREN] = "')'", [T_LBRACE] = "'{'",
	[T_RBRACE] = "'}'", [T_COMMA] = "','", [T_DOT] = "'.'",
	[T_COLON] = "':'", [T_ASSIGN] = "'='", [T_PLUS] = "'+'",
	[T_MINUS] = "'-'", [T_STAR] = "'*'", [T_SLASH] = "'/'",
	[T_PERCENT] = "'%'", [T_AMP] = "'&'", [T_PIPE] = "'|'",
	[T_CARET] = "'^'", [T_TILDE] = "'~'", [T_SHL] = "'<<'",
	[T_SHR] = "'>>'", [T_EQ] = "'=='", [T_NE] = "'!='", [T_LT] = "'<'",
	[T_LE] = "'<='", [T_GT] = "'>'", [T_GE] = "'>='",
	[T_ANDAND] = "'&&'", [T_OROR] = "'||'", [T_BANG] = "'!'",
};

const char *tok_describe(enum tok_kind k)
{
	return k < T_NTOKENS && tok_names[k] ? tok_names[k] : "token";
}

const char *op_str(enum tok_kind op)
{
	static const char *const ops[T_NTOKENS] = {
		[T_PLUS] = "+", [T_MINUS] = "-", [T_STAR] = "*",
		[T_SLASH] = "/", [T_PERCENT] = "%", [T_AMP] = "&",
		[T_PIPE] = "|", [T_CARET] = "^", [T_TILDE] = "~",
		[T_SHL] = "<<", [T_SHR] = ">>", [T_EQ] = "==", [T_NE] = "!=",
		[T_LT] = "<", [T_LE] = "<=", [T_GT] = ">", [T_GE] = ">=",
		[T_ANDAND] = "&&", [T_OROR] = "||", [T_BANG] = "!",
	};

	return op < T_NTOKENS && ops[op] ? ops[op] : "?";
}

struct lexer {
	struct query *q;
	const char *s;
	size_t len, pos;
	int line, col;
	struct token *toks;
	int n, cap;
};

static int peekc(const struct lexer *lx, size_t ahead)
{
	return lx->pos + ahead < lx->len ? (unsigned char)lx->s[lx->pos + ahead] : -1;
}

static void advance(struct lexer *lx)
{
	if (lx->s[lx->pos] == '\n') {
		lx->line++;
		lx->col = 1;
	} else {
		lx->col++;
	}
	lx->pos++;
}

static struct loc here(const struct lexer *lx)
{
	return (struct loc){ lx->line, lx->col, (int)lx->pos, (int)lx->pos,
			     (int)lx->pos + 1 };
}

static struct token *push(struct lexer *lx, enum tok_kind kind, struct loc loc)
{
	struct token *t;

	if (lx->n == lx->cap) {
		int cap = lx->cap ? lx->cap * 2 : 64;
		struct token *nt = arena_alloc(query_arena(lx->q), cap * sizeof(*nt));

		if (!nt)
			return NULL;
		if (lx->n)
			memcpy(nt, lx->toks, lx->n * sizeof(*nt));
		lx->toks = nt;
		lx->cap = cap;
	}
	t = &lx->toks[lx->n++];
	memset(t, 0, sizeof(*t));
	t->kind = kind;
	t->loc = loc;
	return t;
}

static int lex_error_char(struct lexer *lx, struct loc loc, int c)
{
	if (isprint(c))
		return query_errorf(lx->q, &loc, "unexpected character '%c'", c);
	return query_errorf(lx->q, &loc, "unexpected byte 0x%02x", c);
}

static const struct {
	const char *unit;
	uint64_t ns;
} units[] = {
	{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000ull },
	{ "m", 60000000000ull }, { "h", 3600000000000ull },
};

static int lex_number(struct lexer *lx)
{
	struct loc loc = here(lx);
	uint64_t v = 0;
	int base = 10, digits = 0;
	struct token *t;

	if (peekc(lx, 0) == '0' && (peekc(lx, 1) == 'x' || peekc(lx, 1) == 'X')) {
		base = 16;
		advance(lx);
		advance(lx);
	}
	for (;;) {
		int c = peekc(lx, 0), d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (base == 16 && isxdigit(c))
			d = tolower(c) - 'a' + 10;
		else
			break;
		if (v > (UINT64_MAX - d) / base) {
			loc.end = (int)lx->pos + 1;
			return query_errorf(lx->q, &loc,
					    "integer literal does not fit in 64 bits");
		}
		v = v * base + d;
		digits++;
		advance(lx);
	}
	if (!digits)
		return query_errorf(lx->q, &loc, "'0x' needs hex digits");
	if (base == 10 && peekc(lx, 0) == '.' && isdigit(peekc(lx, 1))) {
		char buf[64];
		size_t n;

		advance(lx);
		while (isdigit(peekc(lx, 0)))
			advance(lx);
		n = lx->pos - (size_t)loc.off;
		if (n >= sizeof(buf))
			return query_errorf(lx->q, &loc, "number too long");
		memcpy(buf, lx->s + loc.off, n);
		buf[n] = '\0';
		if (isalpha(peekc(lx, 0)) || peekc(lx, 0) == '_')
			return query_errorf(lx->q, &loc,
					    "durations are whole numbers of a unit (write 1500ms, not 1.5s)");
		t = push(lx, T_FLOAT, loc);
		if (!t)
			return -ENOMEM;
		t->fval = strtod(buf, NULL);
		t->loc.end = (int)lx->pos;
		return 0;
	}

	t = NULL;
	if (isalpha(peekc(lx, 0)) || peekc(lx, 0) == '_') {
		size_t start = lx->pos;
		struct loc uloc = here(lx);
		size_t ulen;

		while (isalnum(peekc(lx, 0)) || peekc(lx, 0) == '_')
			advance(lx);
		ulen = lx->pos - start;
		if (base == 16)
			return query_errorf(lx->q, &uloc,
					    "bad digit '%c' in hex integer",
					    lx->s[start]);
		for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
			if (strlen(units[i].unit) != ulen ||
			    memcmp(units[i].unit, lx->s + start, ulen))
				continue;
			if (v && units[i].ns > UINT64_MAX / v)
				return query_errorf(lx->q, &loc,
						    "duration does not fit in 64 bits of nanoseconds");
			t = push(lx, T_DURATION, loc);
			if (!t)
				return -ENOMEM;
			t->ival = v * units[i].ns;
			break;
		}
		if (!t)
			return query_errorf(lx->q, &uloc,
					    "bad duration unit '%.*s' (units: ns, us, ms, s, m, h)",
					    (int)(ulen > 32 ? 32 : ulen), lx->s + start);
	} else {
		t = push(lx, T_INT, loc);
		if (!t)
			return -ENOMEM;
		t->ival = v;
	}
	t->loc.end = (int)lx->pos;
	return 0;
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? tolower(c) - 'a' + 10 : -1;
}

static int lex_string(struct lexer *lx)
{
	struct loc loc = here(lx);
	char *buf = arena_alloc(query_arena(lx->q), lx->len - lx->pos + 1);
	size_t n = 0;
	struct token *t;

	if (!buf)
		return -ENOMEM;
	advance(lx);	/* opening quote */
	for (;;) {
		int c = peekc(lx, 0);

		if (c < 0 || c == '\n')
			return query_errorf(lx->q, &loc,
					    "unterminated string (a string ends with '\"' on the same line)");
		if (c == '"')
			break;
		if (c != '\\') {
			buf[n++] = (char)c;
			advance(lx);
			continue;
		}
		struct loc eloc = here(lx);

		advance(lx);
		c = peekc(lx, 0);
		switch (c) {
		case 'n': buf[n++] = '\n'; break;
		case 't': buf[n++] = '\t'; break;
		case 'r': buf[n++] = '\r'; break;
		case '0': buf[n++] = '\0'; break;
		case '\\': buf[n++] = '\\'; break;
		case '"': buf[n++] = '"'; break;
		case 'x': {
			int h1 = hexval(peekc(lx, 1)), h2 = hexval(peekc(lx, 2));

			if (h1 < 0 || h2 < 0)
				return query_errorf(lx->q, &eloc,
						    "'\\x' needs two hex digits");
			buf[n++] = (char)(h1 * 16 + h2);
			advance(lx);
			advance(lx);
			break;
		}
		default:
			if (c < 0 || c == '\n')
				return query_errorf(lx->q, &loc,
						    "unterminated string (a string ends with '\"' on the same line)");
			return query_errorf(lx->q, &eloc,
					    "unknown escape '\\%c' (known: \\n \\t \\r \\0 \\\\ \\\" \\xHH)",
					    isprint(c) ? c : '?');
		}
		advance(lx);
	}
	advance(lx);	/* closing quote */
	t = push(lx, T_STRING, loc);
	if (!t)
		return -ENOMEM;
	t->text = buf;
	t->len = n;
	t->loc.end = (int)lx->pos;
	return 0;
}

static int lex_ident(struct lexer *lx)
{
	struct loc loc = here(lx);
	size_t start = lx->pos;
	enum tok_kind kind = T_IDENT;
	struct token *t;

	while (isalnum(peekc(lx, 0)) || peekc(lx, 0) == '_')
		advance(lx);
	for (size_t i = 0; i < ARRAY_SIZE(keywords); i++)
		if (strlen(keywords[i].word) == lx->pos - start &&
		    !memcmp(keywords[i].word, lx->s + start, lx->pos - start))
			kind = keywords[i].kind;
	t = push(lx, kind, loc);
	if (!t)
		return -ENOMEM;
	t->text = arena_strndup(query_arena(lx->q), lx->s + start, lx->pos - start);
	if (!t->text)
		return -ENOMEM;
	t->len = lx->pos - start;
	t->loc.end = (int)lx->pos;
	return 0;
}

/* Operators, longest first. */
static const struct {
	const char *s;
	enum tok_kind kind;
} ops[] = {
	{ "<<", T_SHL }, { ">>", T_SHR }, { "==", T_EQ }, { "!=", T_NE },
	{ "<=", T_LE }, { ">=", T_GE }, { "&&", T_ANDAND }, { "||", T_OROR },
	{ "(", T_LPAREN }, { ")", T_RPAREN }, { "{", T_LBRACE },
	{ "}", T_RBRACE }, { ",", T_COMMA }, { ".", T_DOT }, { ":", T_COLON },
	{ "=", T_ASSIGN }, { "+", T_PLUS }, { "-", T_MINUS }, { "*", T_STAR },
	{ "/", T_SLASH }, { "%", T_PERCENT }, { "&", T_AMP }, { "|", T_PIPE },
	{ "^", T_CARET }, { "~", T_TILDE }, { "<", T_LT }, { ">", T_GT },
	{ "!", T_BANG },
};

int lex_all(struct query *q, const char *text, size_t len,
	    struct token **toks, int *ntoks)
{
	struct lexer lx = { .q = q, .s = text, .len = len, .line = 1, .col = 1 };
	int err = 0;

	while (!err) {
		int c = peekc(&lx, 0);

		if (c < 0)
			break;
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
		    c == '\f' || c == '\v') {
			advance(&lx);
			continue;
		}
		if (c == '#' || (c == '/' && peekc(&lx, 1) == '/')) {
			while (peekc(&lx, 0) >= 0 && peekc(&lx, 0) != '\n')
				advance(&lx);
			continue;
		}
		if (isdigit(c)) {
			err = lex_number(&lx);
			continue;
		}
		if (isalpha(c) || c == '_') {
			err = lex_ident(&lx);
			continue;
		}
		if (c == '"') {
			err = lex_string(&lx);
			continue;
		}
		size_t i;

		for (i = 0; i < ARRAY_SIZE(ops); i++) {
			size_t l = strlen(ops[i].s);

			if (lx.pos + l <= lx.len && !memcmp(lx.s + lx.pos, ops[i].s, l))
				break;
		}
		if (i == ARRAY_SIZE(ops)) {
			err = lex_error_char(&lx, here(&lx), c);
			break;
		}
		struct token *t = push(&lx, ops[i].kind, here(&lx));

		if (!t)
			return -ENOMEM;
		for (size_t l = strlen(ops[i].s); l; l--)
			advance(&lx);
		t->loc.end = (int)lx.pos;
	}
	if (err)
		return err;
	/* End of query: point just past the last token, not at a blank
	 * line after it, so "expected X" lands where X should go. */
	struct loc eof = { 1, 1, 0, 0, 0 };

	if (lx.n) {
		const struct loc *l = &lx.toks[lx.n - 1].loc;

		eof = (struct loc){ l->line, l->col + (l->end - l->off),
				    l->end, l->end, l->end };
	}
	if (!push(&lx, T_EOF, eof))
		return -ENOMEM;
	*toks = lx.toks;
	*ntoks = lx.n;
	return 0;
}
