// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's RowBinary rows (src/store/ch_row.c): a span
 * written by ch_put_span() reads back field for field with ch_get_span()
 * (after the day column, which only inserts carry), empty arrays
 * included; a truncated row or Nested arrays of different sizes are an
 * error, never a span read past the end.  The same bytes are what
 * ClickHouse reads and sends (tests/integration/store_conformance.sh).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "store/ch_int.h"
#include "test.h"

static struct zspan sample(struct zs_annotation *an, struct zs_tag *tg)
{
	struct zspan z = {
		.trace_hi = 0x463ac35c9f6413adull, .trace_lo = 0x48485a3953bb6124ull,
		.id = 0xa2fb4a1d1a96d312ull, .parent_id = 0x20000000000001ull,
		.name = ZS_STR("get /users"), .kind = 2, .shared = 1, .debug = 1,
		.error = 0, .timestamp_us = 1795674959000000ull, .duration_us = 207000,
		.local = { .service = ZS_STR("frontend"), .ipv4 = "192.168.99.1", .port = 8080 },
		.remote = { .service = ZS_STR("browser"), .ipv6 = "2001:db8::c001", .port = 55123 },
	};

	an[0] = (struct zs_annotation){ 1795674959000010ull, ZS_STR("ws") };
	an[1] = (struct zs_annotation){ 1795674959000050ull, ZS_STR("wr") };
	tg[0] = (struct zs_tag){ ZS_STR("http.path"), ZS_STR("/api") };
	tg[1] = (struct zs_tag){ ZS_STR("n"), ZS_STR("") };
	tg[2] = (struct zs_tag){ ZS_STR("tab\there"), ZS_STR("new\nline") };
	z.annotations = an;
	z.nannotations = 2;
	z.tags = tg;
	z.ntags = 3;
	return z;
}

static int str_is(struct zs_str s, struct zs_str want)
{
	return s.len == want.len && !memcmp(s.p, want.p, s.len);
}

/* Skip the Date column ch_put_span() writes first. */
static void skip_day(struct rbuf *r)
{
	rbuf_get(r, 2, "day");
}

static void roundtrip(void)
{
	struct zs_annotation an[2];
	struct zs_tag tg[3];
	struct zspan z = sample(an, tg), got;
	struct ch_key k = { z.trace_hi, z.trace_lo, z.id, 1, 77, 5, 3, 123456 }, gk;
	struct wbuf w = { 0 };
	struct zarena a = { 0 };
	struct rbuf r;

	ch_put_span(&w, &k, &z);
	ok(!w.err && w.len > 2, "a span row written (%zu bytes)", w.len);
	is_int(ch_day(z.timestamp_us), 1795674959 / 86400, "its day is its start's");
	rbuf_init(&r, w.p, w.len);
	skip_day(&r);
	is_int(ch_get_span(&r, &a, &gk, &got), 0, "read back");
	ok(rbuf_done(&r), "to the last byte");
	ok(gk.trace_hi == k.trace_hi && gk.trace_lo == k.trace_lo && gk.id == k.id &&
	   gk.origin == 1 && gk.src == 77 && gk.seq == 5 && gk.no == 3 && gk.ver == 123456,
	   "the key");
	ok(got.trace_hi == z.trace_hi && got.trace_lo == z.trace_lo && got.id == z.id &&
	   got.parent_id == z.parent_id, "ids");
	ok(str_is(got.name, z.name) && got.kind == 2 && got.shared && got.debug && !got.error,
	   "name, kind, flags");
	ok(got.timestamp_us == z.timestamp_us && got.duration_us == z.duration_us, "times");
	ok(str_is(got.local.service, z.local.service) && !strcmp(got.local.ipv4, "192.168.99.1") &&
	   !got.local.ipv6[0] && got.local.port == 8080, "local endpoint");
	ok(str_is(got.remote.service, z.remote.service) && !got.remote.ipv4[0] &&
	   !strcmp(got.remote.ipv6, "2001:db8::c001") && got.remote.port == 55123,
	   "remote endpoint");
	is_int(got.nannotations, 2, "two annotations");
	ok(got.nannotations == 2 && got.annotations[1].ts_us == an[1].ts_us &&
	   str_is(got.annotations[1].value, an[1].value), "annotations: time and value");
	is_int(got.ntags, 3, "three tags");
	ok(got.ntags == 3 && str_is(got.tags[1].value, ZS_STR("")) &&
	   str_is(got.tags[2].key, tg[2].key) && str_is(got.tags[2].value, tg[2].value),
	   "tags: empty values, tabs and newlines kept");
	wbuf_free(&w);
	zarena_reset(&a);
}

static void empty_arrays(void)
{
	struct zspan z = { .trace_lo = 1, .id = 2 }, got;
	struct ch_key k = { .trace_lo = 1, .id = 2, .ver = 86400000000ull * 3 }, gk;
	struct wbuf w = { 0 };
	struct zarena a = { 0 };
	struct rbuf r;

	ch_put_span(&w, &k, &z);
	rbuf_init(&r, w.p, w.len);
	is_int(w.p[0] | w.p[1] << 8, 3, "no timestamp: the day of the write (ver)");
	skip_day(&r);
	is_int(ch_get_span(&r, &a, &gk, &got), 0, "a bare span reads back");
	ok(!got.nannotations && !got.annotations && !got.ntags && !got.tags && !got.name.len,
	   "no annotations, no tags, no name");
	wbuf_free(&w);
	zarena_reset(&a);
}

static void damaged(void)
{
	struct zs_annotation an[2];
	struct zs_tag tg[3];
	struct zspan z = sample(an, tg), got;
	struct ch_key k = { .trace_lo = 9 }, gk;
	struct wbuf w = { 0 };
	struct zarena a = { 0 };
	struct rbuf r;
	int bad = 0;

	ch_put_span(&w, &k, &z);
	for (size_t cut = 3; cut < w.len; cut += 7) {
		rbuf_init(&r, w.p, cut);
		skip_day(&r);
		if (ch_get_span(&r, &a, &gk, &got) != -EBADMSG)
			bad++;
	}
	is_int(bad, 0, "every truncated row: -EBADMSG");
	/* tags.key says 3, make tags.value say 2: the last count byte */
	{
		size_t vals = w.len - (1 + 4) - 1 - (1 + 8);   /* "/api", "", "new\nline" */

		w.p[vals - 1] = 2;
		rbuf_init(&r, w.p, w.len);
		skip_day(&r);
		is_int(ch_get_span(&r, &a, &gk, &got), -EBADMSG,
		       "Nested arrays of different sizes: -EBADMSG");
		ok(strstr(r.why, "nested") != NULL, "the reason says so (%s)", r.why);
	}
	wbuf_free(&w);
	zarena_reset(&a);
}

int main(void)
{
	roundtrip();
	empty_arrays();
	damaged();
	return test_done();
}
