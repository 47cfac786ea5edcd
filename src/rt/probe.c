// SPDX-License-Identifier: MIT
/*
 * The runtime's probe handlers: per-thread slots and the session the
 * handlers run.
 *
 * A thread gets a slot on its first probed call (the lowest free one,
 * released by a pthread key destructor when the thread exits: the
 * slot's partial aggregates stay, the next owner adds to them, which is
 * what the reader's merge wants) and fills its struct vm_env once.  A
 * thread beyond RT_MAX_SLOTS, or beyond the session's nslots, is not
 * traced.
 *
 * Detach without freeing under a running handler: a handler marks its
 * slot busy (a plain store on the slot's own cache line of the count it
 * found plus one: a signal handler's probe nested in it puts the count
 * back before it goes on), then reads the
 * published session; rt_unpublish() clears the session, runs
 * membarrier(PRIVATE_EXPEDITED) (a full barrier on every running thread
 * of the process: the store of any handler that could have read the old
 * session is visible afterwards) and waits for every busy slot.  The hot
 * path has no atomic read-modify-write and no fence.
 *
 * Vector registers: the sites are armed with PATCH_HANDLERS_KEEP_VECTORS
 * (the trampolines save no vector register), so this file is compiled
 * general-regs-only and everything that may run other code (a thread's
 * first probe, the nested slot, noting a slot, a program that is
 * interpreted or calls a helper out of line) goes through rt_vec_call()
 * (vec_call.c), which saves the whole extended state (x87, xmm, ymm,
 * zmm, opmask registers: XSAVEC) around it.  The common path (a compiled
 * program using inlined helpers and the TSC clock) touches no vector
 * register.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/membarrier.h>

#include "common/rawsys.h"
#include "fay/trace.h"
#include "rt/rt.h"

#pragma GCC target("general-regs-only")

struct rt_thread {
	int state;		/* 0: not seen, 1: has a slot, -1: untraced, 2: setting up */
	int nstate;		/* the same for env2 */
	struct vm_env env;
	struct vm_env env2;	/* a probe nested in a running one (a signal
				 * handler's): a slot of its own */
};

/*
 * Pairing (a source with entry and exit probes): each slot keeps a stack
 * of the probed calls its thread entered and has not left, one level per
 * call (recursion, a signal handler calling the function in the middle
 * of a call), with the stack pointer each entered with (S: the address
 * of its return address).  The entry program writes the record of its
 * level (vm_env.depth, which the programs read with fay_depth()) in the
 * slot's pairs array, the exit program of the same call reads the same
 * level.  A call whose exit was skipped (longjmp, an exception) leaves
 * its level behind: a live caller's S is always above its callees', so
 * an entry drops the levels whose S is not above its own, and an exit
 * (at S + 8) drops those below its own and pairs only with a level of
 * exactly its S; an exit with none (the call entered before the probes
 * were armed, or deeper than INLINE_DEPTH levels) runs no program.
 * Each level dropped is the exit of a call left without its return: the
 * session's exit program runs for it there (drop_left(), cold), its
 * depth that level's, with vm_env.unwound = 1 (fay_unwound(): the
 * query's f.unwound) and the return register 0; normal returns find
 * unwound 0 and pay nothing for it.
 * (A stack switched to one above the interrupted calls', a sigaltstack
 * or a coroutine's, makes their levels look left: an unwound exit each.)
 * Entries past INLINE_DEPTH levels run the entry program with depth
 * INLINE_DEPTH, whose record lookup fails: it counts the call (EC_DEPTH).
 * The stack is only touched while the slot is busy, so a signal
 * handler's probe in the middle of it runs on the thread's second slot,
 * with that slot's own stack.
 */
struct rt_slot {
	uint32_t busy;		/* handlers running on the slot (above) */
	unsigned int n;		/* pairing levels in use */
	uint64_t frame;		/* while busy: the running handler's regs (on
				 * its thread's stack): taken_back() */
	uint64_t sp[INLINE_DEPTH];
	uint64_t ck[INLINE_DEPTH];	/* each level's site (vm_env.cookie) */
} __attribute__((aligned(64)));	/* its own cache lines */

static __thread struct rt_thread tls __attribute__((tls_model("initial-exec")));
static struct rt_slot slots[RT_MAX_SLOTS];
static uint64_t used[RT_MAX_SLOTS / 64];
static unsigned int hiwater;		/* slots ever handed out */
static struct rt_session *cur;
static bool inert;
/* the process as fay numbers it (INL_PID; 0: not told, getpid()) */
static uint32_t fay_pid;
static uint64_t fay_cgroup;
static pthread_key_t key;
/* libfay's fay_current_span() (LIBFAY_0.2.0), when the process has it */
static int (*fay_cur)(struct fay_current *out, size_t size, int version);

/* A slot back to the free ones (its thread is exiting, in no handler: a
 * busy count a signal handler's siglongjmp left on it goes too). */
static void release_slot(unsigned int s)
{
	__atomic_store_n(&slots[s].busy, 0, __ATOMIC_RELEASE);
	__atomic_fetch_and(&used[s / 64], ~(1ull << (s % 64)), __ATOMIC_RELEASE);
}

/* The key's destructor, at the thread's exit: its slots go back. */
static void release_thread(void *p)
{
	(void)p;
	if (tls.nstate == 1)
		release_slot(tls.env2.slot);
	if (tls.state == 1)
		release_slot(tls.env.slot);
	tls.state = tls.nstate = 0;
}

int rt_probe_init(void)
{
	int err = pthread_key_create(&key, release_thread);

	rt_vec_init();
	if (err)
		return -err;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0))
		return -errno;
	return 0;
}

void rt_probe_untraced(void)
{
	tls.state = -1;
}

void rt_probe_ids(uint32_t pid, uint64_t cgroup)
{
	__atomic_store_n(&fay_cgroup, cgroup, __ATOMIC_RELAXED);
	__atomic_store_n(&fay_pid, pid, __ATOMIC_RELAXED);
}

void rt_probe_inert(void)
{
	inert = true;
	__atomic_store_n(&cur, NULL, __ATOMIC_RELEASE);	/* no program runs */
}

void rt_span_resolve(void)
{
	void *f = dlvsym(RTLD_DEFAULT, "fay_current_span", "LIBFAY_0.2.0");

	if (!f)		/* a static libfay exported with -rdynamic: no versions */
		f = dlsym(RTLD_DEFAULT, "fay_current_span");

	__atomic_store_n(&fay_cur, (__typeof__(fay_cur))f, __ATOMIC_RELEASE);
}

/* struct vm_env.span: what libfay says of this thread (docs/ABI.md) */
static int rt_span(const struct vm_env *env, int which, void *dst, uint32_t size)
{
	__typeof__(fay_cur) f = __atomic_load_n(&fay_cur, __ATOMIC_ACQUIRE);
	struct fay_current c;

	if (!f || f(&c, sizeof(c), FAY_CURRENT_VERSION))
		return -ENOENT;
	if (which == VM_SPAN_TRACE_ID) {
		memcpy(dst, &c.trace_lo, size < 8 ? size : 8);
	} else if (size) {
		memcpy(dst, c.name, size < sizeof(c.name) ? size : sizeof(c.name));
		((char *)dst)[size - 1] = '\0';
	}
	return 0;
}

/* The lowest free slot, or RT_MAX_SLOTS. */
static unsigned int take_slot(void)
{
	unsigned int s = RT_MAX_SLOTS, hw;

	for (unsigned int w = 0; w < RT_MAX_SLOTS / 64 && s == RT_MAX_SLOTS; w++) {
		uint64_t v = __atomic_load_n(&used[w], __ATOMIC_RELAXED);

		while (~v) {
			int b = __builtin_ctzll(~v);

			if (__atomic_compare_exchange_n(&used[w], &v, v | 1ull << b, false,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
				s = w * 64 + (unsigned int)b;
				break;
			}
		}
	}
	if (s == RT_MAX_SLOTS)
		return s;
	hw = __atomic_load_n(&hiwater, __ATOMIC_RELAXED);
	while (hw < s + 1 && !__atomic_compare_exchange_n(&hiwater, &hw, s + 1, false,
							   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return s;
}

/* rt_sigprocmask(how, set, old) without libc (a probed function may be
 * any of libc's): the 64 signals as one word. */
static long raw_sigmask(int how, const uint64_t *set, uint64_t *old)
{
	return raw_syscall(SYS_rt_sigprocmask, how, (long)set, (long)old, 8);
}

static bool thread_init_unmasked(struct rt_thread *t);

/*
 * The thread's slot, taken with every signal blocked: a handler that
 * siglongjmp()s out of a signal taken in the middle (a storm of them:
 * inline_sigjmp.sh) left t->state at 2 for good, and the thread was
 * never traced again (its every later call uncounted: the whole query
 * answered 0 in about half the runs).
 */
static bool thread_init(struct rt_thread *t)
{
	uint64_t all = ~0ull, old = 0;
	bool ok;

	raw_sigmask(SIG_BLOCK, &all, &old);
	ok = thread_init_unmasked(t);
	raw_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

static bool thread_init_unmasked(struct rt_thread *t)
{
	unsigned int s;

	if (inert) {		/* a fork child: untraced */
		t->state = -1;
		return false;
	}
	t->state = 2;		/* a signal handler's probe meanwhile: none */
	s = take_slot();
	if (s == RT_MAX_SLOTS || pthread_setspecific(key, t)) {
		if (s != RT_MAX_SLOTS)
			release_slot(s);
		t->state = -1;
		return false;
	}
	memset(&t->env, 0, sizeof(t->env));
	t->env.slot = s;
	slots[s].n = 0;	/* an earlier owner's calls are not ours */
	t->env.pid_tgid = (uint64_t)(__atomic_load_n(&fay_pid, __ATOMIC_RELAXED) ? : (uint32_t)getpid())
			  << 32 | (uint32_t)syscall(SYS_gettid);
	t->env.cgroup_id = __atomic_load_n(&fay_cgroup, __ATOMIC_RELAXED);
	t->env.vpid = (uint32_t)getpid();
	t->env.uid_gid = (uint64_t)getgid() << 32 | getuid();
	t->env.cpu = (uint32_t)sched_getcpu();
	t->env.now = vm_tsc_now;	/* clock_gettime() without an invariant TSC */
	t->env.span = rt_span;
	t->env.ustack = rt_ustack;
	prctl(PR_GET_NAME, t->env.comm, 0, 0, 0);
	t->state = 1;
	return true;
}

/* The nested slot (t->state is 1: the key's destructor frees it too),
 * taken with every signal blocked, as thread_init()'s. */
static bool nested_init(struct rt_thread *t)
{
	uint64_t all = ~0ull, old = 0;
	unsigned int s;

	raw_sigmask(SIG_BLOCK, &all, &old);
	t->nstate = 2;
	s = take_slot();
	if (s == RT_MAX_SLOTS) {
		t->nstate = -1;
		raw_sigmask(SIG_SETMASK, &old, NULL);
		return false;
	}
	t->env2 = t->env;
	t->env2.slot = s;
	t->env2.unwound = 0;
	slots[s].n = 0;
	t->nstate = 1;
	raw_sigmask(SIG_SETMASK, &old, NULL);
	return true;
}

/* A slot's first run in session s: the reader merges the noted slots. */
static void note_slot(struct rt_session *s, unsigned int slot)
{
	unsigned int v = __atomic_load_n(&s->seen, __ATOMIC_RELAXED);

	for (int i = 0; i < s->nmaps; i++)
		vm_map_note_slot(s->maps[i], slot);
	while (v < slot + 1 && !__atomic_compare_exchange_n(&s->seen, &v, slot + 1, false,
							    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* The thread's first probe (rt_vec_call: it calls libc): 1 when traced. */
static uint64_t first_probe(uint64_t t, uint64_t unused1, uint64_t unused2, uint64_t unused3)
{
	struct rt_thread *th = (struct rt_thread *)(uintptr_t)t;

	(void)unused1;
	(void)unused2;
	(void)unused3;
	return th->state == 0 && thread_init(th);
}

static unsigned long taken_back_n;	/* slots taken back (rt_probe_taken_back) */

/* sigaltstack(NULL, ss) without libc (whose wrapper may be a probed
 * function: this runs inside a handler). */
static long raw_sigaltstack(stack_t *ss)
{
	return raw_syscall(SYS_sigaltstack, 0, (long)ss, 0, 0);
}

/*
 * Whether the handler that made slot sl busy (this thread's: a slot has
 * one thread) has been left without its end: a signal handler that
 * interrupted it siglongjmp()ed (or threw) past it, so its busy count
 * would stay forever (the detacher waits for it; the thread's probes
 * fall to its second slot, then to none).  regs is the new handler's,
 * on this thread's stack.  Two live handlers' regs are never at one
 * address, and a live one's frame is above every frame run after it on
 * the same stack; so the old one is gone when its regs are the new
 * one's, or below them on the same stack (both on the alternate signal
 * stack or both off it), or on the alternate stack while this one is
 * not.  Otherwise it may be live (this handler interrupted it): not
 * taken.  (A signal handler that switches to another stack, swapcontext,
 * and runs a probe there above the interrupted one would be misread.)
 */
static bool taken_back(const struct rt_slot *sl, uint64_t regs)
{
	uint64_t f = __atomic_load_n(&sl->frame, __ATOMIC_RELAXED);
	stack_t ss;
	bool on_alt, f_alt;

	if (f == regs)
		return true;
	if (raw_sigaltstack(&ss))
		return false;
	on_alt = ss.ss_flags & SS_ONSTACK;
	f_alt = !(ss.ss_flags & SS_DISABLE) && f - (uint64_t)(uintptr_t)ss.ss_sp < ss.ss_size;
	if (on_alt != f_alt)
		return f_alt;	/* its frame on the signal stack, this one off it */
	return f < regs;
}

/* The slot of a probe that found its thread's slot busy (*b != 0): that
 * slot again when the handler that made it busy was left (taken_back():
 * *b 0); else, a signal handler's probe while this thread runs one, the
 * thread's second slot (taken back the same way), NULL when that one is
 * busy too (deeper nesting is not traced); *b gets its busy count. */
static uint64_t nested_env(uint64_t t_, uint64_t b_, uint64_t regs, uint64_t unused)
{
	struct rt_thread *t = (struct rt_thread *)(uintptr_t)t_;
	uint32_t *b = (uint32_t *)(uintptr_t)b_;

	(void)unused;
	if (taken_back(&slots[t->env.slot], regs)) {
		__atomic_fetch_add(&taken_back_n, 1, __ATOMIC_RELAXED);
		*b = 0;
		return (uint64_t)(uintptr_t)&t->env;
	}
	if (t->nstate != 1 && (t->nstate != 0 || !nested_init(t)))
		return 0;
	*b = __atomic_load_n(&slots[t->env2.slot].busy, __ATOMIC_RELAXED);
	if (*b && taken_back(&slots[t->env2.slot], regs)) {
		__atomic_fetch_add(&taken_back_n, 1, __ATOMIC_RELAXED);
		*b = 0;
	}
	return *b ? 0 : (uint64_t)(uintptr_t)&t->env2;
}

unsigned long rt_probe_taken_back(void)
{
	return __atomic_load_n(&taken_back_n, __ATOMIC_RELAXED);
}

/* The program of role exit (0, 1) of session s_ on the slot of env_,
 * noted first if this is its first run: the slow path (rt_vec_call). */
static uint64_t run_slow(uint64_t s_, uint64_t regs, uint64_t env_, uint64_t exit)
{
	struct rt_session *s = (struct rt_session *)(uintptr_t)s_;
	struct vm_env *env = (struct vm_env *)(uintptr_t)env_;
	const struct vm_prog *p = exit ? s->exit : s->entry;

	if (env->slot >= s->nslots)
		return 0;
	/* a user stack's walk starts at ip, or at ip and sp (set here: a
	 * program that walks one calls a helper out of line, so it always
	 * runs here, and the fast path pays nothing) */
	env->exit = (uint32_t)exit;
	if (env->slot >= __atomic_load_n(&s->seen, __ATOMIC_RELAXED))
		note_slot(s, env->slot);
	return p ? vm_run(p, (void *)(uintptr_t)regs, env) : 0;
}

#define U(x)	((uint64_t)(uintptr_t)(x))

/* The program of role exit (0, 1) of session s on env's slot: compiled
 * code in place, else the slow path (rt_vec_call). */
static inline __attribute__((always_inline)) void run_prog(struct rt_session *s,
							   struct patch_regs *regs,
							   struct vm_env *env, bool exit)
{
	/* seen <= nslots: a slot below it is in the maps and noted */
	vm_code_fn f = s->fast[exit];

	if (__builtin_expect(f && env->slot < __atomic_load_n(&s->seen, __ATOMIC_RELAXED), 1))
		f(regs, env);
	else
		rt_vec_call(run_slow, U(s), U(regs), U(env), exit);
}

/* Levels of calls that were left without their exit (cold: longjmp,
 * exceptions; recursion only compares): the new top's S is above sp
 * (at = true: or at it).  Each level dropped, innermost first, is that
 * call's exit: the session's exit program runs for it with its depth,
 * env->unwound = 1 and regs' return register 0 while they run (put
 * back after; the time is now: when the call is found gone, an upper
 * bound).  The caller's slot is busy: the session stays while they run. */
static __attribute__((noinline, cold)) unsigned int drop_left(const struct rt_slot *st,
							     struct vm_env *env,
							     unsigned int d, uint64_t sp,
							     bool at,
							     struct patch_regs *regs)
{
	struct rt_session *s = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	uint64_t ax = regs->ax, ck = env->cookie;

	regs->ax = 0;		/* no copy: a struct copy could be a memcpy() call */
	while (d && (st->sp[d - 1] < sp || (at && st->sp[d - 1] == sp))) {
		d--;
		if (!s)
			continue;
		env->depth = d;
		env->unwound = 1;
		env->cookie = st->ck[d];	/* the call's own site */
		run_prog(s, regs, env, true);
		env->unwound = 0;
	}
	env->cookie = ck;
	regs->ax = ax;
	return d;
}

/* An entry at S = sp: its level (INLINE_DEPTH when too deep). */
static inline __attribute__((always_inline)) void push(struct rt_slot *st,
						       struct vm_env *env, uint64_t sp,
						       struct patch_regs *regs)
{
	unsigned int d = st->n;

	if (__builtin_expect(d != 0, 0) && st->sp[d - 1] <= sp)
		d = drop_left(st, env, d, sp, true, regs);
	if (__builtin_expect(d < INLINE_DEPTH, 1)) {
		st->sp[d] = sp;
		st->ck[d] = env->cookie;
		st->n = d + 1;
	} else {
		st->n = d;
	}
	env->depth = d;
}

/* An exit (S = sp - 8): whether its entry's level is on the stack; if so
 * env->depth is that level and it is popped. */
static inline __attribute__((always_inline)) bool pop(struct rt_slot *st,
						      struct vm_env *env, uint64_t sp,
						      struct patch_regs *regs)
{
	unsigned int d = st->n;

	sp -= 8;
	if (__builtin_expect(d != 0 && st->sp[d - 1] != sp, 0))
		d = drop_left(st, env, d, sp, false, regs);
	if (__builtin_expect(d == 0 || st->sp[d - 1] != sp, 0)) {
		st->n = d;
		return false;
	}
	st->n = d - 1;
	env->depth = d - 1;
	return true;
}

static inline __attribute__((always_inline)) void run(struct patch_regs *regs, bool exit,
						      bool paired, uint64_t cookie)
{
	struct rt_thread *t = &tls;
	struct vm_env *env = &t->env;
	struct rt_session *s;
	struct rt_slot *sl;
	uint64_t f0;
	uint32_t b;

	if (__builtin_expect(t->state != 1, 0) && !rt_vec_call(first_probe, U(t), 0, 0, 0))
		return;
	sl = &slots[env->slot];
	b = __atomic_load_n(&sl->busy, __ATOMIC_RELAXED);
	if (__builtin_expect(b != 0, 0)) {
		/* a signal handler's probe while this thread runs one: one
		 * writer per slot, a pairing stack of its own */
		env = (struct vm_env *)(uintptr_t)rt_vec_call(nested_env, U(t), U(&b), U(regs), 0);
		if (!env)
			return;
		sl = &slots[env->slot];
	}
	/* a count, not a flag: a probe nested in a signal handler restores
	 * what it found before this one goes on; the frame too, stored
	 * before the count (a probe nested in between puts back what it
	 * found: the frame is always the running handler's while busy) */
	f0 = __atomic_load_n(&sl->frame, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->frame, U(regs), __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&sl->busy, b + 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	env->cookie = cookie;	/* the site's (this slot is ours while busy) */
	if (paired) {
		if (!exit)
			push(sl, env, regs->sp, regs);
		else if (!pop(sl, env, regs->sp, regs))
			goto out;	/* no entry to pair with */
	}
	s = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	if (s)
		run_prog(s, regs, env, exit);
out:
	__atomic_store_n(&sl->busy, b, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&sl->frame, f0, __ATOMIC_RELAXED);
}

/* Each on a 64-byte boundary: the fast path's cache lines do not depend
 * on the size of the code the linker puts before it (a layout 32 bytes
 * off cost ~0.7 ns per call in bench/bench_inline_ab.sh). */
__attribute__((aligned(64))) void rt_on_entry(struct patch_regs *regs, void *arg)
{
	run(regs, false, (uintptr_t)arg & 1, (uintptr_t)arg >> 1);
}

__attribute__((aligned(64))) void rt_on_exit(struct patch_regs *regs, void *arg)
{
	run(regs, true, true, (uintptr_t)arg >> 1);
}

void rt_publish(struct rt_session *s)
{
	__atomic_store_n(&cur, s, __ATOMIC_RELEASE);
}

/* CLOCK_MONOTONIC in ms (the control thread's: untraced). */
static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

bool rt_unpublish(void)
{
	uint64_t until = mono_ms() + RT_BUSY_WAIT_MS;
	unsigned int hw;

	__atomic_store_n(&cur, NULL, __ATOMIC_SEQ_CST);
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)) {
		/* registered in rt_probe_init(); never fails then: wait a
		 * scheduler round on every CPU instead */
		for (int i = 0; i < 64; i++)
			sched_yield();
	}
	hw = __atomic_load_n(&hiwater, __ATOMIC_ACQUIRE);
	for (unsigned int i = 0; i < hw; i++)
		while (__atomic_load_n(&slots[i].busy, __ATOMIC_ACQUIRE)) {
			if (mono_ms() > until)
				return false;
			sched_yield();
		}
	return true;
}
