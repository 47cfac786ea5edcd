// SPDX-License-Identifier: MIT
/*
 * libfay: the W3C Trace Context "traceparent" header value,
 *
 *   version "-" trace-id "-" parent-id "-" trace-flags
 *   00      -   32 hex   -   16 hex    -   2 hex          (55 chars)
 *
 * written in lower case.  Read as the recommendation says: lower-case hex
 * only, trace and parent ids not all zeros, version ff invalid; version 00
 * is exactly 55 characters; a later version may be longer, and then the
 * 56th character must be '-', and its first 55 are read as version 00.
 * Optional white space around the value (HTTP OWS) is ignored.
 */
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "lib/libfay.h"

#define TP_LEN 55

static int lohex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Two lower-case hex digits at s (the version, the flags): their value,
 * or -1.  Both digits are looked at before one test (no loop). */
static inline int hex2(const char *s)
{
	int a = lohex(s[0]), b = lohex(s[1]);

	return (a | b) < 0 ? -1 : a << 4 | b;
}

#ifdef __SSE2__
/* 16 lower-case hex digits at s into *v, all 16 at once with SSE2 (always
 * there on x86-64): about 25 instructions, where two 8-digit words (SWAR,
 * below) took ~90.  A byte is a digit when it is in '0'..'9' or 'a'..'f'
 * (signed compares: bytes >= 0x80 are negative, never digits).  0 or
 * -EINVAL. */
static inline int get_hex16(const char *s, uint64_t *v)
{
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
	__m128i dig = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)),
				    _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
	__m128i let = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('a' - 1)),
				    _mm_cmplt_epi8(x, _mm_set1_epi8('f' + 1)));
	__m128i n, w;

	if (_mm_movemask_epi8(_mm_or_si128(dig, let)) != 0xffff)
		return -EINVAL;
	/* each byte's digit: its low nibble, + 9 for a letter */
	n = _mm_add_epi8(_mm_and_si128(x, _mm_set1_epi8(0x0f)),
			 _mm_and_si128(let, _mm_set1_epi8(9)));
	/* each pair of bytes (the first the higher digit) into one byte;
	 * byte 0 is then the most significant of the 8 */
	w = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(n, _mm_set1_epi16(0x00ff)), 4),
			 _mm_srli_epi16(n, 8));
	w = _mm_packus_epi16(w, w);
	*v = __builtin_bswap64((uint64_t)_mm_cvtsi128_si64(w));
	return 0;
}
#else
/* 8 lower-case hex digits at s into *v, 8 at a time in one word (SWAR):
 * the per-digit loop above took ~420 instructions for a traceparent's 48
 * id digits.  A byte is a digit when its high bit is clear, it is >= '0'
 * and < ':', or >= 'a' and < 'g' (each compare: add 0x80 - bound, whose
 * high bit is then set iff byte >= bound; bytes < 0x80 never carry into
 * the next one).  0 or -EINVAL. */
#define ONES UINT64_C(0x0101010101010101)
#define HIGH UINT64_C(0x8080808080808080)
static inline int get_hex8(const char *s, uint32_t *v)
{
	uint64_t x, ge0, ge9, gea, gef, n;

	memcpy(&x, s, 8);
	if (x & HIGH)
		return -EINVAL;
	ge0 = x + ONES * (0x80 - '0');
	ge9 = x + ONES * (0x80 - '9' - 1);
	gea = x + ONES * (0x80 - 'a');
	gef = x + ONES * (0x80 - 'f' - 1);
	if ((((ge0 & ~ge9) | (gea & ~gef)) & HIGH) != HIGH)
		return -EINVAL;
	/* the digit's value in each byte: low nibble, +9 for a letter */
	n = (x & ONES * 0x0f) + 9 * ((x >> 6) & ONES);
	/* byte 0 is the most significant digit: pair bytes, then halves */
	n = ((n << 4) | (n >> 8)) & UINT64_C(0x00ff00ff00ff00ff);
	n = ((n << 8) | (n >> 16)) & UINT64_C(0x0000ffff0000ffff);
	n = ((n << 16) | (n >> 32)) & UINT64_C(0xffffffff);
	*v = (uint32_t)n;
	return 0;
}

/* 16 lower-case hex digits at s into *v.  0 or -EINVAL. */
static inline int get_hex16(const char *s, uint64_t *v)
{
	uint32_t a, b;

	if (get_hex8(s, &a) || get_hex8(s + 8, &b))
		return -EINVAL;
	*v = (uint64_t)a << 32 | b;
	return 0;
}
#endif

#ifdef __SSE2__
/* The NULs of the aligned 16-byte block at a, as bits. */
__attribute__((no_sanitize_address)) static inline unsigned nuls16(const char *a)
{
	return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
		_mm_load_si128((const __m128i *)(const void *)a), _mm_setzero_si128()));
}

/* Is s exactly TP_LEN (55) characters long?  Reads s's aligned 16-byte
 * blocks up to the one that holds its NUL, as glibc's strlen does: an
 * aligned block is in one page (never a fault), and Valgrind's memcheck
 * takes the bytes before s and after the NUL in them for partial loads;
 * ASan would take them for overflows, hence no instrumentation.  Straight
 * line, the branches always the same way for a good header: ~25
 * instructions, where strnlen(s, 4096) took ~50. */
__attribute__((no_sanitize_address)) static inline int is_len55(const char *s)
{
	const char *a = (const char *)((uintptr_t)s & ~(uintptr_t)15);
	unsigned skip = (unsigned)(s - a), m;

	/* block i holds s[16 i - skip .. 16 i + 15 - skip]; each is read
	 * only when the blocks before it had no NUL (the string reaches it) */
	if (nuls16(a) >> skip)
		return 0;
	if (nuls16(a + 16))
		return 0;
	if (nuls16(a + 32))
		return 0;               /* a NUL in s[0 .. 47 - skip] */
	m = nuls16(a + 48);
	if (m)
		return (unsigned)__builtin_ctz(m) + 48 - skip == TP_LEN;
	if (skip <= 8)
		return 0;               /* none in s[0 .. 63 - skip], past s[55] */
	m = nuls16(a + 64);
	return m && (unsigned)__builtin_ctz(m) + 64 - skip == TP_LEN;
}
#else
static inline int is_len55(const char *s)
{
	return strnlen(s, TP_LEN + 1) == TP_LEN;
}
#endif

/*
 * Parse a traceparent value.  Fills the ids and the flags byte.  Returns 0
 * or -EINVAL (NULL, wrong length, a non-hex or upper-case digit, a missing
 * dash, all-zero ids, version ff).
 */
int lib_tp_parse(const char *tp, uint64_t *hi, uint64_t *lo, uint64_t *span,
		 uint8_t *flags)
{
	int ver, f;
	size_t len;

	if (!tp)
		return -EINVAL;
	if (likely(tp[0] == '0' && is_len55(tp))) {
		len = TP_LEN;   /* the common case: no white space around */
	} else {
		while (*tp == ' ' || *tp == '\t')
			tp++;
		len = strnlen(tp, 4096);
		while (len && (tp[len - 1] == ' ' || tp[len - 1] == '\t'))
			len--;
		if (len < TP_LEN)
			return -EINVAL;
	}
	ver = hex2(tp);
	if (ver < 0 || ver == 0xff)
		return -EINVAL;
	if (ver == 0 && len != TP_LEN)
		return -EINVAL;
	if (len > TP_LEN && tp[TP_LEN] != '-')
		return -EINVAL;
	if (tp[2] != '-' || tp[35] != '-' || tp[52] != '-')
		return -EINVAL;
	f = hex2(tp + 53);
	if (get_hex16(tp + 3, hi) || get_hex16(tp + 19, lo) ||
	    get_hex16(tp + 36, span) || f < 0)
		return -EINVAL;
	if ((!*hi && !*lo) || !*span)
		return -EINVAL;
	*flags = (uint8_t)f;
	return 0;
}

static void put_hex(char *out, uint64_t v, unsigned n)
{
	static const char d[] = "0123456789abcdef";

	for (unsigned i = n; i > 0; i--, v >>= 4)
		out[i - 1] = d[v & 15];
}

#ifdef __SSE2__
/* v as 16 lower-case hex digits at out, all at once with SSE2: ~15
 * instructions without a branch, where put_hex() takes a loop of 16
 * (~100 instructions).  The bytes of v, most significant first, are
 * split into high and low nibbles, interleaved (digit order), and each
 * nibble n becomes '0' + n, + 39 more for n > 9 ('a' - '0' - 10). */
static inline void put_hex16(char *out, uint64_t v)
{
	__m128i x = _mm_cvtsi64_si128((long long)__builtin_bswap64(v));
	__m128i lo = _mm_and_si128(x, _mm_set1_epi8(0x0f));
	__m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), _mm_set1_epi8(0x0f));
	__m128i n = _mm_unpacklo_epi8(hi, lo);
	__m128i letter = _mm_and_si128(_mm_cmpgt_epi8(n, _mm_set1_epi8(9)),
				       _mm_set1_epi8('a' - '0' - 10));

	_mm_storeu_si128((__m128i *)(void *)out,
			 _mm_add_epi8(_mm_add_epi8(n, _mm_set1_epi8('0')), letter));
}
#else
static inline void put_hex16(char *out, uint64_t v)
{
	put_hex(out, v, 16);
}
#endif

/* Write "00-<trace>-<span>-<flags>" and a NUL.  Returns 55 or -ENOSPC. */
int lib_tp_format(char *buf, size_t len, uint64_t hi, uint64_t lo,
		  uint64_t span, uint8_t flags)
{
	if (len < TP_LEN + 1)
		return -ENOSPC;
	/* the three 16-digit stores do not reach the dashes */
	put_hex16(buf + 3, hi);
	put_hex16(buf + 19, lo);
	put_hex16(buf + 36, span);
	buf[0] = '0';
	buf[1] = '0';
	buf[2] = '-';
	buf[35] = '-';
	buf[52] = '-';
	put_hex(buf + 53, flags, 2);
	buf[TP_LEN] = '\0';
	return TP_LEN;
}
