// SPDX-License-Identifier: MIT
/*
 * The verifier: proves that a program can run inside the traced process
 * without touching memory it does not own, leaking a pointer or running
 * forever, or refuses it with the instruction and the reason.
 *
 * Programs have forward jumps only (no back edge), so the control flow
 * graph is acyclic and instruction indices are a topological order: one
 * pass in index order, with the abstract state reaching each instruction
 * the join of the states its predecessors propagate, visits each
 * instruction once (linear time, no path explosion on the 2^k paths of a
 * chain of hist() bucket tests).
 *
 * The abstract state: each register is NONE (never written on some
 * path), a number with unsigned and signed ranges, or a pointer to the
 * context (fixed offset), the stack (fixed offset), a map value (a
 * bounded offset range), a map value or NULL (from a lookup, until
 * compared with 0; copies share an id and are resolved together) or a
 * map.  Each stack byte is uninitialised, data, or part of an 8-byte
 * spilled register (whose state, pointer or number, is restored by an
 * 8-byte load).  Conditional jumps against constants vv_narrow the ranges
 * on each side; a side whose range becomes empty is dead.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/verify_int.h"

const char *const vv_rt_name[] = {
	"uninitialised", "a number", "the context pointer", "a stack pointer",
	"a map value pointer", "a map value pointer that may be NULL", "a map",
};

int vv_fail(struct vctx *v, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!v->err || !v->errlen)
		return -EINVAL;
	n = snprintf(v->err, v->errlen, "insn %zu: ", v->pc);
	if (n >= 0 && (size_t)n < v->errlen) {
		va_start(ap, fmt);
		vsnprintf(v->err + n, v->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int flow(struct vctx *v, const struct state *st, size_t t)
{
	if (t >= v->p->n)
		return vv_fail(v, "falls off the end of the program (no exit)");
	if (!v->at[t]) {
		v->at[t] = malloc(sizeof(*st));
		if (!v->at[t])
			return -ENOMEM;
		memcpy(v->at[t], st, sizeof(*st));
		return 0;
	}
	vv_state_join(v->at[t], st);
	return 0;
}

/* ---- instructions --------------------------------------------------------- */

static int do_alu(struct vctx *v, struct state *s, const struct bpf_insn *in)
{
	bool is64 = BPF_CLASS(in->code) == BPF_ALU64;
	int op = BPF_OP(in->code);
	struct reg *d = &s->r[in->dst_reg], src;

	if (op == BPF_END)
		return vv_fail(v, "byte swaps are not supported");
	if (op > BPF_END || (op == BPF_NEG && BPF_SRC(in->code) == BPF_X))
		return vv_fail(v, "unknown ALU operation 0x%02x", in->code);
	if (in->off != 0)
		return vv_fail(v, "signed division and sign-extending moves (off %d) are "
			    "not supported", in->off);
	if (in->dst_reg == BPF_REG_10)
		return vv_fail(v, "writes r10, the read-only frame pointer");
	if (BPF_SRC(in->code) == BPF_X) {
		src = s->r[in->src_reg];
		if (src.type == R_NONE)
			return vv_fail(v, "%s is read before it is written", vv_rname(in->src_reg));
	} else {
		vv_sc_const(&src, is64 ? (uint64_t)(int64_t)in->imm : (uint32_t)in->imm);
		if ((op == BPF_LSH || op == BPF_RSH || op == BPF_ARSH) &&
		    (uint32_t)in->imm >= (is64 ? 64u : 32u))
			return vv_fail(v, "shift by %d is out of range", in->imm);
	}
	if (op != BPF_MOV && d->type == R_NONE)
		return vv_fail(v, "%s is read before it is written", vv_rname(in->dst_reg));

	if (op == BPF_MOV) {
		if (is64) {
			*d = src;
			return 0;
		}
		if (src.type != R_SCALAR)
			return vv_fail(v, "truncates %s to 32 bits (a pointer leak)",
				    vv_rt_name[src.type]);
		vv_sc_alu32(op, d, &src);
		return 0;
	}
	if (d->type == R_SCALAR && src.type == R_SCALAR) {
		if (vv_sc_is_const(d) && vv_sc_is_const(&src))
			vv_sc_const(d, vm_alu(op, is64, d->umin, src.umin));
		else if (is64)
			vv_sc_alu64(op, d, &src);
		else
			vv_sc_alu32(op, d, &src);
		return 0;
	}
	/* Pointer arithmetic: pointer += / -= number, 64-bit only. */
	if (src.type != R_SCALAR)
		return vv_fail(v, "arithmetic with %s as operand (only pointer += number "
			    "and pointer -= number are allowed)", vv_rt_name[src.type]);
	if (!is64 || (op != BPF_ADD && op != BPF_SUB))
		return vv_fail(v, "%s on %s (only 64-bit += and -= of a number are allowed)",
			    is64 ? "this operation" : "32-bit arithmetic", vv_rt_name[d->type]);
	if (d->type == R_MAPV_NULL)
		return vv_fail(v, "arithmetic on %s before it is compared with 0",
			    vv_rt_name[d->type]);
	if (d->type == R_MAP)
		return vv_fail(v, "arithmetic on a map");
	if (d->type != R_MAPV && !vv_sc_is_const(&src))
		return vv_fail(v, "adds a variable to %s (only constant offsets into the "
			    "stack and the context)", vv_rt_name[d->type]);
	if (src.smin < -(1 << 29) || src.smax > (1 << 29))
		return vv_fail(v, "adds a number that is not bounded to +-2^29 to %s "
			    "(compare or mask it first)", vv_rt_name[d->type]);
	if (op == BPF_ADD) {
		d->lo += src.smin;
		d->hi += src.smax;
	} else {
		d->lo -= src.smax;
		d->hi -= src.smin;
	}
	if (d->lo < -(1 << 30) || d->hi > (1 << 30))
		return vv_fail(v, "pointer offset out of range");
	return 0;
}

static void resolve_null(struct state *s, uint32_t id, bool null)
{
	for (int i = 0; i < 11 + VM_STACK_SIZE / 8; i++) {
		struct reg *r = i < 11 ? &s->r[i] : &s->spill[i - 11];

		if (r->type != R_MAPV_NULL || r->id != id)
			continue;
		if (null) {
			vv_sc_const(r, 0);
		} else {
			r->type = R_MAPV;
			r->id = 0;
		}
	}
}

static int do_jmp(struct vctx *v, struct state *s, const struct bpf_insn *in,
		  size_t pc)
{
	int op = BPF_OP(in->code);
	size_t t = pc + 1 + (size_t)(ssize_t)in->off;
	struct reg *d = &s->r[in->dst_reg], src;
	struct state *taken;
	int rc;

	if (op > BPF_JSLE || op == BPF_CALL || op == BPF_EXIT || op == BPF_JA)
		return vv_fail(v, "unknown jump 0x%02x", in->code);
	if (BPF_SRC(in->code) == BPF_X) {
		src = s->r[in->src_reg];
		if (src.type == R_NONE)
			return vv_fail(v, "%s is read before it is written", vv_rname(in->src_reg));
	} else {
		vv_sc_const(&src, (uint64_t)(int64_t)in->imm);
	}
	if (d->type == R_NONE)
		return vv_fail(v, "%s is read before it is written", vv_rname(in->dst_reg));
	if (d->type == R_MAPV_NULL) {
		if (!vv_sc_is_const(&src) || src.umin != 0 || (op != BPF_JEQ && op != BPF_JNE))
			return vv_fail(v, "a map value pointer that may be NULL can only be "
				    "compared (== or !=) with 0");
		taken = malloc(sizeof(*taken));
		if (!taken)
			return -ENOMEM;
		*taken = *s;
		resolve_null(taken, d->id, op == BPF_JEQ);
		resolve_null(s, d->id, op != BPF_JEQ);
		rc = flow(v, taken, t);
		free(taken);
		return rc ? rc : flow(v, s, pc + 1);
	}
	if (d->type != R_SCALAR || src.type != R_SCALAR)
		return vv_fail(v, "compares %s with %s (only numbers, and a lookup result "
			    "with 0, can be compared)", vv_rt_name[d->type], vv_rt_name[src.type]);
	taken = malloc(sizeof(*taken));
	if (!taken)
		return -ENOMEM;
	*taken = *s;
	{
		bool can_take = true, can_fall = true;

		if (vv_sc_is_const(&src)) {
			can_take = vv_narrow(&taken->r[in->dst_reg], op, src.umin, true);
			can_fall = vv_narrow(&s->r[in->dst_reg], op, src.umin, false);
		}
		rc = can_take ? flow(v, taken, t) : 0;
		free(taken);
		if (rc)
			return rc;
		return can_fall ? flow(v, s, pc + 1) : 0;
	}
}

/* Static checks: encodings, jump targets, reachability. */
static int check_cfg(struct vctx *v)
{
	const struct vm_prog *p = v->p;
	size_t n = p->n;
	uint8_t *reach, *slot2;
	int rc = 0;

	if (n == 0) {
		v->pc = 0;
		return vv_fail(v, "empty program");
	}
	if (n > VM_MAX_INSNS) {
		v->pc = 0;
		return vv_fail(v, "%zu instructions, at most %d", n, VM_MAX_INSNS);
	}
	reach = calloc(n, 1);
	slot2 = calloc(n, 1);
	if (!reach || !slot2) {
		free(reach);
		free(slot2);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		const struct bpf_insn *in = &p->insns[i];
		int cls = BPF_CLASS(in->code);

		v->pc = i;
		if (in->dst_reg > 10 || in->src_reg > 10) {
			rc = vv_fail(v, "register number out of range");
			break;
		}
		if (cls == BPF_LD) {
			if (in->code != (BPF_LD | BPF_DW | BPF_IMM)) {
				rc = vv_fail(v, "legacy packet loads are not supported");
				break;
			}
			if (i + 1 >= n || p->insns[i + 1].code || p->insns[i + 1].dst_reg ||
			    p->insns[i + 1].src_reg || p->insns[i + 1].off) {
				rc = vv_fail(v, "ld_imm64 without a valid second half");
				break;
			}
			if (in->src_reg != 0 && in->src_reg != BPF_PSEUDO_MAP_FD) {
				rc = vv_fail(v, "ld_imm64 of pseudo source %d is not supported",
					  in->src_reg);
				break;
			}
			if (in->src_reg == BPF_PSEUDO_MAP_FD &&
			    (in->imm < 0 || (size_t)in->imm >= p->nmaps || p->insns[i + 1].imm)) {
				rc = vv_fail(v, "map %d does not exist (%zu maps)", in->imm, p->nmaps);
				break;
			}
			slot2[++i] = 1;
			continue;
		}
		if (cls == BPF_JMP32) {
			rc = vv_fail(v, "32-bit jumps are not supported");
			break;
		}
		if (cls == BPF_JMP) {
			int op = BPF_OP(in->code);

			if (op == BPF_CALL && in->src_reg) {
				rc = vv_fail(v, "calls of BPF functions and kernel functions "
					  "are not supported");
				break;
			}
			if (op == BPF_CALL || op == BPF_EXIT)
				continue;
			if (in->off < 0) {
				rc = vv_fail(v, "jumps back to insn %zd: loops are not allowed",
					  (ssize_t)i + 1 + in->off);
				break;
			}
			if (i + 1 + (size_t)in->off >= n) {
				rc = vv_fail(v, "jumps out of the program (to insn %zu)",
					  i + 1 + (size_t)in->off);
				break;
			}
		}
		if ((cls == BPF_LDX || cls == BPF_STX || cls == BPF_ST) &&
		    BPF_MODE(in->code) != BPF_MEM) {
			rc = vv_fail(v, "%s are not supported",
				  BPF_MODE(in->code) == BPF_ATOMIC ? "atomic operations"
								   : "this load/store mode");
			break;
		}
	}
	/* Reachability, and no jump into the middle of an ld_imm64. */
	if (!rc)
		reach[0] = 1;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct bpf_insn *in = &p->insns[i];
		int cls = BPF_CLASS(in->code), op = BPF_OP(in->code);

		v->pc = i;
		if (slot2[i])
			continue;
		if (!reach[i]) {
			rc = vv_fail(v, "unreachable instruction");
			break;
		}
		if (cls == BPF_JMP && op == BPF_EXIT)
			continue;
		if (cls == BPF_JMP && op != BPF_CALL) {
			size_t t = i + 1 + (size_t)in->off;

			if (slot2[t]) {
				rc = vv_fail(v, "jumps into the middle of an ld_imm64");
				break;
			}
			reach[t] = 1;
			if (op == BPF_JA)
				continue;
		}
		size_t nx = i + (cls == BPF_LD ? 2 : 1);

		if (nx >= n) {
			rc = vv_fail(v, "falls off the end of the program (no exit)");
			break;
		}
		reach[nx] = 1;
	}
	free(reach);
	free(slot2);
	return rc;
}

static int step(struct vctx *v, struct state *s, size_t pc)
{
	const struct bpf_insn *in = &v->p->insns[pc];
	int cls = BPF_CLASS(in->code), op = BPF_OP(in->code), size, rc;
	struct reg val, out;

	switch (cls) {
	case BPF_ALU: case BPF_ALU64:
		rc = do_alu(v, s, in);
		return rc ? rc : flow(v, s, pc + 1);
	case BPF_LD:
		if (in->dst_reg == BPF_REG_10)
			return vv_fail(v, "writes r10, the read-only frame pointer");
		if (in->src_reg == BPF_PSEUDO_MAP_FD)
			s->r[in->dst_reg] = (struct reg){ .type = R_MAP, .map = (uint8_t)in->imm };
		else
			vv_sc_const(&s->r[in->dst_reg], (uint64_t)(uint32_t)in->imm |
				 (uint64_t)(uint32_t)v->p->insns[pc + 1].imm << 32);
		return flow(v, s, pc + 2);
	case BPF_LDX:
		if (in->dst_reg == BPF_REG_10)
			return vv_fail(v, "writes r10, the read-only frame pointer");
		size = BPF_SIZE(in->code) == BPF_B ? 1 : BPF_SIZE(in->code) == BPF_H ? 2
		     : BPF_SIZE(in->code) == BPF_W ? 4 : 8;
		rc = vv_check_mem(v, s, in->src_reg, in->off, size, false, NULL, &out);
		if (rc)
			return rc;
		s->r[in->dst_reg] = out;
		return flow(v, s, pc + 1);
	case BPF_ST: case BPF_STX:
		size = BPF_SIZE(in->code) == BPF_B ? 1 : BPF_SIZE(in->code) == BPF_H ? 2
		     : BPF_SIZE(in->code) == BPF_W ? 4 : 8;
		if (cls == BPF_STX) {
			val = s->r[in->src_reg];
			if (val.type == R_NONE)
				return vv_fail(v, "%s is read before it is written",
					    vv_rname(in->src_reg));
			if (val.type != R_SCALAR && s->r[in->dst_reg].type != R_STACK)
				return vv_fail(v, "stores %s to memory other than the stack "
					    "(a pointer leak)", vv_rt_name[val.type]);
		} else {
			vv_sc_const(&val, (uint64_t)(int64_t)in->imm);
		}
		if (size < 8 && val.type == R_SCALAR)
			vv_sc_range(&val, 0, (1ull << (size * 8)) - 1);
		rc = vv_check_mem(v, s, in->dst_reg, in->off, size, true, &val, NULL);
		return rc ? rc : flow(v, s, pc + 1);
	case BPF_JMP:
		if (op == BPF_EXIT) {
			if (s->r[0].type != R_SCALAR)
				return vv_fail(v, "exit with r0 %s (%s)", vv_rt_name[s->r[0].type],
					    s->r[0].type == R_NONE ? "set r0 first"
								   : "a pointer leak");
			return 0;
		}
		if (op == BPF_CALL) {
			rc = vv_do_call(v, s, in);
			return rc ? rc : flow(v, s, pc + 1);
		}
		if (op == BPF_JA)
			return flow(v, s, pc + 1 + (size_t)in->off);
		return do_jmp(v, s, in, pc);
	}
	return vv_fail(v, "unknown instruction class (code 0x%02x)", in->code);
}

int vm_verify(const struct vm_prog *p, char *err, size_t errlen)
{
	struct vctx v = { .p = p, .err = err, .errlen = errlen };
	struct state *s;
	int rc;

	if (p->ctx_size > 4096) {
		v.pc = 0;
		return vv_fail(&v, "context of %zu bytes (at most 4096)", p->ctx_size);
	}
	rc = check_cfg(&v);
	if (rc)
		return rc;
	v.at = calloc(p->n, sizeof(*v.at));
	s = calloc(1, sizeof(*s));
	if (!v.at || !s) {
		free(v.at);
		free(s);
		return -ENOMEM;
	}
	s->r[1] = (struct reg){ .type = R_CTX };
	s->r[10] = (struct reg){ .type = R_STACK };
	v.at[0] = s;
	for (size_t pc = 0; pc < p->n && !rc; pc++) {
		s = v.at[pc];
		if (!s)
			continue;	/* dead on every path, or an ld_imm64 half */
		v.at[pc] = NULL;
		v.pc = pc;
		rc = step(&v, s, pc);
		free(s);
	}
	for (size_t i = 0; i < p->n; i++)
		free(v.at[i]);
	free(v.at);
	return rc;
}
