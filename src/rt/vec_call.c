// SPDX-License-Identifier: MIT
/*
 * rt_vec_call(): the runtime's slow paths with the whole extended state
 * of the traced thread saved around them (rt.h).
 *
 * The sites are armed with PATCH_HANDLERS_KEEP_VECTORS: the trampolines
 * save the general registers only, and the handlers (probe.c) are
 * compiled general-regs-only.  Whatever may run other code (libc: glibc's
 * string functions use AVX2 or AVX-512 and end in vzeroupper, which
 * zeroes the upper halves of ymm0-15 / zmm0-15; the interpreter; a
 * helper called out of line) runs inside rt_vec_call(), which saves
 * every state component the OS enabled in XCR0 (x87, SSE, the upper
 * halves of ymm, the opmask and zmm registers, PKRU, AMX tiles) with
 * XSAVEC (XSAVE where the CPU has no XSAVEC) and restores it with
 * XRSTOR.  The probed function's vector arguments (ymm0-7 / zmm0-7 at
 * entry) and result (ymm0 / zmm0 / st0 at exit) are then what it was
 * called with and returned, whatever the slow path ran.
 *
 * The area is on the stack (64-byte aligned), sized at start-up from
 * CPUID leaf 0xD for the features XCR0 enables; before that, and on a
 * CPU or kernel without XSAVE (no OSXSAVE), FXSAVE / FXRSTOR (x87 and
 * xmm0-15, all there is then).  Not XSAVEOPT: its "modified"
 * optimisation skips components unchanged since the last XRSTOR from
 * the same address, which on a reused stack address would leave another
 * frame's bytes in the area.
 */
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>

#include "rt/rt.h"

#pragma GCC target("general-regs-only")

enum { VS_FXSAVE, VS_XSAVE, VS_XSAVEC };

/* Read by rt_vec_call()'s code: size (bytes of the area, a multiple of
 * 64), how (VS_*), mask (the XSAVE request: XCR0). */
struct rt_vecsave {
	uint32_t size;
	uint32_t how;
	uint32_t mask_lo, mask_hi;
};
struct rt_vecsave rt_vecsave __attribute__((visibility("hidden"), used)) = {
	512, VS_FXSAVE, 0, 0
};

__asm__(".text\n.p2align 4\n.globl rt_vec_call\n.hidden rt_vec_call\n"
	".type rt_vec_call,@function\nrt_vec_call:\n.cfi_startproc\n"
	"push %rbp\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %rbp, 0\n"
	"mov %rsp, %rbp\n.cfi_def_cfa_register %rbp\n"
	/* fn in r11, b in r10: xsave takes its mask in edx:eax */
	"mov %rdi, %r11\nmov %rdx, %r10\n"
	"mov rt_vecsave(%rip), %eax\n"
	"sub %rax, %rsp\nand $-64, %rsp\n"
	"cmpl $0, rt_vecsave+4(%rip)\nje 1f\n"
	/* the XSAVE header: XRSTOR faults on nonzero reserved bytes, and
	 * XSAVE writes only the XSTATE_BV bits it saves */
	"xor %eax, %eax\n"
	"mov %rax, 512(%rsp)\nmov %rax, 520(%rsp)\nmov %rax, 528(%rsp)\n"
	"mov %rax, 536(%rsp)\nmov %rax, 544(%rsp)\nmov %rax, 552(%rsp)\n"
	"mov %rax, 560(%rsp)\nmov %rax, 568(%rsp)\n"
	"mov rt_vecsave+8(%rip), %eax\nmov rt_vecsave+12(%rip), %edx\n"
	"cmpl $2, rt_vecsave+4(%rip)\nje 2f\n"
	"xsave64 (%rsp)\njmp 3f\n"
	"2:\nxsavec64 (%rsp)\njmp 3f\n"
	"1:\nfxsave64 (%rsp)\n"
	"3:\nmov %rsi, %rdi\nmov %r10, %rsi\nmov %rcx, %rdx\nmov %r8, %rcx\n"
	"call *%r11\n"
	"mov %rax, %r11\n"
	"cmpl $0, rt_vecsave+4(%rip)\nje 4f\n"
	"mov rt_vecsave+8(%rip), %eax\nmov rt_vecsave+12(%rip), %edx\n"
	"xrstor64 (%rsp)\njmp 5f\n"
	"4:\nfxrstor64 (%rsp)\n"
	"5:\nmov %r11, %rax\n"
	"mov %rbp, %rsp\npop %rbp\n.cfi_def_cfa %rsp, 8\nret\n.cfi_endproc\n"
	".size rt_vec_call, .-rt_vec_call\n");

static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

void rt_vec_init(void)
{
	uint32_t a, b, c, d, size, off = 576;
	uint64_t xcr0;
	bool compact;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) ||
	    __get_cpuid_max(0, NULL) < 0xd)
		return;		/* FXSAVE */
	xcr0 = xgetbv0();
	__cpuid_count(0xd, 0, a, b, c, d);
	size = b;		/* the standard format, XCR0's features */
	__cpuid_count(0xd, 1, a, b, c, d);
	compact = a & 2;	/* XSAVEC */
	/* the compacted format's size, components in order, some aligned to
	 * 64 (never above the standard one: taken as a bound anyway) */
	for (int i = 2; compact && i < 63; i++) {
		if (!(xcr0 & 1ull << i))
			continue;
		__cpuid_count(0xd, (uint32_t)i, a, b, c, d);
		if (c & 2)
			off = (off + 63) & ~63u;
		off += a;
	}
	if (off > size)
		size = off;
	rt_vecsave.size = (size + 63) & ~63u;
	rt_vecsave.mask_lo = (uint32_t)xcr0;
	rt_vecsave.mask_hi = (uint32_t)(xcr0 >> 32);
	rt_vecsave.how = compact ? VS_XSAVEC : VS_XSAVE;
	/* the standard format on a CPU with XSAVEC too
	 * (tests/integration/inline_vec.sh runs both) */
	if (getenv("FAY_RT_VECSAVE") && !strcmp(getenv("FAY_RT_VECSAVE"), "xsave"))
		rt_vecsave.how = VS_XSAVE;
}
