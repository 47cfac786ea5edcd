// SPDX-License-Identifier: MIT
/*
 * fay query: compile a FayQL query and run it on this host (src/engine);
 * --emit=ast|plan|ir|bpf shows each stage without loading anything.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "cli/traces.h"
#include "common/clock.h"
#include "common/log.h"
#include "engine/engine.h"
#include "cli/query_run.h"
#include "query/plan.h"
#include "query/query.h"

#define MAX_FILE	(1 << 20)

/* Read all of f into a malloc'd buffer; NULL on error (errno set). */
static char *read_all(FILE *f, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap), *nb;

	while (buf) {
		size_t r = fread(buf + n, 1, cap - n, f);

		n += r;
		if (r == 0) {
			if (ferror(f)) {
				free(buf);
				return NULL;
			}
			*len = n;
			return buf;
		}
		if (n == cap) {
			if (cap >= MAX_FILE) {
				free(buf);
				errno = EFBIG;
				return NULL;
			}
			cap *= 2;
			nb = realloc(buf, cap);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	return NULL;
}

enum emit { EMIT_RUN, EMIT_AST, EMIT_PLAN, EMIT_IR, EMIT_BPF };

/* --emit=ir|bpf: generate (and lower) the programs, load nothing. */
static int emit_code(struct query *q, const struct plan *plan, bool bpf,
		     const struct engine_run_opts *ro)
{
	struct engine_opts eo = {
		.sz = sizeof(eo), .pid = ro->pid, .no_fentry = ro->no_fentry,
		.max_prealloc = ro->max_prealloc,
		.buffer = ro->buffer, .emit_only = true, .cgroup = ro->cgroup,
	};
	char why[2048];
	struct engine *e = engine_new(q, plan, &eo, why, sizeof(why));
	int err;

	if (!e) {
		if (query_error(q)) {
			fputs(query_error(q), stderr);
			return 2;
		}
		fprintf(stderr, "error: %s", why);
		return 1;
	}
	err = bpf ? engine_dump_bpf(e, stdout) : engine_dump_ir(e, stdout);
	if (err && err != -EIO)
		fprintf(stderr, "error: %s", engine_error(e));
	engine_free(e);
	return err ? 1 : 0;
}

/* What the command line asked for. */
struct query_cli {
	struct query_opts opts;		/* parse options (--tracefs) */
	struct engine_run_opts ro;	/* running on this host */
	struct cluster_run_opts co;	/* running through --cluster */
	struct opt_client_token tok;	/* co.token points into it */
	enum emit emit;
	const char *file;		/* -f FILE, "-" standard input */
	const char *keep, *drop;	/* --keep NAME, --drop NAME */
	bool json, folded, tree;
};

static const char query_short_usage[] =
	"usage: fay query [--emit=ast|plan|ir|bpf] [--json] [-p PID | -c CMD] 'QUERY' | -f FILE (see fay query --help)\n";

/* Say that option `what` takes one of `want`, not arg: exit status 2. */
static int bad_value(const char *what, const char *want, const char *arg)
{
	fprintf(stderr, "error: %s takes %s, not '%s'\n", what, want, arg);
	return 2;
}

/* --emit and --format: 0, or 2 after saying what is wrong. */
static int output_opt(int c, const char *arg, struct query_cli *a)
{
	static const char *const emits[] = { [EMIT_AST] = "ast", [EMIT_PLAN] = "plan",
					      [EMIT_IR] = "ir", [EMIT_BPF] = "bpf" };

	if (c == 'e') {
		for (size_t i = EMIT_AST; i < sizeof(emits) / sizeof(emits[0]); i++)
			if (!strcmp(arg, emits[i])) {
				a->emit = (enum emit)i;
				return 0;
			}
		return bad_value("--emit", "ast, plan, ir or bpf", arg);
	}
	if (!strcmp(arg, "json"))
		a->json = true;
	else if (!strcmp(arg, "folded"))
		a->folded = true;
	else if (!strcmp(arg, "tree"))
		a->tree = true;
	else if (strcmp(arg, "table"))
		return bad_value("--format", "table, json, folded or tree", arg);
	return 0;
}

/* The options of running on this host: 0, or 2 after saying why. */
static int host_opt(int c, const char *arg, struct engine_run_opts *ro)
{
	char *end;

	switch (c) {
	case 'p':
		errno = 0;
		ro->pid = (pid_t)strtol(arg, &end, 10);
		if (errno || *end || ro->pid <= 0)
			return bad_value("-p", "a process id", arg);
		return 0;
	case 'c':
		ro->cmd = arg;
		return 0;
	case 'B':
		if (!strcmp(arg, "ringbuf"))
			ro->buffer = ENGINE_BUF_RINGBUF;
		else if (!strcmp(arg, "perf"))
			ro->buffer = ENGINE_BUF_PERF;
		else
			return bad_value("--buffer", "ringbuf or perf", arg);
		return 0;
	case 'K':
		ro->no_fentry = true;
		return 0;
	case 'M':
		if (opt_parse_size(arg, &ro->max_prealloc) || ro->max_prealloc < (1u << 20)) {
			fprintf(stderr, "error: --max-map-memory '%s': expected a size of at least 1M (like 512M or 2G)\n",
				arg);
			return 2;
		}
		return 0;
	case 'P':
		return parse_probe_mode(arg, &ro->probe_mode) ? 2 : 0;
	case 'U':
		ro->allow_other_users = true;
		return 0;
	case 'I':
		ro->no_inject = true;
		return 0;
	default:	/* 0x102 */
		ro->cgroup = arg;
		return 0;
	}
}

/* The options of --cluster: 0, or 2 after saying why. */
static int cluster_opt(int c, const char *arg, struct query_cli *a)
{
	switch (c) {
	case OPT_CLUSTER:
		a->co.url = arg;
		return 0;
	case OPT_TOKEN:
	case OPT_TOKEN_FILE:
		if (opt_client_token(c, arg, &a->tok) < 0)
			return 2;
		a->co.token = a->tok.token;
		return 0;
	case OPT_TLS_CA:
	case OPT_TLS_CERT:
	case OPT_TLS_KEY:
		opt_client_tls(c, arg);
		return 0;
	case 'k':
		a->keep = arg;
		return 0;
	case 'D':
		a->drop = arg;
		return 0;
	default:	/* 'G' */
		if (clock_parse_duration(arg, &a->co.grace_ns))
			return bad_value("--grace", "a duration (500ms, 2s)", arg);
		return 0;
	}
}

/*
 * Read the options into a.  Returns -1 to go on, else the exit status
 * (0 after --help, 2 after saying what is wrong).
 */
static int parse_args(int argc, char **argv, struct query_cli *a)
{
	static const struct option longopts[] = {
		{ "emit", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "format", required_argument, NULL, 'F' },
		{ "file", required_argument, NULL, 'f' },
		{ "tracefs", required_argument, NULL, 't' },
		{ "pid", required_argument, NULL, 'p' },
		{ "cmd", required_argument, NULL, 'c' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "buffer", required_argument, NULL, 'B' },
		{ "no-fentry", no_argument, NULL, 'K' },
		{ "max-map-memory", required_argument, NULL, 'M' },
		OPT_CLUSTER_ROW,
		OPT_CLIENT_TOKEN_ROWS,
		OPT_CLIENT_TLS_ROWS,
		{ "grace", required_argument, NULL, 'G' },
		{ "keep", required_argument, NULL, 'k' },
		{ "drop", required_argument, NULL, 'D' },
		{ "probe-mode", required_argument, NULL, 'P' },
		{ "allow-other-users", no_argument, NULL, 'U' },
		{ "no-inject", no_argument, NULL, 'I' },
		{ "cgroup", required_argument, NULL, 0x102 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, rc = 0;

	optind = 1;
	opterr = 0;
	while (!rc && (c = getopt_long(argc, argv, "+hf:p:c:q", longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
		case 'F':
			rc = output_opt(c, optarg, a);
			break;
		case 'j':
			a->json = true;
			break;
		case 'f':
			a->file = optarg;
			break;
		case 't':
			a->opts.tracefs = optarg;
			break;
		case 'q':
			a->ro.quiet = true;
			break;
		case 'p': case 'c': case 'B': case 'K': case 'M': case 'P': case 'U': case 'I':
		case 0x102:
			rc = host_opt(c, optarg, &a->ro);
			break;
		case OPT_CLUSTER: case OPT_TOKEN: case OPT_TOKEN_FILE: case OPT_TLS_CA:
		case OPT_TLS_CERT: case OPT_TLS_KEY: case 'k': case 'D': case 'G':
			rc = cluster_opt(c, optarg, a);
			break;
		case 'h':
			query_usage(stdout);
			return 0;
		default:
			if (optopt && strchr("fpcBtCGkDMP", optopt))
				fprintf(stderr, "error: option '%s' needs a value\n", argv[optind - 1]);
			else
				fprintf(stderr, "error: unknown option '%s'\n", argv[optind - 1]);
			fputs(query_short_usage, stderr);
			return 2;
		}
	}
	return rc ? rc : -1;
}

/*
 * The combinations the options do not allow, given nargs arguments
 * after them: 0, or 2 after saying which.
 */
static int check_args(const struct query_cli *a, int nargs)
{
	const char *why = NULL;

	if ((a->keep || a->drop) && !a->co.url)
		why = "--keep and --drop need --cluster URL";
	else if (a->drop && nargs)
		why = "--drop NAME takes no query";
	else if (a->drop)
		return 0;
	else if (a->co.url && (a->ro.pid || a->ro.cmd))
		why = "-p and -c trace this host; with --cluster use process(PID).function(...) or a where on pid";
	else if (a->co.url && a->ro.cgroup)
		why = "--cgroup is for this host; an agent's queries are scoped by fay agent --cgroup";
	else if (a->co.url && a->ro.no_inject)
		why = "--no-inject is for this host; an agent never loads the runtime when started with fay agent --no-inject";
	else if (a->ro.pid && a->ro.cmd)
		why = "give -p PID or -c CMD, not both";
	if (why) {
		fprintf(stderr, "error: %s\n", why);
		return 2;
	}
	if ((a->file && nargs) || (!a->file && nargs != 1)) {
		fprintf(stderr, "error: give one query, as an argument or with -f FILE\n");
		fputs(query_short_usage, stderr);
		return 2;
	}
	return 0;
}

/*
 * The query's text: arg, or the file -f named.  NULL after saying why
 * (*rc the exit status); *source names it in error messages.
 */
static char *read_query(const struct query_cli *a, const char *arg, size_t *len,
			const char **source, int *rc)
{
	FILE *f;
	char *text;
	int err;

	*rc = 2;
	if (!a->file) {
		*source = "<query>";
		*len = strlen(arg);
		text = strdup(arg);
		if (!text) {
			fprintf(stderr, "error: out of memory\n");
			*rc = 1;
		}
		return text;
	}
	f = strcmp(a->file, "-") ? fopen(a->file, "r") : stdin;
	*source = f == stdin ? "<stdin>" : a->file;
	if (!f) {
		fprintf(stderr, "error: cannot open %s: %s\n", a->file, strerror(errno));
		return NULL;
	}
	text = read_all(f, len);
	err = errno;
	if (f != stdin)
		fclose(f);
	if (!text)
		fprintf(stderr, "error: cannot read %s: %s\n", a->file,
			err == EFBIG ? "larger than 1 MiB" : strerror(err));
	return text;
}

/* Run the planned query on this host (src/engine): the exit status. */
static int run_here(struct query *q, const struct plan *plan, struct query_cli *a)
{
	struct engine_run_opts *ro = &a->ro;
	char lib[4096];
	bool have_lib;

	/* the runtime: preloaded into -c's command (inline), loaded with
	 * ptrace into a running process (inline, and auto when found) */
	have_lib = ro->probe_mode != ENGINE_PROBE_UPROBE && !fay_probe_lib(lib, sizeof(lib));
	if (ro->probe_mode == ENGINE_PROBE_INLINE && !have_lib) {
		fprintf(stderr, "error: --probe-mode=inline: libfay-probe.so is "
			"not next to fay nor in ../lib/fay (FAY_PROBE_LIB names it)\n");
		return 1;
	}
	if (have_lib && ro->cmd && ro->probe_mode == ENGINE_PROBE_INLINE)
		ro->preload = lib;
	else if (have_lib && !ro->cmd && !ro->no_inject)
		ro->inject_lib = lib;
	ro->out = stdout;
	ro->err = stderr;
	ro->json = a->json;
	ro->folded = a->folded && !a->json;
	ro->tree = a->tree && !a->json && !a->folded;
	return engine_run_query(q, plan, ro);
}

/*
 * Parse, check and plan text, then run it here or print the stage
 * --emit asks for: the exit status.
 */
static int compile_and_go(char *text, size_t len, const char *source, struct query_cli *a)
{
	struct query *q = query_new(source, text, len, &a->opts);
	const struct plan *plan = NULL;
	char why[512];
	int err, rc = 2;

	if (!q && errno == E2BIG) {
		fprintf(stderr, "error: the query is larger than 1 MiB\n");
		return 2;
	}
	if (!q)
		goto oom;
	err = query_parse(q);
	err = err ? : query_check(q);
	if (!err && a->emit != EMIT_AST)
		err = query_plan(q, &plan);
	if (err == -ENOMEM)
		goto oom;
	if (err) {
		fputs(query_error(q), stderr);
		goto out;
	}
	if ((a->folded || a->tree) && !a->json && a->emit == EMIT_RUN &&
	    engine_folded_check(plan, why, sizeof(why))) {
		fprintf(stderr, "error: %s\n", why);
		goto out;
	}
	rc = 0;
	switch (a->emit) {
	case EMIT_AST:
		err = a->json ? query_dump_ast_json(q, stdout) : query_dump_ast(q, stdout);
		break;
	case EMIT_PLAN:
		err = a->json ? plan_dump_json(plan, stdout) : plan_dump(plan, stdout);
		break;
	case EMIT_IR:
	case EMIT_BPF:
		rc = emit_code(q, plan, a->emit == EMIT_BPF, &a->ro);
		break;
	case EMIT_RUN:
		rc = run_here(q, plan, a);
		goto out;
	}
	if (err || fflush(stdout)) {
		fprintf(stderr, "error: cannot write the output: %s\n", strerror(errno));
		rc = 1;
	}
out:
	query_free(q);
	return rc;
oom:
	fprintf(stderr, "error: out of memory\n");
	rc = 1;
	goto out;
}

int cmd_query(int argc, char **argv)
{
	struct query_cli a = {
		.opts = { .sz = sizeof(a.opts) },
		.ro = { .sz = sizeof(a.ro), .window_gap = true },
		.emit = EMIT_RUN,
	};
	const char *source;
	char *text;
	size_t len;
	int rc;

	opt_client_token_init(&a.tok);
	a.co.token = a.tok.token;
	a.opts.tracefs = getenv("FAY_TRACEFS");
	if (a.opts.tracefs && !*a.opts.tracefs)
		a.opts.tracefs = NULL;
	rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	rc = check_args(&a, argc - optind);
	if (rc)
		return rc;
	a.co.out = stdout;
	a.co.err = stderr;
	if (a.drop)
		return cluster_drop(a.drop, &a.co);
	text = read_query(&a, argv[optind], &len, &source, &rc);
	if (!text)
		return rc;
	if (a.co.url && a.emit == EMIT_RUN) {
		a.co.json = a.json;
		a.co.folded = a.folded && !a.json;
		a.co.tree = a.tree && !a.json && !a.folded;
		a.co.quiet = a.ro.quiet;
		rc = a.keep ? cluster_keep(text, a.keep, &a.co) : cluster_run_query(text, &a.co);
	} else {
		rc = compile_and_go(text, len, source, &a);
	}
	free(text);
	return rc;
}
