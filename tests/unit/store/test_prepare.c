// SPDX-License-Identifier: MIT
/*
 * store__prepare() (src/store/sqlite_prep.c): the same batches written
 * into two SQLite stores, prepared into one and not into the other, leave
 * the same bytes: every traces row (its Bloom filter bit for bit) and
 * every span_rows row (its extra blob byte for byte).  The batches
 * interleave traces, repeat and vary services, names, annotations and
 * tags (strings short and too long for the term set), have spans with
 * neither (no blob), extend a trace stored before, and fill a trace to
 * its 2^20 spans in the middle of a batch (the spans beyond are dropped:
 * their terms must not reach the filter); one store__write() mixes a
 * prepared batch with one that is not.  And the preparation is real: a
 * prepared span's bits leave out terms an earlier span of its trace in
 * the batch gave, and its blob is the one the writer would encode.
 */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/sqlite_int.h"
#include "store/store.h"
#include "test.h"

#define NSPAN 600
#define NTRACE 7

static uint32_t rnd(uint32_t n)
{
	return (uint32_t)(test_xorshift() % n);
}

/* Strings repeated (short, 40 bytes: too long for the term set, longer),
 * an empty one, and 64 seen rarely. */
static const char *const pool[] = {
	"", "POST", "503", "rpc.system", "rpc.method", "net.peer.name", "false",
	"db.statement", "SELECT * FROM carts WHERE id = ?", "payment", "db",
	"abcdefghijklmnopqrstuvwxyzabcdefghijklmn",
	"grpc://inventory.internal:50051/inventory.v1.Stock/Reserve",
	"x", "xy", "12345678", "123456789",
};
#define NPOOL (sizeof(pool) / sizeof(pool[0]))

static char uniq[64][16];

static struct zs_str pick(void)
{
	const char *p = rnd(4) ? pool[rnd(NPOOL)] : uniq[rnd(64)];

	return (struct zs_str){ p, (uint32_t)strlen(p) };
}

static struct zs_str zs(const char *s)
{
	return (struct zs_str){ s, (uint32_t)strlen(s) };
}

static struct zspan spans[NSPAN];
static struct zs_tag tags[NSPAN][10];
static struct zs_annotation ans[NSPAN][3];

/* Span k of trace lo: services, names, tags and annotations at random
 * (a third with none of either). */
static void make_span(size_t k, uint64_t lo, uint64_t id)
{
	static const char *const svcs[] = { "checkout", "cart", "frontend" };
	struct zspan *z = &spans[k];

	memset(z, 0, sizeof(*z));
	z->trace_hi = 0x2222;
	z->trace_lo = lo;
	z->id = id;
	z->parent_id = rnd(3) ? 1 : 0;
	z->kind = SPAN_KIND_SERVER;
	z->timestamp_us = 1700000000000000ull + k * 10;
	z->duration_us = 5 + rnd(100);
	z->error = !rnd(9);
	z->local.service = zs(svcs[rnd(3)]);
	z->name = pick();
	if (!rnd(4))
		z->remote.service = pick();
	if (rnd(3)) {
		z->nannotations = rnd(3);
		for (uint32_t i = 0; i < z->nannotations; i++)
			ans[k][i] = (struct zs_annotation){ z->timestamp_us + i, pick() };
		z->ntags = rnd(10);
		for (uint32_t i = 0; i < z->ntags; i++)
			tags[k][i] = (struct zs_tag){ pick(), pick() };
	}
	z->annotations = ans[k];
	z->tags = tags[k];
}

/* Every row of traces and span_rows of the file p as text (blobs in
 * hex); NULL when it cannot be read.  Free it. */
static char *dump(const char *p)
{
	static const char *const q[] = { "SELECT * FROM traces ORDER BY seq",
					 "SELECT * FROM span_rows ORDER BY seq_no" };
	sqlite3 *db = NULL;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f || sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		if (f)
			fclose(f);
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < 2; i++) {
		sqlite3_stmt *s = NULL;

		if (sqlite3_prepare_v2(db, q[i], -1, &s, NULL) != SQLITE_OK) {
			diag("%s: %s", q[i], sqlite3_errmsg(db));
			continue;
		}
		while (sqlite3_step(s) == SQLITE_ROW) {
			for (int c = 0; c < sqlite3_column_count(s); c++) {
				const unsigned char *b = sqlite3_column_blob(s, c);
				int n = sqlite3_column_bytes(s, c);

				fprintf(f, "%d:", sqlite3_column_type(s, c));
				for (int j = 0; j < n; j++)
					fprintf(f, "%02x", b[j]);
				fputc(c + 1 < sqlite3_column_count(s) ? '|' : '\n', f);
			}
		}
		sqlite3_finalize(s);
		fputs("--\n", f);
	}
	sqlite3_close(db);
	fclose(f);
	return out;
}

/* Trace lo's next span number set to no, in the file p.  SQLite rc. */
static int set_next_no(const char *p, uint64_t lo, int64_t no)
{
	char sql[128];
	sqlite3 *db = NULL;
	int rc;

	snprintf(sql, sizeof(sql), "UPDATE traces SET next_no = %" PRId64 " WHERE trace_lo = %"
		 PRIu64, no, lo);
	rc = sqlite3_open(p, &db) ?: sqlite3_exec(db, sql, NULL, NULL, NULL);
	if (rc)
		diag("%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
	return rc;
}

static unsigned bits(const uint8_t *b)
{
	unsigned n = 0;

	for (size_t i = 0; i < SQ_BLOOM_BYTES; i++)
		n += (unsigned)__builtin_popcount(b[i]);
	return n;
}

/* Is what store__prepare() made of b what the writer would make: each
 * blob sq_extra_encode()'s, each span's bits within sq_bloom_span()'s?
 * And how many spans left out some of their own terms' bits. */
static void check_prep(const struct store_batch *b, size_t *fewer, size_t *bad)
{
	const struct store_prep *p = b->prep;
	struct sq_buf x = { 0 };

	for (size_t i = 0; i < b->nspans; i++) {
		uint8_t full[SQ_BLOOM_BYTES] = { 0 };

		if (sq_extra_encode(&x, &b->spans[i]) || x.len != p->extra_len[i] ||
		    (x.len && memcmp(x.p, p->extra[i], x.len)))
			(*bad)++;
		sq_bloom_span(full, &b->spans[i]);
		for (size_t j = 0; j < SQ_BLOOM_BYTES; j++)
			if (p->bloom[i][j] & ~full[j])
				(*bad)++;
		*fewer += bits(p->bloom[i]) < bits(full);
	}
	free(x.p);
}

/* Write the batches of the test into the store at p, prepared or not. */
static void write_all(const char *p, int prepared)
{
	struct zarena a = { 0 };
	struct store_batch b1 = { 0 }, b2 = { 0 }, b3 = { 0 }, f0 = { 0 };
	struct store_batch *bp[2];
	struct zspan first = spans[0];
	const char *how = prepared ? "prepared" : "unprepared";
	char err[400];
	struct store *st = store__open(p, 0, err, sizeof(err));

	ok(st != NULL, "%s: a new store opens: %s", how, st ? p : err);
	if (!st)
		return;
	/* trace 1's first span and the trace to be filled, stored before */
	first.id = 999;
	f0.spans = &first;
	f0.nspans = 1;
	bp[0] = &f0;
	is_int(store__write(st, bp, 1, err, sizeof(err)), 0, "%s: a span stored before", how);
	first.trace_lo = 50;
	is_int(store__write(st, bp, 1, err, sizeof(err)), 0, "%s: trace 50's first span", how);
	store__close(st);
	is_int(set_next_no(p, 50, (1 << 20) - 3), SQLITE_OK,
	       "%s: trace 50's next number set to 2^20 - 3", how);
	st = store__open(p, 0, err, sizeof(err));
	if (!st)
		return;

	/* batch 1: spans 0..399 of NTRACE traces interleaved, trace 50's
	 * spans among them (3 fit, the rest dropped) */
	b1.spans = spans;
	b1.nspans = 400;
	b2.spans = spans + 400;
	b2.nspans = 150;
	b3.spans = spans + 550;
	b3.nspans = NSPAN - 550;
	if (prepared) {
		size_t fewer = 0, bad = 0;

		is_int(store__prepare(st, &b1, &a), 0, "prepared: batch 1 prepared");
		ok(b1.prep != NULL, "prepared: batch 1 has its preparation");
		is_int(store__prepare(st, &b3, &a), 0, "prepared: batch 3 prepared");
		if (!b1.prep || !b3.prep)
			goto out;
		check_prep(&b1, &fewer, &bad);
		check_prep(&b3, &fewer, &bad);
		is_int((int)bad, 0, "prepared: blobs as the writer encodes them, bits within each"
		       " span's own");
		ok(fewer > 50, "prepared: %zu spans leave out terms an earlier span of their"
		   " trace gave", fewer);
	}
	bp[0] = &b1;
	is_int(store__write(st, bp, 1, err, sizeof(err)), 0, "%s: batch 1 written", how);
	is_int((int)b1.dropped, 5, "%s: batch 1: trace 50's 5 spans beyond 2^20 dropped", how);
	/* batches 2 (never prepared) and 3 in one transaction */
	bp[0] = &b2;
	bp[1] = &b3;
	is_int(store__write(st, bp, 2, err, sizeof(err)), 0, "%s: batches 2 and 3 written", how);
out:
	store__close(st);
	zarena_reset(&a);
}

int main(void)
{
	char dir[64] = "/tmp/fay-prep-test.XXXXXX", pp[128], pu[128], cmd[160];
	char *dp, *du;
	size_t k = 0;

	if (!mkdtemp(dir))
		skip_all("no temp dir");
	for (size_t i = 0; i < 64; i++)
		snprintf(uniq[i], sizeof(uniq[i]), "u%zu", i * 7919);
	/* trace 50 (to be full): spans 20, 40, ... 160 of batch 1, each with
	 * tags no other span has */
	for (k = 0; k < NSPAN; k++) {
		uint64_t lo = 1 + rnd(NTRACE);

		make_span(k, lo, 1000 + k);
		if (k < 400 && k && k % 20 == 0 && k <= 160) {
			static char own[8][2][16];
			size_t j = k / 20 - 1;

			spans[k].trace_lo = 50;
			snprintf(own[j][0], 16, "only.%zu", j);
			snprintf(own[j][1], 16, "v%zu", j);
			tags[k][0] = (struct zs_tag){ zs(own[j][0]), zs(own[j][1]) };
			spans[k].ntags = 1;
			spans[k].name = zs(own[j][0]);
		}
	}
	snprintf(pp, sizeof(pp), "%s/prepared.db", dir);
	snprintf(pu, sizeof(pu), "%s/unprepared.db", dir);
	write_all(pp, 1);
	write_all(pu, 0);
	dp = dump(pp);
	du = dump(pu);
	ok(dp && du && strlen(dp) > 10000, "both stores read back (%zu bytes of rows)",
	   dp ? strlen(dp) : 0);
	if (dp && du && strcmp(dp, du)) {
		size_t i = 0, row = 0;

		while (dp[i] == du[i])
			i++;
		for (size_t j = 0; j < i; j++)
			row += dp[j] == '\n';
		i = i > 40 ? i - 40 : 0;
		diag("row %zu differs: prepared   ...%.100s", row + 1, dp + i);
		diag("                 unprepared ...%.100s", du + i);
	}
	ok(dp && du && !strcmp(dp, du), "traces and span_rows: the same bytes, prepared or not");
	free(dp);
	free(du);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		diag("cleanup failed");
	return test_done();
}
