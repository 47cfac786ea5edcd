/* SPDX-License-Identifier: MIT */
/*
 * Socket helpers shared by the collector and the agent (net.c): parsing
 * listen addresses, printing socket addresses, listening.
 */
#ifndef FAY_COMMON_NET_H
#define FAY_COMMON_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Parse "HOST:PORT", "[V6]:PORT", ":PORT" or "PORT" (loopback when no
 * host; "*" and 0.0.0.0 for every interface; "localhost" is 127.0.0.1).
 * HOST must be a numeric address.  Returns 0 or -EINVAL with a reason in
 * err. */
int net_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len,
		   char *err, size_t errlen);

/* Text of a socket address ("127.0.0.1:9410", "[::1]:9410"), cut at len. */
void net_addr_str(const struct sockaddr *sa, char *buf, size_t len);
/* The address alone, no port ("10.0.0.7", "::1"); "?" for another family. */
void net_addr_ip(const struct sockaddr *sa, char *buf, size_t len);

/* A bound, listening TCP socket (SO_REUSEADDR, close-on-exec), or -errno
 * with a reason in err.  With actual non-NULL, the bound address (port 0
 * => the kernel's choice). */
int net_listen(const char *addr, int backlog, struct sockaddr_storage *actual,
	       char *err, size_t errlen);
/* net_listen(), with the bound address as text (net_addr_str) in name. */
int net_listen_named(const char *addr, int backlog, char *name, size_t namelen,
		     char *err, size_t errlen);

/* Split "host:port" or "[v6]:port" (a name or an address, for
 * getaddrinfo) into host and port.  Returns 0 or -EINVAL. */
int net_split_addr(const char *s, char *host, size_t hlen, char *port, size_t plen);

/*
 * Notice a peer that went away without a word (a pulled cable, a host
 * that died): TCP keepalive probes after idle_s seconds without traffic,
 * every intvl_s seconds; cnt unanswered probes break the connection
 * (reads then fail with ETIMEDOUT), about idle_s + intvl_s * cnt seconds
 * after the last sign of life.  Data sent and not acknowledged for that
 * long breaks it too (TCP_USER_TIMEOUT).  Returns 0 or -errno.
 */
int net_keepalive(int fd, int idle_s, int intvl_s, int cnt);

/*
 * Accept one connection on the listening socket lfd (SOCK_CLOEXEC), its
 * peer's address in *ss (*sl: its size in and out).  Returns the new fd;
 * -EAGAIN after a failure that passes: at once for EINTR and ECONNABORTED,
 * and after sleeping 100 ms when the process or the host is out of
 * descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM: the pending
 * connection stays in the backlog, so the next accept would fail again at
 * once: without the pause an accept loop spins on a CPU), with a warning
 * at most every 10 s; or any other -errno (the socket was shut down or
 * closed: the loop ends).  Every accept loop in fay calls it.
 */
int net_accept(int lfd, struct sockaddr_storage *ss, socklen_t *sl);

/*
 * Send small writes at once (TCP_NODELAY): a reply or frame written in
 * pieces must not wait on the peer's delayed ACK (Nagle).  0 or -errno
 * (-EOPNOTSUPP and the like on a socket that is not TCP).
 */
int net_nodelay(int fd);

/*
 * Acknowledge now what fd received (TCP_QUICKACK): called when a request
 * is incomplete and the rest is awaited, so that a client that writes a
 * request in two pieces without TCP_NODELAY (its headers, then its body)
 * does not hold the second one back ~40 ms for our delayed ACK.  Linux
 * clears it on its own, so it is called each time.  0 or -errno.
 */
int net_quickack(int fd);

/*
 * Raise this process's soft limit of open descriptors to its hard limit
 * (systemd's default soft limit, 1,024, is too few for a collector with
 * a thousand agents or an agent tracing many processes).  Returns the
 * soft limit now in force (RLIM_INFINITY as UINT64_MAX); warns when it
 * could not raise it.
 */
uint64_t net_raise_nofile(void);

/* The keepalive both ends of the agent protocol use: a dead peer is
 * noticed within about 8 s. */
#define NET_KEEPALIVE_IDLE_S  5
#define NET_KEEPALIVE_INTVL_S 1
#define NET_KEEPALIVE_CNT     3

#endif
