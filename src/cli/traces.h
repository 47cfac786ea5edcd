/* SPDX-License-Identifier: MIT */
/*
 * `fay traces`: the model and views behind `fay traces ls` and
 * `fay traces show`, kept apart from the HTTP client and the argument
 * parsing so tests/unit/cli/ can feed them canned Zipkin v2 JSON.
 *
 *   traces_model.c   Zipkin v2 span array -> struct tr_trace: spans in tree
 *                    order (children under their parent, by start time),
 *                    depth, time axis, services, error mark
 *   traces_render.c  the terminal views: waterfall (show) and list (ls)
 *   traces_http.c    GET from the collector (libcurl)
 *   traces_fetch.c   the collector's URL, the query string, the GET of a
 *                    JSON answer with the errors the user sees
 *   traces_help.c    the --help pages
 *   cmd_traces.c     options, the subcommands, exit status
 *
 * Times are Zipkin's: microseconds since the epoch.
 */
#ifndef FAY_CLI_TRACES_H
#define FAY_CLI_TRACES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

struct tr_annot {
	uint64_t ts;              /* us since the epoch */
	const char *value;
};

struct tr_tag {
	const char *key, *value;
};

struct tr_span {
	const char *id, *parent_id;   /* parent_id NULL for a root */
	const char *name, *kind;      /* "" / NULL when absent */
	const char *service;          /* localEndpoint.serviceName or "" */
	const char *ip;               /* localEndpoint ipv4 or ipv6, or NULL */
	int port;                     /* localEndpoint.port or 0 */
	const char *remote_service;   /* remoteEndpoint.serviceName or NULL */
	uint64_t ts, dur;             /* us; valid if has_ts / has_dur */
	int has_ts, has_dur;
	int shared, error;
	struct tr_annot *annots;      /* sorted by time */
	size_t nannots;
	struct tr_tag *tags;          /* sorted by key */
	size_t ntags;
	/* Layout, filled by tr_trace_new(). */
	long parent;                  /* index of the parent span, or -1 */
	int depth;                    /* 0 for roots */
	int orphan;                   /* has a parentId that is not in the trace */
	int svc;                      /* index into tr_trace.services */
};

struct tr_trace {
	json_t *json;                 /* the span array; owns every string */
	const char *trace_id;
	struct tr_span *spans;        /* as received */
	size_t nspans;
	size_t *order;                /* span indexes in tree order */
	long root;                    /* the trace's root span, or -1 */
	uint64_t t0, t1;              /* time axis, us: first start, last end */
	const char **services;        /* in order of first appearance in tree order */
	size_t nservices;
	int error;                    /* some span has an "error" tag */
};

/*
 * tr_trace_new() - build the model of one trace from a Zipkin v2 span
 * array (what /api/v2/trace/{id} returns, or one element of
 * /api/v2/traces).  Takes a new reference to @spans.
 * Return: the trace (free with tr_trace_free()), or NULL with errno set
 * (EINVAL: not a trace; a message naming the span and field is written to
 * @err) or ENOMEM.
 */
struct tr_trace *tr_trace_new(json_t *spans, char *err, size_t errlen);

/* tr_trace_free() - free a trace; NULL is fine. */
void tr_trace_free(struct tr_trace *t);

enum tr_color { TR_COLOR_AUTO = 0, TR_COLOR_NEVER, TR_COLOR_ALWAYS };

struct tr_view {
	int bar_width;     /* cells of the waterfall's bar; <= 0: fit term_cols */
	int term_cols;     /* the terminal's width, for bar_width <= 0 */
	int label_max;     /* widest label column, cells */
	int color;         /* ANSI colours per service */
	int ascii;         /* ASCII instead of Unicode blocks */
	int details;       /* annotations and tags under each span */
	int verbose;       /* ids, kind, endpoints too */
};

/*
 * tr_render_waterfall() - print @t as a terminal waterfall to @f: a header
 * (trace id, root, start, duration, services), a time axis, then one line
 * per span in tree order: indented "service name", a bar scaled to the
 * trace's time axis with a mark per annotation, the duration; under it
 * (view.details) the annotations with their offsets from the span's start
 * and the tags, (view.verbose) ids, kind and endpoints.
 * Return: 0 or -EIO when writing failed.
 */
int tr_render_waterfall(FILE *f, const struct tr_trace *t,
			const struct tr_view *view);

/*
 * tr_render_list() - print one line per trace (start time, trace id, root
 * service and name, span count, services, duration, error mark), under a
 * header line.  Return: 0 or -EIO.
 */
int tr_render_list(FILE *f, struct tr_trace *const *ts, size_t n,
		   const struct tr_view *view);

/*
 * tr_summary_json() - the line of tr_render_list() as a JSON object:
 * {traceId, timestamp, duration, rootService, rootName, spanCount,
 *  services[], error}.  Return: a new reference, or NULL (ENOMEM).
 */
json_t *tr_summary_json(const struct tr_trace *t);

/*
 * tr_format_duration() - "812us", "3.214ms", "1.250s", "2m03s" into @buf.
 * Return: @buf.
 */
char *tr_format_duration(uint64_t us, char *buf, size_t len);

/*
 * tr_format_time() - local time "YYYY-MM-DD HH:MM:SS.mmm" of @us.
 * Return: @buf.
 */
char *tr_format_time(uint64_t us, char *buf, size_t len);

/* An HTTP response from the collector. */
struct tr_http_resp {
	long status;
	char *body;        /* NUL-terminated; free() it */
	size_t len;
};

/*
 * tr_http_get() - GET @url.  Return: 0 when a response arrived (any
 * status; the caller frees resp->body), or -errno on a transport failure
 * (-ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -EIO...) with curl's reason
 * in @err.
 */
int tr_http_get(const char *url, struct tr_http_resp *resp,
		char *err, size_t errlen);
/* The same with a method (NULL: GET, or POST when there is a body), a
 * JSON body (NULL: none) and a bearer token (NULL: none). */
/* The bearer token of tr_http_get() (NULL: none; the string is kept). */
void tr_http_auth(const char *token);
/* The CA (PEM file) that signed an https:// collector's certificate, for
 * every request (--tls-ca; the string is kept). */
void tr_http_set_ca(const char *path);
/* tr_http_set_ca()'s file, else $FAY_TLS_CA, else NULL (the system's). */
const char *tr_http_ca(void);
/* This client's certificate and key (PEM files) for a collector that asks
 * for one (--tls-cert, --tls-key: fay collector --tls-client-ca; the
 * strings are kept).  Unset: $FAY_TLS_CERT and $FAY_TLS_KEY, else none. */
void tr_http_set_cert(const char *cert, const char *key);
/* Set the TLS options of the libcurl handle c (a CURL *): the CA
 * (tr_http_ca()) and the client's certificate and key, when given. */
void tr_http_tls(void *c);
int tr_http(const char *method, const char *url, const char *body, const char *token,
	    struct tr_http_resp *resp, char *err, size_t errlen);
/* tr_http(), then a 200's body written to stdout as it is; otherwise the
 * error on stderr, prefixed with shown (the collector's URL).  Returns 0;
 * 2 for a status that is the caller's mistake (400, 403, and 404 when
 * missing2: a name or id the caller gave that is not there); 1 otherwise
 * (a 404 without missing2: not the server the caller meant). */
int tr_http_to_stdout(const char *method, const char *url, const char *body,
		      const char *token, const char *shown, bool missing2);

/* The collector `fay traces` asks when neither --server nor $FAY_SERVER
 * names one. */
#define TR_DEFAULT_SERVER "http://127.0.0.1:9411"

/*
 * tr_server_url() - the collector's URL @s without a trailing '/', with
 * "http://" in front when it names no scheme.
 * Return: a malloc'd string (the caller frees it), or NULL (ENOMEM).
 */
char *tr_server_url(const char *s);

/*
 * tr_add_param() - append "?key=value", or "&key=value" once *@q has a
 * query, to the malloc'd path *@q, @val percent-encoded (all but RFC
 * 3986's unreserved characters).  *@q is freed and replaced on success,
 * and is no longer valid then.
 * Return: 0, or -ENOMEM (*@q is left as it was).
 */
int tr_add_param(char **q, const char *key, const char *val);

/*
 * tr_fetch_json() - GET @server + @path and parse the JSON answer.
 * Return: 0 with *@out set (a new reference) and *@status the HTTP status;
 * 0 with *@out NULL when the collector answered 404 (the caller words that
 * error itself); else the exit status, 1 (unreachable, an HTTP error, not
 * JSON) or 2 (a malformed URL, or the collector calls the request bad),
 * after printing the error to stderr.
 */
int tr_fetch_json(const char *server, const char *path, json_t **out,
		  long *status);

/* The manual pages of `fay traces --help`, `fay traces ls --help` and
 * `fay traces show --help` (traces_help.c). */
extern const char tr_help_traces[];
extern const char tr_help_ls[];
extern const char tr_help_show[];

#endif
