// SPDX-License-Identifier: MIT
/*
 * IR construction: the program object, operand checks, the emitters and
 * the composites built from them.  The textual dumps (IR and lowered
 * bytecode) live in ir_dump.c; register allocation and lowering in
 * regalloc.c and regalloc_emit.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/ir_int.h"
#include "common/err.h"

void ir_fail(struct ir *ir, int err, const char *fmt, ...)
{
	va_list ap;

	if (ir->err)
		return;
	ir->err = err;
	va_start(ap, fmt);
	vsnprintf(ir->errmsg, sizeof(ir->errmsg), fmt, ap);
	va_end(ap);
}

/* Append one instruction tagged with the current position; NULL when
 * out of memory (the error is remembered) or after lowering. */
static struct ir_insn *ir_push(struct ir *ir, enum ir_op op)
{
	struct ir_insn *in;

	if (ir->lowered) {
		ir_fail(ir, -EINVAL, "emission after ir_lower()");
		return NULL;
	}
	if (ir->n == ir->cap) {
		size_t cap = ir->cap ? ir->cap * 2 : 64;
		struct ir_insn *p = realloc(ir->in, cap * sizeof(*p));

		if (!p) {
			ir_fail(ir, -ENOMEM, "out of memory");
			return NULL;
		}
		ir->in = p;
		ir->cap = cap;
	}
	in = &ir->in[ir->n++];
	memset(in, 0, sizeof(*in));
	in->op = op;
	in->dst = IR_NOREG;
	in->label = -1;
	in->line = ir->line;
	in->col = ir->col;
	return in;
}

struct ir *ir_new(const char *name)
{
	struct ir *ir = calloc(1, sizeof(*ir));
	struct ir_insn *in;

	if (!ir)
		return fay_err_ptr(-ENOMEM);
	snprintf(ir->name, sizeof(ir->name), "%s", name && *name ? name : "fay");
	ir->ctx = ir->nvregs++;
	in = ir_push(ir, IRI_ENTRY);
	if (!in) {
		free(ir);
		return fay_err_ptr(-ENOMEM);
	}
	in->dst = ir->ctx;
	return ir;
}

void ir_free(struct ir *ir)
{
	if (!ir)
		return;
	for (size_t i = 0; i < ir->n; i++)
		free(ir->in[i].comment);
	free(ir->in);
	free(ir->out);
	free(ir->origin);
	free(ir->relo);
	free(ir);
}

const char *ir_name(const struct ir *ir)
{
	return ir->name;
}

int ir_error(const struct ir *ir)
{
	return ir->err;
}

const char *ir_strerror(const struct ir *ir)
{
	return ir->errmsg;
}

ir_reg ir_vreg(struct ir *ir)
{
	return ir->nvregs++;
}

ir_reg ir_ctx(const struct ir *ir)
{
	return ir->ctx;
}

int ir_stack_alloc(struct ir *ir, unsigned int size, unsigned int align)
{
	int sp;

	if (!align || (align & (align - 1)) || align > 8)
		align = 8;
	sp = ir->sp - (int)size;
	sp &= ~(int)(align - 1);
	if (size == 0 || sp < -BPF_STACK_MAX) {
		ir_fail(ir, -E2BIG, "stack slot of %u bytes does not fit in the "
			"%d-byte BPF stack", size, BPF_STACK_MAX);
		return ir->sp ? ir->sp : -8;
	}
	ir->sp = sp;
	return sp;
}

int ir_label_new(struct ir *ir)
{
	return ir->nlabels++;
}

void ir_label(struct ir *ir, int label)
{
	struct ir_insn *in;

	if (label < 0 || label >= ir->nlabels) {
		ir_fail(ir, -EINVAL, "label L%d was never allocated", label);
		return;
	}
	in = ir_push(ir, IRI_LABEL);
	if (in)
		in->label = label;
}

void ir_set_pos(struct ir *ir, uint32_t line, uint32_t col)
{
	ir->line = line;
	ir->col = col;
}

void ir_comment(struct ir *ir, const char *fmt, ...)
{
	struct ir_insn *in = ir_push(ir, IRI_COMMENT);
	va_list ap;

	if (!in)
		return;
	va_start(ap, fmt);
	if (vasprintf(&in->comment, fmt, ap) < 0) {
		in->comment = NULL;
		ir_fail(ir, -ENOMEM, "out of memory");
	}
	va_end(ap);
}

/* Operand sanity: the kinds an instruction accepts (a bit per kind). */
static bool opnd_ok(struct ir *ir, struct ir_opnd o, unsigned int kinds,
		    const char *what)
{
	if (!(kinds & (1u << o.kind))) {
		ir_fail(ir, -EINVAL, "%s: operand kind %d not allowed", what, o.kind);
		return false;
	}
	if (o.kind == IR_O_REG && (o.reg < 0 || o.reg >= ir->nvregs)) {
		ir_fail(ir, -EINVAL, "%s: v%d is not a register of this program",
			what, o.reg);
		return false;
	}
	if (o.kind == IR_O_STACK && (o.off >= 0 || o.off < -BPF_STACK_MAX)) {
		ir_fail(ir, -EINVAL, "%s: stack offset %d out of range", what, o.off);
		return false;
	}
	if (o.kind == IR_O_MAP && !o.map) {
		ir_fail(ir, -EINVAL, "%s: NULL map", what);
		return false;
	}
	return true;
}

#define K_REG   (1u << IR_O_REG)
#define K_IMM   (1u << IR_O_IMM)
#define K_STACK (1u << IR_O_STACK)
#define K_MAP   (1u << IR_O_MAP)

static bool reg_ok(struct ir *ir, ir_reg r, const char *what)
{
	return opnd_ok(ir, IR_R(r), K_REG, what);
}

static bool size_ok(struct ir *ir, unsigned int size, const char *what)
{
	if (bpf_size_code(size) < 0) {
		ir_fail(ir, -EINVAL, "%s: access size %u is not 1, 2, 4 or 8",
			what, size);
		return false;
	}
	return true;
}

void ir_mov(struct ir *ir, ir_reg dst, struct ir_opnd src)
{
	struct ir_insn *in;

	if (!reg_ok(ir, dst, "mov") ||
	    !opnd_ok(ir, src, K_REG | K_IMM | K_STACK | K_MAP, "mov"))
		return;
	in = ir_push(ir, IRI_MOV);
	if (!in)
		return;
	in->dst = dst;
	in->a = src;
}

void ir_alu(struct ir *ir, int op, ir_reg dst, struct ir_opnd src)
{
	struct ir_insn *in;

	switch (op) {
	case BPF_ADD: case BPF_SUB: case BPF_MUL: case BPF_DIV: case BPF_MOD:
	case BPF_OR: case BPF_AND: case BPF_XOR: case BPF_LSH: case BPF_RSH:
	case BPF_ARSH:
		break;
	case BPF_NEG:
		src = IR_I(0);
		break;
	default:
		ir_fail(ir, -EINVAL, "alu: unknown operation 0x%x", op);
		return;
	}
	if (!reg_ok(ir, dst, "alu") || !opnd_ok(ir, src, K_REG | K_IMM, "alu"))
		return;
	in = ir_push(ir, IRI_ALU);
	if (!in)
		return;
	in->code = op;
	in->dst = dst;
	in->a = src;
}

void ir_alu32(struct ir *ir, int op, ir_reg dst, struct ir_opnd src)
{
	size_t n = ir->n;

	ir_alu(ir, op, dst, src);
	if (ir->n > n)
		ir->in[ir->n - 1].flags = IR_ALU32;
}

void ir_load(struct ir *ir, ir_reg dst, struct ir_opnd base, int off,
	     unsigned int size, unsigned int flags)
{
	struct ir_insn *in;

	if (!reg_ok(ir, dst, "load") || !opnd_ok(ir, base, K_REG | K_STACK, "load") ||
	    !size_ok(ir, size, "load"))
		return;
	in = ir_push(ir, IRI_LOAD);
	if (!in)
		return;
	in->dst = dst;
	in->a = base;
	in->off = off;
	in->size = size;
	in->flags = flags & IR_SIGNED;
}

void ir_store(struct ir *ir, struct ir_opnd base, int off, unsigned int size,
	      struct ir_opnd src)
{
	struct ir_insn *in;

	if (!opnd_ok(ir, base, K_REG | K_STACK, "store") ||
	    !opnd_ok(ir, src, K_REG | K_IMM, "store") || !size_ok(ir, size, "store"))
		return;
	in = ir_push(ir, IRI_STORE);
	if (!in)
		return;
	in->a = base;
	in->b = src;
	in->off = off;
	in->size = size;
}

static bool jmp_op_ok(int op)
{
	switch (op) {
	case BPF_JEQ: case BPF_JNE: case BPF_JGT: case BPF_JGE: case BPF_JLT:
	case BPF_JLE: case BPF_JSGT: case BPF_JSGE: case BPF_JSLT: case BPF_JSLE:
	case BPF_JSET:
		return true;
	}
	return false;
}

static bool label_ok(struct ir *ir, int label)
{
	if (label < 0 || label >= ir->nlabels) {
		ir_fail(ir, -EINVAL, "jump to L%d, which was never allocated", label);
		return false;
	}
	return true;
}

void ir_jmp(struct ir *ir, int op, ir_reg a, struct ir_opnd b, int label)
{
	struct ir_insn *in;

	if (!jmp_op_ok(op)) {
		ir_fail(ir, -EINVAL, "jmp: unknown comparison 0x%x", op);
		return;
	}
	if (!reg_ok(ir, a, "jmp") || !opnd_ok(ir, b, K_REG | K_IMM, "jmp") ||
	    !label_ok(ir, label))
		return;
	in = ir_push(ir, IRI_JMP);
	if (!in)
		return;
	in->code = op;
	in->a = IR_R(a);
	in->b = b;
	in->label = label;
}

void ir_goto(struct ir *ir, int label)
{
	struct ir_insn *in;

	if (!label_ok(ir, label))
		return;
	in = ir_push(ir, IRI_JMP);
	if (!in)
		return;
	in->code = BPF_JA;
	in->label = label;
}

void ir_call(struct ir *ir, ir_reg dst, int helper, int nargs, ...)
{
	struct ir_opnd args[IR_MAX_ARGS];
	struct ir_insn *in;
	va_list ap;

	if (nargs < 0 || nargs > IR_MAX_ARGS) {
		ir_fail(ir, -EINVAL, "call: %d arguments (BPF helpers take 0-5)",
			nargs);
		return;
	}
	va_start(ap, nargs);
	for (int i = 0; i < nargs; i++)
		args[i] = va_arg(ap, struct ir_opnd);
	va_end(ap);
	for (int i = 0; i < nargs; i++)
		if (!opnd_ok(ir, args[i], K_REG | K_IMM | K_STACK | K_MAP, "call"))
			return;
	if (dst != IR_NOREG && !reg_ok(ir, dst, "call"))
		return;
	in = ir_push(ir, IRI_CALL);
	if (!in)
		return;
	in->code = helper;
	in->dst = dst;
	in->nargs = nargs;
	memcpy(in->args, args, sizeof(args[0]) * nargs);
}

void ir_exit(struct ir *ir, struct ir_opnd val)
{
	struct ir_insn *in;

	if (!opnd_ok(ir, val, K_REG | K_IMM, "exit"))
		return;
	in = ir_push(ir, IRI_EXIT);
	if (in)
		in->a = val;
}

/* ---- composites --------------------------------------------------------- */

void ir_zero(struct ir *ir, int off, unsigned int size)
{
	while (size) {
		unsigned int w = 1;

		if (size >= 8 && !(off & 7))
			w = 8;
		else if (size >= 4 && !(off & 3))
			w = 4;
		else if (size >= 2 && !(off & 1))
			w = 2;
		ir_store(ir, IR_S(off), 0, w, IR_I(0));
		off += w;
		size -= w;
	}
}

void ir_probe_read(struct ir *ir, ir_reg dst, int off, unsigned int size,
		   struct ir_opnd src, bool user, bool str)
{
	int helper;

	if (str) {
		ir_zero(ir, off, size);
		helper = user ? BPF_FUNC_probe_read_user_str :
				BPF_FUNC_probe_read_kernel_str;
	} else {
		helper = user ? BPF_FUNC_probe_read_user : BPF_FUNC_probe_read_kernel;
	}
	ir_call(ir, dst, helper, 3, IR_S(off), IR_I(size), src);
}

void ir_map_lookup_or_init(struct ir *ir, ir_reg dst, struct bmap *map,
			   int key, int init, int fail_label)
{
	int have = ir_label_new(ir);

	ir_call(ir, dst, BPF_FUNC_map_lookup_elem, 2, IR_M(map), IR_S(key));
	ir_jmp(ir, BPF_JNE, dst, IR_I(0), have);
	ir_call(ir, IR_NOREG, BPF_FUNC_map_update_elem, 4, IR_M(map), IR_S(key),
		IR_S(init), IR_I(BPF_NOEXIST));
	ir_call(ir, dst, BPF_FUNC_map_lookup_elem, 2, IR_M(map), IR_S(key));
	ir_jmp(ir, BPF_JEQ, dst, IR_I(0), fail_label);
	ir_label(ir, have);
}
