// SPDX-License-Identifier: MIT
/*
 * `fay query` on this host: the CLI's sink of the query driver
 * (engine/driver.h).  It starts the command to trace (-c; held at a pipe
 * until the probes are attached), watches it or the -p process through a
 * pidfd, stops at SIGINT/SIGTERM/SIGHUP, and prints rows as tables or
 * JSON lines as the driver hands them over.  A query in keep mode ('keep
 * DUR') keeps its events in a keep buffer (engine/keepbuf.h) instead, and
 * prints those of its last DUR when it ends, like a flight recorder.
 *
 * Signals are blocked outside the driver's wait and let in only inside
 * its ppoll(), so a Ctrl-C can never fall between a check and the sleep;
 * every path out goes through one tear-down (the driver detaches; here:
 * reap the child, restore the signal mask).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/query_run.h"
#include "common/clock.h"
#include "engine/driver.h"
#include "engine/keepbuf.h"

static volatile sig_atomic_t got_stop;

static void on_stop(int sig)
{
	got_stop = sig;
}

struct sess {
	const struct engine_run_opts *o;
	struct engine_out out;
	int go;			/* -c: the pipe that starts the command */
	struct keepbuf *keep;	/* keep mode: the events kept, not printed yet */
	const struct plan *plan;
};

static void print_counters(struct sess *s, const struct plan *p,
			   const uint64_t c[ENGINE_NCOUNTERS])
{
	engine_print_counters(c, s->o->json ? s->o->err : s->o->out, p);
}

static int write_err(struct sess *s, int err)
{
	fprintf(s->o->err, "error: cannot write the output: %s\n", strerror(-err));
	return 1;
}

static void on_note(void *ctx, struct engine *e, const char *line)
{
	struct sess *s = ctx;

	if (!s->o->quiet)
		fprintf(s->o->err, "fay: %s\n", line);
}

static int on_attached(void *ctx, struct engine *e)
{
	struct sess *s = ctx;
	const struct engine_run_opts *o = s->o;
	const struct plan *p = engine_plan(e);

	if (!o->quiet && engine_note(e)[0])
		fprintf(o->err, "fay: %s\n", engine_note(e));
	if (!o->quiet && !o->allow_other_users && getuid() != 0)
		fprintf(o->err, "fay: uid %u is not root: only its own processes are "
			"probed (--allow-other-users: every user's)\n", (unsigned)getuid());
	if (!o->quiet) {
		fprintf(o->err, "fay: %d probe%s attached:", engine_nprobes(e),
			engine_nprobes(e) == 1 ? "" : "s");
		for (int i = 0; i < engine_nprobes(e); i++)
			fprintf(o->err, "%s %s", i ? "," : "", engine_probe_desc(e, i));
		fprintf(o->err, "; %s\n", p->for_ns ? "stops at the time limit or Ctrl-C" :
			o->cmd || o->argv ? "stops when the command exits or Ctrl-C" :
			"Ctrl-C prints the result and stops");
	}
	if (o->attached_fn)
		o->attached_fn(o->attached_ctx);
	if (s->go >= 0) {
		if (write(s->go, "g", 1) != 1) {
			fprintf(o->err, "error: cannot start the command: %s\n",
				strerror(errno));
			return 1;
		}
		close(s->go);
		s->go = -1;
	}
	return 0;
}

static int on_record(void *ctx, struct engine *e, const void *rec, size_t size)
{
	struct sess *s = ctx;
	int err;

	if (s->keep) {
		keepbuf_add(s->keep, rec, clock_realtime_ns());
		return 0;
	}
	err = engine_print_record(engine_plan(e), &s->out, rec);
	return err ? write_err(s, err) : 0;
}

static int print_kept(void *ctx, const void *rec, uint64_t t_ns)
{
	struct sess *s = ctx;

	(void)t_ns;
	return engine_print_record(s->plan, &s->out, rec);
}

/* Keep mode, at the end: the events of the last DUR, then their account. */
static int dump_kept(struct sess *s, const struct plan *p)
{
	uint64_t now = clock_realtime_ns(), n = 0;
	struct keepbuf_stats st;
	int err;

	s->plan = p;
	err = keepbuf_each(s->keep, 0, UINT64_MAX, now, print_kept, s, &n);
	keepbuf_get_stats(s->keep, now, &st);
	if (!s->o->quiet)
		fprintf(s->o->err, "fay: kept %" PRIu64 " events of the last %" PRIu64
			" ms (%" PRIu64 " seen, %" PRIu64 " overwritten: at most %" PRIu64
			" kept, %" PRIu64 " older dropped)\n", n, p->keep_ns / 1000000, st.added,
			st.overwritten, st.cap, st.expired);
	if (fflush(s->o->out) && !err)
		err = -errno;
	return err ? write_err(s, err) : 0;
}

static int on_batch_end(void *ctx, struct engine *e)
{
	struct sess *s = ctx;

	return fflush(s->o->out) ? write_err(s, -errno) : 0;
}

static int on_result(void *ctx, struct engine *e, const struct engine_result *res,
		     const struct engine_window *w)
{
	struct sess *s = ctx;
	const struct plan *p = engine_plan(e);
	int err = engine_print_result(p, &s->out, res, w->windowed ? w->start_ns : 0);

	print_counters(s, p, res->counters);
	if (s->o->window_gap && w->windowed && !s->o->json)
		fputc('\n', s->o->out);
	if (fflush(s->o->out) && !err)
		err = -errno;
	return err ? write_err(s, err) : 0;
}

static int on_stream_end(void *ctx, struct engine *e, const uint64_t c[ENGINE_NCOUNTERS])
{
	struct sess *s = ctx;
	int rc = s->keep ? dump_kept(s, engine_plan(e)) : 0;

	print_counters(ctx, engine_plan(e), c);
	return rc;
}

int parse_probe_mode(const char *s, enum engine_probe_mode *m)
{
	static const char *const names[] = {
		[ENGINE_PROBE_AUTO] = "auto", [ENGINE_PROBE_INLINE] = "inline",
		[ENGINE_PROBE_UPROBE] = "uprobe",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i])) {
			*m = (enum engine_probe_mode)i;
			return 0;
		}
	fprintf(stderr, "error: --probe-mode takes inline, uprobe or auto, not '%s'\n", s);
	return -EINVAL;
}

int fay_probe_lib(char *buf, size_t len)
{
	const char *env = getenv("FAY_PROBE_LIB");
	char exe[4096], *slash;
	ssize_t n;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return access(buf, R_OK) ? -ENOENT : 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ENOENT;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	snprintf(buf, len, "%s/libfay-probe.so", exe);
	if (!access(buf, R_OK))
		return 0;
	snprintf(buf, len, "%s/../lib/fay/libfay-probe.so", exe);
	return access(buf, R_OK) ? -ENOENT : 0;
}

int fay_preload_env(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	size_t n = strlen(lib) + (old ? strlen(old) : 0) + 2;
	char *v = malloc(n);
	int rc;

	if (!v)
		return -ENOMEM;
	snprintf(v, n, "%s%s%s", lib, old && *old ? " " : "", old && *old ? old : "");
	rc = setenv("LD_PRELOAD", v, 1) ? -errno : 0;
	free(v);
	return rc;
}

/* Fork the command, held until *go is written (or closed: then it
 * exits 127 without running anything).  With preload, the runtime is
 * preloaded; with rt_hold too, it runs at once and is held in the
 * runtime's constructor (FAY_INLINE_HOLD) until the probes are armed,
 * *go -1 then (a uprobe query arms no inline session: the pipe holds it).
 * words: the command as words (cmd is ignored).  Returns the pid or
 * -errno. */
static pid_t start_cmd(const char *cmd, char *const *words, const char *preload,
		       bool rt_hold, const sigset_t *mask, int *go)
{
	int fds[2];
	pid_t pid;
	char hold[32];

	/* the runtime holds only while its parent is this fay (a fay
	 * killed before the constructor ran leaves it another parent) */
	snprintf(hold, sizeof(hold), "1:%d", (int)getpid());
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(fds[0]);
		close(fds[1]);
		return err;
	}
	if (pid == 0) {
		char c;
		size_t n = cmd ? strlen(cmd) + 6 : 1;
		char *full = malloc(n);

		/* default dispositions before unblocking: a SIGTERM sent
		 * right after the fork (the query failed to start) must not
		 * run fay's handler here and leave us waiting on the pipe */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		sigprocmask(SIG_SETMASK, mask, NULL);
		/* the exec watch may stop it at an exec until fay has looked
		 * (engine_opts.hold_execs): if fay dies meanwhile, it goes on */
		prctl(PR_SET_PDEATHSIG, SIGCONT);
		close(fds[1]);
		if (preload && (fay_preload_env(preload) ||
				(rt_hold && setenv("FAY_INLINE_HOLD", hold, 1))))
			_exit(127);
		if (!(preload && rt_hold) && (read(fds[0], &c, 1) != 1 || !full))
			_exit(127);
		close(fds[0]);
		if (words) {
			execvp(words[0], words);
			fprintf(stderr, "error: cannot run %s: %s\n", words[0], strerror(errno));
			_exit(127);
		}
		if (!full)
			_exit(127);
		if (!strpbrk(cmd, "'\"\\$`|&;<>(){}*?[]~#=\n")) {
			/* plain words: no shell in between (a shell would make
			 * system calls of its own under the traced pid) */
			char *argv[64], *save = NULL;
			int argc = 0;

			snprintf(full, n, "%s", cmd);
			for (char *w = strtok_r(full, " \t", &save); w && argc < 63;
			     w = strtok_r(NULL, " \t", &save))
				argv[argc++] = w;
			argv[argc] = NULL;
			if (argc)
				execvp(argv[0], argv);
			fprintf(stderr, "error: cannot run %s: %s\n", argc ? argv[0] : "''",
				strerror(errno));
			_exit(127);
		}
		snprintf(full, n, "exec %s", cmd);
		execl("/bin/sh", "sh", "-c", full, (char *)NULL);
		_exit(127);
	}
	close(fds[0]);
	*go = fds[1];
	if (preload && rt_hold) {	/* it runs already */
		close(fds[1]);
		*go = -1;
	}
	return pid;
}

int engine_run_query(struct query *q, const struct plan *p,
		     const struct engine_run_opts *o)
{
	struct sess s = { .o = o, .out = { .f = o->out, .json = o->json, .folded = o->folded,
				     .tree = o->tree },
			  .go = -1 };
	struct engine_sink sink = {
		.sz = sizeof(sink), .attached = on_attached, .record = on_record,
		.result = on_result, .batch_end = on_batch_end,
		.stream_end = on_stream_end, .ctx = &s, .note = on_note,
	};
	struct engine_drive_opts dopts = {
		.sz = sizeof(dopts), .stop = &got_stop, .watch_fd = -1,
		.eo = { .pid = o->pid, .no_fentry = o->no_fentry, .buffer = o->buffer,
			.max_prealloc = o->max_prealloc,
			.probe_mode = o->probe_mode, .inject_lib = o->inject_lib,
			.no_inject = o->no_inject, .cgroup = o->cgroup },
	};
	sigset_t block, orig;
	struct sigaction sa = { 0 }, old[3];
	static const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
	char why[2048];
	pid_t child = -1;
	bool rt_hold = false;
	int rc = 1;

	if (p->mode == PLAN_STREAM && p->keep_ns) {
		s.keep = keepbuf_new((uint32_t)p->record_size, p->keep_ns, p->keep_max);
		if (!s.keep) {
			fprintf(o->err, "error: keep %" PRIu64 " ms: %s\n", p->keep_ns / 1000000,
				strerror(errno));
			return 1;
		}
	}
	got_stop = 0;
	sigemptyset(&block);
	for (int i = 0; i < 3; i++)
		sigaddset(&block, sigs[i]);
	sigprocmask(SIG_BLOCK, &block, &orig);
	for (int i = 0; i < 3; i++) {
		sa.sa_handler = on_stop;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, &old[i]);
	}
	engine_opts_requester(&dopts.eo, o->allow_other_users);
	dopts.wait_mask = &orig;
	dopts.err = why;
	dopts.errlen = sizeof(why);

	if (o->cmd || o->argv) {
		rt_hold = o->preload && o->probe_mode != ENGINE_PROBE_UPROBE;
		child = start_cmd(o->cmd, o->argv, o->preload, rt_hold, &orig, &s.go);
		if (child < 0) {
			fprintf(o->err, "error: cannot start the command: %s\n",
				strerror((int)-child));
			goto out;
		}
		dopts.eo.pid = child;
		dopts.eo.hold_execs = true;
		if (rt_hold)
			dopts.eo.inline_wait_ms = 10000;
		if (o->preload && o->probe_mode == ENGINE_PROBE_INLINE)
			dopts.eo.kid_lib = o->preload;
	}
	if (dopts.eo.pid > 0) {
		dopts.watch_fd = (int)syscall(SYS_pidfd_open, dopts.eo.pid, 0);
		if (dopts.watch_fd < 0 && errno == ESRCH) {
			fprintf(o->err, "error: -p %d: no such process\n", (int)dopts.eo.pid);
			goto out;
		}
	}

	rc = engine_drive(q, p, &dopts, &sink);
	if (rc == ENGINE_DRIVE_QUERY) {
		fputs(query_error(q), o->err);
	} else if (rc < 0) {
		fprintf(o->err, "%s%s\n", strstr(why, ": error: ") ? "" : "error: ", why);
		rc = 1;
	} else if (rc == 0 && fflush(o->out)) {
		fprintf(o->err, "error: cannot write the output: %s\n", strerror(errno));
		rc = 1;
	}
	if (child > 0) {
		bool ran = s.go < 0 && !(rt_hold && rc);
		int st;

		if (!ran) {	/* never released: it exits without running */
			close(s.go);
			s.go = -1;
		}
		if (waitpid(child, &st, WNOHANG) == 0) {
			kill(child, SIGTERM);
			waitpid(child, &st, 0);
		} else if (!ran) {
			/* its status is ours (127), not the command's */
		} else if (WIFEXITED(st) && WEXITSTATUS(st)) {
			fprintf(o->err, "fay: the command exited with status %d\n",
				WEXITSTATUS(st));
		} else if (WIFSIGNALED(st)) {
			fprintf(o->err, "fay: the command was killed by signal %d\n",
				WTERMSIG(st));
		}
	}

out:
	if (s.go >= 0)
		close(s.go);	/* the held command exits without running */
	if (dopts.watch_fd > 0)
		close(dopts.watch_fd);
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	sigprocmask(SIG_SETMASK, &orig, NULL);
	keepbuf_free(s.keep);
	return rc;
}
