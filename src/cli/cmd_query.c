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

static void usage(FILE *f)
{
	fputs(
"NAME\n"
"    fay query - compile and run a FayQL query on this host\n"
"\n"
"SYNOPSIS\n"
"    fay query [OPTIONS] 'QUERY'\n"
"    fay query [OPTIONS] -f FILE\n"
"    fay query --emit=ast|plan|ir|bpf [--json] 'QUERY'\n"
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
"    fields by name; str(e) reads a string.  Spans (SPANS below): name\n"
"    service kind error duration time trace_id span_id parent_id pid host\n"
"    tag(\"KEY\").  Aggregates: count sum min max\n"
"    avg hist lhist(e,lo,hi,step) quantile(e,p) distinct, free (count()) or\n"
"    on the group (g.count()); g.key or g.NAME is the group key.\n"
"\n"
"    fay compiles the query into eBPF programs (no compiler at run time),\n"
"    loads them, attaches them to what the source names (an exit probe\n"
"    only when ret or duration is used), and filters, groups and\n"
"    aggregates where the events happen, per CPU.  The partial results\n"
"    are merged when read.\n"
"\n"
"  Running and output\n"
"    A select with aggregates prints one table when the query ends: at\n"
"    its time limit ('for 5s', or Fay's 'where x.time < now + 5s'), when\n"
"    the traced process exits (-p, -c), or on Ctrl-C (SIGINT), SIGTERM\n"
"    or SIGHUP.  With 'window 1s' it prints a table per tumbling window\n"
"    (the maps are cleared after each) and the partial last window.\n"
"    hist() and lhist() columns are drawn as bars under their row:\n"
"\n"
"        [4K, 8K)        120 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
"\n"
"    A select without aggregates streams one row per event as it\n"
"    happens (through a BPF ring buffer, or per-CPU perf buffers on\n"
"    kernels without one).  Rows are ordered by the group key unless\n"
"    'order by' says otherwise; 'limit N' keeps N rows (per window).\n"
"\n"
"    Nothing is dropped silently: events that found the map of keys full\n"
"    (10240 keys), entries that found the per-thread pairing map full,\n"
"    streamed rows the buffer had no room for, and str() reads of an\n"
"    address that could not be read (the value is \"\") are counted in\n"
"    the probes and reported with the result as 'warning: N ...' lines\n"
"    (on standard error with --json).  str() reads user memory for\n"
"    syscall, function, usdt sources and syscalls:sys_enter_* fields;\n"
"    elsewhere kernel memory, else user memory.\n"
"\n"
"    When the kernel's verifier rejects a program, the message points at\n"
"    the part of the query it came from (LINE:COL and a caret).  Every\n"
"    program, attachment and map is released on every way out; nothing\n"
"    stays in the kernel (bpftool prog shows none).\n"
"\n"
"OPTIONS\n"
"    --json          results as JSON: one object per row per line, keys\n"
"                    the select's names; windowed rows carry\n"
"                    \"window_start_ns\" (wall clock); a hist/lhist value\n"
"                    is an array of its non-empty buckets\n"
"                    {\"lo\":L,\"hi\":H,\"count\":N} (lo inclusive, hi\n"
"                    exclusive, null when unbounded).  With --emit=ast or\n"
"                    --emit=plan: that stage as one JSON object\n"
"    -p, --pid PID   trace only process PID (its threads); stop when it\n"
"                    exits.  Uprobes and USDT probes attach to it alone\n"
"    -c, --cmd CMD   run CMD once every probe is attached, trace only it\n"
"                    (its pid), stop when it exits.  Plain words are run\n"
"                    directly; CMD with shell syntax through sh -c 'exec CMD'\n"
"    -q, --quiet     no \"N probes attached\" line on standard error\n"
"    --buffer=ringbuf|perf\n"
"                    how streamed rows leave the kernel (default: ringbuf\n"
"                    when the kernel has it)\n"
"    --no-fentry     kernel functions: use kprobes, not fentry/fexit\n"
"    --max-map-memory SIZE\n"
"                    kernel memory the query's maps may take when they are\n"
"                    created (default 256M; profile()'s map is preallocated,\n"
"                    10,240+ keys x its aggregates x CPUs); over it the query\n"
"                    is refused with the sizes\n"
"    --probe-mode=auto|inline|uprobe\n"
"                    how function(...) sources run (default auto).  inline:\n"
"                    the programs run inside the traced process, reached by\n"
"                    a jump patched into the function (no trap: tens of ns\n"
"                    per call instead of microseconds), verified again there,\n"
"                    each thread aggregating in its own slot of maps shared\n"
"                    with fay; it needs one process (-p, -c, process(PID))\n"
"                    with fay's runtime loaded (fay run starts one; with\n"
"                    -c, --probe-mode=inline preloads it; a running process\n"
"                    gets it loaded with ptrace: one thread calls dlopen at\n"
"                    a safe point and is put back as it was; the runtime\n"
"                    stays loaded, idle) and a function entry the patcher\n"
"                    accepts, and fails with the reason otherwise.  uprobe:\n"
"                    kernel uprobes.  auto: inline when it can, loading the\n"
"                    runtime into a running process (-p, process(PID)) when\n"
"                    fay may ptrace it (CAP_SYS_PTRACE or the same user,\n"
"                    Yama's ptrace_scope, --allow-other-users' rule) and it\n"
"                    is a dynamically linked glibc program; else a uprobe.\n"
"                    A function in every process (no -p) and -c CMD in auto\n"
"                    mode use a uprobe.  Either way one line on standard\n"
"                    error says which and why (\"fay: pid 123: uprobe:\n"
"                    cannot load the fay runtime: static binary (...)\")\n"
"    --no-inject     never load fay's runtime into a running process: auto\n"
"                    uses a uprobe where the runtime is not loaded already\n"
"                    (fay run), inline fails\n"
"    --allow-other-users\n"
"                    when fay runs as a non-root user (with CAP_BPF and\n"
"                    CAP_PERFMON), probe every user's processes; without it\n"
"                    only the user's own: other users' events are dropped in\n"
"                    the kernel, and a uprobe/USDT probe of another user's\n"
"                    process, or of a binary the user does not own in every\n"
"                    process, is refused with the reason\n"
"    --cluster URL   run the query on the agents of the collector at URL\n"
"                    (its HTTP address, e.g. http://10.0.0.1:9411): see\n"
"                    CLUSTER QUERIES\n"
"    --token-file FILE  cluster: the collector's token (scope 'probe'): the\n"
"                    first word of the file's first line that is not a\n"
"                    comment (default $FAY_TOKEN)\n"
"    --tls-ca FILE   cluster: the CA of an https:// collector's certificate\n"
"                    (default $FAY_TLS_CA, else the system's)\n"
"    --grace DUR     cluster: how long a window waits for late hosts\n"
"                    before it is printed without them (default 1s)\n"
"    --keep NAME     cluster: register the query as a standing query that\n"
"                    runs until --drop NAME, survives restarts of the\n"
"                    collector and agents, keeps its windows (GET\n"
"                    /api/queries/NAME/results) and exports the latest on\n"
"                    /metrics as fay_query_NAME{keys,column=\"C\"}; needs a\n"
"                    'window'\n"
"    --drop NAME     cluster: stop the standing query NAME\n"
"    --emit=ast      print the checked syntax tree (one node per line,\n"
"                    @LINE:COL positions, types and meanings in brackets)\n"
"    --emit=plan     print the plan: probes, entry/exit pairing, predicates,\n"
"                    key and per-CPU value layout, each aggregate's probe,\n"
"                    merge and final parts, columns, options\n"
"    --emit=ir       print the maps and each program in the engine's IR\n"
"                    (virtual registers, labels, @LINE:COL of the query)\n"
"    --emit=bpf      print the maps and each program as eBPF instructions\n"
"                    after register allocation (bpftool's syntax)\n"
"    -f FILE         read the query from FILE ('-' for standard input)\n"
"    --tracefs DIR   read tracepoint formats from DIR/events/SYS/EVENT/format\n"
"    -h, --help      this page\n"
"\n"
"    --emit loads nothing and needs no root; tracepoint sources read their\n"
"    format file, kernel functions are resolved (fentry or kprobe) and\n"
"    function/usdt sources read the binary's ELF symbols or notes.\n"
"\n"
"CLUSTER QUERIES\n"
"    With --cluster (or a source written cluster.X or host(\"name\").X) the\n"
"    collector sends the query to every agent connected to it (host(\"name\"):\n"
"    to that host's agent), each agent compiles and runs it with this same\n"
"    engine and sends its per-window partial aggregates (never events), the\n"
"    collector merges them (a tree of collectors merges level by level) and\n"
"    streams the merged windows back, printed as above.  Windows are aligned\n"
"    to wall-clock multiples of the window on every host.  A window is\n"
"    printed once every host that attached has reported it, or when the\n"
"    grace period has passed after its end; each is followed on standard\n"
"    error by its completeness:\n"
"\n"
"        fay: window 12:00:01Z (provisional): 2 of 3 hosts answered; missing: db1\n"
"\n"
"    A host that reports after its window was printed makes the window\n"
"    print again, marked amended.  Hosts that cannot run the query (a\n"
"    function absent there) are named with their reason; when no host can,\n"
"    the query fails with every host's reason.  s.host is each event's host\n"
"    (fay agent --host), usable as a group key.  FAY_TOKEN, when set, is\n"
"    sent as the collector's bearer token.\n"
"\n"
"SPANS\n"
"    spans(\"X\") runs in every fay agent over the spans it drains from the\n"
"    libfay rings of its host (X: a service, or a pattern: \"blocker-*\";\n"
"    spans alone: every span), so it needs --cluster; a local fay query of\n"
"    it is refused with what to type.\n"
"    The agent runs the query's program in fay's in-process eBPF VM for\n"
"    each whole span (BlkKin's per-annotation records are merged first:\n"
"    cs..cr a client span, sr..ss a server span).  Fields: name, service,\n"
"    kind (\"server\" \"client\" \"producer\" \"consumer\" or \"\"), error (0 or\n"
"    1), duration (ns), time (start, ns since the epoch), trace_id (low 64\n"
"    bits), span_id, parent_id, pid, host, and tag(\"KEY\"), the tag's value\n"
"    as a string (\"\" when absent; integer tags in decimal).  A span counts\n"
"    in the window in which its agent drains it.\n"
"\n"
"EXAMPLES\n"
"    fay query 'from s in syscall(\"*\") group s by s.comm into g\n"
"        select { comm: g.key, calls: g.count() } order by calls desc\n"
"        limit 10 for 5s'\n"
"    fay query 'from r in syscall(\"read\") where r.ret > 0\n"
"        select { bytes: hist(r.ret), p99_us: quantile(r.duration, 0.99) / 1000 }\n"
"        window 1s'\n"
"    fay query -c ./server 'from c in function(\"./server:handle\")\n"
"        select { us: hist(c.duration / 1000) }'\n"
"    fay query --json 'from e in tracepoint(\"sched:sched_process_exec\")\n"
"        select { pid: e.pid, file: e.filename }'\n"
"    fay query --emit=bpf -f tests/golden/query/paper_local.q\n"
"    fay query --cluster http://collector:9411 'from s in cluster.syscall(\"read\")\n"
"        group s by s.host into g select { host: g.key, n: g.count() } window 1s'\n"
"    fay query --cluster http://collector:9411 'from sp in\n"
"        cluster.spans where sp.tag(\"object\") != \"\"\n"
"        group sp by {svc: sp.service, name: sp.name} into g\n"
"        select { svc: g.svc, name: g.name, n: g.count(),\n"
"        avg_us: g.avg(sp.duration) / 1000 } window 1s'\n"
"    fay query --cluster http://collector:9411 --keep reads 'from s in\n"
"        cluster.syscall(\"read\") group s by s.host into g\n"
"        select { host: g.key, n: g.count() } window 10s'\n"
"\n"
"EXIT STATUS\n"
"    0 success; 1 runtime failure (privileges, a probe point that cannot\n"
"    be attached, the verifier, output); 2 usage error or an error in the\n"
"    query, reported as SOURCE:LINE:COL: error: MESSAGE, the line, and a\n"
"    caret.\n"
"\n"
"ENVIRONMENT\n"
"    FAY_TRACEFS     default for --tracefs\n"
"    FAY_LOG_LEVEL   error, warn, info, debug (debug: the verifier's log\n"
"                    when a program is rejected)\n"
"\n"
"FILES\n"
"    /sys/kernel/tracing/events/*/*/format   tracepoint field layouts\n"
"    /sys/kernel/btf/vmlinux                 kernel function arguments\n"
"    docs/QUERY.md                           the FayQL manual\n"
"\n"
"    Running needs root, or CAP_BPF and CAP_PERFMON (and CAP_SYS_ADMIN\n"
"    for some probe kinds on older kernels).\n", f);
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

/* --emit=ir|bpf: generate (and lower) the programs, load nothing. */
static int emit_code(struct query *q, const struct plan *plan, bool bpf,
		     const struct engine_run_opts *ro)
{
	struct engine_opts eo = {
		.sz = sizeof(eo), .pid = ro->pid, .no_fentry = ro->no_fentry,
		.max_prealloc = ro->max_prealloc,
		.buffer = ro->buffer, .emit_only = true,
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
		{ "file", required_argument, NULL, 'f' },
		{ "tracefs", required_argument, NULL, 't' },
		{ "pid", required_argument, NULL, 'p' },
		{ "cmd", required_argument, NULL, 'c' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "buffer", required_argument, NULL, 'B' },
		{ "no-fentry", no_argument, NULL, 'K' },
		{ "max-map-memory", required_argument, NULL, 'M' },
		{ "cluster", required_argument, NULL, 'C' },
		{ "token-file", required_argument, NULL, 'T' },
		{ "tls-ca", required_argument, NULL, 'A' },
		{ "grace", required_argument, NULL, 'G' },
		{ "keep", required_argument, NULL, 'k' },
		{ "drop", required_argument, NULL, 'D' },
		{ "probe-mode", required_argument, NULL, 'P' },
		{ "allow-other-users", no_argument, NULL, 'U' },
		{ "no-inject", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct query_opts opts = { .sz = sizeof(opts) };
	enum emit emit = EMIT_RUN;
	const char *file = NULL, *source = "<query>";
	char *text = NULL;
	size_t len;
	bool json = false, have_lib;
	struct query *q = NULL;
	const struct plan *plan;
	struct engine_run_opts ro = { .sz = sizeof(ro), .window_gap = true };
	struct cluster_run_opts co = { 0 };
	const char *keep = NULL, *drop = NULL, *token_file = NULL;
	static char token_buf[256];
	char lib[4096];
	int c, err, rc = 2;
	char *end;

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
		case 'C':
			co.url = optarg;
			break;
		case 'T':
			token_file = optarg;
			break;
		case 'A':
			tr_http_set_ca(optarg);
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
			usage(stdout);
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
		if (opt_token(token_file, token_buf, sizeof(token_buf), &co.token))
			return 2;
		return cluster_drop(drop, &co);
	}
	if (co.url && (ro.pid || ro.cmd)) {
		fprintf(stderr, "error: -p and -c trace this host; with --cluster use process(PID).function(...) or a where on pid\n");
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
		co.quiet = ro.quiet;
		if (opt_token(token_file, token_buf, sizeof(token_buf), &co.token)) {
			free(text);
			return 2;
		}
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
