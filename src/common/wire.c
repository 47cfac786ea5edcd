// SPDX-License-Identifier: MIT
/*
 * The wire protocol's frames: header, crc, and moving whole frames in and
 * out of a socket without blocking (the agent's epoll loop and the
 * collector's connection threads both use these).  Payload codecs are in
 * wire_msg.c (JSON frames) and wire_batch.c (BATCH).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/budget.h"
#include "common/wire.h"
#include "common/zlib.h"

static const char *const type_names[] = {
	[WIRE_HELLO] = "HELLO", [WIRE_WELCOME] = "WELCOME", [WIRE_BATCH] = "BATCH",
	[WIRE_ACK] = "ACK",     [WIRE_NACK] = "NACK",       [WIRE_STATS] = "STATS",
	[WIRE_ERROR] = "ERROR", [WIRE_QUERY] = "QUERY",   [WIRE_QSTATUS] = "QSTATUS",
	[WIRE_PARTIAL] = "PARTIAL", [WIRE_CANCEL] = "CANCEL", [WIRE_BEAT] = "BEAT",
	[WIRE_CAPTURE] = "CAPTURE", [WIRE_CAPTURED] = "CAPTURED",
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
	uint32_t c;

	h.crc = 0;
	c = crc32_of(0, &h, sizeof(h));
	if (hdr->len)
		c = crc32_of(c, payload, hdr->len);
	return c;
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

/* ---- outgoing ------------------------------------------------------------ */

void wire_buf_free(struct wire_buf *b)
{
	if (!b)
		return;
	free(b->p);
	b->p = NULL;
	b->len = b->off = b->cap = 0;
}

int wire_put_frame(struct wire_buf *b, unsigned type, uint64_t seq,
		   const void *payload, uint32_t len)
{
	size_t max = b->max ? b->max : FAY_WIRE_HDR_SIZE + (size_t)FAY_WIRE_MAX_PAYLOAD;
	size_t need = FAY_WIRE_HDR_SIZE + (size_t)len;
	struct wire_hdr h;

	if (len > FAY_WIRE_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (b->off == b->len)
		b->off = b->len = 0;
	if (b->len - b->off + need > max)
		return -ENOBUFS;
	if (b->len + need > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *p;

		if (b->off) {
			memmove(b->p, b->p + b->off, b->len - b->off);
			b->len -= b->off;
			b->off = 0;
		}
		while (cap < b->len + need)
			cap *= 2;
		if (cap > b->cap) {
			p = realloc(b->p, cap);
			if (!p)
				return -ENOMEM;
			b->p = p;
			b->cap = cap;
		}
	}
	wire_hdr_init(&h, type, seq, payload, len);
	memcpy(b->p + b->len, &h, sizeof(h));
	if (len)
		memcpy(b->p + b->len + sizeof(h), payload, len);
	b->len += need;
	return 0;
}

int wire_buf_flush(struct wire_buf *b, int fd)
{
	while (b->off < b->len) {
		ssize_t n = send(fd, b->p + b->off, b->len - b->off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		}
		b->off += (size_t)n;
	}
	b->off = b->len = 0;
	return 0;
}

/* ---- incoming ------------------------------------------------------------ */

#define READER_MIN_CAP (64u << 10)

int wire_reader_init(struct wire_reader *r, uint32_t max_payload)
{
	memset(r, 0, sizeof(*r));
	if (!max_payload || max_payload > FAY_WIRE_MAX_PAYLOAD)
		return -EINVAL;
	r->max_payload = max_payload;
	return 0;
}

void wire_reader_free(struct wire_reader *r)
{
	if (!r)
		return;
	mem_budget_give(r->budget, r->cap);
	free(r->buf);
	r->buf = NULL;
	r->cap = r->len = r->off = r->consumed = 0;
}

/* Is a whole frame buffered?  1 (in f), 0 (not yet: *need = bytes the
 * buffer must hold from r->off), or a negative error. */
static int frame_ready(struct wire_reader *r, struct wire_frame *f, size_t *need,
		       char *err, size_t errlen)
{
	size_t have = r->len - r->off;
	int ret;

	*need = FAY_WIRE_HDR_SIZE;
	if (have < FAY_WIRE_HDR_SIZE)
		return 0;
	memcpy(&f->h, r->buf + r->off, sizeof(f->h));
	ret = wire_hdr_check(&f->h, err, errlen);
	if (ret)
		return ret;
	if (f->h.len > r->max_payload) {
		snprintf(err, errlen, "frame header: %s payload of %u bytes exceeds the %u bytes this side accepts",
			 wire_type_name(f->h.type), f->h.len, r->max_payload);
		return -EPROTO;
	}
	*need = FAY_WIRE_HDR_SIZE + (size_t)f->h.len;
	if (have < *need)
		return 0;
	f->payload = r->buf + r->off + FAY_WIRE_HDR_SIZE;
	ret = wire_crc_check(&f->h, f->payload, err, errlen);
	if (ret)
		return ret;
	r->consumed = *need;
	return 1;
}

int wire_read(struct wire_reader *r, int fd, struct wire_frame *f,
	      char *err, size_t errlen)
{
	size_t need;
	int ret;

	r->off += r->consumed;
	r->consumed = 0;
	if (r->off == r->len && r->cap > READER_MIN_CAP) {
		/* between frames: give back what a large one took */
		mem_budget_give(r->budget, r->cap);
		free(r->buf);
		r->buf = NULL;
		r->cap = r->len = r->off = 0;
	}
	for (;;) {
		ssize_t n;

		ret = frame_ready(r, f, &need, err, errlen);
		if (ret)
			return ret;
		/* Make room for the rest of this frame at least. */
		if (r->off) {
			memmove(r->buf, r->buf + r->off, r->len - r->off);
			r->len -= r->off;
			r->off = 0;
		}
		if (r->cap < need) {
			/* need is the whole frame once its header is in: take
			 * that (in pages), not the next power of two */
			size_t cap = need > READER_MIN_CAP ? (need + 4095) & ~(size_t)4095
							   : READER_MIN_CAP;
			uint8_t *p;

			if (mem_budget_take(r->budget, cap - r->cap)) {
				snprintf(err, errlen, "%zu-byte frame: the memory this side gives frames in flight is taken (%llu of %llu bytes); try again later",
					 need, (unsigned long long)r->budget->used,
					 (unsigned long long)r->budget->max);
				return -ENOBUFS;
			}
			p = realloc(r->buf, cap);
			if (!p) {
				mem_budget_give(r->budget, cap - r->cap);
				snprintf(err, errlen, "%zu-byte frame: out of memory", need);
				return -ENOMEM;
			}
			r->buf = p;
			r->cap = cap;
		}
		n = recv(fd, r->buf + r->len, r->exact ? need - r->len : r->cap - r->len,
			 MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			snprintf(err, errlen, "recv: %s", strerror(errno));
			return -errno;
		}
		if (n == 0) {
			if (r->len == r->off)
				return -ENOTCONN;
			snprintf(err, errlen, "connection closed inside a frame (%zu of %zu bytes)",
				 r->len - r->off, need);
			return -ECONNRESET;
		}
		r->len += (size_t)n;
	}
}

/* ---- blocking frame I/O -------------------------------------------------- */

int wire_send_frame(int fd, unsigned type, uint64_t seq, const void *payload,
		    uint32_t len)
{
	struct wire_hdr h;
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof(h) },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };

	wire_hdr_init(&h, type, seq, payload, len);
	while (m.msg_iovlen) {
		ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		while (m.msg_iovlen && (size_t)n >= m.msg_iov->iov_len) {
			n -= (ssize_t)m.msg_iov->iov_len;
			m.msg_iov++;
			m.msg_iovlen--;
		}
		if (m.msg_iovlen) {
			m.msg_iov->iov_base = (uint8_t *)m.msg_iov->iov_base + n;
			m.msg_iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int wire_buf_send(struct wire_buf *b, int fd)
{
	int ret = 0;

	while (b->off < b->len) {
		ssize_t n = send(fd, b->p + b->off, b->len - b->off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			break;
		}
		b->off += (size_t)n;
	}
	wire_buf_reset(b);
	return ret;
}

int wire_recv_frame(int fd, struct wire_hdr *h, unsigned char **buf, size_t *cap,
		    int timeout_ms, char *why, size_t whylen)
{
	struct wire_reader r = {
		.buf = *buf, .cap = *cap, .max_payload = FAY_WIRE_MAX_PAYLOAD, .exact = 1,
	};
	struct wire_frame f;
	int ret;

	why[0] = '\0';
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };

		ret = wire_read(&r, fd, &f, why, whylen);
		if (ret)
			break;
		ret = poll(&pf, 1, r.len ? WIRE_FRAME_MS : timeout_ms);
		if (ret < 0 && errno == EINTR && r.len)
			continue;
		if (ret <= 0) {
			ret = ret < 0 && errno != EINTR ? -errno : -ETIMEDOUT;
			break;
		}
	}
	*buf = r.buf;
	*cap = r.cap;
	if (ret == 1) {
		*h = f.h;
		memmove(*buf, f.payload, f.h.len);
		return 0;
	}
	return ret == -ENOTCONN ? 1 : ret;
}
