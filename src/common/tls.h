/* SPDX-License-Identifier: MIT */
/*
 * GnuTLS, the one TLS library of fay (libmicrohttpd's TLS is GnuTLS too),
 * loaded on first use (common/lazy.h) and wrapped in tls.c alone: no other
 * file includes a GnuTLS header.
 *
 * A TLS connection is handed to the code that speaks the protocol as a
 * plain socket: tls_accept() and tls_connect() take the TCP socket and
 * return one end of a socketpair, and a thread of the connection's own
 * moves bytes between the other end and the TLS session.  So the agent
 * protocol's readers and writers (recv, send, sendfile, poll) work on TLS
 * connections unchanged.  TLS 1.2 or later only.
 */
#ifndef FAY_COMMON_TLS_H
#define FAY_COMMON_TLS_H

#include <stddef.h>

struct tls_conf;

/*
 * Load libgnutls (once per process).  0, or -ELIBACC with err (when not
 * NULL) naming the library, its package and dlerror().
 */
int tls_load(char *err, size_t errlen);

/* SHA-256 of n bytes at p as 64 hex digits and a NUL in out.  0, or
 * -ELIBACC (GnuTLS cannot be loaded) / -EIO. */
int tls_sha256_hex(const void *p, size_t n, char out[65]);

/*
 * A server's TLS: certificate chain and key (PEM files; the key file must
 * not be readable by every user), and client_ca (NULL: none) whose
 * certificates every client must present (mutual TLS).  NULL + errno with
 * the reason in err, naming the file: unreadable, not PEM, a key that is
 * not the certificate's.
 */
struct tls_conf *tls_server_conf(const char *cert, const char *key, const char *client_ca,
				 char *err, size_t errlen);
/*
 * A client's TLS: the CA that signed the server's certificate (ca, NULL:
 * the system's trust store), and the client's own certificate and key
 * (both NULL, or both files) for a server that asks for one.  NULL +
 * errno with the reason in err.
 */
struct tls_conf *tls_client_conf(const char *ca, const char *cert, const char *key,
				 char *err, size_t errlen);
void tls_conf_free(struct tls_conf *c);
/*
 * Read c's files again (SIGHUP): a server conf from cert, key and ca (its
 * client CA, NULL: none), a client conf from ca (NULL: the system's
 * store), cert and key, as tls_server_conf() / tls_client_conf() do.
 * Handshakes that start afterwards use the new files; sessions already
 * made keep theirs (the replaced credentials are freed with c).  Files
 * that cannot be used change nothing: -errno with the reason in err.
 */
int tls_conf_reload(struct tls_conf *c, const char *cert, const char *key, const char *ca,
		    char *err, size_t errlen);

/*
 * Serve TLS on the accepted socket fd (taken, even on failure): returns a
 * connected socket that carries the plaintext (blocking, close-on-exec),
 * or -errno.  The handshake (at most 10 s) runs on the connection's
 * thread; when it fails the plaintext socket is closed (EOF) and the
 * reason logged with peer.  alpn: a protocol to offer ("h2"), or NULL.
 * mutual: the client must present a certificate the conf's client CA
 * signed (no effect without a client CA).
 */
int tls_accept(struct tls_conf *c, int fd, const char *peer, const char *alpn, int mutual);
/*
 * Handshake as a client on the connected socket fd (taken, even on
 * failure; at most 10 s), checking that the server's certificate is
 * signed by the conf's CA and names server (a host name or an address).
 * Returns the plaintext socket (blocking, close-on-exec), or -errno with
 * the reason in err (refused certificate: what is wrong with it).
 */
int tls_connect(struct tls_conf *c, int fd, const char *server, char *err, size_t errlen);
/*
 * tls_connect() without waiting: the plaintext socket is returned at once
 * and the handshake runs on the connection's thread; when it fails, the
 * reason is logged ("tls: SERVER: handshake refused: ...") and the
 * plaintext socket sees EOF.  For an event loop that must not stop for
 * a collector slow to answer.  The socket or -errno (fd taken).
 */
int tls_connect_bg(struct tls_conf *c, int fd, const char *server);

#endif
