// SPDX-License-Identifier: MIT
/*
 * The live write protocol (patch_int.h: patch_live_write()), after the
 * kernel's text_poke_bp(): hold the first bytes so that no thread runs
 * into the jump half-written, write the last bytes, then the first,
 * membarrier(PRIVATE_EXPEDITED_SYNC_CORE) after each step, and move the
 * threads stopped inside the replaced instructions out of them (a
 * one-round signal) before their bytes change.
 *
 * The hold is a spin where it can be: "jmp ." (eb fe) stored over the
 * first two bytes in one store (atomic: they do not cross a cache
 * line), which a thread that calls the function meanwhile runs until
 * the last store replaces it, as JITs patch a call site.  It needs no
 * signal, so a thread that blocks every signal (glibc's pthread_kill()
 * blocks them and calls getpid(); a sigwait() design blocks them for
 * good) calls the function safely.  Where a spin cannot go the hold is
 * an int3 on the first byte with a SIGTRAP handler for threads that meet
 * it: the first instruction is one byte long (push %rbp: a thread
 * stopped after it would run the spin's second byte), the two bytes
 * cross a cache line, or a thread of the process runs under a real-time
 * policy (it could spin forever on the patcher's core).  A thread that
 * blocks SIGTRAP dies on an int3 (the kernel forces a blocked SIGTRAP
 * out with its default action), so an int3 write does not start while
 * one does (patch_trap_blocker()).
 *
 * The patch window (from the hold to the last membarrier) calls no
 * function outside this file: every system call is a raw syscall
 * instruction (raw_syscall()) and every byte is stored here, because the
 * function being written may be any of libc's (malloc, nanosleep,
 * getpid, syscall, memcpy, opendir...): a call of it from the patcher's
 * own thread would meet its own hold.  A process that forks inside the
 * window has a child with the hold in its copy and no patcher: the
 * child finishes the write (patch_live_child(), from the runtime's
 * atfork handler).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <linux/membarrier.h>

#include "common/rawsys.h"
#include "patch/patch_int.h"

/* Store n bytes one by one (no memcpy() call: the patch window). */
static void put_bytes(volatile uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

/* Store b[0], b[1] at p in one store (the caller checked that they do
 * not cross a cache line: one store is then atomic for every core). */
static void store2(uint8_t *p, const uint8_t *b)
{
	uint16_t v = (uint16_t)(b[0] | b[1] << 8);

	__asm__ volatile("movw %w1, (%0)" : : "r"(p), "r"(v) : "memory");
}

/* Read the file at path (raw: the window) into buf, NUL-terminated.
 * The bytes read, or -errno. */
static long read_raw(const char *path, char *buf, size_t n)
{
	long fd = raw_syscall(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0);
	long got = 0, r;

	if (fd < 0)
		return fd;
	while (got < (long)n - 1 && (r = raw_syscall(SYS_read, fd, (long)(buf + got),
					      (long)n - 1 - got, 0)) > 0)
		got += r;
	raw_syscall(SYS_close, fd, 0, 0, 0);
	buf[got] = '\0';
	return got;
}

/* "/proc/self/task/TID/NAME" into out (raw: no snprintf). */
static void task_path(char *out, pid_t tid, const char *name)
{
	const char *pre = "/proc/self/task/";
	char digits[16];
	int nd = 0, o = 0;

	while (*pre)
		out[o++] = *pre++;
	do
		digits[nd++] = (char)('0' + tid % 10);
	while ((tid /= 10) > 0);
	while (nd)
		out[o++] = digits[--nd];
	out[o++] = '/';
	while (*name)
		out[o++] = *name++;
	out[o] = '\0';
}

/* The hex number at *p (advanced past it). */
static uint64_t hex_at(const char **p)
{
	uint64_t v = 0;

	for (;; (*p)++) {
		char c = **p;

		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return v;
	}
}

/* Whether thread tid blocks sig (its status's SigBlk line): 1, 0, or
 * -1 when it is gone.  Raw, so also inside the window. */
static int task_blocks(pid_t tid, int sig)
{
	char fn[64], buf[2048];
	const char *p;

	task_path(fn, tid, "status");
	if (read_raw(fn, buf, sizeof(buf)) <= 0)
		return -1;
	for (p = buf; *p; p++)
		if (p[0] == 'S' && p[1] == 'i' && p[2] == 'g' && p[3] == 'B' && p[4] == 'l' &&
		    p[5] == 'k' && p[6] == ':') {
			p += 7;
			while (*p == ' ' || *p == '\t')
				p++;
			return (int)((hex_at(&p) >> (sig - 1)) & 1);
		}
	return -1;
}

/* Where thread tid is stopped when it sleeps (its syscall file: "NR
 * args... SP PC", or "-1 SP PC" outside a system call, or "running"):
 * 1 with *pc, or 0 when it runs or may run (its pc is unknown).  Raw. */
static int task_asleep_at(pid_t tid, uint64_t *pc)
{
	char fn[64], buf[256];
	const char *p, *last = NULL;

	task_path(fn, tid, "syscall");
	if (read_raw(fn, buf, sizeof(buf)) <= 0 || buf[0] == 'r')
		return 0;
	for (p = buf; *p; p++)
		if (*p == ' ')
			last = p + 1;
	if (!last || last[0] != '0' || last[1] != 'x')
		return 0;
	last += 2;
	*pc = hex_at(&last);
	return 1;
}

/*
 * The SIGTRAP handler.  A thread that executed the int3 of a site being
 * written may have its SIGTRAP delivered late (it was descheduled between
 * the trap and the delivery, where membarrier does not reach), after the
 * write is over: so the handler stays installed once a site was written
 * (other SIGTRAPs go to the program's handler), and every site ever
 * written is remembered (a slot is reused only by a later site of the
 * same function with the same trampoline, or once its code is gone).
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
	/* the slot of an earlier site with this trampoline (tramp.c reuses
	 * it, unchanged, for the same function): the same destinations */
	for (int i = 0; i < ntrap_sites; i++)
		if (__atomic_load_n(&trap_sites[i].func, __ATOMIC_ACQUIRE) ==
		    (uint64_t)(uintptr_t)s->func && trap_sites[i].tramp == s->tramp &&
		    trap_sites[i].body == s->body)
			return s->trap_slot = i;
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
static bool move_installed;	/* on_move is MOVE_SIG's handler now */

static void on_move(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	struct patch_site *s = moving;
	pid_t me = (pid_t)raw_syscall(SYS_gettid, 0, 0, 0, 0);

	if (!s || si->si_code != SI_TKILL || si->si_pid != (pid_t)raw_syscall(SYS_getpid, 0, 0, 0, 0)) {
		/* the program's own handler, with the mask its sigaction
		 * asked for (on_move runs with every signal blocked) */
		uint64_t m = *(const uint64_t *)&uc->uc_sigmask |
			*(const uint64_t *)&old_move.sa_mask;

		if (!(old_move.sa_flags & SA_NODEFER))
			m |= 1ull << (sig - 1);
		raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, (long)&m, 0, 8);
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
	long fd = raw_syscall(SYS_openat, AT_FDCWD, (long)"/proc/self/task",
		       O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	long n;

	if (fd < 0)
		return (int)fd;
	move_n = 0;
	while ((n = raw_syscall(SYS_getdents64, fd, (long)buf, sizeof(buf), 0)) > 0) {
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
	raw_syscall(SYS_close, fd, 0, 0, 0);
	return n < 0 ? (int)n : 0;
}

/*
 * Inside the window: libc-free.  Every listed thread is sent MOVE_SIG
 * and answers from its handler.  One that does not answer within a
 * millisecond and blocks the signal is excused when it sleeps with its
 * pc outside the replaced instructions: the hold is in place, so it can
 * only come back in through the first byte (the signal stays pending:
 * *pending is set and the handler must stay).  0; -EBUSY when such a
 * thread kept running (it may be spinning on the hold, or not: its pc
 * cannot be read) or sleeps inside them at 10 looks a millisecond
 * apart; -ETIMEDOUT when one that takes the signal did not answer in
 * ~1 s.
 */
static int move_threads(struct patch_site *s, bool *pending)
{
	pid_t self = (pid_t)raw_syscall(SYS_gettid, 0, 0, 0, 0);
	pid_t pid = (pid_t)raw_syscall(SYS_getpid, 0, 0, 0, 0);
	struct timespec nap = { 0, 50000 };
	uint64_t f = (uint64_t)(uintptr_t)s->func;
	int rc = list_threads(self);

	if (rc)
		return rc;
	moving = s;
	for (int i = 0; i < move_n; i++)
		if (raw_syscall(SYS_tgkill, pid, move_tids[i], MOVE_SIG, 0))
			move_acked[i] = 1;		/* gone */
	for (int i = 0; i < move_n && !rc; i++) {
		int blocked_looks = 0;

		for (int w = 0; !__atomic_load_n(&move_acked[i], __ATOMIC_ACQUIRE); w++) {
			uint64_t pc;

			if (raw_syscall(SYS_tgkill, pid, move_tids[i], 0, 0) == -ESRCH)
				break;			/* exited meanwhile */
			if (w > 20000) {		/* ~1 s */
				rc = -ETIMEDOUT;
				break;
			}
			if (w % 20 == 19 && task_blocks(move_tids[i], MOVE_SIG) == 1) {
				if (task_asleep_at(move_tids[i], &pc) && (pc <= f || pc >= f + s->len)) {
					*pending = true;
					break;
				}
				if (++blocked_looks >= 10) {
					rc = -EBUSY;
					*pending = true;
					break;
				}
			}
			raw_syscall(SYS_nanosleep, (long)&nap, 0, 0, 0);
		}
	}
	moving = NULL;
	return rc;
}

/* Inside the window: libc-free. */
static int sync_cores(void)
{
	long rc = raw_syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0, 0);

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

/* The first thread but the caller that blocks SIGTRAP now, or 0. */
static pid_t trap_blocker_now(void)
{
	pid_t self = (pid_t)syscall(SYS_gettid);

	if (list_threads(self))
		return 0;
	for (int i = 0; i < move_n; i++)
		if (task_blocks(move_tids[i], SIGTRAP) == 1)
			return move_tids[i];
	return 0;
}

/* A thread but the caller that blocks MOVE_SIG at every look, 5 ms
 * apart for wait_ms, and runs (is not asleep, so its pc is unknown) at
 * one of them at least, or 0 (as soon as every thread that blocks it
 * has let it through once: a moment's block, glibc's).  A thread asleep
 * at each look (a sigwait() thread) is no obstacle: the write reads its
 * pc. */
static pid_t move_blocker(int wait_ms)
{
	static pid_t cand[MAX_TASKS];
	static bool ran[MAX_TASKS];
	pid_t self = (pid_t)syscall(SYS_gettid), found = 0;
	int n = 0;
	uint64_t pc;

	if (list_threads(self))
		return 0;
	for (int i = 0; i < move_n; i++)
		if (task_blocks(move_tids[i], MOVE_SIG) == 1) {
			ran[n] = !task_asleep_at(move_tids[i], &pc);
			cand[n++] = move_tids[i];
		}
	for (int w = 0; n && w < wait_ms; w += 5) {
		int kept = 0;

		usleep(5000);
		for (int i = 0; i < n; i++) {
			if (task_blocks(cand[i], MOVE_SIG) != 1)
				continue;	/* let it through, or gone */
			ran[kept] = ran[i] || !task_asleep_at(cand[i], &pc);
			cand[kept++] = cand[i];
		}
		n = kept;
	}
	for (int i = 0; i < n && !found; i++)
		if (ran[i])
			found = cand[i];
	return found;
}

int patch_site_hazard(const struct patch_site *s, char *why, size_t len)
{
	const char *trap = patch_site_traps(s, true);
	pid_t t;

	if (trap && (t = patch_trap_blocker(200))) {
		snprintf(why, len, "the live write needs an int3 (%s), and thread %d of process "
			 "%d blocks SIGTRAP: it would die on it (the kernel kills a thread that "
			 "meets an int3 with SIGTRAP blocked)", trap, (int)t, (int)getpid());
		return -EAGAIN;
	}
	if (s->nhead < 2)
		return 0;
	t = move_blocker(200);
	if (t) {
		snprintf(why, len, "the live write moves threads out of the first %zu bytes (%d "
			 "instructions) with a signal, and thread %d of process %d blocks every "
			 "signal while it runs: it could be one of them", s->len, s->nhead, (int)t,
			 (int)getpid());
		return -EAGAIN;
	}
	return 0;
}

/* Whether a thread but the caller runs under a real-time policy: it
 * would spin on the hold and keep the patcher off its core for good. */
static bool realtime_thread(void)
{
	pid_t self = (pid_t)syscall(SYS_gettid);

	if (list_threads(self))
		return true;
	for (int i = 0; i < move_n; i++) {
		long pol = syscall(SYS_sched_getscheduler, move_tids[i]);

		if (pol == SCHED_FIFO || pol == SCHED_RR || pol == 6 /* SCHED_DEADLINE */)
			return true;
	}
	return false;
}

const char *patch_site_traps(const struct patch_site *s, bool to_patch)
{
	if (((uintptr_t)s->func & 63) == 63)
		return "its first two bytes cross a cache line";
	/* (a ret does not go on to the next byte: _dl_debug_state()) */
	if (to_patch && !s->unreached && s->nhead && s->head[0].size < 2 &&
	    s->head[0].bytes[0] != 0xc3)
		return "its first instruction is one byte long";
	if (realtime_thread())
		return "a thread of the process runs under a real-time policy";
	return NULL;
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

/* The write under way, for a child forked inside it (patch_live_child()). */
static struct patch_site *volatile writing;
static uint8_t writing_bytes[JMP_LEN];

void patch_live_child(void)
{
	struct patch_site *s = writing;
	uintptr_t pg;
	size_t span;

	if (!s)
		return;
	/* one thread, outside the function (in fork()): no hold needed */
	pg = (uintptr_t)s->func & ~(uintptr_t)4095;
	span = ((uintptr_t)s->func + JMP_LEN - pg + 4095) & ~(size_t)4095;
	raw_syscall(SYS_mprotect, (long)pg, (long)span, PROT_READ | PROT_WRITE | PROT_EXEC, 0);
	put_bytes(s->func + 1, writing_bytes + 1, JMP_LEN - 1);
	s->func[0] = writing_bytes[0];
	raw_syscall(SYS_mprotect, (long)pg, (long)span, PROT_READ | PROT_EXEC, 0);
	writing = NULL;
}

/* One attempt of patch_live_write(). */
static int live_write_once(struct patch_site *s, const uint8_t *new, bool to_patch)
{
	static const uint8_t spin[2] = { 0xeb, 0xfe };	/* jmp . */
	struct sigaction sa = { .sa_sigaction = on_move, .sa_flags = SA_SIGINFO | SA_RESTART };
	uintptr_t pg = (uintptr_t)s->func & ~(uintptr_t)4095;
	size_t span = ((uintptr_t)s->func + JMP_LEN - pg + 4095) & ~(size_t)4095;
	bool move = to_patch && s->nhead > 1 && !s->unreached;
	bool trap = patch_site_traps(s, to_patch) != NULL, pending = false;
	size_t held = trap ? 1 : 2;	/* bytes the hold covers */
	int slot = -1, rc;

	if (trap || s->trap_slot >= 0) {
		slot = trap_slot(s);
		if (slot < 0)
			return -ENOSPC;
	}
	rc = sync_register();
	/* a disarm waits longer: the jump staying is the worse outcome; an
	 * unreached site is run by no thread */
	if (!rc && trap && !s->unreached && patch_trap_blocker(to_patch ? 100 : 2000))
		rc = -EAGAIN;
	if (rc)
		return rc;
	if (mprotect((void *)pg, span, PROT_READ | PROT_WRITE | PROT_EXEC))
		return -errno;
	if (move && !move_installed) {
		/* every signal blocked while it runs: a program's handler that
		 * siglongjmp()s out of its signal (inline_sigjmp.sh's storm)
		 * took it at the exit of on_move's first system call and left
		 * on_move before its answer, and the write gave up after ~1 s
		 * (-ETIMEDOUT: "writing the jump: Connection timed out") */
		sigfillset(&sa.sa_mask);
		sigaction(MOVE_SIG, &sa, &old_move);
		move_installed = true;
	}
	for (int i = 0; i < JMP_LEN; i++)
		writing_bytes[i] = new[i];
	/* The window: no call out of this file from here on.  A trapped
	 * thread takes the trampoline while the patch is going in, the
	 * original instructions while it is going out. */
	if (slot >= 0)
		trap_sites[slot].armed = to_patch;
	writing = s;
	if (trap)
		__atomic_store_n(s->func, (uint8_t)0xcc, __ATOMIC_SEQ_CST);
	else
		store2(s->func, spin);
	rc = sync_cores();
	if (!rc && move)
		rc = move_threads(s, &pending);
	if (!rc) {
		put_bytes(s->func + held, new + held, JMP_LEN - held);
		rc = sync_cores();
	}
	if (!rc) {
		if (trap)
			__atomic_store_n(s->func, new[0], __ATOMIC_SEQ_CST);
		else
			store2(s->func, new);
		rc = sync_cores();
	}
	if (rc) {	/* put the original bytes back (the hold last) */
		put_bytes(s->func + held, s->orig + held, JMP_LEN - held);
		sync_cores();
		if (trap)
			__atomic_store_n(s->func, s->orig[0], __ATOMIC_SEQ_CST);
		else
			store2(s->func, s->orig);
		if (slot >= 0)
			trap_sites[slot].armed = 0;
	}
	writing = NULL;
	/* The window is over. */
	raw_syscall(SYS_mprotect, (long)pg, (long)span, PROT_READ | PROT_EXEC, 0);
	/* A signal not taken yet (a thread that blocks it, or late) may be
	 * pending somewhere: leave the handler (it passes other signals on)
	 * rather than let it kill the process. */
	if (move && !pending && rc != -ETIMEDOUT) {
		sigaction(MOVE_SIG, &old_move, NULL);
		move_installed = false;
	}
	return rc;
}

/* Replace the first 5 bytes with new[] (hold, tail, head).  A thread
 * that blocks every signal and may be inside the replaced instructions
 * is usually one held by the spin with its signals blocked for a moment
 * (around a call of the function): it goes on when the write gives up,
 * so the write is tried again a few times. */
int patch_live_write(struct patch_site *s, const uint8_t *new, bool to_patch)
{
	int rc = live_write_once(s, new, to_patch);

	for (int again = 0; rc == -EBUSY && again < 4; again++) {
		usleep(2000u << again);
		rc = live_write_once(s, new, to_patch);
	}
	return rc;
}
