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

int cmd_query(int argc, char **argv)
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
	struct query_opts opts = { .sz = sizeof(opts) };
	enum emit emit = EMIT_RUN;
	const char *file = NULL, *source = "<query>";
	char *text = NULL;
	size_t len;
	bool json = false, folded = false, have_lib;
	struct query *q = NULL;
	const struct plan *plan;
	struct engine_run_opts ro = { .sz = sizeof(ro), .window_gap = true };
	struct cluster_run_opts co = { 0 };
	const char *keep = NULL, *drop = NULL;
	struct opt_client_token tok;
	char lib[4096];
	int c, err, rc = 2;
	char *end;

	opt_client_token_init(&tok);
	co.token = tok.token;
	opts.tracefs = getenv("FAY_TRACEFS");
	if (opts.tracefs && !*opts.tracefs)
		opts.tracefs = NULL;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hf:p:c:q", longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			if (!strcmp(optarg, "ast"))
				emit = EMIT_AST;
			else if (!strcmp(optarg, "plan"))
				emit = EMIT_PLAN;
			else if (!strcmp(optarg, "ir"))
				emit = EMIT_IR;
			else if (!strcmp(optarg, "bpf"))
				emit = EMIT_BPF;
			else {
				fprintf(stderr, "error: --emit takes ast, plan, ir or bpf, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'F':
			if (!strcmp(optarg, "json")) {
				json = true;
			} else if (!strcmp(optarg, "folded")) {
				folded = true;
			} else if (strcmp(optarg, "table")) {
				fprintf(stderr, "error: --format takes table, json or folded, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'f':
			file = optarg;
			break;
		case 't':
			opts.tracefs = optarg;
			break;
		case 'p':
			errno = 0;
			ro.pid = (pid_t)strtol(optarg, &end, 10);
			if (errno || *end || ro.pid <= 0) {
				fprintf(stderr, "error: -p takes a process id, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'c':
			ro.cmd = optarg;
			break;
		case 'q':
			ro.quiet = true;
			break;
		case 'B':
			if (!strcmp(optarg, "ringbuf"))
				ro.buffer = ENGINE_BUF_RINGBUF;
			else if (!strcmp(optarg, "perf"))
				ro.buffer = ENGINE_BUF_PERF;
			else {
				fprintf(stderr, "error: --buffer takes ringbuf or perf, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'K':
			ro.no_fentry = true;
			break;
		case 'M':
			if (opt_parse_size(optarg, &ro.max_prealloc) || ro.max_prealloc < (1u << 20)) {
				fprintf(stderr, "error: --max-map-memory '%s': expected a size of at least 1M (like 512M or 2G)\n",
					optarg);
				return 2;
			}
			break;
		case 'P':
			if (parse_probe_mode(optarg, &ro.probe_mode))
				return 2;
			break;
		case 'U':
			ro.allow_other_users = true;
			break;
		case 'I':
			ro.no_inject = true;
			break;
		case 0x102:
			ro.cgroup = optarg;
			break;
		case OPT_CLUSTER:
			co.url = optarg;
			break;
		case OPT_TOKEN:
		case OPT_TOKEN_FILE:
			if (opt_client_token(c, optarg, &tok) < 0)
				return 2;
			co.token = tok.token;
			break;
		case OPT_TLS_CA:
		case OPT_TLS_CERT:
		case OPT_TLS_KEY:
			opt_client_tls(c, optarg);
			break;
		case 'k':
			keep = optarg;
			break;
		case 'D':
			drop = optarg;
			break;
		case 'G':
			if (clock_parse_duration(optarg, &co.grace_ns)) {
				fprintf(stderr, "error: --grace takes a duration (500ms, 2s), not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			query_usage(stdout);
			return 0;
		default:
			if (optopt && strchr("fpcBtCGkDMP", optopt))
				fprintf(stderr, "error: option '%s' needs a value\n", argv[optind - 1]);
			else
				fprintf(stderr, "error: unknown option '%s'\n", argv[optind - 1]);
			fprintf(stderr, "usage: fay query [--emit=ast|plan|ir|bpf] [--json] [-p PID | -c CMD] 'QUERY' | -f FILE (see fay query --help)\n");
			return 2;
		}
	}
	if ((keep || drop) && !co.url) {
		fprintf(stderr, "error: --keep and --drop need --cluster URL\n");
		return 2;
	}
	if (drop) {
		if (optind != argc) {
			fprintf(stderr, "error: --drop NAME takes no query\n");
			return 2;
		}
		co.out = stdout;
		co.err = stderr;
		return cluster_drop(drop, &co);
	}
	if (co.url && (ro.pid || ro.cmd)) {
		fprintf(stderr, "error: -p and -c trace this host; with --cluster use process(PID).function(...) or a where on pid\n");
		return 2;
	}
	if (co.url && ro.cgroup) {
		fprintf(stderr, "error: --cgroup is for this host; an agent's queries are scoped by fay agent --cgroup\n");
		return 2;
	}
	if (co.url && ro.no_inject) {
		fprintf(stderr, "error: --no-inject is for this host; an agent never loads the runtime when started with fay agent --no-inject\n");
		return 2;
	}
	if (ro.pid && ro.cmd) {
		fprintf(stderr, "error: give -p PID or -c CMD, not both\n");
		return 2;
	}
	if ((file && optind != argc) || (!file && optind != argc - 1)) {
		fprintf(stderr, "error: give one query, as an argument or with -f FILE\n");
		fprintf(stderr, "usage: fay query [--emit=ast|plan|ir|bpf] [--json] [-p PID | -c CMD] 'QUERY' | -f FILE (see fay query --help)\n");
		return 2;
	}
	if (file) {
		FILE *f = strcmp(file, "-") ? fopen(file, "r") : stdin;

		source = strcmp(file, "-") ? file : "<stdin>";
		if (!f) {
			fprintf(stderr, "error: cannot open %s: %s\n", file, strerror(errno));
			return 2;
		}
		text = read_all(f, &len);
		err = errno;
		if (f != stdin)
			fclose(f);
		if (!text) {
			fprintf(stderr, "error: cannot read %s: %s\n", file,
				err == EFBIG ? "larger than 1 MiB" : strerror(err));
			return 2;
		}
	} else {
		len = strlen(argv[optind]);
		text = malloc(len + 1);
		if (!text)
			goto oom;
		memcpy(text, argv[optind], len + 1);
	}

	if (co.url && emit == EMIT_RUN) {
		co.out = stdout;
		co.err = stderr;
		co.json = json;
		co.folded = folded && !json;
		co.quiet = ro.quiet;
		rc = keep ? cluster_keep(text, keep, &co) : cluster_run_query(text, &co);
		free(text);
		return rc;
	}
	q = query_new(source, text, len, &opts);
	if (!q) {
		if (errno == E2BIG) {
			fprintf(stderr, "error: the query is larger than 1 MiB\n");
			goto out;
		}
		goto oom;
	}
	err = query_parse(q);
	err = err ? : query_check(q);
	if (!err && emit != EMIT_AST)
		err = query_plan(q, &plan);
	if (err == -ENOMEM)
		goto oom;
	if (err) {
		fputs(query_error(q), stderr);
		goto out;
	}
	if (folded && !json && emit == EMIT_RUN) {
		char why[512];

		if (engine_folded_check(plan, why, sizeof(why))) {
			fprintf(stderr, "error: %s\n", why);
			goto out;
		}
	}
	rc = 0;
	switch (emit) {
	case EMIT_AST:
		err = json ? query_dump_ast_json(q, stdout) : query_dump_ast(q, stdout);
		break;
	case EMIT_PLAN:
		err = json ? plan_dump_json(plan, stdout) : plan_dump(plan, stdout);
		break;
	case EMIT_IR:
	case EMIT_BPF:
		rc = emit_code(q, plan, emit == EMIT_BPF, &ro);
		break;
	case EMIT_RUN:
		/* the runtime: preloaded into -c's command (inline), loaded with
		 * ptrace into a running process (inline, and auto when found) */
		have_lib = ro.probe_mode != ENGINE_PROBE_UPROBE && !fay_probe_lib(lib, sizeof(lib));
		if (ro.probe_mode == ENGINE_PROBE_INLINE && !have_lib) {
			fprintf(stderr, "error: --probe-mode=inline: libfay-probe.so is "
				"not next to fay nor in ../lib/fay (FAY_PROBE_LIB names it)\n");
			rc = 1;
			goto out;
		}
		if (have_lib && ro.cmd && ro.probe_mode == ENGINE_PROBE_INLINE)
			ro.preload = lib;
		else if (have_lib && !ro.cmd && !ro.no_inject)
			ro.inject_lib = lib;
		ro.out = stdout;
		ro.err = stderr;
		ro.json = json;
		ro.folded = folded && !json;
		rc = engine_run_query(q, plan, &ro);
		query_free(q);
		free(text);
		return rc;
	}
	if (err || fflush(stdout)) {
		fprintf(stderr, "error: cannot write the output: %s\n", strerror(errno));
		rc = 1;
	}
out:
	query_free(q);
	free(text);
	return rc;
oom:
	fprintf(stderr, "error: out of memory\n");
	rc = 1;
	goto out;
}
