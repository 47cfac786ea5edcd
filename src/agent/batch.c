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

/* What the agent adds to record r: its endpoint (when r has none) and
 * its process's tags, within the 65535 items a record may hold. */
static void extras(const struct spanrec *r, const struct ep_item *ep,
		   const struct tag_items *tags, int *add_ep, int *add_tags)
{
	*add_ep = ep && ep->len && !r->local.present && r->f.nitems < UINT16_MAX;
	*add_tags = tags && tags->len && r->f.nitems + *add_ep + tags->n <= UINT16_MAX;
}

uint64_t batch_rec_size(uint32_t reclen, const struct spanrec *r, const struct ep_item *ep,
			const struct tag_items *tags)
{
	int add_ep, add_tags;

	extras(r, ep, tags, &add_ep, &add_tags);
	return (uint64_t)reclen + (add_ep ? ep->len : 0) + (add_tags ? tags->len : 0);
}

void batch_rec_copy(uint8_t *dst, const void *rec, uint32_t reclen, const struct spanrec *r,
		    const struct ep_item *ep, const struct tag_items *tags)
{
	int add_ep, add_tags;
	uint32_t eplen;

	extras(r, ep, tags, &add_ep, &add_tags);
	eplen = add_ep ? ep->len : 0;
	if (add_ep || add_tags) {
		struct spanrec_fixed f;

		memcpy(&f, rec, sizeof(f));
		f.items_len += eplen + (add_tags ? tags->len : 0);
		f.nitems = (uint16_t)(f.nitems + add_ep + (add_tags ? tags->n : 0));
		memcpy(dst, &f, sizeof(f));
		memcpy(dst + sizeof(f), (const uint8_t *)rec + sizeof(f), reclen - sizeof(f));
		if (add_ep)
			memcpy(dst + reclen, ep->buf, eplen);
		if (add_tags)
			memcpy(dst + reclen + eplen, tags->buf, tags->len);
	} else {
		memcpy(dst, rec, reclen);
	}
}

int batch_add(struct wire_batch *b, const void *rec, uint32_t reclen,
	      const struct spanrec *r, const struct ep_item *ep,
	      const struct tag_items *tags)
{
	uint64_t size = batch_rec_size(reclen, r, ep, tags);
	uint8_t *p;
	int ret;

	if (size > UINT32_MAX - WIRE_BATCH_LEN_SIZE ||
	    (uint64_t)r->f.items_len + (size - reclen) > UINT32_MAX)
		return -E2BIG;
	ret = wire_batch_reserve(b, (uint32_t)size, &p);
	if (ret)
		return ret;
	batch_rec_copy(p, rec, reclen, r, ep, tags);
	return 0;
}
