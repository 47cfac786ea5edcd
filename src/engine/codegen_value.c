// SPDX-License-Identifier: MIT
/*
 * Code generation, the leaves: errors tagged with the query position,
 * small pieces (immediates, drop counters), and the values a probe reads
 * from its context: arguments, the return value, fields, tracepoint
 * fields and strings.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/cgroup.h"
#include "engine/codegen.h"
#include "vm/vm.h"

void cg_pos(struct cg *g, const struct pexpr *x)
{
	if (x && x->loc.line > 0)
		ir_set_pos(g->ir, (uint32_t)x->loc.line, (uint32_t)x->loc.col);
}

void cg_qfail(struct cg *g, const struct pexpr *x, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (g->err)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	g->err = -EINVAL;
	query_errorf(g->e->q, x && x->loc.line > 0 ? &x->loc : NULL, "%s", msg);
	engine_fail(g->e, -EINVAL, "%s", msg);
}

static void cg_probe_fail(struct cg *g, const struct pexpr *x, int err)
{
	cg_qfail(g, x, "%s", probe_strerror(g->ep->probe));
	g->err = err;
}

/* ---- constants and small pieces ----------------------------------------- */

ir_reg cg_imm(struct cg *g, int64_t v)
{
	ir_reg r = ir_vreg(g->ir);

	ir_mov(g->ir, r, IR_I(v));
	return r;
}

/* counters[c] += 1 (per CPU). */
void cg_count_add(struct cg *g, enum engine_counter c, struct ir_opnd by)
{
	struct ir *ir = g->ir;
	int k = ir_stack_alloc(ir, 8, 8), skip = ir_label_new(ir);
	ir_reg p = ir_vreg(ir), t = ir_vreg(ir);

	ir_store(ir, IR_S(k), 0, 8, IR_I(c));
	ir_call(ir, p, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->counters), IR_S(k));
	ir_jmp(ir, BPF_JEQ, p, IR_I(0), skip);
	ir_load(ir, t, IR_R(p), 0, 8, 0);
	ir_alu(ir, BPF_ADD, t, by);
	ir_store(ir, IR_R(p), 0, 8, IR_R(t));
	ir_label(ir, skip);
}

void cg_count_drop(struct cg *g, enum engine_counter c)
{
	cg_count_add(g, c, IR_I(1));
}

/* if (r != 0) counters[c] += 1: a helper's failure is a drop. */
void cg_drop_if_failed(struct cg *g, ir_reg r, enum engine_counter c)
{
	int done = ir_label_new(g->ir);

	ir_jmp(g->ir, BPF_JEQ, r, IR_I(0), done);
	cg_count_drop(g, c);
	ir_label(g->ir, done);
}

/* Copy size bytes (a multiple of 8) between 8-aligned stack slots. */
static void cg_copy_slot(struct cg *g, int dst, int src, int size)
{
	ir_reg t = ir_vreg(g->ir);

	for (int i = 0; i < size; i += 8) {
		ir_load(g->ir, t, IR_S(src), i, 8, 0);
		ir_store(g->ir, IR_S(dst), i, 8, IR_R(t));
	}
}

/* ---- context values ------------------------------------------------------ */

static struct probe *cg_probe(struct cg *g, const struct pexpr *x)
{
	if (!g->ep->probe) {
		cg_qfail(g, x, "internal: %s needs a resolved probe", g->ep->spec);
		return NULL;
	}
	return g->ep->probe;
}

ir_reg cg_arg(struct cg *g, int n, const struct pexpr *x)
{
	const struct plan_attach *at = g->ep->at;
	ir_reg r = ir_vreg(g->ir);
	struct probe *pr;
	int err;

	if (at->kind == PA_TRACEPOINT) {
		if (at->args_off < 0) {
			cg_qfail(g, x, "arg(%d): %s:%s has no arguments (use its fields by name)",
				 n, at->sys, at->event);
			return r;
		}
		ir_load(g->ir, r, IR_R(ir_ctx(g->ir)), at->args_off + 8 * n, 8, 0);
		return r;
	}
	if (g->ep->assume_fentry_nargs >= 0) {	/* --emit only: fentry's u64 args */
		ir_load(g->ir, r, IR_R(ir_ctx(g->ir)), 8 * n, 8, 0);
		return r;
	}
	pr = cg_probe(g, x);
	if (!pr)
		return r;
	err = probe_emit_arg(pr, g->ir, r, n);
	if (err)
		cg_probe_fail(g, x, err);
	return r;
}

static ir_reg cg_ret(struct cg *g, const struct pexpr *x)
{
	const struct plan_attach *at = g->ep->at;
	ir_reg r = ir_vreg(g->ir);
	struct probe *pr;
	int err;

	if (at->kind == PA_TRACEPOINT) {
		if (at->ret_off < 0) {
			cg_qfail(g, x, "ret: %s:%s has no return value", at->sys, at->event);
			return r;
		}
		ir_load(g->ir, r, IR_R(ir_ctx(g->ir)), at->ret_off, 8, IR_SIGNED);
		return r;
	}
	if (g->ep->assume_fentry_nargs >= 0) {	/* fexit: ret after the args */
		ir_load(g->ir, r, IR_R(ir_ctx(g->ir)), 8 * g->ep->assume_fentry_nargs, 8, 0);
		return r;
	}
	pr = cg_probe(g, x);
	if (!pr)
		return r;
	err = probe_emit_ret(pr, g->ir, r);
	if (err)
		cg_probe_fail(g, x, err);
	return r;
}

/* trace_id / span_name of a function(...) event: the libfay span current
 * on the thread, which only an inline probe (in the process) can read. */
static bool cg_span_ok(struct cg *g, const struct pexpr *x)
{
	if (engine_inl_active(g->e))
		return true;
	cg_qfail(g, x, "the field '%s' of a function(...) event is the libfay span current on the calling thread, which only inline probes read: use --probe-mode=inline on a process started with fay run",
		 field_name(x->field));
	return false;
}

/*
 * s.vpid in the kernel: the current process's pid in its own pid
 * namespace, task->group_leader->thread_pid->numbers[level].nr, each step
 * a bpf_probe_read_kernel() at the offsets the kernel's BTF gives
 * (probe_task_offsets()); a failed read leaves 0.
 */
static void cg_vpid(struct cg *g, const struct pexpr *x, ir_reg r)
{
	struct ir *ir = g->ir;
	struct probe_task_offs o;
	int k = ir_stack_alloc(ir, 8, 8);
	ir_reg p = ir_vreg(ir), lv = ir_vreg(ir);

	if (probe_task_offsets(&o)) {
		cg_qfail(g, x, "vpid: the kernel's BTF (/sys/kernel/btf/vmlinux) does not "
			 "say where a task's pid is (task_struct.thread_pid, pid.numbers)");
		return;
	}
	ir_zero(ir, k, 8);
	ir_call(ir, p, BPF_FUNC_get_current_task, 0);
	ir_alu(ir, BPF_ADD, p, IR_I(o.group_leader));
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(k), IR_I(8), IR_R(p));
	ir_load(ir, p, IR_S(k), 0, 8, 0);
	ir_alu(ir, BPF_ADD, p, IR_I(o.thread_pid));
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(k), IR_I(8), IR_R(p));
	ir_load(ir, p, IR_S(k), 0, 8, 0);		/* struct pid * */
	ir_mov(ir, lv, IR_R(p));
	ir_alu(ir, BPF_ADD, lv, IR_I(o.pid_level));
	ir_zero(ir, k, 8);
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(k), IR_I(4), IR_R(lv));
	ir_load(ir, lv, IR_S(k), 0, 4, 0);
	ir_alu(ir, BPF_AND, lv, IR_I(31));		/* MAX_PID_NS_LEVEL is 32 */
	ir_alu(ir, BPF_MUL, lv, IR_I(o.upid_size));
	ir_alu(ir, BPF_ADD, p, IR_R(lv));
	ir_alu(ir, BPF_ADD, p, IR_I(o.pid_numbers + o.upid_nr));
	ir_zero(ir, k, 8);
	ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel, 3, IR_S(k), IR_I(4), IR_R(p));
	ir_load(ir, r, IR_S(k), 0, 4, 0);
}

/* The current task's cgroup v2 id into r: bpf_get_current_cgroup_id(),
 * which the VM answers inline with the process's cgroup when fay armed
 * it (INL_PID: each process of a command its own; a process that moves
 * to another cgroup while an inline query runs keeps its first one). */
static void cg_cgroup_id(struct cg *g, ir_reg r)
{
	ir_call(g->ir, r, BPF_FUNC_get_current_cgroup_id, 0);
}

/* The id of the probe's name (plan.h, "The probe's name"). */
static ir_reg cg_name_id(struct cg *g, const struct pexpr *x)
{
	const struct plan_names *t = g->p->names;
	ir_reg r = ir_vreg(g->ir);

	if (!t) {
		cg_qfail(g, x, "internal: s.name without a name table");
		return r;
	}
	switch (t->src) {
	case PN_CONST:
		ir_mov(g->ir, r, IR_I(0));
		break;
	case PN_CTX:
		ir_load(g->ir, r, IR_R(ir_ctx(g->ir)), t->ctx_off, 8, 0);
		break;
	case PN_COOKIE:
		/* inline: the runtime gives the site's id as the kernel gives
		 * an attachment's cookie */
		if (engine_inl_active(g->e))
			ir_call(g->ir, r, VM_FUNC_fay_cookie, 0);
		else
			ir_call(g->ir, r, BPF_FUNC_get_attach_cookie, 1, IR_R(ir_ctx(g->ir)));
		break;
	}
	return r;
}

ir_reg cg_field(struct cg *g, const struct pexpr *x)
{
	struct ir *ir = g->ir;
	ir_reg r = ir_vreg(ir);

	switch (x->field) {
	case F_TIME:
		ir_call(ir, r, BPF_FUNC_ktime_get_ns, 0);
		break;
	case F_PID:
		/* (inline: the pid fay gave the process's runtime, INL_PID,
		 * not its getpid(), which is its namespace's) */
		ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
		ir_alu(ir, BPF_RSH, r, IR_I(32));
		break;
	case F_VPID:
		/* inline: the process's getpid() (each process of a command
		 * its own) */
		if (engine_inl_active(g->e))
			ir_call(ir, r, VM_FUNC_fay_vpid, 0);
		else
			cg_vpid(g, x, r);
		break;
	case F_CGROUP:
	case F_CONTAINER:
		cg_cgroup_id(g, r);
		break;
	case F_TID:
		ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
		ir_alu(ir, BPF_LSH, r, IR_I(32));
		ir_alu(ir, BPF_RSH, r, IR_I(32));
		break;
	case F_UID:
		ir_call(ir, r, BPF_FUNC_get_current_uid_gid, 0);
		ir_alu(ir, BPF_LSH, r, IR_I(32));
		ir_alu(ir, BPF_RSH, r, IR_I(32));
		break;
	case F_CPU:
		ir_call(ir, r, BPF_FUNC_get_smp_processor_id, 0);
		break;
	case F_RET:
		return cg_ret(g, x);
	case F_PROBE:
		return cg_name_id(g, x);
	case F_TRACE_ID: {
		int k = ir_stack_alloc(ir, 8, 8);

		if (g->p->source == SRC_PROFILE)
			return cg_spancur_trace(g, x);
		if (!cg_span_ok(g, x))
			break;
		ir_call(ir, IR_NOREG, VM_FUNC_fay_span, 3, IR_S(k), IR_I(8),
			IR_I(VM_SPAN_TRACE_ID));
		ir_load(ir, r, IR_S(k), 0, 8, 0);
		break;
	}
	case F_UNWOUND:
		if (!g->e->slot_pairs) {
			cg_qfail(g, x, "f.unwound: only inline probes see a call left by longjmp or a C++ exception as an exit (the runtime's per-thread stack finds it gone; a kernel uretprobe never fires for it): use --probe-mode=inline on a process started with fay run or named with -p PID%s%s",
				 engine_note(g->e)[0] ? "; " : "", engine_note(g->e));
			break;
		}
		ir_call(ir, r, VM_FUNC_fay_unwound, 0);
		break;
	case F_DURATION:
		if (!g->p->paired || g->ep->role != EP_EXIT) {
			cg_qfail(g, x, "duration is only known at the exit of a paired source");
			break;
		}
		ir_call(ir, r, BPF_FUNC_ktime_get_ns, 0);
		ir_alu(ir, BPF_SUB, r, IR_R(g->saved[0]));
		break;
	default:
		cg_qfail(g, x, "the field '%s' cannot be read in a probe",
			 field_name(x->field));
	}
	return r;
}

ir_reg cg_tpfield(struct cg *g, const struct pexpr *x)
{
	const struct tp_field *f = x->tpf;
	ir_reg r = ir_vreg(g->ir);

	if (f->is_string || f->is_array || (f->size != 1 && f->size != 2 &&
					    f->size != 4 && f->size != 8)) {
		cg_qfail(g, x, "the field %s (%s) is not an integer", f->name, f->ctype);
		return r;
	}
	ir_load(g->ir, r, IR_R(ir_ctx(g->ir)), f->offset, (unsigned)f->size,
		f->is_signed ? IR_SIGNED : 0);
	return r;
}

/* ---- strings --------------------------------------------------------------- */

/* The host name into the stack at off, size bytes (a multiple of 8),
 * zero padded: a constant for the query, so its bytes are stored as
 * 4-byte immediates (no helper call). */
static void cg_host(struct cg *g, int off, int size)
{
	const char *h = g->e->host;
	int n = (int)strnlen(h, QUERY_STR_MAX);

	if (n > size)
		n = size;
	ir_zero(g->ir, off, (unsigned)size);
	for (int i = 0; i < n; i += 4) {
		uint32_t w = 0;

		for (int j = 0; j < 4 && i + j < n; j++)
			w |= (uint32_t)(unsigned char)h[i + j] << (8 * j);
		ir_store(g->ir, IR_S(off), i, 4, IR_I((int32_t)w));
	}
}

/* The string x into the stack at off, size bytes (a multiple of 8),
 * zero padded. */
void cg_str(struct cg *g, const struct pexpr *x, int off, int size)
{
	struct ir *ir = g->ir;
	int n;

	cg_pos(g, x);
	switch (x->op) {
	case PX_FIELD:
		if (x->field == F_HOST) {
			cg_host(g, off, size);
			return;
		}
		if (x->field == F_PROBE || x->field == F_CGROUP || x->field == F_CONTAINER) {
			/* the id in the first 8 bytes: the reader names it */
			ir_reg id = x->field == F_PROBE ? cg_name_id(g, x) : ir_vreg(ir);

			if (x->field != F_PROBE)
				cg_cgroup_id(g, id);
			ir_zero(ir, off, (unsigned)size);
			ir_store(ir, IR_S(off), 0, 8, IR_R(id));
			return;
		}
		if (x->field == F_SPAN_NAME) {
			if (g->p->source == SRC_PROFILE)
				cg_spancur_name(g, x, off, size);
			else if (cg_span_ok(g, x))
				ir_call(ir, IR_NOREG, VM_FUNC_fay_span, 3, IR_S(off), IR_I(size),
					IR_I(VM_SPAN_NAME));
			return;
		}
		if (x->field != F_COMM)
			break;
		/* Kernels before 6.2 copy with strscpy(), not strscpy_pad():
		 * the bytes after the NUL would be whatever the stack held,
		 * and equal names would make different keys. */
		ir_zero(ir, off, (unsigned)size);
		n = size < QUERY_COMM_LEN ? size : QUERY_COMM_LEN;
		ir_call(ir, IR_NOREG, BPF_FUNC_get_current_comm, 2, IR_S(off), IR_I(n));
		return;
	case PX_STRREAD: {
		ir_reg a = cg_int(g, x->a), r = ir_vreg(ir);
		int done = ir_label_new(ir);

		n = x->size < size ? x->size : size;
		cg_pos(g, x);
		if (n < size)
			ir_zero(ir, off + n, (unsigned)(size - n));
		ir_probe_read(ir, r, off, (unsigned)n, IR_R(a), x->user, true);
		if (x->either) {	/* kernel memory, else user memory */
			ir_jmp(ir, BPF_JSGE, r, IR_I(0), done);
			ir_probe_read(ir, r, off, (unsigned)n, IR_R(a), true, true);
		}
		/* a failed read leaves "" (zeroed): count it, never hide it */
		ir_jmp(ir, BPF_JSGE, r, IR_I(0), done);
		cg_count_drop(g, EC_READ_FAIL);
		ir_label(ir, done);
		return;
	}
	case PX_TPFIELD: {
		const struct tp_field *f = x->tpf;

		if (!f->is_string)
			break;
		ir_zero(ir, off, (unsigned)size);
		if (f->data_loc) {
			/* u32 (len << 16) | offset of the bytes in the record */
			ir_reg v = ir_vreg(ir), ptr = ir_vreg(ir);

			ir_load(ir, v, IR_R(ir_ctx(ir)), f->offset, 4, 0);
			ir_alu(ir, BPF_AND, v, IR_I(0xffff));
			ir_mov(ir, ptr, IR_R(ir_ctx(ir)));
			ir_alu(ir, BPF_ADD, ptr, IR_R(v));
			ir_call(ir, IR_NOREG, BPF_FUNC_probe_read_kernel_str, 3,
				IR_S(off), IR_I(size), IR_R(ptr));
			return;
		}
		/* char[N] inline: each piece is as wide as both the
		 * context offset (context reads must be aligned) and the
		 * stack offset (so must stack writes) allow: a field at
		 * offset 12 goes in 4-byte pieces, one at offset 9 in bytes */
		n = f->size < size ? f->size : size;
		for (int done = 0; done < n;) {
			int o = f->offset + done, w = 1, left = n - done;
			int al = o | done;
			ir_reg t = ir_vreg(ir);

			if (left >= 8 && !(al & 7))
				w = 8;
			else if (left >= 4 && !(al & 3))
				w = 4;
			else if (left >= 2 && !(al & 1))
				w = 2;
			ir_load(ir, t, IR_R(ir_ctx(ir)), o, (unsigned)w, 0);
			ir_store(ir, IR_S(off), done, (unsigned)w, IR_R(t));
			done += w;
		}
		return;
	}
	case PX_LET:
		if (g->let_slot[x->idx] && round8(x->size) <= size) {
			if (round8(x->size) < size)
				ir_zero(ir, off + round8(x->size),
					(unsigned)(size - round8(x->size)));
			cg_copy_slot(g, off, g->let_slot[x->idx], round8(x->size));
			return;
		}
		break;
	default:
		break;
	}
	cg_qfail(g, x, "internal: cannot generate this string value");
}
