// SPDX-License-Identifier: MIT
/*
 * blockstack mapper (the placement layer), written against ceph/blkin's C
 * API to show libfay's compatibility layer: the composer's context arrives
 * as a traceparent, becomes a blkin_trace_info (packed on the wire as a
 * BlkKin program would keep it), and the mapper's spans are BlkKin traces:
 * "map" (sr .. ss) per object, and under it one "replicate" (writes, to
 * both blockers at once) or "read" (one blocker) client span (cs .. cr).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockstack.h"

struct blocker {
	const char *name;
	int fd;                  /* -1 once it failed */
};

/* The blocker a read of @object goes to (FNV-1a of the name). */
static int primary(const char *object)
{
	uint32_t h = 2166136261u;

	for (; *object; object++)
		h = (h ^ (uint8_t)*object) * 16777619u;
	return (int)(h & 1);
}

/* Forward @m (with @data) to the blockers in @which, all at once, then
 * collect the replies; read data lands in *buf.  Returns 0 or an errno. */
static int fan_out(struct blocker *b, const int *which, int n,
		   struct blkin_trace *map, const struct blkin_endpoint *ep,
		   const struct bs_msg *m, const uint8_t *data,
		   uint8_t **buf, size_t *cap, unsigned long long *spans)
{
	struct blkin_trace sub[2];
	int sent[2] = { 0, 0 }, status = 0;

	for (int k = 0; k < n; k++) {
		struct blocker *x = &b[which[k]];
		struct bs_msg r = *m;

		blkin_init_child(&sub[k], map, ep,
				 m->op == BS_WRITE ? "replicate" : "read");
		BLKIN_TIMESTAMP(&sub[k], ep, CLIENT_SEND);
		BLKIN_KEYVAL_STRING(&sub[k], ep, "blocker", x->name);
		bs_blkin_traceparent(&sub[k].info, r.traceparent);
		if (x->fd >= 0 && !bs_send(x->fd, &r, data)) {
			sent[k] = 1;
			continue;
		}
		status = EIO;
		BLKIN_KEYVAL_STRING(&sub[k], ep, "error", "blocker unreachable");
		BLKIN_TIMESTAMP(&sub[k], ep, CLIENT_RECV);
	}
	for (int k = 0; k < n; k++) {
		struct blocker *x = &b[which[k]];
		struct bs_msg r;
		int err = 0;

		if (!sent[k])
			goto counted;
		err = bs_recv(x->fd, &r, buf, cap);
		if (err) {
			fprintf(stderr, "mapper: %s: %s\n", x->name,
				err == -EPIPE ? "connection closed" : strerror(-err));
			close(x->fd);
			x->fd = -1;
			status = EIO;
			BLKIN_KEYVAL_STRING(&sub[k], ep, "error", "blocker failed");
		} else if (r.op != BS_REPLY || r.id != m->id) {
			status = EPROTO;
		} else if (r.status) {
			status = r.status;
			BLKIN_KEYVAL_STRING(&sub[k], ep, "error", strerror(r.status));
		} else if (m->op == BS_READ && r.len != m->size) {
			status = EPROTO;
		}
		BLKIN_TIMESTAMP(&sub[k], ep, CLIENT_RECV);
counted:
		*spans += sub[k].info.trace_id >= 0;
	}
	return status;
}

int role_mapper(const struct bs_opts *o)
{
	struct blocker b[2] = { { .name = "blocker-1" }, { .name = "blocker-2" } };
	struct blkin_endpoint ep;
	uint8_t *buf = NULL, *rbuf = NULL;
	size_t cap = 0, rcap = 0;
	unsigned long long spans = 0;
	int lfd, port, up = -1, ret = 1, err = 0;
	struct bs_msg m;

	lfd = bs_listen(&port);
	if (lfd < 0) {
		fprintf(stderr, "mapper: listen: %s\n", strerror(-lfd));
		return 1;
	}
	bs_role_init("mapper", port, 1);
	blkin_init_endpoint(&ep, "127.0.0.1", (int16_t)port, "mapper");
	for (int k = 0; k < 2; k++) {
		b[k].fd = bs_connect(o->blocker_ports[k]);
		if (b[k].fd < 0) {
			fprintf(stderr, "mapper: connect to %s on port %d: %s\n",
				b[k].name, o->blocker_ports[k], strerror(-b[k].fd));
			goto out;
		}
	}
	bs_notify(o->notify_fd, "PORT %d", port);
	up = bs_accept(lfd);
	if (up < 0) {
		fprintf(stderr, "mapper: accept: %s\n", strerror(-up));
		goto out;
	}
	for (;;) {
		struct bs_msg r = { .op = BS_REPLY };
		struct blkin_trace_info_packed packed;
		struct blkin_trace_info info;
		struct blkin_trace map;
		int which[2] = { 0, 1 }, n = 2;

		err = bs_recv(up, &m, &buf, &cap);
		if (err || m.op == BS_QUIT)
			break;
		r.id = m.id;
		if ((m.op != BS_WRITE && m.op != BS_READ) ||
		    (m.op == BS_WRITE && m.len != m.size)) {
			r.status = EINVAL;
			goto reply;
		}
		/* What a BlkKin layer keeps of its caller: the packed ids. */
		if (bs_traceparent_blkin(m.traceparent, &info))
			fprintf(stderr, "mapper: request %llu: traceparent '%s' is not a "
				"BlkKin trace; not recorded here\n",
				(unsigned long long)m.id, m.traceparent);
		blkin_pack_trace_info(&info, &packed);
		blkin_unpack_trace_info(&packed, &info);
		blkin_init_child_info(&map, &info, &ep, "map");
		BLKIN_TIMESTAMP(&map, &ep, SERVER_RECV);
		BLKIN_KEYVAL_STRING(&map, &ep, "object", m.object);
		BLKIN_KEYVAL_INTEGER(&map, &ep, "offset", (int64_t)m.offset);
		BLKIN_KEYVAL_INTEGER(&map, &ep, "size", m.size);
		bs_burn(o->cpu_us);
		if (m.op == BS_READ) {
			which[0] = primary(m.object);
			/* A read fails over to the other copy. */
			if (b[which[0]].fd < 0)
				which[0] ^= 1;
			n = 1;
		}
		r.status = (uint16_t)fan_out(b, which, n, &map, &ep, &m,
					     m.op == BS_WRITE ? buf : NULL,
					     &rbuf, &rcap, &spans);
		if (r.status)
			BLKIN_KEYVAL_STRING(&map, &ep, "error", strerror(r.status));
		BLKIN_TIMESTAMP(&map, &ep, SERVER_SEND);
		spans += map.info.trace_id >= 0;
reply:
		r.len = m.op == BS_READ && !r.status ? m.size : 0;
		if (bs_send(up, &r, r.len ? rbuf : NULL))
			break;
	}
	if (err && err != -EPIPE)
		fprintf(stderr, "mapper: from the composer: %s\n", strerror(-err));
	ret = err && err != -EPIPE ? 1 : 0;
out:
	for (int k = 0; k < 2; k++) {
		struct bs_msg q = { .op = BS_QUIT };

		if (b[k].fd < 0)
			continue;
		bs_send(b[k].fd, &q, NULL);
		close(b[k].fd);
	}
	if (up >= 0)
		close(up);
	close(lfd);
	bs_notify(o->notify_fd, "SPANS %llu", spans);
	free(buf);
	free(rbuf);
	return ret;
}
