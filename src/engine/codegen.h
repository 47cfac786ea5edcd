/* SPDX-License-Identifier: MIT */
/*
 * Inside code generation (codegen*.c): the state of one program being
 * generated and the pieces the files share.
 *
 *   codegen.c        program assembly: filters, entry/exit pairing, main
 *   codegen_value.c  errors, small pieces, context values, strings
 *   codegen_expr.c   conditions and integers
 *   codegen_body.c   the body: a streamed record or the aggregates
 *   codegen_stack.c  stack keys: the frames kept in fay_stk under their hash
 *   codegen_ustack.c a user stack walked by the process's unwind table
 *
 * Every cg_* function appends to g->ir.  On a problem it records it in
 * g->err (the first one wins), reports it through the query / engine and
 * still returns something usable (a fresh register), so generation can
 * go on and the caller checks g->err once at the end.
 */
#ifndef FAY_ENGINE_CODEGEN_H
#define FAY_ENGINE_CODEGEN_H

#include "engine/engine_int.h"

struct cg {
	struct engine *e;
	const struct plan *p;
	struct eprog *ep;
	struct ir *ir;
	int out;			/* label: return 0 */
	ir_reg saved[PLAN_MAX_SAVED];	/* exit: the entry record */
	ir_reg *let_reg;		/* integer lets */
	int *let_slot;			/* string lets: stack offset (< 0), 0: none */
	int err;
};

/* n rounded up to a multiple of 8 (stack slots are 8-byte words). */
static inline int round8(int n)
{
	return (n + 7) & ~7;
}

/* Tag the next instructions with x's query position (x may be NULL, or
 * carry no position: then the current tag stays). */
void cg_pos(struct cg *g, const struct pexpr *x);

/* A problem with the query at x (NULL: no position): reported as a query
 * error and an engine failure, g->err = -EINVAL.  Only the first problem
 * is reported. */
void cg_qfail(struct cg *g, const struct pexpr *x, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Stack key k into the key at key (codegen_stack.c): its id (the hash of
 * its frames, ENGINE_STACK_ID_BIT set, the frames in fay_stk under it),
 * or a negative errno the reader shows ("[no user stack: EFAULT]",
 * -ENOSPC: "[lost]"); a user stack's tgid after it.  In fay's VM: the
 * get_stackid helper's id in its stack map. */
void cg_stack(struct cg *g, const struct plan_key *k, int key);

/* The per-CPU scratch of a stack's frames (fay_stkscr: the plan's
 * stack_depth frames, then its owner, the thread, then the frames' count
 * cg_stack_keep() passes itself): a fresh register, the owner written (the
 * frames after it, so that a walk this one preempts sees it taken
 * over); a jump to fail when missing (never). */
ir_reg cg_stack_scratch(struct cg *g, int fail);

/* The n frames at scr (a cg_stack_scratch(), zero-padded past them) into
 * fay_stk under their hash and the key's id: the hash; the map's refusal
 * (full: -E2BIG, -ENOMEM); -ENOSPC with EC_LOST counted when another
 * thread's walk took the scratch over. */
void cg_stack_keep(struct cg *g, const struct plan_key *k, int key, ir_reg scr, ir_reg n);

/* A user stack key k walked by the process's unwind table into the key
 * at key (codegen_ustack.c): false, emitting nothing, when the query has
 * no tables (e->unwind NULL), the program is not a uprobe's (entry), the
 * query has uretprobes, or the table would come late (-c and a probe
 * that does not follow its exec: a wildcard's); the
 * program jumps to fallback (to be placed by the caller: the kernel's
 * walk) for a process without a table. */
bool cg_ustack(struct cg *g, const struct plan_key *k, int key, int fallback);

/* A fresh register holding the constant v. */
ir_reg cg_imm(struct cg *g, int64_t v);

/* Emit counters[c] += 1 (per CPU): something had to be dropped. */
void cg_count_drop(struct cg *g, enum engine_counter c);
/* Emit counters[c] += by (per CPU; by a register or a constant). */
void cg_count_add(struct cg *g, enum engine_counter c, struct ir_opnd by);

/* Emit: if (r != 0) counters[c] += 1 (a helper's failure is a drop). */
void cg_drop_if_failed(struct cg *g, ir_reg r, enum engine_counter c);

/* A fresh register holding argument n of the event (x: the position for
 * errors, may be NULL).  Tracepoints read their args array, --emit of
 * fentry its u64 args, probes ask probe_emit_arg(). */
ir_reg cg_arg(struct cg *g, int n, const struct pexpr *x);

/* A fresh register holding the integer field x->field (time, pid, tid,
 * uid, cpu, ret, trace_id, duration); a field a probe cannot read is a
 * query error. */
ir_reg cg_field(struct cg *g, const struct pexpr *x);

/* A fresh register holding the integer tracepoint field x->tpf; a
 * string or array field is a query error. */
ir_reg cg_tpfield(struct cg *g, const struct pexpr *x);

/* The string value x into the stack at off (8-aligned, < 0), size bytes
 * (a multiple of 8), zero padded. */
void cg_str(struct cg *g, const struct pexpr *x, int off, int size);

/* spancur.c: of a profile(...) sample, the low 64 bits of the trace id
 * of the libfay span the sampled thread was in (0: none) into a fresh
 * register; its name into the stack at off, size bytes, zero padded
 * ("": none).  Both add the map the reader fills (engine_spancur_tick). */
ir_reg cg_spancur_trace(struct cg *g, const struct pexpr *x);
void cg_spancur_name(struct cg *g, const struct pexpr *x, int off, int size);
/* Jump to label when the truth of x is jump_if; fall through otherwise. */
void cg_cond(struct cg *g, const struct pexpr *x, int label, bool jump_if);

/* A fresh register holding the integer value of x. */
ir_reg cg_int(struct cg *g, const struct pexpr *x);

/* The STREAM body: the plan's columns into a record on the stack, then
 * out to the ring buffer (perf buffer); a failed output is counted lost. */
void cg_stream(struct cg *g);

/* The AGGREGATE body: the key on the stack (windowed: with the epoch),
 * the per-CPU value (created from the zero map when missing; a full map
 * is counted), then each aggregate's update. */
void cg_aggregate(struct cg *g);

#endif
