// SPDX-License-Identifier: MIT
/*
 * Program objects and the interpreter: the reference semantics the JIT is
 * tested against.  It runs verified programs only, so it checks nothing:
 * every access was proven in bounds, every jump lands on an instruction
 * and the program has no back edge.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vm/vm_int.h"

struct vm_prog *vm_prog_new(const struct bpf_insn *insns, size_t n,
			    struct vm_map *const *maps, size_t nmaps,
			    size_t ctx_size, char *err, size_t errlen)
{
	struct vm_prog *p;

	if (err && errlen)
		err[0] = 0;
	if (nmaps > VM_MAX_MAPS) {
		snprintf(err, errlen, "%zu maps, at most %d", nmaps, VM_MAX_MAPS);
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->insns = malloc((n ? n : 1) * sizeof(*insns))) ||
	    !(p->cmap = calloc(n ? n : 1, 1))) {
		if (p)
			free(p->insns);
		free(p);
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	memcpy(p->insns, insns, n * sizeof(*insns));
	p->n = n;
	for (size_t i = 0; i < nmaps; i++)
		p->maps[i] = maps[i];
	p->nmaps = nmaps;
	p->ctx_size = ctx_size;
	if (vm_verify(p, err, errlen)) {
		vm_prog_free(p);
		errno = EINVAL;
		return NULL;
	}
	/* Map loads become the struct vm_map pointer itself. */
	for (size_t i = 0; i + 1 < n; i++) {
		struct bpf_insn *in = &p->insns[i];

		if (in->code == (BPF_LD | BPF_DW | BPF_IMM)) {
			if (in->src_reg == BPF_PSEUDO_MAP_FD) {
				uint64_t v = (uint64_t)(uintptr_t)p->maps[in->imm];

				in->src_reg = 0;
				in->imm = (int32_t)(uint32_t)v;
				in[1].imm = (int32_t)(uint32_t)(v >> 32);
			}
			i++;
		}
	}
	return p;
}

void vm_prog_free(struct vm_prog *p)
{
	if (!p)
		return;
	if (p->code)
		munmap(p->code, p->code_map);
	free(p->insns);
	free(p->cmap);
	free(p);
}

void vm_prog_set_now(struct vm_prog *p, uint64_t (*now)(const struct vm_env *env))
{
	p->now = now;
}

bool vm_prog_jitted(const struct vm_prog *p)
{
	return p->jitted != NULL;
}

size_t vm_prog_jit_size(const struct vm_prog *p)
{
	return p->jitted ? p->code_size : 0;
}

vm_code_fn vm_prog_code(const struct vm_prog *p)
{
	return p->jitted;
}

bool vm_prog_calls_out(const struct vm_prog *p)
{
	return p->calls_out;
}

/* No vector registers on the compiled path (vm.h: vm_prog_calls_out()). */
__attribute__((target("general-regs-only")))
uint64_t vm_run(const struct vm_prog *p, void *ctx, const struct vm_env *env)
{
	if (p->jitted)
		return p->jitted(ctx, env);
	return vm_interp(p, ctx, env);
}

uint64_t vm_interp(const struct vm_prog *p, void *ctx, const struct vm_env *env)
{
	uint64_t r[11] = { 0 };
	uint64_t stack[VM_STACK_SIZE / 8];
	const struct bpf_insn *in = p->insns;
	size_t pc = 0;

	r[1] = (uint64_t)(uintptr_t)ctx;
	r[10] = (uint64_t)(uintptr_t)((char *)stack + sizeof(stack));
	for (;;) {
		const struct bpf_insn *i = &in[pc++];
		int cls = BPF_CLASS(i->code), op = BPF_OP(i->code);
		uint64_t src, addr;

		switch (cls) {
		case BPF_ALU64:
		case BPF_ALU:
			if (BPF_SRC(i->code) == BPF_X)
				src = r[i->src_reg];
			else if (cls == BPF_ALU64)
				src = (uint64_t)(int64_t)i->imm;
			else
				src = (uint32_t)i->imm;
			r[i->dst_reg] = vm_alu(op, cls == BPF_ALU64, r[i->dst_reg], src);
			break;
		case BPF_LD:		/* ld_imm64 only */
			r[i->dst_reg] = (uint64_t)(uint32_t)i->imm |
					(uint64_t)(uint32_t)in[pc].imm << 32;
			pc++;
			break;
		case BPF_LDX:
			addr = r[i->src_reg] + (uint64_t)(int64_t)i->off;
			switch (BPF_SIZE(i->code)) {
			case BPF_B:  r[i->dst_reg] = *(uint8_t *)(uintptr_t)addr; break;
			case BPF_H:  r[i->dst_reg] = *(uint16_t *)(uintptr_t)addr; break;
			case BPF_W:  r[i->dst_reg] = *(uint32_t *)(uintptr_t)addr; break;
			default:     r[i->dst_reg] = *(uint64_t *)(uintptr_t)addr; break;
			}
			break;
		case BPF_ST:
		case BPF_STX:
			addr = r[i->dst_reg] + (uint64_t)(int64_t)i->off;
			src = cls == BPF_STX ? r[i->src_reg] : (uint64_t)(int64_t)i->imm;
			switch (BPF_SIZE(i->code)) {
			case BPF_B:  *(uint8_t *)(uintptr_t)addr = (uint8_t)src; break;
			case BPF_H:  *(uint16_t *)(uintptr_t)addr = (uint16_t)src; break;
			case BPF_W:  *(uint32_t *)(uintptr_t)addr = (uint32_t)src; break;
			default:     *(uint64_t *)(uintptr_t)addr = src; break;
			}
			break;
		case BPF_JMP:
			if (op == BPF_EXIT)
				return r[0];
			if (op == BPF_CALL) {
				r[0] = vm_helper(i->imm)->fn(r[1], r[2], r[3], r[4], r[5], env);
				break;
			}
			if (op == BPF_JA) {
				pc += (size_t)(ssize_t)i->off;
				break;
			}
			src = BPF_SRC(i->code) == BPF_X ? r[i->src_reg]
							: (uint64_t)(int64_t)i->imm;
			if (vm_cond(op, r[i->dst_reg], src))
				pc += (size_t)(ssize_t)i->off;
			break;
		}
	}
}
