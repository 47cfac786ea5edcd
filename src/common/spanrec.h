/* SPDX-License-Identifier: MIT */
/*
 * The binary span record: how one finished span is encoded.
 *
 * The same bytes travel the whole way: libfay builds them in a span handle
 * (struct fay_pool_slot, in the shm file), copies them into a ring record
 * at fay_span_end(), the agent copies them into a wire batch (adding the
 * process's endpoint when the span has none) and the collector decodes
 * them into its store.  docs/ABI.md describes the format for outsiders.
 *
 *   struct spanrec_fixed                 64 bytes
 *   items_len bytes of items, each:
 *     uint8  type                        enum spanrec_item_type
 *     uint8  reserved (0)
 *     uint16 alen, uint16 blen
 *     uint64 val                         only for types with a value
 *     alen bytes a, blen bytes b         not NUL-terminated
 *
 * Nothing is aligned inside the items: read them with memcpy (the decoder
 * does).  Integers are little-endian.  A decoder never trusts a record:
 * spanrec_decode() checks every length against the buffer and names the
 * first thing that is wrong.
 */
#ifndef FAY_COMMON_SPANREC_H
#define FAY_COMMON_SPANREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum spanrec_kind {
	SPAN_KIND_UNSET = 0,
	SPAN_KIND_CLIENT,
	SPAN_KIND_SERVER,
	SPAN_KIND_PRODUCER,
	SPAN_KIND_CONSUMER,
	SPAN_KIND_MAX,
};

enum spanrec_flags {
	SPAN_F_SAMPLED   = 1 << 0,
	SPAN_F_DEBUG     = 1 << 1,
	SPAN_F_SHARED    = 1 << 2, /* Zipkin "shared": server half of an RPC span */
	SPAN_F_ERROR     = 1 << 3,
	SPAN_F_TRUNCATED = 1 << 4, /* some items did not fit and were dropped */
	/* One annotation of a span, as BlkKin records them (blkin_record):
	 * the collector merges the partial records of a span id into Zipkin
	 * v2 spans with the V1 rule (cs/cr -> CLIENT, sr/ss -> SERVER,
	 * timestamp and duration from those annotations). */
	SPAN_F_PARTIAL   = 1 << 5,
	/* Recorded though head sampling did not choose it (libfay's
	 * FAY_RECORD=all; SAMPLED is clear): the agent keeps it in its
	 * flight buffer, and it reaches the collector only by a capture. */
	SPAN_F_UNSAMPLED = 1 << 6,
	/* start_ns, duration_ns and the EVENT values are TSC ticks, not ns
	 * (libfay, shm version 2): the agent converts them with the file's
	 * TSC line and clears the bit before anything else reads the
	 * record; never in a BATCH (docs/ABI.md 1.2.2). */
	SPAN_F_TICKS     = 1 << 7,
};

enum spanrec_item_type {
	SPAN_ITEM_NAME = 1,      /* a = span name */
	SPAN_ITEM_EVENT,         /* val = timestamp ns (epoch), a = annotation */
	SPAN_ITEM_TAG,           /* a = key, b = value */
	SPAN_ITEM_TAG_INT,       /* val = (int64) value, a = key */
	SPAN_ITEM_LOCAL_EP,      /* val = port, a = service name, b = ip text */
	SPAN_ITEM_REMOTE_EP,     /* val = port, a = service name, b = ip text */
	SPAN_ITEM_MAX,
};

struct spanrec_fixed {
	uint64_t trace_hi;       /* 128-bit trace id, high half (0 for 64-bit ids) */
	uint64_t trace_lo;
	uint64_t span_id;        /* never 0 */
	uint64_t parent_id;      /* 0 for a root span */
	uint64_t start_ns;       /* CLOCK_REALTIME, ns since the epoch */
	uint64_t duration_ns;
	uint32_t items_len;      /* bytes of items after this struct */
	uint16_t nitems;
	uint8_t kind;            /* enum spanrec_kind */
	uint8_t flags;           /* enum spanrec_flags */
	uint32_t dropped_items;  /* items lost to truncation */
	uint32_t _reserved;
};
_Static_assert(sizeof(struct spanrec_fixed) == 64, "spanrec_fixed");

#define SPANREC_ITEM_HDR 6u
#define SPANREC_STR_MAX  65535u

/* A span handle in the shm pool (fay_shm_hdr.pool_off + i * pool_stride).
 * state is FAY_POOL_OPEN while the span is being recorded: the agent counts
 * handles still open when their process dies as lost spans. */
enum { FAY_POOL_FREE = 0, FAY_POOL_OPEN = 1 };
struct fay_pool_slot {
	uint32_t state;
	uint32_t used;           /* bytes of items in buf */
	uint32_t owner_tid;      /* thread that began the span (diagnostics) */
	uint32_t _reserved;
	struct spanrec_fixed fixed;
	uint8_t buf[];           /* pool_stride - sizeof(struct fay_pool_slot) */
};

/* Does an item of this type carry the 8-byte value? */
static inline int spanrec_item_has_val(unsigned type)
{
	return type == SPAN_ITEM_EVENT || type == SPAN_ITEM_TAG_INT ||
	       type == SPAN_ITEM_LOCAL_EP || type == SPAN_ITEM_REMOTE_EP;
}

/* Bytes an item takes. */
static inline size_t spanrec_item_size(unsigned type, size_t alen, size_t blen)
{
	return SPANREC_ITEM_HDR + (spanrec_item_has_val(type) ? 8 : 0) + alen + blen;
}

/*
 * Append one item at buf + *off (capacity cap).  Strings longer than
 * SPANREC_STR_MAX are cut.  Returns 0, or -ENOSPC (nothing written) when
 * the item does not fit.
 */
int spanrec_put_item(uint8_t *buf, size_t cap, size_t *off, unsigned type,
		     uint64_t val, const char *a, size_t alen,
		     const char *b, size_t blen);

struct spanrec_str {
	const char *p;           /* not NUL-terminated */
	uint32_t len;
};

struct spanrec_ep {
	int present;
	uint16_t port;
	struct spanrec_str service, ip;
};

struct spanrec_item {
	unsigned type;
	uint64_t val;
	struct spanrec_str a, b;
};

/* A decoded, validated view of a span record.  Points into the buffer. */
struct spanrec {
	struct spanrec_fixed f;
	struct spanrec_str name;
	struct spanrec_ep local, remote;
	unsigned nevents, ntags;
	const uint8_t *items;
	uint32_t items_len;
};

/*
 * Decode and validate len bytes at buf.  On success returns the number of
 * bytes the record takes (64 + items_len) and fills *out.  On failure
 * returns -EBADMSG and writes a message naming the problem and its byte
 * offset into err (errlen bytes, may be 0).
 */
int spanrec_decode(const void *buf, size_t len, struct spanrec *out,
		   char *err, size_t errlen);

/* Iterate the items of a decoded record: *off starts at 0.  Returns 1 and
 * fills *it, or 0 at the end. */
int spanrec_next(const struct spanrec *r, uint32_t *off, struct spanrec_item *it);

/* Lower-case hex of ids, as Zipkin writes them: a trace id is 32 chars, or
 * 16 when trace_hi == 0 (a 64-bit id); span ids are 16.  buf must hold 33
 * and 17 bytes. */
void spanrec_trace_hex(uint64_t hi, uint64_t lo, char buf[33]);
void spanrec_id_hex(uint64_t id, char buf[17]);
/* The value of the len (<= 16) hex digits at s into *v: either case, or
 * lower case only when lower_only (as Zipkin's JSON and W3C traceparent
 * require).  0, or -EINVAL (a digit that is not, or len > 16).  Every
 * hex id fay reads goes through it. */
int spanrec_hex_u64(const char *s, size_t len, bool lower_only, uint64_t *v);
/* Parse 16 or 32 hex digits (trace) / 16 (span).  0 or -EINVAL. */
int spanrec_parse_trace(const char *s, size_t len, uint64_t *hi, uint64_t *lo);
int spanrec_parse_id(const char *s, size_t len, uint64_t *id);

#endif
