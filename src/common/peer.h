/* SPDX-License-Identifier: MIT */
/*
 * Who is at the other end of a connection on this host (#20): the user
 * that owns the peer's socket.  A connection over loopback comes from a
 * process of this host (loopback is per network namespace), and the
 * kernel knows which user created the socket it came from: for TCP its
 * socket tables tell (NETLINK_SOCK_DIAG, an exact lookup of the peer's
 * socket by its four-tuple; /proc/net/tcp and tcp6 when sock_diag is not
 * there), for a Unix socket SO_PEERCRED.  The owner is the user whose
 * process created the socket (its fsuid then), which is what a process
 * of that user can do with it.
 */
#ifndef FAY_COMMON_PEER_H
#define FAY_COMMON_PEER_H

#include <stddef.h>
#include <sys/types.h>

/*
 * The uid that owns the socket at the other end of connected socket fd,
 * in *uid.  0, or -errno with the reason in why: -EREMOTE when the peer
 * is not on this host (a TCP peer whose address is not loopback: its
 * owner is unknowable), -ENOENT when its socket is not found (it closed),
 * -EAFNOSUPPORT for another kind of socket, -EOPNOTSUPP for a socket pair
 * with this very process (the plaintext end of our own TLS: common/tls.h).
 */
int peer_uid(int fd, uid_t *uid, char *why, size_t whylen);

/* "uid 65534 (nobody)" into buf (len bytes); buf. */
const char *peer_uid_name(uid_t uid, char *buf, size_t len);

#endif
