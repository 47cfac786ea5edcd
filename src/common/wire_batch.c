// SPDX-License-Identifier: MIT
/*
 * BATCH frames (src/common/wire.h): payload = uint32 count, then count x
 * (uint32 len, span record).  The one encoder (the agent's) and the one
 * walk over a received payload (the collector, the agent's spool loader,
 * the tests).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"

int wire_batch_init(struct wire_batch *b, uint32_t cap, uint32_t max_count)
{
	memset(b, 0, sizeof(*b));
	if (cap < WIRE_BATCH_COUNT_SIZE || cap > FAY_WIRE_MAX_PAYLOAD || !max_count)
		return -EINVAL;
	b->buf = malloc(FAY_WIRE_HDR_SIZE + (size_t)cap);
	if (!b->buf)
		return -ENOMEM;
	b->cap = cap;
	b->max_count = max_count;
	wire_batch_reset(b);
	return 0;
}

void wire_batch_free(struct wire_batch *b)
{
	if (!b)
		return;
	free(b->buf);
	b->buf = NULL;
}

void wire_batch_reset(struct wire_batch *b)
{
	b->len = WIRE_BATCH_COUNT_SIZE;
	b->count = 0;
	memcpy(b->buf + FAY_WIRE_HDR_SIZE, &b->count, WIRE_BATCH_COUNT_SIZE);
}

int wire_batch_reserve(struct wire_batch *b, uint32_t reclen, uint8_t **rec)
{
	uint8_t *p = b->buf + FAY_WIRE_HDR_SIZE + b->len;
	uint64_t need = WIRE_BATCH_LEN_SIZE + (uint64_t)reclen;

	if (need > b->cap - WIRE_BATCH_COUNT_SIZE)
		return -E2BIG;
	if (need > b->cap - b->len || b->count >= b->max_count)
		return -ENOSPC;
	memcpy(p, &reclen, WIRE_BATCH_LEN_SIZE);
	*rec = p + WIRE_BATCH_LEN_SIZE;
	b->len += (uint32_t)need;
	b->count++;
	memcpy(b->buf + FAY_WIRE_HDR_SIZE, &b->count, WIRE_BATCH_COUNT_SIZE);
	return 0;
}

uint32_t wire_batch_seal(struct wire_batch *b, uint64_t seq)
{
	uint8_t *payload = b->buf + FAY_WIRE_HDR_SIZE;
	struct wire_hdr h;

	wire_hdr_init(&h, WIRE_BATCH, seq, payload, b->len);
	memcpy(b->buf, &h, sizeof(h));
	return FAY_WIRE_HDR_SIZE + b->len;
}

/* "BATCH seq N" or "BATCH" (seq unknown). */
static const char *what(uint64_t seq, char *buf, size_t len)
{
	if (seq)
		snprintf(buf, len, "BATCH seq %llu", (unsigned long long)seq);
	else
		snprintf(buf, len, "BATCH");
	return buf;
}

int wire_batch_open(struct wire_batch_rd *rd, const void *p, uint32_t len,
		    uint64_t seq, char *err, size_t errlen)
{
	char w[48];

	memset(rd, 0, sizeof(*rd));
	rd->seq = seq;
	if (len < WIRE_BATCH_COUNT_SIZE) {
		snprintf(err, errlen, "%s: %u-byte payload has no span count",
			 what(seq, w, sizeof(w)), len);
		return -EBADMSG;
	}
	memcpy(&rd->count, p, WIRE_BATCH_COUNT_SIZE);
	if (rd->count > (len - WIRE_BATCH_COUNT_SIZE) / WIRE_BATCH_LEN_SIZE) {
		snprintf(err, errlen, "%s: span count %u cannot fit in %u bytes",
			 what(seq, w, sizeof(w)), rd->count, len);
		return -EBADMSG;
	}
	rd->p = p;
	rd->len = len;
	rd->off = WIRE_BATCH_COUNT_SIZE;
	return 0;
}

int wire_batch_next(struct wire_batch_rd *rd, const uint8_t **rec, uint32_t *reclen,
		    char *err, size_t errlen)
{
	uint32_t sl;
	char w[48];

	if (rd->i == rd->count) {
		if (rd->off != rd->len) {
			snprintf(err, errlen, "%s: %u bytes after the last of %u spans (byte %u)",
				 what(rd->seq, w, sizeof(w)), rd->len - rd->off, rd->count, rd->off);
			return -EBADMSG;
		}
		return 0;
	}
	if (rd->len - rd->off < WIRE_BATCH_LEN_SIZE) {
		snprintf(err, errlen, "%s: span %u of %u: length cut short at byte %u (%u-byte payload)",
			 what(rd->seq, w, sizeof(w)), rd->i, rd->count, rd->off, rd->len);
		return -EBADMSG;
	}
	memcpy(&sl, rd->p + rd->off, WIRE_BATCH_LEN_SIZE);
	if (sl > rd->len - rd->off - WIRE_BATCH_LEN_SIZE) {
		snprintf(err, errlen, "%s: span %u of %u: length %u at byte %u runs past the %u-byte payload",
			 what(rd->seq, w, sizeof(w)), rd->i, rd->count, sl, rd->off, rd->len);
		return -EBADMSG;
	}
	*rec = rd->p + rd->off + WIRE_BATCH_LEN_SIZE;
	*reclen = sl;
	rd->off += WIRE_BATCH_LEN_SIZE + sl;
	rd->i++;
	return 1;
}

int wire_get_batch(const struct wire_frame *f, struct wire_batch_rd *rd,
		   char *err, size_t errlen)
{
	if (f->h.type != WIRE_BATCH) {
		snprintf(err, errlen, "expected a BATCH frame, got %s (type %u)",
			 wire_type_name(f->h.type), f->h.type);
		return -EPROTO;
	}
	if (!f->h.seq) {
		snprintf(err, errlen, "BATCH: seq 0 (batch seqs start at 1)");
		return -EPROTO;
	}
	return wire_batch_open(rd, f->payload, f->h.len, f->h.seq, err, errlen);
}

int wire_batch_walk(const void *payload, uint32_t len,
		    int (*fn)(void *ctx, const void *rec, uint32_t len), void *ctx,
		    char *err, size_t errlen)
{
	struct wire_batch_rd rd;
	const uint8_t *rec;
	uint32_t rl;
	int ret;

	ret = wire_batch_open(&rd, payload, len, 0, err, errlen);
	if (ret)
		return ret;
	while ((ret = wire_batch_next(&rd, &rec, &rl, err, errlen)) > 0) {
		if (fn) {
			ret = fn(ctx, rec, rl);
			if (ret < 0)
				return ret;
		}
	}
	return ret ? ret : (int)rd.count;
}
