// SPDX-License-Identifier: MIT
/* blockstack: loopback sockets, whole messages, role set-up. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "blockstack.h"

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int bs_listen(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int fd, one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4) ||
	    getsockname(fd, (struct sockaddr *)&a, &al)) {
		int err = -errno;

		close(fd);
		return err;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

int bs_accept(int lfd)
{
	int fd;

	do
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	nodelay(fd);
	return fd;
}

int bs_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		int err = -errno;

		close(fd);
		return err;
	}
	nodelay(fd);
	return fd;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);   /* roles ignore SIGPIPE */

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* 0, -EPIPE at end of stream before the first byte, -EIO if cut short. */
static int read_all(int fd, void *p, size_t n)
{
	uint8_t *b = p;
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (!r)
			return got ? -EIO : -EPIPE;
		got += (size_t)r;
	}
	return 0;
}

int bs_send(int fd, struct bs_msg *m, const void *data)
{
	struct iovec iov[2] = {
		{ .iov_base = m, .iov_len = sizeof(*m) },
		{ .iov_base = (void *)data, .iov_len = data ? m->len : 0 },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	size_t total = sizeof(*m) + iov[1].iov_len;
	ssize_t w;

	m->magic = BS_MAGIC;
	if (!data)
		m->len = 0;
	/* One sendmsg for the common case; finish with write_all if short. */
	do
		w = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		return -errno;
	if ((size_t)w == total)
		return 0;
	if ((size_t)w < sizeof(*m)) {
		int err = write_all(fd, (uint8_t *)m + w, sizeof(*m) - (size_t)w);

		if (err)
			return err;
		w = 0;
	} else {
		w -= (ssize_t)sizeof(*m);
	}
	return write_all(fd, (const uint8_t *)data + w, iov[1].iov_len - (size_t)w);
}

int bs_reserve(uint8_t **buf, size_t *cap, size_t n)
{
	uint8_t *nb;

	if (n <= *cap)
		return 0;
	nb = realloc(*buf, n);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*cap = n;
	return 0;
}

int bs_recv(int fd, struct bs_msg *m, uint8_t **buf, size_t *cap)
{
	int err = read_all(fd, m, sizeof(*m));

	if (err)
		return err;
	if (m->magic != BS_MAGIC || m->len > BS_MAX_DATA || !m->op ||
	    m->op > BS_QUIT)
		return -EBADMSG;
	m->object[BS_OBJECT_LEN - 1] = '\0';
	m->traceparent[FAY_TRACEPARENT_LEN - 1] = '\0';
	err = bs_reserve(buf, cap, m->len);
	if (err)
		return err;
	err = read_all(fd, *buf, m->len);
	return err == -EPIPE ? -EIO : err;
}

void bs_notify(int fd, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	if (fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write_all(fd, line, (size_t)n))
		fprintf(stderr, "blockstack: cannot report to the parent: %s\n",
			strerror(errno));
}

void bs_role_init(const char *service, int port, int blkin)
{
	int err;

	/* A role never outlives the run that started it; its comm is its
	 * service, so a query can group by layer (s.comm). */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	prctl(PR_SET_NAME, service);
	if (getppid() == 1)
		exit(1);
	signal(SIGPIPE, SIG_IGN);
	err = fay_init(service, "127.0.0.1", port);
	if (err)
		fprintf(stderr, "%s: warning: fay_init: %s; spans are not recorded\n",
			service, strerror(-err));
	if (blkin && (err = blkin_init()))
		fprintf(stderr, "%s: warning: blkin_init: %s\n", service, strerror(-err));
}

uint64_t bs_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
