// SPDX-License-Identifier: MIT
/*
 * The live write protocol (patch_int.h: patch_live_write()), after the
 * kernel's text_poke_bp(): int3 on the first byte, the last four bytes,
 * then the first byte, membarrier(PRIVATE_EXPEDITED_SYNC_CORE) after
 * each step; a SIGTRAP handler for threads that meet the int3 and a
 * one-round signal for threads stopped inside the patched bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <linux/membarrier.h>

#include "patch/patch_int.h"

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
 * trampoline's relocated copy (same sizes, same offsets), which runs on
 * and jumps back past the patch.  The handler is installed only for this
 * round; a MOVE_SIG that is not ours goes to the program's handler.
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
	pid_t me = (pid_t)syscall(SYS_gettid);

	if (!s || si->si_code != SI_TKILL || si->si_pid != getpid()) {
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

static int move_threads(struct patch_site *s)
{
	struct sigaction sa = { .sa_sigaction = on_move, .sa_flags = SA_SIGINFO | SA_RESTART };
	pid_t self = (pid_t)syscall(SYS_gettid), pid = getpid();
	char path[64];
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int rc = 0;

	if (!d)
		return -errno;
	move_n = 0;
	while ((e = readdir(d)) && move_n < MAX_TASKS) {
		pid_t t = (pid_t)atoi(e->d_name);

		if (t > 0 && t != self) {
			move_acked[move_n] = 0;
			move_tids[move_n++] = t;
		}
	}
	closedir(d);
	sigemptyset(&sa.sa_mask);
	moving = s;
	sigaction(MOVE_SIG, &sa, &old_move);
	for (int i = 0; i < move_n; i++)
		if (syscall(SYS_tgkill, pid, move_tids[i], MOVE_SIG))
			move_acked[i] = 1;		/* gone */
	for (int i = 0; i < move_n && !rc; i++) {
		for (int w = 0; !__atomic_load_n(&move_acked[i], __ATOMIC_ACQUIRE); w++) {
			snprintf(path, sizeof(path), "/proc/self/task/%d", (int)move_tids[i]);
			if (access(path, F_OK))
				break;			/* exited meanwhile */
			if (w > 20000) {		/* ~1 s */
				rc = -ETIMEDOUT;
				break;
			}
			usleep(50);
		}
	}
	moving = NULL;
	/* On a timeout the signal may still be pending somewhere: leave the
	 * handler (it ignores it now) rather than let it kill the process. */
	if (!rc)
		sigaction(MOVE_SIG, &old_move, NULL);
	return rc;
}

static int sync_cores(void)
{
	static int registered;

	if (!registered) {
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
			    0, 0))
			return -errno;
		registered = 1;
	}
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0))
		return -errno;
	return 0;
}

/* Replace the first 5 bytes with new[] (int3, tail, head). */
int patch_live_write(struct patch_site *s, const uint8_t *new, bool to_patch)
{
	uintptr_t pg = (uintptr_t)s->func & ~(uintptr_t)4095;
	size_t span = ((uintptr_t)s->func + JMP_LEN - pg + 4095) & ~(size_t)4095;
	int slot = trap_slot(s), rc;

	if (slot < 0)
		return -ENOSPC;
	if (mprotect((void *)pg, span, PROT_READ | PROT_WRITE | PROT_EXEC))
		return -errno;
	/* armed while the patch is going in, so that a trapped thread
	 * takes the trampoline; not armed while it is going out */
	trap_sites[slot].armed = to_patch;
	__atomic_store_n(s->func, (uint8_t)0xcc, __ATOMIC_SEQ_CST);
	rc = sync_cores();
	if (!rc && to_patch && s->nhead > 1)
		rc = move_threads(s);
	if (!rc) {
		memcpy(s->func + 1, new + 1, JMP_LEN - 1);
		rc = sync_cores();
	}
	if (!rc) {
		__atomic_store_n(s->func, new[0], __ATOMIC_SEQ_CST);
		rc = sync_cores();
	}
	if (rc) {	/* put the original bytes back */
		memcpy(s->func + 1, s->orig + 1, JMP_LEN - 1);
		__atomic_store_n(s->func, s->orig[0], __ATOMIC_SEQ_CST);
		trap_sites[slot].armed = 0;
	}
	mprotect((void *)pg, span, PROT_READ | PROT_EXEC);
	return rc;
}
