/* SPDX-License-Identifier: MIT */
/*
 * The agent <-> collector protocol (TCP, default port 9410): framed,
 * versioned, checksummed.  docs/ABI.md is the description for outsiders.
 * This module is its one codec: the header, crc and frame reader/writer
 * (wire.c), the JSON frames (wire_msg.c) and BATCH (wire_batch.c); the
 * agent and the collector both go through it.
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

/*
 * Frame types.  Adding one: an enum value here (before WIRE_TYPE_MAX), its
 * name in wire.c, a message struct with a wire_put_X() encoder and a
 * wire_get_X() decoder below (JSON payloads in wire_msg.c, binary ones in a
 * wire_X.c of their own), a round trip and the damage cases in
 * tests/unit/common/test_wire.c, and its row in docs/ABI.md.
 */
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
	/* the flight recorder (wire_cluster.h): on a query connection */
	WIRE_CAPTURE,
	WIRE_CAPTURED,
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

/* "HELLO", "BATCH" ...; "?" for a type this side does not know. */
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

/* ---- frames in and out (wire.c) ------------------------------------------ */

/* A received frame: its checked header and its crc-checked payload. */
struct wire_frame {
	struct wire_hdr h;
	const uint8_t *payload;  /* h.len bytes, owned by the reader */
};

/*
 * Outgoing frames, encoded back to back, sent as the socket takes them.
 * Zero-initialized is empty and usable; max (0: 16 MiB + header) bounds
 * the bytes waiting.  wire_buf_free() releases the memory.
 */
struct wire_buf {
	uint8_t *p;
	size_t len, off, cap, max;
};

void wire_buf_free(struct wire_buf *b);

/* Forget every byte not sent (a new connection starts clean). */
static inline void wire_buf_reset(struct wire_buf *b)
{
	b->len = b->off = 0;
}

/* Bytes not yet sent. */
static inline size_t wire_buf_pending(const struct wire_buf *b)
{
	return b->len - b->off;
}

/* Append one frame (header, then payload of len bytes).  Returns 0,
 * -EMSGSIZE (len over FAY_WIRE_MAX_PAYLOAD), -ENOBUFS (over b->max)
 * or -ENOMEM; nothing is appended on error. */
int wire_put_frame(struct wire_buf *b, unsigned type, uint64_t seq,
		   const void *payload, uint32_t len);

/*
 * Send what fd takes without blocking (send(MSG_DONTWAIT|MSG_NOSIGNAL),
 * so fd may be blocking or not).  Returns 0 when everything was sent,
 * -EAGAIN when fd is full (wait for POLLOUT and call again), or -errno
 * (-EPIPE, -ECONNRESET ...: the connection is gone).
 */
int wire_buf_flush(struct wire_buf *b, int fd);

/*
 * Incoming frames from a stream socket.  max_payload: the largest payload
 * this side accepts (at most FAY_WIRE_MAX_PAYLOAD); the buffer grows to
 * it only while such a frame arrives.
 */
struct mem_budget;

struct wire_reader {
	uint8_t *buf;
	size_t cap, len, off;
	size_t consumed;         /* bytes of the frame last returned */
	uint32_t max_payload;
	int exact;               /* never read past the frame being read (a
				  * recv for the header, one for the payload) */
	struct mem_budget *budget; /* NULL: none; else the buffer's bytes are
				  * taken from it (-ENOBUFS when it is out)
				  * and given back when the buffer shrinks */
};

/* Returns 0 or -EINVAL (max_payload out of range). */
int wire_reader_init(struct wire_reader *r, uint32_t max_payload);
void wire_reader_free(struct wire_reader *r);

/* Forget every byte buffered (a new connection starts clean). */
static inline void wire_reader_reset(struct wire_reader *r)
{
	r->len = r->off = r->consumed = 0;
}

/*
 * The next complete frame, reading fd without blocking
 * (recv(MSG_DONTWAIT)).  Returns 1 with the frame in f (its payload is
 * valid until the next call), 0 when fd has no more bytes for now (poll
 * for POLLIN and call again), -ENOTCONN when the peer closed between
 * frames, -ECONNRESET when it closed inside one, -EPROTO (bad header, or a
 * payload over max_payload) or -EBADMSG (crc) with a reason in err,
 * -ENOBUFS when r->budget cannot give the room a frame announced (err
 * says so: the peer may try again later), or -errno from recv.  After an
 * error the connection is unusable.  Between frames a buffer grown past
 * 64 KiB for a large frame is given back.
 */
int wire_read(struct wire_reader *r, int fd, struct wire_frame *f,
	      char *err, size_t errlen);

/* Bytes of a frame begun but not complete (0: between frames). */
static inline size_t wire_reader_partial(const struct wire_reader *r)
{
	return r->len - r->off - r->consumed;
}

/* ---- blocking frame I/O (wire.c) -------------------------------------------
 * For connections with a thread of their own that sleeps on them (the
 * query connections of wire_cluster.h). */

#define WIRE_FRAME_MS 10000      /* to finish a frame once begun */

/* Write one frame (header + payload) entirely, waiting as long as the
 * socket's SO_SNDTIMEO allows; 0 or -errno.  MSG_NOSIGNAL. */
int wire_send_frame(int fd, unsigned type, uint64_t seq, const void *payload,
		    uint32_t len);

/* Send every frame in b (wire_put_X), blocking as wire_send_frame; b is
 * empty afterwards whatever happened.  0 or -errno. */
int wire_buf_send(struct wire_buf *b, int fd);

/*
 * Read one frame, and not a byte more (wire_reader in exact mode): wait
 * up to timeout_ms for its first byte (-1: forever), then up to
 * WIRE_FRAME_MS for the rest.  The header goes to *h, the payload to *buf
 * (grown as needed, at most FAY_WIRE_MAX_PAYLOAD; free() it).  Returns 0,
 * 1 on a clean EOF before a frame, -ETIMEDOUT when nothing began within
 * timeout_ms (or a signal came), -EPROTO/-EBADMSG (reason in why),
 * -ECONNRESET (EOF inside the frame) or -errno.
 */
int wire_recv_frame(int fd, struct wire_hdr *h, unsigned char **buf, size_t *cap,
		    int timeout_ms, char *why, size_t whylen);

/*
 * Messages.  Each frame type has a struct, an encoder wire_put_X(buf,
 * msg) appending the whole frame (0, -ENOMEM, -ENOBUFS, -EMSGSIZE, or
 * -EINVAL for what no decoder would take: a seq the type cannot have, a
 * string that is not UTF-8; NACK and ERROR reasons are sent with '?' for
 * each byte that is not part of a UTF-8 character instead) and a
 * decoder wire_get_X(frame, msg, err, errlen) that checks the frame's
 * type, seq and every payload field: 0, -EPROTO (not an X frame, or a seq
 * X cannot have) or -EBADMSG, with a reason naming the frame and the
 * field or byte offset in err.  Strings are NUL-terminated and must fit
 * their arrays (decoders refuse longer ones, encoders never send them).
 */

/* ---- HELLO, WELCOME, ACK, NACK, ERROR, STATS (JSON payloads, wire_msg.c) - */

#define WIRE_ID_LEN 32           /* agent id: hex digits */

/* agent -> collector, first frame: who is talking. */
struct wire_hello {
	char agent_id[WIRE_ID_LEN + 1];  /* 32 hex digits (decoded: lower case) */
	char host[256];
	char version[64];
	char token[256];                 /* "" = none sent */
	char role[16];                   /* "" = span shipping; "query": a
					  * query connection (wire_cluster.h) */
	int collector;                   /* query role: the peer is a child
					  * collector, not an agent */
	char kernel[65];                 /* query role: uname release ("" = not said) */
	int btf;                         /* query role: kernel BTF present (-1 = not said) */
	int capture;                     /* query role: answers CAPTURE frames
					  * (HELLO "capture":true) */
	char session[WIRE_ID_LEN + 1];   /* random per agent process, "" = none:
					  * tells the agent's own reconnect from
					  * another agent with its id */
};
int wire_put_hello(struct wire_buf *b, const struct wire_hello *m);
int wire_get_hello(const struct wire_frame *f, struct wire_hello *m,
		   char *err, size_t errlen);

/* collector -> agent, answer to HELLO. */
struct wire_welcome {
	char version[64];
	uint64_t last_seq;       /* highest batch of this agent committed */
};
int wire_put_welcome(struct wire_buf *b, const struct wire_welcome *m);
int wire_get_welcome(const struct wire_frame *f, struct wire_welcome *m,
		     char *err, size_t errlen);

/* collector -> agent: batch seq was committed (or already was). */
struct wire_ack {
	uint64_t seq;            /* >= 1 */
	uint64_t stored, rejected;
	int duplicate;
};
int wire_put_ack(struct wire_buf *b, const struct wire_ack *m);
int wire_get_ack(const struct wire_frame *f, struct wire_ack *m,
		 char *err, size_t errlen);

/* NACK (seq >= 1: that batch was not stored) and ERROR (seq 0: a
 * protocol violation, the sender closes): a reason. */
struct wire_nack {
	uint64_t seq;
	char error[512];
};
int wire_put_nack(struct wire_buf *b, const struct wire_nack *m);
int wire_get_nack(const struct wire_frame *f, struct wire_nack *m,
		  char *err, size_t errlen);

struct wire_error {
	char error[512];
};
int wire_put_error(struct wire_buf *b, const struct wire_error *m);
int wire_get_error(const struct wire_frame *f, struct wire_error *m,
		   char *err, size_t errlen);

/* agent -> collector: counters, a JSON object of the agent's choosing. */
struct wire_stats {
	char *json;              /* decoded: compact text, malloc'ed */
	size_t len;
};
/* m->json must hold a JSON object (the encoder does not parse it). */
int wire_put_stats(struct wire_buf *b, const struct wire_stats *m);
/* Decoded m->json is the object re-encoded compactly; the caller frees
 * it with wire_stats_release(). */
int wire_get_stats(const struct wire_frame *f, struct wire_stats *m,
		   char *err, size_t errlen);
void wire_stats_release(struct wire_stats *m);

/* ---- BATCH (wire_batch.c) --------------------------------------------------
 * Payload: uint32 count, then count x (uint32 len, len bytes of a span
 * record, spanrec.h); seq >= 1.  Built in place behind room for the frame
 * header, so a sealed batch is one contiguous frame (the agent spools it
 * with one write and sends it with sendfile).
 */

#define WIRE_BATCH_COUNT_SIZE 4u
#define WIRE_BATCH_LEN_SIZE   4u

struct wire_batch {
	uint8_t *buf;            /* header room, then the payload */
	uint32_t cap;            /* payload bytes the frame may carry */
	uint32_t len;            /* payload bytes so far (>= 4) */
	uint32_t count;          /* records so far */
	uint32_t max_count;      /* records it may carry */
};

/* Allocate a batch able to carry cap payload bytes (4 .. 16 MiB) and
 * max_count records.  Returns 0, -EINVAL or -ENOMEM; wire_batch_free()
 * releases it (and accepts a batch whose init failed). */
int wire_batch_init(struct wire_batch *b, uint32_t cap, uint32_t max_count);
void wire_batch_free(struct wire_batch *b);
/* Empty it (no record). */
void wire_batch_reset(struct wire_batch *b);

/*
 * Room for one more record of reclen bytes, its length prefix and the
 * new count written (the payload is well formed between calls):
 * *rec points at the reclen bytes for the caller to fill.  Returns 0,
 * -ENOSPC when the batch is full (nothing reserved: seal it and retry on
 * an empty one), or -E2BIG when the record could never fit a batch.
 */
int wire_batch_reserve(struct wire_batch *b, uint32_t reclen, uint8_t **rec);

/* Write the frame header for sequence number seq; returns
 * the frame size (header + payload), the frame being at b->buf. */
uint32_t wire_batch_seal(struct wire_batch *b, uint64_t seq);

/* Walking a received payload, record by record (records not decoded). */
struct wire_batch_rd {
	const uint8_t *p;
	uint32_t len, off;
	uint32_t count, i;
	uint64_t seq;            /* for messages (0: unknown) */
};

/*
 * Start reading the BATCH payload p (len bytes; seq, if not 0, is named
 * in the messages):
 * its count must be present and plausible (count x 4 length bytes fit).
 * Returns 0 with rd->count set, or -EBADMSG with a reason in err.
 */
int wire_batch_open(struct wire_batch_rd *rd, const void *p, uint32_t len,
		    uint64_t seq, char *err, size_t errlen);
/*
 * The next record: 1 with *rec and *reclen set, 0 after the last one (when
 * the payload ends exactly there), or -EBADMSG naming the record, its
 * byte offset and what is wrong in err.
 */
int wire_batch_next(struct wire_batch_rd *rd, const uint8_t **rec, uint32_t *reclen,
		    char *err, size_t errlen);

/*
 * Open a BATCH frame (checks its type and seq >= 1, then as
 * wire_batch_open).  Returns 0, -EPROTO or -EBADMSG with a reason.
 */
int wire_get_batch(const struct wire_frame *f, struct wire_batch_rd *rd,
		   char *err, size_t errlen);

/*
 * Walk a whole payload: fn (may be NULL) for each record; a negative
 * return from fn stops the walk and is returned.  Returns the record
 * count or -EBADMSG with a reason in err.
 */
int wire_batch_walk(const void *payload, uint32_t len,
		    int (*fn)(void *ctx, const void *rec, uint32_t len), void *ctx,
		    char *err, size_t errlen);

#endif
