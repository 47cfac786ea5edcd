// SPDX-License-Identifier: MIT
/*
 * The x86-64 JIT.  It compiles verified programs only and emits no checks
 * of its own (as uBPF's JIT: the verifier is what makes it safe), one
 * straight translation per instruction:
 *
 *   BPF   r0  r1  r2  r3  r4  r5  r6  r7  r8  r9  r10
 *   x86   rax rdi rsi rdx rcx r8  rbx r13 r14 r15 rbp
 *
 * r1..r5 are the System V argument registers, so a helper call is a plain
 * call with the struct vm_env pointer (kept in r12) as the sixth argument
 * (r9); map_lookup_elem of an array map, get_current_pid_tgid,
 * get_current_cgroup_id, fay_depth,
 * fay_unwound, fay_cookie and fay_vpid are
 * inlined (inline_lookup()), ktime_get_ns calls vm_prog_set_now()'s
 * clock directly.  r10/r11 are scratch.  The frame: the callee-saved registers, then
 * 512 bytes of BPF stack below rbp; rsp stays 16-byte aligned at calls.
 * Division (rdx:rax) and variable shifts (cl) save and restore the BPF
 * registers they borrow.  Jumps are all rel32, patched once the offset of
 * every instruction is known (jumps go forward only).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/bytes.h"
#include "vm/vm_int.h"

enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };

static const uint8_t xreg[11] = { RAX, RDI, RSI, RDX, RCX, R8, RBX, R13, R14, R15, RBP };

_Static_assert(offsetof(struct vm_env, depth) < 128 &&
	       offsetof(struct vm_env, unwound) < 128 && offsetof(struct vm_env, cookie) < 128 &&
	       offsetof(struct vm_env, pid_tgid) < 128 &&
	       offsetof(struct vm_env, cgroup_id) < 128 && offsetof(struct vm_env, vpid) < 128,
	       "the inlined helpers load from r12 with an 8-bit displacement");

/* What the prologue may save (the System V callee-saved registers). */
static const uint8_t saved[] = { RBP, RBX, R12, R13, R14, R15 };

struct jit {
	struct wbuf w;		/* the code */
	uint32_t *off;		/* code offset of each BPF insn */
	struct fix { size_t at; size_t target; } *fix;	/* rel32 to patch */
	size_t nfix;
};

static void emit(struct jit *j, const void *p, size_t n)
{
	wbuf_put(&j->w, p, n);
}

static void e1(struct jit *j, uint8_t b) { emit(j, &b, 1); }
static void e4(struct jit *j, uint32_t v) { emit(j, &v, 4); }

/* REX prefix: w, ModRM.reg, SIB.index (unused), ModRM.rm/base; force for
 * byte registers sil/dil/bpl/spl. */
static void rex(struct jit *j, bool w, int reg, int rm, bool force)
{
	uint8_t r = 0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0) | ((rm & 8) ? 1 : 0);

	if (r != 0x40 || force)
		e1(j, r);
}

static void modrm_reg(struct jit *j, int reg, int rm)
{
	e1(j, (uint8_t)(0xc0 | (reg & 7) << 3 | (rm & 7)));
}

/* [base + disp32] */
static void modrm_mem(struct jit *j, int reg, int base, int32_t disp)
{
	e1(j, (uint8_t)(0x80 | (reg & 7) << 3 | (base & 7)));
	if ((base & 7) == RSP)
		e1(j, 0x24);
	e4(j, (uint32_t)disp);
}

/* op r/m, reg (ADD 01, OR 09, AND 21, SUB 29, XOR 31, CMP 39, MOV 89, TEST 85) */
static void alu_rr(struct jit *j, bool w, uint8_t opc, int dst, int src)
{
	rex(j, w, src, dst, false);
	e1(j, opc);
	modrm_reg(j, src, dst);
}

/* 81 /digit imm32 */
static void alu_ri(struct jit *j, bool w, int digit, int dst, int32_t imm)
{
	rex(j, w, 0, dst, false);
	e1(j, 0x81);
	modrm_reg(j, digit, dst);
	e4(j, (uint32_t)imm);
}

static void mov_rr(struct jit *j, bool w, int dst, int src)
{
	alu_rr(j, w, 0x89, dst, src);
}

static void mov_ri64(struct jit *j, int dst, uint64_t v)
{
	if (v <= UINT32_MAX) {		/* mov r32, imm32 zero-extends */
		rex(j, false, 0, dst, false);
		e1(j, (uint8_t)(0xb8 + (dst & 7)));
		e4(j, (uint32_t)v);
	} else if ((int64_t)v >= INT32_MIN && (int64_t)v <= INT32_MAX) {
		rex(j, true, 0, dst, false);	/* C7 /0: sign-extended */
		e1(j, 0xc7);
		modrm_reg(j, 0, dst);
		e4(j, (uint32_t)v);
	} else {
		rex(j, true, 0, dst, false);
		e1(j, (uint8_t)(0xb8 + (dst & 7)));
		emit(j, &v, 8);
	}
}

static void push(struct jit *j, int r)
{
	rex(j, false, 0, r, false);
	e1(j, (uint8_t)(0x50 + (r & 7)));
}

static void pop(struct jit *j, int r)
{
	rex(j, false, 0, r, false);
	e1(j, (uint8_t)(0x58 + (r & 7)));
}

/* F7 /digit on a register (NEG 3, DIV 6). */
static void unary(struct jit *j, bool w, int digit, int r)
{
	rex(j, w, 0, r, false);
	e1(j, 0xf7);
	modrm_reg(j, digit, r);
}

static int shift_digit(int op)
{
	return op == BPF_LSH ? 4 : op == BPF_RSH ? 5 : 7;
}

static void jump_to(struct jit *j, const uint8_t *opc, size_t n, size_t target)
{
	struct fix *f;

	emit(j, opc, n);
	if (j->w.err)
		return;
	f = realloc(j->fix, (j->nfix + 1) * sizeof(*f));
	if (!f) {
		j->w.err = -ENOMEM;
		return;
	}
	j->fix = f;
	f[j->nfix].at = j->w.len;
	f[j->nfix].target = target;
	j->nfix++;
	e4(j, 0);
}

static uint8_t jcc(int op)
{
	switch (op) {
	case BPF_JEQ:  return 0x84;
	case BPF_JNE:  return 0x85;
	case BPF_JGT:  return 0x87;
	case BPF_JGE:  return 0x83;
	case BPF_JLT:  return 0x82;
	case BPF_JLE:  return 0x86;
	case BPF_JSGT: return 0x8f;
	case BPF_JSGE: return 0x8d;
	case BPF_JSLT: return 0x8c;
	case BPF_JSLE: return 0x8e;
	case BPF_JSET: return 0x85;
	}
	return 0;
}

static void do_divmod(struct jit *j, bool w, int op, int dst, const struct bpf_insn *in)
{
	/* r11 = divisor, r10 = dividend; rax/rdx saved around div. */
	if (BPF_SRC(in->code) == BPF_X)
		mov_rr(j, w, R11, xreg[in->src_reg]);
	else
		mov_ri64(j, R11, w ? (uint64_t)(int64_t)in->imm : (uint32_t)in->imm);
	mov_rr(j, w, R10, dst);
	/* test r11, r11; jnz div */
	alu_rr(j, w, 0x85, R11, R11);
	e1(j, 0x75);			/* jnz rel8 over the zero case */
	size_t at = j->w.len;
	e1(j, 0);
	if (op == BPF_DIV)
		alu_rr(j, false, 0x31, R10, R10);	/* x / 0 = 0 */
	/* x % 0 = x: r10 already holds x (truncated for 32-bit) */
	e1(j, 0xeb);			/* jmp rel8 over the division */
	size_t at2 = j->w.len;
	e1(j, 0);
	if (!j->w.err)
		j->w.p[at] = (uint8_t)(j->w.len - at - 1);
	push(j, RAX);
	push(j, RDX);
	mov_rr(j, w, RAX, R10);
	alu_rr(j, false, 0x31, RDX, RDX);
	unary(j, w, 6, R11);		/* div r11 */
	mov_rr(j, w, R10, op == BPF_DIV ? RAX : RDX);
	pop(j, RDX);
	pop(j, RAX);
	if (!j->w.err)
		j->w.p[at2] = (uint8_t)(j->w.len - at2 - 1);
	mov_rr(j, w, dst, R10);
}

static void do_alu(struct jit *j, const struct bpf_insn *in)
{
	bool w = BPF_CLASS(in->code) == BPF_ALU64;
	bool x = BPF_SRC(in->code) == BPF_X;
	int op = BPF_OP(in->code), dst = xreg[in->dst_reg];
	int src = xreg[in->src_reg];
	static const uint8_t rr[16] = {
		[BPF_ADD >> 4] = 0x01, [BPF_SUB >> 4] = 0x29, [BPF_OR >> 4] = 0x09,
		[BPF_AND >> 4] = 0x21, [BPF_XOR >> 4] = 0x31,
	};
	static const int ri[16] = {
		[BPF_ADD >> 4] = 0, [BPF_SUB >> 4] = 5, [BPF_OR >> 4] = 1,
		[BPF_AND >> 4] = 4, [BPF_XOR >> 4] = 6,
	};

	switch (op) {
	case BPF_ADD: case BPF_SUB: case BPF_OR: case BPF_AND: case BPF_XOR:
		if (x)
			alu_rr(j, w, rr[op >> 4], dst, src);
		else
			alu_ri(j, w, ri[op >> 4], dst, in->imm);
		break;
	case BPF_MOV:
		if (x)
			mov_rr(j, w, dst, src);
		else if (w)
			mov_ri64(j, dst, (uint64_t)(int64_t)in->imm);
		else
			mov_ri64(j, dst, (uint32_t)in->imm);
		break;
	case BPF_MUL:
		if (x) {		/* imul dst, src: 0F AF /r */
			rex(j, w, dst, src, false);
			e1(j, 0x0f);
			e1(j, 0xaf);
			modrm_reg(j, dst, src);
		} else {		/* imul dst, dst, imm32: 69 /r */
			rex(j, w, dst, dst, false);
			e1(j, 0x69);
			modrm_reg(j, dst, dst);
			e4(j, (uint32_t)in->imm);
		}
		break;
	case BPF_DIV: case BPF_MOD:
		do_divmod(j, w, op, dst, in);
		break;
	case BPF_NEG:
		unary(j, w, 3, dst);
		break;
	case BPF_LSH: case BPF_RSH: case BPF_ARSH:
		if (!x) {
			rex(j, w, 0, dst, false);
			e1(j, 0xc1);
			modrm_reg(j, shift_digit(op), dst);
			e1(j, (uint8_t)(in->imm & (w ? 63 : 31)));
			break;
		}
		/* r11 = count, r10 = value; shift r10 by cl, rcx saved. */
		mov_rr(j, true, R11, src);
		mov_rr(j, w, R10, dst);
		push(j, RCX);
		mov_rr(j, true, RCX, R11);
		rex(j, w, 0, R10, false);
		e1(j, 0xd3);
		modrm_reg(j, shift_digit(op), R10);
		pop(j, RCX);
		mov_rr(j, w, dst, R10);
		break;
	}
}

static void do_ldx(struct jit *j, const struct bpf_insn *in)
{
	int dst = xreg[in->dst_reg], base = xreg[in->src_reg];

	switch (BPF_SIZE(in->code)) {
	case BPF_B: case BPF_H:		/* movzx r32, m8/m16 */
		rex(j, false, dst, base, false);
		e1(j, 0x0f);
		e1(j, BPF_SIZE(in->code) == BPF_B ? 0xb6 : 0xb7);
		break;
	case BPF_W:
		rex(j, false, dst, base, false);
		e1(j, 0x8b);
		break;
	default:
		rex(j, true, dst, base, false);
		e1(j, 0x8b);
		break;
	}
	modrm_mem(j, dst, base, in->off);
}

static void do_st(struct jit *j, const struct bpf_insn *in)
{
	int base = xreg[in->dst_reg], sz = BPF_SIZE(in->code);

	if (BPF_CLASS(in->code) == BPF_STX) {
		int src = xreg[in->src_reg];

		if (sz == BPF_H)
			e1(j, 0x66);
		rex(j, sz == BPF_DW, src, base, sz == BPF_B && src >= RSP && src <= RDI);
		e1(j, sz == BPF_B ? 0x88 : 0x89);
		modrm_mem(j, src, base, in->off);
		return;
	}
	if (sz == BPF_H)
		e1(j, 0x66);
	rex(j, sz == BPF_DW, 0, base, false);
	e1(j, sz == BPF_B ? 0xc6 : 0xc7);
	modrm_mem(j, 0, base, in->off);
	if (sz == BPF_B)
		e1(j, (uint8_t)in->imm);
	else if (sz == BPF_H)
		emit(j, &(uint16_t){ (uint16_t)in->imm }, 2);
	else
		e4(j, (uint32_t)in->imm);
}

static void do_jmp(struct jit *j, const struct bpf_insn *in, size_t pc)
{
	int op = BPF_OP(in->code), dst = xreg[in->dst_reg];
	size_t t = pc + 1 + (size_t)(ssize_t)in->off;
	uint8_t opc[2] = { 0x0f, jcc(op) };

	if (BPF_SRC(in->code) == BPF_X) {
		alu_rr(j, true, op == BPF_JSET ? 0x85 : 0x39, dst, xreg[in->src_reg]);
	} else if (op == BPF_JSET) {	/* test r/m64, imm32: REX.W F7 /0 */
		rex(j, true, 0, dst, false);
		e1(j, 0xf7);
		modrm_reg(j, 0, dst);
		e4(j, (uint32_t)in->imm);
	} else {
		alu_ri(j, true, 7, dst, in->imm);	/* cmp */
	}
	jump_to(j, opc, 2, t);
}

/* map_lookup_elem of an array map, inline (as the kernel's JIT does):
 * rax = values + slot * stride + key * vsz, or 0 when the key (u32 at
 * rsi, BPF r2) >= cap or the slot (env->slot, r12) >= nslots: exactly
 * vm_map_lookup().  Uses rax, r10, r11 (scratch: BPF r1-r5 are dead after
 * a call).  false: not an array map, or strides beyond imm32. */
static bool inline_lookup(struct jit *j, const struct vm_map *m)
{
	struct vm_array_layout l;
	size_t null_at[2], done_at;
	int nnull = 0;

	if (!vm_map_array_layout(m, &l) || l.vsz > INT32_MAX || l.stride > INT32_MAX)
		return false;
	emit(j, (const uint8_t[]){ 0x8b, 0x06 }, 2);		/* mov eax, [rsi] */
	e1(j, 0x3d);						/* cmp eax, cap */
	e4(j, l.cap);
	emit(j, (const uint8_t[]){ 0x73, 0 }, 2);		/* jae null */
	null_at[nnull++] = j->w.len;
	emit(j, (const uint8_t[]){ 0x48, 0x69, 0xc0 }, 3);	/* imul rax, rax, vsz */
	e4(j, (uint32_t)l.vsz);
	if (l.percpu) {
		/* mov r10d, [r12 + slot] */
		emit(j, (const uint8_t[]){ 0x45, 0x8b, 0x54, 0x24,
					   (uint8_t)offsetof(struct vm_env, slot) }, 5);
		emit(j, (const uint8_t[]){ 0x41, 0x81, 0xfa }, 3);	/* cmp r10d, nslots */
		e4(j, l.nslots);
		emit(j, (const uint8_t[]){ 0x73, 0 }, 2);		/* jae null */
		null_at[nnull++] = j->w.len;
		emit(j, (const uint8_t[]){ 0x4d, 0x69, 0xd2 }, 3);	/* imul r10, r10, stride */
		e4(j, (uint32_t)l.stride);
		emit(j, (const uint8_t[]){ 0x4c, 0x01, 0xd0 }, 3);	/* add rax, r10 */
	}
	mov_ri64(j, R11, (uint64_t)(uintptr_t)l.values);
	emit(j, (const uint8_t[]){ 0x4c, 0x01, 0xd8 }, 3);		/* add rax, r11 */
	emit(j, (const uint8_t[]){ 0xeb, 0 }, 2);			/* jmp done */
	done_at = j->w.len;
	for (int i = 0; i < nnull && !j->w.err; i++)
		j->w.p[null_at[i] - 1] = (uint8_t)(j->w.len - null_at[i]);
	emit(j, (const uint8_t[]){ 0x31, 0xc0 }, 2);			/* null: xor eax, eax */
	if (!j->w.err)
		j->w.p[done_at - 1] = (uint8_t)(j->w.len - done_at);
	return true;
}

/* A helper compiled as one load from the vm_env at r12: true with its
 * field's offset in *off, *wide for 8 bytes (else 4). */
static bool env_field(int32_t imm, uint8_t *off, bool *wide)
{
	*wide = true;
	switch (imm) {
	case BPF_FUNC_get_current_pid_tgid:
		*off = (uint8_t)offsetof(struct vm_env, pid_tgid);
		return true;
	case BPF_FUNC_get_current_cgroup_id:
		*off = (uint8_t)offsetof(struct vm_env, cgroup_id);
		return true;
	case VM_FUNC_fay_cookie:
		*off = (uint8_t)offsetof(struct vm_env, cookie);
		return true;
	}
	*wide = false;
	switch (imm) {
	case VM_FUNC_fay_vpid:
		*off = (uint8_t)offsetof(struct vm_env, vpid);
		return true;
	case VM_FUNC_fay_depth:
		*off = (uint8_t)offsetof(struct vm_env, depth);
		return true;
	case VM_FUNC_fay_unwound:
		*off = (uint8_t)offsetof(struct vm_env, unwound);
		return true;
	}
	return false;
}

int vm_prog_jit(struct vm_prog *p)
{
	struct jit j = { 0 };
	size_t exit_at, mapsz;
	uint8_t push_regs[sizeof(saved)], eo;
	int err, npush = 0, frame;
	bool used[11] = { false }, wide;

	/* only the callee-saved registers the program writes (BPF r6-r9);
	 * 512 bytes of stack and rsp 16-byte aligned at calls */
	for (size_t pc = 0; pc < p->n; pc++)
		used[p->insns[pc].dst_reg % 11] = true;
	for (size_t i = 0; i < sizeof(saved); i++)
		if (saved[i] == RBP || saved[i] == R12 ||
		    (saved[i] == RBX && used[6]) || (saved[i] == R13 && used[7]) ||
		    (saved[i] == R14 && used[8]) || (saved[i] == R15 && used[9]))
			push_regs[npush++] = saved[i];
	frame = VM_STACK_SIZE + (npush % 2 ? 16 : 8);

	j.off = calloc(p->n + 1, sizeof(*j.off));
	if (!j.off)
		return -ENOMEM;
	p->calls_out = false;
	/* prologue */
	for (int i = 0; i < npush; i++)
		push(&j, push_regs[i]);
	alu_ri(&j, true, 5, RSP, frame);		/* sub rsp, frame */
	rex(&j, true, RBP, RSP, false);			/* lea rbp, [rsp + 512] */
	e1(&j, 0x8d);
	modrm_mem(&j, RBP, RSP, VM_STACK_SIZE);
	mov_rr(&j, true, R12, RSI);			/* env */

	for (size_t pc = 0; pc < p->n; pc++) {
		const struct bpf_insn *in = &p->insns[pc];
		int cls = BPF_CLASS(in->code), op = BPF_OP(in->code);

		j.off[pc] = (uint32_t)j.w.len;
		switch (cls) {
		case BPF_ALU: case BPF_ALU64:
			do_alu(&j, in);
			break;
		case BPF_LD:
			mov_ri64(&j, xreg[in->dst_reg], (uint64_t)(uint32_t)in->imm |
				 (uint64_t)(uint32_t)p->insns[pc + 1].imm << 32);
			j.off[++pc] = (uint32_t)j.w.len;
			break;
		case BPF_LDX:
			do_ldx(&j, in);
			break;
		case BPF_ST: case BPF_STX:
			do_st(&j, in);
			break;
		case BPF_JMP:
			if (op == BPF_EXIT) {
				jump_to(&j, (const uint8_t[]){ 0xe9 }, 1, p->n);
			} else if (op == BPF_CALL && in->imm == BPF_FUNC_map_lookup_elem &&
				   p->cmap[pc] &&
				   inline_lookup(&j, p->maps[p->cmap[pc] - 1])) {
				;
			} else if (op == BPF_CALL && env_field(in->imm, &eo, &wide)) {
				/* mov rax, [r12 + field] (mov eax: 4 bytes) */
				emit(&j, (const uint8_t[]){ wide ? 0x49 : 0x41, 0x8b, 0x44, 0x24, eo },
				     5);
			} else if (op == BPF_CALL && in->imm == BPF_FUNC_ktime_get_ns && p->now) {
				mov_rr(&j, true, RDI, R12);
				mov_ri64(&j, RAX, (uint64_t)(uintptr_t)p->now);
				e1(&j, 0xff);		/* call rax */
				e1(&j, 0xd0);
			} else if (op == BPF_CALL) {
				p->calls_out = true;
				mov_rr(&j, true, R9, R12);
				mov_ri64(&j, RAX, (uint64_t)(uintptr_t)vm_helper(in->imm)->fn);
				e1(&j, 0xff);		/* call rax */
				e1(&j, 0xd0);
			} else if (op == BPF_JA) {
				jump_to(&j, (const uint8_t[]){ 0xe9 }, 1,
					pc + 1 + (size_t)(ssize_t)in->off);
			} else {
				do_jmp(&j, in, pc);
			}
			break;
		}
	}
	/* epilogue */
	exit_at = j.w.len;
	j.off[p->n] = (uint32_t)exit_at;
	alu_ri(&j, true, 0, RSP, frame);		/* add rsp, frame */
	for (int i = npush; i-- > 0;)
		pop(&j, push_regs[i]);
	e1(&j, 0xc3);
	err = j.w.err;
	if (!err)
		for (size_t i = 0; i < j.nfix; i++) {
			int32_t rel = (int32_t)((int64_t)j.off[j.fix[i].target] -
						(int64_t)(j.fix[i].at + 4));

			memcpy(j.w.p + j.fix[i].at, &rel, 4);
		}
	if (!err) {
		mapsz = (j.w.len + 4095) & ~(size_t)4095;
		void *code = mmap(NULL, mapsz, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (code == MAP_FAILED) {
			err = -errno;
		} else {
			memcpy(code, j.w.p, j.w.len);
			if (mprotect(code, mapsz, PROT_READ | PROT_EXEC)) {
				err = -errno;
				munmap(code, mapsz);
			} else {
				if (p->code)
					munmap(p->code, p->code_map);
				p->code = code;
				p->code_map = mapsz;
				p->code_size = j.w.len;
				p->jitted = (uint64_t (*)(void *, const struct vm_env *))code;
			}
		}
	}
	wbuf_free(&j.w);
	free(j.fix);
	free(j.off);
	return err;
}
