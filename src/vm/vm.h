/* SPDX-License-Identifier: MIT */
/*
 * fay's in-process eBPF: a verifier, an interpreter and an x86-64 JIT for
 * the instruction set and helpers fay's code generator emits, so that the
 * programs the planner builds for function() sources run inside the traced
 * process (inline probes) instead of behind a kernel uprobe trap.
 *
 *	struct vm_map *m = vm_map_new(&def, nslots);      per-thread slots
 *	struct vm_prog *p = vm_prog_new(insns, n, maps, nmaps, ctx_size,
 *					err, sizeof(err));   verifies
 *	vm_prog_jit(p);                                   optional
 *	vm_run(p, ctx, &env);                             per event
 *	vm_map_lookup(m, key, slot) / vm_map_next_key()    the reader
 *
 * Programs are struct bpf_insn arrays as the kernel takes them, except that
 * a map load (ld_imm64 with src_reg BPF_PSEUDO_MAP_FD) carries the index
 * of the map in the maps[] array in imm, not a file descriptor.
 *
 * What the verifier accepts (src/vm/README.md, "Verifier"):
 *  - classes ALU/ALU64 (every op but BPF_END and signed div/mod), LDX,
 *    STX, ST with BPF_MEM, ld_imm64 (a constant or a map), JMP (no JMP32,
 *    no tail calls, no bpf-to-bpf calls), CALL of the helpers below, EXIT;
 *  - forward jumps only: every program terminates within n instructions,
 *    so no instruction budget is needed at run time;
 *  - every register is written before it is read, on every path;
 *  - loads and stores only through pointers whose bounds are proven on
 *    every path: the context (read only, ctx_size bytes), the stack (512
 *    bytes, reads of bytes never written are refused), a map value
 *    (value_size bytes; a variable offset must be bounded by comparisons
 *    or masks), after a map lookup was compared with 0;
 *  - pointers never reach memory the reader sees (map values, rings), r0
 *    at exit, or a helper argument that wants a number; pointer arithmetic
 *    only adds or subtracts numbers to a stack or map value pointer;
 *  - division and modulo follow BPF: x / 0 = 0, x % 0 = x.
 * A rejection names the instruction and the reason: "insn 12: r3 is a
 * map value pointer with offset up to 9368, the value is 9360 bytes".
 *
 * Helpers: map_lookup_elem, map_update_elem, map_delete_elem,
 * ktime_get_ns (CLOCK_MONOTONIC), get_current_pid_tgid,
 * get_current_uid_gid, get_current_cgroup_id, get_current_comm,
 * get_smp_processor_id (from the
 * caller's struct vm_env), probe_read_user[_str] (process_vm_readv on
 * this process: a bad address returns -EFAULT and never faults),
 * probe_read_kernel[_str] (-EFAULT: no kernel memory in user space),
 * ringbuf_output (a per-slot ring), and get_stackid(ctx, stack map,
 * flags) (a user stack from vm_env.ustack, interned by vm_stack_intern();
 * a kernel stack: -EFAULT, as the kernel says in a uprobe).
 *
 * Per-CPU maps are per-slot maps: the caller gives each thread its own
 * slot (struct vm_env.slot < nslots), a program sees that slot's values,
 * and the reader merges the slots exactly as it merges a per-CPU map's
 * CPUs.  Map memory is one mapping (vm_map_mem()) that can be shared.
 */
#ifndef FAY_VM_VM_H
#define FAY_VM_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/bpf.h>

/* Largest program the verifier takes. */
#define VM_MAX_INSNS	8192
#define VM_STACK_SIZE	512
#define VM_MAX_MAPS	16

/* What a map is; types: BPF_MAP_TYPE_ARRAY, PERCPU_ARRAY, HASH,
 * PERCPU_HASH, RINGBUF (max_entries: bytes of ring per slot, a power of
 * two >= 4096; key and value sizes 0), STACK_TRACE (key 4 bytes, the
 * stack id; value 8 to 127 * 8 bytes, the addresses, innermost first,
 * zero-padded: filled only by the get_stackid helper, vm_stack_intern()). */
struct vm_map_def {
	uint32_t type;
	uint32_t key_size;
	uint32_t value_size;
	uint32_t max_entries;
};

struct vm_map;

/* A map with nslots per-thread slots (1..4096), zeroed.  NULL with errno
 * (EINVAL: a type or size this VM does not support; ENOMEM). */
struct vm_map *vm_map_new(const struct vm_map_def *def, unsigned int nslots);
/* The same in memory another process can map: fd -1 makes a new memfd
 * (vm_map_fd() gives it, to pass with SCM_RIGHTS); fd >= 0 maps that
 * file (what the other side passed: it must have exactly the size this
 * def and nslots give, else EINVAL; the map keeps its own copy of fd).
 * Both sides then see the same map: the reader in one process, the
 * programs in the other. */
struct vm_map *vm_map_new_fd(const struct vm_map_def *def, unsigned int nslots, int fd);
/* The same as a window on the slots of a mapping several processes
 * share (fd >= 0, the memfd of a vm_map_new_fd() map of nslots slots):
 * this view's slot s is the mapping's slot base + s, vm_map_nslots()
 * gives nslots - base, and the header (keys, vm_map_slots_used(), the
 * lock) is the mapping's.  Each process writes its own window, the
 * reader (base 0) merges every slot.  EINVAL when base >= nslots. */
struct vm_map *vm_map_new_window(const struct vm_map_def *def, unsigned int nslots, int fd,
				 unsigned int base);
/* The memfd behind a map of vm_map_new_fd(), or -1. */
int vm_map_fd(const struct vm_map *m);
/* Accepts NULL. */
void vm_map_free(struct vm_map *m);
const struct vm_map_def *vm_map_def(const struct vm_map *m);
/* The slots this view writes (a window's: from its base on). */
unsigned int vm_map_nslots(const struct vm_map *m);
/* The map's memory (one mapping of *size bytes, everything included). */
void *vm_map_mem(const struct vm_map *m, size_t *size);

/* The id of the stack ips[0..n) (n >= 1) in stack map m: the entry that
 * holds those addresses, or a new one (a hash of the addresses picks
 * where the search starts: at most 64 entries are looked at).  Any
 * thread at any time: an entry is claimed with a compare-and-swap and
 * published once written (two threads putting the same new stack at
 * once may get two ids; the reader merges them by their names).
 * -ENOSPC when no entry is free there (the table is full: the caller's
 * key says the stack is lost), -EINVAL (not a stack map, n 0). */
int64_t vm_stack_intern(struct vm_map *m, const uint64_t *ips, uint32_t n);

/* Slot bookkeeping of a shared per-slot map, kept in its header: the
 * writer calls vm_map_note_slot(m, slot) before a slot's first program
 * run (the in-process runtime does), the reader merges only the first
 * vm_map_slots_used(m) slots (<= nslots; 0: none noted).  Slots past the
 * noted ones hold zeroes (a new key zeroes only the noted slots). */
void vm_map_note_slot(struct vm_map *m, unsigned int slot);
unsigned int vm_map_slots_used(const struct vm_map *m);

/* Reader side.  The value of key in slot (for a map that is not per-slot,
 * slot is ignored), or NULL if the key is absent.  The pointer stays valid
 * until the map is freed; a program may be updating it concurrently (as
 * with a per-CPU map read from user space). */
void *vm_map_lookup(const struct vm_map *m, const void *key, unsigned int slot);
/* Iterate keys: prev NULL for the first.  0, or -ENOENT after the last. */
int vm_map_next_key(const struct vm_map *m, const void *prev, void *next);
/* Insert or replace key's value from a program's point of view: slot gets
 * value, the other slots of a new key of a per-slot map get zeroes.
 * flags BPF_ANY, BPF_NOEXIST, BPF_EXIST.  0, -EEXIST, -ENOENT, -E2BIG
 * (full), -EINVAL. */
int vm_map_update(struct vm_map *m, const void *key, const void *value,
		  uint64_t flags, unsigned int slot);
/* 0 or -ENOENT (arrays: -EINVAL, as BPF); -EBUSY (update too) when the
 * lock of a shared mapping stayed taken for a second (its holder died). */
int vm_map_delete(struct vm_map *m, const void *key);
/* Zero every value of every slot and drop every hash key. */
void vm_map_clear(struct vm_map *m);
/* Ring maps: call f on each record of slot, oldest first, and consume
 * them.  Returns the number of records, or -EINVAL. */
int vm_ring_drain(struct vm_map *m, unsigned int slot,
		  void (*f)(const void *data, uint32_t size, void *arg), void *arg);

/* What the helpers report about the calling thread, filled by the caller
 * (the in-process runtime caches it per thread). */
struct vm_env {
	unsigned int slot;	/* per-thread slot of per-slot maps */
	uint64_t pid_tgid;	/* tgid << 32 | tid */
	uint64_t uid_gid;	/* gid << 32 | uid */
	uint32_t cpu;		/* get_smp_processor_id() */
	char comm[16];
	/* ktime_get_ns(): NULL for CLOCK_MONOTONIC (as the kernel's); tests
	 * give a deterministic clock. */
	uint64_t (*now)(const struct vm_env *env);
	void *arg;		/* the caller's, for now() */
	/* VM_FUNC_fay_span: part `which` (VM_SPAN_TRACE_ID: the low 64 bits
	 * of the trace id as 8 bytes; VM_SPAN_NAME: the name, NUL padded)
	 * of the span current on the calling thread into dst (size bytes,
	 * zeroed by the helper before); 0, or -ENOENT (none).  NULL: never
	 * a span. */
	int (*span)(const struct vm_env *env, int which, void *dst, uint32_t size);
	/* VM_FUNC_fay_depth: the level of the probed call being run in its
	 * thread's stack of paired calls (the inline runtime sets it). */
	uint32_t depth;
	/* VM_FUNC_fay_unwound: 1 while the runtime runs the exit program
	 * of a call left without its return (longjmp, an exception: a
	 * level of that stack it dropped), 0 otherwise (f.unwound). */
	uint32_t unwound;
	/* VM_FUNC_fay_cookie: the probed site's id (the inline runtime sets
	 * it from the site fay armed: a wildcard's function index, s.name) */
	uint64_t cookie;
	/* get_stackid(ctx, map, BPF_F_USER_STACK): the calling thread's
	 * user stack at the probe whose registers are ctx, innermost first,
	 * into ips (at most max addresses); returns how many (0: none, the
	 * helper returns -EFAULT).  NULL: no user stack (-EFAULT).  The
	 * inline runtime walks frame pointers (src/rt/ustack.c). */
	uint32_t (*ustack)(const struct vm_env *env, const void *ctx, uint64_t *ips,
			   uint32_t max);
	/* 1 while an exit program runs (ctx's ip is then a return
	 * address, not the probed function: ustack's walk starts there) */
	uint32_t exit;
	/* get_current_cgroup_id(): the process's cgroup v2 id, as fay gave
	 * it to the inline runtime (0: unknown) */
	uint64_t cgroup_id;
	/* VM_FUNC_fay_vpid: the process's pid in its own pid namespace (its
	 * getpid(); pid_tgid's is fay's numbering, the kernel's) */
	uint32_t vpid;
};

/* fay's own helper (not the kernel's): fay_span(dst, size, which) fills
 * dst with a part of the current libfay span (struct vm_env.span),
 * zeroes when there is none; returns 0 or -ENOENT. */
#define VM_FUNC_fay_span	0x46590001
/* fay's own helper: fay_depth() returns struct vm_env.depth (no
 * arguments; the JIT compiles it in place, a load). */
#define VM_FUNC_fay_depth	0x46590002
/* fay's own helper: fay_unwound() returns struct vm_env.unwound, 1 at
 * the exit of a call left without its return (no arguments; compiled in
 * place, a load). */
#define VM_FUNC_fay_unwound	0x46590003
/* fay's own helper: fay_cookie() returns struct vm_env.cookie, the id of
 * the site the program runs for (no arguments; compiled in place, a
 * load): what bpf_get_attach_cookie() gives a kernel probe. */
#define VM_FUNC_fay_cookie	0x46590004
/* fay's own helper: fay_vpid() returns struct vm_env.vpid, the process's
 * pid in its own pid namespace (s.vpid; no arguments; compiled in place,
 * a load). */
#define VM_FUNC_fay_vpid	0x46590005
#define VM_SPAN_TRACE_ID	0
#define VM_SPAN_NAME		1

/* A cheaper clock for vm_env.now (clock.c): vm_tsc_init() calibrates
 * the TSC against CLOCK_MONOTONIC once (~20 ms; 0, or -ENOTSUP without an
 * invariant TSC: constant_tsc and nonstop_tsc in /proc/cpuinfo), then
 * vm_tsc_now() gives CLOCK_MONOTONIC nanoseconds from rdtsc (before, or
 * without, a calibration: clock_gettime()).  vm_tsc_sync(), called about
 * once a second by one thread, slews the TSC line back to CLOCK_MONOTONIC
 * (no step under 1 ms): durations within ~1e-6, absolute times within
 * microseconds.  vm_tsc_init() and vm_tsc_sync() have one caller at a
 * time; vm_tsc_now() runs in any thread at any time (a sequence lock),
 * and its readings on one thread strictly increase (a TSC may advance in
 * 10 ns steps: a reading in the step of the thread's previous one is
 * that one + 1 ns), so a duration between two is never 0 or negative. */
int vm_tsc_init(void);
int vm_tsc_sync(void);
bool vm_tsc_active(void);
uint64_t vm_tsc_now(const struct vm_env *env);

struct vm_prog;

/*
 * Verify a program against its maps and context size (bytes of read-only
 * context at r1).  Returns the program (insns, maps copied/referenced:
 * the maps must outlive it), or NULL with errno EINVAL and a message
 * "insn N: reason" in err (errlen bytes), ENOMEM.
 */
struct vm_prog *vm_prog_new(const struct bpf_insn *insns, size_t n,
			    struct vm_map *const *maps, size_t nmaps,
			    size_t ctx_size, char *err, size_t errlen);
/* Accepts NULL. */
void vm_prog_free(struct vm_prog *p);
/* The clock of ktime_get_ns() in the code vm_prog_jit() compiles from now
 * on: now(env) is called directly instead of env->now (which the
 * interpreter keeps using).  For a caller whose env->now is always now. */
void vm_prog_set_now(struct vm_prog *p, uint64_t (*now)(const struct vm_env *env));
/* Compile to x86-64.  0, or -errno (the interpreter keeps running it). */
int vm_prog_jit(struct vm_prog *p);
bool vm_prog_jitted(const struct vm_prog *p);
/* Whether the compiled code calls any function but the clock of
 * vm_prog_set_now() (a helper not compiled in place).  A program that is
 * compiled and calls out to nothing but vm_tsc_now() with the TSC active
 * runs, through vm_run(), without touching a vector register (the JIT
 * emits none; vm_run() and vm_tsc_now()'s TSC path are compiled with
 * gcc's general-regs-only): the inline runtime's handlers rely on it. */
bool vm_prog_calls_out(const struct vm_prog *p);
/* The compiled code (NULL when not compiled): code(ctx, env) is what
 * vm_run() calls. */
typedef uint64_t (*vm_code_fn)(void *ctx, const struct vm_env *env);
vm_code_fn vm_prog_code(const struct vm_prog *p);
/* Machine code bytes of the JIT (0 when not compiled). */
size_t vm_prog_jit_size(const struct vm_prog *p);

/* Run the program once: r1 = ctx, the JIT when compiled, else the
 * interpreter.  Returns r0. */
uint64_t vm_run(const struct vm_prog *p, void *ctx, const struct vm_env *env);
/* Always the interpreter (the reference). */
uint64_t vm_interp(const struct vm_prog *p, void *ctx, const struct vm_env *env);

#endif
