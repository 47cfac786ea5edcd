// SPDX-License-Identifier: MIT
/* The span record codec: round trip, and every kind of damage named. */
#include <errno.h>

#include "common/spanrec.h"
#include "test.h"

static size_t build(uint8_t *buf, size_t cap)
{
	struct spanrec_fixed f = {
		.trace_hi = 0x0123456789abcdefull, .trace_lo = 42, .span_id = 7,
		.parent_id = 3, .start_ns = 1000, .duration_ns = 250,
		.kind = SPAN_KIND_SERVER, .flags = SPAN_F_SAMPLED, .nitems = 5,
	};
	size_t off = 0;
	uint8_t *items = buf + sizeof(f);

	spanrec_put_item(items, cap - sizeof(f), &off, SPAN_ITEM_NAME, 0, "write", 5, NULL, 0);
	spanrec_put_item(items, cap - sizeof(f), &off, SPAN_ITEM_EVENT, 1100, "queued", 6, NULL, 0);
	spanrec_put_item(items, cap - sizeof(f), &off, SPAN_ITEM_TAG, 0, "object", 6, "rbd.1", 5);
	spanrec_put_item(items, cap - sizeof(f), &off, SPAN_ITEM_TAG_INT, (uint64_t)-5, "offset", 6, NULL, 0);
	spanrec_put_item(items, cap - sizeof(f), &off, SPAN_ITEM_LOCAL_EP, 7001, "mapperd", 7, "10.0.0.7", 8);
	f.items_len = (uint32_t)off;
	memcpy(buf, &f, sizeof(f));
	return sizeof(f) + off;
}

int main(void)
{
	uint8_t buf[512];
	char err[200];
	struct spanrec r;
	struct spanrec_item it;
	uint32_t off = 0;
	size_t len = build(buf, sizeof(buf));
	int n;

	n = spanrec_decode(buf, len, &r, err, sizeof(err));
	is_int(n, (int)len, "decode returns the record length");
	ok(r.name.len == 5 && !memcmp(r.name.p, "write", 5), "name decoded");
	is_int(r.nevents, 1, "one event");
	is_int(r.ntags, 2, "two tags");
	ok(r.local.present && r.local.port == 7001 && r.local.service.len == 7, "local endpoint");
	ok(!r.remote.present, "no remote endpoint");
	n = 0;
	while (spanrec_next(&r, &off, &it)) {
		if (it.type == SPAN_ITEM_TAG_INT)
			is_int((int64_t)it.val, -5, "negative int tag round-trips");
		n++;
	}
	is_int(n, 5, "iteration visits all items");

	/* Damage: every truncation point is an error, never a crash. */
	int all_bad = 1;
	for (size_t cut = 0; cut < len; cut++) {
		struct spanrec_fixed f;

		memcpy(&f, buf, sizeof(f));
		if (cut >= sizeof(f)) {
			f.items_len = (uint32_t)(cut - sizeof(f));
			uint8_t tmp[512];
			memcpy(tmp, buf, cut);
			memcpy(tmp, &f, sizeof(f));
			if (spanrec_decode(tmp, cut, &r, err, sizeof(err)) != -EBADMSG)
				all_bad = 0;
		} else if (spanrec_decode(buf, cut, &r, err, sizeof(err)) != -EBADMSG) {
			all_bad = 0;
		}
	}
	ok(all_bad, "every truncated record is rejected");

	buf[sizeof(struct spanrec_fixed)] = 99;
	n = spanrec_decode(buf, len, &r, err, sizeof(err));
	is_int(n, -EBADMSG, "unknown item type rejected");
	ok(strstr(err, "byte 64") && strstr(err, "unknown item type 99"), "message names offset and type: %s", err);

	size_t o = 0;
	uint8_t small[10];
	is_int(spanrec_put_item(small, sizeof(small), &o, SPAN_ITEM_TAG, 0, "k", 1, "vvvv", 4), -ENOSPC,
	       "put_item reports no space");
	is_int(o, 0, "and writes nothing");

	char hex[33];
	uint64_t hi, lo;
	spanrec_trace_hex(0x0123456789abcdefull, 42, hex);
	is_str(hex, "0123456789abcdef000000000000002a", "128-bit trace id hex");
	ok(!spanrec_parse_trace(hex, 32, &hi, &lo) && hi == 0x0123456789abcdefull && lo == 42,
	   "trace id parses back");
	spanrec_trace_hex(0, 42, hex);
	is_str(hex, "000000000000002a", "64-bit trace id is 16 hex chars");
	ok(spanrec_parse_trace("xyz", 3, &hi, &lo) == -EINVAL, "bad trace id rejected");

	/* the one hex parser: either case, or lower case only */
	uint64_t v = 1;
	ok(!spanrec_hex_u64("DeadBeef", 8, false, &v) && v == 0xdeadbeefull, "hex: either case");
	ok(spanrec_hex_u64("DeadBeef", 8, true, &v) == -EINVAL, "hex: upper case refused where lower only");
	ok(!spanrec_hex_u64("ffffffffffffffff", 16, true, &v) && v == UINT64_MAX, "hex: 16 digits, all ones");
	ok(!spanrec_hex_u64("", 0, true, &v) && v == 0, "hex: no digits is 0");
	ok(spanrec_hex_u64("00000000000000001", 17, false, &v) == -EINVAL, "hex: 17 digits refused");
	ok(spanrec_hex_u64("12g4", 4, false, &v) == -EINVAL, "hex: a non-digit refused");
	ok(spanrec_hex_u64("12 4", 4, false, &v) == -EINVAL, "hex: a space refused");
	ok(!spanrec_parse_trace("0123456789ABCDEF000000000000002A", 32, &hi, &lo) &&
	   hi == 0x0123456789abcdefull && lo == 42, "a trace id in upper case parses");
	return test_done();
}
