/* SPDX-License-Identifier: MIT */
/*
 * Inline probes: patch the entry of a function of this process with a
 * jump to a trampoline that calls an entry handler, runs the function
 * (its first instructions relocated into the trampoline) and, when asked,
 * calls an exit handler when it returns.  No trap on the probed path.
 *
 *	struct patch_site *s = patch_site_new(func, size, err, sizeof(err));
 *	patch_site_arm(s, on_entry, on_exit, arg, err, sizeof(err));
 *	... every call of func runs on_entry / on_exit ...
 *	patch_site_disarm(s);	 the original bytes again
 *	patch_site_free(s);
 *
 * The site (patch_site_new): the first whole instructions covering 5
 * bytes are decoded (capstone) and moved into the trampoline (reloc.c):
 * a RIP-relative operand is re-based (the trampoline is mapped within
 * +-2 GiB of the function), relative jumps and conditional jumps (rel8
 * or rel32) become rel32 jumps to the same targets (a target among the
 * patched bytes: that instruction's copy), loop/jrcxz go through a
 * rel32 jump, a call is moved only as the last of them (its callee
 * returns into the function, past the patched bytes), returns and
 * indirect jumps are copied (a 5-byte function "lea (%rdi,%rsi),%rax;
 * ret" moves whole).  Refused, with the reason: a call before the last
 * patched instruction, a far call or one through a stack operand,
 * another relative operand (xbegin), a branch of the patched bytes into
 * the middle of one of them, any other instruction of the function
 * (decoded whole) jumping into the patched bytes after the first, and
 * a function shorter than 5 bytes.  A function that starts with a
 * 5-byte nop (-mfentry -mnop-mcount, -fpatchable-function-entry) needs
 * no relocation.
 *
 * Live writes (arm and disarm) follow the protocol of the kernel's
 * text_poke_bp(): hold the first bytes, write the last ones, then the
 * first, with membarrier(PRIVATE_EXPEDITED_SYNC_CORE) between the steps
 * so that no core executes a half-written instruction, and threads
 * stopped inside the replaced instructions moved out of them first.  The
 * hold is a "jmp ." spin over the first two bytes (one atomic store; a
 * thread calling the function waits a few microseconds) or, where a spin
 * cannot go (patch_site_traps()), an int3 with a SIGTRAP handler that
 * sends a thread meeting it where the finished patch would (other
 * SIGTRAPs are passed to the program's handler).  Trampolines are never
 * unmapped nor rewritten: a thread may still be inside one after
 * disarm.  A later arm of the same function with the same handlers,
 * arg and flags takes a disarmed site's trampoline again (its bytes are
 * the ones it needs), so arm/disarm cycles take no room.  During the
 * write the patcher calls no function outside itself (raw system calls),
 * so any function may be patched, libc's included, from a thread that
 * calls them; no int3 write starts while a thread blocks SIGTRAP
 * (patch_trap_blocker()); a child forked during a write finishes it
 * (patch_live_child()).
 *
 * Exit probes are call-through: the trampoline calls the function, so the
 * function returns into the trampoline, which runs the exit handler and
 * returns to the caller.  The function sees copies of the first 8 stack
 * argument slots (functions with more stack arguments are refused only
 * when the caller knows: see src/patch/README.md).  A longjmp or an
 * exception out of the function skips the exit handler; exceptions unwind
 * through the trampoline with the call frame information registered for
 * it (__register_frame).
 *
 * Handlers get the registers in the layout of the kernel's x86-64
 * struct pt_regs, so programs generated for uprobes read arguments (di,
 * si, ...), the return value (ax) and ip at the same offsets.  Handlers
 * must not unwind or longjmp; the vector argument and return registers
 * (xmm0-xmm7) are preserved around them (unless the handlers say they
 * keep them: PATCH_HANDLERS_KEEP_VECTORS).
 */
#ifndef FAY_PATCH_PATCH_H
#define FAY_PATCH_PATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct patch_regs {
	uint64_t r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	uint64_t ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

typedef void (*patch_fn)(struct patch_regs *regs, void *arg);

struct patch_site;

/* Analyse func (size bytes of code, from its symbol).  NULL with errno
 * and a reason in err (EINVAL: the site cannot be patched safely). */
struct patch_site *patch_site_new(void *func, size_t size, char *err, size_t errlen);
/* The same when room bytes from func belong to it or to its alignment
 * padding (up to the next symbol): a function shorter than the jump
 * that ends in a ret followed by nops or int3s up to 5 bytes (gcc -O2's
 * "mov %rsi,%rax; ret" getters) is patched over its padding. */
struct patch_site *patch_site_new_room(void *func, size_t size, size_t room, char *err,
				       size_t errlen);
/* Build the trampoline and write the jump.  on_exit may be NULL (entry
 * only).  0, or -errno with a reason in err.  A site is armed once. */
int patch_site_arm(struct patch_site *s, patch_fn on_entry, patch_fn on_exit,
		   void *arg, char *err, size_t errlen);
/* The handlers keep the vector registers themselves (all of them, the
 * upper halves of ymm/zmm too): the trampoline saves and restores only
 * the general registers around them, which is cheaper (16 loads and
 * stores less per handler call).  Only for handlers whose every path is
 * compiled without vector code (gcc's general-regs-only) or saves the
 * extended state before it calls other code (the runtime's rt_vec_call()). */
#define PATCH_HANDLERS_KEEP_VECTORS	1u
/* No thread can be executing the site's bytes yet (an object the loader
 * has just mapped and not yet relocated or returned to anyone: the
 * runtime's dlopen hook): the write sends no thread the signal that
 * moves it out of them, so it needs no answer from threads that block
 * that signal (the runtime's own control thread). */
#define PATCH_ARM_UNREACHED	2u
/* patch_site_arm() with flags (PATCH_HANDLERS_KEEP_VECTORS,
 * PATCH_ARM_UNREACHED, or 0). */
int patch_site_arm_flags(struct patch_site *s, patch_fn on_entry, patch_fn on_exit,
			 void *arg, unsigned int flags, char *err, size_t errlen);
/* Restore the original bytes.  0 or -errno. */
int patch_site_disarm(struct patch_site *s);
/* Whether the site is armed and its bytes are still the jump this site
 * wrote (the caller knows the code is still mapped: the object was not
 * unloaded, or another one loaded there since). */
bool patch_site_ours(const struct patch_site *s);
/* The code is gone (its object unloaded): disarm and free write nothing
 * there. */
void patch_site_forget(struct patch_site *s);
/* The bytes the patch replaces: the whole first instructions covering
 * the jump (>= 5). */
size_t patch_site_len(const struct patch_site *s);
/* The address the function returns to in the site's trampoline (armed
 * with an exit handler: the call-through's return point, which a stack
 * walk finds as the return address of the probed function's frame), 0
 * without one.  The caller's real return address is then
 * PATCH_RETURN_SLOT bytes above the stack pointer at that point (the
 * address of the return address plus 8). */
uint64_t patch_site_return_point(const struct patch_site *s);
#define PATCH_RETURN_SLOT	72
/* The site's trampoline: its mapping's first byte, its size in *size
 * (a multiple of PATCH_TRAMP_ALIGN, the mapping's alignment); 0 when it
 * has none (not armed yet). */
uint64_t patch_site_trampoline(const struct patch_site *s, size_t *size);
#define PATCH_TRAMP_ALIGN	4096
/* Whether the first instructions were a nop (no relocation needed). */
bool patch_site_nop(const struct patch_site *s);
/* The first instruction at the site ("push rbp"), for messages. */
const char *patch_site_first(const struct patch_site *s);
/* Disarm, free (the trampoline stays mapped, for an identical later
 * arm of the function).  Accepts NULL. */
void patch_site_free(struct patch_site *s);
/* Why writing s (to_patch: the jump in, else the original bytes back)
 * holds its first byte with an int3 rather than a spin, or NULL: the first
 * instruction is one byte long and not a ret (arming only: a thread
 * stopped after it would run the spin's second byte), the first two bytes cross a cache
 * line (one store would not be atomic), or a thread of the process runs
 * under a real-time policy (it could spin on the patcher's core for
 * good).  Only an int3 write needs patch_trap_blocker() to find no one. */
const char *patch_site_traps(const struct patch_site *s, bool to_patch);
/* Whether arming s can go ahead beside this process's threads now: 0,
 * or -EAGAIN with the reason in why (len bytes) when a thread would make
 * the write kill the process or fail: the write needs an int3 and a
 * thread blocks SIGTRAP (patch_trap_blocker(), 200 ms), or it must move
 * threads out of several instructions and a thread blocks the move
 * signal at every look for 200 ms and runs at one of them (a thread
 * that blocks it asleep at each look, a sigwait() thread, is no
 * obstacle).  Writes nothing: for deciding
 * before a probe is promised (auto mode then takes a uprobe). */
int patch_site_hazard(const struct patch_site *s, char *why, size_t len);
/* In a child forked by another thread while this process wrote a site:
 * finish that write (the child has no patcher, and the half-written
 * bytes would hold its callers for good).  From an atfork child
 * handler; nothing to do otherwise. */
void patch_live_child(void);
/* A thread of this process, other than the caller, that blocked SIGTRAP
 * at every look for wait_ms (/proc/self/task/T/status, every 5 ms), or 0
 * as soon as none does.  glibc blocks every signal for a moment in
 * pthread_kill(), pthread_create() and a thread's start, a program in
 * its signal handlers (sa_mask) or for good (a sigwait() design).  An
 * int3 write (patch_site_traps()) waits for there to be none (arm
 * 100 ms, disarm 2 s, else -EAGAIN): such a thread meeting the int3
 * would die (the kernel forces a blocked SIGTRAP out with its default
 * action).  The check cannot see a thread that blocks SIGTRAP a moment
 * later (pthread_kill()): that is why writes spin where they can.  Only from the thread that writes the sites (it
 * shares the write's thread list). */
pid_t patch_trap_blocker(int wait_ms);

#endif
