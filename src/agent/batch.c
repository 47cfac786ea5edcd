// SPDX-License-Identifier: MIT
/*
 * Span records into BATCH frames: the frame is built in place by the wire
 * module (struct wire_batch); the agent adds the process's endpoint to
 * spans that carry none.
 */
#include <errno.h>
#include <string.h>

#include "agent/batch.h"

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

static int needs_ep(const struct spanrec *r, const struct ep_item *ep)
{
	return ep && ep->len && !r->local.present && r->f.nitems < UINT16_MAX;
}

uint64_t batch_rec_size(uint32_t reclen, const struct spanrec *r, const struct ep_item *ep)
{
	return (uint64_t)reclen + (needs_ep(r, ep) ? ep->len : 0);
}

void batch_rec_copy(uint8_t *dst, const void *rec, uint32_t reclen, const struct spanrec *r,
		    const struct ep_item *ep)
{
	if (needs_ep(r, ep)) {
		struct spanrec_fixed f;

		memcpy(&f, rec, sizeof(f));
		f.items_len += ep->len;
		f.nitems++;
		memcpy(dst, &f, sizeof(f));
		memcpy(dst + sizeof(f), (const uint8_t *)rec + sizeof(f), reclen - sizeof(f));
		memcpy(dst + reclen, ep->buf, ep->len);
	} else {
		memcpy(dst, rec, reclen);
	}
}

int batch_add(struct wire_batch *b, const void *rec, uint32_t reclen,
	      const struct spanrec *r, const struct ep_item *ep)
{
	uint64_t size = batch_rec_size(reclen, r, ep);
	uint8_t *p;
	int ret;

	if (size > UINT32_MAX - WIRE_BATCH_LEN_SIZE)
		return -E2BIG;
	ret = wire_batch_reserve(b, (uint32_t)size, &p);
	if (ret)
		return ret;
	batch_rec_copy(p, rec, reclen, r, ep);
	return 0;
}
