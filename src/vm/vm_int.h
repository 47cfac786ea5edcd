/* SPDX-License-Identifier: MIT */
/*
 * Inside the VM: the verified program, the helper table and the ALU
 * semantics that the verifier (for constants), the interpreter and the
 * JIT's tests share.
 */
#ifndef FAY_VM_VM_INT_H
#define FAY_VM_VM_INT_H

#include "vm/vm.h"

/* A helper as both the interpreter and the JIT call it: BPF r1..r5, then
 * the caller's environment (x86-64: rdi rsi rdx rcx r8, r9). */
typedef uint64_t (*vm_helper_fn)(uint64_t, uint64_t, uint64_t, uint64_t,
				 uint64_t, const struct vm_env *);

/* What a helper's arguments and result are, for the verifier. */
enum vm_arg {
	VA_NONE,		/* not an argument */
	VA_ANY,			/* any initialised number */
	VA_MAP,			/* a map pointer (ld_imm64 of a map) */
	VA_KEY,			/* pointer to key_size readable bytes */
	VA_VALUE,		/* pointer to value_size readable bytes */
	VA_MEM,			/* pointer to readable bytes, size in the next arg */
	VA_UNINIT_MEM,		/* pointer to writable bytes, size in the next arg */
	VA_SIZE,		/* a constant or bounded number > 0: the size */
	VA_CTX,			/* the context pointer, unmoved (r1 at entry) */
};

enum vm_ret { VR_SCALAR, VR_MAP_VALUE_OR_NULL };

struct vm_helper {
	const char *name;
	vm_helper_fn fn;
	enum vm_arg args[5];
	enum vm_ret ret;
	int map_type;		/* for VA_MAP: the only type taken (0: any
				 * lookup-able map, -1: a ring, > 0: that
				 * BPF_MAP_TYPE_*) */
};

/* The helper with BPF id, or NULL when the VM does not support it. */
const struct vm_helper *vm_helper(int id);

struct vm_prog {
	struct bpf_insn *insns;	/* map loads resolved to struct vm_map * */
	size_t n;
	uint64_t (*now)(const struct vm_env *);	/* vm_prog_set_now() */
	uint8_t *cmap;		/* per insn: a call's map argument, index + 1
				 * (the verifier's; 0: no map) */
	struct vm_map *maps[VM_MAX_MAPS];
	size_t nmaps;
	size_t ctx_size;
	/* JIT */
	void *code;
	size_t code_size, code_map;
	uint64_t (*jitted)(void *ctx, const struct vm_env *env);
	bool calls_out;		/* the code calls a helper (not inlined, not the clock) */
};

/* dst op src for a BPF ALU op (BPF_ADD ... BPF_ARSH, BPF_NEG, BPF_MOV)
 * with BPF's semantics: unsigned div/mod, x / 0 = 0, x % 0 = x, shift
 * counts masked to the width; 32-bit results zero-extended. */
static inline uint64_t vm_alu(int op, bool is64, uint64_t a, uint64_t b)
{
	if (!is64) {
		uint32_t x = (uint32_t)a, y = (uint32_t)b;

		switch (op) {
		case BPF_ADD:  return (uint32_t)(x + y);
		case BPF_SUB:  return (uint32_t)(x - y);
		case BPF_MUL:  return (uint32_t)(x * y);
		case BPF_DIV:  return y ? x / y : 0;
		case BPF_MOD:  return y ? x % y : x;
		case BPF_OR:   return x | y;
		case BPF_AND:  return x & y;
		case BPF_XOR:  return x ^ y;
		case BPF_LSH:  return (uint32_t)(x << (y & 31));
		case BPF_RSH:  return x >> (y & 31);
		case BPF_ARSH: return (uint32_t)((int32_t)x >> (y & 31));
		case BPF_NEG:  return (uint32_t)-x;
		case BPF_MOV:  return y;
		}
		return 0;
	}
	switch (op) {
	case BPF_ADD:  return a + b;
	case BPF_SUB:  return a - b;
	case BPF_MUL:  return a * b;
	case BPF_DIV:  return b ? a / b : 0;
	case BPF_MOD:  return b ? a % b : a;
	case BPF_OR:   return a | b;
	case BPF_AND:  return a & b;
	case BPF_XOR:  return a ^ b;
	case BPF_LSH:  return a << (b & 63);
	case BPF_RSH:  return a >> (b & 63);
	case BPF_ARSH: return (uint64_t)((int64_t)a >> (b & 63));
	case BPF_NEG:  return -a;
	case BPF_MOV:  return b;
	}
	return 0;
}

/* Whether a conditional jump op (BPF_JEQ ... BPF_JSLE, BPF_JSET) is taken. */
static inline bool vm_cond(int op, uint64_t a, uint64_t b)
{
	switch (op) {
	case BPF_JEQ:  return a == b;
	case BPF_JNE:  return a != b;
	case BPF_JGT:  return a > b;
	case BPF_JGE:  return a >= b;
	case BPF_JLT:  return a < b;
	case BPF_JLE:  return a <= b;
	case BPF_JSGT: return (int64_t)a > (int64_t)b;
	case BPF_JSGE: return (int64_t)a >= (int64_t)b;
	case BPF_JSLT: return (int64_t)a < (int64_t)b;
	case BPF_JSLE: return (int64_t)a <= (int64_t)b;
	case BPF_JSET: return (a & b) != 0;
	}
	return false;
}

/* Where an array map's values are (map.c), for the JIT's inline lookup:
 * &value of key k in slot s = values + (percpu ? s * stride : 0) + k * vsz,
 * for k < cap and s < nslots.  false for other map types. */
struct vm_array_layout {
	char *values;
	size_t vsz, stride;
	uint32_t cap;
	unsigned int nslots;
	bool percpu;
};
bool vm_map_array_layout(const struct vm_map *m, struct vm_array_layout *l);

/* Append a record of n bytes to slot's ring (map.c): 0, or -ENOSPC. */
int vm_ring_output(struct vm_map *m, unsigned int slot, const void *data, uint64_t n);

/* The verifier proper (verify.c): 0 or -EINVAL with the reason in err. */
int vm_verify(const struct vm_prog *p, char *err, size_t errlen);

#endif
