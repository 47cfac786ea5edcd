/* SPDX-License-Identifier: MIT */
/*
 * Loading a shared library into a running process with ptrace (x86-64,
 * glibc): how fay puts its in-process runtime (libfay-probe.so) into a
 * process it did not start.  One thread of the process is seized and
 * stopped at a safe point, made to call its own libc's dlopen(), and put
 * back exactly as it was; the other threads keep running.
 */
#ifndef FAY_PROBE_INJECT_H
#define FAY_PROBE_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Load lib (an absolute path in fay's file system) into process pid by
 * calling dlopen(lib, RTLD_NOW) on one of its threads.  A process that
 * sees another file system (a container: procroot.h) gets a copy of lib
 * in its own root (its /run/fay, /tmp, /var/tmp or /dev/shm, the first
 * that takes it), removed once dlopen returned (the loader keeps its
 * mapping); lib's own dependencies must be there (libfay-probe.so needs
 * only libc and libgcc_s, in every glibc distribution's base image).
 *
 * The thread is seized (PTRACE_SEIZE, PTRACE_INTERRUPT) and used only at
 * a safe point: its instruction pointer outside libc and the dynamic
 * loader, or blocked in a system call that holds none of their locks
 * (sleeps, waits, reads); else it runs on for a millisecond and is asked
 * again, every thread in turn, for up to 2 s.  All its registers
 * (general, x87/SSE/AVX state) and its signal mask are saved, every
 * signal is blocked during the call, and all are restored before the
 * detach, so an interrupted system call restarts as it would have.
 *
 * Returns 0 when dlopen returned a handle; otherwise -errno with the
 * reason in err: -EPERM (no CAP_SYS_PTRACE, Yama, or already traced),
 * -ENOEXEC (not a dynamically linked glibc program), -EAGAIN (no thread
 * reached a safe point), -ENOENT (dlopen failed: dlerror()'s text),
 * -EFAULT (the call faulted in the process: it was stopped and put back).
 */
int inject_library(pid_t pid, const char *lib, char *err, size_t errlen);

/*
 * inject_library() for a process held at its exec (stopped by SIGSTOP at
 * its loader's first instruction, one thread, no libc mapped yet: the
 * exec watch's hold of a command's descendant), loaded before its
 * program's first instruction.  AT_ENTRY in its auxiliary vector (which
 * the loader reads to know where to jump) is pointed at a page of code
 * mapped in it (mmap() made on the vDSO's syscall instruction): a
 * getpid() call, then a jump to the program's entry point.  The process
 * runs under PTRACE_SYSCALL until that call (the loader has mapped,
 * relocated and initialized every library; main() has not run), lib is
 * dlopen()ed on it, ready(arg) is called (NULL: none) while it stays
 * stopped there (the runtime's own thread answers: fay arms its probes),
 * and it is let go.  Its hold ends at the entry point (SIGCONT: a thread
 * made in a stopped process stops too; the thread at the entry point
 * stays stopped by ptrace until ready() returned); its SIGCONT handler,
 * if any, runs then.  No instruction of its own is changed: a fay killed
 * at any point leaves it running (the trampoline only goes on to the
 * entry point; between the mmap()'s set-up and its return, a few
 * microseconds, it would resume on the vDSO's instruction with fay's
 * registers).  Signals on the way are delivered, SIGSTOP (a hold) is
 * not.  lib is placed as inject_library() places it.  0, or -errno with
 * the reason in err: -EINVAL (not at its exec, or a static program),
 * -ESRCH (it exited first), -ECHILD (it exec()ed again first), -ETIMEDOUT
 * (its entry not reached in 10 s), ready()'s, and inject_library()'s.
 */
int inject_library_at_entry(pid_t pid, const char *lib, int (*ready)(void *arg), void *arg,
			    char *err, size_t errlen);

/*
 * Whether inject_library() may be tried on pid, without touching it: Yama's
 * ptrace_scope (3: never; 2: CAP_SYS_PTRACE; 1: CAP_SYS_PTRACE, pid not
 * being a descendant), the kernel's same-credentials rule without
 * CAP_SYS_PTRACE, another tracer, and a glibc mapped in it.  (A non-root
 * requester's own-uid rule is the engine's: engine_check_pid() refuses
 * another user's pid at set-up, before any load is considered.)  0, or -errno with a short reason in why
 * ("ptrace_scope=3 (...)", "static binary (...)", "not permitted: ...";
 * -EPERM, -EBUSY, -ENOEXEC, -ESRCH).
 */
int inject_check(pid_t pid, char *why, size_t len);

/*
 * The address at which file offset off of the file at path is mapped
 * executable in process pid (matched by inode).  0, -ENOENT (not mapped
 * there), -errno.
 */
int proc_map_addr(pid_t pid, const char *path, uint64_t off, uint64_t *addr);

/*
 * proc_map_addr() for n offsets at once, reading pid's maps once:
 * addrs[i] is where offs[i] is mapped executable, or 0 where it is not.
 * Returns how many were found (>= 0), or -errno (the file or the maps
 * could not be read).
 */
int proc_map_addrs(pid_t pid, const char *path, const uint64_t *offs, size_t n,
		   uint64_t *addrs);

#endif
