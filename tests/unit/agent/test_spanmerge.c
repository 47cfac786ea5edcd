// SPDX-License-Identifier: MIT
/*
 * BlkKin parts into whole spans: a client side (cs .. cr) and a server
 * side (sr .. ss) each come out once, when their end arrives, with the
 * kind, start, duration, name, endpoint and every tag recorded before;
 * parts of other spans interleave freely; the same span id recorded by two
 * services makes two spans, and so does a loopback RPC (cs, sr, ss, cr
 * in one service); a span that never ends is given up after the
 * TTL or when the table is full (counted), and the table keeps working
 * through many evictions and deletions (probe runs stay intact).
 */
#include <errno.h>
#include <string.h>

#include "agent/spanmerge.h"
#include "test.h"

struct rec {
	struct spanrec_fixed f;
	uint8_t items[512];
};

/* One BlkKin part as blkin_record() writes it. */
static struct spanrec part(struct rec *r, uint64_t trace, uint64_t span, const char *svc,
			   const char *name, unsigned type, const char *a, const char *b,
			   uint64_t val, uint64_t now)
{
	size_t used = 0;
	struct spanrec out;
	char err[128];

	memset(r, 0, sizeof(*r));
	r->f.trace_lo = trace;
	r->f.span_id = span;
	r->f.parent_id = span - 1;
	r->f.start_ns = now;
	r->f.flags = SPAN_F_PARTIAL | SPAN_F_SAMPLED;
	spanrec_put_item(r->items, sizeof(r->items), &used, SPAN_ITEM_NAME, 0, name, strlen(name),
			 NULL, 0);
	spanrec_put_item(r->items, sizeof(r->items), &used, SPAN_ITEM_LOCAL_EP, 80, svc,
			 strlen(svc), "127.0.0.1", 9);
	spanrec_put_item(r->items, sizeof(r->items), &used, type, type == SPAN_ITEM_EVENT ? now : val,
			 a, strlen(a), b, b ? strlen(b) : 0);
	r->f.items_len = (uint32_t)used;
	r->f.nitems = 3;
	if (spanrec_decode(r, sizeof(r->f) + used, &out, err, sizeof(err)) < 0)
		diag("part: %s", err);
	return out;
}

static int add(struct spanmerge *m, struct rec *r, struct spanrec *out, uint64_t trace,
	       uint64_t span, const char *svc, unsigned type, const char *a, const char *b,
	       uint64_t val, uint64_t now)
{
	struct spanrec p = part(r, trace, span, svc, "map", type, a, b, val, now);

	return spanmerge_add(m, &p, out);
}

static const char *tag_of(const struct spanrec *s, const char *key, char *buf, size_t len)
{
	struct spanrec_item it;
	uint32_t off = 0;

	while (spanrec_next(s, &off, &it))
		if ((it.type == SPAN_ITEM_TAG || it.type == SPAN_ITEM_TAG_INT) &&
		    it.a.len == strlen(key) && !memcmp(it.a.p, key, it.a.len)) {
			if (it.type == SPAN_ITEM_TAG)
				snprintf(buf, len, "%.*s", (int)it.b.len, it.b.p);
			else
				snprintf(buf, len, "%lld", (long long)it.val);
			return buf;
		}
	return NULL;
}

int main(void)
{
	struct spanmerge *m = spanmerge_new(64);
	struct rec r;
	struct spanrec out, whole;
	char buf[64];
	uint64_t t0 = 1700000000000000000ull;
	int got = 0;

	ok(m != NULL, "a table");
	/* a server side, with a client side of another span interleaved */
	is_int(add(m, &r, &out, 5, 50, "mapper", SPAN_ITEM_EVENT, "sr", NULL, 0, t0), 0, "sr kept");
	is_int(add(m, &r, &out, 5, 51, "mapper", SPAN_ITEM_EVENT, "cs", NULL, 0, t0 + 10), 0, "cs of a child kept");
	is_int(add(m, &r, &out, 5, 50, "mapper", SPAN_ITEM_TAG, "object", "obj-1", 0, t0 + 20), 0, "a tag kept");
	is_int(add(m, &r, &out, 5, 50, "mapper", SPAN_ITEM_TAG_INT, "size", NULL, 4096, t0 + 30), 0, "an int tag kept");
	is_int(add(m, &r, &out, 5, 51, "mapper", SPAN_ITEM_EVENT, "cr", NULL, 0, t0 + 500), 1, "cr ends the child");
	is_int(out.f.kind, SPAN_KIND_CLIENT, "the child is a client span");
	is_u64(out.f.start_ns, t0 + 10, "from cs");
	is_u64(out.f.duration_ns, 1000, "to cr: 490 ns, under 1 us, is 1 us (Zipkin's rule)");
	ok(!(out.f.flags & SPAN_F_PARTIAL), "a whole span");
	is_int(add(m, &r, &out, 5, 50, "mapper", SPAN_ITEM_EVENT, "ss", NULL, 0, t0 + 1000), 1, "ss ends the span");
	whole = out;
	is_int(whole.f.kind, SPAN_KIND_SERVER, "server");
	is_u64(whole.f.start_ns, t0, "from sr");
	is_u64(whole.f.duration_ns, 1000, "to ss");
	is_u64(whole.f.span_id, 50, "its id");
	is_u64(whole.f.parent_id, 49, "its parent");
	ok(whole.name.len == 3 && !memcmp(whole.name.p, "map", 3), "its name");
	ok(whole.local.present && whole.local.service.len == 6 &&
	   !memcmp(whole.local.service.p, "mapper", 6), "its service");
	is_str(tag_of(&whole, "object", buf, sizeof(buf)), "obj-1", "the string tag");
	is_str(tag_of(&whole, "size", buf, sizeof(buf)), "4096", "the integer tag");
	is_int(add(m, &r, &out, 5, 50, "mapper", SPAN_ITEM_TAG, "late", "x", 0, t0 + 2000), 0,
	       "a part after the end starts over (and never completes)");

	/* one span id, two services: two spans */
	add(m, &r, &out, 6, 60, "vm-client", SPAN_ITEM_EVENT, "cs", NULL, 0, t0);
	add(m, &r, &out, 6, 60, "mapper", SPAN_ITEM_EVENT, "sr", NULL, 0, t0 + 5);
	add(m, &r, &out, 6, 60, "mapper", SPAN_ITEM_EVENT, "ss", NULL, 0, t0 + 7);
	is_int(out.f.kind, SPAN_KIND_SERVER, "the server side of a shared id");
	is_int(add(m, &r, &out, 6, 60, "vm-client", SPAN_ITEM_EVENT, "cr", NULL, 0, t0 + 9), 1,
	       "and its client side, apart");
	is_u64(out.f.duration_ns, 1000, "the client's duration (9 ns: 1 us)");
	/* a loopback RPC: one service is client and server of one span id:
	 * two spans, as Zipkin's converter and the store make it */
	is_int(add(m, &r, &out, 10, 100, "loop", SPAN_ITEM_EVENT, "cs", NULL, 0, t0), 0, "loopback cs kept");
	is_int(add(m, &r, &out, 10, 100, "loop", SPAN_ITEM_EVENT, "sr", NULL, 0, t0 + 2000), 0,
	       "loopback sr kept");
	is_int(add(m, &r, &out, 10, 100, "loop", SPAN_ITEM_EVENT, "ss", NULL, 0, t0 + 5000), 1,
	       "loopback ss ends the server side");
	ok(out.f.kind == SPAN_KIND_SERVER && out.f.start_ns == t0 + 2000 &&
	   out.f.duration_ns == 3000, "the server span, sr to ss");
	is_int(add(m, &r, &out, 10, 100, "loop", SPAN_ITEM_TAG, "after", "x", 0, t0 + 6000), 0,
	       "a tag between ss and cr joins the open client side");
	is_int(add(m, &r, &out, 10, 100, "loop", SPAN_ITEM_EVENT, "cr", NULL, 0, t0 + 9000), 1,
	       "loopback cr ends the client side");
	ok(out.f.kind == SPAN_KIND_CLIENT && out.f.start_ns == t0 && out.f.duration_ns == 9000,
	   "the client span, cs to cr");
	is_str(tag_of(&out, "after", buf, sizeof(buf)), "x", "with the tag");
	add(m, &r, &out, 10, 100, "loop", SPAN_ITEM_EVENT, "cs", NULL, 0, t0 + 10000);
	is_int(add(m, &r, &out, 10, 100, "loop", SPAN_ITEM_EVENT, "cr", NULL, 0, t0 + 12000), 1,
	       "both sides built: the part was forgotten (a retried id starts over)");
	/* the duration rule (common/zipkin_v1.h), as the store applies it */
	add(m, &r, &out, 8, 80, "mapper", SPAN_ITEM_EVENT, "sr", NULL, 0, t0 + 3000);
	add(m, &r, &out, 8, 80, "mapper", SPAN_ITEM_EVENT, "ss", NULL, 0, t0 + 3000);
	is_u64(out.f.duration_ns, 1000, "sr = ss in the same ns: 1 us, not 0 (no duration)");
	add(m, &r, &out, 8, 81, "mapper", SPAN_ITEM_EVENT, "cs", NULL, 0, t0 + 3000);
	add(m, &r, &out, 8, 81, "mapper", SPAN_ITEM_EVENT, "cr", NULL, 0, t0 + 5500);
	is_u64(out.f.duration_ns, 2500, "over 1 us: the nanoseconds as they are");
	add(m, &r, &out, 8, 82, "mapper", SPAN_ITEM_EVENT, "cs", NULL, 0, t0 + 3000);
	add(m, &r, &out, 8, 82, "mapper", SPAN_ITEM_EVENT, "cr", NULL, 0, t0 + 2000);
	is_u64(out.f.duration_ns, 0, "cr before cs (the clock stepped back): no duration");
	is_u64(spanmerge_dropped(m), 0, "nothing given up yet");

	/* many spans in flight, ended in another order: every one once */
	for (uint64_t i = 0; i < 40; i++)
		add(m, &r, &out, 7, 100 + i, "composer", SPAN_ITEM_EVENT, "sr", NULL, 0, t0 + i);
	for (uint64_t i = 40; i-- > 0;)
		got += add(m, &r, &out, 7, 100 + i, "composer", SPAN_ITEM_EVENT, "ss", NULL, 0,
			   t0 + 10000 + i) == 1 && out.f.span_id == 100 + i &&
		       out.f.duration_ns == 10000;
	is_int(got, 40, "40 spans in flight, each out once with its own duration");

	/* the TTL: an old open span goes when room is needed */
	for (uint64_t i = 0; i < 60; i++)
		add(m, &r, &out, 8, 1000 + i, "blocker", SPAN_ITEM_EVENT, "sr", NULL, 0,
		    t0 + SPANMERGE_TTL_NS * 2 + i);
	ok(spanmerge_dropped(m) >= 2, "open spans beyond the TTL or the table are given up (%llu)",
	   (unsigned long long)spanmerge_dropped(m));
	got = 0;
	for (uint64_t i = 60; i-- > 0;)	/* the newest were kept */
		got += add(m, &r, &out, 8, 1000 + i, "blocker", SPAN_ITEM_EVENT, "ss", NULL, 0,
			   t0 + SPANMERGE_TTL_NS * 2 + 100 + i) == 1;
	ok(got >= 40 && (uint64_t)got + spanmerge_dropped(m) >= 60,
	   "the rest still end (%d ended, the table holds 64)", got);
	{
		struct spanrec whole_one = part(&r, 9, 9, "x", "y", SPAN_ITEM_EVENT, "ss", NULL, 0, t0);

		whole_one.f.flags = 0;
		is_int(spanmerge_add(m, &whole_one, &out), -EINVAL, "a whole span is not a part");
	}
	spanmerge_free(m);
	return test_done();
}
