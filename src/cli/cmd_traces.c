// SPDX-License-Identifier: MIT
/*
 * fay traces ls | show: list and show stored traces in the terminal,
 * reading the collector's Zipkin v2 HTTP API (traces.h has the map): the
 * options and the two subcommands.  The requests are in traces_fetch.c,
 * the --help pages in traces_help.c.
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
#include "common/spanrec.h"

struct opts {
	const char *server;
	int json, verbose, compact, ascii, width;
	enum tr_color color;
};

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


enum { OPT_SERVER = 256, OPT_COLOR, OPT_ASCII, OPT_MAXDUR };

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
	case OPT_TLS_CERT:
	case OPT_TLS_KEY:
		opt_client_tls(c, optarg);
		return 0;
	case OPT_TOKEN:
	case OPT_TOKEN_FILE: {
		static struct opt_client_token tok;	/* the HTTP client keeps the token */

		if (opt_client_token(c, optarg, &tok) < 0)
			return -EINVAL;
		tr_http_auth(tok.token);
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
		OPT_CLIENT_TOKEN_ROWS,
		OPT_CLIENT_TLS_ROWS,
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
		case 'h': fputs(tr_help_ls, stdout); return 0;
		default:
			if (shared_opt(c, o, "ls"))
				return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "error: fay traces ls: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}

	server = tr_server_url(o->server);
	q = strdup("/api/v2/traces");
	if (!server || !q ||
	    (service && tr_add_param(&q, "serviceName", service)) ||
	    (span && tr_add_param(&q, "spanName", span)) ||
	    (*mind && tr_add_param(&q, "minDuration", mind)) ||
	    (*maxd && tr_add_param(&q, "maxDuration", maxd)) ||
	    (*lookback && tr_add_param(&q, "lookback", lookback)) ||
	    tr_add_param(&q, "limit", lim)) {
		fprintf(stderr, "error: out of memory\n");
		ret = 1;
		goto out;
	}
	ret = tr_fetch_json(server, q, &arr, &status);
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

/* A trace id is 16 or 32 hex digits (spanrec_parse_trace(), the one
 * hex-id parser); lower-cased into @out as given. */
static int check_trace_id(const char *id, char out[33])
{
	size_t n = strlen(id);
	uint64_t hi, lo;

	if (spanrec_parse_trace(id, n, &hi, &lo))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		out[i] = (char)tolower((unsigned char)id[i]);
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
		OPT_CLIENT_TOKEN_ROWS,
		OPT_CLIENT_TLS_ROWS,
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
		case 'h': fputs(tr_help_show, stdout); return 0;
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
	server = tr_server_url(o->server);
	if (!server) {
		fprintf(stderr, "error: out of memory\n");
		return 1;
	}
	snprintf(path, sizeof(path), "/api/v2/trace/%s", id);
	ret = tr_fetch_json(server, path, &arr, &status);
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
	const char *env = getenv("FAY_SERVER");

	o.server = env && *env ? env : TR_DEFAULT_SERVER;
	tr_http_auth(opt_env_token());	/* until --token-file or --token */
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
		fputs(tr_help_traces, stdout);
		return 0;
	}
	fprintf(stderr, "error: fay traces: unknown subcommand '%s' (want ls or show)\n",
		argv[1]);
	return 2;
}
