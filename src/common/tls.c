// SPDX-License-Identifier: MIT
/*
 * GnuTLS behind common/tls.h, loaded on first use: every gnutls_* call
 * goes through a pointer typed with __typeof__ of the library's own
 * prototype.  A connection's thread does its handshake, then moves bytes
 * between the TCP socket (TLS records) and a socketpair (plaintext) until
 * either side closes.
 */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/lazy.h"
#include "common/log.h"
#include "common/net.h"
#include "common/secret.h"
#include "common/tls.h"

#define GNUTLS_SONAME  "libgnutls.so.30"
#define GNUTLS_PACKAGE "libgnutls30"

/* TLS 1.2 and 1.3 only (GnuTLS priority string). */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define HANDSHAKE_MS   10000
#define PUMP_BUF       16384
#define PUMP_STACK     (256u << 10)

#define TLS_FUNCS(X)							\
	X(gnutls_hash_fast) X(gnutls_strerror) X(gnutls_error_is_fatal)	\
	X(gnutls_certificate_allocate_credentials)			\
	X(gnutls_certificate_free_credentials)				\
	X(gnutls_certificate_set_x509_key_mem2)			\
	X(gnutls_certificate_set_x509_trust_mem)			\
	X(gnutls_certificate_set_x509_system_trust)			\
	X(gnutls_priority_init) X(gnutls_priority_deinit)		\
	X(gnutls_init) X(gnutls_deinit) X(gnutls_priority_set)		\
	X(gnutls_credentials_set) X(gnutls_certificate_server_set_request) \
	X(gnutls_session_set_verify_cert) X(gnutls_server_name_set)	\
	X(gnutls_transport_set_int2) X(gnutls_handshake)		\
	X(gnutls_handshake_set_timeout) X(gnutls_alpn_set_protocols)	\
	X(gnutls_record_send) X(gnutls_record_recv)			\
	X(gnutls_record_check_pending) X(gnutls_record_get_direction)	\
	X(gnutls_bye) X(gnutls_session_get_verify_cert_status)		\
	X(gnutls_certificate_verification_status_print)

static struct { TLS_FUNCS(LAZY_FIELD) } fn;     /* the library's functions */
#define TLS_SYM(f) LAZY_SYM(fn, f)
static const struct lazy_sym syms[] = { TLS_FUNCS(TLS_SYM) };
static struct lazy_lib lib = LAZY_LIB(GNUTLS_SONAME, GNUTLS_PACKAGE, syms);

struct tls_conf {
	gnutls_certificate_credentials_t cred;
	gnutls_priority_t prio;
	int server;
	int require_client;             /* server: --tls-client-ca given */
	char *cert_pem, *key_pem, *ca_pem;
	/* tls_conf_reload(): cred and require_client change under lock;
	 * the credentials replaced stay until tls_conf_free() (sessions made
	 * with them go on using them) */
	pthread_mutex_t lock;
	gnutls_certificate_credentials_t *retired;
	size_t nretired;
};

/* Contract in tls.h. */
int tls_load(char *err, size_t errlen)
{
	return lazy_load(&lib, err, errlen);
}

/* Contract in tls.h. */
int tls_sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char d[32];
	int ret = tls_load(NULL, 0);

	if (ret)
		return ret;
	if (fn.gnutls_hash_fast(GNUTLS_DIG_SHA256, p, n, d) < 0)
		return -EIO;
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	return 0;
}

/* ---- configuration ---------------------------------------------------------- */

/* A PEM file that is not secret: the whole of it, NUL-terminated. */
static char *read_pem(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *text = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	n = getdelim(&text, &cap, '\0', f);
	fclose(f);
	if (n <= 0) {
		free(text);
		snprintf(err, errlen, "%s: empty or unreadable", path);
		return NULL;
	}
	return text;
}

static gnutls_datum_t datum(const char *s)
{
	return (gnutls_datum_t){ (unsigned char *)s, (unsigned)strlen(s) };
}

/* Contract in tls.h. */
void tls_conf_free(struct tls_conf *c)
{
	if (!c)
		return;
	if (c->cred)
		fn.gnutls_certificate_free_credentials(c->cred);
	for (size_t i = 0; i < c->nretired; i++)
		fn.gnutls_certificate_free_credentials(c->retired[i]);
	free(c->retired);
	pthread_mutex_destroy(&c->lock);
	if (c->prio)
		fn.gnutls_priority_deinit(c->prio);
	free(c->cert_pem);
	if (c->key_pem)
		explicit_bzero(c->key_pem, strlen(c->key_pem));
	free(c->key_pem);
	free(c->ca_pem);
	free(c);
}

/* The parts both sides share: the library, credentials, priorities, and
 * cert + key when given (checked to belong together). */
static struct tls_conf *conf_new(const char *cert, const char *key, char *err, size_t errlen)
{
	struct tls_conf *c;
	gnutls_datum_t cd, kd;
	int ret = tls_load(err, errlen);

	if (ret) {
		errno = -ret;
		return NULL;
	}
	if (!cert != !key) {
		snprintf(err, errlen, "a certificate needs its key and a key its certificate "
			 "(both --tls-cert and --tls-key)");
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		pthread_mutex_init(&c->lock, NULL);
	if (!c || fn.gnutls_certificate_allocate_credentials(&c->cred) < 0 ||
	    fn.gnutls_priority_init(&c->prio, TLS_PRIORITIES, NULL) < 0) {
		snprintf(err, errlen, "out of memory");
		tls_conf_free(c);
		errno = ENOMEM;
		return NULL;
	}
	if (!cert)
		return c;
	c->cert_pem = read_pem(cert, err, errlen);
	if (!c->cert_pem || secret_file_read(key, &c->key_pem, err, errlen))
		goto fail;
	cd = datum(c->cert_pem);
	kd = datum(c->key_pem);
	ret = fn.gnutls_certificate_set_x509_key_mem2(c->cred, &cd, &kd, GNUTLS_X509_FMT_PEM,
						      NULL, 0);
	if (ret < 0) {
		snprintf(err, errlen, "%s with %s: %s", cert, key, fn.gnutls_strerror(ret));
		goto fail;
	}
	return c;
fail:
	tls_conf_free(c);
	errno = EINVAL;
	return NULL;
}

/* Trust the certificates of the PEM file path. */
static int add_ca(struct tls_conf *c, const char *path, char *err, size_t errlen)
{
	gnutls_datum_t d;
	int ret;

	c->ca_pem = read_pem(path, err, errlen);
	if (!c->ca_pem)
		return -EINVAL;
	d = datum(c->ca_pem);
	ret = fn.gnutls_certificate_set_x509_trust_mem(c->cred, &d, GNUTLS_X509_FMT_PEM);
	if (ret <= 0) {
		snprintf(err, errlen, "%s: %s", path, ret < 0 ? fn.gnutls_strerror(ret) :
			 "no certificate in it");
		return -EINVAL;
	}
	return 0;
}

/* Contract in tls.h. */
struct tls_conf *tls_server_conf(const char *cert, const char *key, const char *client_ca,
				 char *err, size_t errlen)
{
	struct tls_conf *c;

	if (!cert || !key) {
		snprintf(err, errlen, "a TLS server needs --tls-cert and --tls-key");
		errno = EINVAL;
		return NULL;
	}
	c = conf_new(cert, key, err, errlen);
	if (!c)
		return NULL;
	c->server = 1;
	if (client_ca) {
		if (add_ca(c, client_ca, err, errlen)) {
			tls_conf_free(c);
			errno = EINVAL;
			return NULL;
		}
		c->require_client = 1;
	}
	return c;
}

/* Contract in tls.h. */
struct tls_conf *tls_client_conf(const char *ca, const char *cert, const char *key,
				 char *err, size_t errlen)
{
	struct tls_conf *c = conf_new(cert, key, err, errlen);
	int ret;

	if (!c)
		return NULL;
	ret = ca ? add_ca(c, ca, err, errlen) :
	      fn.gnutls_certificate_set_x509_system_trust(c->cred) < 0 ? -EIO : 0;
	if (ret) {
		if (!ca)
			snprintf(err, errlen, "the system's trust store cannot be read (give --tls-ca)");
		tls_conf_free(c);
		errno = EINVAL;
		return NULL;
	}
	return c;
}

/* Contract in tls.h. */
int tls_conf_reload(struct tls_conf *c, const char *cert, const char *key, const char *ca,
		    char *err, size_t errlen)
{
	struct tls_conf *n = c->server ? tls_server_conf(cert, key, ca, err, errlen) :
			     tls_client_conf(ca, cert, key, err, errlen);
	gnutls_certificate_credentials_t *r;

	if (!n)
		return -errno;
	pthread_mutex_lock(&c->lock);
	r = realloc(c->retired, (c->nretired + 1) * sizeof(*r));
	if (!r) {
		pthread_mutex_unlock(&c->lock);
		tls_conf_free(n);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->retired = r;
	c->retired[c->nretired++] = c->cred;
	c->cred = n->cred;
	c->require_client = n->require_client;
	n->cred = NULL;
	pthread_mutex_unlock(&c->lock);
	tls_conf_free(n);
	return 0;
}

/* ---- connections -------------------------------------------------------------- */

struct conn {
	struct tls_conf *c;
	gnutls_session_t s;
	int net, plain;                 /* the TCP socket; our end of the pair */
	char peer[64];
};

static void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* A session on k->net for k->c.  0 or a GnuTLS error. */
static int session_new(struct conn *k, const char *server, const char *alpn, int mutual)
{
	unsigned flags = k->c->server ? GNUTLS_SERVER : GNUTLS_CLIENT;
	gnutls_certificate_credentials_t cred;
	int ret = fn.gnutls_init(&k->s, flags), require_client;

	if (ret < 0)
		return ret;
	pthread_mutex_lock(&k->c->lock);        /* the files read last */
	cred = k->c->cred;
	require_client = k->c->require_client;
	pthread_mutex_unlock(&k->c->lock);
	ret = fn.gnutls_priority_set(k->s, k->c->prio);
	if (ret >= 0)
		ret = fn.gnutls_credentials_set(k->s, GNUTLS_CRD_CERTIFICATE, cred);
	if (ret >= 0 && require_client && mutual) {
		fn.gnutls_certificate_server_set_request(k->s, GNUTLS_CERT_REQUIRE);
		fn.gnutls_session_set_verify_cert(k->s, NULL, 0);
	}
	if (ret >= 0 && !k->c->server) {
		/* SNI takes names, not addresses */
		if (server && strspn(server, "0123456789.:abcdefABCDEF") != strlen(server))
			fn.gnutls_server_name_set(k->s, GNUTLS_NAME_DNS, server, strlen(server));
		fn.gnutls_session_set_verify_cert(k->s, server, 0);
	}
	if (ret >= 0 && alpn) {
		gnutls_datum_t p = datum(alpn);

		ret = fn.gnutls_alpn_set_protocols(k->s, &p, 1, 0);
	}
	fn.gnutls_transport_set_int2(k->s, k->net, k->net);
	fn.gnutls_handshake_set_timeout(k->s, HANDSHAKE_MS);
	return ret < 0 ? ret : 0;
}

/* The handshake on a blocking socket.  0, or why it failed in err. */
static int handshake(struct conn *k, char *err, size_t errlen)
{
	int ret;

	set_nonblock(k->net, 0);
	do
		ret = fn.gnutls_handshake(k->s);
	while (ret < 0 && !fn.gnutls_error_is_fatal(ret));
	if (ret >= 0)
		return 0;
	if (ret == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
		gnutls_datum_t out = { 0 };
		unsigned st = fn.gnutls_session_get_verify_cert_status(k->s);

		if (!fn.gnutls_certificate_verification_status_print(st, GNUTLS_CRT_X509, &out, 0)) {
			size_t n = strlen((char *)out.data);

			while (n && out.data[n - 1] == ' ')
				n--;
			snprintf(err, errlen, "%.*s", (int)n, (char *)out.data);
			free(out.data);
			return -EACCES;
		}
	}
	snprintf(err, errlen, "%s", fn.gnutls_strerror(ret));
	return ret == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR ||
	       ret == GNUTLS_E_CERTIFICATE_REQUIRED || ret == GNUTLS_E_NO_CERTIFICATE_FOUND ?
	       -EACCES : -ECONNABORTED;
}

/* Write to one side: bytes written, 0 (try later) or -1 (broken). */
static ssize_t to_plain(struct conn *k, const char *p, size_t n)
{
	ssize_t w = send(k->plain, p, n, MSG_NOSIGNAL);

	return w > 0 ? w : w < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1;
}

static ssize_t to_tls(struct conn *k, const char *p, size_t n)
{
	ssize_t w = fn.gnutls_record_send(k->s, p, n);

	return w > 0 ? w : w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED ? 0 : -1;
}

/* Write what buf holds from *off to *len with out; *len becomes 0 once
 * all is written.  0, or -1 when that side is broken. */
static int drain(struct conn *k, ssize_t (*out)(struct conn *, const char *, size_t),
		 const char *buf, size_t *len, size_t *off, int *progress)
{
	ssize_t n = out(k, buf + *off, *len - *off);

	if (n < 0)
		return -1;
	if (n > 0) {
		*off += (size_t)n;
		*progress = 1;
		if (*off == *len)
			*len = 0;
	}
	return 0;
}

/* Move bytes both ways until a side closes or fails. */
static void pump(struct conn *k)
{
	char *up = malloc(PUMP_BUF), *down = malloc(PUMP_BUF);
	size_t ulen = 0, uoff = 0, dlen = 0, doff = 0;
	int eof_net = 0, eof_plain = 0;

	set_nonblock(k->net, 1);
	set_nonblock(k->plain, 1);
	while (up && down) {
		struct pollfd p[2] = { { .fd = k->net }, { .fd = k->plain } };
		int progress = 0;
		ssize_t n;

		if (!dlen && !eof_net) {        /* TLS -> plaintext */
			n = fn.gnutls_record_recv(k->s, down, PUMP_BUF);
			if (n > 0) {
				dlen = (size_t)n, doff = 0, progress = 1;
				/* what follows is awaited: no delayed ACK (net.h) */
				if (!fn.gnutls_record_check_pending(k->s))
					net_quickack(k->net);
			} else if (n == 0 || fn.gnutls_error_is_fatal((int)n)) {
				eof_net = 1;
			}
		}
		if (dlen && drain(k, to_plain, down, &dlen, &doff, &progress))
			break;
		if (eof_net && !dlen)
			break;
		if (!ulen && !eof_plain) {      /* plaintext -> TLS */
			n = recv(k->plain, up, PUMP_BUF, 0);
			if (n > 0)
				ulen = (size_t)n, uoff = 0, progress = 1;
			else if (n == 0 || (errno != EAGAIN && errno != EINTR))
				eof_plain = 1;
		}
		if (ulen && drain(k, to_tls, up, &ulen, &uoff, &progress))
			break;
		if (eof_plain && !ulen) {
			fn.gnutls_bye(k->s, GNUTLS_SHUT_WR);
			break;
		}
		if (progress || (!dlen && fn.gnutls_record_check_pending(k->s)))
			continue;
		if (!dlen && !eof_net)
			p[0].events |= POLLIN;
		if (ulen)
			p[0].events |= fn.gnutls_record_get_direction(k->s) ? POLLOUT : POLLIN;
		if (dlen)
			p[1].events |= POLLOUT;
		if (!ulen && !eof_plain)
			p[1].events |= POLLIN;
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
	}
	free(up);
	free(down);
}

static void conn_free(struct conn *k)
{
	if (k->s)
		fn.gnutls_deinit(k->s);
	if (k->net >= 0)
		close(k->net);
	if (k->plain >= 0)
		close(k->plain);
	free(k);
}

static void *handshake_main(void *arg)
{
	struct conn *k = arg;
	char why[512];

	if (handshake(k, why, sizeof(why)))
		pr_warn("tls: %s: handshake refused: %s", k->peer, why);
	else
		pump(k);
	conn_free(k);
	return NULL;
}

static void *client_main(void *arg)
{
	pump(arg);
	conn_free(arg);
	return NULL;
}

/* The pair: *mine to k->plain, the other end returned. */
static int start(struct conn *k, void *(*main)(void *))
{
	pthread_attr_t at;
	pthread_t t;
	int sp[2], ret;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
		return -errno;
	k->plain = sp[1];
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, PUMP_STACK);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	ret = -pthread_create(&t, &at, main, k);
	pthread_attr_destroy(&at);
	if (ret) {
		close(sp[0]);
		return ret;
	}
	return sp[0];
}

/* A connection whose thread shakes hands, then pumps: the plaintext
 * socket, or -errno (fd taken).  server: the name to check (clients). */
static int conn_start(struct tls_conf *c, int fd, const char *peer, const char *server,
		      const char *alpn, int mutual)
{
	struct conn *k = calloc(1, sizeof(*k));
	int ret;

	if (!k) {
		close(fd);
		return -ENOMEM;
	}
	k->c = c;
	k->net = fd;
	k->plain = -1;
	/* records go out as written: a reply in two must not wait on Nagle */
	net_nodelay(fd);
	snprintf(k->peer, sizeof(k->peer), "%s", peer);
	ret = session_new(k, server, alpn, mutual);
	ret = ret ? -EIO : start(k, handshake_main);
	if (ret < 0)
		conn_free(k);
	return ret;
}

/* Contract in tls.h. */
int tls_accept(struct tls_conf *c, int fd, const char *peer, const char *alpn, int mutual)
{
	return conn_start(c, fd, peer, NULL, alpn, mutual);
}

/* Contract in tls.h. */
int tls_connect(struct tls_conf *c, int fd, const char *server, char *err, size_t errlen)
{
	struct conn *k = calloc(1, sizeof(*k));
	int ret;

	if (!k) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	k->c = c;
	k->net = fd;
	k->plain = -1;
	snprintf(k->peer, sizeof(k->peer), "%s", server);
	ret = session_new(k, server, NULL, 0);
	if (ret) {
		snprintf(err, errlen, "TLS: %s", fn.gnutls_strerror(ret));
		ret = -EIO;
	} else {
		ret = handshake(k, err, errlen);
	}
	ret = ret ? ret : start(k, client_main);
	if (ret < 0)
		conn_free(k);
	return ret;
}

/* Contract in tls.h. */
int tls_connect_bg(struct tls_conf *c, int fd, const char *server)
{
	return conn_start(c, fd, server, server, NULL, 0);
}
