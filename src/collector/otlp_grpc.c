// SPDX-License-Identifier: MIT
/*
 * OTLP/gRPC (--otlp-grpc, default 127.0.0.1:4317): HTTP/2 cleartext
 * through nghttp2 (this is the one file that includes it), serving the
 * unary method /opentelemetry.proto.collector.trace.v1.TraceService/Export
 * with the semantics of OTLP/HTTP (otlp_ingest() in otlp_http.c):
 *
 *   request   a gRPC message: 1 byte compressed flag, 4 bytes length
 *             (big-endian), an ExportTraceServiceRequest; compressed with
 *             grpc-encoding gzip (identity also taken)
 *   answer    HEADERS :status 200, content-type application/grpc; DATA one
 *             message (ExportTraceServiceResponse, partial_success when
 *             some spans were invalid); trailers grpc-status 0
 *   errors    trailers only: grpc-status, grpc-message (percent-encoded),
 *             grpc-status-details-bin (a google.rpc.Status):
 *               INVALID_ARGUMENT (3)    undecodable, no valid span
 *               RESOURCE_EXHAUSTED (8)  over --max-body, after gzip too
 *               UNAVAILABLE (14)        ingest queue full or store down,
 *                                       the body (gzip-decoded too) past
 *                                       --max-memory; with a RetryInfo of 1 s
 *               UNIMPLEMENTED (12)      another method, an unknown
 *                                       grpc-encoding
 *               UNAUTHENTICATED (16)    tokens (--token-file, --token)
 *                                       and no known "authorization:
 *                                       Bearer T"
 *               PERMISSION_DENIED (7)   a token without the write scope
 *
 * The listener, its accept thread and the connections' threads, with their
 * limits and memory, are in otlp_grpc_conn.c; this file serves one
 * connection (otlp_grpc_serve()) and answers its streams.
 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "collector/auth.h"
#include "collector/collector_int.h"
#include "collector/otlp_int.h"
#include "common/net.h"

#define GRPC_PATH       "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define GRPC_IDLE_S     300     /* a connection with no frame for this long is closed */
#define GRPC_RETRY_S    1
#define GRPC_OUT_BUF    65536   /* frames gathered per send() */
#define GRPC_IN_BUF     65536   /* bytes per recv() */
#define GRPC_WINDOW     (1 << 20) /* flow-control window, per stream and connection */

enum { G_OK = 0, G_INVALID_ARGUMENT = 3, G_RESOURCE_EXHAUSTED = 8, G_UNIMPLEMENTED = 12,
       G_INTERNAL = 13, G_UNAVAILABLE = 14, G_UNAUTHENTICATED = 16, G_PERMISSION_DENIED = 7 };

/* One request stream. */
struct gstream {
	int32_t id;
	char path[128];
	char encoding[32];              /* grpc-encoding */
	int bad_type;                   /* content-type not application/grpc */
	char auth[300];                 /* the authorization header ("" none) */
	size_t authlen;
	uint8_t *body;
	size_t len, cap;
	int too_big;
	int answered;
	uint8_t *out;                   /* the response message, framed */
	size_t outlen, outoff;
	struct gstream *next, **pprev;  /* the connection's streams */
};

/* ---- answers ---------------------------------------------------------------- */

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }

/* grpc-message: percent-encode what is not printable ASCII, and '%'. */
static void pct(const char *s, char *out, size_t outlen)
{
	size_t o = 0;

	for (; *s && o + 4 < outlen; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch < 0x20 || ch > 0x7e || ch == '%')
			o += (size_t)snprintf(out + o, outlen - o, "%%%02X", ch);
		else
			out[o++] = (char)ch;
	}
	out[o] = '\0';
}

static void b64(const uint8_t *p, size_t n, char *out, size_t outlen)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n && o + 5 < outlen; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);

		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	out[o] = '\0';
}

/* A trailers-only answer: grpc-status code, its message and details. */
static int answer_error(struct gconn *k, struct gstream *st, int code, const char *msg)
{
	char status[8], text[1024], details[1400];
	void *pb = NULL;
	size_t pblen = 0;
	int retry = code == G_UNAVAILABLE;

	snprintf(status, sizeof(status), "%d", code);
	pct(msg, text, sizeof(text));
	details[0] = '\0';
	if (!otlp_pb_status(code, msg, retry ? GRPC_RETRY_S : 0, &pb, &pblen))
		b64(pb, pblen, details, sizeof(details));
	free(pb);
	nghttp2_nv nv[] = {
		NV(":status", "200"), NV("content-type", "application/grpc"),
		NV("grpc-status", status), NV("grpc-message", text),
		NV("grpc-status-details-bin", details),
	};
	st->answered = 1;
	return nghttp2_submit_response(k->s, st->id, nv, details[0] ? 5 : 4, NULL);
}

static ssize_t read_out(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct gstream *st = src->ptr;
	size_t n = st->outlen - st->outoff;

	if (n > length)
		n = length;
	memcpy(buf, st->out + st->outoff, n);
	st->outoff += n;
	if (st->outoff == st->outlen) {
		nghttp2_nv tr[] = { NV("grpc-status", "0") };

		*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
		if (nghttp2_submit_trailer(s, id, tr, 1))
			return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	return (ssize_t)n;
}

/*
 * Without a token that has the write scope: UNAUTHENTICATED or
 * PERMISSION_DENIED, answered at the stream's first DATA (its body is
 * then never kept) or at its end.  0: go on; 1: answered (or the answer
 * could not be queued: st->answered is 0 then).
 */
static int refused(struct gconn *k, struct gstream *st)
{
	char msg[300];
	unsigned ret = auth_check_bearer(k->g->c->auth, st->authlen ? st->auth : NULL,
					 st->authlen, COLL_SCOPE_WRITE, GRPC_PATH, NULL, msg,
					 sizeof(msg));

	if (!ret)
		return 0;
	msg[strcspn(msg, "\n")] = '\0';
	if (answer_error(k, st, ret == 403 ? G_PERMISSION_DENIED : G_UNAUTHENTICATED, msg))
		st->answered = 0;
	return 1;
}

/* The whole request has arrived: take its one message. */
static int handle(struct gconn *k, struct gstream *st)
{
	struct otlp_outcome o;
	void *pb = NULL;
	size_t pblen = 0, n;
	int gz;

	if (strcmp(st->path, GRPC_PATH)) {
		char msg[256];

		snprintf(msg, sizeof(msg), "unknown method %.120s (this port serves %s)", st->path,
			 GRPC_PATH);
		return answer_error(k, st, G_UNIMPLEMENTED, msg);
	}
	if (refused(k, st))
		return st->answered ? 0 : -1;
	if (st->bad_type)
		return answer_error(k, st, G_INVALID_ARGUMENT, "content-type: expected application/grpc");
	if (st->too_big) {
		char msg[120];

		snprintf(msg, sizeof(msg), "message: larger than the %zu-byte limit (--max-body)",
			 k->g->c->max_body);
		return answer_error(k, st, G_RESOURCE_EXHAUSTED, msg);
	}
	if (st->len < 5)
		return answer_error(k, st, G_INVALID_ARGUMENT, "body: expected one gRPC message "
				    "(a 5-byte prefix and an ExportTraceServiceRequest)");
	n = (size_t)st->body[1] << 24 | (size_t)st->body[2] << 16 | (size_t)st->body[3] << 8 |
	    st->body[4];
	if (n != st->len - 5)
		return answer_error(k, st, G_INVALID_ARGUMENT, "body: the gRPC message length does "
				    "not match the stream (one unary message expected)");
	gz = st->body[0] & 1;
	if (gz && strcmp(st->encoding, "gzip"))
		return answer_error(k, st, G_UNIMPLEMENTED, "grpc-encoding: a compressed message "
				    "needs gzip (grpc-accept-encoding: identity, gzip)");
	otlp_ingest(k->g->c, st->body + 5, n, 1, gz, k->peer, &o);
	switch (o.verdict) {
	case OTLP_ACCEPTED:
	case OTLP_PARTIAL:
		break;
	case OTLP_BAD:
		return answer_error(k, st, G_INVALID_ARGUMENT, o.msg);
	case OTLP_TOO_BIG:
		return answer_error(k, st, G_RESOURCE_EXHAUSTED, o.msg);
	case OTLP_BUSY:
	case OTLP_UNAVAILABLE:
	case OTLP_FULL:
		return answer_error(k, st, G_UNAVAILABLE, o.msg);
	default:
		return answer_error(k, st, G_INTERNAL, "out of memory");
	}
	if (otlp_pb_response(o.rejected, o.msg, &pb, &pblen))
		return answer_error(k, st, G_INTERNAL, "out of memory");
	st->out = malloc(pblen + 5);
	if (!st->out) {
		free(pb);
		return answer_error(k, st, G_INTERNAL, "out of memory");
	}
	st->out[0] = 0;
	st->out[1] = (uint8_t)(pblen >> 24);
	st->out[2] = (uint8_t)(pblen >> 16);
	st->out[3] = (uint8_t)(pblen >> 8);
	st->out[4] = (uint8_t)pblen;
	if (pblen)
		memcpy(st->out + 5, pb, pblen);
	free(pb);
	st->outlen = pblen + 5;
	st->answered = 1;
	nghttp2_nv nv[] = {
		NV(":status", "200"), NV("content-type", "application/grpc"),
		NV("grpc-encoding", "identity"), NV("grpc-accept-encoding", "identity,gzip"),
	};
	nghttp2_data_provider prd = { .source.ptr = st, .read_callback = read_out };

	return nghttp2_submit_response(k->s, st->id, nv, 4, &prd);
}

/* ---- nghttp2 callbacks --------------------------------------------------------- */

/* ---- sending ------------------------------------------------------------------ */

static int send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;      /* SO_SNDTIMEO too: a peer that stopped reading */
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Send every frame nghttp2 has queued, gathered into as few send()s as
 * fit GRPC_OUT_BUF: an answer's HEADERS, DATA and trailers leave in one
 * segment, never one frame held back behind the peer's delayed ACK.  The
 * bytes sent, or -1 (the connection is done).
 */
static ssize_t flush(struct gconn *k)
{
	uint8_t out[GRPC_OUT_BUF];
	size_t len = 0, total = 0;

	for (;;) {
		const uint8_t *p;
		ssize_t n = nghttp2_session_mem_send(k->s, &p);

		if (n < 0)
			return -1;
		if ((!n || len + (size_t)n > sizeof(out)) && len) {
			if (send_all(k->a.fd, out, len))
				return -1;
			total += len;
			len = 0;
		}
		if (!n)
			return (ssize_t)total;
		if ((size_t)n > sizeof(out)) {
			if (send_all(k->a.fd, p, (size_t)n))
				return -1;
			total += (size_t)n;
			continue;
		}
		memcpy(out + len, p, (size_t)n);
		len += (size_t)n;
	}
}

/* ---- receiving ---------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
	struct gconn *k = user;
	struct gstream *st;

	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	st->id = f->hd.stream_id;
	st->next = k->streams;
	st->pprev = &k->streams;
	if (k->streams)
		k->streams->pprev = &st->next;
	k->streams = st;
	nghttp2_session_set_stream_user_data(s, f->hd.stream_id, st);
	return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
		     void *user)
{
	struct gstream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);

	if (!st || f->hd.type != NGHTTP2_HEADERS)
		return 0;
#define IS(n) (namelen == sizeof(n) - 1 && !memcmp(name, n, namelen))
	if (IS(":path"))
		snprintf(st->path, sizeof(st->path), "%.*s", (int)valuelen, (const char *)value);
	else if (IS("grpc-encoding"))
		snprintf(st->encoding, sizeof(st->encoding), "%.*s", (int)valuelen,
			 (const char *)value);
	else if (IS("content-type"))
		st->bad_type = valuelen < 16 || memcmp(value, "application/grpc", 16);
	else if (IS("authorization")) {
		/* longer than any token: kept cut, so it matches none */
		st->authlen = valuelen < sizeof(st->auth) ? valuelen : sizeof(st->auth) - 1;
		memcpy(st->auth, value, st->authlen);
		st->auth[st->authlen] = '\0';
	}
#undef IS
	return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
		   size_t len, void *user)
{
	struct gconn *k = user;
	struct gstream *st = nghttp2_session_get_stream_user_data(s, id);
	size_t max = k->g->c->max_body + 5;

	if (!st || st->too_big || st->answered)
		return 0;
	if (!st->len && refused(k, st))
		return st->answered ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
	if (st->len + len > max) {
		st->too_big = 1;
		mem_budget_give(&k->g->c->mem, st->cap);
		free(st->body);
		st->body = NULL;
		st->len = st->cap = 0;
		/* answer now; once that is sent, RST_STREAM (NO_ERROR) tells the
		 * client to stop sending (on_sent) */
		return answer_error(k, st, G_RESOURCE_EXHAUSTED, "message: larger than --max-body") ?
		       NGHTTP2_ERR_CALLBACK_FAILURE : 0;
	}
	if (st->len + len > st->cap) {
		size_t cap = st->cap ? st->cap : 16384;
		uint8_t *nb;

		while (cap < st->len + len)
			cap *= 2;
		/* the old and the new buffer both charged while realloc() copies */
		nb = mem_budget_realloc(&k->g->c->mem, st->body, st->cap, cap);
		if (!nb && errno == ENOBUFS) {
			M_ADD(k->g->c, http_busy, 1);
			return answer_error(k, st, G_UNAVAILABLE, "busy: the collector holds its "
					    "--max-memory of bodies and frames in flight; retry later") ?
			       NGHTTP2_ERR_CALLBACK_FAILURE : 0;
		}
		if (!nb)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		st->body = nb;
		st->cap = cap;
	}
	memcpy(st->body + st->len, data, len);
	st->len += len;
	return 0;
}

static int on_frame(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
	struct gstream *st;

	if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!st || st->answered)
		return 0;
	return handle(user, st) ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_sent(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
	struct gstream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);

	if (st && st->too_big && f->hd.type == NGHTTP2_HEADERS &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
	return 0;
}

static void stream_free(struct gconn *k, struct gstream *st)
{
	*st->pprev = st->next;
	if (st->next)
		st->next->pprev = st->pprev;
	mem_budget_give(&k->g->c->mem, st->cap);
	free(st->body);
	free(st->out);
	free(st);
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *user)
{
	struct gstream *st = nghttp2_session_get_stream_user_data(s, id);

	if (st) {
		nghttp2_session_set_stream_user_data(s, id, NULL);
		stream_free(user, st);
	}
	return 0;
}

/* ---- a connection ------------------------------------------------------------ */

void otlp_grpc_serve(struct gconn *k)
{
	nghttp2_session_callbacks *cb;
	/* a 512-span request (~190 KB) in one go, not 64 KB per round trip
	 * of WINDOW_UPDATE; the body is charged as it arrives (on_data) */
	nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 64 },
					{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, GRPC_WINDOW } };
	uint8_t buf[GRPC_IN_BUF];
	int idle_ms = 0;

	if (nghttp2_session_callbacks_new(&cb))
		return;
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_sent);
	if (nghttp2_session_server_new(&k->s, cb, k)) {
		nghttp2_session_callbacks_del(cb);
		return;
	}
	nghttp2_session_callbacks_del(cb);
	if (nghttp2_submit_settings(k->s, NGHTTP2_FLAG_NONE, iv, 2) ||
	    nghttp2_session_set_local_window_size(k->s, NGHTTP2_FLAG_NONE, 0, GRPC_WINDOW) ||
	    flush(k) < 0)
		goto out;
	while (!__atomic_load_n(&k->g->stop, __ATOMIC_RELAXED) &&
	       (nghttp2_session_want_read(k->s) || nghttp2_session_want_write(k->s))) {
		struct pollfd p = { .fd = k->a.fd, .events = POLLIN };
		ssize_t n;
		int got;

		if (nghttp2_session_want_write(k->s))
			p.events |= POLLOUT;
		n = poll(&p, 1, GRPC_POLL_MS);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0) {
			if ((idle_ms += GRPC_POLL_MS) > GRPC_IDLE_S * 1000)
				break;
			continue;
		}
		idle_ms = 0;
		got = 0;
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			n = recv(k->a.fd, buf, sizeof(buf), 0);
			if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR)))
				break;
			if (n > 0 && nghttp2_session_mem_recv(k->s, buf, (size_t)n) < 0)
				break;
			got = n > 0;
		}
		n = flush(k);
		if (n < 0)
			break;
		/* a stream begun and not answered: the rest of it is awaited,
		 * perhaps behind our delayed ACK (net.h) */
		if (got && !n && k->streams)
			net_quickack(k->a.fd);
	}
out:
	nghttp2_session_del(k->s);
	while (k->streams)
		stream_free(k, k->streams);
}
