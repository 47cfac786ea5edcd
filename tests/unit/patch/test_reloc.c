// SPDX-License-Identifier: MIT
/*
 * The patcher's relocation of each kind of first instruction (reloc.c):
 * functions assembled here start with jcc rel8, jcc rel32, jmp rel8,
 * jmp rel32, loop (back to another patched instruction), jrcxz, a call
 * rel32 or an indirect call as the last patched instruction, endbr64;
 * each is armed with entry and exit probes and must compute what it
 * computes unprobed, on every path, with the probes counting every call.
 * Branches whose targets are beyond the trampoline's rel32 reach
 * (functions built in mappings 2 GiB apart) take the absolute forms.
 * Refusals name their reason: a call that is not the last patched
 * instruction, xbegin, a branch into the middle of a patched
 * instruction.  (test_patch.c's stress runs 8 threads through a
 * function whose first instruction is a jmp to the second.)
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "test.h"
#include "patch/patch.h"

long r_jcc8(long a);		/* a == 0 ? -1 : a + 1 */
long r_jcc32(long a);		/* a < 5 ? 100 : a */
long r_jmp8(long a);		/* a */
long r_jmp32(long a);		/* a * 2 */
long r_loop(long a, long b, long c, long n);	/* n > 0 ? b + n (loop to the first) */
long r_loopin(long n, long b);	/* refused: loop back into the patched bytes */
long r_jrcxz(long a);		/* a == 0 ? -7 : a + 1 */
long r_call(long a);		/* a + 101 (endbr64; call r_helper) */
long r_callind(long a);		/* a + 101 (call *r_helper_ptr(%rip)) */
long r_helper(long a);
long r_callfirst(long a);	/* refused: call *%rdx first */
long r_xbegin(long a);		/* refused */
long r_mid(long a);		/* refused: jmp into the middle of the mov */
void *r_helper_ptr = (void *)r_helper;
__asm__(
	".text\n"
	".globl r_helper\n.type r_helper,@function\n"
	"r_helper:\n  lea 100(%rdi),%rax\n  ret\n"
	".size r_helper, .-r_helper\n"
	".globl r_jcc8\n.type r_jcc8,@function\n"
	"r_jcc8:\n  test %rdi,%rdi\n  je 1f\n  lea 1(%rdi),%rax\n  ret\n"
	"1: mov $-1,%rax\n  ret\n"
	".size r_jcc8, .-r_jcc8\n"
	".globl r_jcc32\n.type r_jcc32,@function\n"
	"r_jcc32:\n  cmp $5,%rdi\n  .byte 0x0f,0x8c\n  .long 1f-.-4\n  mov %rdi,%rax\n  ret\n"
	"1: mov $100,%rax\n  ret\n"
	".size r_jcc32, .-r_jcc32\n"
	".globl r_jmp8\n.type r_jmp8,@function\n"
	"r_jmp8:\n  .byte 0xeb, 3\n  nop\n  nop\n  nop\n  mov %rdi,%rax\n  ret\n"
	".size r_jmp8, .-r_jmp8\n"
	".globl r_jmp32\n.type r_jmp32,@function\n"
	"r_jmp32:\n  .byte 0xe9\n  .long 1f-.-4\n  ud2\n1: lea (%rdi,%rdi),%rax\n  ret\n"
	".size r_jmp32, .-r_jmp32\n"
	".globl r_loop\n.type r_loop,@function\n"
	"r_loop:\n2: inc %rsi\n  loop 2b\n  mov %rsi,%rax\n  ret\n"
	".size r_loop, .-r_loop\n"
	".globl r_loopin\n.type r_loopin,@function\n"
	"r_loopin:\n  mov %rdi,%rcx\n2: inc %rsi\n  loop 2b\n  mov %rsi,%rax\n  ret\n"
	".size r_loopin, .-r_loopin\n"
	".globl r_jrcxz\n.type r_jrcxz,@function\n"
	"r_jrcxz:\n  mov %rdi,%rcx\n  jrcxz 1f\n  lea 1(%rcx),%rax\n  ret\n"
	"1: mov $-7,%rax\n  ret\n"
	".size r_jrcxz, .-r_jrcxz\n"
	".globl r_call\n.type r_call,@function\n"
	"r_call:\n  endbr64\n  call r_helper\n  add $1,%rax\n  ret\n"
	".size r_call, .-r_call\n"
	".globl r_callind\n.type r_callind,@function\n"
	"r_callind:\n  call *r_helper_ptr(%rip)\n  add $1,%rax\n  ret\n"
	".size r_callind, .-r_callind\n"
	".globl r_callfirst\n.type r_callfirst,@function\n"
	"r_callfirst:\n  call *%rdx\n  add $1,%rax\n  ret\n"
	".size r_callfirst, .-r_callfirst\n"
	".globl r_xbegin\n.type r_xbegin,@function\n"
	"r_xbegin:\n  .byte 0xc7,0xf8\n  .long 0\n  mov %rdi,%rax\n  ret\n"
	".size r_xbegin, .-r_xbegin\n"
	".globl r_mid\n.type r_mid,@function\n"
	"r_mid:\n  .byte 0xeb, 1\n  mov %rdi,%rax\n  ret\n"
	".size r_mid, .-r_mid\n");

struct counts {
	long entries, exits;
};

static void on_entry(struct patch_regs *r, void *arg)
{
	struct counts *c = arg;

	(void)r;
	__atomic_add_fetch(&c->entries, 1, __ATOMIC_RELAXED);
}

static void on_exit_(struct patch_regs *r, void *arg)
{
	struct counts *c = arg;

	(void)r;
	__atomic_add_fetch(&c->exits, 1, __ATOMIC_RELAXED);
}

typedef long (*fn1)(long);

/* Arm f (entry and exit), check want(a) == f(a) for each a, disarm and
 * check the original bytes are back. */
static void check1(const char *what, fn1 f, const long *args, const long *want, int n,
		   bool exit)
{
	struct counts c = { 0 };
	uint8_t before[32];
	char err[256];
	fn1 volatile g = f;
	struct patch_site *s;
	int right = 0;

	memcpy(before, (void *)f, sizeof(before));
	s = patch_site_new((void *)f, 32, err, sizeof(err));
	ok(s && !patch_site_arm(s, on_entry, exit ? on_exit_ : NULL, &c, err, sizeof(err)),
	   "%s: armed%s%s", what, s ? "" : ": ", s ? "" : err);
	if (!s)
		return;
	for (int i = 0; i < n; i++) {
		long got = g(args[i]);

		if (got == want[i])
			right++;
		else
			diag("%s(%ld) = %ld, want %ld", what, args[i], got, want[i]);
	}
	ok(right == n && c.entries == n && c.exits == (exit ? n : 0),
	   "%s: %d of %d calls right, entries %ld, exits %ld", what, right, n, c.entries,
	   c.exits);
	patch_site_free(s);
	ok(!memcmp(before, (void *)f, sizeof(before)), "%s: the original bytes are back", what);
}

static void refused(void *f, const char *want, const char *what)
{
	char err[256] = "";
	struct patch_site *s = patch_site_new(f, 32, err, sizeof(err));

	ok(!s && strstr(err, want), "%s refused: %s", what, s ? "(accepted)" : err);
	patch_site_free(s);
}

static void kinds(void)
{
	static const long a3[] = { 0, 5, -4 };

	for (int exit = 0; exit <= 1; exit++) {
		check1("jcc rel8", r_jcc8, a3, (const long[]){ -1, 6, -3 }, 3, exit);
		check1("jcc rel32", r_jcc32, (const long[]){ 1, 5, 9 },
		       (const long[]){ 100, 5, 9 }, 3, exit);
		check1("jmp rel8", r_jmp8, a3, a3, 3, exit);
		check1("jmp rel32", r_jmp32, a3, (const long[]){ 0, 10, -8 }, 3, exit);
		check1("jrcxz", r_jrcxz, a3, (const long[]){ -7, 6, -3 }, 3, exit);
		check1("endbr64; call rel32", r_call, a3, (const long[]){ 101, 106, 97 }, 3, exit);
		check1("call *mem(%rip)", r_callind, a3, (const long[]){ 101, 106, 97 }, 3, exit);
	}
	{	/* the count in rcx (4th argument): loop back to the first */
		struct counts c = { 0 };
		char err[256];
		long (*volatile g)(long, long, long, long) = r_loop;
		struct patch_site *s = patch_site_new((void *)r_loop, 32, err, sizeof(err));

		ok(s && !patch_site_arm(s, on_entry, on_exit_, &c, err, sizeof(err)),
		   "loop to a patched instruction: armed%s%s", s ? "" : ": ", s ? "" : err);
		if (s)
			ok(g(0, 10, 0, 3) == 13 && g(0, 0, 0, 1) == 1 && g(0, 1, 0, 50) == 51 &&
			   c.entries == 3 &&
			   c.exits == 3, "loop to a patched instruction: results and counts");
		patch_site_free(s);
	}
	refused((void *)r_callfirst, "is a call before the end", "call *%rdx first");
	refused((void *)r_xbegin, "relative operand that cannot be moved", "xbegin");
	refused((void *)r_loopin, "jumps into the patched bytes",
		"a loop from outside back into the patched bytes");
	refused((void *)r_mid, "middle of an instruction", "a jmp into a patched instruction");
}

/* ---- targets out of the trampoline's rel32 reach ------------------------- */

/*
 * At A: "test rdi,rdi; je rel32 F; lea 1(rdi),rax; ret" (and a variant
 * with "jmp rel32 F" first); at F = A + 2 GiB - 64 KiB: "mov $-1,rax;
 * ret".  The trampoline, within 1 GiB of A on the other side, cannot
 * reach F with a rel32.
 */
static void far_targets(void)
{
	const uint64_t gap = (1ull << 31) - 65536;
	uint8_t *a = NULL, *far = MAP_FAILED;

	for (uint64_t hint = 0x300000000000ull; hint < 0x380000000000ull;
	     hint += 0x10000000000ull) {
		a = mmap((void *)hint, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (a == MAP_FAILED)
			continue;
		far = mmap(a + gap, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (far == a + gap)
			break;
		if (far != MAP_FAILED)
			munmap(far, 4096);
		munmap(a, 4096);
		far = MAP_FAILED;
	}
	if (far == MAP_FAILED) {
		ok(0, "two mappings 2 GiB apart");
		return;
	}
	/* F: mov $-1,%rax; ret */
	memcpy(far, (const uint8_t[]){ 0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff, 0xc3 }, 8);
	{
		uint8_t *p = a;
		int32_t rel;

		/* je: test rdi,rdi; 0f 84 rel32; lea 1(rdi),rax; ret */
		memcpy(p, (const uint8_t[]){ 0x48, 0x85, 0xff, 0x0f, 0x84 }, 5);
		rel = (int32_t)(far - (p + 9));
		memcpy(p + 5, &rel, 4);
		memcpy(p + 9, (const uint8_t[]){ 0x48, 0x8d, 0x47, 0x01, 0xc3 }, 5);
		/* jmp: at a + 64, e9 rel32 */
		p = a + 64;
		p[0] = 0xe9;
		rel = (int32_t)(far - (p + 5));
		memcpy(p + 1, &rel, 4);
	}
	__builtin___clear_cache((char *)a, (char *)a + 4096);
	check1("je rel32 out of the trampoline's reach", (fn1)(void *)a,
	       (const long[]){ 0, 3 }, (const long[]){ -1, 4 }, 2, true);
	check1("jmp rel32 out of the trampoline's reach", (fn1)(void *)(a + 64),
	       (const long[]){ 0, 3 }, (const long[]){ -1, -1 }, 2, true);
}

int main(void)
{
	kinds();
	far_targets();
	return test_done();
}
