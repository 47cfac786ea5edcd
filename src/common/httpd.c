// SPDX-License-Identifier: MIT
/*
 * The HTTP(S) server of httpd.h on libmicrohttpd, the only file that
 * includes <microhttpd.h>.  fay does not link the library: it is opened
 * on first use (common/lazy.h) and every MHD_* call below goes through a
 * function pointer typed with __typeof__ of the library's own prototype,
 * so each call is type-checked as a direct one would be.
 */
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/accept.h"
#include "common/budget.h"
#include "common/httpd.h"
#include "common/lazy.h"
#include "common/net.h"

#define MHD_SONAME  "libmicrohttpd.so.12"
#define MHD_PACKAGE "libmicrohttpd12"

#define MHD_FUNCS(X)							\
	X(MHD_start_daemon) X(MHD_stop_daemon)				\
	X(MHD_create_response_from_buffer)				\
	X(MHD_create_response_from_callback)				\
	X(MHD_add_response_header) X(MHD_queue_response)		\
	X(MHD_destroy_response) X(MHD_lookup_connection_value)		\
	X(MHD_get_connection_values) X(MHD_get_connection_info)	\
	X(MHD_add_connection)

static struct { MHD_FUNCS(LAZY_FIELD) } fn;     /* the library's functions */
#define MHD_SYM(f) LAZY_SYM(fn, f)
static const struct lazy_sym syms[] = { MHD_FUNCS(MHD_SYM) };
static struct lazy_lib lib = LAZY_LIB(MHD_SONAME, MHD_PACKAGE, syms);

_Static_assert(HTTP_STREAM_END == MHD_CONTENT_READER_END_OF_STREAM, "stream end");
_Static_assert(HTTP_STREAM_ERROR == MHD_CONTENT_READER_END_WITH_ERROR, "stream error");
_Static_assert(HTTPD_YES == MHD_YES && HTTPD_NO == MHD_NO, "results");

struct httpd {
	struct MHD_Daemon *d;
	struct httpd_opts o;
	struct acceptor acc;            /* the budget, TLS and back-off (accept.h);
					 * libmicrohttpd counts connections */
	pthread_t acceptor;             /* TLS: accepts, shakes hands */
	int has_acceptor;
	int stop;                       /* atomic */
};

/* Contract in httpd.h. */
int httpd_load(char *err, size_t errlen)
{
	return lazy_load(&lib, err, errlen);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *con, const char *url,
				 const char *method, const char *version, const char *upload,
				 size_t *upload_size, void **req)
{
	struct httpd *d = cls;

	(void)version;
	/* A new request, its headers in: its body may still be on its way
	 * from a client that wrote it apart and waits for our ACK (net.h).
	 * With TLS the fd is the plaintext pair: tls.c acknowledges there. */
	if (!*req && strcmp(method, "GET") && strcmp(method, "HEAD")) {
		const union MHD_ConnectionInfo *ci =
			fn.MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);

		if (ci && !d->o.tls)
			net_quickack(ci->connect_fd);
	}
	return d->o.on_request(d->o.cls, (struct http_con *)con, url, method, upload,
			       upload_size, req) ? MHD_YES : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *con, void **req,
			 enum MHD_RequestTerminationCode toe)
{
	struct httpd *d = cls;

	(void)con;
	(void)toe;
	if (*req && d->o.on_done)
		d->o.on_done(d->o.cls, *req);
	*req = NULL;
}

/* A new connection: in when its memory fits the budget.  Checked here,
 * taken once libmicrohttpd has set the connection up (on_conn), so that
 * what it refuses after this (its own limits) never holds any. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
	struct httpd *d = cls;

	(void)addr;
	(void)len;
	return acceptor_fits(&d->acc) ? MHD_YES : MHD_NO;
}

static void on_conn(void *cls, struct MHD_Connection *con, void **sock,
		    enum MHD_ConnectionNotificationCode code)
{
	struct httpd *d = cls;

	(void)con;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		mem_budget_charge(d->o.budget, d->o.conn_mem);
		*sock = d;      /* taken: given back when it closes */
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *sock) {
		mem_budget_give(d->o.budget, d->o.conn_mem);
		*sock = NULL;
	}
}

/* With TLS: accept here, refuse what does not fit the budget before
 * shaking hands, and give libmicrohttpd the plaintext end. */
static void *accept_main(void *arg)
{
	struct httpd *d = arg;

	for (;;) {
		struct acc_conn k;
		int ret = acceptor_accept(&d->acc, &k);

		if (ret < 0) {
			if (__atomic_load_n(&d->stop, __ATOMIC_RELAXED))
				break;
			if (ret != -EAGAIN)
				usleep(100000);      /* shut down: stop comes next */
			continue;
		}
		if (!acceptor_fits(&d->acc)) {
			close(k.fd);
			continue;
		}
		if (!acceptor_tls(&d->acc, &k))  /* closed by libmicrohttpd when it cannot take it */
			fn.MHD_add_connection(d->d, k.fd, (struct sockaddr *)&k.ss, k.sl);
	}
	return NULL;
}

/* Contract in httpd.h. */
struct httpd *httpd_start(const struct httpd_opts *o, char *err, size_t errlen)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
	struct httpd *d;
	int ret;

	ret = httpd_load(err, errlen);
	if (ret)
		goto fail;
	d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto fail;
	}
	d->o = *o;
	d->acc.fd = o->fd;
	d->acc.budget = o->budget;
	d->acc.conn_mem = o->conn_mem;
	d->acc.busy = o->busy;
	d->acc.tls = o->tls;
	d->acc.tls_mutual = o->tls_mutual;
	acceptor_init(&d->acc);
	if (o->thread_per_conn)
		flags |= MHD_USE_THREAD_PER_CONNECTION;
	if (o->tls)     /* connections come from accept_main() */
		flags |= MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
	{
		struct MHD_OptionItem opt[] = {
			{ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, d },
			{ MHD_OPTION_CONNECTION_LIMIT, o->max_conns ? o->max_conns : 1024, NULL },
			{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->per_ip, NULL },
			{ MHD_OPTION_CONNECTION_TIMEOUT, o->idle_s, NULL },
			{ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_conn, d },
			{ MHD_OPTION_LISTEN_SOCKET, o->fd, NULL },      /* plaintext only */
			{ MHD_OPTION_END, 0, NULL },
		};

		if (o->tls)
			opt[5] = opt[6];
		d->d = fn.MHD_start_daemon(flags, 0, on_accept, d, on_access, d,
					   MHD_OPTION_ARRAY, opt, MHD_OPTION_END);
	}
	if (!d->d) {
		snprintf(err, errlen, "cannot start the HTTP%s server (libmicrohttpd)",
			 o->tls ? "S" : "");
		acceptor_destroy(&d->acc);
		free(d);
		ret = -EIO;
		goto fail;
	}
	if (o->tls) {
		ret = -pthread_create(&d->acceptor, NULL, accept_main, d);
		if (ret) {
			snprintf(err, errlen, "cannot start a thread: %s", strerror(-ret));
			fn.MHD_stop_daemon(d->d);
			acceptor_destroy(&d->acc);
			free(d);
			goto fail;
		}
		d->has_acceptor = 1;
	}
	return d;
fail:
	close(o->fd);
	errno = -ret;
	return NULL;
}

/* Contract in httpd.h. */
void httpd_stop(struct httpd *d)
{
	if (!d)
		return;
	if (d->has_acceptor) {
		__atomic_store_n(&d->stop, 1, __ATOMIC_RELAXED);
		shutdown(d->o.fd, SHUT_RDWR);
		pthread_join(d->acceptor, NULL);
		close(d->o.fd);
	}
	fn.MHD_stop_daemon(d->d);	/* closes the listening socket too */
	acceptor_destroy(&d->acc);
	free(d);
}

/* ---- inside a handler ------------------------------------------------------ */

#define MC(con) ((struct MHD_Connection *)(con))

/* Contract in httpd.h. */
const char *http_header(struct http_con *con, const char *name)
{
	return fn.MHD_lookup_connection_value(MC(con), MHD_HEADER_KIND, name);
}

/* Contract in httpd.h. */
const char *http_arg(struct http_con *con, const char *name)
{
	return fn.MHD_lookup_connection_value(MC(con), MHD_GET_ARGUMENT_KIND, name);
}

struct each {
	void (*fn)(void *arg, const char *key, const char *value);
	void *arg;
};

static enum MHD_Result each_header(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	struct each *e = cls;

	(void)kind;
	if (key)
		e->fn(e->arg, key, value);
	return MHD_YES;
}

/* Contract in httpd.h. */
void http_headers_each(struct http_con *con,
		       void (*f)(void *arg, const char *key, const char *value), void *arg)
{
	struct each e = { f, arg };

	fn.MHD_get_connection_values(MC(con), MHD_HEADER_KIND, each_header, &e);
}

/* Contract in httpd.h. */
const struct sockaddr *http_peer(struct http_con *con)
{
	const union MHD_ConnectionInfo *ci =
		fn.MHD_get_connection_info(MC(con), MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	return ci ? ci->client_addr : NULL;
}

/* Contract in httpd.h. */
int http_con_fd(struct http_con *con)
{
	const union MHD_ConnectionInfo *ci =
		fn.MHD_get_connection_info(MC(con), MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? ci->connect_fd : -1;
}

/* ---- answers --------------------------------------------------------------- */

/* Contract in httpd.h. */
struct http_resp *http_resp_buf(void *body, size_t len, int owned)
{
	struct MHD_Response *r = fn.MHD_create_response_from_buffer(len, body,
		owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);

	if (!r && owned)
		free(body);
	return (struct http_resp *)r;
}

/* Contract in httpd.h. */
struct http_resp *http_resp_stream(ssize_t (*read)(void *cls, uint64_t pos, char *buf,
						   size_t max),
				   void *cls, void (*done)(void *cls))
{
	return (struct http_resp *)fn.MHD_create_response_from_callback(MHD_SIZE_UNKNOWN,
									16384, read, cls, done);
}

/* Contract in httpd.h. */
void http_resp_header(struct http_resp *r, const char *name, const char *value)
{
	if (r)
		fn.MHD_add_response_header((struct MHD_Response *)r, name, value);
}

/* Contract in httpd.h. */
int http_resp_queue(struct http_con *con, unsigned status, struct http_resp *r)
{
	enum MHD_Result ret;

	if (!r)
		return HTTPD_NO;
	ret = fn.MHD_queue_response(MC(con), status, (struct MHD_Response *)r);
	fn.MHD_destroy_response((struct MHD_Response *)r);
	return ret == MHD_YES ? HTTPD_YES : HTTPD_NO;
}
