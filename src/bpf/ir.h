/* SPDX-License-Identifier: MIT */
/*
 * The BPF intermediate representation: a list of instructions on virtual
 * registers (v0, v1, ...), labels and stack slots.  A code generator emits
 * into a struct ir; ir_lower() then allocates the virtual registers onto
 * r0..r9 (spilling to the stack when short), lowers helper calls to BPF's
 * calling convention and resolves labels to jump offsets.  Each
 * instruction carries an opaque source position (line:col) so a verifier
 * rejection can be mapped back to the query text.
 *
 * Conventions:
 *  - Emission never fails on its own: the first error (allocation, a bad
 *    operand) is remembered in the ir and returned by ir_lower() and
 *    ir_error().  A code generator emits straight-line and checks once.
 *  - ALU is two-address, like BPF: ir_alu(ir, BPF_ADD, d, s) is d += s.
 *  - Every value is 64 bits wide in a register; loads zero-extend (or
 *    sign-extend with IR_SIGNED), ALU is 64-bit (ir_alu32() for 32-bit).
 *  - Stack slots are byte offsets from the frame pointer (negative),
 *    handed out by ir_stack_alloc(); IR_S(off) is the *address* fp+off.
 *  - Register r1 at entry (the program context) is available as the
 *    virtual register ir_ctx().
 *
 * Example: count events per pid in a PERCPU_HASH map m (u32 key, u64 value)
 *
 *	struct ir *ir = ir_new("count");
 *	int key = ir_stack_alloc(ir, 8, 8), zero = ir_stack_alloc(ir, 8, 8);
 *	int out = ir_label_new(ir);
 *	ir_reg t = ir_vreg(ir), p = ir_vreg(ir);
 *	ir_call(ir, t, BPF_FUNC_get_current_pid_tgid, 0);
 *	ir_alu(ir, BPF_RSH, t, IR_I(32));
 *	ir_store(ir, IR_S(key), 0, 8, IR_R(t));
 *	ir_store(ir, IR_S(zero), 0, 8, IR_I(0));
 *	ir_map_lookup_or_init(ir, p, m, key, zero, out);
 *	ir_load(ir, t, IR_R(p), 0, 8, 0);
 *	ir_alu(ir, BPF_ADD, t, IR_I(1));
 *	ir_store(ir, IR_R(p), 0, 8, IR_R(t));
 *	ir_label(ir, out);
 *	ir_exit(ir, IR_I(0));
 *	err = ir_lower(ir);
 */
#ifndef FAY_BPF_IR_H
#define FAY_BPF_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <linux/bpf.h>

struct ir;
struct bmap;			/* src/bpf/load.h */

/* A virtual register; IR_NOREG where none is wanted (a call's result). */
typedef int ir_reg;
#define IR_NOREG (-1)

enum ir_okind {
	IR_O_NONE = 0,
	IR_O_REG,		/* a virtual register */
	IR_O_IMM,		/* a 64-bit constant */
	IR_O_STACK,		/* the address fp + off (a stack slot) */
	IR_O_MAP,		/* a map (ld_imm64 pseudo map fd) */
};

/* An operand: build with the IR_R/IR_I/IR_S/IR_M macros. */
struct ir_opnd {
	enum ir_okind kind;
	union {
		ir_reg reg;
		int64_t imm;
		int off;
		struct bmap *map;
	};
};

#define IR_R(r)   ((struct ir_opnd){ .kind = IR_O_REG, .reg = (r) })
#define IR_I(v)   ((struct ir_opnd){ .kind = IR_O_IMM, .imm = (int64_t)(v) })
#define IR_S(o)   ((struct ir_opnd){ .kind = IR_O_STACK, .off = (o) })
#define IR_M(m)   ((struct ir_opnd){ .kind = IR_O_MAP, .map = (m) })

/* Flags for ir_load(). */
#define IR_SIGNED  0x1		/* sign-extend the value */
#define IR_ALU32   0x2		/* internal: set by ir_alu32() */

/* Construction.  name (<= 15 chars kept) names the program in the kernel.
 * Returns NULL and sets errno on failure; free with ir_free(). */
struct ir *ir_new(const char *name);
void ir_free(struct ir *ir);
const char *ir_name(const struct ir *ir);

/* The first error met while emitting (0 if none). */
int ir_error(const struct ir *ir);

/* A fresh virtual register. */
ir_reg ir_vreg(struct ir *ir);
/* The virtual register holding the program context (r1 at entry). */
ir_reg ir_ctx(const struct ir *ir);

/* Reserve size bytes of stack aligned to align (1, 2, 4, 8); returns the
 * (negative) offset from the frame pointer.  Contents are undefined until
 * stored: the verifier rejects reads of uninitialised stack. */
int ir_stack_alloc(struct ir *ir, unsigned int size, unsigned int align);

/* Labels: allocate with ir_label_new(), place with ir_label() once. */
int ir_label_new(struct ir *ir);
void ir_label(struct ir *ir, int label);

/* Source position tag for the instructions emitted from now on; 0:0 means
 * none.  The pair is opaque to the IR: it is printed and reported back. */
void ir_set_pos(struct ir *ir, uint32_t line, uint32_t col);

/* A comment in the IR dump (copied). */
void ir_comment(struct ir *ir, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* dst = src: a register, any 64-bit constant, a stack address or a map. */
void ir_mov(struct ir *ir, ir_reg dst, struct ir_opnd src);

/* dst op= src with op BPF_ADD, SUB, MUL, DIV, MOD, OR, AND, XOR, LSH, RSH,
 * ARSH (unsigned div/mod, as BPF); BPF_NEG ignores src.  src is a register
 * or a constant (a constant beyond 32 bits is loaded first). */
void ir_alu(struct ir *ir, int op, ir_reg dst, struct ir_opnd src);
/* The same as a 32-bit operation: the result is zero-extended. */
void ir_alu32(struct ir *ir, int op, ir_reg dst, struct ir_opnd src);

/* dst = *(size *)(base + off): base is a register holding a pointer the
 * verifier can check (ctx, map value, stack) or IR_S(slot). size 1,2,4,8;
 * flags IR_SIGNED sign-extends.  Arbitrary kernel/user memory must be read
 * with ir_probe_read(). */
void ir_load(struct ir *ir, ir_reg dst, struct ir_opnd base, int off,
	     unsigned int size, unsigned int flags);

/* *(size *)(base + off) = src: base a register or IR_S(slot); src a
 * register or a constant that fits in 32 bits (sign-extended). */
void ir_store(struct ir *ir, struct ir_opnd base, int off, unsigned int size,
	      struct ir_opnd src);

/* if (a op b) goto label, op one of BPF_JEQ, JNE, JGT, JGE, JLT, JLE
 * (unsigned), JSGT, JSGE, JSLT, JSLE (signed), JSET.  b a register or a
 * constant. */
void ir_jmp(struct ir *ir, int op, ir_reg a, struct ir_opnd b, int label);
/* goto label */
void ir_goto(struct ir *ir, int label);

/* dst = helper(args...): nargs (0..5) struct ir_opnd arguments follow.
 * dst may be IR_NOREG.  E.g. ir_call(ir, v, BPF_FUNC_ktime_get_ns, 0);
 * ir_call(ir, p, BPF_FUNC_map_lookup_elem, 2, IR_M(m), IR_S(key)). */
void ir_call(struct ir *ir, ir_reg dst, int helper, int nargs, ...);

/* return val (register or constant). */
void ir_exit(struct ir *ir, struct ir_opnd val);

/* ---- composites a code generator needs often -------------------------- */

/* Zero size bytes of stack at off. */
void ir_zero(struct ir *ir, int off, unsigned int size);

/* Copy size bytes at stack off from src (a kernel or user address in a
 * register, or a constant address).  str: a NUL-terminated string read
 * (probe_read_*_str; the slot is zeroed first so keys compare equal).
 * Returns through dst (may be IR_NOREG) the helper's result. */
void ir_probe_read(struct ir *ir, ir_reg dst, int off, unsigned int size,
		   struct ir_opnd src, bool user, bool str);

/* dst = pointer to map[key] where key is the stack slot key; when the
 * entry is missing it is created from the stack slot init (BPF_NOEXIST,
 * so a racing creator is harmless) and looked up again.  Jumps to
 * fail_label if the map is full.  With a per-CPU map the pointer is this
 * CPU's value: update it with plain loads and stores. */
void ir_map_lookup_or_init(struct ir *ir, ir_reg dst, struct bmap *map,
			   int key, int init, int fail_label);

/* ---- lowering and output ---------------------------------------------- */

/* Allocate registers, lower calls and resolve labels.  Call once, after
 * the last emission.  Returns 0 or -errno (-E2BIG: more than 512 bytes of
 * stack, -EINVAL: a register read before any write, a label never placed,
 * a jump out of range; the reason is in ir_strerror()). */
int ir_lower(struct ir *ir);
/* A sentence about the last error of ir_lower(), or "". */
const char *ir_strerror(const struct ir *ir);

/* The lowered program (valid after ir_lower(), until ir_free()).  Map
 * loads carry fd -1 until ir_fixup_maps() fills in the created maps. */
const struct bpf_insn *ir_insns(const struct ir *ir, size_t *cnt);
/* Write the fds of the maps the program references (they must be
 * created: bmap_create()).  Returns 0 or -EBADF naming none. */
int ir_fixup_maps(struct ir *ir);
/* Call f on every distinct map the program references. */
int ir_foreach_map(const struct ir *ir, int (*f)(struct bmap *, void *), void *arg);

/* The map whose fd the lowered instruction idx (an ld_imm64) loads, or
 * NULL (another instruction, idx out of range, not lowered). */
struct bmap *ir_insn_map(const struct ir *ir, size_t idx);

/* Which IR instruction and source position a lowered instruction came
 * from.  Returns the IR index, or -1 if idx is out of range. */
int ir_insn_origin(const struct ir *ir, size_t idx, uint32_t *line, uint32_t *col);

/* Number of stack bytes the lowered program uses (user slots + spills). */
unsigned int ir_stack_size(const struct ir *ir);
/* Number of virtual registers that were spilled. */
unsigned int ir_nspilled(const struct ir *ir);

/* Textual dumps.  ir_dump(): the IR, stable across runs (golden tests,
 * `--emit=ir`).  ir_dump_bpf(): the lowered program in bpftool's
 * "xlated" syntax (`--emit=bpf`). */
void ir_dump(const struct ir *ir, FILE *f);
void ir_dump_bpf(const struct ir *ir, FILE *f);
/* One lowered instruction (i points into an array; ld_imm64 reads i[1]). */
void bpf_insn_print(const struct bpf_insn *i, FILE *f);

/* Name of a helper ("ktime_get_ns"), or NULL when unknown to the dumper. */
const char *bpf_helper_name(int id);

#endif
