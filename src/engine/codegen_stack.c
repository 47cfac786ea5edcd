// SPDX-License-Identifier: MIT
/*
 * Stack keys in the probe (plan.h "Stacks"): the frames into a per-CPU
 * scratch (fay_stkscr), hashed, and kept in a hash map (fay_stk) under
 * that hash, which is the key's id.  The frames come from the kernel's
 * walk, bpf_get_stack() (frame pointers for a user stack, its unwinder
 * for a kernel stack), or from the process's unwind table
 * (codegen_ustack.c).  Unlike bpf_get_stackid()'s stack map, whose
 * bucket (hash % entries) holding another stack answers -EEXIST, two
 * stacks meet only when their hashes do (62 bits of it: bit 62 marks the
 * id, bit 63 clear keeps it apart from an errno).  The reader
 * (stacks.c) looks the id up there and names the frames as the key's
 * kind says (s.ustack, s.kstack): a user and a kernel stack never have
 * the same addresses.  Inline probes and spans run in fay's VM, whose
 * stack map (vm_stack_intern(): equal stacks share an entry, no stack
 * takes another's) keeps the get_stackid helper.
 */
#include <errno.h>

#include "engine/codegen.h"
#include "engine/engine_int.h"

/* the hash of the frames (splitmix-like: xor, multiply, shift) */
#define STK_SEED	0x9e3779b97f4a7c15ll
#define STK_MUL		0xff51afd7ed558ccdll

ir_reg cg_stack_scratch(struct cg *g, int fail)
{
	struct ir *ir = g->ir;
	int slot = ir_stack_alloc(ir, 8, 8);
	ir_reg scr = ir_vreg(ir), tid = ir_vreg(ir);

	ir_store(ir, IR_S(slot), 0, 8, IR_I(0));
	ir_call(ir, scr, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->stkscr), IR_S(slot));
	ir_jmp(ir, BPF_JEQ, scr, IR_I(0), fail);
	ir_call(ir, tid, BPF_FUNC_get_current_pid_tgid, 0);
	ir_store(ir, IR_R(scr), 8 * g->p->stack_depth, 8, IR_R(tid));
	return scr;
}

void cg_stack_keep(struct cg *g, const struct plan_key *k, int key, ir_reg scr, ir_reg n)
{
	struct ir *ir = g->ir;
	int all = g->p->stack_depth, slot = ir_stack_alloc(ir, 8, 8);
	int hashed = ir_label_new(ir), stored = ir_label_new(ir), inserted = ir_label_new(ir);
	int torn = ir_label_new(ir), lost = ir_label_new(ir), out = ir_label_new(ir);
	int ok = ir_label_new(ir);
	ir_reg tid = ir_vreg(ir), t = ir_vreg(ir), h = ir_vreg(ir), r = ir_vreg(ir);
	ir_reg nn = ir_vreg(ir);

	/* n through the scratch: the verifier takes it as any value, so a
	 * walk's exits (each with its own n) share what follows instead of
	 * each hashing its own n frames (the unwind-table walk at depth
	 * 127: 146047 instructions processed, not 229368) */
	ir_store(ir, IR_R(scr), 8 * all + 8, 8, IR_R(n));
	ir_load(ir, nn, IR_R(scr), 8 * all + 8, 8, 0);
	n = nn;
	ir_comment(ir, "the stack's hash over its frames: its id, kept in fay_stk");
	ir_mov(ir, h, IR_I(STK_SEED));
	ir_alu(ir, BPF_XOR, h, IR_R(n));
	for (int i = 0; i < k->depth; i++) {
		ir_jmp(ir, BPF_JLE, n, IR_I(i), hashed);
		ir_load(ir, t, IR_R(scr), 8 * i, 8, 0);
		ir_alu(ir, BPF_XOR, h, IR_R(t));
		ir_alu(ir, BPF_MUL, h, IR_I(STK_MUL));
		ir_mov(ir, t, IR_R(h));
		ir_alu(ir, BPF_RSH, t, IR_I(29));
		ir_alu(ir, BPF_XOR, h, IR_R(t));
	}
	ir_label(ir, hashed);
	ir_alu(ir, BPF_AND, h, IR_I(ENGINE_STACK_ID_BIT - 1));
	ir_alu(ir, BPF_OR, h, IR_I(ENGINE_STACK_ID_BIT));
	ir_store(ir, IR_S(slot), 0, 8, IR_R(h));
	/* a stack seen before: found without the bucket's lock */
	ir_call(ir, r, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->stk), IR_S(slot));
	ir_jmp(ir, BPF_JNE, r, IR_I(0), stored);
	ir_call(ir, r, BPF_FUNC_map_update_elem, 4, IR_M(g->e->stk), IR_S(slot), IR_R(scr),
		IR_I(BPF_NOEXIST));
	/* an int on the guest's Linux 6.1 (the map's own update, called
	 * directly), its upper half zero: -E2BIG came out as 4294967289 */
	ir_alu(ir, BPF_LSH, r, IR_I(32));
	ir_alu(ir, BPF_ARSH, r, IR_I(32));
	ir_jmp(ir, BPF_JEQ, r, IR_I(0), inserted);
	ir_jmp(ir, BPF_JEQ, r, IR_I(-EEXIST), stored);	/* another thread's, meanwhile */
	/* the map full (E2BIG; ENOMEM, EBUSY): the key says so, its row
	 * counts the stacks it could not keep */
	ir_store(ir, IR_S(key), k->bpf_offset, 8, IR_R(r));
	ir_goto(ir, out);
	/* a walk that took the scratch over while this one was preempted
	 * (a uprobe's program runs with migration disabled, not
	 * preemption) wrote its owner first: checked after the last read
	 * of the scratch, the hash (else another stack's id) and the copy
	 * (torn: taken back out) */
	ir_label(ir, inserted);
	ir_call(ir, tid, BPF_FUNC_get_current_pid_tgid, 0);
	ir_load(ir, t, IR_R(scr), 8 * all, 8, 0);
	ir_jmp(ir, BPF_JNE, t, IR_R(tid), torn);
	ir_goto(ir, ok);
	ir_label(ir, stored);
	ir_call(ir, tid, BPF_FUNC_get_current_pid_tgid, 0);
	ir_load(ir, t, IR_R(scr), 8 * all, 8, 0);
	ir_jmp(ir, BPF_JNE, t, IR_R(tid), lost);
	ir_label(ir, ok);
	ir_store(ir, IR_S(key), k->bpf_offset, 8, IR_R(h));
	ir_goto(ir, out);
	ir_label(ir, torn);
	ir_call(ir, IR_NOREG, BPF_FUNC_map_delete_elem, 2, IR_M(g->e->stk), IR_S(slot));
	ir_label(ir, lost);
	ir_store(ir, IR_S(key), k->bpf_offset, 8, IR_I(-ENOSPC));
	cg_count_drop(g, EC_LOST);
	ir_label(ir, out);
}

/* The kernel's walk of stack k into the key: bpf_get_stack() */
static void cg_stack_get(struct cg *g, const struct plan_key *k, int key)
{
	struct ir *ir = g->ir;
	int fail = ir_label_new(ir), have = ir_label_new(ir), out = ir_label_new(ir);
	ir_reg scr, r = ir_vreg(ir), n = ir_vreg(ir);

	ir_comment(ir, "the %s stack by the kernel's walk", k->stack == PSTACK_USER ? "user" :
		   "kernel");
	ir_mov(ir, r, IR_I(-ENOMEM));	/* (no scratch: never) */
	scr = cg_stack_scratch(g, fail);
	ir_call(ir, r, BPF_FUNC_get_stack, 4, IR_R(ir_ctx(ir)), IR_R(scr), IR_I(8 * k->depth),
		IR_I(k->stack == PSTACK_USER ? BPF_F_USER_STACK : 0));
	/* (the kernel zeroes the buffer past the frames, up to the size) */
	for (int i = k->depth; i < g->p->stack_depth; i++)
		ir_store(ir, IR_R(scr), 8 * i, 8, IR_I(0));
	ir_jmp(ir, BPF_JSGT, r, IR_I(0), have);
	/* no stack of that kind here (a kernel stack in a uprobe, a user
	 * stack in a kernel thread): as bpf_get_stackid() says it */
	ir_jmp(ir, BPF_JSLT, r, IR_I(0), fail);
	ir_mov(ir, r, IR_I(-EFAULT));
	ir_label(ir, fail);
	ir_store(ir, IR_S(key), k->bpf_offset, 8, IR_R(r));
	ir_goto(ir, out);
	ir_label(ir, have);
	ir_mov(ir, n, IR_R(r));
	ir_alu(ir, BPF_RSH, n, IR_I(3));
	cg_stack_keep(g, k, key, scr, n);
	ir_label(ir, out);
}

void cg_stack(struct cg *g, const struct plan_key *k, int key)
{
	struct ir *ir = g->ir;
	ir_reg id = ir_vreg(ir), pt;
	int fallback = ir_label_new(ir), joined = ir_label_new(ir);

	cg_pos(g, k->e);
	if (k->stack == PSTACK_USER) {
		pt = ir_vreg(ir);
		ir_call(ir, pt, BPF_FUNC_get_current_pid_tgid, 0);
		ir_alu(ir, BPF_RSH, pt, IR_I(32));
		ir_store(ir, IR_S(key), k->bpf_offset + 8, 8, IR_R(pt));
	}
	if (g->e->vm || g->e->inl) {
		/* fay's VM: its stack map */
		ir_call(ir, id, BPF_FUNC_get_stackid, 3, IR_R(ir_ctx(ir)), IR_M(g->e->stacks),
			IR_I(k->stack == PSTACK_USER ? BPF_F_USER_STACK : 0));
		ir_store(ir, IR_S(key), k->bpf_offset, 8, IR_R(id));
		return;
	}
	if (cg_ustack(g, k, key, fallback)) {
		ir_goto(ir, joined);
		ir_label(ir, fallback);
	}
	cg_stack_get(g, k, key);
	ir_label(ir, joined);
}
