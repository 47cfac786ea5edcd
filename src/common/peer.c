// SPDX-License-Identifier: MIT
/* The owner of a connection's peer socket on this host: see peer.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/peer.h"

/* Contract in peer.h. */
const char *peer_uid_name(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (!getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) && res)
		snprintf(buf, len, "uid %u (%s)", (unsigned)uid, res->pw_name);
	else
		snprintf(buf, len, "uid %u", (unsigned)uid);
	return buf;
}

static int is_loopback(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
	if (a->ss_family == AF_INET6) {
		const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(x))
			return x->s6_addr[12] == 127;
		return IN6_IS_ADDR_LOOPBACK(x);
	}
	return 0;
}

/* Port (network order) and address words of a (IPv4: one word). */
static void parts(const struct sockaddr_storage *a, __be16 *port, __be32 addr[4])
{
	memset(addr, 0, 16);
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)a;

		*port = s->sin_port;
		addr[0] = s->sin_addr.s_addr;
	} else {
		const struct sockaddr_in6 *s = (const void *)a;

		*port = s->sin6_port;
		memcpy(addr, &s->sin6_addr, 16);
	}
}

/*
 * sock_diag's exact lookup (inet_diag, no dump): the TCP socket whose own
 * address is them and whose peer is me, i.e. the other end of our
 * connection.  0 with *uid, -ENOENT (no such socket), or -errno of the
 * netlink socket (-EPROTONOSUPPORT etc.: inet_diag is not there).
 */
static int diag_uid(const struct sockaddr_storage *me, const struct sockaddr_storage *them,
		    uid_t *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
		.r = { .sdiag_family = (__u8)them->ss_family, .sdiag_protocol = IPPROTO_TCP,
		       .idiag_states = ~0u },
	};
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	struct timeval tv = { .tv_sec = 1 };
	union {
		struct nlmsghdr h;
		char b[8192];
	} ans;
	int fd, ret = -ENOENT;
	ssize_t n;

	parts(them, &req.r.id.idiag_sport, req.r.id.idiag_src);
	parts(me, &req.r.id.idiag_dport, req.r.id.idiag_dst);
	req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
		ret = -errno;
		goto out;
	}
	n = recv(fd, &ans, sizeof(ans), 0);
	if (n < 0) {
		ret = -errno;
		goto out;
	}
	for (struct nlmsghdr *h = &ans.h; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			ret = e->error ? e->error : -ENOENT;
			break;
		}
		if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
		    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
			const struct inet_diag_msg *m = NLMSG_DATA(h);

			*uid = m->idiag_uid;
			ret = 0;
			break;
		}
	}
out:
	close(fd);
	return ret;
}

/*
 * The same from /proc/net/tcp or tcp6: the line whose local address is
 * them and whose remote address is me.  Addresses there are the words of
 * the address in this host's byte order, the port in hex.
 */
static int proc_uid(const struct sockaddr_storage *me, const struct sockaddr_storage *them,
		    uid_t *uid)
{
	int v6 = them->ss_family == AF_INET6, nw = v6 ? 4 : 1, ret = -ENOENT;
	FILE *f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "re");
	char line[512], want_l[64], want_r[64];
	__be32 a[4];
	__be16 port;

	if (!f)
		return -errno;
	want_l[0] = want_r[0] = '\0';
	for (int side = 0; side < 2; side++) {
		char *w = side ? want_r : want_l;
		size_t len = 0;

		parts(side ? me : them, &port, a);
		for (int i = 0; i < nw; i++)
			len += (size_t)snprintf(w + len, 64 - len, "%08X", (unsigned)a[i]);
		snprintf(w + len, 64 - len, ":%04X", (unsigned)ntohs(port));
	}
	while (fgets(line, sizeof(line), f)) {
		char l[64], r[64];
		unsigned u;

		if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %u", l, r, &u) != 3)
			continue;
		if (!strcmp(l, want_l) && !strcmp(r, want_r)) {
			*uid = u;
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/* Contract in peer.h. */
int peer_uid(int fd, uid_t *uid, char *why, size_t whylen)
{
	struct sockaddr_storage me, them;
	socklen_t ml = sizeof(me), tl = sizeof(them);
	char ip[INET6_ADDRSTRLEN] = "?";
	int ret;

	if (getsockname(fd, (struct sockaddr *)&me, &ml) ||
	    getpeername(fd, (struct sockaddr *)&them, &tl)) {
		ret = -errno;
		snprintf(why, whylen, "the connection's addresses: %s", strerror(-ret));
		return ret;
	}
	if (them.ss_family == AF_UNIX) {
		struct ucred cr;
		socklen_t cl = sizeof(cr);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl)) {
			ret = -errno;
			snprintf(why, whylen, "SO_PEERCRED: %s", strerror(-ret));
			return ret;
		}
		if (cr.pid == getpid()) {
			/* our own end of a socket pair: TLS (common/tls.h) hands
			 * the plaintext over one, and the client is beyond it */
			snprintf(why, whylen, "the connection comes through this process's own "
				 "TLS layer, which does not tell whose socket it is");
			return -EOPNOTSUPP;
		}
		*uid = cr.uid;
		return 0;
	}
	if (them.ss_family != AF_INET && them.ss_family != AF_INET6) {
		snprintf(why, whylen, "not a TCP or Unix connection");
		return -EAFNOSUPPORT;
	}
	if (!is_loopback(&them) || !is_loopback(&me)) {
		if (them.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&them)->sin_addr, ip, sizeof(ip));
		else
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&them)->sin6_addr, ip,
				  sizeof(ip));
		snprintf(why, whylen, "the peer %s is not on this host (not loopback): its "
			 "user is unknown", ip);
		return -EREMOTE;
	}
	ret = diag_uid(&me, &them, uid);
	if (ret && ret != -ENOENT)
		ret = proc_uid(&me, &them, uid);
	if (ret)
		snprintf(why, whylen, "the peer's socket is not in this host's TCP tables "
			 "(sock_diag, /proc/net/tcp): %s", strerror(-ret));
	return ret;
}
