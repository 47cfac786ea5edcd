/* SPDX-License-Identifier: MIT */
/*
 * An HTTP(S) server, the one wrapper of libmicrohttpd (loaded on first
 * use, see common/lazy.h): no other file includes <microhttpd.h> or names
 * an MHD_* type.  A request reaches the caller's handler through opaque
 * types (struct http_con, struct http_resp) and plain status numbers.
 *
 * TLS is common/tls.h's, as on fay's other ports: the server accepts on
 * its own thread, tls_accept() shakes hands (refusing a client without a
 * certificate the conf's client CA signed, when it has one) and hands
 * libmicrohttpd the plaintext end (MHD_add_connection()), so one TLS
 * configuration, reloaded in one place, serves every port.
 */
#ifndef FAY_COMMON_HTTPD_H
#define FAY_COMMON_HTTPD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct mem_budget;
struct tls_conf;
struct httpd;           /* a running server */
struct http_con;        /* the connection of one request, inside a callback */
struct http_resp;       /* an answer being built */

/* What a handler returns: go on, or close the connection at once. */
#define HTTPD_YES 1
#define HTTPD_NO  0

/*
 * The request handler, called as libmicrohttpd's access handler is: first
 * on the headers with *req NULL (set it to keep state), then once per piece
 * of body (*upload_size > 0: consume it and set *upload_size to 0), then
 * with *upload_size 0 to answer (http_resp_queue()).  HTTPD_YES or HTTPD_NO.
 */
typedef int (*httpd_request_fn)(void *cls, struct http_con *con, const char *url,
				const char *method, const char *upload, size_t *upload_size,
				void **req);
/* The request ended (answered or not): free what *req holds. */
typedef void (*httpd_done_fn)(void *cls, void *req);

struct httpd_opts {
	int fd;                         /* listening socket (taken, even on failure) */
	unsigned max_conns;             /* 0: libmicrohttpd's default */
	unsigned per_ip;                /* connections from one address, 0: any */
	unsigned idle_s;                /* an idle connection is closed after, 0: never */
	int thread_per_conn;            /* handlers may block */
	/* Each connection takes conn_mem bytes from budget (NULL: none) for
	 * its life; one that does not fit is closed at accept and counted in
	 * *busy (when not NULL; atomically). */
	struct mem_budget *budget;
	size_t conn_mem;
	uint64_t *busy;
	/* TLS (NULL: plaintext): the conf must outlive the server; with
	 * tls_mutual its client CA, when it has one, is required of every
	 * client. */
	struct tls_conf *tls;
	int tls_mutual;
	httpd_request_fn on_request;
	httpd_done_fn on_done;          /* may be NULL */
	void *cls;                      /* passed to both */
};

/*
 * Load libmicrohttpd (once per process; 0, or -ELIBACC with err naming the
 * library, its package and dlerror()).  httpd_start() calls it.
 */
int httpd_load(char *err, size_t errlen);
/*
 * Serve o->fd.  Returns the server, or NULL with errno set and the reason
 * in err (the library cannot be loaded; the daemon or the accepting
 * thread does not start).
 */
struct httpd *httpd_start(const struct httpd_opts *o, char *err, size_t errlen);
/* Stop serving (waits for running handlers) and close the socket.  NULL: no-op. */
void httpd_stop(struct httpd *d);

/* ---- inside a handler ------------------------------------------------------ */

/* A request header (first of its name, case-insensitive), NULL when absent. */
const char *http_header(struct http_con *con, const char *name);
/* A query-string argument, NULL when absent. */
const char *http_arg(struct http_con *con, const char *name);
/* Call fn for every request header, in order (duplicates included). */
void http_headers_each(struct http_con *con,
		       void (*fn)(void *arg, const char *key, const char *value), void *arg);
/* The client's address (NULL when unknown). */
const struct sockaddr *http_peer(struct http_con *con);
/* The connection's socket (-1 when unknown): to watch for the client leaving. */
int http_con_fd(struct http_con *con);

/* ---- answers --------------------------------------------------------------- */

/*
 * An answer of len bytes at body: owned (free()d once sent, and also on
 * failure) or static (must outlive the connection).  NULL on ENOMEM.
 */
struct http_resp *http_resp_buf(void *body, size_t len, int owned);
/* A streamed answer of unknown length: read() fills buf with at most max
 * bytes and returns their number, HTTP_STREAM_END or HTTP_STREAM_ERROR;
 * done(cls) is called once, when the answer is over.  NULL on ENOMEM (done
 * is not called then). */
#define HTTP_STREAM_END   ((ssize_t)-1)
#define HTTP_STREAM_ERROR ((ssize_t)-2)
struct http_resp *http_resp_stream(ssize_t (*read)(void *cls, uint64_t pos, char *buf,
						   size_t max),
				   void *cls, void (*done)(void *cls));
/* Add a header to r (NULL r: no-op). */
void http_resp_header(struct http_resp *r, const char *name, const char *value);
/* Queue r with status on con and release r.  HTTPD_YES, or HTTPD_NO (r NULL,
 * or not queued). */
int http_resp_queue(struct http_con *con, unsigned status, struct http_resp *r);

#endif
