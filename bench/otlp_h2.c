// SPDX-License-Identifier: MIT
/* The OTLP/gRPC client of bench_otlp: contract in otlp_h2.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "otlp_h2.h"

struct h2c {
	int fd;
	nghttp2_session *s;
	const uint8_t *msg;             /* the call in flight */
	size_t len, off;
	int32_t id;
	int done, status;
};

static int send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Everything nghttp2 has to send, in one send() where it fits. */
static int flush(struct h2c *h)
{
	uint8_t out[65536];
	size_t len = 0;

	for (;;) {
		const uint8_t *p;
		ssize_t n = nghttp2_session_mem_send(h->s, &p);

		if (n < 0)
			return -1;
		if ((!n || len + (size_t)n > sizeof(out)) && len) {
			if (send_all(h->fd, out, len))
				return -1;
			len = 0;
		}
		if (!n)
			return 0;
		if ((size_t)n > sizeof(out)) {
			if (send_all(h->fd, p, (size_t)n))
				return -1;
			continue;
		}
		memcpy(out + len, p, (size_t)n);
		len += (size_t)n;
	}
}

static ssize_t read_msg(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct h2c *h = user;
	size_t n = h->len - h->off;

	(void)s, (void)id, (void)src;
	if (n > length)
		n = length;
	memcpy(buf, h->msg + h->off, n);
	h->off += n;
	if (h->off == h->len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
		     void *user)
{
	struct h2c *h = user;

	(void)s, (void)flags, (void)valuelen;
	/* nghttp2 ends name and value with a NUL */
	if (f->hd.stream_id == h->id && namelen == 11 && !memcmp(name, "grpc-status", 11))
		h->status = atoi((const char *)value);
	return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *user)
{
	struct h2c *h = user;

	(void)s;
	if (id == h->id) {
		h->done = 1;
		if (code)
			h->status = -1;
	}
	return 0;
}

struct h2c *h2c_open(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	nghttp2_session_callbacks *cb;
	struct h2c *h = calloc(1, sizeof(*h));
	int one = 1;

	if (!h)
		return NULL;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	h->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (h->fd < 0 || connect(h->fd, (struct sockaddr *)&sa, sizeof(sa)))
		goto fail;
	setsockopt(h->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (nghttp2_session_callbacks_new(&cb))
		goto fail;
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
	if (nghttp2_session_client_new(&h->s, cb, h)) {
		nghttp2_session_callbacks_del(cb);
		goto fail;
	}
	nghttp2_session_callbacks_del(cb);
	if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, NULL, 0) || flush(h))
		goto fail;
	return h;
fail:
	h2c_close(h);
	return NULL;
}

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, \
		   NGHTTP2_NV_FLAG_NONE }

int h2c_export(struct h2c *h, const void *msg, size_t len)
{
	nghttp2_nv nv[] = {
		NV(":method", "POST"), NV(":scheme", "http"),
		NV(":path", "/opentelemetry.proto.collector.trace.v1.TraceService/Export"),
		NV(":authority", "127.0.0.1"), NV("content-type", "application/grpc"),
		NV("te", "trailers"),
	};
	nghttp2_data_provider prd = { .read_callback = read_msg };
	uint8_t buf[65536];

	h->msg = msg;
	h->len = len;
	h->off = 0;
	h->done = 0;
	h->status = -1;
	h->id = nghttp2_submit_request(h->s, NULL, nv, sizeof(nv) / sizeof(nv[0]), &prd, NULL);
	if (h->id < 0 || flush(h))
		return -1;
	while (!h->done) {
		ssize_t n = recv(h->fd, buf, sizeof(buf), 0);

		if (n <= 0 || nghttp2_session_mem_recv(h->s, buf, (size_t)n) < 0 || flush(h))
			return -1;
	}
	return h->status;
}

void h2c_close(struct h2c *h)
{
	if (!h)
		return;
	if (h->s)
		nghttp2_session_del(h->s);
	if (h->fd >= 0)
		close(h->fd);
	free(h);
}
