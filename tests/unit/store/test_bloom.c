// SPDX-License-Identifier: MIT
/*
 * The write path's Bloom filters (src/store/sqlite_bloom.c):
 * sq_bloom_span_txn(), which skips the terms a transaction already gave a
 * trace, sets exactly the bits of sq_bloom_span() on every trace, for
 * spans that repeat and vary their names, services, annotations and tags,
 * strings short and too long to remember, through the set's growth and
 * its starting over when full; and it does skip the repeated terms.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_int.h"
#include "test.h"

#define NTRACE 8

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* Strings a span picks from: repeated short ones, an empty one, one of
 * exactly the length a term keeps (41 bytes with its key), long ones. */
static const char *const pool[] = {
	"", "GET", "200", "http.method", "http.status_code", "cache.hit", "true",
	"otel.scope.name", "io.opentelemetry.http", "checkout", "cart", "db",
	"0123456789012345678901234567890123456789", /* 40 */
	"https://shop.example/api/cart/17?x=1&y=2&z=3&session=abcdef",
	"retry: {\"attempt\":2}", "a", "ab", "abcdefgh", "abcdefghi",
};
#define NPOOL (sizeof(pool) / sizeof(pool[0]))

static char uniq[4096][24]; /* strings seen once (the set fills up) */

static struct zs_str pick(int unique_ok)
{
	const char *p;

	if (unique_ok && !rnd(3)) {
		p = uniq[rnd(4096)];
	} else {
		p = pool[rnd(NPOOL)];
	}
	return (struct zs_str){ p, (uint32_t)strlen(p) };
}

static void make_span(struct zspan *z, struct zs_tag *tags, struct zs_annotation *an,
		      int unique_ok)
{
	static const char *const svcs[] = { "checkout", "cart", "", "a-service-name-longer-than-sixty-four-bytes-to-not-be-kept-at-all-x" };
	const char *svc = svcs[rnd(4)];

	memset(z, 0, sizeof(*z));
	z->local.service = (struct zs_str){ svc, (uint32_t)strlen(svc) };
	z->name = pick(0);
	if (!rnd(4))
		z->remote.service = pick(0);
	z->nannotations = rnd(3);
	for (uint32_t i = 0; i < z->nannotations; i++)
		an[i].value = pick(unique_ok);
	z->annotations = an;
	z->ntags = rnd(12);
	for (uint32_t i = 0; i < z->ntags; i++) {
		tags[i].key = pick(0);
		tags[i].value = pick(unique_ok);
	}
	z->tags = tags;
}

/* The terms sq_bloom_span() hashes for z. */
static unsigned long terms_of(const struct zspan *z)
{
	return 1 + !!z->name.len + !!z->remote.service.len + z->nannotations + 2ul * z->ntags;
}

/* n spans over NTRACE traces in transactions of txn spans; every trace's
 * filter compared after each span.  Returns the terms hashed; *all: the
 * terms sq_bloom_span() hashed. */
static unsigned long run(int n, int txn, int unique_ok, int *same, unsigned long *all)
{
	static uint8_t want[NTRACE][SQ_BLOOM_BYTES], got[NTRACE][SQ_BLOOM_BYTES];
	struct sq_termset s = { 0 };
	struct zs_tag tags[16];
	struct zs_annotation an[4];
	unsigned long hashed = 0;
	struct zspan z;

	*same = 1;
	*all = 0;
	memset(want, 0, sizeof(want));
	memset(got, 0, sizeof(got));
	for (int i = 0; i < n; i++) {
		uint32_t ti = rnd(NTRACE);

		if (i && txn && i % txn == 0) {
			/* a new transaction: its traces' filters come from
			 * their rows (here: kept as they were) */
			sq_termset_reset(&s);
		}
		make_span(&z, tags, an, unique_ok);
		sq_bloom_span(want[ti], &z);
		hashed += sq_bloom_span_txn(&s, ti, got[ti], &z);
		*all += terms_of(&z);
		if (memcmp(want[ti], got[ti], SQ_BLOOM_BYTES)) {
			*same = 0;
			diag("span %d, trace %u: the filters differ", i, ti);
			break;
		}
	}
	sq_termset_free(&s);
	return hashed;
}

int main(void)
{
	unsigned long hashed, all;
	int same;

	for (int i = 0; i < 4096; i++)
		snprintf(uniq[i], sizeof(uniq[i]), "u%d-%x", i, i * 2654435761u);

	hashed = run(20000, 0, 0, &same, &all);
	ok(same, "one transaction, repeated strings: the same bits as sq_bloom_span()");
	/* the strings too long to keep (a 40-byte value with its key, a
	 * URL) are hashed every time */
	ok(hashed * 3 < all, "... and most terms are not hashed again (%lu of %lu)",
	   hashed, all);

	hashed = run(20000, 100, 1, &same, &all);
	ok(same, "transactions of 100 spans, strings seen once: the same bits (%lu of %lu "
	   "terms hashed)", hashed, all);

	hashed = run(300000, 0, 1, &same, &all);
	ok(same, "one transaction past the set's size (it starts over): the same bits "
	   "(%lu of %lu terms hashed)", hashed, all);

	{
		struct sq_termset s = { 0 };
		uint8_t b[SQ_BLOOM_BYTES] = { 0 };
		struct zs_tag t[2] = { { ZS_STR("http.method"), ZS_STR("GET") },
				       { ZS_STR("http.method"), ZS_STR("POST") } };
		struct zspan z = { .local.service = ZS_STR("svc"), .name = ZS_STR("op"),
				   .tags = t, .ntags = 1 };

		is_int(sq_bloom_span_txn(&s, 0, b, &z), 4, "first span: service, name, "
		       "tag key and key=value hashed");
		is_int(sq_bloom_span_txn(&s, 0, b, &z), 1, "the same span again: the service only");
		is_int(sq_bloom_span_txn(&s, 1, b, &z), 4, "another trace: all again");
		z.tags = t + 1;
		is_int(sq_bloom_span_txn(&s, 0, b, &z), 3, "another value of the key: its terms");
		z.local.service = (struct zs_str)ZS_STR("svd");
		z.tags = t;
		is_int(sq_bloom_span_txn(&s, 0, b, &z), 4, "another service: all again");
		sq_termset_reset(&s);
		z.local.service = (struct zs_str)ZS_STR("svc");
		is_int(sq_bloom_span_txn(&s, 0, b, &z), 4, "after a reset: all again");
		is_int(sq_bloom_span_txn(&s, 0, b, &z), 1, "... once");
		s.gen = 0xffffffffu; /* the 2^32nd transaction */
		is_int(sq_bloom_span_txn(&s, 0, b, &z), 4, "a set of generation 2^32-1: all again");
		sq_termset_reset(&s);
		is_int(sq_bloom_span_txn(&s, 0, b, &z), 4, "after its reset (the generation "
		       "wraps, the slots are cleared): all again");
		is_int(sq_bloom_span_txn(&s, 0, b, &z), 1, "... once");
		sq_termset_free(&s);
	}
	return test_done();
}
