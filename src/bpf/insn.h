/* SPDX-License-Identifier: MIT */
/*
 * BPF instruction encoders.  One INSN() compound literal builds any
 * instruction; the named wrappers below spell out the common shapes so the
 * lowering code reads like assembly.  Registers are the physical r0..r10
 * (BPF_REG_*); virtual registers never reach this layer.
 */
#ifndef FAY_BPF_INSN_H
#define FAY_BPF_INSN_H

#include <stdint.h>
#include <linux/bpf.h>

#define BPF_REG_FP BPF_REG_10
#define BPF_STACK_MAX 512

#define INSN(_code, _dst, _src, _off, _imm)		\
	((struct bpf_insn) {				\
		.code    = (uint8_t)(_code),		\
		.dst_reg = (uint8_t)(_dst),		\
		.src_reg = (uint8_t)(_src),		\
		.off     = (int16_t)(_off),		\
		.imm     = (int32_t)(_imm),		\
	})

/* dst = src / dst = imm (64-bit and 32-bit). */
#define MOV64_REG(d, s)      INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV64_IMM(d, i)      INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define MOV32_REG(d, s)      INSN(BPF_ALU | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV32_IMM(d, i)      INSN(BPF_ALU | BPF_MOV | BPF_K, d, 0, 0, i)

/* dst op= src / imm; op is BPF_ADD, BPF_SUB ... */
#define ALU64_REG(op, d, s)  INSN(BPF_ALU64 | BPF_OP(op) | BPF_X, d, s, 0, 0)
#define ALU64_IMM(op, d, i)  INSN(BPF_ALU64 | BPF_OP(op) | BPF_K, d, 0, 0, i)
#define ALU32_REG(op, d, s)  INSN(BPF_ALU | BPF_OP(op) | BPF_X, d, s, 0, 0)
#define ALU32_IMM(op, d, i)  INSN(BPF_ALU | BPF_OP(op) | BPF_K, d, 0, 0, i)

/* Loads and stores: sz is BPF_B, BPF_H, BPF_W or BPF_DW. */
#define LDX_MEM(sz, d, s, off)    INSN(BPF_LDX | BPF_SIZE(sz) | BPF_MEM, d, s, off, 0)
#define STX_MEM(sz, d, s, off)    INSN(BPF_STX | BPF_SIZE(sz) | BPF_MEM, d, s, off, 0)
#define ST_MEM(sz, d, off, i)     INSN(BPF_ST | BPF_SIZE(sz) | BPF_MEM, d, 0, off, i)

/* The two halves of a 64-bit immediate load (ld_imm64 takes two slots). */
#define LD_IMM64_LO(d, src, v)  INSN(BPF_LD | BPF_DW | BPF_IMM, d, src, 0, (uint32_t)(v))
#define LD_IMM64_HI(v)          INSN(0, 0, 0, 0, (uint32_t)((uint64_t)(v) >> 32))

/* Jumps: off is in instructions, relative to the next one. */
#define JMP_REG(op, d, s, off)  INSN(BPF_JMP | BPF_OP(op) | BPF_X, d, s, off, 0)
#define JMP_IMM(op, d, i, off)  INSN(BPF_JMP | BPF_OP(op) | BPF_K, d, 0, off, i)
#define JA(off)                 INSN(BPF_JMP | BPF_JA, 0, 0, off, 0)
#define CALL_HELPER(id)         INSN(BPF_JMP | BPF_CALL, 0, 0, 0, id)
#define EXIT_INSN()             INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

/* BPF_B/H/W/DW for an access of size bytes, or -1. */
static inline int bpf_size_code(unsigned int size)
{
	switch (size) {
	case 1: return BPF_B;
	case 2: return BPF_H;
	case 4: return BPF_W;
	case 8: return BPF_DW;
	}
	return -1;
}

static inline unsigned int bpf_size_bytes(int code)
{
	switch (BPF_SIZE(code)) {
	case BPF_B: return 1;
	case BPF_H: return 2;
	case BPF_W: return 4;
	default:    return 8;
	}
}

static inline int insn_is_ld_imm64(const struct bpf_insn *in)
{
	return in->code == (BPF_LD | BPF_DW | BPF_IMM);
}

#endif
