/* SPDX-License-Identifier: MIT */
/*
 * x86-64 instruction decoding for the patcher: what it must know of each
 * instruction to move it into a trampoline (size, a RIP-relative operand,
 * a relative branch and its target).  decode.c is the one file that sees
 * the disassembler's (capstone's) headers.
 */
#ifndef FAY_PATCH_DECODE_H
#define FAY_PATCH_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a relative branch is, for relocating it (struct dinsn.kind). */
enum dkind {
	DK_PLAIN,		/* not a relative branch */
	DK_JCC,			/* jcc rel8 / rel32: cc is its condition */
	DK_JMP,			/* jmp rel8 / rel32 */
	DK_CALL,		/* call rel32 */
	DK_LOOP,		/* loop, loope, loopne, jrcxz, jecxz (rel8 only) */
	DK_OTHER,		/* another relative operand (xbegin) */
};

struct dinsn {
	uint64_t addr;
	uint8_t size;
	uint8_t bytes[16];
	char text[48];		/* "push rbp" (for messages) */
	bool rip_rel;		/* has a RIP-relative memory operand */
	uint8_t disp_off;	/* its disp32's offset in the instruction */
	bool branch;		/* jmp, jcc, call, loop, jrcxz ... */
	bool rel;		/* ... with a relative target (rel8/rel32) */
	bool call, uncond;	/* a call / an unconditional jmp */
	bool ret;		/* ret, or anything else ending a path (ud2, hlt) */
	uint64_t target;	/* rel: the absolute target */
	uint8_t kind;		/* enum dkind */
	uint8_t cc;		/* DK_JCC: the condition (0-15, as in 0x70 + cc) */
	uint8_t opc_len;	/* DK_LOOP: bytes before the rel8 (prefixes, opcode) */
	bool mem_sp;		/* a memory operand based on or indexed by rsp */
	bool ind_reg;		/* an indirect branch through a register */
	uint8_t modrm_off;	/* the ModRM byte's offset (indirect call / jmp) */
};

/*
 * Decode instructions of code[0..len) (at run-time address addr) into out
 * (max entries).  Returns the number decoded, stopping at len or at the
 * first byte sequence that is not an instruction (then *bad is its
 * address, else 0).  -ENOMEM, or -EINVAL with a message in err when the
 * disassembler cannot start.
 */
int dec_range(const uint8_t *code, size_t len, uint64_t addr, struct dinsn *out,
	      size_t max, uint64_t *bad, char *err, size_t errlen);

#endif
