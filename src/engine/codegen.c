// SPDX-License-Identifier: MIT
/*
 * Code generation: a struct plan (query/plan.h) to one IR program per
 * attach point (bpf/ir.h).  The shapes, in the plan's words:
 *
 *   unpaired:  [pid filter] lets; pred; body
 *   entry:     [pid filter] if (entry_pred) pairs[tid] = { now, args... }
 *   exit:      [pid filter] rec = pairs[tid] or return; load rec; delete;
 *              (uprobes: pairs[tid, frame], the call's own record at any
 *              depth; inline: pairs[level] of the thread's slot, with a
 *              set word; level: fay_depth(), the runtime's count of the
 *              thread's open probed calls; the runtime also runs the
 *              exit program for each call it finds left without its
 *              return, fay_unwound() 1: the query's f.unwound)
 *              lets; pred; body
 *   body:      STREAM: a record on the stack -> ringbuf / perf buffer;
 *              AGGREGATE: key on the stack (windowed: and the window
 *              epoch after it), v = vals[key] (created from the zero
 *              map when missing), each aggregate's update on v.
 *
 * Expressions are generated into fresh virtual registers (integers) or
 * zero-padded stack slots of a multiple of 8 bytes (strings).  Every
 * instruction is tagged with the query position it came from, so the
 * loader can map a verifier complaint back to line:col.  When something
 * must be dropped (a full map, a full output buffer), the program adds
 * one to a per-CPU counter the reader shows with the result.
 */
#include <errno.h>
#include <stdio.h>

#include "engine/codegen.h"
#include "vm/vm.h"

/* ---- filters and pairing ------------------------------------------------- */

static void cg_pid_filter(struct cg *g)
{
	struct ir *ir = g->ir;
	ir_reg r = ir_vreg(ir);

	/* inline probes run in that process only (a fork child's are inert) */
	struct bmap *follow;
	int key;

	if (g->e->opts.pid <= 0 || g->e->inl)
		return;
	follow = engine_follow_map(g->e);
	if (follow) {	/* a command fay started, and its descendants */
		ir_comment(ir, "only process %d and its descendants", (int)g->e->opts.pid);
		key = ir_stack_alloc(ir, 4, 4);
		ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
		ir_alu(ir, BPF_RSH, r, IR_I(32));
		ir_store(ir, IR_S(key), 0, 4, IR_R(r));
		ir_call(ir, r, BPF_FUNC_map_lookup_elem, 2, IR_M(follow), IR_S(key));
		ir_jmp(ir, BPF_JEQ, r, IR_I(0), g->out);
		return;
	}
	ir_comment(ir, "only process %d", (int)g->e->opts.pid);
	ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
	ir_alu(ir, BPF_RSH, r, IR_I(32));
	ir_jmp(ir, BPF_JNE, r, IR_I(g->e->opts.pid), g->out);
}

/* A non-root requester's query (engine_opts.own_uid_only, owner.c): only
 * events of tasks whose real uid is the requester's.  Not for spans(...):
 * those are spans the agent drained, not events of a task. */
static void cg_uid_filter(struct cg *g)
{
	struct ir *ir = g->ir;
	ir_reg r, u;

	if (!g->e->opts.own_uid_only || g->p->entry.kind == PA_SPANS)
		return;
	r = ir_vreg(ir);
	u = ir_vreg(ir);
	ir_comment(ir, "only processes of uid %u", (unsigned)g->e->opts.uid);
	ir_call(ir, r, BPF_FUNC_get_current_uid_gid, 0);
	ir_alu(ir, BPF_LSH, r, IR_I(32));
	ir_alu(ir, BPF_RSH, r, IR_I(32));
	ir_mov(ir, u, IR_I((uint64_t)g->e->opts.uid));
	ir_jmp(ir, BPF_JNE, r, IR_R(u), g->out);
}

/* engine_opts.cgroup (scope.c): only tasks whose ancestor at the scope's
 * level is the scope.  Not inline (its one process was checked when the
 * query attached), not spans(...) (spans the agent drained). */
static void cg_scope_filter(struct cg *g)
{
	struct ir *ir = g->ir;
	ir_reg r, id;

	if (!g->e->scope_id || g->e->inl || g->p->entry.kind == PA_SPANS)
		return;
	r = ir_vreg(ir);
	id = ir_vreg(ir);
	ir_comment(ir, "only tasks in cgroup %s", g->e->scope_path);
	ir_call(ir, r, BPF_FUNC_get_current_ancestor_cgroup_id, 1,
		IR_I(g->e->scope_level));
	ir_mov(ir, id, IR_I((int64_t)g->e->scope_id));
	ir_jmp(ir, BPF_JNE, r, IR_R(id), g->out);
}

/* The offset of sp in the x86-64 struct pt_regs, a uprobe's context. */
#define PT_REGS_SP	152

/* The key of the call's entry record: the thread id as u32 in an 8-byte
 * slot; with e->frame_pairs (uprobes) the thread's pid_tgid, then the
 * call's frame S (the entry's sp; at the uretprobe, sp - 8: the return
 * address was popped). */
static int cg_pair_key(struct cg *g, bool exit)
{
	struct ir *ir = g->ir;
	int k = ir_stack_alloc(ir, g->e->frame_pairs ? 16 : 8, 8);
	ir_reg t = ir_vreg(ir), sp;

	ir_call(ir, t, BPF_FUNC_get_current_pid_tgid, 0);
	if (!g->e->frame_pairs) {
		ir_store(ir, IR_S(k), 0, 4, IR_R(t));
		return k;
	}
	sp = ir_vreg(ir);
	ir_store(ir, IR_S(k), 0, 8, IR_R(t));
	ir_load(ir, sp, IR_R(ir_ctx(ir)), PT_REGS_SP, 8, 0);
	if (exit)
		ir_alu(ir, BPF_SUB, sp, IR_I(8));
	ir_store(ir, IR_S(k), 8, 8, IR_R(sp));
	return k;
}

/* Inline (e->slot_pairs): the record of the call's level (fay_depth(),
 * which the runtime sets) in the thread's slot of the pairs array.  None
 * past INLINE_DEPTH levels: the entry counts the call (EC_DEPTH) and
 * both go to g->out (the runtime runs no exit program for it).  A call
 * the runtime found left without its return gets its exit program run
 * at its level like a return (fay_unwound() 1 then: f.unwound), so no
 * count of them here. */
static ir_reg cg_slot_rec(struct cg *g, bool entry)
{
	struct ir *ir = g->ir;
	int k = ir_stack_alloc(ir, 8, 8), found = ir_label_new(ir);
	ir_reg rec = ir_vreg(ir), d = ir_vreg(ir);

	ir_call(ir, d, VM_FUNC_fay_depth, 0);
	ir_store(ir, IR_S(k), 0, 8, IR_R(d));
	ir_call(ir, rec, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->pairs), IR_S(k));
	ir_jmp(ir, BPF_JNE, rec, IR_I(0), found);
	if (entry)
		cg_count_drop(g, EC_DEPTH);
	ir_goto(ir, g->out);
	ir_label(ir, found);
	return rec;
}

/* The entry record's words (the time, the arguments the exit needs) at
 * base (the stack, or the thread's slot of the pairs array). */
static void cg_save(struct cg *g, struct ir_opnd base)
{
	const struct plan *p = g->p;
	ir_reg r;

	for (int i = 0; i < p->nsaved; i++) {
		if (p->saved[i].kind == SAVE_TIME) {
			r = ir_vreg(g->ir);
			ir_call(g->ir, r, BPF_FUNC_ktime_get_ns, 0);
		} else {
			r = cg_arg(g, p->saved[i].arg, NULL);
		}
		ir_store(g->ir, base, 8 * i, 8, IR_R(r));
	}
}

static void cg_entry(struct cg *g)
{
	const struct plan *p = g->p;
	struct ir *ir = g->ir;
	int rec, key;
	ir_reg r;

	ir_comment(ir, "entry: record the entry for the exit");
	if (g->e->slot_pairs) {		/* inline: then the "set" word */
		r = cg_slot_rec(g, true);
		if (p->entry_pred) {	/* not a record an exit skipped left */
			ir_store(ir, IR_R(r), p->saved_size, 8, IR_I(0));
			cg_pos(g, p->entry_pred);
			cg_cond(g, p->entry_pred, g->out, false);
			ir_set_pos(ir, 0, 0);
		}
		cg_save(g, IR_R(r));
		ir_store(ir, IR_R(r), p->saved_size, 8, IR_I(1));
		return;
	}
	if (g->e->frame_pairs) {
		key = cg_pair_key(g, false);
		if (p->entry_pred) {
			int keep = ir_label_new(ir), skip = ir_label_new(ir);

			cg_pos(g, p->entry_pred);
			cg_cond(g, p->entry_pred, skip, false);
			ir_set_pos(ir, 0, 0);
			ir_goto(ir, keep);
			/* no record a call left without its return left here */
			ir_label(ir, skip);
			ir_call(ir, IR_NOREG, BPF_FUNC_map_delete_elem, 2, IR_M(g->e->pairs),
				IR_S(key));
			ir_goto(ir, g->out);
			ir_label(ir, keep);
		}
		rec = ir_stack_alloc(ir, (unsigned)p->saved_size, 8);
		cg_save(g, IR_S(rec));
	} else {
		if (p->entry_pred) {
			cg_pos(g, p->entry_pred);
			cg_cond(g, p->entry_pred, g->out, false);
			ir_set_pos(ir, 0, 0);
		}
		rec = ir_stack_alloc(ir, (unsigned)p->saved_size, 8);
		cg_save(g, IR_S(rec));
		key = cg_pair_key(g, false);
	}
	r = ir_vreg(ir);
	ir_call(ir, r, BPF_FUNC_map_update_elem, 4, IR_M(g->e->pairs), IR_S(key),
		IR_S(rec), IR_I(BPF_ANY));
	cg_drop_if_failed(g, r, EC_PAIRS_FULL);
}

static void cg_exit_pairing(struct cg *g)
{
	const struct plan *p = g->p;
	struct ir *ir = g->ir;
	int key;
	ir_reg rec, set;

	if (g->e->slot_pairs) {
		ir_comment(ir, "exit: the entry record of this call, if set");
		rec = cg_slot_rec(g, false);
		set = ir_vreg(ir);
		ir_load(ir, set, IR_R(rec), p->saved_size, 8, 0);
		ir_jmp(ir, BPF_JEQ, set, IR_I(0), g->out);
		for (int i = 0; i < p->nsaved; i++) {
			g->saved[i] = ir_vreg(ir);
			ir_load(ir, g->saved[i], IR_R(rec), 8 * i, 8, 0);
		}
		ir_store(ir, IR_R(rec), p->saved_size, 8, IR_I(0));
		return;
	}
	key = cg_pair_key(g, true);
	rec = ir_vreg(ir);
	ir_comment(ir, g->e->frame_pairs ? "exit: the entry record of this call" :
		   "exit: the entry record of this thread");
	ir_call(ir, rec, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->pairs), IR_S(key));
	ir_jmp(ir, BPF_JEQ, rec, IR_I(0), g->out);
	for (int i = 0; i < p->nsaved; i++) {
		g->saved[i] = ir_vreg(ir);
		ir_load(ir, g->saved[i], IR_R(rec), 8 * i, 8, 0);
	}
	ir_call(ir, IR_NOREG, BPF_FUNC_map_delete_elem, 2, IR_M(g->e->pairs), IR_S(key));
}

static void cg_main(struct cg *g)
{
	const struct plan *p = g->p;
	struct ir *ir = g->ir;

	for (int i = 0; i < p->nlets; i++) {
		const struct pexpr *x = p->lets[i].e;

		ir_comment(ir, "let %s", p->lets[i].name);
		if (x->type == VT_STR) {
			g->let_slot[i] = ir_stack_alloc(ir, (unsigned)round8(x->size), 8);
			cg_str(g, x, g->let_slot[i], round8(x->size));
		} else {
			g->let_reg[i] = cg_int(g, x);
		}
	}
	if (p->pred) {
		ir_comment(ir, "where");
		cg_pos(g, p->pred);
		cg_cond(g, p->pred, g->out, false);
		ir_set_pos(ir, 0, 0);
	}
	if (p->mode == PLAN_STREAM)
		cg_stream(g);
	else
		cg_aggregate(g);
}

static int cg_program(struct engine *e, struct eprog *ep)
{
	const struct plan *p = e->p;
	ir_reg let_reg[p->nlets + 1];
	int let_slot[p->nlets + 1];
	struct cg g = {
		.e = e, .p = p, .ep = ep, .ir = ep->ir,
		.let_reg = let_reg, .let_slot = let_slot,
	};
	int err;

	for (int i = 0; i <= p->nlets; i++) {
		let_reg[i] = IR_NOREG;
		let_slot[i] = 0;
	}
	g.out = ir_label_new(g.ir);
	ir_comment(g.ir, "%s", ep->spec);
	cg_pid_filter(&g);
	cg_uid_filter(&g);
	cg_scope_filter(&g);
	if (ep->role == EP_ENTRY && !ep->is_main) {
		cg_entry(&g);
	} else {
		if (ep->role == EP_EXIT)
			cg_exit_pairing(&g);
		cg_main(&g);
	}
	ir_set_pos(g.ir, 0, 0);
	ir_label(g.ir, g.out);
	ir_exit(g.ir, IR_I(0));
	if (g.err)
		return g.err;
	err = ir_error(g.ir);
	if (err)
		return engine_fail(e, err, "internal: code generation for %s: %s",
				   ep->spec, ir_strerror(g.ir));
	return 0;
}

int engine_codegen(struct engine *e)
{
	const struct plan *p = e->p;

	if (p->mode == PLAN_STREAM && p->record_size > ENGINE_RECORD_MAX) {
		const struct pexpr x = { .loc = p->ast->select_loc };

		query_errorf(e->q, &x.loc, "a streamed row takes %d bytes; at most %d fit (rows are built on the 512-byte BPF stack)",
			     p->record_size, ENGINE_RECORD_MAX);
		return engine_fail(e, -EINVAL, "a streamed row is too large");
	}
	for (int i = 0; i < e->nprogs; i++) {
		struct eprog *ep = &e->progs[i];
		char name[16];
		int err;

		snprintf(name, sizeof(name), "fay_%s", ep->role == EP_ENTRY ?
			 "entry" : "exit");
		ep->ir = ir_new(name);
		if (!ep->ir)
			return engine_fail(e, -ENOMEM, "out of memory");
		err = cg_program(e, ep);
		if (err)
			return err;
	}
	return 0;
}
