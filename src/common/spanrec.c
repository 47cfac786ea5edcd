// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/spanrec.h"

int spanrec_put_item(uint8_t *buf, size_t cap, size_t *off, unsigned type,
		     uint64_t val, const char *a, size_t alen,
		     const char *b, size_t blen)
{
	uint64_t hdr;
	size_t need, o = *off;

	if (alen > SPANREC_STR_MAX)
		alen = SPANREC_STR_MAX;
	if (blen > SPANREC_STR_MAX)
		blen = SPANREC_STR_MAX;
	need = spanrec_item_size(type, alen, blen);
	if (o > cap || need > cap - o)
		return -ENOSPC;
	/* type in the low byte, reserved byte 0, alen, blen (little-endian),
	 * built in a register: three 16-bit stores read back as one word
	 * stall store forwarding on the span hot path */
	hdr = (uint64_t)(type & 0xff) | (uint64_t)alen << 16 | (uint64_t)blen << 32;
	memcpy(buf + o, &hdr, SPANREC_ITEM_HDR);
	o += SPANREC_ITEM_HDR;
	if (spanrec_item_has_val(type)) {
		memcpy(buf + o, &val, 8);
		o += 8;
	}
	if (alen)
		memcpy(buf + o, a, alen);
	o += alen;
	if (blen)
		memcpy(buf + o, b, blen);
	o += blen;
	*off = o;
	return 0;
}

__attribute__((format(printf, 4, 5)))
static int bad(char *err, size_t errlen, size_t at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!errlen)
		return -EBADMSG;
	n = snprintf(err, errlen, "span record: byte %zu: ", at);
	if (n > 0 && (size_t)n < errlen) {
		va_start(ap, fmt);
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

/* Read one item at items + off (len bytes in all). */
static int item_at(const uint8_t *items, uint32_t len, uint32_t off,
		   struct spanrec_item *it, uint32_t *next, char *err, size_t errlen)
{
	uint16_t hdr[3];
	uint32_t o = off;
	size_t base = sizeof(struct spanrec_fixed);

	if (len - o < SPANREC_ITEM_HDR)
		return bad(err, errlen, base + o, "item header cut short (%llu bytes left)", (unsigned long long)(len - o));
	memcpy(hdr, items + o, SPANREC_ITEM_HDR);
	it->type = hdr[0] & 0xff;
	if (it->type == 0 || it->type >= SPAN_ITEM_MAX)
		return bad(err, errlen, base + o, "unknown item type %llu", (unsigned long long)(it->type));
	if (hdr[0] >> 8)
		return bad(err, errlen, base + o + 1, "reserved byte is %llu, not 0", (unsigned long long)(hdr[0] >> 8));
	o += SPANREC_ITEM_HDR;
	it->val = 0;
	if (spanrec_item_has_val(it->type)) {
		if (len - o < 8)
			return bad(err, errlen, base + o, "item value cut short (%llu bytes left)", (unsigned long long)(len - o));
		memcpy(&it->val, items + o, 8);
		o += 8;
	}
	if ((uint32_t)hdr[1] + hdr[2] > len - o)
		return bad(err, errlen, base + o, "item strings (%llu bytes) run past the record", (unsigned long long)((unsigned long long)hdr[1] + hdr[2]));
	it->a.p = (const char *)items + o;
	it->a.len = hdr[1];
	o += hdr[1];
	it->b.p = (const char *)items + o;
	it->b.len = hdr[2];
	o += hdr[2];
	*next = o;
	return 0;
}

int spanrec_decode(const void *buf, size_t len, struct spanrec *out,
		   char *err, size_t errlen)
{
	const uint8_t *p = buf;
	struct spanrec_item it;
	uint32_t off = 0, n = 0;
	int ret;

	memset(out, 0, sizeof(*out));
	if (len < sizeof(out->f))
		return bad(err, errlen, 0, "record is %llu bytes, shorter than its 64-byte header", (unsigned long long)(len));
	memcpy(&out->f, p, sizeof(out->f));
	if (out->f.items_len > len - sizeof(out->f))
		return bad(err, errlen, 48, "items_len %llu runs past the record", (unsigned long long)(out->f.items_len));
	if (!out->f.span_id)
		return bad(err, errlen, 16, "span id is 0");
	if (!out->f.trace_hi && !out->f.trace_lo)
		return bad(err, errlen, 0, "trace id is 0");
	if (out->f.kind >= SPAN_KIND_MAX)
		return bad(err, errlen, 54, "unknown span kind %llu", (unsigned long long)(out->f.kind));
	out->items = p + sizeof(out->f);
	out->items_len = out->f.items_len;
	while (off < out->items_len) {
		ret = item_at(out->items, out->items_len, off, &it, &off, err, errlen);
		if (ret)
			return ret;
		n++;
		switch (it.type) {
		case SPAN_ITEM_NAME:
			out->name = it.a;
			break;
		case SPAN_ITEM_EVENT:
			out->nevents++;
			break;
		case SPAN_ITEM_TAG:
		case SPAN_ITEM_TAG_INT:
			out->ntags++;
			break;
		case SPAN_ITEM_LOCAL_EP:
		case SPAN_ITEM_REMOTE_EP: {
			struct spanrec_ep *ep = it.type == SPAN_ITEM_LOCAL_EP ?
						&out->local : &out->remote;

			if (it.val > 65535)
				return bad(err, errlen, sizeof(out->f) + off, "endpoint port %llu out of range", (unsigned long long)(it.val));
			ep->present = 1;
			ep->port = (uint16_t)it.val;
			ep->service = it.a;
			ep->ip = it.b;
			break;
		}
		}
	}
	if (n != out->f.nitems)
		return bad(err, errlen, 52, "header says %llu items, found a different count", (unsigned long long)(out->f.nitems));
	return (int)(sizeof(out->f) + out->items_len);
}

int spanrec_next(const struct spanrec *r, uint32_t *off, struct spanrec_item *it)
{
	uint32_t next;

	if (*off >= r->items_len)
		return 0;
	if (item_at(r->items, r->items_len, *off, it, &next, NULL, 0))
		return 0; /* cannot happen on a decoded record */
	*off = next;
	return 1;
}

static const char hexd[] = "0123456789abcdef";

static void hex64(uint64_t v, char *out)
{
	for (int i = 15; i >= 0; i--, v >>= 4)
		out[i] = hexd[v & 15];
}

void spanrec_trace_hex(uint64_t hi, uint64_t lo, char buf[33])
{
	if (hi) {
		hex64(hi, buf);
		hex64(lo, buf + 16);
		buf[32] = '\0';
	} else {
		hex64(lo, buf);
		buf[16] = '\0';
	}
}

void spanrec_id_hex(uint64_t id, char buf[17])
{
	hex64(id, buf);
	buf[16] = '\0';
}

int spanrec_hex_u64(const char *s, size_t len, bool lower_only, uint64_t *v)
{
	uint64_t x = 0;

	if (len > 16)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		unsigned d;

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F' && !lower_only)
			d = (unsigned)(c - 'A' + 10);
		else
			return -EINVAL;
		x = x << 4 | d;
	}
	*v = x;
	return 0;
}

int spanrec_parse_trace(const char *s, size_t len, uint64_t *hi, uint64_t *lo)
{
	if (len == 16) {
		*hi = 0;
		return spanrec_hex_u64(s, 16, false, lo);
	}
	if (len != 32)
		return -EINVAL;
	if (spanrec_hex_u64(s, 16, false, hi) || spanrec_hex_u64(s + 16, 16, false, lo))
		return -EINVAL;
	return 0;
}

int spanrec_parse_id(const char *s, size_t len, uint64_t *id)
{
	if (len != 16)
		return -EINVAL;
	return spanrec_hex_u64(s, 16, false, id);
}
