// SPDX-License-Identifier: MIT
/*
 * blockstack composer (the volume layer): splits each request into pieces
 * of objects (--object-size) and sends them to the mapper one after the
 * other.  Traced with libfay's API: a span per request continuing the
 * vm-client's trace, a child span per object piece.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockstack.h"

/* Serve one request from the vm-client; returns the reply status. */
static int compose(const struct bs_opts *o, int down, struct bs_msg *m,
		   const uint8_t *data, uint8_t *out, uint8_t **buf, size_t *cap,
		   unsigned long long *spans)
{
	int is_write = m->op == BS_WRITE, sampled = bs_traceparent_sampled(m->traceparent);
	struct fay_span *s = fay_span_remote(m->traceparent, is_write ? "write" : "read");
	uint64_t off = m->offset, end = m->offset + m->size;
	int status = 0;

	fay_span_tag_int(s, "offset", (int64_t)m->offset);
	fay_span_tag_int(s, "size", m->size);
	bs_burn(o->cpu_us);
	while (off < end && !status) {
		uint64_t obj = off / o->object_size;
		uint32_t ooff = (uint32_t)(off % o->object_size);
		uint32_t n = o->object_size - ooff;
		struct bs_msg r = { .op = m->op, .id = m->id, .offset = ooff };
		struct fay_span *c;
		int err;

		if (n > end - off)
			n = (uint32_t)(end - off);
		r.size = n;
		snprintf(r.object, sizeof(r.object), "vol.%08llx", (unsigned long long)obj);
		c = fay_span_child(s, "object");
		fay_span_tag(c, "object", r.object);
		fay_span_tag_int(c, "offset", ooff);
		fay_span_tag_int(c, "size", n);
		fay_span_traceparent(c, r.traceparent, sizeof(r.traceparent));
		r.len = is_write ? n : 0;
		err = bs_send(down, &r, is_write ? data + (off - m->offset) : NULL);
		if (!err)
			err = bs_recv(down, &r, buf, cap);
		if (err)
			status = -err;
		else if (r.op != BS_REPLY || r.id != m->id)
			status = EPROTO;
		else if (r.status)
			status = r.status;
		else if (!is_write && r.len != n)
			status = EPROTO;
		else if (!is_write)
			memcpy(out + (off - m->offset), *buf, n);
		if (status)
			fay_span_tag(c, "error", strerror(status));
		fay_span_end(c);
		*spans += sampled;
		off += n;
	}
	if (status)
		fay_span_tag(s, "error", strerror(status));
	fay_span_end(s);
	*spans += sampled;
	return status;
}

int role_composer(const struct bs_opts *o)
{
	uint8_t *buf = NULL, *piece = NULL, *out = NULL;
	size_t cap = 0, pcap = 0, ocap = 0;
	unsigned long long spans = 0;
	int lfd, port, up = -1, down = -1, ret = 1, err;
	struct bs_msg m;

	lfd = bs_listen(&port);
	if (lfd < 0) {
		fprintf(stderr, "composer: listen: %s\n", strerror(-lfd));
		return 1;
	}
	bs_role_init("composer", port, 0);
	down = bs_connect(o->next_port);
	if (down < 0) {
		fprintf(stderr, "composer: connect to the mapper on port %d: %s\n",
			o->next_port, strerror(-down));
		goto out;
	}
	bs_notify(o->notify_fd, "PORT %d", port);
	up = bs_accept(lfd);
	if (up < 0) {
		fprintf(stderr, "composer: accept: %s\n", strerror(-up));
		goto out;
	}
	for (;;) {
		struct bs_msg r = { .op = BS_REPLY };

		err = bs_recv(up, &m, &buf, &cap);
		if (err || m.op == BS_QUIT)
			break;
		if ((m.op != BS_WRITE && m.op != BS_READ) ||
		    (m.op == BS_WRITE && m.len != m.size)) {
			fprintf(stderr, "composer: bad request %llu (op %u, %u of %u bytes)\n",
				(unsigned long long)m.id, m.op, m.len, m.size);
			r.status = EINVAL;
		} else if (m.op == BS_READ && bs_reserve(&out, &ocap, m.size)) {
			r.status = ENOMEM;
		}
		r.id = m.id;
		if (!r.status)
			r.status = (uint16_t)compose(o, down, &m, buf, out, &piece,
						     &pcap, &spans);
		r.len = m.op == BS_READ && !r.status ? m.size : 0;
		if (bs_send(up, &r, r.len ? out : NULL))
			break;
	}
	if (err && err != -EPIPE)
		fprintf(stderr, "composer: from the vm-client: %s\n", strerror(-err));
	ret = err && err != -EPIPE ? 1 : 0;
out:
	if (down >= 0) {
		struct bs_msg q = { .op = BS_QUIT };

		bs_send(down, &q, NULL);
		close(down);
	}
	if (up >= 0)
		close(up);
	close(lfd);
	bs_notify(o->notify_fd, "SPANS %llu", spans);
	free(buf);
	free(piece);
	free(out);
	return ret;
}
