/* SPDX-License-Identifier: MIT */
/*
 * The agent <-> collector protocol (TCP, default port 9410): framed,
 * versioned, checksummed.  docs/ABI.md is the description for outsiders.
 *
 * Every frame is a 24-byte header followed by len payload bytes:
 *
 *   uint32 magic    FAY_WIRE_MAGIC ("FAYW")
 *   uint16 version  FAY_WIRE_VERSION
 *   uint16 type     enum wire_type
 *   uint32 len      payload bytes, <= FAY_WIRE_MAX_PAYLOAD
 *   uint32 crc      zlib crc32 of the header with crc = 0, then the payload
 *   uint64 seq      batch number for BATCH / ACK / NACK, else 0
 *
 * Conversation:
 *   agent -> HELLO  {"agent_id":"<32 hex>","host":"...","version":"...",
 *                    "token":"..."}                 (JSON payload)
 *   coll  -> WELCOME {"version":"...","last_seq":N} N = highest batch seq of
 *                    this agent already committed (0 if none); the agent may
 *                    drop spooled batches with seq <= N.
 *   agent -> BATCH  seq=S, payload: uint32 count, then count x
 *                    (uint32 len, len bytes of span record, spanrec.h)
 *   coll  -> ACK    seq=S, after the store transaction holding the batch
 *                    committed (or S was already committed: duplicate).
 *                    payload JSON {"stored":n,"duplicate":bool,"rejected":n}
 *   coll  -> NACK   seq=S, {"error":"..."}: the batch was not stored
 *                    (transient: store busy/full), then the collector
 *                    closes the connection: no batch sent after S on it
 *                    is committed.  The agent reconnects and resends S
 *                    (same seq) and what follows.
 *   agent -> STATS  JSON counters of the host (rings, losses, processes);
 *                    not acknowledged.
 *   either -> ERROR {"error":"..."} then closes: a protocol violation.
 * Batch seqs of one agent are strictly increasing across its lifetime
 * (persisted in its state directory) and each connection commits a prefix
 * of what it was sent (batches are handled one at a time, in order, and
 * nothing after a NACK), which is what makes the collector's duplicate
 * check ("seq <= last committed") exact.
 */
#ifndef FAY_COMMON_WIRE_H
#define FAY_COMMON_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define FAY_WIRE_MAGIC        UINT32_C(0x57594146) /* "FAYW" little-endian */
#define FAY_WIRE_VERSION      1u
#define FAY_WIRE_HDR_SIZE     24u
#define FAY_WIRE_MAX_PAYLOAD  (16u << 20)
#define FAY_WIRE_DEFAULT_PORT 9410
#define FAY_HTTP_DEFAULT_PORT 9411

enum wire_type {
	WIRE_HELLO = 1,
	WIRE_WELCOME,
	WIRE_BATCH,
	WIRE_ACK,
	WIRE_NACK,
	WIRE_STATS,
	WIRE_ERROR,
	/* cluster queries (wire_cluster.h) */
	WIRE_QUERY,
	WIRE_QSTATUS,
	WIRE_PARTIAL,
	WIRE_CANCEL,
	WIRE_BEAT,
	WIRE_TYPE_MAX,
};

struct wire_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;
	uint32_t crc;
	uint64_t seq;
};
_Static_assert(sizeof(struct wire_hdr) == FAY_WIRE_HDR_SIZE, "wire header");

const char *wire_type_name(unsigned type);

/* Fill hdr for a frame carrying payload (len bytes) and compute its crc. */
void wire_hdr_init(struct wire_hdr *hdr, unsigned type, uint64_t seq,
		   const void *payload, uint32_t len);

/* Check a received header before reading its payload: magic, version,
 * type and length.  Returns 0 or -EPROTO with a reason in err. */
int wire_hdr_check(const struct wire_hdr *hdr, char *err, size_t errlen);

/* Check the crc once the payload is in.  Returns 0 or -EBADMSG. */
int wire_crc_check(const struct wire_hdr *hdr, const void *payload,
		   char *err, size_t errlen);

#endif
