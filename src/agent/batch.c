// SPDX-License-Identifier: MIT
/*
 * BATCH frames: payload = uint32 count, then count x (uint32 len, record).
 * Built in place behind room for the wire header, so a sealed batch is one
 * contiguous frame that goes to the spool with one write.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

int batch_init(struct batch *b, uint32_t cap, uint32_t max_spans)
{
	memset(b, 0, sizeof(*b));
	if (cap < 4 || cap > FAY_WIRE_MAX_PAYLOAD || !max_spans)
		return -EINVAL;
	b->buf = malloc(FAY_WIRE_HDR_SIZE + (size_t)cap);
	if (!b->buf)
		return -ENOMEM;
	b->cap = cap;
	b->max_spans = max_spans;
	batch_reset(b);
	return 0;
}

void batch_free(struct batch *b)
{
	if (!b)
		return;
	free(b->buf);
	b->buf = NULL;
}

void batch_reset(struct batch *b)
{
	b->len = 4;
	b->count = 0;
}

void ep_item_init(struct ep_item *ep, const char *service, const char *ip,
		  uint16_t port)
{
	size_t off = 0;
	size_t sl = strnlen(service, 64), il = strnlen(ip, 48);

	ep->len = 0;
	if (!sl && !il && !port)
		return;
	if (!spanrec_put_item(ep->buf, sizeof(ep->buf), &off, SPAN_ITEM_LOCAL_EP,
			      port, service, sl, ip, il))
		ep->len = (uint32_t)off;
}

int batch_add(struct batch *b, const void *rec, uint32_t reclen,
	      const struct spanrec *r, const struct ep_item *ep)
{
	uint8_t *p = b->buf + FAY_WIRE_HDR_SIZE + b->len;
	int add_ep = ep && ep->len && !r->local.present && r->f.nitems < UINT16_MAX;
	uint32_t extra = add_ep ? ep->len : 0;
	uint64_t need = 4 + (uint64_t)reclen + extra;
	uint32_t slen = reclen + extra;

	if (need > b->cap - 4)
		return -E2BIG;
	if (need > b->cap - b->len || b->count >= b->max_spans)
		return -ENOSPC;
	memcpy(p, &slen, 4);
	if (add_ep) {
		struct spanrec_fixed f;

		memcpy(&f, rec, sizeof(f));
		f.items_len += extra;
		f.nitems++;
		memcpy(p + 4, &f, sizeof(f));
		memcpy(p + 4 + sizeof(f), (const uint8_t *)rec + sizeof(f),
		       reclen - sizeof(f));
		memcpy(p + 4 + reclen, ep->buf, extra);
	} else {
		memcpy(p + 4, rec, reclen);
	}
	b->len += (uint32_t)need;
	b->count++;
	return 0;
}

uint32_t batch_seal(struct batch *b, uint64_t seq)
{
	uint8_t *payload = b->buf + FAY_WIRE_HDR_SIZE;
	struct wire_hdr h;

	memcpy(payload, &b->count, 4);
	wire_hdr_init(&h, WIRE_BATCH, seq, payload, b->len);
	memcpy(b->buf, &h, sizeof(h));
	return FAY_WIRE_HDR_SIZE + b->len;
}

int batch_walk(const void *payload, uint32_t len,
	       int (*fn)(void *ctx, const void *rec, uint32_t len), void *ctx,
	       char *err, size_t errlen)
{
	const uint8_t *p = payload;
	uint32_t count, off = 4;

	if (len < 4) {
		snprintf(err, errlen, "batch payload of %u bytes has no span count", len);
		return -EBADMSG;
	}
	memcpy(&count, p, 4);
	for (uint32_t i = 0; i < count; i++) {
		uint32_t sl;

		if (len - off < 4) {
			snprintf(err, errlen, "span %u of %u: length field at byte %u is past the end (%u bytes)",
				 i, count, off, len);
			return -EBADMSG;
		}
		memcpy(&sl, p + off, 4);
		off += 4;
		if (sl > len - off) {
			snprintf(err, errlen, "span %u of %u at byte %u: length %u runs past the end (%u bytes)",
				 i, count, off - 4, sl, len);
			return -EBADMSG;
		}
		if (fn) {
			int ret = fn(ctx, p + off, sl);

			if (ret < 0)
				return ret;
		}
		off += sl;
	}
	if (off != len) {
		snprintf(err, errlen, "%u trailing bytes after %u spans", len - off, count);
		return -EBADMSG;
	}
	return (int)count;
}
