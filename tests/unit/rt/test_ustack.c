// SPDX-License-Identifier: MIT
/*
 * The inline runtime's user-stack walker (src/rt/ustack.c, s.ustack of
 * inline probes), on frames built by hand: the walk from the probe's
 * registers (ip, the return address at sp at an entry, then the frame
 * pointer chain), its bounds (every frame inside the mapping of the
 * stack pointer, above sp, each above the last, 8-byte aligned), depth
 * limits, and garbage frame pointers (code without frame pointers keeps
 * data in rbp) that must never fault: random values, values in and
 * around the stack, chains that loop or go down, a frame straddling the
 * end of the mapping, a stack pointer in an unreadable mapping.
 *
 * With an unwind table (code without frame pointers, INL_UNWIND): steps
 * by its rows (CFA = rsp or rbp + off, rbp restored from where the row
 * says), by frame pointers where a pc has no row or a row says so, and
 * stops at an outermost frame; a row whose CFA is not above sp ends the
 * walk; random tables (that pass the check) over garbage stacks never
 * fault either.
 *
 * The walker is the runtime's (libfay-probe.so is not in
 * libfay-internal.a): its one file is compiled into this test.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"
#include "rt/ustack.c"

static struct vm_env entry_env = { .exit = 0 }, exit_env = { .exit = 1 };

/* regs at a probe: ip, sp, bp */
static struct patch_regs regs(uint64_t ip, const void *sp, uint64_t bp)
{
	struct patch_regs r;

	memset(&r, 0, sizeof(r));
	r.ip = ip;
	r.sp = (uint64_t)(uintptr_t)sp;
	r.bp = bp;
	return r;
}

#define U(p) ((uint64_t)(uintptr_t)(p))

/* A hand-made stack in buf (words): at sp (buf) the return address
 * 0xB0, then frames at buf + 4, + 10, + 20: [next, ret] each, the last
 * one's next 0. */
static void chain(uint64_t *buf)
{
	memset(buf, 0, 64 * 8);
	buf[0] = 0xB0;			/* the caller, at sp */
	buf[4] = U(&buf[10]);		/* caller's frame: next */
	buf[5] = 0xA0;			/* its return address (caller's caller) */
	buf[10] = U(&buf[20]);
	buf[11] = 0x90;
	buf[20] = 0;
	buf[21] = 0x80;
}

static void walks(void)
{
	uint64_t buf[64], ips[127];
	struct patch_regs r;
	uint32_t n;

	chain(buf);
	r = regs(0xC0, buf, U(&buf[4]));
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 5 && ips[0] == 0xC0 && ips[1] == 0xB0 && ips[2] == 0xA0 && ips[3] == 0x90 &&
	   ips[4] == 0x80, "entry: ip, the caller at sp, then each frame's return (%u)", n);
	n = rt_ustack(&exit_env, &r, ips, 127);
	ok(n == 4 && ips[0] == 0xC0 && ips[1] == 0xA0 && ips[3] == 0x80,
	   "exit: ip (the return address), then the frames, no read at sp (%u)", n);
	n = rt_ustack(&entry_env, &r, ips, 3);
	ok(n == 3 && ips[2] == 0xA0, "the depth asked for is kept (3 of 5)");
	n = rt_ustack(&entry_env, &r, ips, 1);
	ok(n == 1 && ips[0] == 0xC0, "depth 1: ip only");
	is_int((int)rt_ustack(&entry_env, &r, ips, 0), 0, "depth 0: nothing");

	buf[11] = U(&rt_ustack) + 1;	/* a return into the runtime's code */
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 4 && ips[2] == 0xA0 && ips[3] == 0x80,
	   "a frame returning into the runtime (an interrupted probe's) is left out (%u)", n);
	chain(buf);
	buf[21] = 0;
	n = rt_ustack(&entry_env, &r, ips, 127);
	is_int((int)n, 4, "a return address 0 ends the stack");
	chain(buf);
	buf[0] = 0;
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 1, "a caller 0 at sp ends it at ip");
}

/* A long chain: frames every 4 words, 200 of them. */
static void deep(void)
{
	static uint64_t dummy;
	uint64_t *buf = alloca(4 * 210 * 8), ips[127];
	struct patch_regs r;
	uint32_t n;

	(void)dummy;
	buf[0] = 0xB0;
	for (int i = 1; i <= 200; i++) {
		buf[4 * i] = i < 200 ? U(&buf[4 * (i + 1)]) : 0;
		buf[4 * i + 1] = 0x1000 + (uint64_t)i;
	}
	r = regs(0xC0, buf, U(&buf[4]));
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 127 && ips[126] == 0x1000 + 125, "a 200-frame chain stops at 127 frames");
}

static void bad_chains(void)
{
	uint64_t buf[64], ips[127];
	struct patch_regs r;
	uint32_t n;

	chain(buf);
	buf[10] = U(&buf[10]);		/* a frame pointing at itself */
	r = regs(0xC0, buf, U(&buf[4]));
	n = rt_ustack(&entry_env, &r, ips, 127);
	is_int((int)n, 4, "a frame that points at itself: walked once, then stopped");
	chain(buf);
	buf[10] = U(&buf[4]);		/* a loop back down */
	n = rt_ustack(&entry_env, &r, ips, 127);
	is_int((int)n, 4, "a chain that goes back down: stopped");
	chain(buf);
	buf[4] = U(&buf[5]);		/* overlapping the frame it came from */
	n = rt_ustack(&entry_env, &r, ips, 127);
	is_int((int)n, 3, "a next frame inside the last one: stopped");
	chain(buf);
	buf[4] = U(&buf[10]) + 3;	/* unaligned */
	n = rt_ustack(&entry_env, &r, ips, 127);
	is_int((int)n, 3, "an unaligned frame pointer: stopped");
	r = regs(0xC0, buf, U(&buf[0]) - 64);	/* below sp */
	n = rt_ustack(&entry_env, &r, ips, 127);
	is_int((int)n, 2, "a frame pointer below sp: ip and the caller only");
	r = regs(0xC0, buf, U(&buf[0]));	/* sp itself: the return address */
	n = rt_ustack(&entry_env, &r, ips, 127);
	is_int((int)n, 2, "a frame pointer at sp (the caller's slot): not a frame");
	r = regs(0xC0, buf, 0);
	is_int((int)rt_ustack(&entry_env, &r, ips, 127), 2, "frame pointer 0: cut");
	r = regs(0xC0, buf, UINT64_MAX - 7);
	is_int((int)rt_ustack(&entry_env, &r, ips, 127), 2, "frame pointer ~0: cut, no wrap");
	r = regs(0xC0, (char *)buf + 4, U(&buf[4]));
	is_int((int)rt_ustack(&entry_env, &r, ips, 127), 1, "an unaligned sp: ip only");
}

/* An "alternate stack" of 2 pages in its own mapping between two
 * unreadable ones: the walk stays inside it. */
static void own_mapping(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 4 * (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t *st, ips[127];
	struct patch_regs r;
	uint32_t n;
	size_t words = 2 * (size_t)pg / 8;

	ok(m != MAP_FAILED, "a mapping for a stack of its own");
	if (m == MAP_FAILED)
		return;
	mprotect(m + pg, 2 * (size_t)pg, PROT_READ | PROT_WRITE);
	st = (uint64_t *)(m + pg);
	st[0] = 0xB0;
	st[4] = U(&st[words - 2]);	/* the last frame fits exactly */
	st[5] = 0xA0;
	st[words - 2] = U(&st[words]);	/* next: the unreadable page above */
	st[words - 1] = 0x90;
	r = regs(0xC0, st, U(&st[4]));
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 4 && ips[3] == 0x90, "a stack in its own mapping: walked to its last word (%u)", n);
	st[words - 4] = U(&st[words - 1]);	/* a frame straddling the end */
	st[4] = U(&st[words - 4]);
	st[words - 3] = 0x91;
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 4 && ips[3] == 0x91, "a frame whose words pass the mapping's end: not read (%u)", n);
	r = regs(0xC0, m, U(m) + 64);		/* sp in the unreadable page */
	is_int((int)rt_ustack(&entry_env, &r, ips, 127), 1,
	       "sp in an unreadable mapping: ip only, nothing read");
	r = regs(0xC0, st, U(&st[4]));		/* back on this mapping after another */
	is_int((int)rt_ustack(&entry_env, &r, ips, 127), 4, "the bounds follow sp from mapping to mapping");
	munmap(m, 4 * (size_t)pg);
}

static sigjmp_buf jb;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Garbage frame pointers and stack words, 200000 walks: none faults. */
static void garbage(void)
{
	uint64_t buf[512], ips[127];
	volatile long faults = 0, walks = 0, deepest = 0;
	struct sigaction sa = { .sa_handler = on_segv }, old_segv, old_bus;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	for (volatile int i = 0; i < 200000; i++) {
		struct patch_regs r;
		uint64_t bp;
		uint32_t n;

		if (sigsetjmp(jb, 1)) {
			faults++;
			continue;
		}
		/* stack words: half pointers into buf and around, half noise */
		for (int w = 0; w < 512; w++)
			buf[w] = rnd() & 1 ? U(buf) + 8 * (rnd() % 600) - 64 + (rnd() % 3) * 8 : rnd();
		switch (i % 4) {
		case 0: bp = rnd(); break;
		case 1: bp = U(&buf[rnd() % 512]); break;
		case 2: bp = U(buf) + (rnd() % (1u << 20)) - (1u << 19); break;
		default: bp = U(buf) + (rnd() % (1u << 24)); break;
		}
		r = regs(0xC0, &buf[rnd() % 8], bp);
		n = rt_ustack(i & 8 ? &exit_env : &entry_env, &r, ips, 127);
		walks++;
		if ((long)n > deepest)
			deepest = n;
	}
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	is_int((int)faults, 0, "200000 walks of garbage frame pointers and stack words: no fault "
	       "(deepest %ld frames)", (long)deepest);
	ok(walks == 200000, "every walk returned");
}

/* A table of one module at [0x10000, 0x20000) (bias 0x10000) of rows
 * (the last one UNW_NONE), in blob (checked), published to the walker */
static void *table(const struct unw_row *rows, uint32_t n)
{
	size_t len = sizeof(struct unw_hdr) + sizeof(struct unw_mod) + n * sizeof(*rows);
	unsigned char *b = aligned_alloc(8, (len + 7) / 8 * 8);
	struct unw_hdr h = { UNW_MAGIC, UNW_VERSION, 1, n, len };
	struct unw_mod m = { 0x10000, 0x20000, 0x10000, 0, n };
	char why[128];

	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), &m, sizeof(m));
	memcpy(b + sizeof(h) + sizeof(m), rows, n * sizeof(*rows));
	if (unw_check(b, len, why, sizeof(why))) {
		diag("a bad test table: %s", why);
		free(b);
		return NULL;
	}
	rt_ustack_tables((const void *)b);
	return b;
}

static void tables_walk(void)
{
	struct unw_row rows[] = {
		{ .pc = 0x100, .kind = UNW_RSP, .cfa_off = 8 },		/* F: its entry */
		{ .pc = 0x101, .kind = UNW_RSP, .cfa_off = 16 },
		{ .pc = 0x180, .kind = UNW_NONE },
		{ .pc = 0x200, .kind = UNW_RSP, .cfa_off = 8 },		/* G */
		{ .pc = 0x204, .kind = UNW_RSP, .cfa_off = 48, .rbp = UNW_RBP_AT, .rbp_off = -16 },
		{ .pc = 0x280, .kind = UNW_NONE },
		{ .pc = 0x300, .kind = UNW_RBP, .cfa_off = 16, .rbp = UNW_RBP_AT, .rbp_off = -16 },
		{ .pc = 0x380, .kind = UNW_END },			/* _start */
		{ .pc = 0x400, .kind = UNW_NONE },
	};
	uint64_t buf[64], ips[127];
	struct patch_regs r;
	uint32_t n;
	void *t;

	memset(buf, 0, sizeof(buf));
	buf[0] = 0x10250;		/* F's caller: G + 0x50 */
	buf[5] = U(&buf[10]);		/* G saved rbp at its CFA - 16 */
	buf[6] = 0x30500;		/* G's caller H: no row, frame pointers */
	buf[10] = U(&buf[14]);		/* H's frame: next, return */
	buf[11] = 0x10310;		/* I: CFA = rbp + 16 */
	buf[14] = 0;
	buf[15] = 0x10400;		/* into _start's row: the end */
	t = table(rows, 9);
	ok(t != NULL, "a table of 9 rows");
	if (!t)
		return;
	r = regs(0x10100, buf, 0x5555);	/* F's entry; rbp garbage (no frame pointers) */
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 5 && ips[1] == 0x10250 && ips[2] == 0x30500 && ips[3] == 0x10310 &&
	   ips[4] == 0x10400, "by the table: F, G (rsp + 48, rbp restored), H by frame "
	   "pointers, I (rbp + 16), stopped at the outermost frame (%u)", n);
	r = regs(0x10250, &buf[1], 0x5555);	/* at F's exit: ip in G, G's sp */
	n = rt_ustack(&exit_env, &r, ips, 127);
	ok(n == 4 && ips[1] == 0x30500 && ips[3] == 0x10400, "at an exit: the same from G (%u)", n);
	rows[4].cfa_off = -8;		/* a CFA below sp */
	free(t);
	t = table(rows, 9);
	r = regs(0x10100, buf, 0x5555);
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(t && n == 2, "a row whose CFA is not above sp ends the walk (%u)", n);
	rows[4].cfa_off = 1 << 30;	/* past the stack's mapping */
	free(t);
	t = table(rows, 9);
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(t && n == 2, "a CFA past the stack's mapping: not read (%u)", n);
	rows[4].cfa_off = 48;
	rows[4].kind = UNW_FP;		/* PLT, signal frame: frame pointers */
	free(t);
	t = table(rows, 9);
	r = regs(0x10100, buf, U(&buf[10]));
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(t && n == 4 && ips[1] == 0x10250 && ips[2] == 0x10310 && ips[3] == 0x10400,
	   "a row that says frame pointers: G stepped by rbp (H's frame: H itself is "
	   "skipped, as a frame-pointer walk does), then I by its row (%u)", n);
	rt_ustack_tables(NULL);
	free(t);
	r = regs(0x10100, buf, 0x5555);
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 2, "no table: the caller at sp, then cut at the garbage rbp (%u)", n);
}

/* A signal handler's probe: the handler returns into the signal
 * trampoline (a UNW_SIGNAL row, one byte before it as glibc's FDE
 * starts), whose frame holds the interrupted registers: the walk goes on
 * from the interrupted pc, looked up where it is (not as a return
 * address). */
static void signal_walk(void)
{
	struct unw_row rows[] = {
		{ .pc = 0x100, .kind = UNW_RSP, .cfa_off = 8 },		/* F */
		{ .pc = 0x101, .kind = UNW_RSP, .cfa_off = 16 },
		{ .pc = 0x180, .kind = UNW_NONE },
		{ .pc = 0x200, .kind = UNW_RSP, .cfa_off = 8 },		/* G */
		{ .pc = 0x204, .kind = UNW_RSP, .cfa_off = 48, .rbp = UNW_RBP_AT, .rbp_off = -16 },
		{ .pc = 0x280, .kind = UNW_NONE },
		{ .pc = 0x380, .kind = UNW_END },			/* _start */
		{ .pc = 0x400, .kind = UNW_NONE },
		{ .pc = 0x4ff, .kind = UNW_SIGNAL, .cfa_off = 160, .rbp = UNW_RBP_AT, .rbp_off = 120 },
		{ .pc = 0x510, .kind = UNW_NONE },
	};
	uint64_t buf[64], ips[127];
	struct patch_regs r;
	uint32_t n;
	void *t = table(rows, 10);

	ok(t != NULL, "a table with a signal trampoline's row");
	if (!t)
		return;
	memset(buf, 0, sizeof(buf));
	buf[0] = 0x10500;		/* the handler F returns into the trampoline */
	buf[1 + 15] = 0x7777;		/* the interrupted rbp */
	buf[1 + 20] = U(&buf[30]);	/* ... rsp */
	buf[1 + 21] = 0x10101;		/* ... rip: in F, after its push */
	buf[31] = 0x10250;		/* F's caller G */
	buf[37] = 0x10400;		/* G's caller: _start */
	r = regs(0x10100, buf, 0x5555);
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 5 && ips[1] == 0x10500 && ips[2] == 0x10101 && ips[3] == 0x10250 &&
	   ips[4] == 0x10400, "through the signal frame: the interrupted pc (by its own row, "
	   "rsp + 16), its caller, to the outermost frame (%u)", n);
	buf[1 + 21] = U(&rt_ustack) + 1;	/* the signal interrupted the runtime */
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 2 && ips[1] == 0x10500, "a signal that interrupted a probe: the walk ends at "
	   "the signal frame, no frame of the runtime (%u)", n);
	buf[1 + 21] = 0x10101;
	buf[31] = U(&rt_ustack) + 1;	/* ... in a function the runtime called */
	n = rt_ustack(&entry_env, &r, ips, 127);
	ok(n == 2 && ips[1] == 0x10500, "... in a function the runtime called: that frame is "
	   "left out too (%u)", n);
	buf[31] = 0x10250;
	buf[1 + 20] = U(&buf[0]);	/* an interrupted rsp below the frame */
	n = rt_ustack(&entry_env, &r, ips, 127);
	is_int((int)n, 2, "an interrupted rsp not above the signal frame: cut there");
	buf[1 + 20] = U(&buf[30]) + (1u << 30);	/* on another stack (sigaltstack) */
	n = rt_ustack(&entry_env, &r, ips, 127);
	is_int((int)n, 2, "an interrupted rsp outside this stack's mapping: cut there");
	rt_ustack_tables(NULL);
	free(t);
}

/* Random tables that pass the check, over garbage stacks: no fault. */
static void garbage_tables(void)
{
	uint64_t buf[512], ips[127];
	volatile long faults = 0, walks = 0, deepest = 0, tables_ok = 0;
	struct sigaction sa = { .sa_handler = on_segv }, old_segv, old_bus;
	struct unw_row rows[64];

	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	for (volatile int i = 0; i < 2000; i++) {
		uint32_t pc = (uint32_t)(rnd() % 64);
		void *t;

		for (int k = 0; k < 63; k++) {
			rows[k].pc = pc;
			pc += 1 + (uint32_t)(rnd() % 256);
			rows[k].kind = (uint8_t)(rnd() % 6);
			rows[k].cfa_off = rnd() & 1 ? (int32_t)(rnd() % 256) - 32 : (int32_t)rnd();
			rows[k].rbp = (uint8_t)(rnd() % 3);
			rows[k].rbp_off = rnd() & 1 ? (int16_t)(-8 * (int)(rnd() % 8)) : (int16_t)rnd();
		}
		rows[63] = (struct unw_row){ .pc = pc, .kind = UNW_NONE };
		t = table(rows, 64);
		tables_ok += t != NULL;
		for (volatile int j = 0; t && j < 100; j++) {
			struct patch_regs r;
			uint32_t n;

			if (sigsetjmp(jb, 1)) {
				faults++;
				continue;
			}
			for (int w = 0; w < 512; w++)
				buf[w] = rnd() % 3 == 0 ? 0x10000 + rnd() % 0x4000 :
					 rnd() & 1 ? U(buf) + 8 * (rnd() % 600) - 64 : rnd();
			r = regs(0x10000 + rnd() % 0x4000, &buf[rnd() % 8],
				 rnd() & 1 ? U(&buf[rnd() % 512]) : rnd());
			n = rt_ustack(j & 1 ? &exit_env : &entry_env, &r, ips, 127);
			walks++;
			if ((long)n > deepest)
				deepest = n;
		}
		rt_ustack_tables(NULL);
		free(t);
	}
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	ok(tables_ok == 2000, "2000 random tables pass the check");
	is_int((int)faults, 0, "%ld walks by random tables over garbage stacks: no fault "
	       "(deepest %ld frames)", (long)walks, (long)deepest);
}

int main(void)
{
	walks();
	tables_walk();
	signal_walk();
	garbage_tables();
	deep();
	bad_chains();
	own_mapping();
	garbage();
	return test_done();
}
