/* SPDX-License-Identifier: MIT */
/*
 * Cluster queries on the agent <-> collector protocol (wire.h): the
 * frames of a query connection, and their payload codecs.  docs/ABI.md
 * section "Cluster queries" is the description for outsiders.
 *
 * A query connection is a second TCP connection from an agent (or from a
 * child collector, for an aggregation tree) to its collector, apart from
 * the span-shipping one so that a backlog of span batches never delays a
 * window.  It starts like the other (HELLO / WELCOME, JSON) with
 * "role":"query" in the HELLO; then:
 *
 *   coll  -> QUERY    u32 qid, u64 deadline_ns (wall clock, 0: none),
 *                     u64 window_ns, uvar text length, text (UTF-8 FayQL),
 *                     u8 flags (WIRE_QF_*; absent in frames of collectors
 *                     before #20: read as 0)
 *   peer  -> QSTATUS  u32 qid, u8 state (enum wire_qstate), uvar length,
 *                     text (probes attached, or the reason it failed)
 *   peer  -> PARTIAL  u32 qid, u8 flags (WIRE_PF_*), u64 window_start_ns,
 *                     u64 window_end_ns, uvar ncounters, ncounters x uvar
 *                     (drops: map full, pairs full, lost rows), uvar
 *                     nhosts, nhosts x (uvar length, name, u8 WIRE_HS_*),
 *                     then the rest of the payload: the partial results
 *                     (query/partial.h: shape, then rows or records)
 *   coll  -> CANCEL   u32 qid: detach that query's probes now
 *   peer  -> BEAT     empty, every WIRE_BEAT_MS: alive
 *
 * The flight recorder (#22), only to a peer whose HELLO said
 * "capture":true:
 *
 *   coll  -> CAPTURE  u32 cid, u8 kind (enum wire_ckind), u64 trace_hi,
 *                     u64 trace_lo (kind TRACE), u64 from_ns, u64 to_ns
 *                     (kind WINDOW: spans overlapping [from, to], wall
 *                     clock), uvar length, service (WINDOW: only spans of
 *                     that local service; empty: any), then only to a
 *                     child collector: uvar length, host (only that host
 *                     under it; empty or absent: every one); kind QUERY
 *                     (#22 item 4): trace_lo is the key of a query's text
 *                     (wire_query_key()), the events its keep buffers hold
 *                     that arrived in [from, to]
 *   peer  -> CAPTURED u32 cid, u8 state (enum wire_cstate), u8 flags
 *                     (WIRE_CF_*), uvar held, uvar dropped (spans in the
 *                     flight buffer now, and overwritten since the agent
 *                     started), u64 oldest_ns (start of the oldest span
 *                     held, 0: none), then with flag WIRE_CF_LOST: uvar
 *                     lost (spans of the trace asked for that the buffer
 *                     had lost before), then the spans found as a BATCH
 *                     payload (u32 count, count x (u32 len, span record));
 *                     for kind QUERY: held, dropped, oldest and lost are
 *                     the keep buffers' (events held, overwritten, the
 *                     oldest's arrival, overwritten again as lost), each
 *                     record is u64 arrival ns then the event's columns
 *                     (query/partial.h partial_record_encode()), and
 *                     state OFF says no query of that key keeps events
 *                     there
 *
 * Windows are aligned on wall-clock multiples of the query's window on
 * every host.  An agent's PARTIAL names one host (itself, ANSWERED); a
 * child collector's names every host under it with what it knows of each.
 * Partial states carry their format version and parameters
 * (aggr_wire.c); a collector merges only what it knows.
 */
#ifndef FAY_COMMON_WIRE_CLUSTER_H
#define FAY_COMMON_WIRE_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/wire.h"

#define WIRE_BEAT_MS		1000
/* A peer silent this long is dead (its connection is closed). */
#define WIRE_DEAD_MS		3500
#define WIRE_HOST_MAX		255
#define WIRE_QTEXT_MAX		(1u << 20)
#define WIRE_NCOUNTERS_MAX	16
#define WIRE_NHOSTS_MAX		65536

enum wire_qstate {
	WIRE_QS_ATTACHED = 1,	/* probes attached: expect its windows */
	WIRE_QS_FAILED,		/* could not run it here: text says why */
	WIRE_QS_ENDED,		/* ran to its end (deadline, limit) */
};

enum wire_pflags {
	WIRE_PF_WINDOW = 1 << 0,	/* a tumbling window [start, end) */
	WIRE_PF_SNAPSHOT = 1 << 1,	/* cumulative since the start; replaces the last */
	WIRE_PF_FINAL = 1 << 2,		/* the sender's last result of the query */
	WIRE_PF_STREAM = 1 << 3,	/* streamed records, not aggregates */
};

enum wire_hstate {
	WIRE_HS_ANSWERED = 1,
	WIRE_HS_MISSING,	/* expected, did not answer in time */
	WIRE_HS_LATE,		/* answered after the window was emitted */
};

/* A QUERY's flags. */
enum wire_qflags {
	/* The query's requester holds the right to load probes (#20): a
	 * token with the probe scope, or root on the collector's host.  A
	 * peer refuses a query without it (qlink.c), with the reason. */
	WIRE_QF_PROBE = 1 << 0,
};

/* What a CAPTURE asks for. */
enum wire_ckind {
	WIRE_CK_TRACE = 1,	/* every span of one trace id */
	WIRE_CK_WINDOW,		/* every span overlapping [from_ns, to_ns] */
	WIRE_CK_QUERY,		/* the kept events of query trace_lo (its
				 * text's key) that arrived in [from, to] */
};

enum wire_cstate {
	WIRE_CS_ANSWERED = 1,	/* the spans found (maybe none) follow */
	WIRE_CS_OFF,		/* this host keeps no flight buffer (fay agent
				 * without --flight) */
	WIRE_CS_NOHOST,		/* a child collector with no host of the
				 * CAPTURE's name under it: not a member */
	WIRE_CS_MISSING,	/* a child collector: none of the hosts it
				 * asked under it answered (went away, or
				 * silent past its wait) */
};

enum wire_cflags {
	WIRE_CF_CUT = 1 << 0,	/* more spans matched than one frame holds
				 * (WIRE_CAPTURE_MAX): the oldest are left out */
	WIRE_CF_LOST = 1 << 1,	/* a lost count follows oldest_ns (sent only
				 * when not 0: a collector before it reads
				 * the rest) */
	WIRE_CF_PARTIAL = 1 << 2,	/* a child collector: some hosts it asked
				 * under it did not answer */
};

/* The most bytes of span records a CAPTURED carries. */
#define WIRE_CAPTURE_MAX	(15u << 20)
#define WIRE_SERVICE_MAX	255

struct wire_capture {
	uint32_t cid;
	enum wire_ckind kind;
	uint64_t trace_hi, trace_lo;
	uint64_t from_ns, to_ns;
	const char *service;	/* decode: into the payload, not NUL terminated */
	size_t service_len;
	const char *host;	/* to a child collector only (NULL or empty:
				 * none sent); decode: into the payload */
	size_t host_len;
};

struct wire_captured {
	uint32_t cid;
	enum wire_cstate state;
	unsigned flags;		/* WIRE_CF_* */
	uint64_t held, dropped, oldest_ns;
	uint64_t lost;		/* with WIRE_CF_LOST (encode: sets it when
				 * not 0) */
	uint32_t nspans;	/* decode: records in body */
	const unsigned char *body;	/* decode: the BATCH payload, body_len bytes */
	size_t body_len;
};

struct wire_query {
	uint32_t qid;
	uint64_t deadline_ns, window_ns;
	const char *text;	/* decode: points into the payload */
	size_t len;
	unsigned flags;		/* WIRE_QF_* */
};

struct wire_qstatus {
	uint32_t qid;
	enum wire_qstate state;
	const char *text;	/* decode: into the payload, not NUL terminated */
	size_t len;
};

struct wire_phost {
	char name[WIRE_HOST_MAX + 1];
	enum wire_hstate state;
};

struct wire_partial {
	uint32_t qid;
	unsigned flags;
	uint64_t start_ns, end_ns;
	uint64_t counters[WIRE_NCOUNTERS_MAX];
	unsigned ncounters;
	unsigned nhosts;
	struct wire_phost *hosts;	/* decode: allocated, free() it */
	const unsigned char *body;	/* decode: the partial results, body_len bytes */
	size_t body_len;
};

/* The key of a query in keep mode (CAPTURE kind QUERY): FNV-1a (64 bits)
 * of its text, len bytes, as the QUERY frame carried it. */
uint64_t wire_query_key(const char *text, size_t len);

/* Encoders append the payload to w (w->err says if memory ran out). */
void wire_query_encode(const struct wire_query *q, struct wbuf *w);
void wire_qstatus_encode(const struct wire_qstatus *s, struct wbuf *w);
/* The head of a PARTIAL (everything up to the body); append the body
 * (partial_shape_encode + rows) after it. */
void wire_partial_encode_head(const struct wire_partial *p, struct wbuf *w);
void wire_u32_encode(uint32_t qid, struct wbuf *w);	/* CANCEL */

/* CAPTURE; the head of a CAPTURED (everything before its records):
 * append its records after it as a BATCH payload (u32 count, then count
 * x (u32 len, record); u32 0 for none). */
void wire_capture_encode(const struct wire_capture *c, struct wbuf *w);
void wire_captured_encode_head(const struct wire_captured *c, struct wbuf *w);

/* Decoders check every field and length: 0, or -EBADMSG with the reason
 * (field and byte offset) in why. */
int wire_query_decode(const void *p, size_t len, struct wire_query *q,
		      char *why, size_t whylen);
int wire_qstatus_decode(const void *p, size_t len, struct wire_qstatus *s,
			char *why, size_t whylen);
int wire_partial_decode(const void *p, size_t len, struct wire_partial *out,
			char *why, size_t whylen);
int wire_u32_decode(const void *p, size_t len, uint32_t *qid, char *why, size_t whylen);
/* CAPTURE: a known kind, from <= to, a service of at most
 * WIRE_SERVICE_MAX bytes, a host of at most WIRE_HOST_MAX (absent: none).  CAPTURED: a known state, and its records as a
 * BATCH payload (wire_batch_open's checks; the records themselves are the
 * receiver's to decode, spanrec_decode). */
int wire_capture_decode(const void *p, size_t len, struct wire_capture *c,
			char *why, size_t whylen);
int wire_captured_decode(const void *p, size_t len, struct wire_captured *c,
			 char *why, size_t whylen);

/* Blocking frame I/O for these connections: wire_send_frame() and
 * wire_recv_frame() in wire.h. */

#endif
