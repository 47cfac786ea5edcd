// SPDX-License-Identifier: MIT
/* BATCH frames: encoding, the local endpoint added only when missing,
 * limits by bytes and by count, and a walker that rejects damage. */
#include <errno.h>

#include "agent/batch.h"
#include "test.h"

/* A span record with an optional local endpoint. */
static uint32_t mkspan(uint8_t *buf, size_t cap, uint64_t id, int with_ep, size_t pad)
{
	struct spanrec_fixed f = { .trace_lo = id, .span_id = id, .start_ns = 1,
				   .duration_ns = 2, .flags = SPAN_F_SAMPLED };
	static char big[4096];
	size_t off = 0;

	memset(big, 'x', sizeof(big));
	spanrec_put_item(buf + 64, cap - 64, &off, SPAN_ITEM_NAME, 0, "op", 2, NULL, 0);
	f.nitems = 1;
	if (with_ep) {
		spanrec_put_item(buf + 64, cap - 64, &off, SPAN_ITEM_LOCAL_EP, 80, "own", 3,
				 "1.2.3.4", 7);
		f.nitems++;
	}
	if (pad) {
		spanrec_put_item(buf + 64, cap - 64, &off, SPAN_ITEM_TAG, 0, "pad", 3, big, pad);
		f.nitems++;
	}
	f.items_len = (uint32_t)off;
	memcpy(buf, &f, sizeof(f));
	return (uint32_t)(64 + off);
}

struct walk {
	int n;
	int ep_ok;
	int tag_ok;
};

#define CTR_ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int check_span(void *ctx, const void *rec, uint32_t len)
{
	struct walk *w = ctx;
	struct spanrec r;
	char err[200];

	if (spanrec_decode(rec, len, &r, err, sizeof(err)) != (int)len) {
		printf("# decode: %s\n", err);
		return -EBADMSG;
	}
	if (r.local.present) {
		if (r.f.span_id % 2 == 0 && r.local.service.len == 3 &&
		    !memcmp(r.local.service.p, "own", 3))
			w->ep_ok++;
		else if (r.f.span_id % 2 == 1 && r.local.port == 7001 &&
			 r.local.service.len == 7 && !memcmp(r.local.service.p, "mapperd", 7) &&
			 r.local.ip.len == 8 && !memcmp(r.local.ip.p, "10.0.0.7", 8))
			w->ep_ok++;
	}
	{
		struct spanrec_item it;
		uint32_t off = 0;
		int tags = 0;

		while (spanrec_next(&r, &off, &it))
			if (it.type == SPAN_ITEM_TAG && it.a.len == 12 &&
			    !memcmp(it.a.p, "container.id", 12) && it.b.len == 64 &&
			    !memcmp(it.b.p, CTR_ID, 64))
				tags++;
		w->tag_ok += tags == 1;
	}
	w->n++;
	return 0;
}

int main(void)
{
	struct wire_batch b;
	struct ep_item ep;
	struct tag_items tags, none;
	uint8_t rec[8192];
	char err[256];
	struct spanrec r;
	struct wire_hdr h;
	struct walk w = { 0 };
	uint32_t flen, len;
	int ret;

	ok(!wire_batch_init(&b, 1 << 16, 100), "batch_init");
	ep_item_init(&ep, "mapperd", "10.0.0.7", 7001);
	ok(ep.len > 0, "endpoint item encoded (%u bytes)", ep.len);
	tag_items_container(&tags, CTR_ID, "web-1");
	ok(tags.n == 1 && tags.len == SPANREC_ITEM_HDR + 12 + 64,
	   "container tags: container.id only when there is an id (%u bytes)", tags.len);
	tag_items_container(&none, "", "");
	ok(none.n == 0 && none.len == 0, "no container: no tags");
	tag_items_container(&none, "", "web-1");
	ok(none.n == 1 && none.len == SPANREC_ITEM_HDR + 14 + 5, "a name: container.name");
	for (uint64_t i = 1; i <= 10; i++) {
		len = mkspan(rec, sizeof(rec), i, i % 2 == 0, 0);
		spanrec_decode(rec, len, &r, err, sizeof(err));
		ret = batch_add(&b, rec, len, &r, &ep, &tags);
		if (ret)
			break;
	}
	is_int(ret, 0, "10 spans added");
	is_int(b.count, 10, "count");
	flen = wire_batch_seal(&b, 77);
	memcpy(&h, b.buf, sizeof(h));
	is_int(wire_hdr_check(&h, err, sizeof(err)), 0, "sealed header valid");
	is_int(wire_crc_check(&h, b.buf + FAY_WIRE_HDR_SIZE, err, sizeof(err)), 0, "crc valid");
	ok(h.type == WIRE_BATCH && h.seq == 77 && flen == FAY_WIRE_HDR_SIZE + h.len,
	   "type BATCH, seq 77, frame length");
	ret = wire_batch_walk(b.buf + FAY_WIRE_HDR_SIZE, h.len, check_span, &w, err, sizeof(err));
	is_int(ret, 10, "walk finds 10 spans");
	is_int(w.n, 10, "all decode");
	is_int(w.ep_ok, 10, "odd spans got the process endpoint, even kept their own");
	is_int(w.tag_ok, 10, "every span got the container.id tag once");

	/* Damage: the walker names it. */
	for (uint32_t cut = 0; cut < h.len; cut += 7) {
		ret = wire_batch_walk(b.buf + FAY_WIRE_HDR_SIZE, cut, NULL, NULL, err, sizeof(err));
		if (ret != -EBADMSG)
			break;
	}
	is_int(ret, -EBADMSG, "every truncation rejected");
	ret = wire_batch_walk(b.buf + FAY_WIRE_HDR_SIZE, h.len - 3, NULL, NULL, err, sizeof(err));
	ok(ret == -EBADMSG && strstr(err, "runs past"), "message: %s", err);

	/* Limits. */
	wire_batch_reset(&b);
	is_int(b.count, 0, "reset empties");
	len = mkspan(rec, sizeof(rec), 1, 1, 3000);
	spanrec_decode(rec, len, &r, err, sizeof(err));
	int added = 0;

	while (!(ret = batch_add(&b, rec, len, &r, NULL, NULL)))
		added++;
	is_int(ret, -ENOSPC, "full by bytes: -ENOSPC");
	ok(added == (int)((65536 - 4) / (len + 4)), "as many as fit (%d)", added);
	wire_batch_free(&b);

	ok(!wire_batch_init(&b, 1 << 16, 3), "batch of at most 3 spans");
	len = mkspan(rec, sizeof(rec), 1, 1, 0);
	spanrec_decode(rec, len, &r, err, sizeof(err));
	for (added = 0; !(ret = batch_add(&b, rec, len, &r, NULL, NULL)); added++)
		;
	ok(ret == -ENOSPC && added == 3, "full by count after 3");
	wire_batch_free(&b);

	ok(!wire_batch_init(&b, 1024, 100), "tiny batch");
	len = mkspan(rec, sizeof(rec), 1, 1, 2000);
	spanrec_decode(rec, len, &r, err, sizeof(err));
	is_int(batch_add(&b, rec, len, &r, NULL, NULL), -E2BIG, "a span bigger than any batch: -E2BIG");
	wire_batch_free(&b);
	wire_batch_free(NULL);
	return test_done();
}
