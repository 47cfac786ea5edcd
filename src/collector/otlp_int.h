/* SPDX-License-Identifier: MIT */
/*
 * The collector's OTLP receivers, around src/otlp (the decoding and the
 * mapping to spans):
 *
 *   otlp_http.c       one export request, any transport: decode, map,
 *                     store, count (otlp_ingest); POST /v1/traces
 *   otlp_grpc.c       the gRPC service on one HTTP/2 connection
 *   otlp_grpc_conn.c  the gRPC listener and its connections
 *   otlp_senders.c    the per-sender counters
 */
#ifndef FAY_COLLECTOR_OTLP_INT_H
#define FAY_COLLECTOR_OTLP_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/accept.h"
#include "otlp/otlp.h"

struct collector;
struct sockaddr;

/* ---- otlp_http.c: one export request, any transport ---------------------- */

enum otlp_verdict {
	OTLP_ACCEPTED,          /* every span stored */
	OTLP_PARTIAL,           /* the valid spans stored, rejected > 0 */
	OTLP_BAD,               /* undecodable, or no valid span: 400 / INVALID_ARGUMENT */
	OTLP_TOO_BIG,           /* over --max-body after decompression: 413 /
				   RESOURCE_EXHAUSTED */
	OTLP_BUSY,              /* the ingest queue is full: 429 / UNAVAILABLE */
	OTLP_UNAVAILABLE,       /* the store failed: 503 / UNAVAILABLE */
	OTLP_FULL,              /* the gzip-decoded body did not fit in
				   --max-memory: 503 / UNAVAILABLE, like a
				   body that did not */
	OTLP_NOMEM,
};

struct otlp_outcome {
	enum otlp_verdict verdict;
	uint64_t spans;         /* in the request (0 when it was not decoded) */
	uint64_t accepted;      /* stored */
	uint64_t rejected;      /* not stored: invalid, or all when BUSY/UNAVAILABLE */
	char msg[640];          /* why, for the answer */
};

/*
 * Take one ExportTraceServiceRequest (protobuf or JSON; gzip: inflate it
 * first, at most c->max_body bytes, held inside c->mem until decoded): decode, map, store through
 * ingest_try_write() and count (collector and per-sender counters).  The
 * caller answers from *o in its transport.
 */
void otlp_ingest(struct collector *c, const void *body, size_t len, int protobuf, int gzip,
		 const char *sender, struct otlp_outcome *o);

/* ---- otlp_senders.c ------------------------------------------------------ */

#define OTLP_MAX_SENDERS 64

/* OTLP counters of one client address (otlp_senders.c). */
struct otlp_sender {
	char name[64];
	uint64_t requests, accepted, rejected, refused;
};

/* The IP address of sa as text ("127.0.0.1", "::1"). */
void otlp_addr_str(const struct sockaddr *sa, char *out, size_t outlen);
/* Count o for sender (its address). */
void otlp_sender_count(struct collector *c, const char *sender, const struct otlp_outcome *o);
/* The per-sender lines of /metrics (fay_otlp_sender_*). */
void otlp_sender_metrics(struct collector *c, FILE *f);
/* [{"sender", "requests", "spans_accepted", "spans_rejected",
 * "requests_refused"}] for /api/ui/hosts.  New reference. */
json_t *otlp_senders_json(struct collector *c);


/* ---- otlp_grpc.c, otlp_grpc_conn.c: OTLP/gRPC ----------------------------- */

#define GRPC_POLL_MS    200     /* every thread polls this long at most */

struct nghttp2_session;
struct gstream;

/* The listener (otlp_grpc_new()). */
struct otlp_grpc {
	struct collector *c;
	char addr[64];
	pthread_t thread;
	int stop;                       /* atomic */
	struct acceptor acc;            /* GRPC_CONNS, GRPC_PER_IP (none on
					 * loopback), --max-memory, TLS */
};

/* One connection, on a thread of its own. */
struct gconn {
	struct acc_conn a;              /* fd, ip, its memory (common/accept.h) */
	struct otlp_grpc *g;
	char peer[64];                  /* the sender's name: its address */
	struct nghttp2_session *s;
	struct gstream *streams;        /* freed at the end even when nghttp2
					   never closed them (a broken session) */
};

/*
 * otlp_grpc_serve() - speak HTTP/2 on k->fd (a connected socket, or the
 * plaintext end of its TLS) until the peer closes it, an error, GRPC_IDLE_S
 * without a frame, or k->g->stop; answer every Export stream on the way.
 * Frees every stream and the session; k itself, its fd and its memory are
 * the caller's.
 */
void otlp_grpc_serve(struct gconn *k);

#endif
