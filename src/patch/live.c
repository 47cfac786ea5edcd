// SPDX-License-Identifier: MIT
/*
 * The live write protocol (patch_int.h: patch_live_write()), after the
 * kernel's text_poke_bp(): int3 on the first byte, the last four bytes,
 * then the first byte, membarrier(PRIVATE_EXPEDITED_SYNC_CORE) after
 * each step; a SIGTRAP handler for threads that meet the int3 and a
 * one-round signal for threads stopped inside the patched bytes.
 *
 * The patch window (from the int3 to the last membarrier) calls no
 * function outside this file: every system call is a raw syscall
 * instruction (rsys()) and every byte is stored here, because the
 * function being written may be any of libc's (malloc, nanosleep,
 * getpid, syscall, memcpy, opendir...): a call of it from the patcher's
 * own thread would meet its own int3.  And a thread that blocks SIGTRAP
 * would die on the int3 (the kernel forces a blocked SIGTRAP out with
 * its default action, which kills the process), so no write starts
 * while one does (patch_trap_blocker()).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <linux/membarrier.h>

#include "patch/patch_int.h"

/* A system call without libc (the patch window: above). */
static long rsys(long nr, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
}

/* Store n bytes one by one (no memcpy() call: the patch window). */
static void put_bytes(volatile uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

/*
 * The SIGTRAP handler.  A thread that executed the int3 of a site being
 * written may have its SIGTRAP delivered late (it was descheduled between
 * the trap and the delivery, where membarrier does not reach), after the
 * write is over: so the handler stays installed once a site was written
 * (other SIGTRAPs go to the program's handler), and every site ever
 * written is remembered (the slots are never reused, as trampolines).
 * A thread stopped at func + 1 is sent where the current bytes send it:
 * to the trampoline if the site is armed, else to the relocated original
 * instructions (the same as the function's own).
 */
#define MAX_SITES	4096

static struct trap_site {
	uint64_t func;
	uint8_t *tramp, *body;
	volatile int armed;
} trap_sites[MAX_SITES];
static int ntrap_sites;
static struct sigaction old_trap;
static int trap_installed;

static void on_trap(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	uint64_t pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	int n = __atomic_load_n(&ntrap_sites, __ATOMIC_ACQUIRE);

	for (int i = 0; i < n; i++)
		if (pc == trap_sites[i].func + 1) {
			uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)
				(trap_sites[i].armed ? trap_sites[i].tramp : trap_sites[i].body);
			return;
		}
	/* Not ours: what the program would have had. */
	if (old_trap.sa_flags & SA_SIGINFO) {
		if (old_trap.sa_sigaction)
			old_trap.sa_sigaction(sig, si, uc_);
	} else if (old_trap.sa_handler != SIG_IGN && old_trap.sa_handler != SIG_DFL) {
		old_trap.sa_handler(sig);
	} else if (old_trap.sa_handler == SIG_DFL) {
		signal(SIGTRAP, SIG_DFL);
		raise(SIGTRAP);
	}
}

/* s's slot in trap_sites (added on first use), or -1 when full. */
static int trap_slot(struct patch_site *s)
{
	struct sigaction sa = { .sa_sigaction = on_trap, .sa_flags = SA_SIGINFO };

	if (!trap_installed) {
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGTRAP, &sa, &old_trap))
			return -1;
		trap_installed = 1;
	}
	if (s->trap_slot >= 0)
		return s->trap_slot;
	/* the slot of a site whose code went away (patch_live_forget()):
	 * its fields first, the address last (on_trap() matches on it) */
	for (int i = 0; i < ntrap_sites; i++)
		if (!__atomic_load_n(&trap_sites[i].func, __ATOMIC_ACQUIRE)) {
			trap_sites[i].tramp = s->tramp;
			trap_sites[i].body = s->body;
			trap_sites[i].armed = 0;
			__atomic_store_n(&trap_sites[i].func, (uint64_t)(uintptr_t)s->func,
					 __ATOMIC_RELEASE);
			return s->trap_slot = i;
		}
	if (ntrap_sites >= MAX_SITES)
		return -1;
	trap_sites[ntrap_sites] = (struct trap_site){ (uint64_t)(uintptr_t)s->func,
						      s->tramp, s->body, 0 };
	__atomic_store_n(&ntrap_sites, ntrap_sites + 1, __ATOMIC_RELEASE);
	return s->trap_slot = ntrap_sites - 1;
}

/*
 * Threads stopped between two of the instructions being replaced (after
 * the first) would resume in the middle of the jump: once the int3 keeps
 * newcomers out, each other thread is sent MOVE_SIG and its handler moves
 * a PC found inside the patched bytes to the same instruction in the
 * trampoline's relocated copy (a relocated branch may be longer there:
 * patch_body_pc() maps each instruction's start to its copy's), which
 * runs on and jumps back past the patch.  The handler is installed for this
 * round only (before the int3: sigaction() is libc's); a MOVE_SIG that
 * is not ours goes to the program's handler.  The threads are listed
 * after the int3 (a thread started before it is listed), with raw
 * getdents64.
 */
#define MOVE_SIG	(SIGRTMAX - 1)
#define MAX_TASKS	4096

static struct patch_site *volatile moving;
static pid_t move_tids[MAX_TASKS];
static volatile int move_acked[MAX_TASKS];
static int move_n;
static struct sigaction old_move;

static void on_move(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	struct patch_site *s = moving;
	pid_t me = (pid_t)rsys(SYS_gettid, 0, 0, 0, 0);

	if (!s || si->si_code != SI_TKILL || si->si_pid != (pid_t)rsys(SYS_getpid, 0, 0, 0, 0)) {
		if (old_move.sa_flags & SA_SIGINFO) {
			if (old_move.sa_sigaction)
				old_move.sa_sigaction(sig, si, uc_);
		} else if (old_move.sa_handler != SIG_IGN && old_move.sa_handler != SIG_DFL) {
			old_move.sa_handler(sig);
		}
		return;
	}
	uint64_t pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	uint64_t f = (uint64_t)(uintptr_t)s->func;

	if (pc > f && pc < f + s->len && patch_body_pc(s, pc))
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)patch_body_pc(s, pc);
	for (int i = 0; i < move_n; i++)
		if (move_tids[i] == me)
			__atomic_store_n(&move_acked[i], 1, __ATOMIC_RELEASE);
}

struct dirent64_raw {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* The threads of the process but this one, into move_tids (raw). */
static int list_threads(pid_t self)
{
	char buf[4096];
	long fd = rsys(SYS_openat, AT_FDCWD, (long)"/proc/self/task",
		       O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	long n;

	if (fd < 0)
		return (int)fd;
	move_n = 0;
	while ((n = rsys(SYS_getdents64, fd, (long)buf, sizeof(buf), 0)) > 0) {
		for (long at = 0; at < n;) {
			const struct dirent64_raw *e = (const void *)(buf + at);
			pid_t t = 0;

			for (const char *c = e->name; *c >= '0' && *c <= '9'; c++)
				t = t * 10 + (*c - '0');
			if (t > 0 && t != self && move_n < MAX_TASKS) {
				move_acked[move_n] = 0;
				move_tids[move_n++] = t;
			}
			at += e->reclen;
		}
	}
	rsys(SYS_close, fd, 0, 0, 0);
	return n < 0 ? (int)n : 0;
}

/* Inside the window: libc-free. */
static int move_threads(struct patch_site *s)
{
	pid_t self = (pid_t)rsys(SYS_gettid, 0, 0, 0, 0);
	pid_t pid = (pid_t)rsys(SYS_getpid, 0, 0, 0, 0);
	struct timespec nap = { 0, 50000 };
	int rc = list_threads(self);

	if (rc)
		return rc;
	moving = s;
	for (int i = 0; i < move_n; i++)
		if (rsys(SYS_tgkill, pid, move_tids[i], MOVE_SIG, 0))
			move_acked[i] = 1;		/* gone */
	for (int i = 0; i < move_n && !rc; i++) {
		for (int w = 0; !__atomic_load_n(&move_acked[i], __ATOMIC_ACQUIRE); w++) {
			if (rsys(SYS_tgkill, pid, move_tids[i], 0, 0) == -ESRCH)
				break;			/* exited meanwhile */
			if (w > 20000) {		/* ~1 s */
				rc = -ETIMEDOUT;
				break;
			}
			rsys(SYS_nanosleep, (long)&nap, 0, 0, 0);
		}
	}
	moving = NULL;
	return rc;
}

/* Inside the window: libc-free. */
static int sync_cores(void)
{
	long rc = rsys(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0, 0);

	return rc < 0 ? (int)rc : 0;
}

static int sync_register(void)
{
	static int registered;

	if (!registered) {
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
			    0, 0))
			return -errno;
		registered = 1;
	}
	return 0;
}

/* Bit SIGTRAP of the SigBlk line of /proc/self/task/TID/status. */
static bool task_blocks_trap(pid_t tid)
{
	char fn[64], line[256];
	unsigned long long m = 0;
	bool found = false;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/self/task/%d/status", (int)tid);
	f = fopen(fn, "re");
	if (!f)
		return false;		/* exited */
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "SigBlk: %llx", &m) == 1;
	fclose(f);
	return m & (1ull << (SIGTRAP - 1));
}

/* The first thread but the caller that blocks SIGTRAP now, or 0. */
static pid_t trap_blocker_now(void)
{
	pid_t self = (pid_t)syscall(SYS_gettid);

	if (list_threads(self))
		return 0;
	for (int i = 0; i < move_n; i++)
		if (task_blocks_trap(move_tids[i]))
			return move_tids[i];
	return 0;
}

pid_t patch_trap_blocker(int wait_ms)
{
	pid_t t = trap_blocker_now();

	for (int w = 0; t && w < wait_ms; w += 5) {
		usleep(5000);
		t = trap_blocker_now();
	}
	return t;
}

void patch_live_forget(struct patch_site *s)
{
	if (s->trap_slot < 0)
		return;
	/* no thread can stop in code that is gone: the slot matches no pc
	 * from now on (another object may be mapped there), and is reused */
	trap_sites[s->trap_slot].armed = 0;
	__atomic_store_n(&trap_sites[s->trap_slot].func, 0, __ATOMIC_RELEASE);
	s->trap_slot = -1;
}

/* Replace the first 5 bytes with new[] (int3, tail, head). */
int patch_live_write(struct patch_site *s, const uint8_t *new, bool to_patch)
{
	struct sigaction sa = { .sa_sigaction = on_move, .sa_flags = SA_SIGINFO | SA_RESTART };
	uintptr_t pg = (uintptr_t)s->func & ~(uintptr_t)4095;
	size_t span = ((uintptr_t)s->func + JMP_LEN - pg + 4095) & ~(size_t)4095;
	int slot = trap_slot(s), rc;
	bool move = to_patch && s->nhead > 1 && !s->unreached;

	if (slot < 0)
		return -ENOSPC;
	rc = sync_register();
	/* a disarm waits longer: the jump staying is the worse outcome */
	if (!rc && patch_trap_blocker(to_patch ? 100 : 2000))
		rc = -EAGAIN;
	if (rc)
		return rc;
	if (mprotect((void *)pg, span, PROT_READ | PROT_WRITE | PROT_EXEC))
		return -errno;
	if (move) {
		sigemptyset(&sa.sa_mask);
		sigaction(MOVE_SIG, &sa, &old_move);
	}
	/* The window: no call out of this file from here on.  Armed while
	 * the patch is going in, so that a trapped thread takes the
	 * trampoline; not armed while it is going out. */
	trap_sites[slot].armed = to_patch;
	__atomic_store_n(s->func, (uint8_t)0xcc, __ATOMIC_SEQ_CST);
	rc = sync_cores();
	if (!rc && move)
		rc = move_threads(s);
	if (!rc) {
		put_bytes(s->func + 1, new + 1, JMP_LEN - 1);
		rc = sync_cores();
	}
	if (!rc) {
		__atomic_store_n(s->func, new[0], __ATOMIC_SEQ_CST);
		rc = sync_cores();
	}
	if (rc) {	/* put the original bytes back */
		put_bytes(s->func + 1, s->orig + 1, JMP_LEN - 1);
		__atomic_store_n(s->func, s->orig[0], __ATOMIC_SEQ_CST);
		trap_sites[slot].armed = 0;
	}
	/* The window is over. */
	rsys(SYS_mprotect, (long)pg, (long)span, PROT_READ | PROT_EXEC, 0);
	/* On a timeout the signal may still be pending somewhere: leave the
	 * handler (it ignores it now) rather than let it kill the process. */
	if (move && rc != -ETIMEDOUT)
		sigaction(MOVE_SIG, &old_move, NULL);
	return rc;
}
