// SPDX-License-Identifier: MIT
/*
 * The user stack at a probe (vm_env.ustack, the get_stackid helper of
 * s.ustack keys), walked from the probe's saved registers.  The first
 * address is the registers' ip (the probed function at an entry, the
 * return address in the caller at an exit).  Each step from a frame
 * (pc, sp, bp) to its caller:
 *
 * - by the unwind table fay sent (INL_UNWIND: rows built from the
 *   files' .eh_frame, common/unwind_table.h) where pc has a row: CFA =
 *   sp or bp + off, the return address at CFA - 8, the caller's bp at
 *   CFA + off or this frame's, the caller's sp = CFA.  A return address
 *   is looked up at pc - 1 (its call), the registers' ip at an entry at
 *   ip (the function's first byte: CFA = sp + 8).  A row that says
 *   "outermost frame" ends the walk.  A signal frame's row (libc's
 *   __restore_rt) reads the interrupted rip, rsp and rbp the kernel
 *   saved above sp and goes on from that rip, looked up where it is;
 *   when it is fay's code (the runtime's, a trampoline, a compiled
 *   program: the signal interrupted a probe) the walk ends at the
 *   signal frame, without what the runtime made or called;
 * - else at an entry's first step, the return address at sp (the
 *   caller: its frame has not been made yet), as the kernel's
 *   perf_callchain_user() reads it for a uprobe;
 * - else by frame pointers: [bp] the next frame, [bp + 8] its return
 *   address.  Code without frame pointers and without a row (an object
 *   loaded after the table was made, JIT code, a row that is an
 *   expression: PLT) cuts the stack or skips a caller
 *   here, as the kernel's walker does.
 *
 * The trampoline's and the runtime's own frames are never in it: the
 * walk starts from the registers the trampoline saved.
 *
 * Every read of the stack is bounded to the mapping that holds the
 * thread's stack pointer (read once per thread from /proc/self/maps with
 * raw system calls: a probe may be in any libc function, malloc's locks
 * held), above the current sp, 8-byte aligned, and each caller's sp is
 * above the last, so a garbage frame pointer or a wrong row never faults
 * and never loops.  The table is read through unw_find() only, inside
 * the blob the control thread checked whole (unw_check()).  The walk
 * stops at the first step that fails, at a return address 0, or at max.
 * A stack pointer in no readable mapping found (never, but for a failed
 * read of the maps) gives ip alone.
 *
 * A probed function whose site has an exit handler returns into its
 * trampoline (call-through, src/patch/README.md): its frame's return
 * address is the trampoline's return point, which the walk replaces by
 * the caller's real one, PATCH_RETURN_SLOT bytes above (the return
 * points of every site the runtime armed are kept in a set: noted at
 * ARM, never removed, since trampolines are never unmapped; past
 * RT_RETURN_POINTS of them a frame shows the trampoline); the caller's
 * sp is 8 bytes above that.
 *
 * A frame whose return address is in the runtime's own code (a signal
 * handler's probe, walking down through the probe it interrupted,
 * reached by frame pointers rather than by the signal frame's row) is
 * left out (fay leaves the runtime out of the table: such a frame is
 * stepped by frame pointers, as before); after a signal frame it ends
 * the walk there, as above.
 *
 * Runs on the program's thread, in the probe's slow path (rt_vec_call()):
 * the helper that calls it is out of line.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/syscall.h>

#include "common/rawsys.h"
#include "common/unwind_table.h"
#include "rt/rt.h"

/* The thread's stack mapping as last found: [lo, hi). */
struct stk {
	uint64_t lo, hi;
	int busy;		/* a scan is running (a signal handler's probe
				 * meanwhile gets no bounds) */
};

static __thread struct stk stk __attribute__((tls_model("initial-exec")));

/* Trampolines' return points and mappings (rt_ustack_note()): sets by
 * open addressing, inserted by the control thread or a dlopen()ing
 * thread under the patch lock, read by any probe with plain loads. */
#define RT_RETURN_POINTS	4096
static uint64_t rpoints[RT_RETURN_POINTS];
/* the pages of fay's code in the process: trampolines, JIT-compiled
 * programs (noted, never removed: a page a later mapping reuses after a
 * session's programs were freed stays noted; a signal frame over code
 * there ends the walk, no more) */
static uint64_t fay_pages[RT_RETURN_POINTS];

static uint32_t rp_hash(uint64_t a)
{
	return (uint32_t)((a * 0x9e3779b97f4a7c15ull) >> 52);	/* 12 bits */
}

static void set_add(uint64_t *set, uint64_t a)
{
	uint32_t h = rp_hash(a);

	for (uint32_t i = 0; a && i < RT_RETURN_POINTS; i++) {
		uint64_t *e = &set[(h + i) % RT_RETURN_POINTS], v = 0;

		if (__atomic_load_n(e, __ATOMIC_RELAXED) == a ||
		    __atomic_compare_exchange_n(e, &v, a, false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED) || v == a)
			return;
	}
}

static bool set_has(const uint64_t *set, uint64_t a)
{
	uint32_t h = rp_hash(a);

	for (uint32_t i = 0; i < RT_RETURN_POINTS; i++) {
		uint64_t v = __atomic_load_n(&set[(h + i) % RT_RETURN_POINTS], __ATOMIC_RELAXED);

		if (v == a)
			return true;
		if (!v)
			return false;
	}
	return false;
}

void rt_ustack_note_code(uint64_t lo, size_t size)
{
	lo &= ~(uint64_t)(PATCH_TRAMP_ALIGN - 1);
	for (uint64_t p = lo; lo && size && p < lo + size; p += PATCH_TRAMP_ALIGN)
		set_add(fay_pages, p);
}

void rt_ustack_note(const struct patch_site *ps)
{
	size_t size;
	uint64_t t = patch_site_trampoline(ps, &size);

	set_add(rpoints, patch_site_return_point(ps));
	rt_ustack_note_code(t, size);
}

static bool return_point(uint64_t a)
{
	return set_has(rpoints, a);
}

/* Whether a lies in fay's code: a trampoline, a compiled program */
static bool fay_code(uint64_t a)
{
	return set_has(fay_pages, a & ~(uint64_t)(PATCH_TRAMP_ALIGN - 1));
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

/* The unwind table fay sent (INL_UNWIND, checked: rt_ustack_tables()),
 * or NULL: frame pointers only. */
static const struct unw_hdr *tables;

void rt_ustack_tables(const struct unw_hdr *t)
{
	__atomic_store_n(&tables, t, __ATOMIC_RELEASE);
}

/* Lookups of the table by pc, shared by every thread (a hot stack's
 * frames: 2 binary searches each, ~25 ns for 23 frames' worth, replaced
 * by an O(1) check): relaxed loads and stores, an entry may be torn, which
 * unw_find_hint() checks. */
#define RT_UNW_CACHE	1024
static struct {
	uint64_t pc, hint;
} ucache[RT_UNW_CACHE];

static const struct unw_row *find_row(const struct unw_hdr *t, uint64_t pc)
{
	uint32_t h = (uint32_t)((pc * 0x9e3779b97f4a7c15ull) >> 54);	/* 10 bits */
	uint64_t hint = UINT64_MAX, was;
	bool seen = __atomic_load_n(&ucache[h].pc, __ATOMIC_RELAXED) == pc;
	const struct unw_row *row;

	if (seen)
		hint = __atomic_load_n(&ucache[h].hint, __ATOMIC_RELAXED);
	was = hint;
	row = unw_find_hint(t, pc, &hint);
	if (row && !(seen && hint == was)) {	/* written only when new: no line
						 * bouncing between threads on hits */
		__atomic_store_n(&ucache[h].pc, pc, __ATOMIC_RELAXED);
		__atomic_store_n(&ucache[h].hint, hint, __ATOMIC_RELAXED);
	}
	return row;
}

/* A word of the stack at a, if [a, a + 8) lies in [lo, hi), 8-aligned
 * (not instrumented, as rt_ustack()) */
__attribute__((no_sanitize_address))
static bool word(uint64_t a, uint64_t lo, uint64_t hi, uint64_t *v)
{
	if (a % 8 || a < lo || a > hi - 8)
		return false;
	*v = *(const uint64_t *)(uintptr_t)a;
	return true;
}

/* Not instrumented (its unit test compiles this file with ASan): it
 * reads words of the thread's stack that belong to no object, inside
 * the mapping it checked. */
__attribute__((no_sanitize_address))
uint32_t rt_ustack(const struct vm_env *env, const void *ctx, uint64_t *ips, uint32_t max)
{
	const struct patch_regs *r = ctx;
	const struct unw_hdr *t = __atomic_load_n(&tables, __ATOMIC_ACQUIRE);
	uint64_t pc = r->ip, sp = r->sp, bp = r->bp, hi;
	bool first = true;	/* pc is the registers' (not a return address) */
	bool exact = !env->exit;	/* pc is where the frame is, not after a call */
	uint32_t n = 0, keep = 0;	/* keep: the frames up to a signal frame */

	if (!max)
		return 0;
	ips[n++] = pc;
	if (sp % 8 || !bounds(sp, &hi))
		return n;
	while (n < max) {
		/* a return address is looked up at the call (pc - 1); the
		 * registers' ip at an entry is the function's first byte */
		const struct unw_row *row = t ? find_row(t, exact ? pc : pc - 1) : NULL;
		uint64_t ret, nsp, nbp = bp, cfa;
		bool sig = false;

		if (row && (row->kind == UNW_RSP || row->kind == UNW_RBP)) {
			cfa = (row->kind == UNW_RSP ? sp : bp) + (uint64_t)(int64_t)row->cfa_off;
			/* the frame must lie above sp, inside the stack */
			if (cfa <= sp || !word(cfa - 8, sp, hi, &ret))
				break;
			if (row->rbp == UNW_RBP_AT &&
			    !word(cfa + (uint64_t)(int64_t)row->rbp_off, sp, hi, &nbp))
				break;
			if (row->rbp == UNW_RBP_LOST)
				nbp = 0;
			nsp = cfa;
		} else if (row && row->kind == UNW_END) {
			break;
		} else if (row && row->kind == UNW_SIGNAL) {
			/* a handler returning into the signal trampoline: the
			 * interrupted registers are saved above sp; its stack
			 * must be this one (a handler on an alternate signal
			 * stack is cut here), further up */
			uint64_t at = sp + (uint64_t)(int64_t)row->cfa_off;

			if (!word(at, sp, hi, &nsp) || !word(at + 8, sp, hi, &ret) ||
			    !word(sp + (uint64_t)(int64_t)row->rbp_off, sp, hi, &nbp) ||
			    nsp <= sp || nsp >= hi)
				break;
			sig = true;
		} else if (first && !env->exit) {
			/* no row at an entry: the caller is at sp (its
			 * frame has not been made yet) */
			if (!word(sp, sp, hi, &ret))
				break;
			nsp = sp + 8;
		} else {
			/* frame pointers: [bp] the next frame, [bp + 8] its
			 * return address */
			if (bp < sp || !word(bp + 8, sp, hi, &ret) || !word(bp, sp, hi, &nbp))
				break;
			nsp = bp + 16;
		}
		if (!ret)
			break;
		if (!sig && return_point(ret)) {
			/* the function returns into its trampoline: the
			 * caller's address is PATCH_RETURN_SLOT above, and
			 * the trampoline's frame ends 8 bytes above that */
			if (!word(nsp + PATCH_RETURN_SLOT, sp, hi, &ret) || !ret)
				break;
			nsp += PATCH_RETURN_SLOT + 8;
		}
		if (own_text(ret) || (sig && fay_code(ret))) {
			/* the runtime's code, a trampoline or a compiled
			 * program: a probe a signal interrupted.  Its frames (and libc's that
			 * the runtime called) are left out, and the walk ends
			 * at the signal frame: below it is the probe's, not
			 * the program's */
			if (keep || sig) {
				n = sig ? n : keep;
				break;
			}
		} else {
			ips[n++] = ret;
		}
		if (sig)
			keep = n - 1;	/* up to the signal trampoline's frame */
		pc = ret;
		sp = nsp;
		bp = nbp;
		first = false;
		exact = sig;	/* the interrupted pc: looked up where it is */
	}
	return n;
}
