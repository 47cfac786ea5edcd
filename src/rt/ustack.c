// SPDX-License-Identifier: MIT
/*
 * The user stack at a probe (vm_env.ustack, the get_stackid helper of
 * s.ustack keys): frame pointers, walked from the probe's saved
 * registers, as the kernel's perf_callchain_user() walks them for a
 * uprobe.  The first address is the registers' ip (the probed function
 * at an entry, the return address in the caller at an exit); at an entry
 * the return address at sp (the caller: its frame has not been made yet)
 * comes next; then each frame from bp: [fp] the next frame, [fp + 8] its
 * return address.  The trampoline's and the runtime's own frames are
 * never in it: the walk starts from the registers the trampoline saved.
 *
 * Every read is bounded to the mapping that holds the thread's stack
 * pointer (read once per thread from /proc/self/maps with raw system
 * calls: a probe may be in any libc function, malloc's locks held), so a
 * garbage frame pointer (code built without frame pointers keeps other
 * data in bp) never faults: a frame must lie in [sp, the mapping's end),
 * 8-byte aligned, each above the last.  The walk stops at the first frame
 * that does not, at a return address 0, or at max.  Code without frame
 * pointers therefore cuts the stack (as the kernel's walker does): its
 * bp is not a frame, or it skips its caller.  A stack pointer in no
 * readable mapping found (never, but for a failed read of the maps) gives
 * ip alone.
 *
 * A probed function whose site has an exit handler returns into its
 * trampoline (call-through, src/patch/README.md): its frame's return
 * address is the trampoline's return point, which the walk replaces by
 * the caller's real one, PATCH_RETURN_SLOT bytes above (the return
 * points of every site the runtime armed are kept in a set: noted at
 * ARM, never removed, since trampolines are never unmapped; past
 * RT_RETURN_POINTS of them a frame shows the trampoline).
 *
 * A frame whose return address is in the runtime's own code (a signal
 * handler's probe, walking down through the probe it interrupted) is
 * left out; the interrupted trampoline and JIT code have no frames of
 * their own (rbp is the program's, or the JIT's BPF frame: the walk
 * may then stop there).
 *
 * Runs on the program's thread, in the probe's slow path (rt_vec_call()):
 * the helper that calls it is out of line.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/syscall.h>

#include "common/rawsys.h"
#include "rt/rt.h"

/* The thread's stack mapping as last found: [lo, hi). */
struct stk {
	uint64_t lo, hi;
	int busy;		/* a scan is running (a signal handler's probe
				 * meanwhile gets no bounds) */
};

static __thread struct stk stk __attribute__((tls_model("initial-exec")));

/* Trampolines' return points (rt_ustack_note()): open addressing,
 * inserted by the control thread or a dlopen()ing thread under the
 * patch lock, read by any probe with plain loads. */
#define RT_RETURN_POINTS	4096
static uint64_t rpoints[RT_RETURN_POINTS];

static uint32_t rp_hash(uint64_t a)
{
	return (uint32_t)((a * 0x9e3779b97f4a7c15ull) >> 52);	/* 12 bits */
}

void rt_ustack_note(const struct patch_site *ps)
{
	uint64_t a = patch_site_return_point(ps);
	uint32_t h = rp_hash(a);

	for (uint32_t i = 0; a && i < RT_RETURN_POINTS; i++) {
		uint64_t *e = &rpoints[(h + i) % RT_RETURN_POINTS], v = 0;

		if (__atomic_load_n(e, __ATOMIC_RELAXED) == a ||
		    __atomic_compare_exchange_n(e, &v, a, false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED) || v == a)
			return;
	}
}

static bool return_point(uint64_t a)
{
	uint32_t h = rp_hash(a);

	for (uint32_t i = 0; i < RT_RETURN_POINTS; i++) {
		uint64_t v = __atomic_load_n(&rpoints[(h + i) % RT_RETURN_POINTS],
					     __ATOMIC_RELAXED);

		if (v == a)
			return true;
		if (!v)
			return false;
	}
	return false;
}

/* The readable mapping holding sp, from /proc/self/maps ("lo-hi rwxp
 * ..." per line, in address order), into *lo, *hi: true if found. */
static bool scan(uint64_t sp, uint64_t *lo, uint64_t *hi)
{
	char buf[2048];
	uint64_t v[2] = { 0, 0 };	/* lo, hi */
	int field = 0;		/* 0: lo, 1: hi, 2: the first permission, 3: the rest */
	bool found = false, done = false;
	long fd = raw_syscall(SYS_open, (long)"/proc/self/maps", O_RDONLY | O_CLOEXEC, 0, 0);

	if (fd < 0)
		return false;
	while (!done) {
		long n = raw_syscall(SYS_read, fd, (long)buf, sizeof(buf), 0);

		if (n <= 0)
			break;
		for (long i = 0; i < n && !done; i++) {
			char c = buf[i];

			if (c == '\n') {
				field = 0;
				v[0] = v[1] = 0;
				continue;
			}
			switch (field) {
			case 0: case 1:	/* "lo-hi ": lower-case hex */
				if (c == (field ? ' ' : '-'))
					field++;
				else
					v[field] = v[field] << 4 |
						   (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10) % 16;
				break;
			case 2:
				field = 3;
				if (sp >= v[0] && sp < v[1]) {
					found = c == 'r';
					*lo = v[0];
					*hi = v[1];
					done = true;
				} else if (v[0] > sp) {
					done = true;	/* past it: in no mapping */
				}
				break;
			default:
				break;
			}
		}
	}
	raw_syscall(SYS_close, fd, 0, 0, 0);
	return found;
}

/* The runtime's own code (its executable mapping, found once): a
 * frame there is a probe's that a signal handler interrupted (the
 * handler's probe walks down through it): left out. */
static uint64_t own_lo, own_hi;
static int own_state;		/* 0: not looked up, 1: known, -1: not found */

static bool own_text(uint64_t a)
{
	int st = __atomic_load_n(&own_state, __ATOMIC_ACQUIRE);
	uint64_t lo, hi;

	if (!st) {	/* two threads at once find the same */
		st = scan((uint64_t)(uintptr_t)&rt_ustack, &lo, &hi) ? 1 : -1;
		if (st == 1) {
			own_lo = lo;
			own_hi = hi;
		}
		__atomic_store_n(&own_state, st, __ATOMIC_RELEASE);
	}
	return st == 1 && a >= own_lo && a < own_hi;
}

/* Bounds for a walk from sp: the mapping that holds it (cached per
 * thread; looked up again when sp leaves it: a signal stack, a
 * coroutine's). */
static bool bounds(uint64_t sp, uint64_t *hi)
{
	struct stk *t = &stk;
	uint64_t lo, h;

	if (sp >= t->lo && sp < t->hi) {
		*hi = t->hi;
		return true;
	}
	if (t->busy)
		return false;
	t->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (scan(sp, &lo, &h)) {
		t->lo = lo;
		t->hi = h;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t->busy = 0;
		*hi = h;
		return true;
	}
	t->busy = 0;
	return false;
}

/* Not instrumented (its unit test compiles this file with ASan): it
 * reads words of the thread's stack that belong to no object, inside
 * the mapping it checked. */
__attribute__((no_sanitize_address))
uint32_t rt_ustack(const struct vm_env *env, const void *ctx, uint64_t *ips, uint32_t max)
{
	const struct patch_regs *r = ctx;
	uint64_t sp = r->sp, fp = r->bp, floor = sp, hi;
	uint32_t n = 0;

	if (!max)
		return 0;
	ips[n++] = r->ip;
	if (sp % 8 || !bounds(sp, &hi))
		return n;
	if (!env->exit && n < max && sp + 8 <= hi) {
		uint64_t ret = *(const uint64_t *)(uintptr_t)sp;

		if (!ret)
			return n;
		ips[n++] = ret;
		floor = sp + 8;
	}
	while (n < max) {
		const uint64_t *f = (const uint64_t *)(uintptr_t)fp;

		if (fp < floor || fp % 8 || fp > hi - 16)
			break;
		uint64_t ret = f[1];

		if (!ret)
			break;
		if (return_point(ret)) {
			/* the probed function returns into its trampoline:
			 * the caller's address is above the return point's sp */
			if (fp + 16 + PATCH_RETURN_SLOT + 8 > hi)
				break;
			ret = *(const uint64_t *)(uintptr_t)(fp + 16 + PATCH_RETURN_SLOT);
		}
		if (!own_text(ret))
			ips[n++] = ret;
		floor = fp + 16;
		fp = f[0];
	}
	return n;
}
