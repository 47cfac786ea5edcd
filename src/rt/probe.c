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
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/membarrier.h>

#include "fay/trace.h"
#include "rt/rt.h"

struct rt_thread {
	int state;		/* 0: not seen, 1: has a slot, -1: untraced, 2: setting up */
	int nstate;		/* the same for env2 */
	struct vm_env env;
	struct vm_env env2;	/* a probe nested in a running one (a signal
				 * handler's), or a call nested in a probed
				 * call: a slot of its own */
	unsigned int depth;	/* probed calls entered and not yet left */
};

struct busy {
	uint32_t v;
	char pad[60];
} __attribute__((aligned(64)));

static __thread struct rt_thread tls __attribute__((tls_model("initial-exec")));
static struct busy busy[RT_MAX_SLOTS];
static uint64_t used[RT_MAX_SLOTS / 64];
static unsigned int hiwater;		/* slots ever handed out */
static struct rt_session *cur;
static bool inert;
static pthread_key_t key;
/* libfay's fay_current_span() (LIBFAY_0.2.0), when the process has it */
static int (*fay_cur)(struct fay_current *out, size_t size, int version);

static void release_slot(unsigned int s)
{
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

	if (err)
		return -err;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0))
		return -errno;
	return 0;
}

void rt_probe_inert(void)
{
	inert = true;
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

static bool thread_init(struct rt_thread *t)
{
	unsigned int s;

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
	t->env.pid_tgid = (uint64_t)getpid() << 32 | (uint32_t)syscall(SYS_gettid);
	t->env.uid_gid = (uint64_t)getgid() << 32 | getuid();
	t->env.cpu = (uint32_t)sched_getcpu();
	t->env.now = vm_tsc_now;	/* clock_gettime() without an invariant TSC */
	t->env.span = rt_span;
	prctl(PR_GET_NAME, t->env.comm, 0, 0, 0);
	t->state = 1;
	return true;
}

/* The nested slot (t->state is 1: the key's destructor frees it too). */
static bool nested_init(struct rt_thread *t)
{
	unsigned int s;

	t->nstate = 2;
	s = take_slot();
	if (s == RT_MAX_SLOTS) {
		t->nstate = -1;
		return false;
	}
	t->env2 = t->env;
	t->env2.slot = s;
	t->nstate = 1;
	return true;
}

/* A slot's first run in session s: the reader merges the noted slots. */
static __attribute__((noinline, cold)) void note_slot(struct rt_session *s, unsigned int slot)
{
	unsigned int v = __atomic_load_n(&s->seen, __ATOMIC_RELAXED);

	for (int i = 0; i < s->nmaps; i++)
		vm_map_note_slot(s->maps[i], slot);
	while (v < slot + 1 && !__atomic_compare_exchange_n(&s->seen, &v, slot + 1, false,
							    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* The slot of a nested probe (lvl > 0: a call nested in a probed call;
 * else a signal handler's probe while this thread runs one, *b != 0):
 * the thread's second slot, NULL when that one is busy too (deeper
 * nesting is not traced); *b gets its busy count. */
static __attribute__((noinline, cold)) struct vm_env *nested_env(struct rt_thread *t, uint32_t *b)
{
	if (t->nstate != 1 && (t->nstate != 0 || !nested_init(t)))
		return NULL;
	*b = __atomic_load_n(&busy[t->env2.slot].v, __ATOMIC_RELAXED);
	return *b ? NULL : &t->env2;
}

static inline __attribute__((always_inline)) void run(struct patch_regs *regs, bool exit,
						      bool paired)
{
	struct rt_thread *t = &tls;
	struct vm_env *env = &t->env;
	struct rt_session *s;
	const struct vm_prog *p;
	unsigned int lvl = 0;
	uint32_t b;

	if (__builtin_expect(t->state != 1, 0) && (t->state != 0 || !thread_init(t)))
		return;
	if (__builtin_expect(inert, 0))
		return;
	if (paired) {
		/* the outermost probed call pairs in the first slot, any call
		 * nested in it (recursion, a signal handler's) in the second:
		 * the entry record of each is its own.  Counted up before the
		 * entry program and down after the exit program (a signal
		 * meanwhile nests); after a skipped exit (longjmp) every call
		 * uses the second: still paired, the innermost only. */
		unsigned int d = t->depth;

		lvl = exit ? d - (d != 0) : d;
		if (!exit)
			t->depth = d + 1;
	}
	b = __atomic_load_n(&busy[env->slot].v, __ATOMIC_RELAXED);
	if (__builtin_expect(lvl != 0 || b != 0, 0)) {
		/* a nested call, or a signal handler's probe while this thread
		 * runs one: one writer per slot, an entry record of its own */
		env = nested_env(t, &b);
		if (!env)
			goto out;
	}
	/* a count, not a flag: a probe nested in a signal handler restores
	 * what it found before this one goes on */
	__atomic_store_n(&busy[env->slot].v, b + 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	s = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	if (s && env->slot < s->nslots) {
		if (__builtin_expect(env->slot >= __atomic_load_n(&s->seen, __ATOMIC_RELAXED), 0))
			note_slot(s, env->slot);
		p = exit ? s->exit : s->entry;
		if (p)
			vm_run(p, regs, env);
	}
	__atomic_store_n(&busy[env->slot].v, b, __ATOMIC_RELEASE);
out:
	if (paired && exit)
		t->depth = lvl;	/* nested calls left it as they found it */
}

void rt_on_entry(struct patch_regs *regs, void *arg)
{
	run(regs, false, arg != NULL);
}

void rt_on_exit(struct patch_regs *regs, void *arg)
{
	run(regs, true, true);
}

void rt_publish(struct rt_session *s)
{
	__atomic_store_n(&cur, s, __ATOMIC_RELEASE);
}

void rt_unpublish(void)
{
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
		while (__atomic_load_n(&busy[i].v, __ATOMIC_ACQUIRE))
			sched_yield();
}
