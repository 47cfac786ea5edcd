// SPDX-License-Identifier: MIT
/*
 * traces.bloom: a Bloom filter of the search terms of a trace's spans (the
 * format is in schema.sql), so a trace search skips the traces that cannot
 * match without reading their spans; and the write path's record of the
 * terms a transaction has already added to each of its traces.
 *
 * A trace's spans repeat most of their terms (the service and span names,
 * every tag key, many tag values: an SDK puts the same attributes on each
 * span of a request), and a term added twice sets the same bits.  So the
 * write path (sq_bloom_span_txn()) remembers, per trace of the
 * transaction, the terms it added with their strings, and adds a term it
 * has seen for that trace at the cost of a lookup, not of two FNV-1a
 * string hashes and up to four mixes.  The bits are those sq_bloom_span()
 * sets, bit for bit: stores written before this record read the same.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_int.h"
#include "store/store.h"

/* ---- traces.bloom --------------------------------------------------------
 *
 * A term is (kind, service, a, b) hashed to 64 bits; it sets two of the
 * SQ_BLOOM_BYTES * 8 bits.  Lower-case kinds are terms of one service
 * (what a query with serviceName asks), upper-case ones of any service:
 *   s  service                    n/N  span name          r/R remote service
 *   a/A  an annotation value or a tag key (a bare annotationQuery term)
 *   t/T  tag key=value
 */

#define BLOOM_BITS (SQ_BLOOM_BYTES * 8)

/* Each string is hashed once (FNV-1a); a term mixes the hashes of its
 * parts, each with a multiplier of its own (so ("ab", "c") and ("a",
 * "bc") differ), through murmur3's fmix64. */
static uint64_t hstr(struct zs_str s)
{
	const unsigned char *p = (const unsigned char *)s.p;
	uint64_t h = 0xcbf29ce484222325ull;
	uint32_t i = 0;

	/* FNV-1a byte by byte, four bytes a turn (the same hash: the bits
	 * are stored in traces.bloom) */
	for (; i + 4 <= s.len; i += 4) {
		h = (h ^ p[i]) * 0x100000001b3ull;
		h = (h ^ p[i + 1]) * 0x100000001b3ull;
		h = (h ^ p[i + 2]) * 0x100000001b3ull;
		h = (h ^ p[i + 3]) * 0x100000001b3ull;
	}
	for (; i < s.len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* Set the two bits of term (kind, svc, a, b) given ab, the a and b part of
 * its hash (term()). */
static inline void term_ab(uint8_t *bloom, char kind, uint64_t svc, uint64_t ab)
{
	uint64_t h = (uint64_t)(unsigned char)kind * 0x9e3779b97f4a7c15ull;
	unsigned i, j;

	if (kind >= 'a' && kind <= 'z')
		h += svc * 0xc2b2ae3d27d4eb4full;
	h += ab;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	i = (unsigned)(h % BLOOM_BITS);
	j = (unsigned)((h >> 32) % BLOOM_BITS);
	bloom[i / 8] |= (uint8_t)(1u << (i % 8));
	bloom[j / 8] |= (uint8_t)(1u << (j % 8));
}

static void term(uint8_t *bloom, char kind, uint64_t svc, uint64_t a, uint64_t b)
{
	term_ab(bloom, kind, svc, a * 0x165667b19e3779f9ull + b * 0x27d4eb2f165667c5ull);
}

/* A term in its per-service (lower-case kind) and any-service forms. */
static void term2(uint8_t *bloom, char kind, uint64_t svc, uint64_t a, uint64_t b)
{
	uint64_t ab = a * 0x165667b19e3779f9ull + b * 0x27d4eb2f165667c5ull;

	term_ab(bloom, kind, svc, ab);
	term_ab(bloom, (char)(kind - 'a' + 'A'), svc, ab);
}

void sq_bloom_span(uint8_t bloom[SQ_BLOOM_BYTES], const struct zspan *z)
{
	const uint64_t none = 0xcbf29ce484222325ull; /* hstr("") */
	uint64_t svc = hstr(z->local.service);

	term(bloom, 's', svc, none, none);
	if (z->name.len)
		term2(bloom, 'n', svc, hstr(z->name), none);
	if (z->remote.service.len)
		term2(bloom, 'r', svc, hstr(z->remote.service), none);
	for (uint32_t i = 0; i < z->nannotations; i++)
		term2(bloom, 'a', svc, hstr(z->annotations[i].value), none);
	for (uint32_t i = 0; i < z->ntags; i++) {
		uint64_t k = hstr(z->tags[i].key);

		term2(bloom, 'a', svc, k, none);
		term2(bloom, 't', svc, k, hstr(z->tags[i].value));
	}
}

static struct zs_str zs(const char *s)
{
	return (struct zs_str){ s ? s : "", s ? (uint32_t)strlen(s) : 0 };
}

unsigned sq_bloom_query(uint8_t mask[SQ_BLOOM_BYTES], const struct store_query *q)
{
	const uint64_t none = hstr(zs(NULL)), svc = hstr(zs(q->service));
	char up = q->service ? 0 : 'A' - 'a';
	unsigned n = 0;

	memset(mask, 0, SQ_BLOOM_BYTES);
	if (q->service)
		term(mask, 's', svc, none, none), n++;
	if (q->span_name)
		term(mask, (char)('n' + up), svc, hstr(zs(q->span_name)), none), n++;
	if (q->remote_service)
		term(mask, (char)('r' + up), svc, hstr(zs(q->remote_service)), none), n++;
	for (unsigned i = 0; i < q->naq; i++, n++) {
		uint64_t k = hstr(zs(q->aq[i].key));

		if (q->aq[i].value)
			term(mask, (char)('t' + up), svc, k, hstr(zs(q->aq[i].value)));
		else
			term(mask, (char)('a' + up), svc, k, none);
	}
	return n;
}

int sq_bloom_may(const void *b, size_t n, const uint8_t mask[SQ_BLOOM_BYTES])
{
	const uint8_t *p = b;

	if (n != SQ_BLOOM_BYTES)
		return 1; /* not a bloom we wrote: cannot rule anything out */
	for (size_t i = 0; i < SQ_BLOOM_BYTES; i++)
		if ((p[i] & mask[i]) != mask[i])
			return 0;
	return 1;
}

/* ---- the terms a transaction gave its traces ---------------------------- */

_Static_assert(sizeof(struct sq_term) == 64, "a term is one cache line");

/* The set's most slots (64 bytes each); full, it starts over. */
#define TS_MAX_SLOTS (64u << 10)

static inline uint64_t ld8(const void *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline uint64_t ld4(const void *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* What of s goes into its lookup hash (not the filter's hash): its first
 * and last eight bytes, or fewer, in a few loads whatever its length (the
 * strings themselves are compared). */
static inline uint64_t sample(struct zs_str s)
{
	const unsigned char *p = (const unsigned char *)s.p;
	uint32_t n = s.len;

	if (n >= 8)
		return ld8(p) + ld8(p + n - 8) * 0x9e3779b97f4a7c15ull;
	if (n >= 4)
		return ld4(p) | ld4(p + n - 4) << 32;
	if (n)
		return p[0] | (uint64_t)p[n / 2] << 8 | (uint64_t)p[n - 1] << 16;
	return 0;
}

/* Are the n bytes at a and b the same?  Eight or four bytes a turn. */
static inline int same(const char *a, const char *b, uint32_t n)
{
	if (n >= 8) {
		for (uint32_t i = 0; i + 8 < n; i += 8)
			if (ld8(a + i) != ld8(b + i))
				return 0;
		return ld8(a + n - 8) == ld8(b + n - 8);
	}
	if (n >= 4)
		return ld4(a) == ld4(b) && ld4(a + n - 4) == ld4(b + n - 4);
	for (uint32_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

/* Double the slots (or empty them at TS_MAX_SLOTS).  0 or -ENOMEM. */
static int ts_grow(struct sq_termset *s)
{
	size_t nslot = s->nslot ? s->nslot * 2 : 1024;
	struct sq_term *v;

	if (nslot > TS_MAX_SLOTS) {
		sq_termset_reset(s);
		return 0;
	}
	v = calloc(nslot, sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (!s->gen)
		s->gen = 1; /* calloc's slots are of generation 0 */
	for (size_t j = 0; j < s->nslot; j++) {
		size_t i;

		if (s->v[j].gen != s->gen)
			continue;
		for (i = s->v[j].h & (nslot - 1); v[i].gen == s->gen; i = (i + 1) & (nslot - 1))
			;
		v[i] = s->v[j];
	}
	free(s->v);
	s->v = v;
	s->nslot = nslot;
	return 0;
}

/*
 * Was term (kind, svc, x, y) given to trace ti in this transaction?  1:
 * yes, its bits are set.  0: no; it is recorded now, and the caller sets
 * its bits (also when it cannot be recorded: strings too long to keep,
 * no memory).
 */
__attribute__((always_inline))
static inline int ts_seen(struct sq_termset *s, uint32_t ti, char kind, uint64_t svc,
			  struct zs_str x, struct zs_str y)
{
	struct sq_term *e;
	uint64_t h;
	size_t i;

	if (x.len + y.len > sizeof(e->str))
		return 0;
	if ((s->n + 1) * 2 > s->nslot && ts_grow(s))
		return 0;
	h = svc ^ ((uint64_t)ti << 8 | (uint64_t)x.len << 40 | (uint64_t)y.len << 48 |
		   (unsigned char)kind);
	h = (h ^ sample(x)) * 0xff51afd7ed558ccdull;
	h ^= h >> 32;
	h = (h ^ sample(y)) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	for (i = h & (s->nslot - 1); (e = &s->v[i])->gen == s->gen; i = (i + 1) & (s->nslot - 1))
		if (e->h == h && e->ti == ti && e->svc == svc && e->kind == kind &&
		    e->xlen == x.len && e->ylen == y.len && same(e->str, x.p, x.len) &&
		    same(e->str + x.len, y.p, y.len))
			return 1;
	e->h = h;
	e->gen = s->gen;
	e->svc = svc;
	e->ti = ti;
	e->kind = kind;
	e->xlen = (uint8_t)x.len;
	e->ylen = (uint8_t)y.len;
	if (x.len)
		memcpy(e->str, x.p, x.len);
	if (y.len)
		memcpy(e->str + x.len, y.p, y.len);
	s->n++;
	return 0;
}

/* hstr() of a span's service, the last one's kept (spans of a batch
 * mostly share their service). */
static uint64_t svc_hash(struct sq_termset *s, struct zs_str v)
{
	if (s->svc_ok && v.len == s->svc_len && same(s->svc, v.p, v.len))
		return s->svc_h;
	s->svc_h = hstr(v);
	s->svc_ok = v.len <= sizeof(s->svc);
	if (s->svc_ok) {
		s->svc_len = v.len;
		if (v.len)
			memcpy(s->svc, v.p, v.len);
	}
	return s->svc_h;
}

unsigned sq_bloom_span_txn(struct sq_termset *s, uint32_t ti, uint8_t bloom[SQ_BLOOM_BYTES],
			   const struct zspan *z)
{
	const uint64_t none = 0xcbf29ce484222325ull; /* hstr("") */
	const struct zs_str e = { "", 0 };
	uint64_t svc = svc_hash(s, z->local.service);
	unsigned n = 1;

	term(bloom, 's', svc, none, none);
	if (z->name.len && !ts_seen(s, ti, 'n', svc, z->name, e))
		term2(bloom, 'n', svc, hstr(z->name), none), n++;
	if (z->remote.service.len && !ts_seen(s, ti, 'r', svc, z->remote.service, e))
		term2(bloom, 'r', svc, hstr(z->remote.service), none), n++;
	for (uint32_t i = 0; i < z->nannotations; i++)
		if (!ts_seen(s, ti, 'a', svc, z->annotations[i].value, e))
			term2(bloom, 'a', svc, hstr(z->annotations[i].value), none), n++;
	for (uint32_t i = 0; i < z->ntags; i++) {
		uint64_t k;

		/* a tag is two terms: its key ('a') and key=value ('t') */
		if (ts_seen(s, ti, 't', svc, z->tags[i].key, z->tags[i].value))
			continue;
		k = hstr(z->tags[i].key);
		term2(bloom, 'a', svc, k, none);
		term2(bloom, 't', svc, k, hstr(z->tags[i].value));
		n += 2;
	}
	return n;
}

void sq_termset_reset(struct sq_termset *s)
{
	if (s->n && !++s->gen) {
		/* once in 2^32 transactions: slots of generation 1 again */
		memset(s->v, 0, s->nslot * sizeof(*s->v));
		s->gen = 1;
	}
	s->n = 0;
}

void sq_termset_free(struct sq_termset *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}
