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

/*
 * Call fn(a0, a1) on stopped thread tid with stack pointer sp (its word
 * is the return address 0); *ret gets rax.  0, -EFAULT (it faulted
 * elsewhere: *ret is the address), -ESRCH, -ETIMEDOUT.  *sig: a stop
 * signal that arrived meanwhile, to deliver after.
 */
static int call(pid_t tid, const struct saved *s, uint64_t fn, uint64_t a0, uint64_t a1,
		uint64_t sp, uint64_t *ret, int *sig)
{
	struct user_regs_struct r = s->regs;
	int st, err;

	r.rip = fn;
	r.rdi = a0;
	r.rsi = a1;
	r.rax = 0;
	r.orig_rax = (unsigned long long)-1;
	r.rsp = sp;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r) || ptrace(PTRACE_CONT, tid, 0, 0))
		return -errno;
	for (;;) {
		err = wait_stop(tid, &st, INJ_CALL_WAIT_MS, false);
		if (err)
			return err;
		if ((st >> 16) == PTRACE_EVENT_STOP || WSTOPSIG(st) == SIGTRAP) {
			ptrace(PTRACE_CONT, tid, 0, 0);
			continue;
		}
		if (WSTOPSIG(st) == SIGSEGV || WSTOPSIG(st) == SIGBUS ||
		    WSTOPSIG(st) == SIGILL || WSTOPSIG(st) == SIGFPE)
			break;
		if (!*sig)
			*sig = WSTOPSIG(st);	/* SIGSTOP and the like: later */
		ptrace(PTRACE_CONT, tid, 0, 0);
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
	uint64_t str, sp, handle = 0, zero = 0;
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
	    pwrite(fd, &zero, sizeof(zero), (off_t)sp) != sizeof(zero)) {
		rc = -errno;
		fail(err, errlen, rc, "pid %d: writing its stack: %s", (int)t->pid,
		     strerror(errno));
		goto out;
	}
	rc = call(tid, s, t->dlopen, str, 2 /* RTLD_NOW */, sp, &handle, sig);
	if (rc == -EFAULT)
		fail(err, errlen, rc, "pid %d: dlopen(%s) faulted at %#llx in it (it was "
		     "stopped and put back as it was)", (int)t->pid, lib,
		     (unsigned long long)handle);
	else if (rc)
		fail(err, errlen, rc, "pid %d: dlopen(%s) in it: %s", (int)t->pid, lib,
		     strerror(-rc));
	else if (!handle) {
		uint64_t msg = 0;

		if (t->dlerror && !call(tid, s, t->dlerror, 0, 0, sp, &msg, sig) && msg) {
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

int inject_library(pid_t pid, const char *lib, char *err, size_t errlen)
{
	struct target *t = calloc(1, sizeof(*t));
	uint64_t until = clock_monotonic_ns() + INJ_SAFE_WAIT_MS * 1000000ull;
	char dir[64], inside[512], copy[700] = "";
	int rc;

	if (!t)
		return -ENOMEM;
	t->pid = pid;
	if (lib[0] != '/' || access(lib, R_OK) || strlen(lib) >= 400) {
		rc = fail(err, errlen, -EINVAL, "%s: not an absolute path to a readable "
			  "library", lib);
		goto out;
	}
	rc = place_lib(pid, lib, inside, sizeof(inside), copy, sizeof(copy), err, errlen);
	if (rc)
		goto out;
	lib = inside;
	rc = find_libc(t, err, errlen);
	if (rc)
		goto out;
	rc = libc_sym(t, "dlopen", &t->dlopen);
	if (rc)
		rc = libc_sym(t, "__libc_dlopen_mode", &t->dlopen);
	if (rc) {
		rc = fail(err, errlen, -ENOEXEC, "pid %d: no dlopen in %s", (int)pid, t->libc);
		goto out;
	}
	if (libc_sym(t, "dlerror", &t->dlerror))
		t->dlerror = 0;
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
