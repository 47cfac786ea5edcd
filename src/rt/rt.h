/* SPDX-License-Identifier: MIT */
/*
 * libfay-probe.so, the in-process runtime of inline probes (issue #8).
 * A process loads it (LD_PRELOAD, `fay run`); its constructor opens the
 * control socket INLINE_RUN_DIR/PID.sock (common/inline_wire.h) and a
 * thread serves fay's sessions on it (control.c); the probe handlers
 * (probe.c) run the session's verified programs on each call of a
 * patched function, each thread in its own slot of the shared maps.
 *
 * Internal to the runtime; nothing here is exported from the library.
 */
#ifndef FAY_RT_RT_H
#define FAY_RT_RT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/inline_wire.h"
#include "patch/patch.h"
#include "vm/vm.h"

/* Threads that can hold a slot at once (the maps have at most as many). */
#define RT_MAX_SLOTS	1024

/* A site of a shared object by file and offset (INL_LATER, later.c):
 * armed in the object whenever it is loaded, forgotten when unloaded. */
struct rt_later {
	struct inl_later w;
	struct patch_site *ps;	/* armed in the object loaded now, or NULL */
	uint64_t addr;		/* where ps is */
	char first[64];		/* its first instruction, when loaded at LATER */
	bool present;		/* its object was loaded at the last look */
};

/* What one fay session set up (control.c builds it, probe.c runs it). */
struct rt_session {
	struct vm_map *maps[INLINE_MAX_MAPS];
	int nmaps;
	unsigned int nslots;
	unsigned int seen;	/* slots noted in the maps (vm_map_note_slot) */
	struct vm_prog *entry, *exit;
	/* [0] entry, [1] exit: the compiled code of a program that calls out
	 * to nothing but the TSC clock, so touches no vector register
	 * (probe.c runs it directly), else NULL */
	vm_code_fn fast[2];
	struct patch_site *sites[INLINE_MAX_SITES];
	struct inl_site info[INLINE_MAX_SITES];
	int nsites, narmed;
	struct rt_later later[INLINE_MAX_SITES];
	int nlater;
	bool watching;		/* later.c's loader hook serves this session */
	unsigned long loads, unloads;	/* later sites armed, forgotten */
	unsigned long refused;		/* later sites the patcher refused */
	char later_err[256];		/* the last refusal's reason */
	/* INL_UNWIND's tables, mapped read-only, the last one the walker's
	 * (fay sends another when objects were loaded): unmapped when the
	 * session ends, after the wait for every running probe */
#define RT_UNWIND_TABLES	16
	void *unw[RT_UNWIND_TABLES];
	size_t unw_len[RT_UNWIND_TABLES];
	int nunw;
};

/*
 * Sites of objects loaded later (later.c).  Every live write of the
 * runtime (arm, disarm) is made under rt_patch_lock(): the loader hook
 * arms from whichever thread dlopen()s, the control thread from its own.
 */
void rt_patch_lock(void);
void rt_patch_unlock(void);
/* Check and add one INL_LATER site to s (not armed yet): 0, or -EINVAL
 * with the reason in why. */
int rt_later_add(struct rt_session *s, const struct inl_later *w, char *why, size_t len);
/* After s is published: arm s's later sites in the objects loaded now
 * and hook the loader (r_brk, _dl_debug_state) so that each load arms
 * them before the object's code can run and each unload forgets them.
 * 0, or -errno with the reason in why (nothing hooked then).  Takes
 * rt_patch_lock() itself. */
int rt_later_watch(struct rt_session *s, char *why, size_t len);
/* Describe the later sites into buf: "name: first insn (in OBJ)" or
 * "name: armed when OBJ loads", one line each. */
size_t rt_later_describe(const struct rt_session *s, char *buf, size_t len);
/* Unhook s and restore its later sites still loaded (under
 * rt_patch_lock(), taken here).  Accepts a session never watched. */
void rt_later_end(struct rt_session *s);
/* In a fork child: the hook (still patched there) does nothing, and the
 * lock, which a thread of the parent may have held, is free. */
void rt_later_child(void);

/* The entry and exit handlers patched into the sites (probe.c); arg is
 * rt_site_arg()'s: the site's cookie (vm_env.cookie while its programs
 * run) and whether the site has both (the calls' nesting is counted). */
void rt_on_entry(struct patch_regs *regs, void *arg);
void rt_on_exit(struct patch_regs *regs, void *arg);
static inline void *rt_site_arg(const struct rt_session *s, uint64_t cookie)
{
	return (void *)(uintptr_t)(cookie << 1 | (s->exit != NULL));
}
/* Publish s to the handlers (NULL: none).  rt_unpublish() unpublishes
 * and returns true once no handler can still be running s's programs
 * (membarrier, then every busy slot waited for): s may be freed
 * afterwards.  false when a slot stayed busy RT_BUSY_WAIT_MS (a thread
 * stopped inside a handler, or one that left a handler by a signal
 * handler's siglongjmp and has run no probe since: probe.c): s must
 * then be kept, never freed. */
#define RT_BUSY_WAIT_MS	2000
void rt_publish(struct rt_session *s);
bool rt_unpublish(void);
/* How many times a thread's probe took back a slot whose handler had
 * been left by a signal handler's siglongjmp (probe.c: taken_back()). */
unsigned long rt_probe_taken_back(void);
/* Look up libfay's fay_current_span() (version LIBFAY_0.2.0) in the
 * process, again at each session (libfay may have been loaded since):
 * the trace_id / span_name fields read it. */
void rt_span_resolve(void);
/* fn(a, b, c, d) with the thread's whole extended state (every component
 * XCR0 enables: x87, xmm, the upper halves of ymm and zmm, opmask, PKRU,
 * AMX; FXSAVE's x87 and xmm0-15 without XSAVE) saved before and restored
 * after, so that fn may run any code (libc, the interpreter) under a
 * handler the trampoline saved no vector register for (vec_call.c).
 * Uses an area of rt_vec_init()'s size on the stack (2.5 KiB with
 * AVX-512, 11 KiB with AMX). */
typedef uint64_t (*vec_fn)(uint64_t a, uint64_t b, uint64_t c, uint64_t d);
uint64_t rt_vec_call(vec_fn fn, uint64_t a, uint64_t b, uint64_t c, uint64_t d);
/* Size rt_vec_call()'s area and pick its instructions from CPUID and
 * XCR0 (FXSAVE until then): once, before any site is armed.  The
 * environment's FAY_RT_VECSAVE=xsave picks XSAVE where XSAVEC would do
 * (for tests). */
void rt_vec_init(void);
/* vm_env.ustack (ustack.c): the calling thread's user stack at the
 * probe whose saved registers are ctx (struct patch_regs), innermost
 * first, into ips (at most max): frame pointers, every read inside the
 * mapping of the thread's stack pointer.  Returns how many (>= 1 when
 * max >= 1: ctx's ip).  On the probe's slow path only. */
uint32_t rt_ustack(const struct vm_env *env, const void *ctx, uint64_t *ips, uint32_t max);
/* Note armed site ps's trampoline return point (an exit handler's; none:
 * nothing), so that rt_ustack() names the caller behind it. */
void rt_ustack_note(const struct patch_site *ps);
/* Note [lo, lo + size) as fay's code (a compiled program): a signal
 * frame over it ends a walk. */
void rt_ustack_note_code(uint64_t lo, size_t size);
struct unw_hdr;
/* The unwind table the walker steps by (a blob unw_check() passed, which
 * stays mapped while any probe may run), or NULL: frame pointers only. */
void rt_ustack_tables(const struct unw_hdr *t);
/* Set up the thread-slot machinery (the constructor, once): 0 or -errno. */
int rt_probe_init(void);
/* The calling thread's calls of patched functions run no program (the
 * runtime's control thread: fay's own calls are not the program's). */
void rt_probe_untraced(void);
/* The process as fay numbers it (INL_PID): its pid in fay's pid
 * namespace and its cgroup v2 id, in the vm_env of the threads that
 * take a slot from now on (pid 0: getpid()). */
void rt_probe_ids(uint32_t pid, uint64_t cgroup);
/* In a fork child: the handlers do nothing from now on (the maps are
 * shared with the parent's fay session; the child must not write them). */
void rt_probe_inert(void);

#endif
