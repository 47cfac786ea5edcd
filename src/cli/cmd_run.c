// SPDX-License-Identifier: MIT
/*
 * fay run: start a command with fay's in-process runtime (libfay-probe.so)
 * preloaded, so that function(...) queries run in it as inline probes;
 * with --query, run one such query on it like fay query -c does.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "cli/query_run.h"
#include "engine/driver.h"

static void usage(FILE *f)
{
	fputs(
"NAME\n"
"    fay run - start a command with fay's in-process probe runtime\n"
"\n"
"SYNOPSIS\n"
"    fay run [OPTIONS] -- CMD [ARGS...]\n"
"    fay run [OPTIONS] --query 'QUERY' -- CMD [ARGS...]\n"
"    fay run --agent -- CMD [ARGS...]\n"
"\n"
"DESCRIPTION\n"
"    Runs CMD with libfay-probe.so preloaded (LD_PRELOAD, kept for the\n"
"    programs it executes).  The runtime opens a control socket,\n"
"    /run/fay/inline/PID.sock (root only), on which fay query attaches\n"
"    function(...) probes to the process as inline probes: the first\n"
"    instructions of the function are replaced by a jump to a trampoline\n"
"    that runs the query's programs in the process itself, with no trap\n"
"    into the kernel.  The programs are verified again in the process;\n"
"    each thread aggregates in its own slot of maps shared with fay, which\n"
"    merges them exactly as it merges a uprobe's per-CPU maps, so answers\n"
"    are the same.  When the query ends (or fay is killed) every patched\n"
"    byte is restored and the process runs on unprobed.\n"
"\n"
"    Without --query fay run becomes CMD (exec); query it from elsewhere\n"
"    with fay query -p PID or process(PID).function(\"sym\").  With\n"
"    --query, CMD starts at once but its main() waits until the query's\n"
"    probes are armed (at most 30 s; with --probe-mode=uprobe CMD waits\n"
"    before it starts, until the uprobe is attached), the query traces\n"
"    CMD alone (as fay query -c: its pid), and the answer is printed when\n"
"    CMD exits, at the query's time limit or on Ctrl-C, as fay query\n"
"    prints it.\n"
"\n"
"    fork: a child keeps the patched code but its probes do nothing (its\n"
"    slots are not written: the parent's results stay exact) and it has\n"
"    no control socket; exec: the runtime goes with the old image, and the\n"
"    new one loads it again (LD_PRELOAD) with a socket of its own.  With\n"
"    --query, when CMD's image maps no object with the function (a\n"
"    wrapper: sh -c 'exec prog'), it runs on and the image it execs is\n"
"    held and probed instead; a site that falls back to a uprobe (auto)\n"
"    holds main() until the uprobe is attached.\n"
"\n"
"    A descendant of CMD in another root (unshare ... chroot ROOT prog,\n"
"    systemd-nspawn, podman run), which cannot load the runtime\n"
"    preloaded by its host path, gets it loaded with ptrace at its entry\n"
"    point in inline mode, the default (docs/QUERY.md, \"Processes in\n"
"    containers\"); CMD itself must not exec into another root.\n"
"\n"
"OPTIONS\n"
"    --query Q       run the FayQL query Q on CMD (see fay query --help)\n"
"    --agent         CMD is for the agent's cluster queries: as without\n"
"                    --query (fay run becomes CMD with the runtime loaded),\n"
"                    said explicitly; a cluster query's\n"
"                    process(PID).function(...) then runs inline in it\n"
"                    (fay agent on this host, in auto mode: its progress line\n"
"                    says \"inline\")\n"
"    -f FILE         read the query from FILE\n"
"    --json          results as JSON lines (as fay query --json)\n"
"    --probe-mode=auto|inline|uprobe\n"
"                    as fay query (default inline here: a probe that cannot\n"
"                    run inline is an error with the reason)\n"
"    -q, --quiet     no \"probes attached\" or mode line on standard error\n"
"    -h, --help      this page\n"
"\n"
"EXAMPLES\n"
"    fay run --query 'from c in function(\"./server:handle\") select { us:\n"
"        hist(c.duration / 1000) }' -- ./server --port 8080\n"
"    fay run -- ./server & fay query -p $! 'from c in\n"
"        function(\"./server:handle\") select count()'\n"
"\n"
"EXIT STATUS\n"
"    Without --query: CMD's.  With it: as fay query (0, 1 runtime failure,\n"
"    2 an error in the query or the usage).\n"
"\n"
"ENVIRONMENT\n"
"    FAY_PROBE_LIB   the runtime library (default: libfay-probe.so next to\n"
"                    fay, else ../lib/fay/libfay-probe.so from it)\n", f);
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "query", required_argument, NULL, 'Q' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "probe-mode", required_argument, NULL, 'M' },
		{ "agent", no_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct engine_run_opts ro = { .sz = sizeof(ro), .window_gap = true,
				      .probe_mode = ENGINE_PROBE_INLINE };
	struct query_opts qo = { .sz = sizeof(qo) };
	const char *text = NULL, *file = NULL;
	char lib[4096], why[2048], *buf = NULL;
	const struct plan *plan;
	struct query *q;
	bool agent = false;
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hqf:", longopts, NULL)) != -1) {
		if (c == 'M' && parse_probe_mode(optarg, &ro.probe_mode))
			return 2;
		switch (c) {
		case 'M':
			break;
		case 'Q':
			text = optarg;
			break;
		case 'f':
			file = optarg;
			break;
		case 'j':
			ro.json = true;
			break;
		case 'A':
			agent = true;
			break;
		case 'q':
			ro.quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "error: %s '%s'\nusage: fay run [--query 'Q'] -- CMD "
				"[ARGS] (see fay run --help)\n", optopt && strchr("Qf", optopt) ?
				"option needs a value:" : "unknown option", argv[optind - 1]);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "error: no command: fay run [--query 'Q'] -- CMD [ARGS]\n");
		return 2;
	}
	if (text && file) {
		fprintf(stderr, "error: give --query or -f, not both\n");
		return 2;
	}
	if (agent && (text || file)) {
		fprintf(stderr, "error: --agent leaves the queries to the agent: give --agent or --query/-f, not both\n");
		return 2;
	}
	if (fay_probe_lib(lib, sizeof(lib))) {
		fprintf(stderr, "error: libfay-probe.so is not next to fay nor in ../lib/fay "
			"(FAY_PROBE_LIB names it)\n");
		return 1;
	}
	if (!text && !file) {
		if ((rc = fay_preload_env(lib))) {
			fprintf(stderr, "error: LD_PRELOAD: %s\n", strerror(-rc));
			return 1;
		}
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "error: cannot run %s: %s\n", argv[optind], strerror(errno));
		return 127;
	}
	if (file) {
		FILE *f = strcmp(file, "-") ? fopen(file, "r") : stdin;
		size_t n;

		buf = f ? calloc(1, 1 << 20) : NULL;
		n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
		if (f && f != stdin)
			fclose(f);
		if (!buf || !n) {
			fprintf(stderr, "error: cannot read %s\n", file);
			free(buf);
			return 2;
		}
		text = buf;
	}
	q = engine_plan_text(file ? file : "<query>", text, strlen(text), &qo, &plan,
			     why, sizeof(why));
	if (!q) {
		fputs(why, stderr);
		free(buf);
		return 2;
	}
	ro.out = stdout;
	ro.err = stderr;
	ro.argv = argv + optind;
	ro.preload = lib;
	rc = engine_run_query(q, plan, &ro);
	query_free(q);
	free(buf);
	return rc;
}
