/* SPDX-License-Identifier: MIT */
/*
 * Run one planned query on this host until its time limit, the traced
 * process's exit or SIGINT/SIGTERM/SIGHUP, printing rows as they come
 * (streams), per window, or once at the end.  Used by `fay query`; the
 * loop is the query driver's (engine/driver.h), this is its CLI sink.
 */
#ifndef FAY_CLI_QUERY_RUN_H
#define FAY_CLI_QUERY_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "engine/engine.h"

struct engine_run_opts {
	size_t sz;		/* sizeof(struct engine_run_opts) */
	FILE *out;		/* results */
	FILE *err;		/* diagnostics, the "attached" line */
	bool json;		/* one JSON object per row per line */
	bool folded;		/* folded stacks (engine_folded_check()) */
	bool tree;		/* those stacks as a call tree */
	bool quiet;		/* no "probes attached" line */
	bool window_gap;	/* a blank line after each window's table */
	pid_t pid;		/* -p: only this process; stop when it exits */
	const char *cmd;	/* -c: run this once attached (split into words;
				 * through sh -c 'exec CMD' when it has shell syntax),
				 * trace only it, stop when it exits */
	bool no_fentry;
	enum engine_buffer buffer;
	uint64_t max_prealloc;	/* --max-map-memory (0: the engine's default) */
	/* function(...) sources: inline probes or uprobes (--probe-mode) */
	enum engine_probe_mode probe_mode;
	/* -c / argv: start the command with this runtime library preloaded
	 * (fay run; --probe-mode=inline): it runs at once and its runtime
	 * holds main() until the probes are armed */
	const char *preload;
	/* a running process (auto and inline modes): load this runtime into
	 * it with ptrace when it has none (engine_opts.inject_lib) */
	const char *inject_lib;
	/* fay run -- CMD ARGS: the command as words (instead of cmd) */
	char *const *argv;
	/* called once every probe is attached (benchmarks, tests) */
	void (*attached_fn)(void *ctx);
	void *attached_ctx;
	/* --allow-other-users: a non-root user's query probes every user's
	 * processes (engine_opts_requester()) */
	bool allow_other_users;
	/* --no-inject: never load a library into a running process (auto
	 * falls back to a uprobe, inline fails: engine_opts.no_inject) */
	bool no_inject;
	/* --cgroup PATH: only tasks in that cgroup and below it
	 * (engine_opts.cgroup) */
	const char *cgroup;
};

/*
 * Returns the exit status for the CLI: 0 success, 1 a runtime failure
 * (privileges, probes, the verifier: reported on o->err, a verifier
 * rejection at the query's line:col), 2 an error in the query.
 */
int engine_run_query(struct query *q, const struct plan *p,
		     const struct engine_run_opts *o);

/* --probe-mode=auto|inline|uprobe into *m; -EINVAL after printing the
 * usage error on stderr. */
int parse_probe_mode(const char *s, enum engine_probe_mode *m);
/* The path of libfay-probe.so into buf: $FAY_PROBE_LIB, else next to the
 * fay binary, else ../lib/fay/ from it.  0 or -ENOENT. */
int fay_probe_lib(char *buf, size_t len);

/* fay query's manual page (--help) onto f. */
void query_usage(FILE *f);
/* Put lib in front of LD_PRELOAD in this process's environment.  0 or -errno. */
int fay_preload_env(const char *lib);

/* fay query --cluster URL (query_cluster.c). */
struct cluster_run_opts {
	const char *url;	/* the collector's HTTP address */
	const char *token;	/* NULL: none (FAY_TOKEN) */
	uint64_t grace_ns;	/* 0: the collector's default (1 s) */
	FILE *out, *err;
	bool json, quiet;
	bool folded;		/* --format folded */
	bool tree;		/* --format tree */
};

/*
 * Send the query text to the collector at o->url, print the merged
 * results as they come (tables or --json lines, rendered by the
 * collector) and each window's completeness on o->err.  Returns the exit
 * status: 0, 1 (the collector failed or no host could run it), 2 (an
 * error in the query, at its line:col).
 */
int cluster_run_query(const char *text, const struct cluster_run_opts *o);
/* --keep NAME: register the query as a standing query (POST
 * /api/queries); --drop NAME: stop it.  Exit status as above. */
int cluster_keep(const char *text, const char *name, const struct cluster_run_opts *o);
int cluster_drop(const char *name, const struct cluster_run_opts *o);

#endif
