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

void tag_items_container(struct tag_items *t, const char *id, const char *name)
{
	size_t off = 0;

	t->len = 0;
	t->n = 0;
	if (*id) {
		if (!spanrec_put_item(t->buf, sizeof(t->buf), &off, SPAN_ITEM_TAG, 0,
				      "container.id", 12, id, strnlen(id, 64)))
			t->n++;
	} else if (*name) {
		if (!spanrec_put_item(t->buf, sizeof(t->buf), &off, SPAN_ITEM_TAG, 0,
				      "container.name", 14, name, strnlen(name, 64)))
			t->n++;
	}
	t->len = (uint32_t)off;
}

int batch_add(struct wire_batch *b, const void *rec, uint32_t reclen,
	      const struct spanrec *r, const struct ep_item *ep,
	      const struct tag_items *tags)
{
	int add_ep = ep && ep->len && !r->local.present && r->f.nitems < UINT16_MAX;
	int add_tags = tags && tags->len && r->f.nitems + add_ep + tags->n <= UINT16_MAX;
	uint32_t eplen = add_ep ? ep->len : 0, extra = eplen + (add_tags ? tags->len : 0);
	uint8_t *p;
	int ret;

	if ((uint64_t)reclen + extra > UINT32_MAX - WIRE_BATCH_LEN_SIZE ||
	    (uint64_t)r->f.items_len + extra > UINT32_MAX)
		return -E2BIG;
	ret = wire_batch_reserve(b, reclen + extra, &p);
	if (ret)
		return ret;
	if (extra) {
		struct spanrec_fixed f;

		memcpy(&f, rec, sizeof(f));
		f.items_len += extra;
		f.nitems = (uint16_t)(f.nitems + add_ep + (add_tags ? tags->n : 0));
		memcpy(p, &f, sizeof(f));
		memcpy(p + sizeof(f), (const uint8_t *)rec + sizeof(f), reclen - sizeof(f));
		if (add_ep)
			memcpy(p + reclen, ep->buf, eplen);
		if (add_tags)
			memcpy(p + reclen + eplen, tags->buf, tags->len);
	} else {
		memcpy(p, rec, reclen);
	}
	return 0;
}
