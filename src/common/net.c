// SPDX-License-Identifier: MIT
/*
 * Socket helpers shared by the collector (agent port, HTTP) and the agent
 * (--metrics): listening sockets and address text.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/net.h"

int net_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len,
		    char *err, size_t errlen)
{
	char host[64] = "127.0.0.1";
	const char *port = s, *colon;
	char *end;
	unsigned long p;

	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || rb[1] != ':' || (size_t)(rb - s - 1) >= sizeof(host)) {
			snprintf(err, errlen, "'%s': expected [IPV6]:PORT", s);
			return -EINVAL;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(rb - s - 1), s + 1);
		port = rb + 2;
	} else if ((colon = strrchr(s, ':'))) {
		if ((size_t)(colon - s) >= sizeof(host)) {
			snprintf(err, errlen, "'%s': host part too long", s);
			return -EINVAL;
		}
		if (colon != s)
			snprintf(host, sizeof(host), "%.*s", (int)(colon - s), s);
		port = colon + 1;
	}
	errno = 0;
	p = strtoul(port, &end, 10);
	if (!*port || *end || errno || p > 65535) {
		snprintf(err, errlen, "'%s': port '%s' is not a number from 0 to 65535", s, port);
		return -EINVAL;
	}
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof(host), "127.0.0.1");
	if (!strcmp(host, "*"))
		snprintf(host, sizeof(host), "0.0.0.0");
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)p);
		*len = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)p);
		*len = sizeof(*in6);
		return 0;
	}
	snprintf(err, errlen, "'%s': '%s' is not an IP address (use 127.0.0.1, ::1, 0.0.0.0, ...)",
		 s, host);
	return -EINVAL;
}

void net_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in4->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(in4->sin_port));
	}
}

int net_listen(const char *addr, int backlog, struct sockaddr_storage *actual,
		char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, ret;

	ret = net_parse_addr(addr, &ss, &len, err, errlen);
	if (ret)
		return ret;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: socket: %s", addr, errstr(ret));
		return ret;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, backlog)) {
		ret = -errno;
		snprintf(err, errlen, "%s: cannot listen: %s", addr, errstr(ret));
		close(fd);
		return ret;
	}
	if (actual) {
		len = sizeof(*actual);
		getsockname(fd, (struct sockaddr *)actual, &len);
	}
	return fd;
}

int net_listen_named(const char *addr, int backlog, char *name, size_t namelen,
		     char *err, size_t errlen)
{
	struct sockaddr_storage actual;
	int fd = net_listen(addr, backlog, &actual, err, errlen);

	if (fd >= 0)
		net_addr_str((struct sockaddr *)&actual, name, namelen);
	return fd;
}

int net_split_addr(const char *s, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon;
	size_t n;

	if (!s || !*s)
		return -EINVAL;
	if (*s == '[') {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':' || !end[2])
			return -EINVAL;
		n = (size_t)(end - s - 1);
		colon = end + 1;
		s++;
	} else {
		colon = strrchr(s, ':');
		if (!colon || !colon[1] || colon == s)
			return -EINVAL;
		n = (size_t)(colon - s);
	}
	if (n >= hlen || strlen(colon + 1) >= plen)
		return -EINVAL;
	for (const char *p = colon + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	if (atoi(colon + 1) < 1 || atoi(colon + 1) > 65535)
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

int net_keepalive(int fd, int idle_s, int intvl_s, int cnt)
{
	/* Keepalive probes only go out while nothing sent is unacknowledged;
	 * a peer that vanished right after we sent it something (an ACK, a
	 * batch) is caught by the user timeout instead of by ~15 minutes of
	 * retransmissions. */
	unsigned user_ms = (unsigned)(idle_s + intvl_s * cnt) * 1000u;
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl_s, sizeof(intvl_s)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms)))
		return -errno;
	return 0;
}

int net_nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ? -errno : 0;
}

int net_quickack(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one)) ? -errno : 0;
}

uint64_t net_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t want = rl.rlim_max;

		rl.rlim_cur = want;
		if (setrlimit(RLIMIT_NOFILE, &rl)) {
			pr_warn("cannot raise the open file limit to %llu: %s",
				(unsigned long long)want, errstr(errno));
			getrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

void net_addr_ip(const struct sockaddr *sa, char *buf, size_t len)
{
	const void *a = sa->sa_family == AF_INET6 ?
		(const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr :
		(const void *)&((const struct sockaddr_in *)sa)->sin_addr;

	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    !inet_ntop(sa->sa_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

int net_accept(int lfd, struct sockaddr_storage *ss, socklen_t *sl)
{
	static uint64_t warned_s;
	int fd = accept4(lfd, (struct sockaddr *)ss, sl, SOCK_CLOEXEC);
	int err = errno;
	struct timespec now;

	if (fd >= 0)
		return fd;
	switch (err) {
	case EINTR:
	case ECONNABORTED:
		return -EAGAIN;
	case EMFILE:
	case ENFILE:
	case ENOBUFS:
	case ENOMEM:
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((uint64_t)now.tv_sec >= __atomic_load_n(&warned_s, __ATOMIC_RELAXED) + 10) {
			__atomic_store_n(&warned_s, (uint64_t)now.tv_sec, __ATOMIC_RELAXED);
			pr_warn("cannot accept a connection: %s%s; new connections wait in the "
				"backlog", strerror(err), err == EMFILE ?
				" (the open-file limit: ulimit -n, systemd's LimitNOFILE)" : "");
		}
		usleep(100000);
		return -EAGAIN;
	default:
		return -err;
	}
}
