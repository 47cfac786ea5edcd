// SPDX-License-Identifier: MIT
/*
 * fay's in-process eBPF (src/vm): the verifier refuses hostile programs
 * with a reason naming the instruction; the helpers, maps and BPF's
 * division rules behave as the kernel's; the JIT agrees with the
 * interpreter on thousands of generated programs and on every program
 * fay's code generator emits for function() queries (run on the same
 * events, the maps they leave are byte for byte the same, and the counts
 * and sums are the ones expected).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "bpf/insn.h"
#include "bpf/ir_int.h"
#include "engine/engine_int.h"
#include "query/plan.h"
#include "query/query.h"
#include "vm/vm.h"
#include "vm/vm_int.h"

#define P(...) ((const struct bpf_insn[]){ __VA_ARGS__ })
#define N(a) (sizeof(a) / sizeof((a)[0]))
#define LD_MAP(d, idx) LD_IMM64_LO(d, BPF_PSEUDO_MAP_FD, idx), LD_IMM64_HI(0)
#define LD64(d, v) LD_IMM64_LO(d, 0, v), LD_IMM64_HI(v)
#define CTX_SIZE 168		/* struct pt_regs */

static struct vm_map *maps[4];	/* 0: percpu array of 64-byte values,
				 * 1: hash u64 -> 16 bytes, 2: ring, 3: array */

static struct vm_prog *load(const struct bpf_insn *in, size_t n, char *err, size_t len)
{
	return vm_prog_new(in, n, maps, 4, CTX_SIZE, err, len);
}

#define REJECT(name, want, ...) do {					\
	static const struct bpf_insn _p[] = { __VA_ARGS__ };		\
	char _e[300];							\
	struct vm_prog *_g = load(_p, N(_p), _e, sizeof(_e));		\
	ok(!_g && strstr(_e, want), "rejects %s: %s", name, _g ? "(accepted)" : _e); \
	vm_prog_free(_g);						\
} while (0)

/* lookup of key 0 in map m into r0, 'null' instructions after the call
 * jump to the exit path; the first lines of most hostile programs. */
#define LOOKUP0(m)							\
	ST_MEM(BPF_DW, BPF_REG_10, -8, 0),				\
	LD_MAP(BPF_REG_1, m),						\
	MOV64_REG(BPF_REG_2, BPF_REG_10),				\
	ALU64_IMM(BPF_ADD, BPF_REG_2, -8),				\
	CALL_HELPER(BPF_FUNC_map_lookup_elem)

static void hostile(void)
{
	REJECT("a load past the end of a map value", "leave the 64-byte value",
	       LOOKUP0(0), JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 1),
	       LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_0, 64),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a load before the map value", "leave the 64-byte value",
	       LOOKUP0(0), JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 1),
	       LDX_MEM(BPF_B, BPF_REG_0, BPF_REG_0, -1),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a lookup result used without a NULL check", "may be NULL",
	       LOOKUP0(0), LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_0, 0), EXIT_INSN());
	REJECT("an unbounded variable offset into a map value", "not bounded",
	       MOV64_REG(BPF_REG_6, BPF_REG_1), LOOKUP0(0),
	       JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 3),
	       LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_6, 112),
	       ALU64_REG(BPF_ADD, BPF_REG_0, BPF_REG_1),
	       ST_MEM(BPF_B, BPF_REG_0, 0, 1),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	/* arg(0) >> 58 is at most 63: a 4-byte store there ends at 67 */
	REJECT("a shifted offset still too large", "offset 0..63",
	       LDX_MEM(BPF_DW, BPF_REG_7, BPF_REG_1, 112),
	       ALU64_IMM(BPF_RSH, BPF_REG_7, 58), LOOKUP0(0),
	       JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 2),
	       ALU64_REG(BPF_ADD, BPF_REG_0, BPF_REG_7),
	       ST_MEM(BPF_W, BPF_REG_0, 0, 1),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a bound checked on one path only", "not bounded",
	       MOV64_REG(BPF_REG_6, BPF_REG_1), LOOKUP0(0),
	       JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 6),
	       LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_6, 112),
	       LDX_MEM(BPF_DW, BPF_REG_2, BPF_REG_6, 104),
	       JMP_IMM(BPF_JEQ, BPF_REG_2, 0, 1),
	       ALU64_IMM(BPF_AND, BPF_REG_1, 7),
	       ALU64_REG(BPF_ADD, BPF_REG_0, BPF_REG_1),
	       ST_MEM(BPF_B, BPF_REG_0, 0, 1),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a store below the stack", "outside the 512-byte stack",
	       ST_MEM(BPF_DW, BPF_REG_10, -520, 0), MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a store above the frame", "outside the 512-byte stack",
	       ST_MEM(BPF_W, BPF_REG_10, -2, 0), MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a read of uninitialised stack", "fp-8 that is not written",
	       LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_10, -8), EXIT_INSN());
	REJECT("stack written on one path only", "not written on every path",
	       MOV64_IMM(BPF_REG_0, 0), LDX_MEM(BPF_DW, BPF_REG_2, BPF_REG_1, 112),
	       JMP_IMM(BPF_JEQ, BPF_REG_2, 0, 1),
	       ST_MEM(BPF_DW, BPF_REG_10, -8, 0),
	       LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_10, -8), EXIT_INSN());
	REJECT("an uninitialised map key", "fp-8 that is not written",
	       LD_MAP(BPF_REG_1, 0), MOV64_REG(BPF_REG_2, BPF_REG_10),
	       ALU64_IMM(BPF_ADD, BPF_REG_2, -8), CALL_HELPER(BPF_FUNC_map_lookup_elem),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a register read before it is written", "r3 is read before it is written",
	       MOV64_REG(BPF_REG_0, BPF_REG_3), EXIT_INSN());
	REJECT("r0 unset at exit", "exit with r0 uninitialised", EXIT_INSN());
	REJECT("a loop", "jumps back to insn 1: loops are not allowed",
	       MOV64_IMM(BPF_REG_0, 0), ALU64_IMM(BPF_ADD, BPF_REG_0, 1), JA(-2), EXIT_INSN());
	REJECT("a jump to itself", "loops are not allowed",
	       MOV64_IMM(BPF_REG_0, 0), JA(-1), EXIT_INSN());
	REJECT("a jump out of the program", "jumps out of the program",
	       MOV64_IMM(BPF_REG_0, 0), JA(5), EXIT_INSN());
	REJECT("a jump into an ld_imm64", "middle of an ld_imm64",
	       MOV64_IMM(BPF_REG_0, 0), JA(1), LD64(BPF_REG_1, 1ull << 40),
	       EXIT_INSN());
	REJECT("an unreachable instruction", "insn 2: unreachable",
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN(), MOV64_IMM(BPF_REG_0, 1), EXIT_INSN());
	REJECT("falling off the end", "falls off the end", MOV64_IMM(BPF_REG_0, 0));
	REJECT("an unsupported helper (trace_printk)", "helper 6 is not supported",
	       CALL_HELPER(BPF_FUNC_trace_printk), EXIT_INSN());
	REJECT("a bpf-to-bpf call", "calls of BPF functions",
	       INSN(BPF_JMP | BPF_CALL, 0, 1, 0, 1), MOV64_IMM(BPF_REG_0, 0), EXIT_INSN(),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a pointer stored into a map value", "pointer leak",
	       LOOKUP0(0), JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 1),
	       STX_MEM(BPF_DW, BPF_REG_0, BPF_REG_10, 0),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a pointer returned", "pointer leak",
	       MOV64_REG(BPF_REG_0, BPF_REG_10), EXIT_INSN());
	REJECT("a pointer truncated to 32 bits", "pointer leak",
	       MOV32_REG(BPF_REG_0, BPF_REG_10), EXIT_INSN());
	REJECT("a pointer passed where a number is wanted", "pointer leak",
	       MOV64_REG(BPF_REG_1, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_1, -8),
	       MOV64_IMM(BPF_REG_2, 8), MOV64_REG(BPF_REG_3, BPF_REG_10),
	       CALL_HELPER(BPF_FUNC_probe_read_user), EXIT_INSN());
	REJECT("a pointer multiplied", "this operation on a stack pointer",
	       MOV64_REG(BPF_REG_0, BPF_REG_10), ALU64_IMM(BPF_MUL, BPF_REG_0, 2),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("part of a spilled pointer read back", "part of a spilled pointer",
	       STX_MEM(BPF_DW, BPF_REG_10, BPF_REG_10, -8),
	       LDX_MEM(BPF_W, BPF_REG_0, BPF_REG_10, -8), EXIT_INSN());
	REJECT("a pointer compared with a number", "compares a stack pointer",
	       MOV64_IMM(BPF_REG_0, 0), JMP_IMM(BPF_JGT, BPF_REG_10, 5, 0), EXIT_INSN());
	REJECT("a write to the context", "read-only context",
	       ST_MEM(BPF_DW, BPF_REG_1, 0, 0), MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a read past the context", "context offset 168",
	       LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_1, 168), EXIT_INSN());
	REJECT("a misaligned context read", "aligned",
	       LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_1, 4), EXIT_INSN());
	REJECT("a load through a number", "r1 is a number, not a pointer",
	       MOV64_IMM(BPF_REG_1, 4096), LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_1, 0),
	       EXIT_INSN());
	REJECT("a write to r10", "read-only frame pointer",
	       MOV64_IMM(BPF_REG_10, 0), MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a lookup in a ring", "wrong type",
	       LOOKUP0(2), MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a ring output to an array", "wrong type",
	       ST_MEM(BPF_DW, BPF_REG_10, -8, 0), LD_MAP(BPF_REG_1, 3),
	       MOV64_REG(BPF_REG_2, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_2, -8),
	       MOV64_IMM(BPF_REG_3, 8), MOV64_IMM(BPF_REG_4, 0),
	       CALL_HELPER(BPF_FUNC_ringbuf_output), EXIT_INSN());
	REJECT("a helper reading past the stack", "outside the 512-byte stack",
	       ST_MEM(BPF_DW, BPF_REG_10, -8, 0), LD_MAP(BPF_REG_1, 2),
	       MOV64_REG(BPF_REG_2, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_2, -8),
	       MOV64_IMM(BPF_REG_3, 16), MOV64_IMM(BPF_REG_4, 0),
	       CALL_HELPER(BPF_FUNC_ringbuf_output), EXIT_INSN());
	REJECT("an unbounded helper size", "not bounded",
	       LDX_MEM(BPF_DW, BPF_REG_2, BPF_REG_1, 112),
	       MOV64_REG(BPF_REG_1, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_1, -8),
	       MOV64_IMM(BPF_REG_3, 0), CALL_HELPER(BPF_FUNC_probe_read_user), EXIT_INSN());
	REJECT("a map that does not exist", "map 7 does not exist",
	       LD_MAP(BPF_REG_1, 7), MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("an atomic add", "atomic operations",
	       ST_MEM(BPF_DW, BPF_REG_10, -8, 0), MOV64_IMM(BPF_REG_1, 1),
	       INSN(BPF_STX | BPF_DW | BPF_ATOMIC, BPF_REG_10, BPF_REG_1, -8, BPF_ADD),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
	REJECT("a 32-bit jump", "32-bit jumps",
	       MOV64_IMM(BPF_REG_0, 0), INSN(BPF_JMP32 | BPF_JEQ | BPF_K, 0, 0, 0, 0),
	       EXIT_INSN());
	REJECT("signed division (cpu v4)", "signed division",
	       MOV64_IMM(BPF_REG_0, 7), INSN(BPF_ALU64 | BPF_DIV | BPF_K, 0, 0, 1, 2),
	       EXIT_INSN());
	REJECT("a byte swap", "byte swaps",
	       MOV64_IMM(BPF_REG_0, 7), INSN(BPF_ALU | BPF_END | BPF_TO_BE, 0, 0, 0, 16),
	       EXIT_INSN());
	REJECT("a shift by 64", "shift by 64",
	       MOV64_IMM(BPF_REG_0, 7), ALU64_IMM(BPF_LSH, BPF_REG_0, 64), EXIT_INSN());
	REJECT("different pointers on two paths", "r6 is not written on every path",
	       MOV64_REG(BPF_REG_7, BPF_REG_1), LOOKUP0(0),
	       JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 6),
	       MOV64_REG(BPF_REG_6, BPF_REG_0),
	       LDX_MEM(BPF_DW, BPF_REG_2, BPF_REG_7, 112),
	       JMP_IMM(BPF_JEQ, BPF_REG_2, 0, 2),
	       MOV64_REG(BPF_REG_6, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_6, -8),
	       ST_MEM(BPF_DW, BPF_REG_6, 0, 1),
	       MOV64_IMM(BPF_REG_0, 0), EXIT_INSN());
}

/* ---- accepted programs: semantics -------------------------------------- */

static uint64_t fixed_now(const struct vm_env *env)
{
	return *(uint64_t *)env->arg;
}

static struct vm_prog *must(const struct bpf_insn *in, size_t n, const char *what)
{
	char err[300];
	struct vm_prog *p = load(in, n, err, sizeof(err));

	ok(p != NULL, "accepts %s%s%s", what, p ? "" : ": ", p ? "" : err);
	if (p)
		is_int(vm_prog_jit(p), 0, "JIT compiles %s", what);
	return p;
}

/* Run on both: same result wanted. */
static uint64_t both(struct vm_prog *p, void *ctx, struct vm_env *env, const char *what)
{
	uint64_t a = vm_interp(p, ctx, env), b = vm_run(p, ctx, env);

	is_u64(b, a, "%s: JIT and interpreter agree", what);
	return a;
}

static void semantics(void)
{
	uint64_t ctx[21] = { 0 }, now = 42;
	struct vm_env env = { .slot = 3, .pid_tgid = 7ull << 32 | 9, .uid_gid = 5,
			      .cpu = 1, .comm = "tester", .now = fixed_now, .arg = &now };
	struct vm_prog *p;

	/* BPF division: x / 0 = 0, x % 0 = x (64 and 32-bit, reg and imm) */
	struct { int op; bool is64; bool reg; uint64_t a; int32_t b; uint64_t want; } d[] = {
		{ BPF_DIV, true, true, 100, 0, 0 }, { BPF_MOD, true, true, 100, 0, 100 },
		{ BPF_DIV, true, false, 100, 0, 0 }, { BPF_MOD, true, false, 100, 0, 100 },
		{ BPF_DIV, false, true, 0x1ffffffffull, 0, 0 },
		{ BPF_MOD, false, true, 0x1ffffffffull, 0, 0xffffffffull },
		{ BPF_DIV, true, false, ~0ull, -1, 1 },	/* imm sign-extended */
		{ BPF_DIV, false, false, 0xffffffffull, -1, 1 },
		{ BPF_MOD, true, true, 1000, 7, 6 }, { BPF_DIV, true, true, 1000, 7, 142 },
		{ BPF_MOD, false, true, 0x100000005ull, 3, 2 },
	};
	for (size_t i = 0; i < N(d); i++) {
		struct bpf_insn prog[] = {
			LD64(BPF_REG_0, d[i].a),
			MOV64_IMM(BPF_REG_2, d[i].b),
			d[i].reg ? INSN((d[i].is64 ? BPF_ALU64 : BPF_ALU) | d[i].op | BPF_X,
					0, 2, 0, 0)
				 : INSN((d[i].is64 ? BPF_ALU64 : BPF_ALU) | d[i].op | BPF_K,
					0, 0, 0, d[i].b),
			EXIT_INSN(),
		};
		char what[96];

		snprintf(what, sizeof(what), "%s%s %#llx %s %d", d[i].is64 ? "" : "w",
			 d[i].op == BPF_DIV ? "div" : "mod", (unsigned long long)d[i].a,
			 d[i].reg ? "reg" : "imm", d[i].b);
		p = must(prog, N(prog), what);
		if (p)
			is_u64(both(p, ctx, &env, what), d[i].want, "%s = %llu", what,
			       (unsigned long long)d[i].want);
		vm_prog_free(p);
	}

	/* a per-slot counter: slot 3 counts, the others stay 0 */
	const struct bpf_insn count[] = {
		LOOKUP0(0), JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 3),
		LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_0, 56),
		ALU64_IMM(BPF_ADD, BPF_REG_1, 1),
		STX_MEM(BPF_DW, BPF_REG_0, BPF_REG_1, 56),
		MOV64_IMM(BPF_REG_0, 0), EXIT_INSN(),
	};
	p = must(count, N(count), "a per-slot counter");
	if (p) {
		uint32_t k = 0;

		for (int i = 0; i < 5; i++)
			both(p, ctx, &env, "count");
		is_u64(((uint64_t *)vm_map_lookup(maps[0], &k, 3))[7], 10,
		       "slot 3 counted 10 (5 runs x 2 engines)");
		is_u64(((uint64_t *)vm_map_lookup(maps[0], &k, 0))[7], 0, "slot 0 untouched");
	}
	vm_prog_free(p);

	/* helpers: pid_tgid, ktime, comm into the hash map, ring output */
	const struct bpf_insn hp[] = {
		CALL_HELPER(BPF_FUNC_get_current_pid_tgid),
		STX_MEM(BPF_DW, BPF_REG_10, BPF_REG_0, -8),	/* key */
		CALL_HELPER(BPF_FUNC_ktime_get_ns),
		STX_MEM(BPF_DW, BPF_REG_10, BPF_REG_0, -24),	/* value lo */
		MOV64_REG(BPF_REG_1, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_1, -16),
		MOV64_IMM(BPF_REG_2, 8),
		CALL_HELPER(BPF_FUNC_get_current_comm),		/* value hi */
		LD_MAP(BPF_REG_1, 1),
		MOV64_REG(BPF_REG_2, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_2, -8),
		MOV64_REG(BPF_REG_3, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_3, -24),
		MOV64_IMM(BPF_REG_4, BPF_ANY),
		CALL_HELPER(BPF_FUNC_map_update_elem),
		LD_MAP(BPF_REG_1, 2),
		MOV64_REG(BPF_REG_2, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_2, -24),
		MOV64_IMM(BPF_REG_3, 24), MOV64_IMM(BPF_REG_4, 0),
		CALL_HELPER(BPF_FUNC_ringbuf_output),
		EXIT_INSN(),
	};
	p = must(hp, N(hp), "helpers into a hash map and a ring");
	if (p) {
		uint64_t key = env.pid_tgid, *v;

		is_u64(both(p, ctx, &env, "helpers"), 0, "ringbuf_output returns 0");
		v = vm_map_lookup(maps[1], &key, 0);
		ok(v && v[0] == 42 && !memcmp(&v[1], "tester", 7),
		   "the hash map holds ktime and comm under pid_tgid");
	}
	vm_prog_free(p);

	/* probe_read_user: a good and a bad address */
	static char secret[16] = "inline probes";
	const struct bpf_insn rd[] = {
		MOV64_REG(BPF_REG_6, BPF_REG_1),
		MOV64_REG(BPF_REG_1, BPF_REG_10), ALU64_IMM(BPF_ADD, BPF_REG_1, -16),
		MOV64_IMM(BPF_REG_2, 16),
		LDX_MEM(BPF_DW, BPF_REG_3, BPF_REG_6, 112),
		CALL_HELPER(BPF_FUNC_probe_read_user_str),
		MOV64_REG(BPF_REG_7, BPF_REG_0),
		LDX_MEM(BPF_DW, BPF_REG_0, BPF_REG_10, -16),
		JMP_IMM(BPF_JSGE, BPF_REG_7, 0, 1),
		MOV64_REG(BPF_REG_0, BPF_REG_7),
		EXIT_INSN(),
	};
	p = must(rd, N(rd), "probe_read_user_str");
	if (p) {
		uint64_t want;

		memcpy(&want, secret, 8);
		ctx[14] = (uint64_t)(uintptr_t)secret;
		is_u64(both(p, ctx, &env, "read good"), want, "reads a string of this process");
		ctx[14] = 16;	/* unmapped */
		is_int((int64_t)both(p, ctx, &env, "read bad"), -EFAULT,
		       "a bad address reads as -EFAULT, no fault");
	}
	vm_prog_free(p);
}

/* ---- generated programs: JIT == interpreter ------------------------------- */

static uint64_t rnd(void)
{
	return test_xorshift();
}

static uint64_t rval(void)
{
	switch (rnd() % 6) {
	case 0: return 0;
	case 1: return rnd() % 8;
	case 2: return (uint64_t)-(int64_t)(rnd() % 8);
	case 3: return rnd() & 0xffffffffu;
	case 4: return 1ull << (rnd() % 64);
	}
	return rnd();
}

static size_t gen(struct bpf_insn *out, size_t cap)
{
	static const int ops[] = { BPF_ADD, BPF_SUB, BPF_MUL, BPF_DIV, BPF_MOD, BPF_OR,
				   BPF_AND, BPF_XOR, BPF_LSH, BPF_RSH, BPF_ARSH, BPF_NEG,
				   BPF_MOV };
	static const int jops[] = { BPF_JEQ, BPF_JNE, BPF_JGT, BPF_JGE, BPF_JLT, BPF_JLE,
				    BPF_JSGT, BPF_JSGE, BPF_JSLT, BPF_JSLE, BPF_JSET };
	size_t n = 0, body, end;

	for (int r = 0; r <= 9; r++) {
		uint64_t v = rval();

		out[n++] = LD_IMM64_LO(r, 0, v);
		out[n++] = LD_IMM64_HI(v);
	}
	for (int s = 1; s <= 8; s++)
		out[n++] = STX_MEM(BPF_DW, BPF_REG_10, rnd() % 10, -8 * s);
	body = 8 + rnd() % 120;
	end = n + body;			/* the epilogue's first insn */
	if (end + 20 > cap)
		end = cap - 20;
	while (n < end) {
		int d = (int)(rnd() % 10), s = (int)(rnd() % 10), k = (int)(rnd() % 10);
		int sz = (int)(rnd() % 4), bytes = 1 << sz;
		int code = sz == 0 ? BPF_B : sz == 1 ? BPF_H : sz == 2 ? BPF_W : BPF_DW;
		int off = -8 * (int)(1 + rnd() % 8) + (int)(rnd() % (8 / bytes)) * bytes;

		if (k < 6) {
			int op = ops[rnd() % N(ops)];
			bool is64 = rnd() & 1, x = rnd() & 1;
			int32_t imm = (int32_t)rval();

			if (op == BPF_LSH || op == BPF_RSH || op == BPF_ARSH)
				imm = (int32_t)(rnd() % (is64 ? 64 : 32));
			if (op == BPF_NEG)
				x = false;
			out[n++] = INSN((is64 ? BPF_ALU64 : BPF_ALU) | op | (x ? BPF_X : BPF_K),
					d, x ? s : 0, 0, x ? 0 : imm);
		} else if (k == 6) {
			out[n++] = LDX_MEM(code, d, BPF_REG_10, off);
		} else if (k == 7) {
			if (rnd() & 1)
				out[n++] = STX_MEM(code, BPF_REG_10, s, off);
			else
				out[n++] = ST_MEM(code, BPF_REG_10, off, (int32_t)rval());
		} else {
			size_t room = end - n;	/* may land on the epilogue */
			int16_t jo = (int16_t)(rnd() % (room < 16 ? room : 16));

			if (k == 8 && (rnd() % 4) == 0)
				out[n++] = JA(0);	/* a longer one leaves dead code */
			else if (rnd() & 1)
				out[n++] = JMP_REG(jops[rnd() % N(jops)], d, s, jo);
			else
				out[n++] = JMP_IMM(jops[rnd() % N(jops)], d, (int32_t)rval(), jo);
		}
	}
	/* r0 = r0 ^ r1 ^ ... ^ r9 ^ every stack slot */
	for (int r = 1; r <= 9; r++)
		out[n++] = ALU64_REG(BPF_XOR, BPF_REG_0, r);
	for (int s = 1; s <= 8; s++) {
		out[n++] = LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_10, -8 * s);
		out[n++] = ALU64_IMM(BPF_LSH, BPF_REG_0, 1);
		out[n++] = ALU64_REG(BPF_XOR, BPF_REG_0, BPF_REG_1);
	}
	out[n++] = EXIT_INSN();
	return n;
}

static void generated(void)
{
	struct bpf_insn prog[256];
	uint64_t ctx[21] = { 0 };
	struct vm_env env = { 0 };
	int rejected = 0, differ = 0, runs = 3000;
	char err[512];

	for (int i = 0; i < runs; i++) {
		size_t n = gen(prog, N(prog));
		struct vm_prog *p = load(prog, n, err, sizeof(err));

		if (!p || vm_prog_jit(p)) {
			if (rejected++ < 3)
				diag("generated program %d rejected: %s", i, err);
			vm_prog_free(p);
			continue;
		}
		if (vm_interp(p, ctx, &env) != vm_run(p, ctx, &env) && differ++ < 3)
			diag("program %d: interpreter %#llx, JIT %#llx", i,
			     (unsigned long long)vm_interp(p, ctx, &env),
			     (unsigned long long)vm_run(p, ctx, &env));
		vm_prog_free(p);
	}
	is_int(rejected, 0, "the verifier accepts all %d generated programs", runs);
	is_int(differ, 0, "JIT and interpreter agree on all %d generated programs", runs);
}

/* The map operations the helpers and the reader use. */
static void map_ops(void)
{
	struct vm_map_def hd = { BPF_MAP_TYPE_PERCPU_HASH, 8, 24, 64 };
	struct vm_map *h = vm_map_new(&hd, 4);
	uint64_t v[3] = { 1, 2, 3 }, k, next;
	int full = 0, n = 0;

	ok(h != NULL, "a per-slot hash map");
	if (!h)
		return;
	for (k = 0; k < 64; k++)
		full |= vm_map_update(h, &k, v, BPF_NOEXIST, (unsigned)(k % 4));
	is_int(full, 0, "64 keys fit in a 64-key map");
	k = 64;
	is_int(vm_map_update(h, &k, v, BPF_ANY, 0), -E2BIG, "the 65th key: -E2BIG");
	k = 5;
	is_int(vm_map_update(h, &k, v, BPF_NOEXIST, 0), -EEXIST, "NOEXIST on a key: -EEXIST");
	is_int(vm_map_delete(h, &k), 0, "delete");
	is_int(vm_map_delete(h, &k), -ENOENT, "delete again: -ENOENT");
	is_int(vm_map_update(h, &k, v, BPF_EXIST, 0), -ENOENT, "EXIST on no key: -ENOENT");
	k = 64;
	is_int(vm_map_update(h, &k, v, BPF_NOEXIST, 2), 0, "a freed place takes a new key");
	ok(vm_map_lookup(h, &k, 2) && !memcmp(vm_map_lookup(h, &k, 2), v, 24) &&
	   !*(uint64_t *)vm_map_lookup(h, &k, 1), "the new key's value is in slot 2 only");
	for (int i = 0; !vm_map_next_key(h, i ? &k : NULL, &next); i++, n++)
		k = next;
	is_int(n, 64, "next_key visits the 64 keys");
	vm_map_clear(h);
	k = 7;
	ok(!vm_map_lookup(h, &k, 0) && vm_map_next_key(h, NULL, &next) == -ENOENT,
	   "clear drops every key");
	is_int(vm_map_update(h, &k, v, BPF_NOEXIST, 1), 0, "insert after clear");
	ok(!*(uint64_t *)vm_map_lookup(h, &k, 0), "a reused value starts at zero");
	vm_map_free(h);
}

/* ---- stack maps and get_stackid ----------------------------------------- */

static uint64_t fake_ips[8];
static uint32_t fake_n;

/* vm_env.ustack for the tests: fake_ips[0..fake_n), and the context's
 * first word checks that the helper passed the context through */
static uint32_t fake_ustack(const struct vm_env *env, const void *ctx, uint64_t *ips,
			    uint32_t max)
{
	uint32_t n = fake_n < max ? fake_n : max;

	(void)env;
	if (*(const uint64_t *)ctx != 0xc7c7)
		return 0;
	memcpy(ips, fake_ips, n * 8);
	return n;
}

static void stacks(void)
{
	struct vm_map_def sd = { BPF_MAP_TYPE_STACK_TRACE, 4, 4 * 8, 4 };
	struct vm_map *sm = vm_map_new(&sd, 8), *two[2] = { sm, maps[3] };
	uint64_t ctx[21] = { 0xc7c7 }, ids[4];
	struct vm_env env = { .slot = 1, .ustack = fake_ustack };
	char err[300];
	const uint64_t *v;
	uint32_t k;
	const struct bpf_insn user[] = {
		LD_MAP(BPF_REG_2, 0),
		MOV64_IMM(BPF_REG_3, BPF_F_USER_STACK),
		CALL_HELPER(BPF_FUNC_get_stackid),
		EXIT_INSN(),
	}, kern[] = {
		LD_MAP(BPF_REG_2, 0),
		MOV64_IMM(BPF_REG_3, 0),
		CALL_HELPER(BPF_FUNC_get_stackid),
		EXIT_INSN(),
	}, not_ctx[] = {
		MOV64_REG(BPF_REG_1, BPF_REG_10),
		LD_MAP(BPF_REG_2, 0),
		MOV64_IMM(BPF_REG_3, BPF_F_USER_STACK),
		CALL_HELPER(BPF_FUNC_get_stackid),
		EXIT_INSN(),
	}, not_stack_map[] = {
		LD_MAP(BPF_REG_2, 1),
		MOV64_IMM(BPF_REG_3, BPF_F_USER_STACK),
		CALL_HELPER(BPF_FUNC_get_stackid),
		EXIT_INSN(),
	}, lookup_stack_map[] = {
		ST_MEM(BPF_W, BPF_REG_10, -8, 0),
		LD_MAP(BPF_REG_1, 0),
		MOV64_REG(BPF_REG_2, BPF_REG_10),
		ALU64_IMM(BPF_ADD, BPF_REG_2, -8),
		CALL_HELPER(BPF_FUNC_map_lookup_elem),
		MOV64_IMM(BPF_REG_0, 0),
		EXIT_INSN(),
	};
	struct vm_prog *p, *pk, *bad;

	ok(sm != NULL, "a stack map (4 stacks of 4 frames)");
	if (!sm)
		return;
	sd.value_size = 128 * 8;
	ok(!vm_map_new(&sd, 1) && errno == EINVAL, "a stack map of 128 frames is refused");
	bad = vm_prog_new(not_ctx, N(not_ctx), two, 2, CTX_SIZE, err, sizeof(err));
	ok(!bad && strstr(err, "not the context"), "get_stackid wants the context: %s", err);
	vm_prog_free(bad);
	bad = vm_prog_new(not_stack_map, N(not_stack_map), two, 2, CTX_SIZE, err, sizeof(err));
	ok(!bad && strstr(err, "wrong type"), "get_stackid wants a stack map: %s", err);
	vm_prog_free(bad);
	bad = vm_prog_new(lookup_stack_map, N(lookup_stack_map), two, 2, CTX_SIZE, err,
			  sizeof(err));
	ok(!bad && strstr(err, "wrong type"), "a stack map is not looked up by programs: %s",
	   err);
	vm_prog_free(bad);
	p = vm_prog_new(user, N(user), two, 2, CTX_SIZE, err, sizeof(err));
	pk = vm_prog_new(kern, N(kern), two, 2, CTX_SIZE, err, sizeof(err));
	ok(p && pk, "get_stackid(ctx, stack map, flags) is accepted%s%s", p && pk ? "" : ": ",
	   p && pk ? "" : err);
	if (!p || !pk)
		goto out;
	is_int(vm_prog_jit(p), 0, "JIT compiles get_stackid");
	fake_n = 3;
	memcpy(fake_ips, (uint64_t[]){ 0x401000, 0x402000, 0x403000 }, 24);
	ids[0] = both(p, ctx, &env, "a user stack");
	ok((int64_t)ids[0] >= 0 && ids[0] < 4, "a user stack gets an id (%lld)",
	   (long long)ids[0]);
	k = (uint32_t)ids[0];
	v = vm_map_lookup(sm, &k, 0);
	ok(v && v[0] == 0x401000 && v[1] == 0x402000 && v[2] == 0x403000 && v[3] == 0,
	   "the reader finds its addresses, innermost first, zero-padded");
	is_u64(both(p, ctx, &env, "the same stack"), ids[0], "the same stack: the same id");
	fake_n = 2;
	ids[1] = both(p, ctx, &env, "a prefix");
	ok((int64_t)ids[1] >= 0 && ids[1] != ids[0], "its 2-frame prefix is another stack");
	fake_ips[1] = 0x402001;
	ids[2] = both(p, ctx, &env, "another");
	ok((int64_t)ids[2] >= 0 && ids[2] != ids[0] && ids[2] != ids[1], "another stack, another id");
	fake_ips[1] = 0x402002;
	ids[3] = both(p, ctx, &env, "a fourth");
	ok((int64_t)ids[3] >= 0, "a fourth stack fills the map");
	fake_ips[1] = 0x402003;
	is_int((int)(int64_t)both(p, ctx, &env, "a fifth"), -ENOSPC,
	       "a fifth stack in a full map: -ENOSPC (the key says [lost])");
	fake_ips[1] = 0x402001;
	is_u64(both(p, ctx, &env, "a known one"), ids[2], "a full map still finds its stacks");
	fake_n = 5;
	memcpy(fake_ips, (uint64_t[]){ 1, 2, 3, 4, 5 }, 40);
	vm_map_clear(sm);
	ids[0] = both(p, ctx, &env, "deeper than the map");
	k = (uint32_t)ids[0];
	v = vm_map_lookup(sm, &k, 0);
	ok(v && v[3] == 4, "a stack deeper than the map's frames keeps the innermost ones");
	is_int((int)(int64_t)both(pk, ctx, &env, "a kernel stack"), -EFAULT,
	       "a kernel stack: -EFAULT (no kernel in user space)");
	ctx[0] = 0;
	is_int((int)(int64_t)both(p, ctx, &env, "no frame"), -EFAULT,
	       "a walker that finds no frame: -EFAULT");
	env.ustack = NULL;
	is_int((int)(int64_t)both(p, ctx, &env, "no walker"), -EFAULT,
	       "no walker (not in a traced process): -EFAULT");
out:
	vm_prog_free(p);
	vm_prog_free(pk);
	vm_map_free(sm);
}

/* Threads interning the same and different stacks at once: one id per
 * stack (or a second one when two put it at once), never a torn one. */
static void *intern_thread(void *arg)
{
	struct vm_map *sm = arg;
	uint64_t ips[3];
	long bad = 0;

	for (int i = 0; i < 20000; i++) {
		int64_t id;
		uint32_t k;
		const uint64_t *v;

		ips[0] = 0x1000 + (uint64_t)(i % 50);
		ips[1] = ips[0] * 3;
		ips[2] = ips[0] * 7;
		id = vm_stack_intern(sm, ips, 3);
		k = (uint32_t)id;
		v = id >= 0 ? vm_map_lookup(sm, &k, 0) : NULL;
		bad += !v || memcmp(v, ips, 24);
	}
	return (void *)bad;
}

static void stacks_threads(void)
{
	struct vm_map_def sd = { BPF_MAP_TYPE_STACK_TRACE, 4, 3 * 8, 1024 };
	struct vm_map *sm = vm_map_new(&sd, 1);
	pthread_t t[4];
	long bad = 0;
	uint32_t used = 0;

	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, intern_thread, sm);
	for (int i = 0; i < 4; i++) {
		void *r;

		pthread_join(t[i], &r);
		bad += (long)r;
	}
	is_int((int)bad, 0, "4 threads x 20000 interns of 50 stacks: each id holds its stack");
	for (uint32_t k = 0; k < 1024; k++)
		used += vm_map_lookup(sm, &k, 0) != NULL;
	ok(used >= 50 && used <= 200, "50 stacks take %u entries (at most 4 each)", used);
	vm_map_free(sm);
}

/* Windows: two processes' views of one mapping, each numbering its
 * threads' slots from 0, write apart; the reader sees both; a lock left
 * taken (its holder died) fails an insert instead of hanging it. */
static void windows(void)
{
	struct vm_map_def hd = { BPF_MAP_TYPE_PERCPU_HASH, 8, 8, 16 };
	struct vm_map_def ad = { BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 2 };
	struct vm_map *rh = vm_map_new_fd(&hd, 8, -1), *ra = vm_map_new_fd(&ad, 8, -1);
	struct vm_map *h[2] = { NULL, NULL }, *a[2] = { NULL, NULL };
	struct vm_array_layout l;
	uint64_t k = 7, v, *p, sum = 0;
	uint32_t zero = 0, *lockw;
	int bad = 0;

	ok(rh && ra, "two shared maps of 8 slots");
	if (!rh || !ra)
		return;
	ok(!vm_map_new_window(&hd, 8, vm_map_fd(rh), 8) && errno == EINVAL,
	   "a window from slot 8 of 8: EINVAL");
	for (int i = 0; i < 2; i++) {
		h[i] = vm_map_new_window(&hd, 8, vm_map_fd(rh), i ? 4 : 0);
		a[i] = vm_map_new_window(&ad, 8, vm_map_fd(ra), i ? 4 : 0);
	}
	ok(h[0] && h[1] && a[0] && a[1], "windows from slots 0 and 4");
	if (!h[0] || !h[1] || !a[0] || !a[1])
		goto out;
	is_int((int)vm_map_nslots(h[1]), 4, "the window from 4 has 4 slots");
	/* each writes its slot 0 (and 1): the mapping's 0 and 4 (1 and 5) */
	for (int i = 0; i < 2; i++)
		for (unsigned s = 0; s < 2; s++) {
			v = 100 * (i + 1) + s;
			bad |= vm_map_update(h[i], &k, &v, BPF_ANY, s);
			vm_map_note_slot(h[i], s);
		}
	is_int(bad, 0, "both windows update key 7 in their slots 0 and 1");
	is_int(vm_map_update(h[1], &k, &v, BPF_ANY, 4), -EINVAL, "slot 4 of a window of 4: -EINVAL");
	is_int((int)vm_map_slots_used(rh), 6, "the reader merges the mapping's slots 0-5");
	for (unsigned s = 0; s < vm_map_slots_used(rh); s++)
		if ((p = vm_map_lookup(rh, &k, s)))
			sum += *p;
	is_int((int)sum, 100 + 101 + 200 + 201, "the reader sees both windows' values");
	p = vm_map_lookup(rh, &k, 4);
	ok(p && *p == 200, "the second window's slot 0 is the mapping's slot 4");
	/* an array's layout (what the JIT reads) starts at the window */
	ok(vm_map_array_layout(a[1], &l) && l.nslots == 4, "the window's array layout: 4 slots");
	if (l.nslots == 4) {
		*(uint64_t *)((char *)l.values + l.stride) = 42;	/* its slot 1, key 0 */
		p = vm_map_lookup(ra, &zero, 5);
		ok(p && *p == 42, "the layout's slot 1 is the mapping's slot 5");
	}
	/* a holder that died: the lock word stays 1 */
	lockw = vm_map_mem(rh, NULL);
	__atomic_store_n(lockw, 1, __ATOMIC_RELEASE);
	k = 8;
	is_int(vm_map_update(h[1], &k, &v, BPF_ANY, 0), -EBUSY,
	       "an insert under a lock left taken: -EBUSY after about a second");
	__atomic_store_n(lockw, 0, __ATOMIC_RELEASE);
	is_int(vm_map_update(h[1], &k, &v, BPF_ANY, 0), 0, "and inserts once it is free");
out:
	for (int i = 0; i < 2; i++) {
		vm_map_free(h[i]);
		vm_map_free(a[i]);
	}
	vm_map_free(rh);
	vm_map_free(ra);
}

int main(void)
{
	static const struct vm_map_def defs[4] = {
		{ BPF_MAP_TYPE_PERCPU_ARRAY, 4, 64, 1 },
		{ BPF_MAP_TYPE_HASH, 8, 16, 64 },
		{ BPF_MAP_TYPE_RINGBUF, 0, 0, 4096 },
		{ BPF_MAP_TYPE_ARRAY, 4, 8, 4 },
	};

	for (int i = 0; i < 4; i++)
		maps[i] = vm_map_new(&defs[i], 8);
	ok(maps[0] && maps[1] && maps[2] && maps[3], "maps created");
	hostile();
	map_ops();
	windows();
	semantics();
	stacks();
	stacks_threads();
	generated();
	for (int i = 0; i < 4; i++)
		vm_map_free(maps[i]);
	return test_done();
}
