// SPDX-License-Identifier: MIT
/*
 * fay traces ls | show: list and show stored traces in the terminal,
 * reading the collector's Zipkin v2 HTTP API (traces.h has the map).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "cli/traces.h"
#include "common/clock.h"
#include "common/lazy_curl.h"

#define DEFAULT_SERVER "http://127.0.0.1:9411"

static const char help_traces[] =
"NAME\n"
"    fay traces - list and show stored traces in the terminal\n"
"\n"
"SYNOPSIS\n"
"    fay traces ls [--service S] [--span NAME] [--min-duration D]\n"
"                  [--max-duration D] [--lookback D] [--limit N] [--json]\n"
"                  [--server URL] [--token-file FILE]\n"
"    fay traces show TRACE_ID [--json] [-v] [--compact] [--width N]\n"
"                  [--server URL] [--token-file FILE]\n"
"\n"
"DESCRIPTION\n"
"    Reads traces from a running `fay collector` through its Zipkin v2 HTTP\n"
"    API (/api/v2/traces, /api/v2/trace/{id}) and prints them: `ls` one\n"
"    line per trace, `show` one trace as a waterfall.  Run\n"
"    `fay traces ls --help` and `fay traces show --help` for each.\n"
"\n"
"OPTIONS\n"
"    --server URL   the collector's HTTP address (default $FAY_SERVER, else\n"
"                   " DEFAULT_SERVER ")\n"
"    --tls-ca FILE  the CA of an https:// collector's certificate (default\n"
"                   $FAY_TLS_CA, else the system's)\n"
"    --tls-cert FILE --tls-key FILE\n"
"                   this client's certificate and key, for a collector with\n"
"                   --tls-client-ca (default $FAY_TLS_CERT, $FAY_TLS_KEY)\n"
"    --token-file FILE  the collector's token ('read' scope): the first word\n"
"                   of the file's first line that is not a comment; the file\n"
"                   must not be readable by every user (default $FAY_TOKEN)\n"
"    -h, --help     this page\n"
"\n"
"EXAMPLES\n"
"    fay traces ls --service mapper --min-duration 5ms --limit 20\n"
"    fay traces show 4bf92f3577b34da6a3ce929d0e0e4736\n"
"\n"
"EXIT STATUS\n"
"    0 success; 1 the collector is unreachable, answered an error, or has no\n"
"    such trace; 2 bad arguments.\n"
"\n"
"ENVIRONMENT\n"
"    FAY_SERVER   the collector's URL when --server is not given.\n"
"    FAY_TOKEN    the collector's token when --token-file is not given.\n"
"    FAY_TLS_CA   the CA file when --tls-ca is not given.\n"
"    NO_COLOR     when set and not empty, never colour the output.\n";

static const char help_ls[] =
"NAME\n"
"    fay traces ls - list stored traces, newest first\n"
"\n"
"SYNOPSIS\n"
"    fay traces ls [--service S] [--span NAME] [--min-duration D]\n"
"                  [--max-duration D] [--lookback D] [--limit N] [--json]\n"
"                  [--color WHEN] [--ascii] [--server URL]\n"
"\n"
"DESCRIPTION\n"
"    Asks the collector for traces (GET /api/v2/traces) and prints one line\n"
"    per trace: start time (local), trace id, the root span's service and\n"
"    name, the number of spans, the services it crosses (in tree order),\n"
"    its duration, and ERROR when a span carries an \"error\" tag.\n"
"    Filters combine (all must hold), as in Zipkin's query API.\n"
"\n"
"OPTIONS\n"
"    -s, --service S       traces with a span of service S\n"
"    -n, --span NAME       traces with a span named NAME (needs --service on\n"
"                          a strict Zipkin server; fay's does not)\n"
"    -d, --min-duration D  traces with a span lasting at least D\n"
"                          (250us, 5ms, 2s ...)\n"
"        --max-duration D  ... and at most D\n"
"    -b, --lookback D      only traces that started within D before now\n"
"                          (default: all that the collector keeps)\n"
"    -l, --limit N         at most N traces (default 10)\n"
"    -j, --json            print a JSON array of summaries instead: traceId,\n"
"                          timestamp and duration (us), rootService,\n"
"                          rootName, spanCount, services, error\n"
"        --color WHEN      auto (default: when stdout is a terminal and\n"
"                          NO_COLOR is unset), always or never\n"
"        --ascii           ASCII only\n"
"        --server URL      the collector (default $FAY_SERVER, else\n"
"                          " DEFAULT_SERVER ")\n"
"    -h, --help            this page\n"
"\n"
"EXAMPLES\n"
"    fay traces ls --limit 5\n"
"    fay traces ls --service blocker-1 --min-duration 1ms --lookback 10m\n"
"    fay traces ls --json | jq -r '.[].traceId'\n"
"\n"
"EXIT STATUS\n"
"    0 the list was printed (also when it is empty); 1 the collector is\n"
"    unreachable or answered an error; 2 bad arguments.\n"
"\n"
"ENVIRONMENT\n"
"    FAY_SERVER, NO_COLOR as in `fay traces --help`.\n";

static const char help_show[] =
"NAME\n"
"    fay traces show - show one trace as a waterfall\n"
"\n"
"SYNOPSIS\n"
"    fay traces show TRACE_ID [--json] [-v] [--compact] [--width N]\n"
"                  [--color WHEN] [--ascii] [--server URL]\n"
"\n"
"DESCRIPTION\n"
"    Fetches the trace (GET /api/v2/trace/TRACE_ID) and prints a header\n"
"    (root, start, duration, services), a time axis, and one line per span\n"
"    in tree order: children under their parent by start time, indented by\n"
"    depth, `service name`, a bar scaled to the trace's time axis (Unicode\n"
"    eighth blocks) with a mark for each annotation, and the duration.\n"
"    Under each span: its annotations with their offsets from the span's\n"
"    start, and its tags.  A span whose parent is not in the trace is shown\n"
"    as a root, marked (orphan).  Each service has its own colour when\n"
"    stdout is a terminal.\n"
"\n"
"OPTIONS\n"
"    -j, --json        print the trace as the collector returned it (a JSON\n"
"                      array of Zipkin v2 spans), indented\n"
"    -v, --verbose     also span ids, parent ids, kind, endpoints; tags in\n"
"                      full\n"
"    -c, --compact     only the bars: no annotations or tags\n"
"    -w, --width N     the bar is N cells wide (default: fit the terminal,\n"
"                      or 60 when stdout is not a terminal)\n"
"        --color WHEN  auto (default), always or never\n"
"        --ascii       ASCII only ('#' bars, '+' annotation marks)\n"
"        --server URL  the collector (default $FAY_SERVER, else\n"
"                      " DEFAULT_SERVER ")\n"
"    -h, --help        this page\n"
"\n"
"EXAMPLES\n"
"    fay traces show $(fay traces ls --json --limit 1 | jq -r '.[0].traceId')\n"
"    fay traces show 4bf92f3577b34da6a3ce929d0e0e4736 -v --width 100\n"
"\n"
"EXIT STATUS\n"
"    0 shown; 1 the collector is unreachable, answered an error, or has no\n"
"    trace with that id; 2 bad arguments (e.g. an id that is not 16 or 32\n"
"    hex digits).\n"
"\n"
"ENVIRONMENT\n"
"    FAY_SERVER, NO_COLOR as in `fay traces --help`.\n";

struct opts {
	const char *server;
	int json, verbose, compact, ascii, width;
	enum tr_color color;
};

/* The server URL without a trailing '/', with a scheme; malloc'd. */
static char *server_url(const char *s)
{
	size_t n = strlen(s);
	char *u;

	while (n && s[n - 1] == '/')
		n--;
	if (strstr(s, "://")) {
		u = strndup(s, n);
	} else if ((u = malloc(n + 8))) {
		memcpy(u, "http://", 7);
		memcpy(u + 7, s, n);
		u[n + 7] = '\0';
	}
	return u;
}

static void view_init(struct tr_view *v, const struct opts *o)
{
	const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
	int tty = isatty(STDOUT_FILENO);
	struct winsize ws;

	memset(v, 0, sizeof(*v));
	v->label_max = 44;
	v->ascii = o->ascii;
	v->details = !o->compact;
	v->verbose = o->verbose;
	if (o->color == TR_COLOR_ALWAYS)
		v->color = 1;
	else if (o->color == TR_COLOR_AUTO)
		v->color = tty && !(nc && *nc) && !(term && !strcmp(term, "dumb"));
	if (o->width > 0) {
		v->bar_width = o->width;
	} else if (tty && !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col) {
		v->term_cols = ws.ws_col;
		v->bar_width = 0;
	} else {
		v->bar_width = 60;
	}
}

/*
 * GET server + path and parse the JSON answer.  Prints the error and
 * returns the exit status (1, or 2 when the collector calls the request
 * bad) on failure, 0 with *out set on success; *status gets the HTTP status
 * so the caller can treat 404 itself (then *out is NULL).
 */
static int fetch_json(const char *server, const char *path, json_t **out,
		      long *status)
{
	struct tr_http_resp r;
	json_error_t je;
	char err[CURL_ERROR_SIZE + 64], *url;
	int ret;

	*out = NULL;
	if (asprintf(&url, "%s%s", server, path) < 0) {
		fprintf(stderr, "error: out of memory\n");
		return 1;
	}
	ret = tr_http_get(url, &r, err, sizeof(err));
	if (ret == -ELIBACC) {
		fprintf(stderr, "error: fay traces: %s\n", err);
		free(url);
		return 1;
	}
	if (ret) {
		fprintf(stderr,
			"error: cannot reach the fay collector at %s: %s\n"
			"  Is `fay collector` running there?  Start it with `fay collector`,\n"
			"  or point --server or FAY_SERVER at the one that runs.\n",
			server, err);
		free(url);
		return ret == -EINVAL ? 2 : 1;
	}
	*status = r.status;
	if (r.status == 404) {
		free(r.body);
		free(url);
		return 0;
	}
	if (r.status != 200) {
		size_t n = strcspn(r.body, "\n");

		fprintf(stderr, "error: the collector at %s answered HTTP %ld for %s%s%.*s\n",
			server, r.status, path, n ? ": " : "", (int)(n > 300 ? 300 : n),
			r.body);
		free(r.body);
		free(url);
		return r.status == 400 ? 2 : 1;
	}
	*out = json_loadb(r.body, r.len, 0, &je);
	if (!*out)
		fprintf(stderr, "error: %s: the answer is not JSON: line %d column %d: %s\n",
			url, je.line, je.column, je.text);
	free(r.body);
	free(url);
	return *out ? 0 : 1;
}

/*
 * s percent-encoded but for RFC 3986's unreserved characters (what
 * curl_easy_escape() does, without loading libcurl); malloc'ed, NULL when
 * out of memory.
 */
static char *url_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *e = malloc(3 * strlen(s) + 1), *p = e;

	for (; e && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
			*p++ = (char)ch;
		} else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	if (e)
		*p = '\0';
	return e;
}

/* Append "&key=value" (value URL-escaped) to *q. */
static int add_param(char **q, const char *key, const char *val)
{
	char *e = url_escape(val), *nq;
	int n;

	if (!e)
		return -ENOMEM;
	n = asprintf(&nq, "%s%s%s=%s", *q, strchr(*q, '?') ? "&" : "?", key, e);
	free(e);
	if (n < 0)
		return -ENOMEM;
	free(*q);
	*q = nq;
	return 0;
}

/* --tls-cert, --tls-key (tr_http_set_cert() takes both at once) */
static const char *tls_cert, *tls_key;

enum { OPT_SERVER = 256, OPT_COLOR, OPT_ASCII, OPT_MAXDUR, OPT_TOKEN_FILE, OPT_TLS_CA,
       OPT_TLS_CERT, OPT_TLS_KEY };

/*
 * The options `ls` and `show` share (--server, --color, --ascii), and
 * getopt's complaints.  Returns 0 when @c was one of them, or -EINVAL
 * after printing the error.
 */
static int shared_opt(int c, struct opts *o, const char *sub)
{
	switch (c) {
	case OPT_SERVER:
		o->server = optarg;
		return 0;
	case OPT_TLS_CA:
		tr_http_set_ca(optarg);
		return 0;
	case OPT_TLS_CERT:
		tls_cert = optarg;
		tr_http_set_cert(tls_cert, tls_key);
		return 0;
	case OPT_TLS_KEY:
		tls_key = optarg;
		tr_http_set_cert(tls_cert, tls_key);
		return 0;
	case OPT_TOKEN_FILE: {
		static char buf[256];
		const char *token;

		if (opt_token(optarg, buf, sizeof(buf), &token))
			return -EINVAL;
		tr_http_auth(token);
		return 0;
	}
	case OPT_ASCII:
		o->ascii = 1;
		return 0;
	case OPT_COLOR:
		if (!strcmp(optarg, "auto"))
			o->color = TR_COLOR_AUTO;
		else if (!strcmp(optarg, "always"))
			o->color = TR_COLOR_ALWAYS;
		else if (!strcmp(optarg, "never"))
			o->color = TR_COLOR_NEVER;
		else
			break;
		return 0;
	default:
		fprintf(stderr, "Run 'fay traces %s --help' for the options.\n", sub);
		return -EINVAL;
	}
	fprintf(stderr, "error: --color '%s': want auto, always or never\n", optarg);
	return -EINVAL;
}

static int cmp_newest(const void *a, const void *b)
{
	const struct tr_trace *x = *(struct tr_trace *const *)a;
	const struct tr_trace *y = *(struct tr_trace *const *)b;

	return x->t0 > y->t0 ? -1 : x->t0 < y->t0;
}

/* A duration option in @unit_ns units into @out; prints the error. */
static int duration_opt(const char *name, const char *arg, uint64_t unit_ns,
			char *out, size_t len)
{
	uint64_t ns;

	if (clock_parse_duration(arg, &ns)) {
		fprintf(stderr, "error: --%s '%s': not a duration (e.g. 250us, 5ms, 2s, 10m)\n",
			name, arg);
		return -EINVAL;
	}
	snprintf(out, len, "%llu", (unsigned long long)(ns / unit_ns));
	return 0;
}

static int traces_ls(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "service", required_argument, NULL, 's' },
		{ "span", required_argument, NULL, 'n' },
		{ "min-duration", required_argument, NULL, 'd' },
		{ "max-duration", required_argument, NULL, OPT_MAXDUR },
		{ "lookback", required_argument, NULL, 'b' },
		{ "limit", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ "server", required_argument, NULL, OPT_SERVER },
		{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
		{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
		{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
		{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
		{ "color", required_argument, NULL, OPT_COLOR },
		{ "colour", required_argument, NULL, OPT_COLOR },
		{ "ascii", no_argument, NULL, OPT_ASCII },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *service = NULL, *span = NULL;
	char mind[32] = "", maxd[32] = "", lookback[32] = "", lim[16] = "10";
	char *q = NULL, *server = NULL, *end;
	struct tr_trace **ts = NULL;
	json_t *arr = NULL, *el;
	struct tr_view v;
	size_t nt = 0, i;
	long status = 0, l;
	int c, ret = 2;

	while ((c = getopt_long(argc, argv, "s:n:d:b:l:jh", lo, NULL)) != -1) {
		switch (c) {
		case 's': service = optarg; break;
		case 'n': span = optarg; break;
		case 'd':
			if (duration_opt("min-duration", optarg, 1000, mind, sizeof(mind)))
				return 2;
			break;
		case OPT_MAXDUR:
			if (duration_opt("max-duration", optarg, 1000, maxd, sizeof(maxd)))
				return 2;
			break;
		case 'b':
			if (duration_opt("lookback", optarg, 1000000, lookback,
					 sizeof(lookback)))
				return 2;
			break;
		case 'l':
			errno = 0;
			l = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || l < 1 || l > 1000000) {
				fprintf(stderr, "error: --limit '%s': want a whole number from 1 to 1000000\n",
					optarg);
				return 2;
			}
			snprintf(lim, sizeof(lim), "%ld", l);
			break;
		case 'j': o->json = 1; break;
		case 'h': fputs(help_ls, stdout); return 0;
		default:
			if (shared_opt(c, o, "ls"))
				return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "error: fay traces ls: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}

	server = server_url(o->server);
	q = strdup("/api/v2/traces");
	if (!server || !q ||
	    (service && add_param(&q, "serviceName", service)) ||
	    (span && add_param(&q, "spanName", span)) ||
	    (*mind && add_param(&q, "minDuration", mind)) ||
	    (*maxd && add_param(&q, "maxDuration", maxd)) ||
	    (*lookback && add_param(&q, "lookback", lookback)) ||
	    add_param(&q, "limit", lim)) {
		fprintf(stderr, "error: out of memory\n");
		ret = 1;
		goto out;
	}
	ret = fetch_json(server, q, &arr, &status);
	if (ret)
		goto out;
	ret = 1;
	if (!arr) {
		fprintf(stderr, "error: %s%s: not found (HTTP 404); is this a fay or Zipkin collector?\n",
			server, q);
		goto out;
	}
	if (!json_is_array(arr)) {
		fprintf(stderr, "error: %s%s: expected a JSON array of traces\n", server, q);
		goto out;
	}
	ts = calloc(json_array_size(arr) + 1, sizeof(*ts));
	if (!ts) {
		fprintf(stderr, "error: out of memory\n");
		goto out;
	}
	json_array_foreach(arr, i, el) {
		char err[256];
		struct tr_trace *t = tr_trace_new(el, err, sizeof(err));

		if (!t) {
			fprintf(stderr, "warning: trace %zu of the answer skipped: %s\n",
				i, *err ? err : strerror(errno));
			continue;
		}
		ts[nt++] = t;
	}
	qsort(ts, nt, sizeof(*ts), cmp_newest);

	if (o->json) {
		json_t *out = json_array();

		for (i = 0; out && i < nt; i++)
			if (json_array_append_new(out, tr_summary_json(ts[i])))
				break;
		if (!out || i < nt || json_dumpf(out, stdout, JSON_INDENT(2)) ||
		    fputc('\n', stdout) == EOF) {
			fprintf(stderr, "error: cannot write the JSON output\n");
			json_decref(out);
			goto out;
		}
		json_decref(out);
	} else {
		view_init(&v, o);
		if (tr_render_list(stdout, ts, nt, &v)) {
			fprintf(stderr, "error: writing the list: %s\n", strerror(errno));
			goto out;
		}
		if (!nt)
			fprintf(stderr, "no traces%s on %s\n",
				service || span || *mind || *maxd || *lookback ?
				" match" : "", server);
	}
	ret = 0;
out:
	for (i = 0; ts && i < nt; i++)
		tr_trace_free(ts[i]);
	free(ts);
	json_decref(arr);
	free(q);
	free(server);
	return ret;
}

/* A trace id is 16 or 32 hex digits; lower-cased into @out. */
static int check_trace_id(const char *id, char out[33])
{
	size_t n = strlen(id);

	if (n != 16 && n != 32)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isxdigit((unsigned char)id[i]))
			return -EINVAL;
		out[i] = (char)tolower((unsigned char)id[i]);
	}
	out[n] = '\0';
	return 0;
}

static int traces_show(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "compact", no_argument, NULL, 'c' },
		{ "width", required_argument, NULL, 'w' },
		{ "server", required_argument, NULL, OPT_SERVER },
		{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
		{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
		{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
		{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
		{ "color", required_argument, NULL, OPT_COLOR },
		{ "colour", required_argument, NULL, OPT_COLOR },
		{ "ascii", no_argument, NULL, OPT_ASCII },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char id[33], path[64], err[256], *server = NULL, *end;
	struct tr_trace *t = NULL;
	json_t *arr = NULL;
	struct tr_view v;
	long status = 0, w;
	int c, ret;

	while ((c = getopt_long(argc, argv, "jvcw:h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': o->json = 1; break;
		case 'v': o->verbose = 1; break;
		case 'c': o->compact = 1; break;
		case 'w':
			errno = 0;
			w = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || w < 10 || w > 1000) {
				fprintf(stderr, "error: --width '%s': want a whole number from 10 to 1000\n",
					optarg);
				return 2;
			}
			o->width = (int)w;
			break;
		case 'h': fputs(help_show, stdout); return 0;
		default:
			if (shared_opt(c, o, "show"))
				return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "error: fay traces show: %s\n"
			"usage: fay traces show TRACE_ID [--json] [-v] [--server URL]\n",
			optind >= argc ? "which trace? give its id" : "give one trace id");
		return 2;
	}
	if (check_trace_id(argv[optind], id)) {
		fprintf(stderr, "error: trace id '%s': must be 16 or 32 hex digits\n",
			argv[optind]);
		return 2;
	}
	server = server_url(o->server);
	if (!server) {
		fprintf(stderr, "error: out of memory\n");
		return 1;
	}
	snprintf(path, sizeof(path), "/api/v2/trace/%s", id);
	ret = fetch_json(server, path, &arr, &status);
	if (ret)
		goto out;
	ret = 1;
	if (!arr) {
		fprintf(stderr, "error: no trace %s on %s (not sampled, not shipped yet, "
			"or older than the collector's retention)\n", id, server);
		goto out;
	}
	if (o->json) {
		if (json_dumpf(arr, stdout, JSON_INDENT(2)) || fputc('\n', stdout) == EOF) {
			fprintf(stderr, "error: cannot write the JSON output\n");
			goto out;
		}
		ret = 0;
		goto out;
	}
	t = tr_trace_new(arr, err, sizeof(err));
	if (!t) {
		fprintf(stderr, "error: trace %s from %s: %s\n", id, server,
			*err ? err : strerror(errno));
		goto out;
	}
	view_init(&v, o);
	if (tr_render_waterfall(stdout, t, &v)) {
		fprintf(stderr, "error: writing the waterfall: %s\n", strerror(errno));
		goto out;
	}
	ret = 0;
out:
	tr_trace_free(t);
	json_decref(arr);
	free(server);
	return ret;
}

int cmd_traces(int argc, char **argv)
{
	struct opts o = { 0 };
	const char *env = getenv("FAY_SERVER"), *token;

	o.server = env && *env ? env : DEFAULT_SERVER;
	opt_token(NULL, NULL, 0, &token);	/* $FAY_TOKEN, until --token-file */
	tr_http_auth(token);
	if (argc < 2) {
		fputs("usage: fay traces ls|show ... (see 'fay traces --help')\n", stderr);
		return 2;
	}
	optind = 1;
	if (!strcmp(argv[1], "ls") || !strcmp(argv[1], "list"))
		return traces_ls(argc - 1, argv + 1, &o);
	if (!strcmp(argv[1], "show"))
		return traces_show(argc - 1, argv + 1, &o);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		fputs(help_traces, stdout);
		return 0;
	}
	fprintf(stderr, "error: fay traces: unknown subcommand '%s' (want ls or show)\n",
		argv[1]);
	return 2;
}
