/* SPDX-License-Identifier: MIT */
/*
 * Synthetic IR programs shared by the bpf unit tests: built with the IR
 * API only, the way the query code generator will.
 */
#ifndef FAY_TEST_BPF_PROGS_H
#define FAY_TEST_BPF_PROGS_H

#include "bpf/ir.h"
#include "bpf/load.h"

/*
 * Count events per thread group in m (PERCPU_HASH, u64 key -> u64 value),
 * keeping only pids above min_pid: the shape of
 *	group e by e.pid into g select g.count() where e.pid > min_pid
 */
static inline struct ir *prog_count_per_pid(struct bmap *m, int64_t min_pid)
{
	struct ir *ir = ir_new("count_pid");
	int key, zero, out;
	ir_reg t, p, c;

	if (!ir)
		return NULL;
	key = ir_stack_alloc(ir, 8, 8);
	zero = ir_stack_alloc(ir, 8, 8);
	out = ir_label_new(ir);
	t = ir_vreg(ir);
	p = ir_vreg(ir);
	c = ir_vreg(ir);
	ir_set_pos(ir, 1, 1);
	ir_comment(ir, "key = pid");
	ir_call(ir, t, BPF_FUNC_get_current_pid_tgid, 0);
	ir_alu(ir, BPF_RSH, t, IR_I(32));
	ir_set_pos(ir, 1, 30);
	ir_jmp(ir, BPF_JLE, t, IR_I(min_pid), out);
	ir_set_pos(ir, 2, 5);
	ir_store(ir, IR_S(key), 0, 8, IR_R(t));
	ir_zero(ir, zero, 8);
	ir_map_lookup_or_init(ir, p, m, key, zero, out);
	ir_load(ir, c, IR_R(p), 0, 8, 0);
	ir_alu(ir, BPF_ADD, c, IR_I(1));
	ir_store(ir, IR_R(p), 0, 8, IR_R(c));
	ir_set_pos(ir, 0, 0);
	ir_label(ir, out);
	ir_exit(ir, IR_I(0));
	return ir;
}

#define SPILL_N 12

/* The value the spill program computes for slot i. */
static inline uint64_t spill_value(int i)
{
	return (uint64_t)(i + 1) * 1000 + (uint64_t)i;
}

/*
 * SPILL_N values, each born from a helper call and all alive across every
 * later call (more than the four callee-saved registers), then written to
 * arr[i] (ARRAY, u32 -> u64) one map update each (more calls) and summed
 * into the return value.  Runs as a socket filter under BPF_PROG_TEST_RUN.
 */
static inline struct ir *prog_spill(struct bmap *arr)
{
	struct ir *ir = ir_new("spill");
	ir_reg v[SPILL_N], sum;
	int key, val;

	if (!ir)
		return NULL;
	key = ir_stack_alloc(ir, 4, 4);
	val = ir_stack_alloc(ir, 8, 8);
	for (int i = 0; i < SPILL_N; i++) {
		v[i] = ir_vreg(ir);
		ir_call(ir, v[i], BPF_FUNC_get_smp_processor_id, 0);
		ir_alu(ir, BPF_MUL, v[i], IR_I(0));
		ir_alu(ir, BPF_ADD, v[i], IR_I(spill_value(i)));
	}
	for (int i = 0; i < SPILL_N; i++) {
		ir_store(ir, IR_S(key), 0, 4, IR_I(i));
		ir_store(ir, IR_S(val), 0, 8, IR_R(v[i]));
		ir_call(ir, IR_NOREG, BPF_FUNC_map_update_elem, 4, IR_M(arr),
			IR_S(key), IR_S(val), IR_I(BPF_ANY));
	}
	sum = ir_vreg(ir);
	ir_mov(ir, sum, IR_I(0));
	for (int i = 0; i < SPILL_N; i++)
		ir_alu(ir, BPF_ADD, sum, IR_R(v[i]));
	ir_exit(ir, IR_R(sum));
	return ir;
}

#endif

#ifndef FAY_TEST_BPF_PROGS_EXTRA
#define FAY_TEST_BPF_PROGS_EXTRA
/*
 * Pieces for probe programs: filter on the current process, add to a slot
 * of a per-CPU array (u32 -> u64).  key is an 8-byte stack slot.
 */
static inline void emit_only_tgid(struct ir *ir, int64_t tgid, int out)
{
	ir_reg t = ir_vreg(ir);

	ir_call(ir, t, BPF_FUNC_get_current_pid_tgid, 0);
	ir_alu(ir, BPF_RSH, t, IR_I(32));
	ir_jmp(ir, BPF_JNE, t, IR_I(tgid), out);
}

static inline void emit_array_add(struct ir *ir, struct bmap *arr, int key,
				  uint32_t idx, struct ir_opnd val, int out)
{
	ir_reg p = ir_vreg(ir), c = ir_vreg(ir);

	ir_store(ir, IR_S(key), 0, 4, IR_I(idx));
	ir_call(ir, p, BPF_FUNC_map_lookup_elem, 2, IR_M(arr), IR_S(key));
	ir_jmp(ir, BPF_JEQ, p, IR_I(0), out);
	ir_load(ir, c, IR_R(p), 0, 8, 0);
	if (val.kind == IR_O_REG)
		ir_alu(ir, BPF_ADD, c, val);
	else
		ir_alu(ir, BPF_ADD, c, IR_I(val.imm));
	ir_store(ir, IR_R(p), 0, 8, IR_R(c));
}
#endif
