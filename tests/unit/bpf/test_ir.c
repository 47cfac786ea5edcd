// SPDX-License-Identifier: MIT
/*
 * IR and register allocation without a kernel: golden dumps of the IR and
 * of the lowered bytecode, spilling, call lowering and the errors a code
 * generator can make.
 */
#include <errno.h>
#include <stdlib.h>

#include "test.h"
#include "golden.h"
#include "progs.h"
#include "bpf/insn.h"

static char *dump(struct ir *ir, int bpf)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (bpf)
		ir_dump_bpf(ir, f);
	else
		ir_dump(ir, f);
	fclose(f);
	return buf;
}

static void check_golden(struct ir *ir, const char *base)
{
	char name[128], *s;

	s = dump(ir, 0);
	snprintf(name, sizeof(name), "%s.ir", base);
	golden_check(name, s);
	free(s);
	is_int(ir_lower(ir), 0, "%s lowers: %s", base, ir_strerror(ir));
	s = dump(ir, 1);
	snprintf(name, sizeof(name), "%s.bpf", base);
	golden_check(name, s);
	free(s);
}

/* No physical register below r10 may be read before it is written on
 * the straight-line path (a cheap model of the verifier's first check). */
static int reads_before_write(const struct bpf_insn *in, size_t n)
{
	unsigned int written = 1u << BPF_REG_1 | 1u << BPF_REG_10;

	for (size_t i = 0; i < n; i++) {
		const struct bpf_insn *x = &in[i];
		int cls = BPF_CLASS(x->code);

		switch (cls) {
		case BPF_ALU: case BPF_ALU64:
			if (BPF_OP(x->code) != BPF_MOV && !(written >> x->dst_reg & 1))
				return (int)i;
			if (BPF_SRC(x->code) == BPF_X && !(written >> x->src_reg & 1))
				return (int)i;
			written |= 1u << x->dst_reg;
			break;
		case BPF_LDX:
			if (!(written >> x->src_reg & 1))
				return (int)i;
			written |= 1u << x->dst_reg;
			break;
		case BPF_LD:
			written |= 1u << x->dst_reg;
			i++;
			break;
		case BPF_STX:
			if (!(written >> x->src_reg & 1) || !(written >> x->dst_reg & 1))
				return (int)i;
			break;
		case BPF_JMP:
			if (BPF_OP(x->code) == BPF_CALL) {
				written &= ~0x3eu;	/* r1-r5 clobbered */
				written |= 1;
			}
			break;
		}
	}
	return -1;
}

static void test_spill(void)
{
	struct bmap *arr = bmap_new("spill_arr", BPF_MAP_TYPE_ARRAY, 4, 8, SPILL_N);
	struct ir *ir = prog_spill(arr);
	const struct bpf_insn *in;
	size_t n;
	int calls_with_r6_9_live = 0;

	check_golden(ir, "spill");
	ok(ir_nspilled(ir) >= SPILL_N - 4, "spill: %u values spilled (>= %d)",
	   ir_nspilled(ir), SPILL_N - 4);
	ok(ir_stack_size(ir) <= 512 && ir_stack_size(ir) >= 16 + 8 * ir_nspilled(ir),
	   "spill: stack %u bytes covers the slots", ir_stack_size(ir));
	in = ir_insns(ir, &n);
	is_int(reads_before_write(in, n), -1, "spill: no register read before "
	       "it is written (r1-r5 dead after calls)");
	for (size_t i = 0; i < n; i++)
		if (in[i].code == (BPF_JMP | BPF_CALL))
			calls_with_r6_9_live++;
	is_int(calls_with_r6_9_live, 2 * SPILL_N, "spill: %d calls lowered", 2 * SPILL_N);
	ir_free(ir);
	bmap_free(arr);
}

static void test_count(void)
{
	struct bmap *m = bmap_new("counts", BPF_MAP_TYPE_PERCPU_HASH, 8, 8, 1024);
	struct ir *ir = prog_count_per_pid(m, 1);
	uint32_t line = 0, col = 0;
	size_t n;

	check_golden(ir, "count_pid");
	ir_insns(ir, &n);
	/* The last instruction is the exit of label out: no position. */
	ok(ir_insn_origin(ir, n - 1, &line, &col) > 0 && line == 0,
	   "origin of the final exit has no position");
	ok(ir_insn_origin(ir, 1, &line, &col) >= 0 && line == 1 && col == 1,
	   "origin of insn 1 is 1:1 (got %u:%u)", line, col);
	is_int(ir_insn_origin(ir, n + 5, NULL, NULL), -1, "origin out of range");
	ir_free(ir);
	bmap_free(m);
}

/* Every shape of operand, so the golden covers each lowering path. */
static void test_shapes(void)
{
	struct bmap *m = bmap_new("h", BPF_MAP_TYPE_HASH, 16, 8, 16);
	struct ir *ir = ir_new("shapes");
	ir_reg a = ir_vreg(ir), b = ir_vreg(ir), c = ir_vreg(ir);
	int s = ir_stack_alloc(ir, 16, 8), l = ir_label_new(ir), dead = ir_label_new(ir);

	ir_load(ir, a, IR_R(ir_ctx(ir)), 16, 4, IR_SIGNED);
	ir_mov(ir, b, IR_I(0x123456789abcLL));
	ir_alu(ir, BPF_XOR, b, IR_I(-0x10000000000LL));
	ir_alu32(ir, BPF_ADD, a, IR_R(b));
	ir_alu(ir, BPF_NEG, a, IR_I(0));
	ir_jmp(ir, BPF_JSGT, a, IR_I(0x100000000LL), l);
	ir_store(ir, IR_S(s), 8, 8, IR_I(0x7fffffff00LL));
	ir_probe_read(ir, c, s, 16, IR_R(a), true, true);
	ir_call(ir, c, BPF_FUNC_map_delete_elem, 2, IR_M(m), IR_S(s));
	ir_goto(ir, l);
	ir_label(ir, dead);		/* unreachable: dropped */
	ir_mov(ir, c, IR_I(7));
	ir_label(ir, l);
	ir_exit(ir, IR_R(a));
	check_golden(ir, "shapes");
	ir_free(ir);
	bmap_free(m);
}

/* Arguments that must swap registers: a cycle in the parallel move. */
static void test_parallel_move(void)
{
	struct ir *ir = ir_new("swap");
	ir_reg x = ir_vreg(ir), y = ir_vreg(ir), r = ir_vreg(ir);
	const struct bpf_insn *in;
	size_t n;
	int s = ir_stack_alloc(ir, 8, 8);

	ir_mov(ir, x, IR_I(8));		/* x -> r1 */
	ir_mov(ir, y, IR_S(s));		/* y -> r2 */
	ir_zero(ir, s, 8);
	/* probe_read_kernel(dst=y, size=x, src=y): r1<-r2, r2<-r1, r3<-r2 */
	ir_call(ir, r, BPF_FUNC_probe_read_kernel, 3, IR_R(y), IR_R(x), IR_R(y));
	ir_exit(ir, IR_R(r));
	check_golden(ir, "swap");
	in = ir_insns(ir, &n);
	is_int(reads_before_write(in, n), -1, "swap: well-formed moves");
	ir_free(ir);
}

static void test_errors(void)
{
	struct ir *ir;
	ir_reg a;
	int l;

	ir = ir_new("e1");
	a = ir_vreg(ir);
	ir_alu(ir, BPF_ADD, a, IR_I(1));
	ir_exit(ir, IR_R(a));
	is_int(ir_lower(ir), -EINVAL, "read before write is refused");
	ok(strstr(ir_strerror(ir), "v1 is read before it is written") != NULL,
	   "... and named: %s", ir_strerror(ir));
	ir_free(ir);

	ir = ir_new("e2");
	a = ir_vreg(ir);
	ir_mov(ir, a, IR_I(1));
	is_int(ir_lower(ir), -EINVAL, "falling off the end is refused");
	ok(strstr(ir_strerror(ir), "missing exit") != NULL, "... %s", ir_strerror(ir));
	ir_free(ir);

	ir = ir_new("e3");
	l = ir_label_new(ir);
	ir_goto(ir, l);
	is_int(ir_lower(ir), -EINVAL, "a label never placed is refused");
	ir_free(ir);

	ir = ir_new("e4");
	ir_stack_alloc(ir, 400, 8);
	ir_stack_alloc(ir, 200, 8);
	is_int(ir_lower(ir), -E2BIG, "more than 512 bytes of stack is refused");
	ir_free(ir);

	ir = ir_new("e5");
	ir_alu(ir, 0xf0, ir_ctx(ir), IR_I(1));
	ir_load(ir, ir_ctx(ir), IR_R(ir_ctx(ir)), 0, 3, 0);
	ir_call(ir, IR_NOREG, 1, 6, IR_I(0), IR_I(0), IR_I(0), IR_I(0), IR_I(0), IR_I(0));
	is_int(ir_error(ir), -EINVAL, "bad operation is remembered");
	ok(strstr(ir_strerror(ir), "unknown operation") != NULL,
	   "first error kept: %s", ir_strerror(ir));
	ir_free(ir);

	ir = ir_new("e6");
	ir_exit(ir, IR_R(42));
	ok(ir_error(ir) && strstr(ir_strerror(ir), "v42"), "foreign vreg: %s",
	   ir_strerror(ir));
	ir_free(ir);
}

int main(void)
{
	test_count();
	test_spill();
	test_shapes();
	test_parallel_move();
	test_errors();
	return test_done();
}
