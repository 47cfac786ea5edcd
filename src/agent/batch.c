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

int batch_add(struct wire_batch *b, const void *rec, uint32_t reclen,
	      const struct spanrec *r, const struct ep_item *ep)
{
	int add_ep = ep && ep->len && !r->local.present && r->f.nitems < UINT16_MAX;
	uint32_t extra = add_ep ? ep->len : 0;
	uint8_t *p;
	int ret;

	if ((uint64_t)reclen + extra > UINT32_MAX - WIRE_BATCH_LEN_SIZE)
		return -E2BIG;
	ret = wire_batch_reserve(b, reclen + extra, &p);
	if (ret)
		return ret;
	if (add_ep) {
		struct spanrec_fixed f;

		memcpy(&f, rec, sizeof(f));
		f.items_len += extra;
		f.nitems++;
		memcpy(p, &f, sizeof(f));
		memcpy(p + sizeof(f), (const uint8_t *)rec + sizeof(f), reclen - sizeof(f));
		memcpy(p + reclen, ep->buf, extra);
	} else {
		memcpy(p, rec, reclen);
	}
	return 0;
}
