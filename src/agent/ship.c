// SPDX-License-Identifier: MIT
/*
 * Shipping spooled batches to the collector (the conversation in
 * src/common/wire.h): a non-blocking TCP connection driven by the agent's
 * epoll loop.  Batch frames go straight from their spool file to the socket
 * with sendfile(); control frames (HELLO, STATS) from a memory buffer,
 * never interleaved inside another frame.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/ship.h"
#include "common/net.h"
#include "common/tls.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/rand.h"

#define BACKOFF_MIN_NS   (100 * 1000000ull)
#define BACKOFF_MAX_NS   (5000 * 1000000ull)
#define WELCOME_TIMEOUT  (10 * 1000000000ull)
#define ACK_TIMEOUT      (30 * 1000000000ull)
#define TX_MAX           (4u << 20)
#define RX_MAX           (64u << 10)  /* collector frames are small */

int ship_init(struct ship *s, const char *addr, const struct wire_hello *hello,
	      struct spool *sp, uint64_t *next_seq, int epfd, void *tag)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->file_fd = -1;
	s->epfd = epfd;
	s->tag = tag;
	s->sp = sp;
	s->next_seq = next_seq;
	s->window = SHIP_WINDOW;
	if (net_split_addr(addr, s->host, sizeof(s->host), s->port, sizeof(s->port)))
		return -EINVAL;
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	s->hello = *hello;
	s->tx.max = TX_MAX;
	return wire_reader_init(&s->rx, RX_MAX);
}

void ship_free(struct ship *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	if (s->file_fd >= 0)
		close(s->file_fd);
	s->fd = s->file_fd = -1;
	wire_buf_free(&s->tx);
	wire_reader_free(&s->rx);
}

static void set_out(struct ship *s, int on)
{
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0),
				  .data.ptr = s->tag };

	if (s->out_armed == on)
		return;
	if (!epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->fd, &ev))
		s->out_armed = on;
}

/* Forget the connection; everything in flight will be sent again. */
static void reset(struct ship *s, uint64_t now)
{
	uint64_t delay = BACKOFF_MIN_NS << (s->attempt < 6 ? s->attempt : 6);

	if (delay > BACKOFF_MAX_NS)
		delay = BACKOFF_MAX_NS;
	if (s->attempt < 16)
		s->attempt++;
	/* Full jitter on the upper half: delay/2 .. delay. */
	delay = delay / 2 + rand_u64() % (delay / 2 + 1);
	s->next_try_ns = now + delay;
	if (s->fd >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->fd, NULL);
		close(s->fd);
		s->disconnects++;
	}
	s->fd = -1;
	if (s->file_fd >= 0)
		close(s->file_fd);
	s->file_fd = -1;
	wire_buf_reset(&s->tx);
	wire_reader_reset(&s->rx);
	s->out_armed = 0;
	s->state = SHIP_DOWN;
	for (struct spool_ent *e = spool_first(s->sp); e; e = spool_next(s->sp, e))
		e->sent = 0;
	s->sp->nsent = 0;
}

/* Log a connection problem: the first of a streak as a warning, the
 * repeats (reconnect attempts while the collector is away) as debug. */
__attribute__((format(printf, 2, 3)))
static void conn_problem(struct ship *s, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!s->down_logged)
		pr_warn("collector %s: %s; retrying with backoff", s->addr, msg);
	else
		pr_debug("collector %s: %s", s->addr, msg);
	s->down_logged = 1;
}

/*
 * TLS on the connected socket: s->fd becomes the plaintext end (tls.h), in
 * the epoll set in its place.  The handshake (the collector's certificate
 * checked) runs on the TLS thread, so this loop never waits for it; when
 * it fails the thread logs why and s->fd sees EOF, and the HELLO deadline
 * covers a collector that never answers.  0, or -errno (s->fd is -1).
 */
static int tls_up(struct ship *s)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = s->tag };
	int fd;

	epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	fd = tls_connect_bg(s->tls, s->fd, s->host);
	s->fd = -1;
	if (fd < 0) {
		conn_problem(s, "TLS: %s", errstr(fd));
		return fd;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	s->fd = fd;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev))
		return -errno;
	s->out_armed = 1;
	return 0;
}

static void connected(struct ship *s, uint64_t now)
{
	int one = 1;

	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A collector gone silent (link down) is noticed in seconds, not at
	 * the next ACK timeout, so reconnecting starts early. */
	net_keepalive(s->fd, NET_KEEPALIVE_IDLE_S, NET_KEEPALIVE_INTVL_S, NET_KEEPALIVE_CNT);
	if (s->tls && tls_up(s)) {
		reset(s, now);
		return;
	}
	s->state = SHIP_HELLO;
	s->hello_ns = now;
	if (wire_put_hello(&s->tx, &s->hello))
		reset(s, now);
}

static void try_connect(struct ship *s, uint64_t now)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC };
	struct addrinfo *res = NULL, *ai;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = s->tag };
	int ret, fd = -1;

	ret = getaddrinfo(s->host, s->port, &hints, &res);
	if (ret) {
		conn_problem(s, "cannot resolve %s: %s", s->host, gai_strerror(ret));
		reset(s, now);
		return;
	}
	/* Rotate through the addresses on successive attempts. */
	{
		unsigned n = 0, k;

		for (ai = res; ai; ai = ai->ai_next)
			n++;
		k = s->attempt % n;
		for (ai = res; k--; )
			ai = ai->ai_next;
	}
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0) {
		conn_problem(s, "socket: %s", errstr(errno));
		freeaddrinfo(res);
		reset(s, now);
		return;
	}
	ret = connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(res);
	if (ret && errno != EINPROGRESS) {
		conn_problem(s, "connect: %s", errstr(errno));
		close(fd);
		reset(s, now);
		return;
	}
	s->fd = fd;
	s->connects++;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		pr_err("collector %s: epoll: %s", s->addr, errstr(errno));
		reset(s, now);
		return;
	}
	s->out_armed = 1;
	s->conn_ns = now;
	if (!ret)
		connected(s, now);
	else
		s->state = SHIP_CONNECTING;
}

/* Send what can be sent without blocking.  Returns 0 or -errno (the
 * caller resets the connection). */
static int pump(struct ship *s, uint64_t now)
{
	for (;;) {
		if (s->file_fd >= 0) {
			ssize_t n = sendfile(s->fd, s->file_fd, &s->file_off,
					     s->file_end - s->file_off);

			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					goto blocked;
				return -errno;
			}
			if (n == 0)
				return -EIO; /* the spool file shrank under us */
			s->bytes_sent += (uint64_t)n;
			if (s->file_off == s->file_end) {
				close(s->file_fd);
				s->file_fd = -1;
				s->batches_sent++;
			}
			continue;
		}
		if (wire_buf_pending(&s->tx)) {
			size_t before = wire_buf_pending(&s->tx);
			int ret = wire_buf_flush(&s->tx, s->fd);

			s->bytes_sent += before - wire_buf_pending(&s->tx);
			if (ret == -EAGAIN)
				goto blocked;
			if (ret)
				return ret;
			continue;
		}
		if (s->state != SHIP_READY || s->sp->nsent >= s->window)
			break;
		/* The oldest batch neither in flight nor acknowledged: batches
		 * go out in seq order. */
		struct spool_ent *e = spool_first(s->sp);

		while (e && (e->sent || e->acked))
			e = spool_next(s->sp, e);
		if (!e)
			break;
		int fd = spool_open_ent(s->sp, e);

		if (fd < 0) {
			pr_err("spool: cannot open batch %" PRIu64 ": %s; dropping it (%u spans lost)",
			       e->seq, errstr(fd), e->nspans);
			s->sp->evicted_spans += e->nspans;
			s->sp->evicted_batches++;
			spool_drop(s->sp, e);
			continue;
		}
		s->file_fd = fd;
		s->file_off = 0;
		s->file_end = e->frame_len;
		e->sent = 1;
		e->sent_ns = now;
		s->sp->nsent++;
	}
	set_out(s, 0);
	return 0;
blocked:
	set_out(s, 1);
	return 0;
}

void ship_pump(struct ship *s, uint64_t now)
{
	int ret;

	if (s->fd < 0 || s->state == SHIP_CONNECTING)
		return;
	ret = pump(s, now);
	if (ret) {
		conn_problem(s, "send: %s", errstr(ret));
		reset(s, now);
	}
}

/* Returns 0, or -ECONNABORTED when the collector has batches under our id
 * that this agent never numbered (the caller resets the connection). */
static int on_welcome(struct ship *s, const struct wire_welcome *m, uint64_t now)
{
	uint64_t last = m->last_seq;
	unsigned dropped = 0;

	if (last >= *s->next_seq) {
		/* Batches this agent never numbered are committed under its
		 * id: another agent has it (a cloned state directory), or this
		 * one lost its state but kept its id.  Taking WELCOME at its
		 * word would drop our spooled batches as "already committed"
		 * and number new ones after the other agent's: keep them, say
		 * why, and retry (with backoff) until the id is fixed. */
		s->id_clashes++;
		pr_err("collector %s: it has batches of this agent id up to %" PRIu64
		       ", past any this agent numbered (next %" PRIu64 "): another agent uses "
		       "this id (a cloned state directory?); not shipping, %" PRIu64 " batches "
		       "kept in the spool; remove agent_id from the state directory of one of "
		       "them", s->addr, last, *s->next_seq, s->sp->nbatches);
		return -ECONNABORTED;
	}
	s->state = SHIP_READY;
	if (!s->nacked)
		s->attempt = 0;
	if (s->down_logged || !s->welcomed)
		pr_info("collector %s: connected (last committed batch %" PRIu64
			", %" PRIu64 " batches spooled)", s->addr, last, s->sp->nbatches);
	s->down_logged = 0;
	s->welcomed = 1;
	s->last_seq = last;
	for (struct spool_ent *e = spool_first(s->sp), *nx; e && e->seq <= last; e = nx) {
		nx = spool_next(s->sp, e);
		if (e->acked)
			continue;
		s->spans_acked += e->nspans;
		s->batches_acked++;
		spool_ack(s->sp, e);
		dropped++;
	}
	if (dropped)
		pr_info("collector %s: %u spooled batches were already committed; dropped",
			s->addr, dropped);
	(void)now;
	return 0;
}

static void on_ack(struct ship *s, const struct wire_ack *m)
{
	struct spool_ent *e = spool_find(s->sp, m->seq);

	if (m->rejected) {
		s->spans_rejected += m->rejected;
		pr_warn("collector %s: batch %" PRIu64 ": %" PRIu64 " spans rejected",
			s->addr, m->seq, m->rejected);
	}
	if (m->duplicate)
		s->batches_duplicate++;
	s->nacked = 0;
	s->attempt = 0;
	if (!e || e->acked) {
		pr_debug("collector %s: ACK for batch %" PRIu64 ", not in the spool (evicted?)",
			 s->addr, m->seq);
		return;
	}
	s->batches_acked++;
	s->spans_acked += e->nspans;
	if (m->seq > s->last_seq)
		s->last_seq = m->seq;
	spool_ack(s->sp, e);
}

/*
 * A NACK: the batch was not stored (the store is busy or failing).  The
 * collector closes the connection after a NACK and commits no later batch
 * sent on it (src/common/wire.h), so the batches it did commit are a
 * prefix of what was sent, in seq order: reconnect with backoff, learn the
 * last committed seq from WELCOME, and resend from the first batch not
 * acknowledged, under the same seqs.  (Earlier agents renumbered a NACKed
 * batch because the collector used to go on committing later batches,
 * which would have turned the resent one into a "duplicate".)  The agent
 * closes its side too, so it never depends on the collector's timing.
 * Returns -ECONNABORTED: the caller resets the connection.
 */
static int on_nack(struct ship *s, const struct wire_nack *m)
{
	s->batches_nacked++;
	s->nacked = 1;
	pr_warn("collector %s: batch %" PRIu64 " not stored: %s; reconnecting to resend it",
		s->addr, m->seq, m->error);
	return -ECONNABORTED;
}

/* Handle one complete frame.  Returns 0, -EPROTO or -ECONNABORTED
 * (after a NACK): the caller resets the connection. */
static int on_frame(struct ship *s, const struct wire_frame *f, uint64_t now)
{
	union {
		struct wire_welcome welcome;
		struct wire_ack ack;
		struct wire_nack nack;
		struct wire_error error;
	} m;
	char err[256];
	int ret;

	switch (f->h.type) {
	case WIRE_WELCOME:
		if (s->state != SHIP_HELLO) {
			pr_err("collector %s: unexpected WELCOME; resetting", s->addr);
			return -EPROTO;
		}
		ret = wire_get_welcome(f, &m.welcome, err, sizeof(err));
		if (!ret)
			return on_welcome(s, &m.welcome, now);
		break;
	case WIRE_ACK:
	case WIRE_NACK:
		if (s->state != SHIP_READY) {
			pr_err("collector %s: %s before WELCOME; resetting", s->addr,
			       wire_type_name(f->h.type));
			return -EPROTO;
		}
		if (f->h.type == WIRE_ACK) {
			ret = wire_get_ack(f, &m.ack, err, sizeof(err));
			if (!ret)
				on_ack(s, &m.ack);
		} else {
			ret = wire_get_nack(f, &m.nack, err, sizeof(err));
			if (!ret)
				return on_nack(s, &m.nack);
		}
		break;
	case WIRE_ERROR:
		ret = wire_get_error(f, &m.error, err, sizeof(err));
		if (!ret) {
			pr_err("collector %s: ERROR: %s", s->addr, m.error.error);
			s->errors++;
			return -EPROTO;
		}
		break;
	default:
		pr_err("collector %s: unexpected %s frame; resetting", s->addr,
		       wire_type_name(f->h.type));
		return -EPROTO;
	}
	if (ret) {
		pr_err("collector %s: %s; resetting the connection", s->addr, err);
		return -EPROTO;
	}
	return 0;
}

static int do_read(struct ship *s, uint64_t now)
{
	for (;;) {
		struct wire_frame f;
		char err[256];
		int ret = wire_read(&s->rx, s->fd, &f, err, sizeof(err));

		if (ret == 0)
			return 0;
		if (ret == -ENOTCONN)
			return -ECONNRESET;
		if (ret == -EPROTO || ret == -EBADMSG || ret == -ENOMEM) {
			pr_err("collector %s: %s; resetting the connection", s->addr, err);
			return -EPROTO;
		}
		if (ret < 0)
			return ret;
		ret = on_frame(s, &f, now);
		if (ret)
			return ret;
	}
}

void ship_event(struct ship *s, uint32_t events, uint64_t now)
{
	int ret;

	if (s->fd < 0)
		return;
	if (s->state == SHIP_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);

		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err) {
			conn_problem(s, "connect: %s", errstr(err));
			reset(s, now);
			return;
		}
		connected(s, now);
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
		ret = do_read(s, now);
		if (ret) {
			if (ret != -EPROTO && ret != -ECONNABORTED)
				conn_problem(s, "connection lost: %s",
					     ret == -ECONNRESET ? "closed by the collector" : errstr(ret));
			else
				s->down_logged = 1;
			reset(s, now);
			return;
		}
	}
	ship_pump(s, now);
}

void ship_tick(struct ship *s, uint64_t now)
{
	if (s->fd < 0) {
		if (now >= s->next_try_ns)
			try_connect(s, now);
		if (s->fd < 0)
			return;
	}
	if (s->state == SHIP_CONNECTING && now > s->conn_ns + WELCOME_TIMEOUT) {
		conn_problem(s, "connect timed out");
		reset(s, now);
		return;
	}
	if (s->state == SHIP_HELLO && now > s->hello_ns + WELCOME_TIMEOUT) {
		conn_problem(s, "no WELCOME within 10 s of HELLO");
		reset(s, now);
		return;
	}
	if (s->state == SHIP_READY && s->sp->nsent) {
		for (struct spool_ent *e = spool_first(s->sp); e; e = spool_next(s->sp, e)) {
			if (e->sent && now > e->sent_ns + ACK_TIMEOUT) {
				conn_problem(s, "no ACK for batch %" PRIu64 " in 30 s", e->seq);
				reset(s, now);
				return;
			}
			if (e->sent)
				break;
		}
	}
	ship_pump(s, now);
}

int ship_send_stats(struct ship *s, const char *json, size_t len, uint64_t now)
{
	int ret;

	if (s->state != SHIP_READY)
		return -ENOTCONN;
	ret = wire_put_stats(&s->tx, &(struct wire_stats){ .json = (char *)json, .len = len });
	if (!ret)
		ship_pump(s, now);
	return ret;
}

int ship_idle(const struct ship *s)
{
	return !spool_unacked(s->sp) && s->file_fd < 0 && !wire_buf_pending(&s->tx);
}
