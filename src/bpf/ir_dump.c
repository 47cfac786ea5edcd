// SPDX-License-Identifier: MIT
/*
 * The textual dumps of a program: helper and operator names, the IR dump
 * (ir_dump(), `--emit=ir`) and the lowered bytecode in bpftool's "xlated"
 * syntax (bpf_insn_print(), ir_dump_bpf(), `--emit=bpf`).  Construction
 * is in ir.c, lowering in regalloc.c and regalloc_emit.c.
 */
#include <inttypes.h>

#include "bpf/ir_int.h"
#include "bpf/load.h"
#include "common/err.h"

/* ---- names -------------------------------------------------------------- */

#define HELPER_NAME(x) #x
static const char *const helper_names[] = { __BPF_FUNC_MAPPER(HELPER_NAME) };
#undef HELPER_NAME

const char *bpf_helper_name(int id)
{
	if (id <= 0 || (size_t)id >= ARRAY_SIZE(helper_names))
		return NULL;
	return helper_names[id];
}

static const char *alu_sym(int op)
{
	switch (op) {
	case BPF_ADD: return "+=";
	case BPF_SUB: return "-=";
	case BPF_MUL: return "*=";
	case BPF_DIV: return "/=";
	case BPF_MOD: return "%=";
	case BPF_OR: return "|=";
	case BPF_AND: return "&=";
	case BPF_XOR: return "^=";
	case BPF_LSH: return "<<=";
	case BPF_RSH: return ">>=";
	case BPF_ARSH: return "s>>=";
	case BPF_MOV: return "=";
	}
	return "?=";
}

static const char *jmp_sym(int op)
{
	switch (op) {
	case BPF_JEQ: return "==";
	case BPF_JNE: return "!=";
	case BPF_JGT: return ">";
	case BPF_JGE: return ">=";
	case BPF_JLT: return "<";
	case BPF_JLE: return "<=";
	case BPF_JSGT: return "s>";
	case BPF_JSGE: return "s>=";
	case BPF_JSLT: return "s<";
	case BPF_JSLE: return "s<=";
	case BPF_JSET: return "&";
	}
	return "?";
}

/* ---- IR dump -------------------------------------------------------- */

static void opnd_str(char *b, size_t n, struct ir_opnd o)
{
	switch (o.kind) {
	case IR_O_REG:
		snprintf(b, n, "v%d", o.reg);
		break;
	case IR_O_IMM:
		snprintf(b, n, "%" PRId64, o.imm);
		break;
	case IR_O_STACK:
		snprintf(b, n, "fp%d", o.off);
		break;
	case IR_O_MAP:
		snprintf(b, n, "map %s", bmap_name(o.map));
		break;
	default:
		snprintf(b, n, "?");
	}
}

static void mem_str(char *b, size_t n, struct ir_opnd base, int off,
		    unsigned int size, bool sign)
{
	char r[64];

	if (base.kind == IR_O_STACK) {
		off += base.off;
		snprintf(r, sizeof(r), "fp");
	} else {
		opnd_str(r, sizeof(r), base);
	}
	snprintf(b, n, "*(%c%u *)(%s %c %d)", sign ? 's' : 'u', size * 8, r,
		 off < 0 ? '-' : '+', off < 0 ? -off : off);
}

static void insn_str(const struct ir_insn *in, char *b, size_t n)
{
	char x[96], y[96];
	const char *name;
	size_t len;

	switch (in->op) {
	case IRI_ENTRY:
		snprintf(b, n, "v%d = ctx", in->dst);
		break;
	case IRI_MOV:
		opnd_str(x, sizeof(x), in->a);
		snprintf(b, n, "v%d = %s", in->dst, x);
		break;
	case IRI_ALU:
		opnd_str(x, sizeof(x), in->a);
		if (in->code == BPF_NEG)
			snprintf(b, n, "%sv%d = -v%d", in->flags & IR_ALU32 ?
				 "(u32) " : "", in->dst, in->dst);
		else
			snprintf(b, n, "%sv%d %s %s", in->flags & IR_ALU32 ?
				 "(u32) " : "", in->dst, alu_sym(in->code), x);
		break;
	case IRI_LOAD:
		mem_str(x, sizeof(x), in->a, in->off, in->size, in->flags & IR_SIGNED);
		snprintf(b, n, "v%d = %s", in->dst, x);
		break;
	case IRI_STORE:
		mem_str(x, sizeof(x), in->a, in->off, in->size, false);
		opnd_str(y, sizeof(y), in->b);
		snprintf(b, n, "%s = %s", x, y);
		break;
	case IRI_JMP:
		if (in->code == BPF_JA) {
			snprintf(b, n, "goto L%d", in->label);
			break;
		}
		opnd_str(x, sizeof(x), in->a);
		opnd_str(y, sizeof(y), in->b);
		snprintf(b, n, "if %s %s %s goto L%d", x, jmp_sym(in->code), y,
			 in->label);
		break;
	case IRI_CALL:
		name = bpf_helper_name(in->code);
		if (in->dst != IR_NOREG)
			len = snprintf(b, n, "v%d = call ", in->dst);
		else
			len = snprintf(b, n, "call ");
		if (name)
			len += snprintf(b + len, n - len, "%s(", name);
		else
			len += snprintf(b + len, n - len, "helper#%d(", in->code);
		for (int i = 0; i < in->nargs && len < n; i++) {
			opnd_str(x, sizeof(x), in->args[i]);
			len += snprintf(b + len, n - len, "%s%s", i ? ", " : "", x);
		}
		if (len < n)
			snprintf(b + len, n - len, ")");
		break;
	case IRI_EXIT:
		opnd_str(x, sizeof(x), in->a);
		snprintf(b, n, "exit %s", x);
		break;
	default:
		b[0] = '\0';
	}
}

void ir_dump(const struct ir *ir, FILE *f)
{
	char b[512];

	fprintf(f, "; program %s: %d vregs, %d bytes of stack\n", ir->name,
		ir->nvregs, -ir->sp);
	for (size_t i = 0; i < ir->n; i++) {
		const struct ir_insn *in = &ir->in[i];

		if (in->op == IRI_LABEL) {
			fprintf(f, "L%d:\n", in->label);
			continue;
		}
		if (in->op == IRI_COMMENT) {
			fprintf(f, "\t; %s\n", in->comment ? in->comment : "");
			continue;
		}
		insn_str(in, b, sizeof(b));
		if (in->line || in->col)
			fprintf(f, "%4zu\t%-44s @%u:%u\n", i, b, in->line, in->col);
		else
			fprintf(f, "%4zu\t%s\n", i, b);
	}
}

/* ---- bytecode dump (bpftool "xlated" syntax) ------------------------- */

static const char *size_type(int code)
{
	switch (BPF_SIZE(code)) {
	case BPF_B: return "u8";
	case BPF_H: return "u16";
	case BPF_W: return "u32";
	default: return "u64";
	}
}

void bpf_insn_print(const struct bpf_insn *i, FILE *f)
{
	int cls = BPF_CLASS(i->code);
	char r = cls == BPF_ALU ? 'w' : 'r';
	const char *name;

	fprintf(f, "(%02x) ", i->code);
	switch (cls) {
	case BPF_ALU:
	case BPF_ALU64:
		if (BPF_OP(i->code) == BPF_NEG)
			fprintf(f, "%c%d = -%c%d", r, i->dst_reg, r, i->dst_reg);
		else if (BPF_SRC(i->code) == BPF_X)
			fprintf(f, "%c%d %s %c%d", r, i->dst_reg,
				alu_sym(BPF_OP(i->code)), r, i->src_reg);
		else
			fprintf(f, "%c%d %s %d", r, i->dst_reg,
				alu_sym(BPF_OP(i->code)), i->imm);
		break;
	case BPF_LDX:
		fprintf(f, "r%d = *(%s *)(r%d %+d)", i->dst_reg, size_type(i->code),
			i->src_reg, i->off);
		break;
	case BPF_STX:
		fprintf(f, "*(%s *)(r%d %+d) = r%d", size_type(i->code),
			i->dst_reg, i->off, i->src_reg);
		break;
	case BPF_ST:
		fprintf(f, "*(%s *)(r%d %+d) = %d", size_type(i->code),
			i->dst_reg, i->off, i->imm);
		break;
	case BPF_LD:
		if (insn_is_ld_imm64(i)) {
			uint64_t v = (uint32_t)i->imm |
				     ((uint64_t)(uint32_t)i[1].imm << 32);

			if (i->src_reg == BPF_PSEUDO_MAP_FD)
				fprintf(f, "r%d = map[fd:%d]", i->dst_reg, i->imm);
			else
				fprintf(f, "r%d = 0x%" PRIx64, i->dst_reg, v);
		} else {
			fprintf(f, "BUG_ld_%02x", i->code);
		}
		break;
	case BPF_JMP:
		switch (BPF_OP(i->code)) {
		case BPF_EXIT:
			fprintf(f, "exit");
			break;
		case BPF_CALL:
			name = bpf_helper_name(i->imm);
			fprintf(f, "call bpf_%s#%d", name ? name : "unknown", i->imm);
			break;
		case BPF_JA:
			fprintf(f, "goto pc%+d", i->off);
			break;
		default:
			if (BPF_SRC(i->code) == BPF_X)
				fprintf(f, "if r%d %s r%d goto pc%+d", i->dst_reg,
					jmp_sym(BPF_OP(i->code)), i->src_reg, i->off);
			else
				fprintf(f, "if r%d %s 0x%x goto pc%+d", i->dst_reg,
					jmp_sym(BPF_OP(i->code)), i->imm, i->off);
		}
		break;
	default:
		fprintf(f, "BUG_%02x", i->code);
	}
}

void ir_dump_bpf(const struct ir *ir, FILE *f)
{
	if (!ir->lowered) {
		fprintf(f, "; program %s is not lowered\n", ir->name);
		return;
	}
	fprintf(f, "; program %s: %zu insns, %u bytes of stack, %u spilled\n",
		ir->name, ir->nout, ir->stack_size, ir->nspilled);
	for (size_t i = 0; i < ir->nout; i++) {
		fprintf(f, "%4zu: ", i);
		bpf_insn_print(&ir->out[i], f);
		if (ir->relo[i])
			fprintf(f, "\t; map %s", bmap_name(ir->relo[i]));
		fputc('\n', f);
		if (insn_is_ld_imm64(&ir->out[i]))
			i++;
	}
}
