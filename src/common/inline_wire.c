// SPDX-License-Identifier: MIT
/*
 * The inline probes' control channel: framing and descriptor passing
 * (inline_wire.h).  Linked into fay and into the runtime library.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/inline_wire.h"

void inline_sock_path(pid_t pid, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%d.sock", INLINE_RUN_DIR, (int)pid);
}

int inline_sweep_stale(void)
{
	DIR *d = opendir(INLINE_RUN_DIR);
	struct dirent *de;
	time_t now = time(NULL);
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char *end, path[300];
		long pid = strtol(de->d_name, &end, 10);
		struct stat st;

		if (pid <= 0 || end == de->d_name ||
		    (strcmp(end, ".sock") && strcmp(end, ".next")))
			continue;
		snprintf(path, sizeof(path), "%s/%s", INLINE_RUN_DIR, de->d_name);
		if (lstat(path, &st) || st.st_mtime + 1 >= now)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (!unlink(path))
			n++;
	}
	closedir(d);
	return n;
}

void inline_hdr(struct inl_hdr *h, enum inl_type type, size_t len, uint32_t count)
{
	h->magic = INLINE_MAGIC;
	h->version = INLINE_VERSION;
	h->type = (uint16_t)type;
	h->len = (uint32_t)len;
	h->count = count;
}

int inline_send(int fd, const void *msg, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)msg, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds < 0 || nfds > 16)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

ssize_t inline_recv(int fd, void *buf, size_t cap, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { buf, cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	int want = nfds ? *nfds : 0, got = 0;
	const struct inl_hdr *h = buf;
	ssize_t n;

	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		int k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < want)
				fds[got++] = f;
			else
				close(f);
		}
	}
	if (nfds)
		*nfds = got;
	if (n == 0)
		return 0;
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n < sizeof(*h) ||
	    h->magic != INLINE_MAGIC || h->version != INLINE_VERSION || h->len != (size_t)n)
		goto proto;
	return n;
proto:
	for (int i = 0; i < got; i++)
		close(fds[i]);
	if (nfds)
		*nfds = 0;
	return -EPROTO;
}
