// SPDX-License-Identifier: MIT
/*
 * The capstone wrapper (Debian's libcapstone): its headers stay here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <capstone/capstone.h>

#include "patch/decode.h"

static bool in_group(const cs_insn *ci, int g)
{
	for (int i = 0; i < ci->detail->groups_count; i++)
		if (ci->detail->groups[i] == g)
			return true;
	return false;
}

/* The kind of a relative branch (d->rel), its condition or opcode length. */
static uint8_t rel_kind(const cs_insn *ci, struct dinsn *d)
{
	const uint8_t *op = ci->detail->x86.opcode;

	switch (ci->id) {
	case X86_INS_JMP:
		return DK_JMP;
	case X86_INS_CALL:
		return DK_CALL;
	case X86_INS_LOOP:
	case X86_INS_LOOPE:
	case X86_INS_LOOPNE:
	case X86_INS_JRCXZ:
	case X86_INS_JECXZ:
	case X86_INS_JCXZ:
		if (ci->size < 2)
			return DK_OTHER;
		d->opc_len = (uint8_t)(ci->size - 1);	/* rel8 last */
		return DK_LOOP;
	default:
		break;
	}
	if (op[0] >= 0x70 && op[0] <= 0x7f) {
		d->cc = op[0] - 0x70;
		return DK_JCC;
	}
	if (op[0] == 0x0f && op[1] >= 0x80 && op[1] <= 0x8f) {
		d->cc = op[1] - 0x80;
		return DK_JCC;
	}
	return DK_OTHER;
}

int dec_range(const uint8_t *code, size_t len, uint64_t addr, struct dinsn *out,
	      size_t max, uint64_t *bad, char *err, size_t errlen)
{
	csh h;
	cs_insn *ci;
	const uint8_t *p = code;
	size_t left = len, n = 0;
	uint64_t a = addr;

	*bad = 0;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK) {
		snprintf(err, errlen, "capstone: cannot open an x86-64 disassembler");
		return -EINVAL;
	}
	cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
	ci = cs_malloc(h);
	if (!ci) {
		cs_close(&h);
		return -ENOMEM;
	}
	while (left && n < max) {
		struct dinsn *d = &out[n];
		const cs_x86 *x;

		if (!cs_disasm_iter(h, &p, &left, &a, ci)) {
			*bad = a;
			break;
		}
		x = &ci->detail->x86;
		memset(d, 0, sizeof(*d));
		d->addr = ci->address;
		d->size = (uint8_t)ci->size;
		memcpy(d->bytes, ci->bytes, ci->size);
		snprintf(d->text, sizeof(d->text), "%.15s%s%.30s", ci->mnemonic,
			 ci->op_str[0] ? " " : "", ci->op_str);
		for (int i = 0; i < x->op_count; i++) {
			const cs_x86_op *o = &x->operands[i];

			if (o->type == X86_OP_MEM && o->mem.base == X86_REG_RIP) {
				d->rip_rel = true;
				d->disp_off = x->encoding.disp_offset;
			}
			if (o->type == X86_OP_MEM &&
			    (o->mem.base == X86_REG_RSP || o->mem.index == X86_REG_RSP))
				d->mem_sp = true;
		}
		d->call = in_group(ci, X86_GRP_CALL);
		d->ret = in_group(ci, X86_GRP_RET) || in_group(ci, X86_GRP_IRET) ||
			 ci->id == X86_INS_UD2 || ci->id == X86_INS_HLT;
		/* loop, loope, loopne are only in BRANCH_RELATIVE (capstone 4) */
		d->branch = d->call || in_group(ci, X86_GRP_JUMP) ||
			    in_group(ci, X86_GRP_BRANCH_RELATIVE);
		d->uncond = ci->id == X86_INS_JMP;
		if (d->branch && x->op_count == 1 && x->operands[0].type == X86_OP_REG)
			d->ind_reg = true;
		d->modrm_off = x->encoding.modrm_offset;
		if ((d->branch || ci->id == X86_INS_XBEGIN) && x->op_count == 1 &&
		    x->operands[0].type == X86_OP_IMM) {
			d->rel = true;
			d->target = (uint64_t)x->operands[0].imm;
			d->kind = rel_kind(ci, d);
		}
		n++;
	}
	cs_free(ci, 1);
	cs_close(&h);
	return (int)n;
}
