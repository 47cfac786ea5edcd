// SPDX-License-Identifier: MIT
/*
 * Running one query on this host, start to end: optionally start the
 * command to trace (held at a pipe until the probes are attached), load,
 * attach, then wait for records, window ends, the 'for' deadline, the
 * traced process's exit or SIGINT/SIGTERM/SIGHUP, and print the results.
 *
 * Signals are blocked outside the wait and let in only inside ppoll(),
 * so a Ctrl-C can never fall between a check and the sleep; every path
 * out goes through one tear-down (detach, close, reap the child).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/session.h"

static volatile sig_atomic_t got_stop, got_child;

static void on_stop(int sig)
{
	got_stop = sig;
}

static void on_child(int sig)
{
	got_child = 1;
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct sess {
	const struct engine_run_opts *o;
	struct engine *e;
	struct engine_out out;
	int werr;		/* first output error */
	uint64_t rows, limit;	/* streamed rows; 'limit N' stops after N */
};

static void on_record(void *ctx, const void *rec, size_t size)
{
	struct sess *s = ctx;
	int err;

	if (s->limit && s->rows >= s->limit)
		return;
	s->rows++;
	err = engine_print_record(s->e, &s->out, rec);
	if (err && !s->werr)
		s->werr = err;
}

/* Fork the command, held until *go is written (or closed: then it
 * exits 127 without running anything).  Returns the pid or -errno. */
static pid_t start_cmd(const char *cmd, const sigset_t *mask, int *go)
{
	int fds[2];
	pid_t pid;

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
		size_t n = strlen(cmd) + 6;
		char *full = malloc(n);

		sigprocmask(SIG_SETMASK, mask, NULL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		close(fds[1]);
		if (read(fds[0], &c, 1) != 1 || !full)
			_exit(127);
		close(fds[0]);
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
	return pid;
}

static void print_counters(struct sess *s, const uint64_t c[ENGINE_NCOUNTERS])
{
	engine_print_counters(c, s->o->json ? s->o->err : s->o->out,
			      engine_plan(s->e));
}

static int print_aggregate(struct sess *s, bool reset, uint64_t wstart)
{
	struct engine_result res;
	int err = engine_read(s->e, reset, &res);

	if (err) {
		fprintf(s->o->err, "error: %s", engine_error(s->e));
		return err;
	}
	err = engine_print_result(s->e, &s->out, &res, wstart);
	print_counters(s, res.counters);
	if (s->o->window_gap && wstart && !s->o->json)
		fputc('\n', s->o->out);
	fflush(s->o->out);
	engine_result_clear(&res);
	return err;
}

int engine_run_query(struct query *q, const struct plan *p,
		     const struct engine_run_opts *o)
{
	struct engine_opts eo = {
		.sz = sizeof(eo), .pid = o->pid, .no_fentry = o->no_fentry,
		.buffer = o->buffer,
	};
	struct sess s = { .o = o, .out = { .f = o->out, .json = o->json },
			  .limit = p->mode == PLAN_STREAM ? p->limit : 0 };
	sigset_t block, orig;
	struct sigaction sa = { 0 }, old[4];
	static const int sigs[4] = { SIGINT, SIGTERM, SIGHUP, SIGCHLD };
	char why[2048];
	pid_t child = -1;
	int go = -1, pidfd = -1, rc = 1, err;
	uint64_t start, deadline = 0, wnext = 0, wstart_rt = 0;
	bool stream = p->mode == PLAN_STREAM;

	got_stop = got_child = 0;
	sigemptyset(&block);
	for (int i = 0; i < 4; i++)
		sigaddset(&block, sigs[i]);
	sigprocmask(SIG_BLOCK, &block, &orig);
	for (int i = 0; i < 4; i++) {
		sa.sa_handler = sigs[i] == SIGCHLD ? on_child : on_stop;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, &old[i]);
	}

	if (o->cmd) {
		child = start_cmd(o->cmd, &orig, &go);
		if (child < 0) {
			fprintf(o->err, "error: cannot start the command: %s\n",
				strerror((int)-child));
			goto out;
		}
		eo.pid = child;
	}
	if (eo.pid > 0 && !o->cmd) {
		pidfd = (int)syscall(SYS_pidfd_open, eo.pid, 0);
		if (pidfd < 0 && errno == ESRCH) {
			fprintf(o->err, "error: -p %d: no such process\n", (int)eo.pid);
			goto out;
		}
	}

	s.e = engine_new(q, p, &eo, why, sizeof(why));
	if (!s.e) {
		if (query_error(q)) {
			fputs(query_error(q), o->err);
			rc = 2;
		} else {
			fprintf(o->err, "error: %s", why);
		}
		goto out;
	}
	engine_set_record_fn(s.e, on_record, &s);
	err = engine_load(s.e);
	err = err ? : engine_attach(s.e);
	if (err) {
		const char *m = engine_error(s.e);

		fprintf(o->err, "%s%s", strstr(m, ": error: ") ? "" : "error: ", m);
		goto out;
	}
	if (!o->quiet) {
		fprintf(o->err, "fay: %d probe%s attached:", engine_nprobes(s.e),
			engine_nprobes(s.e) == 1 ? "" : "s");
		for (int i = 0; i < engine_nprobes(s.e); i++)
			fprintf(o->err, "%s %s", i ? "," : "", engine_probe_desc(s.e, i));
		fprintf(o->err, "; %s\n", p->for_ns ? "stops at the time limit or Ctrl-C" :
			o->cmd ? "stops when the command exits or Ctrl-C" :
			"Ctrl-C prints the result and stops");
	}
	if (o->attached_fn)
		o->attached_fn(o->attached_ctx);
	if (go >= 0) {
		if (write(go, "g", 1) != 1) {
			fprintf(o->err, "error: cannot start the command: %s\n",
				strerror(errno));
			goto out;
		}
		close(go);
		go = -1;
	}

	start = now_ns(CLOCK_MONOTONIC);
	wstart_rt = now_ns(CLOCK_REALTIME);
	if (p->for_ns)
		deadline = start + p->for_ns;
	if (p->window_ns && !stream)
		wnext = start + p->window_ns;
	rc = 0;
	for (;;) {
		struct pollfd pf[2];
		int npf = 0, sfd = engine_stream_fd(s.e);
		uint64_t now = now_ns(CLOCK_MONOTONIC), wake = UINT64_MAX;
		struct timespec ts, *tsp = NULL;

		if (got_stop)
			break;
		if (got_child && child > 0) {
			int st;

			got_child = 0;
			if (waitpid(child, &st, WNOHANG) == child) {
				child = -1;
				if (WIFEXITED(st) && WEXITSTATUS(st))
					fprintf(o->err, "fay: the command exited with status %d\n",
						WEXITSTATUS(st));
				else if (WIFSIGNALED(st))
					fprintf(o->err, "fay: the command was killed by signal %d\n",
						WTERMSIG(st));
				break;
			}
		}
		if (deadline && now >= deadline)
			break;
		if (wnext && now >= wnext) {
			uint64_t ws = wstart_rt;

			wstart_rt = now_ns(CLOCK_REALTIME);
			wnext += p->window_ns;
			if (print_aggregate(&s, true, ws)) {
				rc = 1;
				break;
			}
			continue;
		}
		if (deadline)
			wake = deadline;
		if (wnext && wnext < wake)
			wake = wnext;
		if (wake != UINT64_MAX) {
			uint64_t d = wake - now;

			ts.tv_sec = (time_t)(d / 1000000000ull);
			ts.tv_nsec = (long)(d % 1000000000ull);
			tsp = &ts;
		}
		if (sfd >= 0) {
			pf[npf].fd = sfd;
			pf[npf++].events = POLLIN;
		}
		if (pidfd >= 0) {
			pf[npf].fd = pidfd;
			pf[npf++].events = POLLIN;
		}
		if (ppoll(pf, (nfds_t)npf, tsp, &orig) < 0 && errno != EINTR) {
			fprintf(o->err, "error: waiting: %s\n", strerror(errno));
			rc = 1;
			break;
		}
		if (sfd >= 0 && npf && (pf[0].revents & POLLIN)) {
			engine_consume(s.e);
			fflush(o->out);
		}
		if (pidfd >= 0 && (pf[npf - 1].revents & POLLIN))
			break;		/* the traced process exited */
		if (s.limit && s.rows >= s.limit)
			break;		/* 'limit N' of a stream: N rows */
		if (s.werr) {
			fprintf(o->err, "error: cannot write the output: %s\n",
				strerror(-s.werr));
			rc = 1;
			break;
		}
	}
	/* the end: what is left */
	if (stream) {
		uint64_t c[ENGINE_NCOUNTERS];

		engine_consume(s.e);
		if (!engine_counters(s.e, c))
			print_counters(&s, c);
	} else if (rc == 0 && (!p->window_ns || now_ns(CLOCK_MONOTONIC) > start)) {
		if (print_aggregate(&s, false, p->window_ns ? wstart_rt : 0))
			rc = 1;
	}
	if (fflush(o->out) && !rc) {
		fprintf(o->err, "error: cannot write the output: %s\n", strerror(errno));
		rc = 1;
	}

out:
	engine_free(s.e);	/* detaches and closes everything */
	if (go >= 0)
		close(go);	/* the held command exits without running */
	if (child > 0) {
		int st;

		if (waitpid(child, &st, WNOHANG) == 0) {
			kill(child, SIGTERM);
			waitpid(child, &st, 0);
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	for (int i = 0; i < 4; i++)
		sigaction(sigs[i], &old[i], NULL);
	sigprocmask(SIG_SETMASK, &orig, NULL);
	return rc;
}
