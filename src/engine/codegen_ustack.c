// SPDX-License-Identifier: MIT
/*
 * A user stack key walked in the program by the process's unwind table
 * (issue #27; the design: src/probe/README.md "Unwind tables"): for a
 * uprobe of a process fay named (-p, -c and the command's descendants),
 * whose table the engine put in fay_unwind (ustack_map.h) before
 * attaching (or at the command's exec, held), and for a profile(...)
 * sample of it.  From the probe's pt_regs
 * (ip, sp, bp; a sample's: the interrupted ones in user mode, the task's
 * saved user registers in the kernel) each step finds the module (6
 * branchless steps) and the row (18), computes the CFA, reads the
 * return address at CFA - 8 and the saved rbp with
 * bpf_probe_read_user(); rows "frame pointers" or "no information", and
 * a pc in no module, step by [bp]; a uprobe's ip at an entry with no
 * row: the caller at [sp].  The first pc is looked up where it is, a
 * return address at its call (pc - 1).  A bounded loop of the query's
 * depth.  The addresses (zero-padded) are kept in fay_stk under their
 * hash, the key's id, as the kernel's walk's are (codegen_stack.c: the
 * scratch, its owner, the hash).  A process without a table (its entry
 * missing): the kernel's walk, bpf_get_stack(), frame pointers.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "bpf/load.h"
#include "common/log.h"
#include "engine/codegen.h"
#include "engine/engine_int.h"
#include "engine/ustack_map.h"

/* pt_regs of x86-64 */
#define REGS_BP	32
#define REGS_IP	128
#define REGS_CS	136
#define REGS_SP	152

/* d = (a <= b): 1 or 0, for a, b below 2^63, without a jump */
static void emit_le(struct ir *ir, ir_reg d, ir_reg a, ir_reg b)
{
	ir_mov(ir, d, IR_R(b));
	ir_alu(ir, BPF_SUB, d, IR_R(a));
	ir_alu(ir, BPF_RSH, d, IR_I(63));
	ir_alu(ir, BPF_XOR, d, IR_I(1));
}

/* a = tab + ((i + step) & (n - 1)) * size: entry i + step of an array
 * of n (a power of two), bounded for the verifier by the mask */
static void emit_entry(struct ir *ir, ir_reg a, ir_reg tab, ir_reg i, uint32_t step,
		       uint32_t n, size_t size)
{
	ir_mov(ir, a, IR_R(i));
	ir_alu(ir, BPF_ADD, a, IR_I(step));
	ir_alu(ir, BPF_AND, a, IR_I(n - 1));
	ir_alu(ir, BPF_MUL, a, IR_I(size));
	ir_alu(ir, BPF_ADD, a, IR_R(tab));
}

/* i = the last entry from i on whose key (width bytes at off in an entry
 * of the array of n at tab, entries size bytes) is <= key, and below end
 * (a register, or IR_NOREG: no bound), by log2(n) steps of a power of
 * two each, without a jump */
static void emit_search(struct ir *ir, ir_reg i, ir_reg tab, uint32_t n, size_t size,
			size_t off, unsigned width, ir_reg key, ir_reg end)
{
	ir_reg a = ir_vreg(ir), t = ir_vreg(ir), c = ir_vreg(ir);

	for (uint32_t step = n / 2; step; step /= 2) {
		emit_entry(ir, a, tab, i, step, n, size);
		ir_load(ir, t, IR_R(a), (int)off, width, 0);
		emit_le(ir, c, t, key);
		if (end != IR_NOREG) {	/* and i + step < end */
			ir_mov(ir, a, IR_R(i));
			ir_alu(ir, BPF_ADD, a, IR_I(step));
			ir_alu(ir, BPF_SUB, a, IR_R(end));
			ir_alu(ir, BPF_RSH, a, IR_I(63));
			ir_alu(ir, BPF_AND, c, IR_R(a));
		}
		ir_alu(ir, BPF_MUL, c, IR_I(step));
		ir_alu(ir, BPF_ADD, i, IR_R(c));
	}
}

/* row = the address of pc's row in tab, or a jump to none (ustk_find(),
 * step for step) */
static void emit_find(struct ir *ir, ir_reg row, ir_reg tab, ir_reg pc, int none)
{
	ir_reg i = ir_vreg(ir), t = ir_vreg(ir);
	ir_reg fpc = ir_vreg(ir), end = ir_vreg(ir), m = ir_vreg(ir);

	ir_comment(ir, "the module of pc");
	ir_mov(ir, i, IR_I(0));
	emit_search(ir, i, tab, USTK_MODS, sizeof(struct ustk_mod),
		    offsetof(struct ustk_tab, mods) + offsetof(struct ustk_mod, lo), 8, pc, IR_NOREG);
	emit_entry(ir, m, tab, i, 0, USTK_MODS, sizeof(struct ustk_mod));
	ir_alu(ir, BPF_ADD, m, IR_I(offsetof(struct ustk_tab, mods)));
	ir_load(ir, t, IR_R(m), offsetof(struct ustk_mod, lo), 8, 0);
	ir_jmp(ir, BPF_JLT, pc, IR_R(t), none);
	ir_load(ir, t, IR_R(m), offsetof(struct ustk_mod, hi), 8, 0);
	ir_jmp(ir, BPF_JGE, pc, IR_R(t), none);
	ir_load(ir, t, IR_R(m), offsetof(struct ustk_mod, bias), 8, 0);
	ir_mov(ir, fpc, IR_R(pc));
	ir_alu(ir, BPF_SUB, fpc, IR_R(t));
	ir_load(ir, i, IR_R(m), offsetof(struct ustk_mod, first), 4, 0);
	ir_load(ir, end, IR_R(m), offsetof(struct ustk_mod, nrows), 4, 0);
	ir_alu(ir, BPF_ADD, end, IR_R(i));
	ir_comment(ir, "its row");
	emit_search(ir, i, tab, USTK_ROWS, sizeof(struct unw_row),
		    offsetof(struct ustk_tab, rows) + offsetof(struct unw_row, pc), 4, fpc, end);
	ir_jmp(ir, BPF_JGE, i, IR_R(end), none);
	emit_entry(ir, row, tab, i, 0, USTK_ROWS, sizeof(struct unw_row));
	ir_alu(ir, BPF_ADD, row, IR_I(offsetof(struct ustk_tab, rows)));
	ir_load(ir, t, IR_R(row), offsetof(struct unw_row, pc), 4, 0);
	ir_jmp(ir, BPF_JGT, t, IR_R(fpc), none);
}

/* pc, sp, bp = the user registers at regs (a uprobe's pt_regs) */
static void emit_regs(struct ir *ir, struct ir_opnd regs, ir_reg pc, ir_reg sp, ir_reg bp)
{
	ir_load(ir, pc, regs, REGS_IP, 8, 0);
	ir_load(ir, sp, regs, REGS_SP, 8, 0);
	ir_load(ir, bp, regs, REGS_BP, 8, 0);
}

/* pc, sp, bp = a perf_event sample's user registers: the interrupted
 * ones when it was taken in user mode (cs's privilege level 3), else
 * (in a system call, a fault, an interrupt's kernel work) those the
 * task saved on entering the kernel, bpf_task_pt_regs(), or, when
 * kernel is not -1 (this kernel refuses that helper to perf_event
 * programs), a jump there */
static void emit_sample_regs(struct ir *ir, ir_reg pc, ir_reg sp, ir_reg bp, int kernel)
{
	ir_reg t = ir_vreg(ir), task = ir_vreg(ir), regs = ir_vreg(ir);
	int user = ir_label_new(ir), have = ir_label_new(ir);

	ir_comment(ir, "the sampled task's user registers");
	ir_load(ir, t, IR_R(ir_ctx(ir)), REGS_CS, 8, 0);
	ir_alu(ir, BPF_AND, t, IR_I(3));
	ir_jmp(ir, BPF_JEQ, t, IR_I(3), user);
	if (kernel >= 0) {
		ir_goto(ir, kernel);
	} else {
		ir_call(ir, task, BPF_FUNC_get_current_task_btf, 0);
		ir_call(ir, regs, BPF_FUNC_task_pt_regs, 1, IR_R(task));
		emit_regs(ir, IR_R(regs), pc, sp, bp);
		ir_goto(ir, have);
	}
	ir_label(ir, user);
	emit_regs(ir, IR_R(ir_ctx(ir)), pc, sp, bp);
	ir_label(ir, have);
}

/* 0 when this kernel gives perf_event programs bpf_task_pt_regs(), or
 * the -errno of its refusal (asked once) */
static int ustk_task_regs(void)
{
	static int known, err;

	if (!known) {
		err = bpf_have_task_regs(BPF_PROG_TYPE_PERF_EVENT);
		known = 1;
	}
	return err;
}

/* Append "; " and the sentence to e->note (what the attach line says) */
static void __attribute__((format(printf, 2, 3))) note(struct engine *e, const char *fmt, ...)
{
	size_t n = strlen(e->note);
	va_list ap;

	if (n + 3 >= sizeof(e->note))
		return;
	if (n) {
		memcpy(e->note + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(e->note + n, sizeof(e->note) - n, fmt, ap);
	va_end(ap);
}

bool cg_ustack(struct cg *g, const struct plan_key *k, int key, int fallback)
{
	struct engine *e = g->e;
	struct ir *ir = g->ir;
	int depth = k->depth, all = e->p->stack_depth;
	/* the table is in place before the first call: -p (loaded before
	 * the attach), or -c held at its exec by the exec watch (the
	 * probes that follow processes: not a wildcard's) */
	bool ready = !e->opts.hold_execs ||
		     (g->ep->probe && probe_follows_processes(g->ep->probe));

	/* (a uretprobe's return addresses on the stack are the kernel's
	 * trampoline, which the kernel's walker replaces and this one
	 * cannot: a query with exit probes walks by frame pointers) */
	const char *why = !ready ? "its table would come after the first calls (a wildcard's "
			  "probe is not held at the command's exec)" :
			  e->p->paired && e->p->exit.kind == PA_URETPROBE ?
			  "the query has exit probes (uretprobes put the kernel's trampoline on "
			  "the stack)" : NULL;

	/* a sample: its pc anywhere in a function; its process's table
	 * comes at the reader's tick (a -c command's after its exec: the
	 * samples before it walk by frame pointers) */
	bool profile = g->ep->kind == PROBE_PROFILE;
	int kregs = 0;

	if (!e->unwind || e->inl || e->vm || k->stack != PSTACK_USER ||
	    (!profile && g->ep->kind != PROBE_UPROBE && g->ep->kind != PROBE_URETPROBE))
		return false;
	if (!profile && (why || g->ep->kind != PROBE_UPROBE)) {
		note(e, "s.ustack by frame pointers: %s", why ? why : "an exit probe");
		return false;
	}
	if (profile)
		kregs = ustk_task_regs();
	note(e, "s.ustack walked by pid %d's unwind table (frame pointers where a frame "
	     "has no row%s%s)", (int)e->opts.pid,
	     !profile ? "" : !kregs ? "; a sample in the kernel from the task's saved user "
	     "registers" : "; a sample in the kernel by frame pointers: this kernel refuses "
	     "bpf_task_pt_regs() to perf_event programs: ",
	     !profile || !kregs ? "" : errstr(kregs));
	int slot = ir_stack_alloc(ir, 16, 8), w = ir_stack_alloc(ir, 16, 8);
	int loop = ir_label_new(ir), done = ir_label_new(ir), fp = ir_label_new(ir);
	int push = ir_label_new(ir), by_rsp = ir_label_new(ir), have_cfa = ir_label_new(ir);
	int bp_same = ir_label_new(ir), first = ir_label_new(ir), not_first = ir_label_new(ir);
	ir_reg tab = ir_vreg(ir), scr, pc = ir_vreg(ir), sp = ir_vreg(ir);
	ir_reg bp = ir_vreg(ir), n = ir_vreg(ir), lpc = ir_vreg(ir), row = ir_vreg(ir);
	ir_reg t = ir_vreg(ir), cfa = ir_vreg(ir), ret = ir_vreg(ir), nsp = ir_vreg(ir);
	ir_reg nbp = ir_vreg(ir), a = ir_vreg(ir), r = ir_vreg(ir);

	ir_comment(ir, "the user stack by the process's unwind table");
	ir_call(ir, t, BPF_FUNC_get_current_pid_tgid, 0);
	ir_alu(ir, BPF_RSH, t, IR_I(32));
	ir_store(ir, IR_S(slot), 0, 8, IR_R(t));
	ir_call(ir, tab, BPF_FUNC_map_lookup_elem, 2, IR_M(e->unwind), IR_S(slot));
	ir_jmp(ir, BPF_JEQ, tab, IR_I(0), fallback);
	/* its owner first, then the addresses (codegen_stack.c) */
	scr = cg_stack_scratch(g, fallback);
	for (int i = 0; i < all; i++)
		ir_store(ir, IR_R(scr), 8 * i, 8, IR_I(0));
	if (profile)
		emit_sample_regs(ir, pc, sp, bp, kregs ? fallback : -1);
	else
		emit_regs(ir, IR_R(ir_ctx(ir)), pc, sp, bp);
	ir_store(ir, IR_R(scr), 0, 8, IR_R(pc));
	ir_mov(ir, n, IR_I(1));

	ir_label(ir, loop);
	ir_jmp(ir, BPF_JGE, n, IR_I(depth), done);
	/* a return address is looked up at its call (pc - 1), the entry's
	 * ip where it is */
	ir_mov(ir, lpc, IR_R(pc));
	ir_jmp(ir, BPF_JEQ, n, IR_I(1), first);
	ir_alu(ir, BPF_SUB, lpc, IR_I(1));
	ir_label(ir, first);
	emit_find(ir, row, tab, lpc, fp);
	ir_load(ir, t, IR_R(row), offsetof(struct unw_row, kind), 1, 0);
	ir_jmp(ir, BPF_JEQ, t, IR_I(UNW_END), done);
	ir_jmp(ir, BPF_JEQ, t, IR_I(UNW_SIGNAL), done);
	ir_jmp(ir, BPF_JEQ, t, IR_I(UNW_RSP), by_rsp);
	ir_jmp(ir, BPF_JNE, t, IR_I(UNW_RBP), fp);
	ir_mov(ir, cfa, IR_R(bp));
	ir_goto(ir, have_cfa);
	ir_label(ir, by_rsp);
	ir_mov(ir, cfa, IR_R(sp));
	ir_label(ir, have_cfa);
	ir_load(ir, t, IR_R(row), offsetof(struct unw_row, cfa_off), 4, IR_SIGNED);
	ir_alu(ir, BPF_ADD, cfa, IR_R(t));
	ir_jmp(ir, BPF_JLE, cfa, IR_R(sp), done);	/* the frame lies above sp */
	ir_mov(ir, a, IR_R(cfa));
	ir_alu(ir, BPF_SUB, a, IR_I(8));
	ir_probe_read(ir, r, w, 8, IR_R(a), true, false);
	ir_jmp(ir, BPF_JNE, r, IR_I(0), done);
	ir_load(ir, ret, IR_S(w), 0, 8, 0);
	ir_mov(ir, nbp, IR_R(bp));
	ir_load(ir, t, IR_R(row), offsetof(struct unw_row, rbp), 1, 0);
	ir_jmp(ir, BPF_JEQ, t, IR_I(UNW_RBP_SAME), bp_same);
	ir_mov(ir, nbp, IR_I(0));
	ir_jmp(ir, BPF_JNE, t, IR_I(UNW_RBP_AT), bp_same);	/* lost */
	ir_load(ir, t, IR_R(row), offsetof(struct unw_row, rbp_off), 2, IR_SIGNED);
	ir_mov(ir, a, IR_R(cfa));
	ir_alu(ir, BPF_ADD, a, IR_R(t));
	ir_probe_read(ir, r, w, 8, IR_R(a), true, false);
	ir_jmp(ir, BPF_JNE, r, IR_I(0), done);
	ir_load(ir, nbp, IR_S(w), 0, 8, 0);
	ir_label(ir, bp_same);
	ir_mov(ir, nsp, IR_R(cfa));
	ir_goto(ir, push);

	ir_label(ir, fp);
	/* no row at a uprobe's entry: the caller is at [sp] (a sample's pc
	 * is anywhere in its function: frame pointers) */
	if (profile)
		ir_goto(ir, not_first);
	ir_jmp(ir, BPF_JNE, n, IR_I(1), not_first);
	ir_probe_read(ir, r, w, 8, IR_R(sp), true, false);
	ir_jmp(ir, BPF_JNE, r, IR_I(0), done);
	ir_load(ir, ret, IR_S(w), 0, 8, 0);
	ir_mov(ir, nbp, IR_R(bp));
	ir_mov(ir, nsp, IR_R(sp));
	ir_alu(ir, BPF_ADD, nsp, IR_I(8));
	ir_goto(ir, push);
	ir_label(ir, not_first);
	/* frame pointers: [bp] the next frame, [bp + 8] its return address */
	ir_jmp(ir, BPF_JLT, bp, IR_R(sp), done);
	ir_probe_read(ir, r, w, 16, IR_R(bp), true, false);
	ir_jmp(ir, BPF_JNE, r, IR_I(0), done);
	ir_load(ir, nbp, IR_S(w), 0, 8, 0);
	ir_load(ir, ret, IR_S(w), 8, 8, 0);
	ir_mov(ir, nsp, IR_R(bp));
	ir_alu(ir, BPF_ADD, nsp, IR_I(16));

	ir_label(ir, push);
	ir_jmp(ir, BPF_JEQ, ret, IR_I(0), done);
	ir_mov(ir, a, IR_R(n));
	ir_alu(ir, BPF_AND, a, IR_I(255));	/* bounds the index for the verifier */
	ir_jmp(ir, BPF_JGE, a, IR_I(all), done);
	ir_alu(ir, BPF_LSH, a, IR_I(3));
	ir_alu(ir, BPF_ADD, a, IR_R(scr));
	ir_store(ir, IR_R(a), 0, 8, IR_R(ret));
	ir_alu(ir, BPF_ADD, n, IR_I(1));
	ir_mov(ir, pc, IR_R(ret));
	ir_mov(ir, sp, IR_R(nsp));
	ir_mov(ir, bp, IR_R(nbp));
	ir_goto(ir, loop);

	ir_label(ir, done);
	cg_stack_keep(g, k, key, scr, n);
	return true;
}
