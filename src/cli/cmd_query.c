// SPDX-License-Identifier: MIT
/*
 * fay query: compile a FayQL query; --emit=ast|plan shows what the
 * compiler made of it without loading anything.  Running queries arrives
 * with the eBPF back end (src/bpf).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "common/log.h"
#include "query/plan.h"
#include "query/query.h"

#define MAX_FILE	(1 << 20)

static void usage(FILE *f)
{
	fputs(
"NAME\n"
"    fay query - compile and run a FayQL query on this host\n"
"\n"
"SYNOPSIS\n"
"    fay query [--emit=ast|plan] [--json] [--tracefs DIR] 'QUERY'\n"
"    fay query [--emit=ast|plan] [--json] [--tracefs DIR] -f FILE\n"
"\n"
"DESCRIPTION\n"
"    FayQL asks one declarative, LINQ-shaped question of the kernel and of\n"
"    live processes (Fay, SOSP 2011):\n"
"\n"
"        from VAR in SOURCE  {where COND | let NAME = EXPR}\n"
"        [group VAR by KEY into G]  select EXPR | { NAME: EXPR, ... }\n"
"        {window DUR | for DUR | order by EXPR [desc] | limit N}\n"
"\n"
"    SOURCE is syscall(\"read\"), tracepoint(\"sched:sched_switch\"),\n"
"    kernel.function(\"vfs_read\"), function(\"libc:read\"),\n"
"    process(PID).function(\"sym\"), usdt(\"BIN:PROVIDER:NAME\"), profile(HZ),\n"
"    spans(\"service\"), optionally scoped cluster. or host(\"h\").\n"
"    Fields: VAR.time pid tid comm cpu uid arg(N) ret duration, tracepoint\n"
"    fields by name; str(e) reads a string.  Aggregates: count sum min max\n"
"    avg hist lhist(e,lo,hi,step) quantile(e,p) distinct, free (count()) or\n"
"    on the group (g.count()); g.key or g.NAME is the group key.\n"
"\n"
"    The query is compiled into probes that filter, group and aggregate\n"
"    where the events happen (per CPU); partial results are merged when\n"
"    read.  The whole language, with error bounds and examples, is in\n"
"    docs/QUERY.md.\n"
"\n"
"    Running a query needs the eBPF back end, which is not built yet:\n"
"    without --emit, fay query checks the query, says so and exits 1.\n"
"\n"
"OPTIONS\n"
"    --emit=ast      print the checked syntax tree (one node per line,\n"
"                    @LINE:COL positions, types and meanings in brackets)\n"
"    --emit=plan     print the plan: probes, entry/exit pairing, predicates,\n"
"                    key and per-CPU value layout, each aggregate's probe,\n"
"                    merge and final parts, columns, options\n"
"    --emit=ir|bpf   not built yet (arrives with the back end)\n"
"    --json          print the AST or plan as one JSON object\n"
"    -f FILE         read the query from FILE ('-' for standard input)\n"
"    --tracefs DIR   read tracepoint formats from DIR/events/SYS/EVENT/format\n"
"    -h, --help      this page\n"
"\n"
"    --emit loads nothing and needs no root; only tracepoint sources read\n"
"    their format file (and mount tracefs if it is missing, as root).\n"
"\n"
"EXAMPLES\n"
"    fay query --emit=plan 'from s in syscall(\"*\") group s by s.comm into g\n"
"        select { comm: g.key, calls: g.count() } for 5s'\n"
"    fay query --emit=ast 'from f in kernel.function(\"vfs_read\")\n"
"        select { p99: quantile(f.duration, 0.99), bytes: hist(f.ret) } window 1s'\n"
"    fay query --emit=plan -f tests/golden/query/paper.q\n"
"\n"
"EXIT STATUS\n"
"    0 success; 1 runtime failure (or running, not built yet);\n"
"    2 usage error or an error in the query, reported as\n"
"      SOURCE:LINE:COL: error: MESSAGE, the line, and a caret.\n"
"\n"
"ENVIRONMENT\n"
"    FAY_TRACEFS     default for --tracefs\n"
"    FAY_LOG_LEVEL   error, warn, info, debug\n"
"\n"
"FILES\n"
"    /sys/kernel/tracing/events/*/*/format   tracepoint field layouts\n"
"    docs/QUERY.md                           the FayQL manual\n", f);
}

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

int cmd_query(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "emit", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "file", required_argument, NULL, 'f' },
		{ "tracefs", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct query_opts opts = { .sz = sizeof(opts) };
	enum emit emit = EMIT_RUN;
	const char *file = NULL, *source = "<query>";
	char *text = NULL;
	size_t len;
	bool json = false;
	struct query *q = NULL;
	const struct plan *plan;
	int c, err, rc = 2;

	opts.tracefs = getenv("FAY_TRACEFS");
	if (opts.tracefs && !*opts.tracefs)
		opts.tracefs = NULL;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hf:", longopts, NULL)) != -1) {
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
		case 'f':
			file = optarg;
			break;
		case 't':
			opts.tracefs = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "error: unknown option '%s'\n", argv[optind - 1]);
			fprintf(stderr, "usage: fay query [--emit=ast|plan] [--json] 'QUERY' | -f FILE (see fay query --help)\n");
			return 2;
		}
	}
	if ((file && optind != argc) || (!file && optind != argc - 1)) {
		fprintf(stderr, "error: give one query, as an argument or with -f FILE\n");
		fprintf(stderr, "usage: fay query [--emit=ast|plan] [--json] 'QUERY' | -f FILE (see fay query --help)\n");
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
		fprintf(stderr, "error: --emit=%s is not built yet: it arrives with the eBPF back end (src/bpf); --emit=ast and --emit=plan work\n",
			emit == EMIT_IR ? "ir" : "bpf");
		rc = 1;
		break;
	case EMIT_RUN:
		fprintf(stderr, "error: the query is valid, but running queries is not built yet: it arrives with the eBPF back end (src/bpf). Use --emit=ast or --emit=plan to see what it compiles to\n");
		rc = 1;
		break;
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
