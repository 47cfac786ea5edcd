// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "common/wire.h"

static const char *const type_names[] = {
	[WIRE_HELLO] = "HELLO", [WIRE_WELCOME] = "WELCOME", [WIRE_BATCH] = "BATCH",
	[WIRE_ACK] = "ACK",     [WIRE_NACK] = "NACK",       [WIRE_STATS] = "STATS",
	[WIRE_ERROR] = "ERROR", [WIRE_QUERY] = "QUERY",   [WIRE_QSTATUS] = "QSTATUS",
	[WIRE_PARTIAL] = "PARTIAL", [WIRE_CANCEL] = "CANCEL", [WIRE_BEAT] = "BEAT",
};

const char *wire_type_name(unsigned type)
{
	if (type && type < WIRE_TYPE_MAX)
		return type_names[type];
	return "?";
}

static uint32_t frame_crc(const struct wire_hdr *hdr, const void *payload)
{
	struct wire_hdr h = *hdr;
	uLong c;

	h.crc = 0;
	c = crc32(0L, (const Bytef *)&h, sizeof(h));
	if (hdr->len)
		c = crc32(c, payload, hdr->len);
	return (uint32_t)c;
}

void wire_hdr_init(struct wire_hdr *hdr, unsigned type, uint64_t seq,
		   const void *payload, uint32_t len)
{
	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = FAY_WIRE_MAGIC;
	hdr->version = FAY_WIRE_VERSION;
	hdr->type = (uint16_t)type;
	hdr->len = len;
	hdr->seq = seq;
	hdr->crc = frame_crc(hdr, payload);
}

int wire_hdr_check(const struct wire_hdr *hdr, char *err, size_t errlen)
{
	if (hdr->magic != FAY_WIRE_MAGIC) {
		snprintf(err, errlen, "frame header: bad magic 0x%08x (want 0x%08x)",
			 hdr->magic, FAY_WIRE_MAGIC);
		return -EPROTO;
	}
	if (hdr->version != FAY_WIRE_VERSION) {
		snprintf(err, errlen, "frame header: protocol version %u, this side speaks %u",
			 hdr->version, FAY_WIRE_VERSION);
		return -EPROTO;
	}
	if (!hdr->type || hdr->type >= WIRE_TYPE_MAX) {
		snprintf(err, errlen, "frame header: unknown frame type %u", hdr->type);
		return -EPROTO;
	}
	if (hdr->len > FAY_WIRE_MAX_PAYLOAD) {
		snprintf(err, errlen, "frame header: %s payload of %u bytes exceeds the %u-byte limit",
			 wire_type_name(hdr->type), hdr->len, FAY_WIRE_MAX_PAYLOAD);
		return -EPROTO;
	}
	return 0;
}

int wire_crc_check(const struct wire_hdr *hdr, const void *payload,
		   char *err, size_t errlen)
{
	uint32_t c = frame_crc(hdr, payload);

	if (c != hdr->crc) {
		snprintf(err, errlen, "%s frame seq %llu: checksum 0x%08x, computed 0x%08x",
			 wire_type_name(hdr->type), (unsigned long long)hdr->seq,
			 hdr->crc, c);
		return -EBADMSG;
	}
	return 0;
}
