// SPDX-License-Identifier: MIT
/*
 * Loading a library into a running process (inject.h).
 *
 * The call.  dlopen is found in the process's own libc (its file through
 * /proc/PID/root, its symbol's file offset mapped through /proc/PID/maps),
 * so the loader that runs is the one the process already uses.  The
 * chosen thread's registers get: rip = dlopen, rdi = the path written on
 * its stack below the red zone, rsi = RTLD_NOW, rsp pointing at a return
 * address of 0, orig_rax = -1 (so the kernel does not restart the system
 * call the thread was in while it runs our call).  dlopen returns to
 * address 0, the thread faults there, and that SIGSEGV stop is where fay
 * reads the handle and puts every register back (the fault is never
 * delivered).  A failed dlopen is followed by a second call, dlerror(),
 * for its reason.
 *
 * Safe points.  A thread stopped inside libc or the loader may hold one of
 * their locks (malloc's arena, the loader's, a FILE's); dlopen on it would
 * wait for itself.  Only a thread whose instruction pointer is outside
 * them, or that is blocked in a system call that holds none of them, is
 * used.  Threads are never all stopped: the others run on.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/procstat.h"
#include "probe/elfsym.h"
#include "probe/inject.h"
#include "probe/procroot.h"

#define INJ_SAFE_WAIT_MS	2000	/* to find a thread at a safe point */
#define INJ_CALL_WAIT_MS	10000	/* for dlopen (and its constructors) */
#define INJ_XSTATE_MAX		16384
#define INJ_MAX_AVOID		8
#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK	0x420a
#define PTRACE_SETSIGMASK	0x420b
#endif

struct target {
	pid_t pid;
	char libc[4200];		/* its libc, through /proc/PID/root */
	uint64_t dlopen, dlerror;	/* in the process */
	uint64_t avoid_lo[INJ_MAX_AVOID], avoid_hi[INJ_MAX_AVOID];
	int navoid;			/* libc's and the loader's code */
	/* the calls' return address: 0 (the call ends at its fault there),
	 * or a return stub (inject_library_at_entry(): STUB_*) */
	uint64_t back;
};

/* A thread stopped by us, as it was. */
struct saved {
	struct user_regs_struct regs;
	unsigned char xstate[INJ_XSTATE_MAX];
	struct iovec xiov;
	uint64_t sigmask;
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

int proc_map_addrs(pid_t pid, const char *path, const uint64_t *offs, size_t n,
		   uint64_t *addrs)
{
	char fn[64], line[4400];
	struct stat want;
	size_t found = 0;
	FILE *f;

	memset(addrs, 0, n * sizeof(*addrs));
	if (stat(path, &want))
		return -errno;
	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return -errno;
	while (found < n && fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, pgoff, ino;
		unsigned int maj, min;
		char perms[8];

		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &lo, &hi, perms, &pgoff,
			   &maj, &min, &ino) != 7 || perms[2] != 'x' || ino != want.st_ino)
			continue;
		for (size_t i = 0; i < n; i++)
			if (!addrs[i] && offs[i] >= pgoff && offs[i] < pgoff + (hi - lo)) {
				addrs[i] = lo + (offs[i] - pgoff);
				found++;
			}
	}
	fclose(f);
	return (int)(found < INT32_MAX ? found : INT32_MAX);
}

int proc_map_addr(pid_t pid, const char *path, uint64_t off, uint64_t *addr)
{
	int rc = proc_map_addrs(pid, path, &off, 1, addr);

	return rc < 0 ? rc : rc ? 0 : -ENOENT;
}

/* "libc.so.6", "libc-2.31.so"; "ld-linux-x86-64.so.2" */
static bool is_libc(const char *base)
{
	return !strncmp(base, "libc.so", 7) || (!strncmp(base, "libc-", 5) && strstr(base, ".so"));
}

static bool is_loader(const char *base)
{
	return !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld-2.", 5);
}

/* The process's libc and the code of libc and the loader. */
static int find_libc(struct target *t, char *err, size_t errlen)
{
	char fn[64], line[4400];
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)t->pid);
	f = fopen(fn, "re");
	if (!f)
		return fail(err, errlen, -errno, "pid %d: %s: %s", (int)t->pid, fn,
			    strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		char perms[8], *path = strchr(line, '/'), *base;

		if (!path || sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) != 3 ||
		    perms[2] != 'x')
			continue;
		path[strcspn(path, "\n")] = '\0';
		base = strrchr(path, '/') + 1;
		if (!is_libc(base) && !is_loader(base))
			continue;
		if (t->navoid < INJ_MAX_AVOID) {
			t->avoid_lo[t->navoid] = lo;
			t->avoid_hi[t->navoid++] = hi;
		}
		if (is_libc(base) && !t->libc[0] &&
		    proc_mapped_path(t->pid, line, t->libc, sizeof(t->libc)))
			snprintf(t->libc, sizeof(t->libc), "/proc/%d/root%s", (int)t->pid, path);
	}
	fclose(f);
	if (!t->libc[0])
		return fail(err, errlen, -ENOEXEC, "pid %d has no glibc mapped (a static or "
			    "non-glibc program): it cannot load fay's runtime", (int)t->pid);
	return 0;
}

/* sym's address in the process, from its libc's symbols. */
static int libc_sym(const struct target *t, const char *sym, uint64_t *addr)
{
	uint64_t off;
	int err = elf_func_offset(t->libc, sym, &off);

	return err ? err : proc_map_addr(t->pid, t->libc, off, addr);
}

/* ---- one thread ------------------------------------------------------------ */

/* Wait for tid's next stop; a signal that stops it on its way in is
 * passed on.  0 with *st, -ESRCH when it exited, -ETIMEDOUT. */
static int wait_stop(pid_t tid, int *st, int ms, bool pass_signals)
{
	uint64_t until = clock_monotonic_ns() + (uint64_t)ms * 1000000ull;

	for (;;) {
		pid_t r = waitpid(tid, st, __WALL | WNOHANG);

		if (r < 0)
			return -errno;
		if (r == 0) {
			if (clock_monotonic_ns() > until)
				return -ETIMEDOUT;
			usleep(200);
			continue;
		}
		if (WIFEXITED(*st) || WIFSIGNALED(*st))
			return -ESRCH;
		if (pass_signals && (*st >> 16) == 0 && WSTOPSIG(*st) != SIGTRAP) {
			ptrace(PTRACE_CONT, tid, 0, (void *)(long)WSTOPSIG(*st));
			continue;
		}
		return 0;
	}
}

/* Stop a seized thread (PTRACE_INTERRUPT). */
static int stop_thread(pid_t tid)
{
	int st;

	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0))
		return -errno;
	return wait_stop(tid, &st, 1000, true);
}

/* System calls a thread blocks in without holding a lock of libc's. */
static bool safe_syscall(long nr)
{
	static const long ok[] = {
		SYS_nanosleep, SYS_clock_nanosleep, SYS_pause, SYS_poll, SYS_ppoll,
		SYS_select, SYS_pselect6, SYS_epoll_wait, SYS_epoll_pwait, SYS_read,
		SYS_readv, SYS_recvfrom, SYS_recvmsg, SYS_accept, SYS_accept4, SYS_wait4,
		SYS_waitid, SYS_rt_sigtimedwait, SYS_rt_sigsuspend, SYS_futex,
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (nr == ok[i])
			return true;
	return false;
}

static bool safe_point(const struct target *t, const struct user_regs_struct *r)
{
	if ((long)r->orig_rax >= 0)
		return safe_syscall((long)r->orig_rax);
	for (int i = 0; i < t->navoid; i++)
		if (r->rip >= t->avoid_lo[i] && r->rip < t->avoid_hi[i])
			return false;
	return true;
}

static int save(pid_t tid, struct saved *s)
{
	s->xiov.iov_base = s->xstate;
	s->xiov.iov_len = sizeof(s->xstate);
	if (ptrace(PTRACE_GETREGS, tid, 0, &s->regs) ||
	    ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &s->xiov) ||
	    ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(s->sigmask), &s->sigmask))
		return -errno;
	return 0;
}

static int restore(pid_t tid, struct saved *s)
{
	if (ptrace(PTRACE_SETREGS, tid, 0, &s->regs) ||
	    ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &s->xiov) ||
	    ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(s->sigmask), &s->sigmask))
		return -errno;
	return 0;
}

/* A return stub's system call (its end, seen with PTRACE_SYSCALL): the
 * offset after it, and its number (rt_sigprocmask). */
#define STUB_MARK	40
#define STUB_NR		14

/*
 * Call fn(a0, a1) on stopped thread tid with stack pointer sp (its word
 * is the return address: 0, or the stub back); *ret gets rax.  0,
 * -EFAULT (it faulted elsewhere: *ret is the address), -ESRCH,
 * -ETIMEDOUT.  *sig: a stop signal that arrived meanwhile, to deliver
 * after.  With a stub the thread runs under PTRACE_SYSCALL and the call
 * ends at the stub's system call (rax kept in rbx by the stub).
 */
static int call(pid_t tid, const struct saved *s, uint64_t fn, uint64_t a0, uint64_t a1,
		uint64_t sp, uint64_t back, uint64_t *ret, int *sig)
{
	struct user_regs_struct r = s->regs;
	long how = back ? PTRACE_SYSCALL : PTRACE_CONT;
	int st, err;

	r.rip = fn;
	r.rdi = a0;
	r.rsi = a1;
	r.rax = 0;
	r.orig_rax = (unsigned long long)-1;
	r.rsp = sp;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r) || ptrace(how, tid, 0, 0))
		return -errno;
	for (;;) {
		err = wait_stop(tid, &st, INJ_CALL_WAIT_MS, false);
		if (err)
			return err;
		if (back && (st >> 16) == 0 && WSTOPSIG(st) == (SIGTRAP | 0x80)) {
			if (ptrace(PTRACE_GETREGS, tid, 0, &r))
				return -errno;
			if (r.rip == back + STUB_MARK && (long)r.orig_rax == STUB_NR) {
				*ret = r.rbx;
				return 0;
			}
			ptrace(how, tid, 0, 0);
			continue;
		}
		if ((st >> 16) == PTRACE_EVENT_STOP || WSTOPSIG(st) == SIGTRAP) {
			ptrace(how, tid, 0, 0);
			continue;
		}
		if (WSTOPSIG(st) == SIGSEGV || WSTOPSIG(st) == SIGBUS ||
		    WSTOPSIG(st) == SIGILL || WSTOPSIG(st) == SIGFPE)
			break;
		if (!*sig)
			*sig = WSTOPSIG(st);	/* SIGSTOP and the like: later */
		ptrace(how, tid, 0, 0);
	}
	if (ptrace(PTRACE_GETREGS, tid, 0, &r))
		return -errno;
	if (WSTOPSIG(st) != SIGSEGV || r.rip != 0) {
		*ret = r.rip;
		return -EFAULT;
	}
	*ret = r.rax;
	return 0;
}

/* dlopen(lib) (and dlerror() when it failed) on stopped thread tid. */
static int load_on(const struct target *t, pid_t tid, const char *lib, int *sig, char *err,
		   size_t errlen)
{
	struct saved *s = malloc(sizeof(*s));
	char memfn[64], why[512] = "";
	size_t len = strlen(lib) + 1;
	uint64_t str, sp, handle = 0, back = t->back;
	int fd, rc;

	if (!s)
		return -ENOMEM;
	rc = save(tid, s);
	if (rc) {
		free(s);
		return fail(err, errlen, rc, "pid %d: thread %d: its registers: %s",
			    (int)t->pid, (int)tid, strerror(-rc));
	}
	/* below the red zone, 16-byte aligned at the call */
	str = (s->regs.rsp - 128 - 512 - len) & ~15ull;
	sp = ((str - 16) & ~15ull) - 8;
	snprintf(memfn, sizeof(memfn), "/proc/%d/mem", (int)tid);
	fd = open(memfn, O_RDWR | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, lib, len, (off_t)str) != (ssize_t)len ||
	    pwrite(fd, &back, sizeof(back), (off_t)sp) != sizeof(back)) {
		rc = -errno;
		fail(err, errlen, rc, "pid %d: writing its stack: %s", (int)t->pid,
		     strerror(errno));
		goto out;
	}
	rc = call(tid, s, t->dlopen, str, 2 /* RTLD_NOW */, sp, t->back, &handle, sig);
	if (rc == -EFAULT)
		fail(err, errlen, rc, "pid %d: dlopen(%s) faulted at %#llx in it (it was "
		     "stopped and put back as it was)", (int)t->pid, lib,
		     (unsigned long long)handle);
	else if (rc)
		fail(err, errlen, rc, "pid %d: dlopen(%s) in it: %s", (int)t->pid, lib,
		     strerror(-rc));
	else if (!handle) {
		uint64_t msg = 0;

		if (t->dlerror && !call(tid, s, t->dlerror, 0, 0, sp, t->back, &msg, sig) &&
		    msg) {
			ssize_t n = pread(fd, why, sizeof(why) - 1, (off_t)msg);

			why[n > 0 ? n : 0] = '\0';
		}
		rc = fail(err, errlen, -ENOENT, "pid %d: dlopen(%s) failed: %s", (int)t->pid,
			  lib, why[0] ? why : "no reason given");
	}
out:
	if (fd >= 0)
		close(fd);
	if (rc == -ETIMEDOUT)
		stop_thread(tid);	/* still in dlopen: put back as it was */
	if (restore(tid, s) && !rc)
		rc = fail(err, errlen, -EIO, "pid %d: thread %d: its registers could not be "
			  "put back: %s", (int)t->pid, (int)tid, strerror(errno));
	free(s);
	return rc;
}

/* ---- may fay load it? -------------------------------------------------------- */

int inject_check(pid_t pid, char *why, size_t len)
{
	unsigned long long scope = 0, cap = 0, uids[3], gids[3], tracer = 0;
	bool can_ptrace, same;
	struct target *t;
	FILE *f;
	int rc;

	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%llu", &scope) != 1)
			scope = 0;
		fclose(f);
	}
	if (scope >= 3)
		return fail(why, len, -EPERM, "ptrace_scope=3 (Yama lets no process be traced)");
	can_ptrace = proc_status_nums(0, "CapEff", &cap, 1) == 1 && (cap >> 19 & 1);
	if (proc_status_nums(pid, "Uid", uids, 3) != 3 ||
	    proc_status_nums(pid, "Gid", gids, 3) != 3)
		return fail(why, len, -ESRCH, "pid %d: no such process", (int)pid);
	same = uids[0] == getuid() && uids[1] == getuid() && uids[2] == getuid() &&
	       gids[0] == getgid() && gids[1] == getgid() && gids[2] == getgid();
	if (!can_ptrace && scope == 2)
		return fail(why, len, -EPERM, "ptrace_scope=2 and no CAP_SYS_PTRACE");
	if (!can_ptrace && scope == 1)
		return fail(why, len, -EPERM, "ptrace_scope=1 (only descendants) and no "
			    "CAP_SYS_PTRACE");
	if (!can_ptrace && !same)
		return fail(why, len, -EPERM, "not permitted: pid %d runs as uid %llu, fay as "
			    "uid %u without CAP_SYS_PTRACE", (int)pid, uids[0],
			    (unsigned)getuid());
	if (proc_status_nums(pid, "TracerPid", &tracer, 1) == 1 && tracer)
		return fail(why, len, -EBUSY, "traced by pid %llu (a debugger?)", tracer);
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->pid = pid;
	rc = find_libc(t, why, len);
	free(t);
	if (rc == -ENOEXEC)
		return fail(why, len, rc, "static binary (no glibc mapped in pid %d, nothing "
			    "to call dlopen with)", (int)pid);
	return rc;
}

/* ---- the process ------------------------------------------------------------- */

/* Seize tid, stop it at a safe point (a few tries), load, detach.
 * -EAGAIN: not at a safe point in time. */
static int try_thread(const struct target *t, pid_t tid, const char *lib, char *err,
		      size_t errlen)
{
	struct user_regs_struct r;
	int rc, sig = 0;

	if (ptrace(PTRACE_SEIZE, tid, 0, 0)) {
		rc = -errno;
		if (rc == -EPERM)
			return fail(err, errlen, rc, "pid %d: ptrace: %s (it needs "
				    "CAP_SYS_PTRACE, Yama's ptrace_scope allowing it, and no "
				    "other tracer)", (int)t->pid, strerror(EPERM));
		return fail(err, errlen, rc, "pid %d: thread %d: ptrace: %s", (int)t->pid,
			    (int)tid, strerror(-rc));
	}
	rc = -EAGAIN;
	for (int i = 0; i < 20; i++) {
		int e = stop_thread(tid);

		if (e) {
			rc = e == -ESRCH ? -EAGAIN : e;
			break;
		}
		if (!ptrace(PTRACE_GETREGS, tid, 0, &r) && safe_point(t, &r)) {
			rc = load_on(t, tid, lib, &sig, err, errlen);
			break;
		}
		ptrace(PTRACE_CONT, tid, 0, 0);
		usleep(1000);
	}
	if (rc == -EAGAIN && kill(tid, 0) == 0)
		stop_thread(tid);	/* it must be stopped to detach */
	ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig);
	return rc;
}

/* ---- the library where the process sees it ----------------------------------- */

/* Copy the file src to dst (created, not there before).  0 or -errno. */
static int copy_file(const char *src, const char *dst)
{
	char buf[65536];
	int in = open(src, O_RDONLY | O_CLOEXEC), out, rc = 0;
	ssize_t n;

	if (in < 0)
		return -errno;
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0) {
		rc = -errno;
		close(in);
		return rc;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			rc = errno ? -errno : -EIO;
			break;
		}
	if (n < 0)
		rc = -errno;
	if (close(out) && !rc)
		rc = -errno;
	close(in);
	if (rc)
		unlink(dst);
	return rc;
}

/*
 * lib as pid can open it: lib itself when pid sees fay's file system (or
 * the same file at the same path), else a copy put into its root (a
 * container's), in the first of these directories that takes it:
 * /run/fay (made when /run is there), /tmp, /var/tmp, /dev/shm (often
 * mounted noexec in containers: last).  *inside gets the path as the
 * process sees it, *copy the copy's path as fay sees it ("" when none:
 * the caller unlinks it once dlopen is done, the mapping stays).
 */
static int place_lib(pid_t pid, const char *lib, char *inside, size_t ilen, char *copy,
		     size_t clen, char *err, size_t errlen)
{
	static const char *const dirs[] = { "/run/fay", "/tmp", "/var/tmp", "/dev/shm" };
	static unsigned int seq;
	char there[4200];
	struct stat a, b;
	int rc = -ENOENT;

	copy[0] = '\0';
	snprintf(inside, ilen, "%s", lib);
	if (!proc_other_root(pid))
		return 0;
	snprintf(there, sizeof(there), "/proc/%d/root%s", (int)pid, lib);
	if (!stat(there, &a) && !stat(lib, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return 0;
	snprintf(there, sizeof(there), "/proc/%d/root/run", (int)pid);
	if (!access(there, F_OK)) {
		snprintf(there, sizeof(there), "/proc/%d/root/run/fay", (int)pid);
		(void)mkdir(there, 0755);
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(inside, ilen, "%s/libfay-probe.%d.%u.so", dirs[i], (int)getpid(), seq++);
		snprintf(copy, clen, "/proc/%d/root%s", (int)pid, inside);
		rc = copy_file(lib, copy);
		if (!rc)
			return 0;
	}
	copy[0] = '\0';
	return fail(err, errlen, rc, "pid %d sees another file system (a container): %s could "
		    "not be copied into its /run/fay, /tmp, /var/tmp nor /dev/shm: %s",
		    (int)pid, lib, strerror(-rc));
}

/* lib checked (an absolute path fay can read) and placed where pid sees
 * it (place_lib()).  0 or -errno with err. */
static int lib_inside(pid_t pid, const char *lib, char *inside, size_t ilen, char *copy,
		      size_t clen, char *err, size_t errlen)
{
	copy[0] = '\0';
	if (lib[0] != '/' || access(lib, R_OK) || strlen(lib) >= 400)
		return fail(err, errlen, -EINVAL, "%s: not an absolute path to a readable "
			    "library", lib);
	return place_lib(pid, lib, inside, ilen, copy, clen, err, errlen);
}

/* t's dlopen (and dlerror) in its libc (find_libc() first).  0 or
 * -ENOEXEC with err. */
static int libc_syms(struct target *t, char *err, size_t errlen)
{
	int rc = libc_sym(t, "dlopen", &t->dlopen);

	if (rc)
		rc = libc_sym(t, "__libc_dlopen_mode", &t->dlopen);
	if (rc)
		return fail(err, errlen, -ENOEXEC, "pid %d: no dlopen in %s", (int)t->pid,
			    t->libc);
	if (libc_sym(t, "dlerror", &t->dlerror))
		t->dlerror = 0;
	return 0;
}

int inject_library(pid_t pid, const char *lib, char *err, size_t errlen)
{
	struct target *t = calloc(1, sizeof(*t));
	uint64_t until = clock_monotonic_ns() + INJ_SAFE_WAIT_MS * 1000000ull;
	char dir[64], inside[512], copy[700] = "";
	int rc;

	if (!t)
		return -ENOMEM;
	t->pid = pid;
	rc = lib_inside(pid, lib, inside, sizeof(inside), copy, sizeof(copy), err, errlen);
	rc = rc ? : find_libc(t, err, errlen);
	rc = rc ? : libc_syms(t, err, errlen);
	if (rc)
		goto out;
	lib = inside;
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	rc = -EAGAIN;
	while (rc == -EAGAIN && clock_monotonic_ns() < until) {
		DIR *d = opendir(dir);
		struct dirent *de;

		if (!d) {
			rc = fail(err, errlen, -errno, "pid %d: %s", (int)pid, strerror(errno));
			break;
		}
		while (rc == -EAGAIN && (de = readdir(d)))
			if (de->d_name[0] != '.')
				rc = try_thread(t, (pid_t)atoi(de->d_name), lib, err, errlen);
		closedir(d);
	}
	if (rc == -EAGAIN)
		fail(err, errlen, rc, "pid %d: no thread reached a safe point (outside libc "
		     "and the loader, or blocked in a sleep or a wait) within %d ms",
		     (int)pid, INJ_SAFE_WAIT_MS);
out:
	if (copy[0])
		unlink(copy);	/* loaded (mapped) or not, the file is no more needed */
	free(t);
	return rc;
}

/* ---- a process held at its exec: loaded at its program's entry ------------- */

#define INJ_ENTRY_WAIT_MS	10000	/* for the loader to reach the entry point */
#define TRAMP_MARK		10	/* the trampoline's offset after its syscall */

/*
 * The code AT_ENTRY is pointed at: getpid() (the mark: fay stops the
 * process at that call's exit with PTRACE_SYSCALL; untraced, a no-op),
 * then on to the program's entry point with rdx (the loader's fini
 * function) as it came; the other registers are undefined at an entry
 * point (the ABI), r15, rcx and r11 change.
 */
static const unsigned char tramp_code[] = {
	0x49, 0x89, 0xd7,			/* mov r15, rdx */
	0xb8, 39, 0, 0, 0,			/* mov eax, SYS_getpid */
	0x0f, 0x05,				/* syscall (TRAMP_MARK after it) */
	0x4c, 0x89, 0xfa,			/* mov rdx, r15 */
	0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,	/* movabs rax, entry */
	0xff, 0xe0,				/* jmp rax */
};

/*
 * The return stub of the calls made at the mark (STUB_AT in the page):
 * a call that returns with fay gone (killed in the middle of dlopen())
 * goes on as if never made: rsp back to the mark's, the signal mask back
 * to its own (the call ran with every signal blocked), then the
 * trampoline's rest (r15, callee-saved, still holds rdx).  Under fay
 * the call ends at its system call (STUB_MARK), and fay puts everything
 * back itself.
 */
#define STUB_AT		32
static const unsigned char stub_code[] = {
	0x48, 0x89, 0xc3,			/* mov rbx, rax (the answer) */
	0x48, 0xbc, 0, 0, 0, 0, 0, 0, 0, 0,	/* movabs rsp, (the mark's) */
	0xb8, STUB_NR, 0, 0, 0,			/* mov eax, SYS_rt_sigprocmask */
	0xbf, 2, 0, 0, 0,			/* mov edi, SIG_SETMASK */
	0x48, 0x8d, 0x35, 18, 0, 0, 0,		/* lea rsi, [rip + 18]: the mask */
	0x31, 0xd2,				/* xor edx, edx */
	0x41, 0xba, 8, 0, 0, 0,			/* mov r10d, 8 */
	0x0f, 0x05,				/* syscall (STUB_MARK after it) */
	0xe9, 0xbd, 0xff, 0xff, 0xff,		/* jmp the trampoline's TRAMP_MARK */
	0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0,			/* the mask */
};

/* Write the return stub for a thread at the mark (its rsp and mask). */
static int write_stub(pid_t tid, int memfd, uint64_t page)
{
	unsigned char code[sizeof(stub_code)];
	struct user_regs_struct r;
	uint64_t mask;

	if (ptrace(PTRACE_GETREGS, tid, 0, &r) ||
	    ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(mask), &mask))
		return -errno;
	memcpy(code, stub_code, sizeof(code));
	memcpy(code + 5, &r.rsp, 8);
	memcpy(code + 48, &mask, 8);
	if (pwrite(memfd, code, sizeof(code), (off_t)(page + STUB_AT)) != (ssize_t)sizeof(code))
		return errno ? -errno : -EIO;
	return 0;
}

/* pid's auxv entry typ (/proc/PID/auxv).  0 or -errno. */
static int auxv_get(pid_t pid, uint64_t typ, uint64_t *val)
{
	uint64_t av[2 * 64];
	char fn[64];
	ssize_t n;
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%d/auxv", (int)pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, av, sizeof(av));
	close(fd);
	for (ssize_t i = 0; n > 0 && i + 1 < n / 8 && av[i]; i += 2)
		if (av[i] == typ) {
			*val = av[i + 1];
			return 0;
		}
	return -ENOENT;
}

/*
 * The trampoline's way to the entry point from a page mmap()ed for it
 * (remote_page(), TAIL_AT in the page): the page unmaps itself.  The
 * entry pushed, munmap(page) made on a "syscall; ret" of the loader's
 * code (loader_gadget()), whose ret pops the entry: the stack pointer as
 * the kernel left it, rdx (the loader's fini) kept; rax, rcx, rdi, rsi
 * and r11 change (undefined at an entry point).  The process's own code
 * all the way: a fay killed at any moment leaves nothing to undo.
 */
#define TAIL_AT		96
static const unsigned char tail_code[] = {
	0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,	/* movabs rax, entry */
	0x50,					/* push rax */
	0xb8, 11, 0, 0, 0,			/* mov eax, SYS_munmap */
	0x48, 0xbf, 0, 0, 0, 0, 0, 0, 0, 0,	/* movabs rdi, page */
	0xbe, 0, 0x10, 0, 0,			/* mov esi, 4096 */
	0x48, 0xb9, 0, 0, 0, 0, 0, 0, 0, 0,	/* movabs rcx, the gadget */
	0xff, 0xe1,				/* jmp rcx */
};

/*
 * A "syscall; ret" (0f 05 c3: whatever instruction the bytes belong to,
 * they decode so from their first) in an executable mapping of pid's
 * loader (the object at AT_BASE, mapped at the exec): *at.  0 or
 * -ENOENT.
 */
static int loader_gadget(pid_t pid, int memfd, uint64_t *at)
{
	unsigned char buf[4096 + 2];
	unsigned long long lo, hi, ino, base_ino = 0;
	uint64_t base = 0;
	char fn[64], line[4400], perms[8];
	int rc = -ENOENT;
	FILE *f;

	if (auxv_get(pid, AT_BASE, &base) || !base)
		return -ENOENT;
	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	while (f && rc && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu", &lo, &hi, perms, &ino) != 4 || !ino)
			continue;
		if (lo == base)
			base_ino = ino;
		if (ino != base_ino || perms[2] != 'x')
			continue;
		for (uint64_t p = lo; p < hi && rc; p += 4096) {
			size_t want = hi - p < 4096 ? (size_t)(hi - p) : 4096;
			ssize_t n = pread(memfd, buf, want + (p + want < hi ? 2 : 0), (off_t)p);

			for (ssize_t i = 0; i + 2 < n && rc; i++)
				if (buf[i] == 0x0f && buf[i + 1] == 0x05 && buf[i + 2] == 0xc3) {
					*at = p + (uint64_t)i;
					rc = 0;
				}
		}
	}
	if (f)
		fclose(f);
	return rc;
}

/* The address of the first "syscall" instruction (0f 05) of pid's vDSO. */
static int vdso_syscall(pid_t pid, int memfd, uint64_t *at)
{
	unsigned char buf[16384];
	unsigned long long lo, hi;
	char fn[64], line[512];
	FILE *f;
	int rc = -ENOENT;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return -errno;
	while (rc && fgets(line, sizeof(line), f)) {
		ssize_t n;

		if (!strstr(line, "[vdso]") || sscanf(line, "%llx-%llx", &lo, &hi) != 2)
			continue;
		n = pread(memfd, buf, hi - lo < sizeof(buf) ? hi - lo : sizeof(buf), (off_t)lo);
		for (ssize_t i = 0; i + 1 < n && rc; i++)
			if (buf[i] == 0x0f && buf[i + 1] == 0x05) {
				*at = lo + (uint64_t)i;
				rc = 0;
			}
	}
	fclose(f);
	return rc;
}

/*
 * Run tid (PTRACE_SYSCALL) to its next syscall-exit stop whose call is
 * nr at rip (nr -1: any call's next stop), up to ms; signals on the way
 * are delivered but SIGSTOP (the exec watch's hold: the process runs on
 * under fay's eye) and group stops.  0, -ESRCH (it exited), -ECHILD (it
 * exec()ed again), -ETIMEDOUT.
 */
static int run_to(pid_t tid, long nr, uint64_t rip, int ms, bool exit_only)
{
	uint64_t until = clock_monotonic_ns() + (uint64_t)ms * 1000000ull;
	struct user_regs_struct r;
	bool in = false;		/* between a call's entry and exit stops */
	int st, sig = 0, err;

	for (;;) {
		if (ptrace(PTRACE_SYSCALL, tid, 0, (void *)(long)sig))
			return -errno;
		sig = 0;
		err = wait_stop(tid, &st, (int)((until - clock_monotonic_ns()) / 1000000 + 1),
				false);
		if (err == -ETIMEDOUT) {
			stop_thread(tid);	/* stopped, to be put back */
			return err;
		}
		if (err)
			return err;
		if ((st >> 16) == PTRACE_EVENT_EXEC)
			return -ECHILD;
		if ((st >> 16) == PTRACE_EVENT_STOP || (st >> 16))
			continue;
		if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
			sig = WSTOPSIG(st) == SIGSTOP ? 0 : WSTOPSIG(st);
			continue;
		}
		in = !in;
		if (in && exit_only)
			continue;
		if (ptrace(PTRACE_GETREGS, tid, 0, &r))
			return -errno;
		if (nr < 0 || ((long)r.orig_rax == nr && r.rip == rip))
			return 0;
	}
}

/*
 * Room for the trampoline and its stub (STUB_AT + sizeof(stub_code)
 * bytes) in tid's program: the end of the last page of its executable
 * segment, past the segment's bytes (padding no code reaches; the page
 * is private, written copy-on-write, the file untouched): *at, where
 * the trampoline goes (its stub STUB_AT after).  0, or -ENOSPC (too little room: remote_page()).
 */
static int text_room(pid_t tid, uint64_t *at)
{
	char fn[64], line[4400];
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	struct stat exe;
	int fd, rc = -ENOSPC;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/exe", (int)tid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &exe) || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph)) {
		if (fd >= 0)
			close(fd);
		return -ENOEXEC;
	}
	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)tid);
	f = fopen(fn, "re");
	while (f && rc && fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, pgoff, ino;
		unsigned int maj, min;
		char perms[8];

		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &lo, &hi, perms, &pgoff, &maj,
			   &min, &ino) != 7 || perms[2] != 'x' || ino != exe.st_ino)
			continue;
		for (int i = 0; i < eh.e_phnum && rc; i++) {
			uint64_t end;

			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
			    sizeof(ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
			    ph.p_offset + ph.p_filesz <= pgoff ||
			    ph.p_offset + ph.p_filesz > pgoff + (hi - lo))
				continue;
			end = (lo + (ph.p_offset + ph.p_filesz - pgoff) + 15) & ~15ull;
			if (end + STUB_AT + sizeof(stub_code) <= hi) {
				*at = end;
				rc = 0;
			}
		}
	}
	if (f)
		fclose(f);
	close(fd);
	return rc;
}

/*
 * mmap() a page of code (read and execute) in tid, stopped at its exec.
 * On a "syscall; ret" of the loader (loader_gadget()) with the exec's
 * first instruction pushed: a fay killed at any moment leaves a process
 * that maps the page (left unused) and returns to where it was, with the
 * stack pointer it had (the loader's entry reads no other register: the
 * kernel zeroes them at an exec).  Without such bytes, on the vDSO's
 * syscall instruction, whose next ones were not written for this: a
 * window of microseconds where a fay killed leaves a process that
 * crashes.  0 with *page, or -errno.
 */
static int remote_page(pid_t tid, int memfd, uint64_t *page)
{
	struct user_regs_struct saved, r;
	uint64_t sc;
	int rc;

	if (ptrace(PTRACE_GETREGS, tid, 0, &saved))
		return -errno;
	r = saved;
	if (!loader_gadget(tid, memfd, &sc) &&
	    pwrite(memfd, &saved.rip, 8, (off_t)(saved.rsp - 8)) == 8) {
		r.rsp = saved.rsp - 8;
	} else {
		rc = vdso_syscall(tid, memfd, &sc);
		if (rc)
			return rc;
	}
	r.rip = sc;
	r.orig_rax = (unsigned long long)-1;
	r.rax = SYS_mmap;
	r.rdi = 0;
	r.rsi = 4096;
	r.rdx = 5;		/* PROT_READ | PROT_EXEC */
	r.r10 = 0x22;		/* MAP_PRIVATE | MAP_ANONYMOUS */
	r.r8 = (unsigned long long)-1;
	r.r9 = 0;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r))
		return -errno;
	/* its entry stop, then its exit stop */
	rc = run_to(tid, SYS_mmap, sc + 2, 2000, true);
	if (!rc && ptrace(PTRACE_GETREGS, tid, 0, &r))
		rc = -errno;
	if (!rc && r.rax > (unsigned long long)-4096)
		rc = (int)r.rax;
	*page = r.rax;
	if (rc != -ESRCH && ptrace(PTRACE_SETREGS, tid, 0, &saved) && !rc)
		rc = -errno;
	return rc;
}

/*
 * The address of the AT_ENTRY value in the auxiliary vector on the stack
 * of tid, at its exec's first instruction (rsp: argc, argv..., NULL,
 * envp..., NULL, auxv pairs).  0 or -errno.
 */
static int auxv_entry_at(pid_t tid, int memfd, uint64_t *at)
{
	struct user_regs_struct r;
	uint64_t w[2], p;
	int nulls = 0;

	if (ptrace(PTRACE_GETREGS, tid, 0, &r))
		return -errno;
	/* past argc, then to the second NULL (argv's end, envp's end) */
	for (p = r.rsp + 8; nulls < 2; p += 8) {
		if (pread(memfd, w, 8, (off_t)p) != 8 || p > r.rsp + (1u << 20))
			return -EFAULT;
		nulls += !w[0];
	}
	for (; p < r.rsp + (1u << 20); p += 16) {
		if (pread(memfd, w, 16, (off_t)p) != 16 || !w[0])
			return -ENOENT;
		if (w[0] == AT_ENTRY) {
			*at = p + 8;
			return 0;
		}
	}
	return -ENOENT;
}

/* Whether tid is at its loader's first instruction (AT_BASE's e_entry):
 * just exec()ed, nothing of it run. */
static bool at_exec(pid_t tid, int memfd)
{
	struct user_regs_struct r;
	uint64_t base = 0, entry = 0;

	return !auxv_get(tid, AT_BASE, &base) && base &&
	       pread(memfd, &entry, 8, (off_t)(base + 24)) == 8 &&
	       !ptrace(PTRACE_GETREGS, tid, 0, &r) && r.rip == base + entry;
}

/* Seize tid, stopped (held) at its exec: its stop reported. */
static int seize_held(pid_t tid)
{
	int st;

	if (ptrace(PTRACE_SEIZE, tid, 0,
		   (void *)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXEC)))
		return -errno;
	/* a stopped task re-traps at once; else interrupt it */
	if (!wait_stop(tid, &st, 100, false))
		return 0;
	return stop_thread(tid);
}

int inject_library_at_entry(pid_t pid, const char *lib, int (*ready)(void *arg), void *arg,
			    char *err, size_t errlen)
{
	struct target *t = calloc(1, sizeof(*t));
	unsigned char code[sizeof(tramp_code)];
	char memfn[64], inside[512], copy[700] = "";
	uint64_t entry = 0, at = 0, page = 0, gadget = 0;
	int memfd = -1, rc, sig = 0;
	bool seized = false, tail = false;

	if (!t)
		return -ENOMEM;
	t->pid = pid;
	rc = lib_inside(pid, lib, inside, sizeof(inside), copy, sizeof(copy), err, errlen);
	if (rc)
		goto out;
	snprintf(memfn, sizeof(memfn), "/proc/%d/mem", (int)pid);
	memfd = open(memfn, O_RDWR | O_CLOEXEC);
	if (memfd < 0 || auxv_get(pid, AT_ENTRY, &entry)) {
		rc = fail(err, errlen, -ESRCH, "pid %d: %s", (int)pid, strerror(ESRCH));
		goto out;
	}
	rc = seize_held(pid);
	seized = rc != -EPERM && rc != -ESRCH;
	if (rc) {
		rc = fail(err, errlen, rc, "pid %d: ptrace: %s", (int)pid, strerror(-rc));
		goto out;
	}
	if (!at_exec(pid, memfd)) {
		rc = fail(err, errlen, -EINVAL, "pid %d is not at its exec's first instruction "
			  "(or has no loader: a static program)", (int)pid);
		goto out;
	}
	rc = auxv_entry_at(pid, memfd, &at);
	/* the padding after its code, else a page mapped for it (a window
	 * of microseconds where a fay killed leaves it on the vDSO), which
	 * unmaps itself on the way to the entry (tail_code) */
	if (!rc && text_room(pid, &page)) {
		rc = remote_page(pid, memfd, &page);
		tail = !rc && !loader_gadget(pid, memfd, &gadget);
	}
	if (rc) {
		rc = fail(err, errlen, rc, "pid %d: a page for the trampoline to its entry "
			  "point: %s", (int)pid, strerror(-rc));
		goto out;
	}
	memcpy(code, tramp_code, sizeof(code));
	memcpy(code + 15, &entry, 8);
	if (tail) {
		unsigned char tc[sizeof(tail_code)];
		uint64_t to = page + TAIL_AT;

		memcpy(tc, tail_code, sizeof(tc));
		memcpy(tc + 2, &entry, 8);
		memcpy(tc + 18, &page, 8);
		memcpy(tc + 33, &gadget, 8);
		memcpy(code + 15, &to, 8);
		if (pwrite(memfd, tc, sizeof(tc), (off_t)to) != (ssize_t)sizeof(tc))
			memcpy(code + 15, &entry, 8);	/* (the page stays) */
	}
	if (pwrite(memfd, code, sizeof(code), (off_t)page) != (ssize_t)sizeof(code) ||
	    pwrite(memfd, &page, 8, (off_t)at) != 8) {
		rc = fail(err, errlen, -errno, "pid %d: writing its trampoline: %s", (int)pid,
			  strerror(errno));
		goto out;
	}
	/* the loader jumps to the trampoline once every library is mapped,
	 * relocated and initialized: stopped at its mark, before the
	 * program's first instruction */
	rc = run_to(pid, SYS_getpid, page + TRAMP_MARK, INJ_ENTRY_WAIT_MS, true);
	if (rc) {
		if (rc != -ESRCH && rc != -ECHILD)
			(void)pwrite(memfd, &entry, 8, (off_t)at);	/* if still unread */
		rc = fail(err, errlen, rc, "pid %d: %s before its entry point", (int)pid,
			  rc == -ESRCH ? "exited" : rc == -ECHILD ? "exec()ed again" :
			  "not reached in " "10 s");
		goto out;
	}
	/* the loader has read AT_ENTRY: the program's own again there
	 * (getauxval()) */
	(void)pwrite(memfd, &entry, 8, (off_t)at);
	/* its hold ends here (this thread stays stopped, by ptrace): a
	 * thread made while the process is stopped (the runtime's, in
	 * dlopen()) would stop with it, and never answer */
	kill(pid, SIGCONT);
	rc = find_libc(t, err, errlen);
	rc = rc ? : libc_syms(t, err, errlen);
	if (!rc && (rc = write_stub(pid, memfd, page)))
		fail(err, errlen, rc, "pid %d: writing its return stub: %s", (int)pid,
		     strerror(-rc));
	t->back = page + STUB_AT;
	rc = rc ? : load_on(t, pid, inside, &sig, err, errlen);
	if (!rc && ready)
		rc = ready(arg);
	if (sig == SIGSTOP)
		sig = 0;	/* a hold while it was ours: its SIGCONT comes after */
out:
	if (seized && kill(pid, 0) == 0)
		ptrace(PTRACE_DETACH, pid, 0, (void *)(long)sig);
	if (memfd >= 0)
		close(memfd);
	if (copy[0])
		unlink(copy);
	free(t);
	return rc;
}
