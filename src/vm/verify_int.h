/* SPDX-License-Identifier: MIT */
/*
 * Inside the verifier: the abstract state (verify.c has the overview) and
 * the pieces the three files share: ranges and joins (range.c), memory
 * and helper-call checks (verify_mem.c), the pass (verify.c).
 */
#ifndef FAY_VM_VERIFY_INT_H
#define FAY_VM_VERIFY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/vm_int.h"

enum rt { R_NONE, R_SCALAR, R_CTX, R_STACK, R_MAPV, R_MAPV_NULL, R_MAP };

/* "a number", "a stack pointer" ... for messages. */
extern const char *const vv_rt_name[];

struct reg {
	uint8_t type;
	uint8_t map;		/* R_MAP, R_MAPV, R_MAPV_NULL */
	uint32_t id;		/* R_MAPV_NULL */
	int64_t lo, hi;		/* pointer offset range (CTX, STACK: lo == hi) */
	uint64_t umin, umax;	/* R_SCALAR */
	int64_t smin, smax;
};

enum { S_UNINIT, S_MISC, S_SPILL };

struct state {
	struct reg r[11];
	uint8_t st[VM_STACK_SIZE];		/* per byte */
	struct reg spill[VM_STACK_SIZE / 8];	/* per 8-byte slot */
};

struct vctx {
	const struct vm_prog *p;
	struct state **at;	/* state reaching each insn, NULL: not yet */
	uint32_t next_id;
	char *err;
	size_t errlen;
	size_t pc;
};

/* Write "insn N: ..." into v->err; returns -EINVAL. */
int vv_fail(struct vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "r0" .. "r10". */
const char *vv_rname(int r);

/* range.c: numbers */
void vv_sc_unknown(struct reg *r);
void vv_sc_range(struct reg *r, uint64_t lo, uint64_t hi);	/* unsigned */
void vv_sc_const(struct reg *r, uint64_t c);
bool vv_sc_is_const(const struct reg *r);
/* d op= s with BPF's semantics, on ranges (64 and 32-bit). */
void vv_sc_alu64(int op, struct reg *d, const struct reg *s);
void vv_sc_alu32(int op, struct reg *d, const struct reg *s);
/* Narrow r by "r op c" being taken (or not); false if that is impossible. */
bool vv_narrow(struct reg *r, int op, uint64_t c, bool taken);
/* a = a join b (what is true on both paths). */
void vv_reg_join(struct reg *a, const struct reg *b);
void vv_state_join(struct state *a, const struct state *b);

/* verify_mem.c */
/* Access of size bytes at register r + off: a load (out gets the loaded
 * value's state) or a store of val (the stack records spills). */
int vv_check_mem(struct vctx *v, struct state *s, int r, int16_t off, int size,
	      bool write, const struct reg *val, struct reg *out);
/* A helper call: arguments checked, r1-r5 clobbered, r0 set. */
int vv_do_call(struct vctx *v, struct state *s, const struct bpf_insn *in);

#endif
