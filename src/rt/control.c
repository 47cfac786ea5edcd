// SPDX-License-Identifier: MIT
/*
 * The runtime's control channel (common/inline_wire.h, docs/ABI.md): the
 * library constructor binds INLINE_RUN_DIR/PID.sock (directory 0700,
 * socket 0600: root, or the process's own user when it cannot create the
 * directory otherwise) and starts one thread, with every signal but
 * SIGTRAP blocked so the program's signals never land on it, that serves
 * one fay session at a time (untraced: its calls of patched functions
 * run no program).  SIGTRAP stays open because the thread calls libc,
 * whose functions may be the sites being written: a thread meeting the
 * int3 of a live write with SIGTRAP blocked kills the process (so a
 * session whose threads keep it blocked is refused: a uprobe in auto
 * mode).  Nothing fay sends is trusted: the programs are verified
 * again here, every map memfd must have the exact size its definition
 * gives, and a site must lie inside an executable segment of a loaded
 * object.  A session ends with DETACH, when its socket closes (fay
 * killed), or when another fay connects while the session's fay is
 * dying (SO_PEERCRED's pid gone, exiting or SIGKILLed: it is not kept
 * waiting for the kernel to close the dead one's files): every site is restored and the session freed once no handler
 * can be inside it (rt_unpublish()).
 *
 * FAY_INLINE_HOLD=1 in the environment (fay run sets it) holds the
 * constructor, so the program's main() waits until the first session
 * armed its probes (or ended; at most 30 s); it is removed from the
 * environment so children do not hold.  INL_NEXT (fay run on a wrapper
 * that execs the program) sets it to the process's pid: the image the
 * process execs next holds again, a forked child's does not: fay run
 * sends it in every image it arms (the image holds only while the mark
 * INLINE_RUN_DIR/PID.next says a fay follows it), so that it follows each exec (the
 * session's socket hangs up, fay connects to the next image's runtime
 * and arms its sites there with the same maps).  INL_GO lets a held
 * image that maps no site run on, its session open and idle.  fork:
 * the child's handlers are inert (the sockets were never in its table);
 * exec: the runtime goes with the image (a preloaded one starts afresh in
 * the new image).
 *
 * The thread's descriptors are out of the program's way.  The
 * constructor makes the listening socket (the lowest free number for a
 * moment) and moves it near the descriptor limit (F_DUPFD_CLOEXEC); the
 * thread then unshares its file table (unshare(CLONE_FILES)), closes the
 * copies of the program's descriptors but that socket, and puts
 * /dev/null at 0, 1 and 2.  What it makes after (a blocking accept4(),
 * which reserves its number before it waits, the session's socket, the
 * memfds fay sends, the files it reads) is in its own table: a program
 * that closes its stdout and opens a file expecting descriptor 1, or
 * dup2()s onto 2, gets what it would without fay (with the table shared,
 * an accept4() waiting on the lowest free number made dash's `echo x > f`
 * fail with EBADF and its `exec 2>f` with EBUSY), and a program's
 * close_range() closes only the listening socket's copy in its table.
 * The constructor does not wait for the thread (a process whose runtime
 * fay loads at its entry is held stopped, its new thread with it).
 * Where a seccomp filter is in force (a filter may refuse unshare(), or
 * kill for it), the table stays shared: the thread waits in poll()
 * rather than in accept4() and moves what it accepts near the limit.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/procstat.h"
#include "common/unwind_table.h"
#include "rt/rt.h"

static int lfd = -1, sfd = -1;
static ino_t lfd_ino;		/* its socket's inode (in_child()) */
static pid_t owner;
static char path[108];
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static bool holding;
static int tsc_err = -ENOTSUP;	/* vm_tsc_init()'s: 0 when probes read the TSC */

static union {
	struct inl_hdr h;
	char buf[INLINE_MAX_MSG];
} in;

static void release_hold(void)
{
	pthread_mutex_lock(&hold_lock);
	holding = false;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_lock);
}

/* INLINE_RUN_DIR/PID.next: the mark that a fay follows this process
 * into its next image (INL_NEXT made it); buf of len bytes. */
static void next_mark(char *buf, size_t len)
{
	snprintf(buf, len, "%s/%d.next", INLINE_RUN_DIR, (int)getpid());
}

/* INL_NEXT: the mark that a fay follows this process's next image
 * (INLINE_RUN_DIR/PID.next, holding that fay's pid as the session's
 * SO_PEERCRED gives it, 0 when unknown): the image this process execs
 * holds too (a forked child's image has another pid: it does not), only
 * while the mark is there and that fay lives (rt_init()).  Nothing is
 * written into the environment: the program would see it (python's
 * os.environ: one more entry, one more call of a function a query
 * counts).  A session that ends while this image lives (fay detached,
 * fell back to a uprobe, exited) removes it (drop_next()); an exec ends
 * it without a word, the mark stays for the next image. */
static void next_image(void)
{
	struct ucred cr = { 0 };
	socklen_t cl = sizeof(cr);
	char mark[108], line[24];
	int fd, n;

	if (getsockopt(sfd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) || cr.pid < 0)
		cr.pid = 0;
	n = snprintf(line, sizeof(line), "%d\n", (int)cr.pid);
	pthread_mutex_lock(&hold_lock);
	if (holding) {
		next_mark(mark, sizeof(mark));
		fd = open(mark, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			if (write(fd, line, (size_t)n) != n)
				(void)ftruncate(fd, 0);	/* (read as 0: unknown) */
			close(fd);
		}
	}
	pthread_mutex_unlock(&hold_lock);
}

/* The session ended while this image lives: no fay follows its exec. */
static void drop_next(void)
{
	char mark[108];

	next_mark(mark, sizeof(mark));
	unlink(mark);
}

static int reply(int fd, int status, uint32_t nslots, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int reply(int fd, int status, uint32_t nslots, const char *fmt, ...)
{
	struct inl_reply r;
	va_list ap;

	memset(&r, 0, sizeof(r));
	inline_hdr(&r.h, INL_REPLY, sizeof(r), 0);
	r.status = status;
	r.pid = (uint32_t)getpid();
	r.nslots = nslots;
	va_start(ap, fmt);
	vsnprintf(r.msg, sizeof(r.msg), fmt, ap);
	va_end(ap);
	return inline_send(fd, &r, sizeof(r), NULL, 0);
}

struct exec_range {
	uint64_t lo, hi;
	bool ok;
};

static int in_exec_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct exec_range *r = arg;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t a = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && r->lo >= a &&
		    r->hi <= a + ph->p_memsz) {
			r->ok = true;
			return 1;
		}
	}
	return 0;
}

struct site_arg {
	struct patch_site *ps;
	const struct inl_site *info;
	bool loaded;
};

/* Under the loader's lock (dl_iterate_phdr holds it: no dlclose can
 * unmap the object meanwhile): restore the site if its object is still
 * loaded and the bytes are still this site's jump. */
static int disarm_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct site_arg *a = arg;
	uint64_t room = a->info->room > a->info->size ? a->info->room : a->info->size;
	struct exec_range r = { a->info->addr, a->info->addr + room, false };

	in_exec_segment(info, size, &r);
	if (!r.ok)
		return 0;
	a->loaded = true;
	if (patch_site_ours(a->ps))
		patch_site_disarm(a->ps);
	return 1;
}

/* Restore every site whose object is still loaded; a site of an object
 * the program dlclose()d has nothing left to restore (and another object
 * may be mapped there now: nothing is written). */
static void disarm_all(struct rt_session *s)
{
	for (int i = 0; i < s->nsites; i++) {
		struct site_arg a = { s->sites[i], &s->info[i], false };

		dl_iterate_phdr(disarm_loaded, &a);
		if (!a.loaded || patch_site_ours(a.ps))
			patch_site_forget(a.ps);
	}
}

/* End session s: its sites restored, then freed once no handler can be
 * inside it (rt_unpublish()); kept, never freed, when a slot stayed busy. */
static void session_free(struct rt_session *s)
{
	if (!s)
		return;
	rt_later_end(s);
	rt_patch_lock();
	disarm_all(s);
	rt_patch_unlock();
	rt_ustack_tables(NULL);	/* before the wait: no walk reads it after */
	if (!rt_unpublish())
		return;		/* a handler may still run its programs: kept */
	for (int i = 0; i < s->nunw; i++)
		munmap(s->unw[i], s->unw_len[i]);
	for (int i = 0; i < s->nsites; i++)
		patch_site_free(s->sites[i]);
	vm_prog_free(s->entry);
	vm_prog_free(s->exit);
	for (int i = 0; i < s->nmaps; i++)
		vm_map_free(s->maps[i]);
	free(s);
}

/* The probes' clock, for the last line of a SITES or LATER reply. */
static const char *clock_name(void)
{
	return tsc_err ? "clock_gettime (no invariant TSC: constant_tsc, nonstop_tsc)" : "TSC";
}

/* Free the sites SITES took. */
static void drop_sites(struct rt_session *s)
{
	for (int i = 0; i < s->nsites; i++)
		patch_site_free(s->sites[i]);
	s->nsites = 0;
}

static int do_sites(struct rt_session *s, size_t len)
{
	const struct inl_site *v = (const void *)(in.buf + sizeof(in.h));
	uint32_t n = in.h.count;
	char msg[3072] = "";
	size_t off = 0;
	int bad = 0;

	if (s->nsites || !n || n > INLINE_MAX_SITES || len != sizeof(in.h) + n * sizeof(*v))
		return reply(sfd, -EPROTO, 0, "SITES: %u sites in %zu bytes (at most %d, once)",
			     n, len, INLINE_MAX_SITES);
	for (uint32_t i = 0; i < n; i++) {
		struct inl_site si = v[i];
		uint64_t room = si.room > si.size ? si.room : si.size;
		struct exec_range r = { si.addr, si.addr + room, false };
		char why[256];
		struct patch_site *ps = NULL;

		si.name[sizeof(si.name) - 1] = '\0';
		if (!si.size || room > (1u << 24) || r.hi < r.lo)
			snprintf(why, sizeof(why), "a function of %llu bytes",
				 (unsigned long long)si.size);
		else if (dl_iterate_phdr(in_exec_segment, &r), !r.ok)
			snprintf(why, sizeof(why), "0x%llx..0x%llx is not in an executable "
				 "segment of an object loaded in process %d",
				 (unsigned long long)r.lo, (unsigned long long)r.hi, (int)getpid());
		else
			ps = patch_site_new_room((void *)(uintptr_t)si.addr, si.size, room, why,
						 sizeof(why));
		if (!ps) {
			bad++;
			off += (size_t)snprintf(msg + off, sizeof(msg) - off, "%s: %s\n",
						si.name, why);
			if (off >= sizeof(msg))
				off = sizeof(msg) - 1;
			continue;
		}
		s->sites[s->nsites] = ps;
		s->info[s->nsites++] = si;
	}
	if (bad) {
		drop_sites(s);
		return reply(sfd, -EINVAL, 0, "%s", msg);
	}
	/* a thread that would make a write kill the process or fail: a
	 * uprobe in auto mode */
	for (int i = 0; i < s->nsites; i++) {
		char why[512];

		if (patch_site_hazard(s->sites[i], why, sizeof(why))) {
			const char *name = s->info[i].name;

			drop_sites(s);
			return reply(sfd, -EAGAIN, 0, "%s: %s", name, why);
		}
	}
	off = 0;
	for (int i = 0; i < s->nsites; i++) {
		off += (size_t)snprintf(msg + off, sizeof(msg) - off, "%s: %s%s\n",
					s->info[i].name, patch_site_first(s->sites[i]),
					patch_site_nop(s->sites[i]) ? " (a nop)" : "");
		if (off >= sizeof(msg))
			off = sizeof(msg) - 1;
	}
	if (off)
		off--;		/* the last line's newline */
	snprintf(msg + off, sizeof(msg) - off, "; clock: %s\n", clock_name());
	return reply(sfd, 0, RT_MAX_SLOTS, "%s", msg);
}

/* LATER: sites of shared objects by file, armed whenever loaded (later.c). */
static int do_later(struct rt_session *s, size_t len)
{
	const struct inl_later *v = (const void *)(in.buf + sizeof(in.h));
	uint32_t n = in.h.count;
	char msg[3072] = "";
	size_t off = 0;
	int bad = 0;

	if (s->nlater || s->narmed || !n || n > INLINE_MAX_SITES ||
	    len != sizeof(in.h) + n * sizeof(*v))
		return reply(sfd, -EPROTO, 0, "LATER: %u sites in %zu bytes (at most %d, once, "
			     "before ARM)", n, len, INLINE_MAX_SITES);
	for (uint32_t i = 0; i < n; i++) {
		char why[256];

		if (!rt_later_add(s, &v[i], why, sizeof(why)))
			continue;
		bad++;
		off += (size_t)snprintf(msg + off, sizeof(msg) - off, "%.63s: %s\n",
					v[i].name, why);
		if (off >= sizeof(msg))
			off = sizeof(msg) - 1;
	}
	if (bad) {
		s->nlater = 0;
		return reply(sfd, -EINVAL, 0, "%s", msg);
	}
	off = rt_later_describe(s, msg, sizeof(msg));
	if (off)
		off--;		/* the last line's newline */
	snprintf(msg + off, sizeof(msg) - off, "; clock: %s\n", clock_name());
	return reply(sfd, 0, RT_MAX_SLOTS, "%s", msg);
}

static int do_maps(struct rt_session *s, size_t len, int *fds, int nfds)
{
	const uint32_t *hd = (const void *)(in.buf + sizeof(in.h));
	const struct inl_map *d = (const void *)(hd + 2);
	uint32_t n = in.h.count;
	int rc = 0;

	if (s->nmaps || !n || n > INLINE_MAX_MAPS || n != (uint32_t)nfds ||
	    len != sizeof(in.h) + 8 + n * sizeof(*d) || !hd[0] || hd[0] > INLINE_MAX_SLOTS ||
	    hd[1] >= hd[0])
		return reply(sfd, -EPROTO, 0, "MAPS: %u maps, %d memfds, %u slots from %u in "
			     "%zu bytes", n, nfds, len >= sizeof(in.h) + 8 ? hd[0] : 0,
			     len >= sizeof(in.h) + 8 ? hd[1] : 0, len);
	/* this process's window of the maps' slots (several processes
	 * feeding one query: each its own, from hd[1]), at most the
	 * slots it can give threads */
	s->nslots = hd[0] - hd[1] < RT_MAX_SLOTS ? hd[0] - hd[1] : RT_MAX_SLOTS;
	for (uint32_t i = 0; i < n; i++) {
		struct vm_map_def def = { d[i].type, d[i].key_size, d[i].value_size,
					  d[i].max_entries };

		s->maps[i] = vm_map_new_window(&def, hd[0], fds[i], hd[1]);
		if (!s->maps[i]) {
			rc = -errno;
			break;
		}
		s->nmaps++;
	}
	if (rc)
		return reply(sfd, rc, 0, "map %d: %s (a type or size this VM refuses, "
			     "or a memfd of another size)", s->nmaps, strerror(-rc));
	return reply(sfd, 0, s->nslots, "%d maps, %u slots", s->nmaps, s->nslots);
}

/* INL_UNWIND: the sealed memfd's table, mapped read-only and checked
 * whole (the walker trusts its indices), then published to the walker
 * (a walk running meanwhile goes on with the one it read: the older
 * tables stay mapped until the session ends) */
static int do_unwind(struct rt_session *s, size_t len, int *fds, int nfds)
{
	int seals = nfds == 1 ? fcntl(fds[0], F_GET_SEALS) : -1;
	struct stat st;
	char why[256];
	void *p;
	int rc;

	if (s->nunw == RT_UNWIND_TABLES)
		return reply(sfd, -ENOSPC, 0, "UNWIND: %d tables in this session already",
			     RT_UNWIND_TABLES);
	if (nfds != 1 || len != sizeof(in.h) || seals < 0 ||
	    (seals & (F_SEAL_WRITE | F_SEAL_SHRINK)) != (F_SEAL_WRITE | F_SEAL_SHRINK) ||
	    fstat(fds[0], &st) || st.st_size <= 0 || st.st_size > (256 << 20))
		return reply(sfd, -EPROTO, 0, "UNWIND: %d memfds, seals %#x, or a size out "
			     "of bounds", nfds, seals < 0 ? 0 : seals);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fds[0], 0);
	if (p == MAP_FAILED)
		return reply(sfd, -errno, 0, "UNWIND: mmap: %s", strerror(errno));
	rc = unw_check(p, (size_t)st.st_size, why, sizeof(why));
	if (rc) {
		munmap(p, (size_t)st.st_size);
		return reply(sfd, rc, 0, "UNWIND: a bad table: %s", why);
	}
	s->unw[s->nunw] = p;
	s->unw_len[s->nunw++] = (size_t)st.st_size;
	rt_ustack_tables(p);
	return reply(sfd, 0, 0, "unwind table: %u modules, %u rows", ((const struct unw_hdr *)p)->nmods,
		     ((const struct unw_hdr *)p)->nrows);
}

static int do_prog(struct rt_session *s, size_t len)
{
	const uint32_t *hd = (const void *)(in.buf + sizeof(in.h));
	const struct bpf_insn *insns = (const void *)(hd + 2);
	uint32_t n = in.h.count;
	char why[512];
	struct vm_prog *p;
	int rc;

	if (!s->nmaps || hd[0] > 1 || (hd[0] ? s->exit : s->entry) || !n ||
	    n > VM_MAX_INSNS || len != sizeof(in.h) + 8 + n * sizeof(*insns))
		return reply(sfd, -EPROTO, 0, "PROG: role %u, %u insns in %zu bytes",
			     hd[0], n, len);
	/* the context is what the patcher gives the handlers: nothing else */
	if (hd[1] != sizeof(struct patch_regs))
		return reply(sfd, -EINVAL, 0, "PROG: a context of %u bytes (%zu here)",
			     hd[1], sizeof(struct patch_regs));
	p = vm_prog_new(insns, n, s->maps, (size_t)s->nmaps, sizeof(struct patch_regs),
			why, sizeof(why));
	if (!p)
		return reply(sfd, -EINVAL, 0, "the %s program: %s", hd[0] ? "exit" : "entry", why);
	vm_prog_set_now(p, vm_tsc_now);	/* every thread's env.now (probe.c) */
	rc = vm_prog_jit(p);	/* the interpreter runs it otherwise */
	if (!rc)	/* a signal frame over it ends a stack walk */
		rt_ustack_note_code((uint64_t)(uintptr_t)vm_prog_code(p), vm_prog_jit_size(p));
	/* the handlers run it without saving the vector registers when it
	 * touches none (vm_prog_calls_out()) */
	s->fast[hd[0]] = !rc && !vm_prog_calls_out(p) && !tsc_err ? vm_prog_code(p) : NULL;
	if (hd[0])
		s->exit = p;
	else
		s->entry = p;
	return reply(sfd, 0, s->nslots, "%s program verified, %s", hd[0] ? "exit" : "entry",
		     rc ? "interpreted" : "compiled");
}

static int do_arm(struct rt_session *s)
{
	char why[256];

	if ((!s->nsites && !s->nlater) || !s->entry || s->narmed || s->watching)
		return reply(sfd, -EPROTO, 0, "ARM: sites, maps and an entry program first");
	rt_span_resolve();
	rt_publish(s);
	rt_patch_lock();
	for (; s->narmed < s->nsites; s->narmed++) {
		int rc = patch_site_arm_flags(s->sites[s->narmed], rt_on_entry,
					      s->exit ? rt_on_exit : NULL,
					      rt_site_arg(s, s->info[s->narmed].cookie),
					      PATCH_HANDLERS_KEEP_VECTORS, why, sizeof(why));

		if (rc) {
			for (int i = 0; i < s->narmed; i++)
				patch_site_disarm(s->sites[i]);
			rt_patch_unlock();
			rt_unpublish();
			rc = reply(sfd, rc, 0, "%s: %s", s->info[s->narmed].name, why);
			s->narmed = 0;
			return rc;
		}
		rt_ustack_note(s->sites[s->narmed]);
	}
	rt_patch_unlock();
	if (rt_later_watch(s, why, sizeof(why))) {
		rt_patch_lock();
		for (int i = 0; i < s->narmed; i++)
			patch_site_disarm(s->sites[i]);
		rt_patch_unlock();
		s->narmed = 0;
		rt_unpublish();
		return reply(sfd, -EINVAL, 0, "%s", why);
	}
	if (s->nlater)
		return reply(sfd, 0, s->nslots, "%d sites armed, %d of objects loaded later "
			     "(%lu armed now)", s->narmed, s->nlater, s->loads);
	return reply(sfd, 0, s->nslots, "%d sites armed", s->narmed);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Whether the fay process on the session's socket is gone or on its way
 * out (killed: its socket hangs up only once the kernel closes its
 * files, after it freed its memory, which takes a while for a large
 * one).  false when it cannot be known (a peer in a pid namespace this
 * process does not see: pid 0). */
static bool peer_gone(int fd)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) || cr.pid <= 0)
		return false;
	/* again 20 ms later: between taking its SIGKILL and do_exit()'s
	 * first steps a killed process shows neither */
	for (int i = 0; i < 3; i++) {
		struct timespec d = { 0, 10 * 1000000 };

		if (proc_exiting(cr.pid) == 1)
			return true;
		if (i < 2)
			nanosleep(&d, NULL);
	}
	return false;
}

/* Serve one session until DETACH or end of file; the TSC clock is
 * brought back to CLOCK_MONOTONIC about once a second meanwhile. */
static void serve(void)
{
	struct rt_session *s = calloc(1, sizeof(*s));
	struct pollfd pf[2] = { { sfd, POLLIN, 0 }, { lfd, POLLIN, 0 } };
	uint64_t synced = mono_ms();

	if (!tsc_err)
		vm_tsc_sync();
	if (!s) {
		reply(sfd, -ENOMEM, 0, "out of memory");
		return;
	}
	for (;;) {
		int fds[INLINE_MAX_MAPS], nfds = INLINE_MAX_MAPS;
		ssize_t n;

		int np = poll(pf, 2, 1000);

		if (!tsc_err && mono_ms() - synced >= 1000) {
			vm_tsc_sync();
			synced = mono_ms();
		}
		if (np <= 0)
			continue;
		/* one session at a time; a connection that comes while this
		 * one is hanging up waits for it to end (fay run reconnects
		 * at once after INL_NEXT: inline_run_exec.sh), and so does one
		 * that comes while this one's fay is dying (kill -9: its socket
		 * hangs up only when the kernel closes its files): this
		 * session ends, the listener accepts the new one */
		if ((pf[1].revents & POLLIN) && !(pf[0].revents & (POLLHUP | POLLERR)) &&
		    peer_gone(sfd))
			break;
		if ((pf[1].revents & POLLIN) && !(pf[0].revents & (POLLHUP | POLLERR))) {
			int other = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (other >= 0) {
				struct pollfd op = { other, POLLIN, 0 };
				char b[sizeof(struct inl_hdr)];

				/* answer its first request (closing on unread data
				 * would reset the connection before it reads this) */
				if (poll(&op, 1, 1000) == 1)
					(void)!recv(other, b, sizeof(b), MSG_DONTWAIT);
				reply(other, -EBUSY, 0, "process %d is traced by another fay "
				      "query", (int)getpid());
				close(other);
			}
		}
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = inline_recv(sfd, in.buf, sizeof(in.buf), fds, &nfds);
		if (n <= 0)
			break;		/* fay closed (or was killed): detach */
		if (in.h.type != INL_MAPS && in.h.type != INL_UNWIND)
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
		switch (in.h.type) {
		case INL_SITES:
			do_sites(s, (size_t)n);
			break;
		case INL_MAPS:
			do_maps(s, (size_t)n, fds, nfds);
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			break;
		case INL_PROG:
			do_prog(s, (size_t)n);
			break;
		case INL_UNWIND:
			do_unwind(s, (size_t)n, fds, nfds);
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			break;
		case INL_ARM:
			do_arm(s);
			release_hold();
			break;
		case INL_LATER:
			do_later(s, (size_t)n);
			break;
		case INL_NEXT:
			next_image();
			reply(sfd, 0, 0, "the next image holds");
			break;
		case INL_GO:
			release_hold();
			reply(sfd, 0, 0, "runs on, unarmed");
			break;
		case INL_PID: {
			const uint32_t *w = (const void *)(in.buf + sizeof(in.h));
			uint64_t cg;

			if (n != sizeof(in.h) + 16) {
				reply(sfd, -EPROTO, 0, "PID: %zd bytes", n);
				break;
			}
			memcpy(&cg, w + 2, 8);
			rt_probe_ids(w[0], cg);
			reply(sfd, 0, 0, "pid %u, cgroup %llu", w[0], (unsigned long long)cg);
			break;
		}
		case INL_DETACH: {
			unsigned long loads = s->loads, unloads = s->unloads;
			unsigned long refused = s->refused;
			char err[sizeof(s->later_err)];

			snprintf(err, sizeof(err), "%s", s->later_err);
			session_free(s);
			s = NULL;
			if (loads || refused)
				reply(sfd, 0, 0, "detached; objects loaded later: armed %lu times, "
				      "unloaded %lu times, refused %lu times%s%s", loads, unloads,
				      refused, refused ? ": " : "", err);
			else
				reply(sfd, 0, 0, "detached");
			return;
		}
		default:
			reply(sfd, -EPROTO, 0, "unknown message type %u", in.h.type);
		}
	}
	session_free(s);
}

/* Whether this thread runs under a seccomp filter ("Seccomp:" of its
 * status not 0; unknown: yes). */
static bool seccomp_on(void)
{
	char buf[4096], *p;
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	p = strstr(buf, "\nSeccomp:");
	return !p || strtol(p + 10, NULL, 10) != 0;
}

/* true when the table is the program's too (fd_out() moves what the
 * thread makes out of its way) */
static bool shared_files = true;

/* The thread's own file table, holding nothing of the program's but
 * /dev/null at 0, 1 and 2, and keep (the listening socket, made by the
 * constructor: see the top of this file); on failure, or under seccomp,
 * the shared one. */
static void own_files(int keep)
{
	int fd;

	if (seccomp_on() || unshare(CLONE_FILES))
		return;
	shared_files = false;
	/* the copies of the program's descriptors: a pipe's end kept
	 * here would keep its reader from seeing the end */
	if ((keep > 0 && syscall(SYS_close_range, 0u, (unsigned)keep - 1, 0u)) ||
	    syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u)) {
		struct rlimit rl;
		long hi = getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur > 1u << 20 ?
			  1 << 20 : (long)rl.rlim_cur;

		for (long i = 0; i < hi; i++)
			if (i != keep)
				close((int)i);
	}
	for (int i = 0; i < 3; i++) {
		fd = open("/dev/null", O_RDWR);
		if (fd > 2 && fd != keep)
			close(fd);
	}
}

/* fd, or (the table shared) a copy of it above the program's
 * descriptors, near the soft limit, with fd closed. */
static int fd_out(int fd)
{
	struct rlimit rl;
	int hi;

	if (!shared_files || fd < 0 || getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur < 128)
		return fd;
	hi = fcntl(fd, F_DUPFD_CLOEXEC, (int)(rl.rlim_cur > 65536 ? 65536 - 64 :
					      rl.rlim_cur - 64));
	if (hi < 0)
		return fd;
	close(fd);
	return hi;
}

static void *listener(void *arg)
{
	rt_probe_untraced();	/* fay's own calls are not the program's */
	own_files(lfd);
	tsc_err = vm_tsc_init();	/* ~20 ms, before the first session */
	for (;;) {
		struct pollfd pf = { lfd, POLLIN, 0 };

		/* with the table shared, a blocking accept4() would hold the
		 * lowest free number while it waits */
		if (shared_files && poll(&pf, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (sfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
				continue;
			break;
		}
		sfd = fd_out(sfd);
		serve();
		close(sfd);
		sfd = -1;
		drop_next();
		release_hold();		/* a session that ended without arming */
	}
	return NULL;
}

/* Whether fd is the file of inode ino. */
static bool same_file(int fd, ino_t ino)
{
	struct stat st;

	return !fstat(fd, &st) && st.st_ino == ino;
}

static void in_child(void)
{
	/* the parent's session and its maps are not ours */
	patch_live_child();	/* a write under way in another thread: finish it */
	rt_probe_inert();
	rt_later_child();
	/* the child's table is the forking thread's: the listening
	 * socket's copy is there (closed, if the number is still that
	 * socket's), the session's only when the table was shared */
	if (lfd >= 0 && same_file(lfd, lfd_ino))
		close(lfd);
	if (sfd >= 0 && shared_files)
		close(sfd);
	lfd = sfd = -1;
}

static int open_socket(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	mode_t old;

	if (mkdir("/run/fay", 0755) && errno != EEXIST)
		return -errno;
	if (mkdir(INLINE_RUN_DIR, 0700) && errno != EEXIST)
		return -errno;
	inline_sock_path(owner, path, sizeof(path));
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	lfd = fd_out(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
	if (lfd < 0)
		return -errno;
	unlink(path);		/* a stale one of an earlier process with this pid */
	old = umask(0177);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 4)) {
		int err = -errno;

		umask(old);
		close(lfd);
		lfd = -1;
		return err;
	}
	umask(old);
	return 0;
}

/* The mark at path (next_image()): true when it was there (it is gone
 * now), *fay the pid it names (0: unknown). */
static bool read_mark(const char *path, pid_t *fay)
{
	char line[24] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	*fay = 0;
	if (fd < 0)
		return false;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n > 0)
		*fay = (pid_t)atoi(line);
	return !unlink(path);
}

__attribute__((constructor)) static void rt_init(void)
{
	const char *hold = getenv("FAY_INLINE_HOLD");
	char mark[108];
	bool want_hold;
	pid_t fay = 0;		/* the fay the hold waits for (0: unknown) */
	pid_t parent = 0;	/* fay when it is the parent (fay run), else 0 */
	sigset_t all, orig;
	pthread_t th;
	int err;

	/* "1" (fay run: fay is the parent), or an image exec()ed after
	 * INL_NEXT while its fay follows (the mark of this pid, with that
	 * fay's pid: next_image()); a fay that is gone holds nothing */
	next_mark(mark, sizeof(mark));
	if (hold && (!strcmp(hold, "1") || !strncmp(hold, "1:", 2))) {
		/* "1:PID" (fay run: PID is fay, the parent that forked this
		 * process); "1" from an older fay: the parent is fay */
		fay = hold[1] ? (pid_t)atoi(hold + 2) : getppid();
		parent = fay;
		/* a fay that died before this constructor ran left this
		 * process to another parent: nothing to wait for */
		want_hold = fay > 0 && getppid() == fay;
	} else {
		want_hold = read_mark(mark, &fay);
	}
	if (want_hold && fay > 0 && proc_exiting(fay) == 1)
		want_hold = false;
	if (hold)
		unsetenv("FAY_INLINE_HOLD");
	owner = getpid();
	err = rt_probe_init();
	err = err ? : open_socket();
	if (!err) {
		struct stat st;

		lfd_ino = fstat(lfd, &st) ? 0 : st.st_ino;
		holding = want_hold;	/* before a session can start */
		pthread_atfork(NULL, NULL, in_child);
		/* every signal blocked but SIGTRAP: the thread meets the
		 * int3 of a site being written when it calls that function
		 * (libc's), and a blocked SIGTRAP raised by an int3 kills
		 * the process.  (Not waited for: a process held at its
		 * entry, its runtime loaded by fay, is stopped, and so is
		 * the thread until fay lets it go.) */
		sigfillset(&all);
		sigdelset(&all, SIGTRAP);
		pthread_sigmask(SIG_SETMASK, &all, &orig);
		err = -pthread_create(&th, NULL, listener, NULL);
		pthread_sigmask(SIG_SETMASK, &orig, NULL);
		if (err) {
			close(lfd);
			lfd = -1;
			unlink(path);
			holding = false;
			return;
		}
		pthread_detach(th);
	}
	if (err) {
		if (want_hold)
			fprintf(stderr, "libfay-probe: inline probes off: %s: %s\n", path[0] ?
				path : INLINE_RUN_DIR, strerror(-err));
		return;
	}
	if (want_hold) {
		/* at most 30 s, and not past the fay it waits for (killed, or
		 * stopped with Ctrl-C after this image read the mark; as the
		 * parent, gone when this process has another parent, also in
		 * a pid namespace that cannot see it): looked at every 250 ms */
		for (int slice = 0; slice < 120; slice++) {
			struct timespec until;
			bool on;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += 250 * 1000000L;
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			pthread_mutex_lock(&hold_lock);
			while (holding && pthread_cond_timedwait(&hold_cond, &hold_lock, &until) == 0)
				;
			on = holding;
			pthread_mutex_unlock(&hold_lock);
			if (!on || (fay > 0 && proc_exiting(fay) == 1) ||
			    (parent && getppid() != parent))
				break;
		}
	}
}

__attribute__((destructor)) static void rt_fini(void)
{
	/* (the mark of INL_NEXT stays: the destructor runs on the
	 * program's thread, whose libc calls may be probed; the mark of a
	 * pid holds an image of that pid only while the fay it names
	 * lives, and fay removes it when its run ends) */
	if (lfd >= 0 && getpid() == owner)
		unlink(path);
}
