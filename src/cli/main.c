// SPDX-License-Identifier: MIT
/*
 * fay: one binary, subcommands.  See docs/ARCHITECTURE.md.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cmds.h"
#include "common/version.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *what;
} cmds[] = {
	{ "query",     cmd_query,     "compile and run a FayQL query on this host" },
	{ "run",       cmd_run,       "start a command with the inline probe runtime (fay run -- CMD)" },
	{ "probes",    cmd_probes,    "list probe points: syscalls, tracepoints, functions" },
	{ "agent",     cmd_agent,     "the per-host daemon: drains span rings, ships to a collector" },
	{ "collector", cmd_collector, "the central service: store, HTTP API, Zipkin routes, UI" },
	{ "traces",    cmd_traces,    "list and show stored traces in the terminal" },
	{ "sql",       cmd_sql,       "run a read-only SQL statement on the span store" },
	{ "capture",   cmd_capture,   "bring back spans kept on the hosts (flight recorder)" },
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: fay COMMAND [ARGS]\n"
"\n"
"fay %s - extensible distributed tracing for Linux\n"
"\n"
"Commands:\n", FAY_VERSION);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].what);
	fprintf(f,
"\n"
"Run 'fay COMMAND --help' for a command's manual.\n"
"Docs: docs/QUERY.md (FayQL), docs/ARCHITECTURE.md, docs/ABI.md.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("fay %s\n", FAY_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "error: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
