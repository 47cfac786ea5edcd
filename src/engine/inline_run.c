// SPDX-License-Identifier: MIT
/*
 * function(...) sources as inline probes (--probe-mode, issue #8): the
 * engine's programs run in the traced process, in the runtime
 * libfay-probe.so that `fay run` preloads, instead of behind a uprobe.
 *
 * engine_new() asks engine_inl_decide() which mechanism a function()
 * source uses: inline when the source names one process (-p, -c,
 * process(PID), fay run) whose runtime answers on its control socket and
 * whose patcher accepts the function's entry; else a uprobe (auto) or an
 * error (inline), with one line saying which and why (engine_note()).
 * A process without the runtime gets it loaded with ptrace (auto and
 * inline modes, engine_opts.inject_lib unless no_inject; inject_check()
 * first, and the patcher's verdict on the site's bytes read from the
 * process (site_ok()), so auto falls back to a uprobe naming what forbids
 * it without loading anything: probe/inject.h); it stays loaded, idle, after the query (its
 * trampolines may still be returned into).
 * Then the maps are VM maps in memfds (engine_vm_load(): the reader of
 * run.c reads them through spans.c's functions, one slot standing for one
 * CPU) and engine_attach() sends the maps, the programs (verified here
 * and again there) and arms the site; engine_detach() restores it.  When
 * fay dies the socket closes and the runtime detaches by itself.  Under
 * fay run each image of the command is followed through its execs
 * (INL_NEXT in every session, engine_inl_follow(): the site armed in each
 * image with the same maps).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/cgroup.h"
#include "common/clock.h"
#include "common/inline_wire.h"
#include "common/log.h"
#include "common/procstat.h"
#include "engine/engine_int.h"
#include "engine/inline.h"
#include "patch/patch.h"
#include "probe/elfsym.h"
#include "probe/inject.h"
#include "probe/probe.h"
#include "probe/procroot.h"
#include "probe/unwind.h"

/* The functions one function(...) source patches: its one function, or
 * each a wildcard matched (one site per address: aliases share it). */
struct inl_set {
	struct inl_site *s;		/* [n]: SITES */
	struct inl_later *l;		/* [n]: LATER (a shared object) */
	uint64_t *off;			/* [n]: file offsets */
	size_t n, matched, aliases, nrefused;
	int nosym0;			/* the first site's elf_func_at() */
	char refused[1536];		/* "name: why; " each */
};

/* A command's descendant in another root with a session of its own
 * (engine_inl_kid()): slots KID_BASE + i * KID_WINDOW of the maps are
 * kids[i]'s while its image lives (its session open). */
#define KID_BASE	1024	/* the command's own (a runtime's RT_MAX_SLOTS) */
#define KID_WINDOW	32	/* threads of one descendant that are traced */
#define KID_MAX		((INLINE_MAX_SLOTS - KID_BASE) / KID_WINDOW)

struct inl_kid {
	pid_t pid;		/* 0: a free window */
	int fd;			/* its session */
};

struct engine_inl {
	int fd;
	pid_t pid, vpid;	/* the host's, and its own namespace's */
	char desc[700];
	bool armed;
	/* fay run follows the process's execs (engine_inl_follow()): the
	 * sites (w: by file offset in path; LATER: later), armed again in
	 * each image */
	bool follow, idle, following;
	bool later;
	struct inl_set w;
	char path[4096];
	uint64_t until;		/* following: give up at until (ns) */
	unsigned execs;		/* images armed after the first */
	struct inl_kid kids[KID_MAX];
	unsigned nkids;		/* descendants' images armed, in all */
	/* the unwind table sent (s.ustack): its maps' signature (0: none),
	 * and how many were sent again since, objects loaded meanwhile
	 * (engine_inl_unwind_tick()) */
	uint64_t unw_sig;
	unsigned unw_tables;
	bool unw_wait;		/* its reply not read yet */
};

const char *engine_note(const struct engine *e)
{
	return e->note;
}

bool engine_inl_active(const struct engine *e)
{
	return e->inl != NULL;
}

bool engine_runs_inline(const struct engine *e)
{
	return engine_inl_active(e);
}

pid_t engine_inl_pid(const struct engine *e, bool inner)
{
	return inner ? e->inl->vpid : e->inl->pid;
}

const char *engine_inl_desc(const struct engine *e)
{
	return e->inl->desc;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* pid's control socket: INLINE_RUN_DIR/PID.sock, where the runtime binds
 * it in the process's own file system with its own pid: a containerized
 * process's is /proc/PID/root/run/fay/inline/VPID.sock (procroot.h). */
static void rt_sock_path(pid_t pid, char *buf, size_t len)
{
	char in[96];
	pid_t vpid;

	if (!proc_other_root(pid)) {
		inline_sock_path(pid, buf, len);
		return;
	}
	vpid = proc_vpid(pid);
	inline_sock_path(vpid > 0 ? vpid : pid, in, sizeof(in));
	snprintf(buf, len, "/proc/%d/root%s", (int)pid, in);
}

/* Connect to pid's runtime, waiting up to wait_ms while pid lives. */
static int connect_rt(pid_t pid, int wait_ms)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, err;

	rt_sock_path(pid, a.sun_path, sizeof(a.sun_path));
	for (int waited = 0;; waited += 10) {
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a)))
			return fd;
		err = -errno;
		close(fd);
		/* a zombie (fay run's child before it is reaped) binds nothing */
		if (waited >= wait_ms || proc_exiting(pid) == 1)
			return err;
		sleep_ms(10);
	}
}

/* Send msg and wait for the reply (and any unrequested busy reply). */
static int call(int fd, const void *msg, size_t len, const int *fds, int nfds,
		struct inl_reply *r)
{
	ssize_t n;
	int err = inline_send(fd, msg, len, fds, nfds);

	/* a runtime busy with another query answers at once and closes:
	 * its reply says so */
	if (err && err != -EPIPE && err != -ECONNRESET)
		return err;
	n = inline_recv(fd, r, sizeof(*r), NULL, NULL);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return (int)n;
	if ((size_t)n != sizeof(*r) || r->h.type != INL_REPLY)
		return -EPROTO;
	r->msg[sizeof(r->msg) - 1] = '\0';
	n = (ssize_t)strlen(r->msg);
	while (n && r->msg[n - 1] == '\n')
		r->msg[--n] = '\0';
	return 0;
}

/* The address of file offset off of path in pid (its /proc/PID/maps). */
/* auto: a uprobe with a note; inline: an error.  Returns 0 or -errno. */
static int no_inline(struct engine *e, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int no_inline(struct engine *e, int err, const char *fmt, ...)
{
	char why[sizeof(e->note) - 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (e->opts.probe_mode == ENGINE_PROBE_INLINE)
		return engine_fail(e, err, "--probe-mode=inline: %s", why);
	if (!strncmp(why, "pid ", 4) && strchr(why, ':'))	/* "pid N: uprobe: why" */
		snprintf(e->note, sizeof(e->note), "%.*s uprobe:%s",
			 (int)(strchr(why, ':') - why + 1), why, strchr(why, ':') + 1);
	else
		snprintf(e->note, sizeof(e->note), "%s", why);
	return 0;
}

/*
 * A session on the runtime that will not run inline: closed, except in
 * auto mode, where it stays open until the uprobe that replaces it is
 * attached (engine_inl_release()): under fay run the runtime holds the
 * program's main() until its first session arms or ends, so closing it
 * now let main() run before the uprobe was there (calls missed; a short
 * program exited first: "no process N").
 */
static void hold_or_close(struct engine *e, int fd)
{
	if (fd < 0)
		return;
	if (e->opts.probe_mode != ENGINE_PROBE_INLINE && !e->inl_hold) {
		e->inl_hold = fd + 1;
		return;
	}
	close(fd);
}

void engine_inl_release(struct engine *e)
{
	if (e->inl_hold) {
		close(e->inl_hold - 1);
		e->inl_hold = 0;
	}
}

/* The reason inject_*() gave, without its leading "pid N: ". */
static const char *strip_pid(const char *why, pid_t pid)
{
	char pre[32];
	int n = snprintf(pre, sizeof(pre), "pid %d: ", (int)pid);

	return strncmp(why, pre, (size_t)n) ? why : why + n;
}

/*
 * The patcher's verdict on site s of pid, given in fay before anything is
 * loaded: the site's bytes read from the process (/proc/PID/mem; from
 * offset off of file for a site of an object loaded later) and
 * analysed as the runtime would (patch_site_new_room() on the copy: the
 * analysis decodes, it writes nothing), so a site it would refuse costs
 * no load.  0 (patchable, or the bytes could not be read: the runtime
 * decides), -EINVAL with the reason in why, -ENOMEM.
 */
static int site_ok(pid_t pid, const struct inl_site *s, const char *file, uint64_t off,
		   bool nosym, char *why, size_t len)
{
	size_t scan = s->size < 65536 ? (size_t)s->size : 65536;
	size_t n = scan > s->room ? scan : (size_t)s->room;
	unsigned char *buf = malloc(n);
	struct patch_site *ps;
	char fn[64];
	uint64_t from;
	ssize_t got = -1;
	int fd, err = 0;

	if (!buf)
		return -ENOMEM;
	snprintf(fn, sizeof(fn), "/proc/%d/mem", (int)pid);
	fd = open(file ? file : fn, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		got = pread(fd, buf, n, (off_t)(file ? off : s->addr));
		close(fd);
	}
	if (got == (ssize_t)n) {
		ps = patch_site_new_room(buf, (size_t)s->size, (size_t)s->room, why, len);
		if (!ps && errno != ENOMEM)
			err = -EINVAL;
		/* a function without a symbol (an IFUNC's implementation):
		 * hand-written code whose neighbours may jump into its
		 * first instructions (__mempcpy_* into memmove's second) */
		if (ps && file && nosym &&
		    elf_jumps_into(file, off, patch_site_len(ps), &from) == 1) {
			snprintf(why, len, "a jump at file offset 0x%" PRIx64 " of %s targets "
				 "its first %zu bytes, which the patch replaces", from, file,
				 patch_site_len(ps));
			err = -EINVAL;
		}
		patch_site_free(ps);
	}
	free(buf);
	return err;
}

/*
 * pid answers on no control socket: load the runtime into it with ptrace
 * when that is allowed (engine_opts.inject_lib and no no_inject;
 * inject_check()) and the patcher would take site s (site_ok()), then
 * connect.  0 with *fd connected, or no_inline()'s answer with *fd < 0
 * (auto: 0 and the note saying why; inline: -errno).  s may be NULL when
 * no load is allowed (no inject_lib, or no_inject): only the note then;
 * or when the caller judged its sites already (a wildcard's).
 * file (else NULL): s is in that shared object at offset off, read
 * there (it may not be loaded yet).
 */
static int load_rt(struct engine *e, pid_t pid, const struct inl_site *s, const char *file,
		   uint64_t off, bool nosym, int *fd)
{
	uint64_t t0 = clock_monotonic_ns();
	char why[1024];
	int err;

	*fd = -1;
	if (e->opts.no_inject)
		return no_inline(e, -EPERM, "pid %d: the fay runtime is not loaded and "
				 "--no-inject forbids loading it", (int)pid);
	if (!e->opts.inject_lib && e->opts.hold_execs)
		return no_inline(e, -ENOENT, "pid %d: the fay runtime is not loaded (auto, a "
				 "command: a uprobe, which follows the command and every process "
				 "it forks; --probe-mode=inline preloads the runtime and loads it "
				 "into each descendant in another root at its entry point)",
				 (int)pid);
	if (!e->opts.inject_lib)
		return no_inline(e, -ENOENT, "pid %d: the fay runtime is not loaded (start it "
				 "with fay run, or --probe-mode=inline to load it with ptrace)",
				 (int)pid);
	err = inject_check(pid, why, sizeof(why));
	if (!err && s) {
		err = site_ok(pid, s, file, off, nosym, why, sizeof(why));
		if (err == -EINVAL)
			return no_inline(e, err, "pid %d: site refused: %s: %s (nothing loaded)",
					 (int)pid, s->name, why);
	}
	if (!err)
		err = inject_library(pid, e->opts.inject_lib, why, sizeof(why));
	if (err)
		return no_inline(e, err, "pid %d: cannot load the fay runtime: %s", (int)pid,
				 strip_pid(why, pid));
	e->inl_injected_us = (clock_monotonic_ns() - t0) / 1000 + 1;
	*fd = connect_rt(pid, 5000);	/* its constructor binds the socket */
	if (*fd < 0)
		return no_inline(e, *fd, "pid %d: the fay runtime, loaded with ptrace, does "
				 "not answer: %s", (int)pid, strerror(-*fd));
	return 0;
}

/*
 * Whether path is a shared object of pid rather than its program, from
 * the ELF (elf_is_program(): a PIE executable is ET_DYN too, and a
 * library may be dlopen()ed under any name), and not the file
 * /proc/PID/exe is (a program of its own run as the process's main
 * executable): the runtime arms its sites whenever it is loaded
 * (INL_LATER), so it may be loaded later (dlopen) or again.  *st:
 * path's stat.
 */
static bool shared_object(pid_t pid, const char *path, struct stat *st)
{
	struct stat exe;
	char fn[64];

	memset(st, 0, sizeof(*st));
	if (stat(path, st) || elf_is_program(path) != 0)
		return false;
	snprintf(fn, sizeof(fn), "/proc/%d/exe", (int)pid);
	return stat(fn, &exe) || exe.st_dev != st->st_dev || exe.st_ino != st->st_ino;
}

/*
 * fay run (inline_wait_ms): INL_NEXT, so that the image this process
 * execs next holds too and fay can arm it (engine_inl_follow()); 0
 * without fay run.  call()'s answer.
 */
static int next_first(const struct engine *e, int fd, struct inl_reply *r)
{
	struct inl_hdr h;

	if (e->opts.inline_wait_ms <= 0)
		return 0;
	inline_hdr(&h, INL_NEXT, sizeof(h), 0);
	return call(fd, &h, sizeof(h), NULL, 0, r);
}

/* INL_NEXT first (next_first()), then the message msg: call()'s answer
 * for the one that failed. */
static int offer(const struct engine *e, int fd, const void *msg, size_t len,
		 struct inl_reply *r)
{
	return next_first(e, fd, r) ? : call(fd, msg, len, NULL, 0, r);
}

/* Wait until session fd hangs up (its image exec()ed or exited), up to
 * until (ns). */
static void wait_hangup(int fd, uint64_t until)
{
	struct pollfd p = { fd, POLLIN, 0 };
	uint64_t now;

	while ((now = clock_monotonic_ns()) < until &&
	       poll(&p, 1, (int)((until - now) / 1000000 + 1)) < 0 && errno == EINTR)
		;
}

/*
 * fay run (a process fay started held: inline_wait_ms) whose image maps
 * no object with the function: a wrapper that will exec the program
 * (sh -c 'exec prog', a pyenv shim).  Each round tells the runtime
 * INL_NEXT (its next image holds again) and INL_GO (this one runs on, the
 * session idle), waits for the session to hang up (the exec, or the
 * exit), and connects to the next image's runtime; up to 30 s, or until
 * the process is gone.  Returns the session's fd (< 0: none), *err
 * proc_map_addr()'s last answer.
 */
static int next_image(struct engine *e, pid_t pid, const char *path, uint64_t off,
		      uint64_t *addr, int fd, int *err)
{
	uint64_t until = clock_monotonic_ns() + 30000000000ull;
	struct inl_reply r;
	struct inl_hdr h;

	while (*err && clock_monotonic_ns() < until) {
		int rc;

		inline_hdr(&h, INL_GO, sizeof(h), 0);
		rc = offer(e, fd, &h, sizeof(h), &r);
		if (rc && rc != -ECONNRESET && rc != -EPIPE)
			break;
		/* -EBUSY: the runtime took this connection for a second
		 * session while the one before had not ended on its side yet
		 * (a loaded machine): connect again */
		if (!rc && r.status && r.status != -EBUSY)
			break;		/* a runtime without INL_GO */
		if (!rc && !r.status)
			wait_hangup(fd, until);
		close(fd);		/* (a reset: it exec()ed meanwhile) */
		if (!rc)
			sleep_ms(10);
		fd = connect_rt(pid, e->opts.inline_wait_ms);
		if (fd < 0)
			return fd;	/* the process is gone */
		*err = proc_map_addr(pid, path, off, addr);
	}
	return fd;
}

static void set_free(struct inl_set *w)
{
	free(w->s);
	free(w->l);
	free(w->off);
}

static void set_refuse(struct inl_set *w, const char *name, const char *why)
{
	size_t o = strlen(w->refused);

	w->nrefused++;
	if (o < sizeof(w->refused) - 1)
		snprintf(w->refused + o, sizeof(w->refused) - o, "%s%s: %s", o ? "; " : "",
			 name, why);
}

/*
 * Fill w with the sites of ep's probe in pid (nw: the wildcard's
 * functions, 0 for one function at off named sym): each site's size
 * (symbols or CFI), its address (later: none, the runtime finds it in
 * each load) and the cookie the programs read (the function's index,
 * s.name).  A wildcard's sites are judged by the patcher here
 * (site_ok()); refused ones are left out and named in w->refused.
 * 0, -ENOMEM, or -ENOENT for one function with no size.
 */
static int set_fill(struct inl_set *w, const struct eprog *ep, pid_t pid, size_t nw,
		    const char *path, uint64_t off, const char *sym, bool later,
		    const struct stat *st)
{
	size_t n = nw ? nw : 1;

	memset(w, 0, sizeof(*w));
	w->matched = n;
	w->s = calloc(n, sizeof(*w->s));
	w->l = calloc(n, sizeof(*w->l));
	w->off = calloc(n, sizeof(*w->off));
	if (!w->s || !w->l || !w->off)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct inl_site *s = &w->s[w->n];
		struct inl_later *l = &w->l[w->n];
		const char *p = path, *name = sym;
		uint64_t o = off;
		char why[512];
		bool dup = false;
		int nosym;

		if (nw && probe_uprobe_wsite(ep->probe, i, &p, &o, &name))
			continue;
		for (size_t j = 0; j < w->n && !dup; j++)
			dup = w->off[j] == o;
		if (dup) {		/* an alias: one site, counted under the first */
			w->aliases++;
			continue;
		}
		memset(s, 0, sizeof(*s));
		nosym = elf_func_at(path, o, &s->size, &s->room);
		if (nosym < 0 && !nw)
			return -ENOENT;
		if (nosym < 0) {
			set_refuse(w, name, "no size in the symbols or call frame information");
			continue;
		}
		if (!later && proc_map_addr(pid, path, o, &s->addr)) {
			set_refuse(w, name, "not mapped executable");
			continue;
		}
		s->cookie = i;
		snprintf(s->name, sizeof(s->name), "%s", name);
		if (nw && site_ok(pid, s, later ? path : NULL, o, nosym, why, sizeof(why)) ==
		    -EINVAL) {
			set_refuse(w, name, why);
			continue;
		}
		if (!w->n)
			w->nosym0 = nosym;
		memset(l, 0, sizeof(*l));
		l->dev = (uint64_t)st->st_dev;
		l->ino = (uint64_t)st->st_ino;
		l->off = o;
		l->size = s->size;
		l->room = s->room;
		l->cookie = s->cookie;
		snprintf(l->name, sizeof(l->name), "%s", name);
		snprintf(l->obj, sizeof(l->obj), "%s", path);
		w->off[w->n++] = o;
	}
	return 0;
}

/* Send w's sites (SITES, or LATER) in one message: 0 or -errno, *r the
 * reply. */
static int set_send(int fd, const struct inl_set *w, bool later, struct inl_reply *r)
{
	size_t one = later ? sizeof(*w->l) : sizeof(*w->s);
	size_t len = sizeof(struct inl_hdr) + w->n * one;
	unsigned char *buf = malloc(len);
	int err;

	if (!buf)
		return -ENOMEM;
	inline_hdr((struct inl_hdr *)buf, later ? INL_LATER : INL_SITES, len, (uint32_t)w->n);
	memcpy(buf + sizeof(struct inl_hdr), later ? (const void *)w->l : (const void *)w->s,
	       w->n * one);
	err = call(fd, buf, len, NULL, 0, r);
	free(buf);
	return err;
}

/* offer() of w's sites: INL_NEXT first under fay run, then the sites. */
static int set_offer(const struct engine *e, int fd, const struct inl_set *w, bool later,
		     struct inl_reply *r)
{
	return next_first(e, fd, r) ? : set_send(fd, w, later, r);
}

/* The sites' addresses in pid again (an image that exec()ed). */
static int set_remap(struct inl_set *w, pid_t pid, const char *path)
{
	for (size_t i = 0; i < w->n; i++) {
		int err = proc_map_addr(pid, path, w->off[i], &w->s[i].addr);

		if (err)
			return err;
	}
	return 0;
}

/* What a wildcard's set is, for the mode line: "N functions matched, K
 * patched" with the aliases and the refused ones. */
static void set_describe(const struct inl_set *w, char *buf, size_t len)
{
	int o = snprintf(buf, len, "%zu functions matched, %zu sites patched", w->matched, w->n);

	if (w->aliases && o > 0 && (size_t)o < len)
		o += snprintf(buf + o, len - (size_t)o, ", %zu aliases (an address of an "
			      "earlier name: counted under that name)", w->aliases);
	if (w->nrefused && o > 0 && (size_t)o < len)
		snprintf(buf + o, len - (size_t)o, "; %zu refused, not traced: %.500s", w->nrefused,
			 w->refused);
}

int engine_inl_decide(struct engine *e)
{
	struct eprog *ep = &e->progs[0];
	struct inl_reply r;
	struct inl_set w;
	struct stat st;
	const char *path, *sym, *label;
	char wdesc[700] = "";
	uint64_t off, addr = 0;
	pid_t pid = ep->popts.pid;
	size_t nw;
	bool later;
	int fd, err;

	if (e->opts.emit_only || ep->kind != PROBE_UPROBE || !ep->probe)
		return 0;
	nw = probe_nsites(ep->probe);
	if (nw ? probe_uprobe_wsite(ep->probe, 0, &path, &off, &sym) :
	    probe_uprobe_site(ep->probe, &path, &off, &sym))
		return 0;
	label = nw && strrchr(ep->spec, ':') ? strrchr(ep->spec, ':') + 1 : sym;
	if (e->opts.probe_mode == ENGINE_PROBE_UPROBE) {
		snprintf(e->note, sizeof(e->note), "%s: uprobe (--probe-mode=uprobe)", label);
		return 0;
	}
	if (pid <= 0 && e->opts.probe_mode == ENGINE_PROBE_INLINE)
		return no_inline(e, -EINVAL, "%s in every process: uprobe (inline probes run in "
				 "one process: name it with -p or process(PID), or start it "
				 "with fay run; a uprobe also sees the processes that start "
				 "later)", label);
	if (pid <= 0) {
		/* auto's usual case, not a fault: one short line (the reason is
		 * the error of --probe-mode=inline above, and docs/QUERY.md) */
		snprintf(e->note, sizeof(e->note), "%s: uprobe, every process", label);
		return 0;
	}
	if (e->out && !e->use_ringbuf)
		return no_inline(e, -EOPNOTSUPP, "pid %d: streamed rows need a ring "
				 "buffer (--buffer=perf)", (int)pid);
	if (nw > INLINE_MAX_SITES)
		return no_inline(e, -E2BIG, "pid %d: %s matches %zu functions; inline probes "
				 "patch at most %d in one process (name fewer)", (int)pid, label,
				 nw, INLINE_MAX_SITES);
	fd = connect_rt(pid, e->opts.inline_wait_ms);
	if (fd < 0 && (e->opts.no_inject || !e->opts.inject_lib))
		return load_rt(e, pid, NULL, NULL, 0, false, &fd);	/* says why it will not */
	later = shared_object(pid, path, &st);
	err = proc_map_addr(pid, path, off, &addr);
	/* a program not mapped yet: the held image is a wrapper that will
	 * exec it.  A shared object is armed by the runtime whenever it is
	 * loaded (LATER): now, or when the program dlopen()s it */
	if (err && fd >= 0 && e->opts.inline_wait_ms > 0 && !later)
		fd = next_image(e, pid, path, off, &addr, fd, &err);
	if (err && !later) {
		if (fd >= 0)
			hold_or_close(e, fd);
		return no_inline(e, err, "pid %d: %s is not mapped executable in it",
				 (int)pid, path);
	}
	/* the functions: each one's symbol size, or its FDE's (an IFUNC's
	 * implementation in a stripped library) */
	err = set_fill(&w, ep, pid, nw, path, off, sym, later, &st);
	if (err) {
		set_free(&w);
		if (fd >= 0)
			hold_or_close(e, fd);
		if (err == -ENOENT)
			return no_inline(e, -ENOENT, "pid %d: %s has no size in %s's symbols "
					 "or call frame information", (int)pid, sym, path);
		return engine_fail(e, err, "out of memory");
	}
	/* a wildcard runs inline whole, or (auto) as uprobes whole; inline
	 * mode patches what the patcher takes and names the rest */
	if (nw && (!w.n || (w.nrefused && e->opts.probe_mode != ENGINE_PROBE_INLINE))) {
		set_describe(&w, wdesc, sizeof(wdesc));
		set_free(&w);
		if (fd >= 0)
			hold_or_close(e, fd);
		return no_inline(e, -EINVAL, "pid %d: %s: the patcher refuses %zu of its "
				 "functions (a wildcard runs inline whole): %.700s", (int)pid,
				 label, w.nrefused, wdesc);
	}
	if (nw)
		set_describe(&w, wdesc, sizeof(wdesc));
	if (fd < 0) {
		/* a wildcard's sites were judged in set_fill() */
		err = load_rt(e, pid, nw ? NULL : &w.s[0], later ? path : NULL, off, w.nosym0,
			      &fd);
		if (err || fd < 0) {
			set_free(&w);
			return err;
		}
	} else if (later && !nw) {
		/* the patcher's verdict from the file: the runtime may see
		 * the site only when the object loads */
		char why[512];

		if (site_ok(pid, &w.s[0], path, off, w.nosym0, why, sizeof(why)) == -EINVAL) {
			set_free(&w);
			hold_or_close(e, fd);
			return no_inline(e, -EINVAL, "pid %d: site refused: %s: %s", (int)pid,
					 sym, why);
		}
	}
	err = set_offer(e, fd, &w, later, &r);
	if ((err == -ECONNRESET || err == -EPIPE) && e->opts.inline_wait_ms > 0 &&
	    !kill(pid, 0)) {
		/* fay run: the image exec()ed between next_image()'s connect
		 * and now; the next one holds: the sites at their addresses */
		close(fd);
		fd = connect_rt(pid, e->opts.inline_wait_ms);
		err = fd < 0 ? fd : later ? 0 : set_remap(&w, pid, path);
		err = err ? : set_offer(e, fd, &w, later, &r);
	}
	addr = w.s[0].addr;
	if (err || r.status) {
		set_free(&w);
		hold_or_close(e, fd);
		if (err)
			return no_inline(e, err, "pid %d: the fay runtime does not answer: %s",
					 (int)pid, strerror(-err));
		if (r.status == -EPROTO)
			return no_inline(e, r.status, "pid %d: its fay runtime is older than this "
					 "fay (%s): restart the process, or --probe-mode=uprobe",
					 (int)pid, r.msg);
		if (e->inl_injected_us)
			return no_inline(e, r.status, "pid %d: %s (the fay runtime, loaded with "
					 "ptrace, stays loaded, idle)", (int)pid, r.msg);
		return no_inline(e, r.status, "pid %d: %s", (int)pid, r.msg);
	}
	e->inl = calloc(1, sizeof(*e->inl));
	if (!e->inl) {
		set_free(&w);
		hold_or_close(e, fd);
		return engine_fail(e, -ENOMEM, "out of memory");
	}
	e->inl->w = w;		/* (its sites again in each image fay run follows) */
	e->inl->fd = fd;
	e->inl->pid = pid;
	e->inl->vpid = proc_vpid(pid);
	if (e->inl->vpid <= 0)
		e->inl->vpid = pid;
	e->inl->follow = e->opts.inline_wait_ms > 0;
	e->inl->later = later;
	snprintf(e->inl->path, sizeof(e->inl->path), "%s", path);
	if (nw)
		snprintf(e->inl->desc, sizeof(e->inl->desc), "inline %.300s:%.64s, %.200s%s "
			 "(pid %d)", path, label, wdesc, later ? ", armed at each load" : "",
			 (int)pid);
	else if (later)
		snprintf(e->inl->desc, sizeof(e->inl->desc), "inline %.400s:%.64s, armed at "
			 "each load (pid %d)", path, sym, (int)pid);
	else
		snprintf(e->inl->desc, sizeof(e->inl->desc), "inline %.400s:%.64s@0x%" PRIx64
			 " (pid %d)", path, sym, addr, (int)pid);
	if (e->inl_injected_us)
		snprintf(e->note, sizeof(e->note), "pid %d: inline, runtime loaded with ptrace "
			 "in %.1f ms (%s%s%.700s)", (int)pid, e->inl_injected_us / 1000.0, wdesc,
			 nw ? "; " : "", r.msg);
	else
		snprintf(e->note, sizeof(e->note), "pid %d: inline (%s%s%.700s)", (int)pid, wdesc,
			 nw ? "; " : "", r.msg);
	return 0;
}

int engine_inl_pairs(struct engine *e)
{
	struct bmap *b;

	if (!e->inl || !e->pairs)
		return 0;
	b = bmap_new("fay_pairs", BPF_MAP_TYPE_PERCPU_ARRAY, 4,
		     (uint32_t)e->p->saved_size + 8, INLINE_DEPTH);
	if (!b)
		return engine_fail(e, -errno, "cannot set up the maps: %s", strerror(errno));
	bmap_free(e->pairs);
	e->pairs = b;
	e->slot_pairs = true;
	e->frame_pairs = false;
	return 0;
}

/* Tell the runtime on session fd which process it is as fay numbers it
 * (INL_PID: pid, its cgroup v2 id), for the programs' pid, cgroup and
 * user stacks.  A runtime older than this message refuses it: its
 * programs then see its own getpid() (the same but in a pid namespace)
 * and cgroup 0.  0 or call()'s -errno. */
static int send_pid(int fd, pid_t pid)
{
	unsigned char buf[sizeof(struct inl_hdr) + 16] = { 0 };
	uint32_t p = (uint32_t)pid;
	uint64_t cg = cgroup_id_of_pid(pid);
	struct inl_reply r;

	inline_hdr((struct inl_hdr *)buf, INL_PID, sizeof(buf), 0);
	memcpy(buf + sizeof(struct inl_hdr), &p, 4);
	memcpy(buf + sizeof(struct inl_hdr) + 8, &cg, 8);
	return call(fd, buf, sizeof(buf), NULL, 0, &r);
}

#define UNWIND_SKIP	"/libfay-probe.so"	/* the runtime's frames stay hidden */

/* Whether in has a stack map (s.ustack keys) and fay's environment does
 * not say FAY_UNWIND=fp (frame pointers only: no table) */
static bool wants_unwind(const struct engine_inline *in)
{
	const char *how = getenv("FAY_UNWIND");
	bool stacks = false;

	for (int i = 0; i < in->nmaps; i++)
		stacks |= vm_map_def(in->maps[i])->type == BPF_MAP_TYPE_STACK_TRACE;
	return stacks && !(how && !strcmp(how, "fp"));
}

/* Send process pid's unwind table on session fd (INL_UNWIND): the
 * runtime's walker steps by it through code without frame pointers.  A
 * table fay cannot build, or one the runtime refuses (an older runtime,
 * its limit of tables), leaves the walk to frame pointers: said at info
 * level, 0 with r->status 0 (*sig 0 when refused, so that it is not
 * sent again); else call()'s -errno.  *sig: unwind_process_sig() of the
 * maps the table was made from. */
static int send_unwind(int fd, pid_t pid, struct inl_reply *r, uint64_t *sig)
{
	unsigned nmods, nrows;
	struct inl_hdr h;
	char why[256];
	int tfd, err;

	*sig = 0;
	tfd = unwind_process_memfd(pid, UNWIND_SKIP, &nmods, &nrows, sig, why, sizeof(why));
	if (tfd < 0) {
		pr_info("pid %d: no unwind table (frame pointers only): %s", (int)pid, why);
		r->status = 0;
		return 0;
	}
	inline_hdr(&h, INL_UNWIND, sizeof(h), nmods);
	err = call(fd, &h, sizeof(h), &tfd, 1, r);
	close(tfd);
	if (!err && r->status) {
		pr_info("pid %d: the runtime refused the unwind table (frame pointers only): %s",
			(int)pid, r->msg);
		r->status = 0;
		*sig = 0;
	}
	return err;
}

/* The reply of INL_UNWIND sent from the stack tick (fd readable): its
 * status said at info level when the runtime refused the table (no
 * more are sent then).  Whether it was that reply (false: the session
 * hung up). */
static bool unwind_reply(struct engine_inl *s)
{
	struct inl_reply r;
	ssize_t n = inline_recv(s->fd, &r, sizeof(r), NULL, NULL);

	if (n != (ssize_t)sizeof(r) || r.h.type != INL_REPLY)
		return false;
	s->unw_wait = false;
	if (r.status) {
		r.msg[sizeof(r.msg) - 1] = '\0';
		pr_info("pid %d: the runtime refused a new unwind table (the last one stays): %s",
			(int)s->pid, r.msg);
		s->unw_sig = 0;
	} else {
		s->unw_tables++;
	}
	return true;
}

void engine_inl_unwind_tick(struct engine *e)
{
	struct engine_inl *s = e->inl;
	struct pollfd pf;
	struct inl_hdr h;
	unsigned nmods, nrows;
	uint64_t sig;
	char why[256];
	int tfd, err;

	if (!s || s->fd < 0 || !s->armed || s->idle || s->following || !s->unw_sig ||
	    s->unw_wait)
		return;
	sig = unwind_process_sig(s->pid, UNWIND_SKIP);
	if (!sig || sig == s->unw_sig)
		return;
	tfd = unwind_process_memfd(s->pid, UNWIND_SKIP, &nmods, &nrows, &sig, why, sizeof(why));
	if (tfd < 0) {
		pr_info("pid %d: no new unwind table: %s", (int)s->pid, why);
		s->unw_sig = sig ? sig : s->unw_sig;	/* not again for these maps */
		return;
	}
	inline_hdr(&h, INL_UNWIND, sizeof(h), nmods);
	err = inline_send(s->fd, &h, sizeof(h), &tfd, 1);
	close(tfd);
	if (err)
		return;		/* the session is going: its hang-up says so */
	s->unw_sig = sig;
	s->unw_wait = true;
	/* a stopped process (SIGSTOP, a debugger) answers later: the driver
	 * is not held; its reply then wakes the driver's poll of the
	 * session, which engine_inl_hangup() takes first */
	pf.fd = s->fd;
	pf.events = POLLIN;
	if (poll(&pf, 1, 200) == 1)
		(void)unwind_reply(s);
}

/* Send the maps and programs of in on session fd and arm, the process
 * (pid) writing the maps' slots from base on, with its unwind table
 * when in has a stack map (*unw_sig: its maps' signature, 0 for none):
 * 0 with *r the last reply (r->status: the runtime's refusal), or
 * call()'s -errno (-ENOMEM). */
static int arm_session(int fd, const struct engine_inline *in, pid_t pid, uint32_t base,
		       struct inl_reply *r, uint64_t *unw_sig)
{
	unsigned char *buf;
	size_t len;
	int fds[INLINE_MAX_MAPS], err;
	uint32_t *hd;

	len = sizeof(struct inl_hdr) + 8 + (size_t)in->nmaps * sizeof(struct inl_map);
	if (sizeof(struct inl_hdr) + 8 + in->ninsns[0] * sizeof(struct bpf_insn) > len)
		len = sizeof(struct inl_hdr) + 8 + in->ninsns[0] * sizeof(struct bpf_insn);
	if (sizeof(struct inl_hdr) + 8 + in->ninsns[1] * sizeof(struct bpf_insn) > len)
		len = sizeof(struct inl_hdr) + 8 + in->ninsns[1] * sizeof(struct bpf_insn);
	err = send_pid(fd, pid);
	if (err)
		return err;
	buf = calloc(1, len);
	if (!buf)
		return -ENOMEM;
	hd = (uint32_t *)(buf + sizeof(struct inl_hdr));
	/* the maps and their memfds */
	len = sizeof(struct inl_hdr) + 8 + (size_t)in->nmaps * sizeof(struct inl_map);
	inline_hdr((struct inl_hdr *)buf, INL_MAPS, len, (uint32_t)in->nmaps);
	hd[0] = vm_map_nslots(in->maps[0]);
	hd[1] = base;
	for (int i = 0; i < in->nmaps; i++) {
		const struct vm_map_def *d = vm_map_def(in->maps[i]);
		struct inl_map im = { d->type, d->key_size, d->value_size, d->max_entries };

		memcpy(buf + sizeof(struct inl_hdr) + 8 + i * sizeof(im), &im, sizeof(im));
		fds[i] = vm_map_fd(in->maps[i]);
	}
	err = call(fd, buf, len, fds, in->nmaps, r);
	*unw_sig = 0;
	if (!err && !r->status && wants_unwind(in))
		err = send_unwind(fd, pid, r, unw_sig);
	/* the programs: verified by fay already, verified again there */
	for (int role = 0; role < 2 && !err && !r->status; role++) {
		if (!in->ninsns[role])
			continue;
		len = sizeof(struct inl_hdr) + 8 + in->ninsns[role] * sizeof(struct bpf_insn);
		inline_hdr((struct inl_hdr *)buf, INL_PROG, len, (uint32_t)in->ninsns[role]);
		hd[0] = (uint32_t)role;
		hd[1] = (uint32_t)INLINE_CTX_SIZE;
		memcpy(hd + 2, in->insns[role], in->ninsns[role] * sizeof(struct bpf_insn));
		err = call(fd, buf, len, NULL, 0, r);
	}
	if (!err && !r->status) {
		struct inl_hdr h;

		inline_hdr(&h, INL_ARM, sizeof(h), 0);
		err = call(fd, &h, sizeof(h), NULL, 0, r);
	}
	free(buf);
	return err;
}

int engine_inl_attach(struct engine *e, const struct engine_inline *in)
{
	struct engine_inl *s = e->inl;
	struct inl_reply r;
	int err;

	/* a command fay started: its descendants in other roots too
	 * (engine_inl_kid()), seen by the exec watch, whose fork program
	 * is in place before the command runs on (fay run: ARM lets it) */
	for (int i = 0; i < KID_MAX; i++)
		s->kids[i].fd = -1;
	if (e->opts.hold_execs && e->opts.probe_mode == ENGINE_PROBE_INLINE)
		engine_exec_start(e);
	err = arm_session(s->fd, in, s->pid, 0, &r, &s->unw_sig);

	if (err == -ENOMEM)
		return engine_fail(e, err, "out of memory");
	if (err)
		return engine_fail(e, err, "pid %d: the fay runtime: %s", (int)s->pid,
				   strerror(-err));
	if (r.status) {
		/* auto: a uprobe takes the function (engine_inl_fallback());
		 * the session stays open until it is attached */
		if (e->opts.probe_mode == ENGINE_PROBE_AUTO) {
			e->inl_refused = true;
			snprintf(e->note, sizeof(e->note), "pid %d: uprobe: the fay runtime "
				 "could not arm the inline probe: %.900s", (int)s->pid, r.msg);
		}
		return engine_fail(e, r.status, "pid %d: the fay runtime refuses: %s",
				   (int)s->pid, r.msg);
	}
	s->armed = true;
	e->attached = true;
	return 0;
}

/* The window of a descendant: pid's own (an image before this one), else
 * one whose image is gone (its session hung up: exec()ed or exited),
 * else a free one; -1 when every window has a live image. */
static int kid_window(struct engine_inl *s, pid_t pid)
{
	int free_at = -1;

	for (int i = 0; i < KID_MAX; i++) {
		struct inl_kid *k = &s->kids[i];
		struct pollfd p = { k->fd, POLLIN, 0 };

		char c;

		/* gone: its session at its end (a reply never comes unasked) */
		if (k->pid == pid || !k->pid ||
		    (poll(&p, 1, 0) == 1 && ((p.revents & (POLLHUP | POLLERR)) ||
					     recv(k->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0))) {
			if (k->fd >= 0)
				close(k->fd);
			k->fd = -1;
			if (k->pid == pid)
				return i;
			k->pid = 0;
			if (free_at < 0)
				free_at = i;
		}
	}
	return free_at;
}

struct kid_arm {
	struct engine *e;
	pid_t pid;
	int win;
	const char *path, *sym;
	char why[1024];
};

/* inject_library_at_entry()'s ready(): the descendant, stopped at its
 * entry point, answers on its runtime's socket: its site (by file: the
 * runtime arms it in the object loaded already, or when it is loaded)
 * and the query's maps and programs, its threads writing its window. */
static int kid_ready(void *arg)
{
	struct kid_arm *a = arg;
	struct engine *e = a->e;
	struct inl_kid *k = &e->inl->kids[a->win];
	struct inl_reply r;
	uint64_t kid_sig;	/* a descendant's table is not sent again */
	struct inl_set w;
	struct stat st;
	uint64_t off;
	bool later = shared_object(a->pid, a->path, &st);
	int fd = connect_rt(a->pid, 5000), err;

	if (fd < 0) {
		snprintf(a->why, sizeof(a->why), "its runtime does not answer: %s",
			 strerror(-fd));
		return fd;
	}
	err = elf_func_offset(a->path, a->sym, &off);
	err = err ? : set_fill(&w, &e->progs[0], a->pid, 0, a->path, off, a->sym, later, &st);
	if (err) {
		snprintf(a->why, sizeof(a->why), "%s: no size or no symbol in %s", a->sym,
			 a->path);
	} else {
		err = set_send(fd, &w, later, &r);
		err = err || r.status ? err : arm_session(fd, engine_vm_inline(e), a->pid,
							   KID_BASE + (uint32_t)a->win * KID_WINDOW,
							   &r, &kid_sig);
		if (err || r.status)
			snprintf(a->why, sizeof(a->why), "%.1000s", err ? strerror(-err) : r.msg);
		err = err ? : r.status;
	}
	set_free(&w);
	if (err) {
		close(fd);
		return err;
	}
	k->pid = a->pid;
	k->fd = fd;
	return 0;
}

/* The INL_NEXT mark beside the control socket at path p (its ".sock"
 * made ".next" in place) removed. */
static void unlink_next(char *p)
{
	size_t n = strlen(p);

	if (n > 5 && !strcmp(p + n - 5, ".sock")) {
		memcpy(p + n - 5, ".next", 5);
		unlink(p);
	}
}

/* fay run ends: the runtime's INL_NEXT mark of the command (PID.next
 * beside its socket, which the runtime leaves at the exit: its
 * destructor runs on the program's thread) goes, so that nothing is
 * left behind and an image exec()ed later holds for no one. */
static void drop_next_mark(pid_t pid)
{
	char p[160];

	rt_sock_path(pid, p, sizeof(p));
	unlink_next(p);
}

/* Whether pid's image (held at its exec) has lib in its LD_PRELOAD (its
 * /proc/PID/environ): its loader loads the runtime by itself. */
static bool preloads(pid_t pid, const char *lib)
{
	char fn[64], *buf = malloc(65536);
	bool yes = false;
	ssize_t n = -1;
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%d/environ", (int)pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && buf)
		n = read(fd, buf, 65535);
	if (fd >= 0)
		close(fd);
	if (n > 0)
		buf[n] = '\0';
	for (ssize_t i = 0; i < n && !yes; i += (ssize_t)strlen(buf + i) + 1)
		yes = !strncmp(buf + i, "LD_PRELOAD=", 11) && strstr(buf + i, lib);
	free(buf);
	return yes;
}

/* The command's own process, armed as a descendant in the root it
 * exec()ed into (or without its preload): its first session (gone with
 * its image) is not followed any more, nor waited for. */
static void own_moved(struct engine_inl *s)
{

	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->armed = s->idle = s->following = false;
}

int engine_inl_kid(struct engine *e, pid_t pid)
{
	struct engine_inl *s = e->inl;
	struct eprog *ep = &e->progs[0];
	struct kid_arm a = { .e = e, .pid = pid };
	char path[4096], why[1024] = "";
	uint64_t t0 = clock_monotonic_ns();
	unsigned live;		/* the command's own process, and each window's */
	int err;

	/* (the command's own exec: into fay's root with the runtime still
	 * preloaded, the runtime follows it, engine_inl_follow(); into
	 * another root, whose loader cannot open the host's path, or with
	 * its environment cleared, the runtime is loaded at its entry) */
	if (!s || !e->opts.kid_lib || e->opts.no_inject || !ep->probe ||
	    (pid == s->pid && !proc_other_root(pid) && preloads(pid, e->opts.kid_lib)) ||
	    probe_child_file(ep->probe, pid, path, sizeof(path), &a.sym) != 1)
		return 0;
	/* (its mark would hold the runtime's constructor in fay's root,
	 * inside the dlopen() fay waits for) */
	if (pid == s->pid)
		drop_next_mark(pid);
	a.path = path;
	a.win = kid_window(s, pid);
	if (a.win < 0) {
		pr_warn("%s: process %d, a descendant, not traced: %d descendants' images are "
			"traced inline already", ep->spec, (int)pid, KID_MAX);
		return -E2BIG;
	}
	err = inject_library_at_entry(pid, e->opts.kid_lib, kid_ready, &a, why, sizeof(why));
	if (err) {
		/* a static program, one that exited or exec()ed again first */
		pr_warn("%s: process %d, a descendant, not traced inline: %s", ep->spec,
			(int)pid, a.why[0] ? a.why : strip_pid(why, pid));
		return err;
	}
	s->nkids++;
	if (pid == s->pid)
		own_moved(s);
	live = s->fd >= 0 || s->following;
	for (int i = 0; i < KID_MAX; i++)
		live += s->kids[i].pid != 0;
	pr_info("%s: process %d, a descendant, inline with %s (runtime loaded at its entry "
		"point in %.1f ms): inline in %u processes", ep->spec, (int)pid, path,
		(double)(clock_monotonic_ns() - t0) / 1e6, live);
	return 1;
}

int engine_inl_fd(const struct engine *e)
{
	const struct engine_inl *s = e->inl;

	return s && s->follow && (s->armed || s->idle) ? s->fd : -1;
}

bool engine_inl_following(const struct engine *e)
{
	return e->inl && e->inl->following;
}

void engine_inl_hangup(struct engine *e)
{
	struct engine_inl *s = e->inl;

	if (!s || s->fd < 0)
		return;
	if (s->unw_wait && unwind_reply(s))
		return;		/* a late reply to INL_UNWIND, not a hang-up */
	close(s->fd);
	s->fd = -1;
	s->armed = s->idle = false;
	s->unw_wait = false;
	s->following = true;
	s->until = clock_monotonic_ns() + (uint64_t)e->opts.inline_wait_ms * 1000000ull;
}

/*
 * Session fd on the runtime of the image the process runs now: INL_NEXT
 * (its next image holds too), then its sites (LATER by file; SITES at
 * the addresses this image maps the program at) armed with the query's maps
 * and programs, or INL_GO when this image maps no site (a wrapper
 * execing a wrapper): it runs on, the session idle.  0 (s->fd is fd),
 * -EAGAIN (the session reset: the image exec()ed meanwhile, connect
 * again), or -errno / the runtime's refusal (fd closed: the image runs
 * on untraced).
 */
static int follow_image(struct engine *e, int fd)
{
	struct engine_inl *s = e->inl;
	struct inl_reply r;
	struct inl_hdr h;
	int err;

	if (!s->later && set_remap(&s->w, s->pid, s->path)) {
		inline_hdr(&h, INL_GO, sizeof(h), 0);
		err = offer(e, fd, &h, sizeof(h), &r);
		if (!err && !r.status) {
			s->fd = fd;
			s->idle = true;
			return 0;
		}
	} else {
		err = set_offer(e, fd, &s->w, s->later, &r);
		err = err || r.status ? err : arm_session(fd, engine_vm_inline(e), s->pid, 0, &r,
								   &s->unw_sig);
		if (!err && !r.status) {
			s->fd = fd;
			s->armed = true;
			s->execs++;
			return 0;
		}
	}
	close(fd);
	if (err == -ECONNRESET || err == -EPIPE)
		return -EAGAIN;
	snprintf(e->note, sizeof(e->note), "pid %d: its exec()ed image is not traced: %.900s",
		 (int)s->pid, err ? strerror(-err) : r.msg);
	return err ? : r.status;
}

bool engine_inl_follow(struct engine *e)
{
	struct engine_inl *s = e->inl;
	int fd, err = 0;

	if (!s || !s->following)
		return false;
	if (proc_exiting(s->pid) == 1) {
		s->following = false;	/* it exited: nothing to follow */
		return false;
	}
	fd = connect_rt(s->pid, 0);
	if (fd >= 0 && (err = follow_image(e, fd)) == -EAGAIN)
		fd = -1;
	if (fd >= 0) {
		s->following = false;	/* armed, idle, or refused */
		return err != 0;
	}
	if (clock_monotonic_ns() >= s->until) {
		/* an image without the runtime (a static program, a set-uid
		 * one whose loader ignores LD_PRELOAD) */
		s->following = false;
		snprintf(e->note, sizeof(e->note), "pid %d: its exec()ed image has no fay "
			 "runtime after %d ms: not traced", (int)s->pid, e->opts.inline_wait_ms);
		return true;
	}
	return false;
}

int engine_inl_fallback(struct engine *e, char *note, size_t len)
{
	int fd;

	if (!e->inl || !e->inl_refused || e->inl->fd < 0)
		return -1;
	fd = e->inl->fd;
	e->inl->fd = -1;
	e->inl->armed = false;
	snprintf(note, len, "%s", e->note);
	return fd;
}

void engine_inl_adopt(struct engine *e, int fd, const char *note)
{
	engine_inl_release(e);
	e->inl_hold = fd + 1;
	snprintf(e->note, sizeof(e->note), "%s", note);
}

void engine_inl_detach(struct engine *e)
{
	struct engine_inl *s = e->inl;
	struct inl_reply r;
	struct inl_hdr h;

	if (s && s->idle) {
		close(s->fd);
		s->fd = -1;
		s->idle = false;
	}
	inline_hdr(&h, INL_DETACH, sizeof(h), 0);
	for (int i = 0; s && i < KID_MAX; i++)
		if (s->kids[i].pid) {
			(void)call(s->kids[i].fd, &h, sizeof(h), NULL, 0, &r);
			close(s->kids[i].fd);
			s->kids[i].fd = -1;
			s->kids[i].pid = 0;
		}
	if (!s || !s->armed)
		return;
	/* a process that exited has nothing left to restore */
	(void)call(s->fd, &h, sizeof(h), NULL, 0, &r);
	s->armed = false;
	close(s->fd);
	s->fd = -1;
}

void engine_inl_free(struct engine *e)
{
	engine_inl_release(e);
	if (e->inl)	/* (a session's fay cleans up after killed processes) */
		inline_sweep_stale();
	/* (also when no session armed: a wrapper told NEXT that exited) */
	if (e->opts.inline_wait_ms > 0 && e->nprogs > 0 && e->progs[0].popts.pid > 0)
		drop_next_mark(e->progs[0].popts.pid);
	if (!e->inl)
		return;
	engine_inl_detach(e);
	if (e->inl->fd >= 0)
		close(e->inl->fd);
	set_free(&e->inl->w);
	free(e->inl);
	e->inl = NULL;
}
