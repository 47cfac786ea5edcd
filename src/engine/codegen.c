// SPDX-License-Identifier: MIT
/*
 * Code generation: a struct plan (query/plan.h) to one IR program per
 * attach point (bpf/ir.h).  The shapes, in the plan's words:
 *
 *   unpaired:  [pid filter] lets; pred; body
 *   entry:     [pid filter] if (entry_pred) pairs[tid] = { now, args... }
 *   exit:      [pid filter] rec = pairs[tid] or return; load rec; delete;
 *              (inline: pairs[0] of the thread's slot, with a set word)
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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine_int.h"
#include "vm/vm.h"

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

static int round8(int n)
{
	return (n + 7) & ~7;
}

static void cg_pos(struct cg *g, const struct pexpr *x)
{
	if (x && x->loc.line > 0)
		ir_set_pos(g->ir, (uint32_t)x->loc.line, (uint32_t)x->loc.col);
}

/* A problem with the query at x: reported as a query error. */
static void cg_qfail(struct cg *g, const struct pexpr *x, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void cg_qfail(struct cg *g, const struct pexpr *x, const char *fmt, ...)
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

static ir_reg cg_imm(struct cg *g, int64_t v)
{
	ir_reg r = ir_vreg(g->ir);

	ir_mov(g->ir, r, IR_I(v));
	return r;
}

/* counters[c] += 1 (per CPU). */
static void cg_count_drop(struct cg *g, enum engine_counter c)
{
	struct ir *ir = g->ir;
	int k = ir_stack_alloc(ir, 8, 8), skip = ir_label_new(ir);
	ir_reg p = ir_vreg(ir), t = ir_vreg(ir);

	ir_store(ir, IR_S(k), 0, 8, IR_I(c));
	ir_call(ir, p, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->counters), IR_S(k));
	ir_jmp(ir, BPF_JEQ, p, IR_I(0), skip);
	ir_load(ir, t, IR_R(p), 0, 8, 0);
	ir_alu(ir, BPF_ADD, t, IR_I(1));
	ir_store(ir, IR_R(p), 0, 8, IR_R(t));
	ir_label(ir, skip);
}

/* if (r != 0) counters[c] += 1: a helper's failure is a drop. */
static void cg_drop_if_failed(struct cg *g, ir_reg r, enum engine_counter c)
{
	int done = ir_label_new(g->ir);

	ir_jmp(g->ir, BPF_JEQ, r, IR_I(0), done);
	cg_count_drop(g, c);
	ir_label(g->ir, done);
}

/* dst = the most significant set bit of t (t != 0); t is clobbered. */
static void cg_msb(struct cg *g, ir_reg dst, ir_reg t)
{
	struct ir *ir = g->ir;
	ir_reg x = ir_vreg(ir);

	ir_mov(ir, dst, IR_I(0));
	for (int sh = 32; sh; sh >>= 1) {
		int skip = ir_label_new(ir);

		ir_mov(ir, x, IR_R(t));
		ir_alu(ir, BPF_RSH, x, IR_I(sh));
		ir_jmp(ir, BPF_JEQ, x, IR_I(0), skip);
		ir_mov(ir, t, IR_R(x));
		ir_alu(ir, BPF_ADD, dst, IR_I(sh));
		ir_label(ir, skip);
	}
}

/* h = fmix64(h) (murmur3's finaliser, aggr_hash64()). */
static void cg_fmix64(struct cg *g, ir_reg h)
{
	struct ir *ir = g->ir;
	ir_reg t = ir_vreg(ir);
	static const uint64_t mul[2] = { 0xff51afd7ed558ccdull, 0xc4ceb9fe1a85ec53ull };

	for (int i = 0; i < 3; i++) {
		ir_mov(ir, t, IR_R(h));
		ir_alu(ir, BPF_RSH, t, IR_I(33));
		ir_alu(ir, BPF_XOR, h, IR_R(t));
		if (i < 2)
			ir_alu(ir, BPF_MUL, h, IR_I((int64_t)mul[i]));
	}
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

static ir_reg cg_arg(struct cg *g, int n, const struct pexpr *x)
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

static ir_reg cg_field(struct cg *g, const struct pexpr *x)
{
	struct ir *ir = g->ir;
	ir_reg r = ir_vreg(ir);

	switch (x->field) {
	case F_TIME:
		ir_call(ir, r, BPF_FUNC_ktime_get_ns, 0);
		break;
	case F_PID:
		ir_call(ir, r, BPF_FUNC_get_current_pid_tgid, 0);
		ir_alu(ir, BPF_RSH, r, IR_I(32));
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
	case F_TRACE_ID: {
		int k = ir_stack_alloc(ir, 8, 8);

		if (!cg_span_ok(g, x))
			break;
		ir_call(ir, IR_NOREG, VM_FUNC_fay_span, 3, IR_S(k), IR_I(8),
			IR_I(VM_SPAN_TRACE_ID));
		ir_load(ir, r, IR_S(k), 0, 8, 0);
		break;
	}
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

static ir_reg cg_tpfield(struct cg *g, const struct pexpr *x)
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

static ir_reg cg_int(struct cg *g, const struct pexpr *x);

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
static void cg_str(struct cg *g, const struct pexpr *x, int off, int size)
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
		if (x->field == F_SPAN_NAME) {
			if (cg_span_ok(g, x))
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

/* ---- conditions ------------------------------------------------------------ */

static int negate_jmp(int op)
{
	switch (op) {
	case BPF_JEQ: return BPF_JNE;
	case BPF_JNE: return BPF_JEQ;
	case BPF_JSLT: return BPF_JSGE;
	case BPF_JSGE: return BPF_JSLT;
	case BPF_JSLE: return BPF_JSGT;
	case BPF_JSGT: return BPF_JSLE;
	}
	return op;
}

static int cmp_jmp(enum px_op op)
{
	switch (op) {
	case PX_EQ: return BPF_JEQ;
	case PX_NE: return BPF_JNE;
	case PX_LT: return BPF_JSLT;
	case PX_LE: return BPF_JSLE;
	case PX_GT: return BPF_JSGT;
	case PX_GE: return BPF_JSGE;
	default: return -1;
	}
}

/* A constant (a literal, or - ~ ! of one: "-3" parses as a negation). */
static bool px_const(const struct pexpr *x, int64_t *v)
{
	int64_t a;

	switch (x->op) {
	case PX_CONST:
		*v = x->val;
		return true;
	case PX_NEG:
	case PX_BNOT:
	case PX_NOT:
		if (!px_const(x->a, &a))
			return false;
		*v = x->op == PX_NEG ? (int64_t)(0 - (uint64_t)a) :
		     x->op == PX_BNOT ? ~a : !a;
		return true;
	default:
		return false;
	}
}

/* A second operand: a constant stays an immediate. */
static struct ir_opnd cg_opnd(struct cg *g, const struct pexpr *x)
{
	int64_t v;

	if (px_const(x, &v))
		return IR_I(v);
	return IR_R(cg_int(g, x));
}

static void cg_cond(struct cg *g, const struct pexpr *x, int label, bool jump_if);

/* String (in)equality with a literal: compares the literal's bytes and
 * its NUL, 8 at a time. */
static void cg_streq(struct cg *g, const struct pexpr *x, int label, bool jump_if)
{
	struct ir *ir = g->ir;
	const struct pexpr *s = x->a, *lit = x->b;
	bool want_equal = jump_if == (x->op == PX_STREQ);
	int size = round8(s->size), slot, n = (int)lit->len + 1;
	ir_reg w;

	if (lit->op != PX_STR) {
		cg_qfail(g, x, "internal: a string is compared with a non-literal");
		return;
	}
	if (n > s->size) {		/* cannot be equal */
		if (!want_equal)
			ir_goto(ir, label);
		return;
	}
	if (s->op == PX_FIELD && s->field == F_HOST) {
		/* a constant: decided here, as the stored bytes would be */
		char h[QUERY_STR_MAX + 1] = { 0 };
		bool equal;

		memcpy(h, g->e->host, strnlen(g->e->host, QUERY_STR_MAX));
		equal = !memcmp(h, lit->str, lit->len) && !h[lit->len];
		if (equal == want_equal)
			ir_goto(ir, label);
		return;
	}
	slot = ir_stack_alloc(ir, (unsigned)size, 8);
	cg_str(g, s, slot, size);
	cg_pos(g, x);
	w = ir_vreg(ir);
	{
		int differ = want_equal ? ir_label_new(ir) : label;

		for (int i = 0; i < n; i += 8) {
			uint64_t c = 0, mask = ~0ull;
			int nb = n - i < 8 ? n - i : 8;

			for (int j = 0; j < nb; j++)
				c |= (uint64_t)(unsigned char)(i + j < (int)lit->len ?
							       lit->str[i + j] : 0) << (8 * j);
			ir_load(ir, w, IR_S(slot), i, 8, 0);
			if (nb < 8) {
				mask = (1ull << (8 * nb)) - 1;
				ir_alu(ir, BPF_AND, w, IR_I((int64_t)mask));
			}
			ir_jmp(ir, BPF_JNE, w, IR_I((int64_t)c), differ);
		}
		if (want_equal) {
			ir_goto(ir, label);
			ir_label(ir, differ);
		}
	}
}

/* Jump to label when the truth of x is jump_if; fall through otherwise. */
static void cg_cond(struct cg *g, const struct pexpr *x, int label, bool jump_if)
{
	struct ir *ir = g->ir;
	int skip, op;

	switch (x->op) {
	case PX_LAND:
	case PX_LOR: {
		bool is_and = x->op == PX_LAND;

		if (is_and != jump_if) {	/* AND jumping on false, OR on true */
			cg_cond(g, x->a, label, jump_if);
			cg_cond(g, x->b, label, jump_if);
			return;
		}
		skip = ir_label_new(ir);
		cg_cond(g, x->a, skip, !jump_if);
		cg_cond(g, x->b, label, jump_if);
		ir_label(ir, skip);
		return;
	}
	case PX_NOT:
		cg_cond(g, x->a, label, !jump_if);
		return;
	case PX_STREQ:
	case PX_STRNE:
		cg_streq(g, x, label, jump_if);
		return;
	case PX_CONST:
		if (!!x->val == jump_if)
			ir_goto(ir, label);
		return;
	default:
		break;
	}
	op = cmp_jmp(x->op);
	if (op >= 0) {
		ir_reg a = cg_int(g, x->a);
		struct ir_opnd b = cg_opnd(g, x->b);

		cg_pos(g, x);
		ir_jmp(ir, jump_if ? op : negate_jmp(op), a, b, label);
		return;
	}
	{
		ir_reg r = cg_int(g, x);

		ir_jmp(ir, jump_if ? BPF_JNE : BPF_JEQ, r, IR_I(0), label);
	}
}

/* ---- integers ---------------------------------------------------------------- */

/* a = a / b or a % b, signed with BPF's rules (x / 0 = 0, x % 0 = x),
 * on BPF's unsigned division: divide the magnitudes, then fix the sign. */
static void cg_sdiv(struct cg *g, ir_reg a, struct ir_opnd b, bool mod)
{
	struct ir *ir = g->ir;
	ir_reg sa = ir_vreg(ir), sb = ir_vreg(ir), ub;
	bool bpos = b.kind == IR_O_IMM && b.imm > 0;

	ir_mov(ir, sa, IR_R(a));
	ir_alu(ir, BPF_ARSH, sa, IR_I(63));
	ir_alu(ir, BPF_XOR, a, IR_R(sa));
	ir_alu(ir, BPF_SUB, a, IR_R(sa));	/* |a| */
	if (bpos) {
		ir_alu(ir, mod ? BPF_MOD : BPF_DIV, a, b);
		ir_mov(ir, sb, IR_R(sa));
	} else {
		ub = ir_vreg(ir);
		ir_mov(ir, ub, b);
		ir_mov(ir, sb, IR_R(ub));
		ir_alu(ir, BPF_ARSH, sb, IR_I(63));
		ir_alu(ir, BPF_XOR, ub, IR_R(sb));
		ir_alu(ir, BPF_SUB, ub, IR_R(sb));	/* |b| */
		ir_alu(ir, mod ? BPF_MOD : BPF_DIV, a, IR_R(ub));
		if (mod)
			ir_mov(ir, sb, IR_R(sa));	/* sign of the dividend */
		else
			ir_alu(ir, BPF_XOR, sb, IR_R(sa));	/* signs differ */
	}
	ir_alu(ir, BPF_XOR, a, IR_R(sb));
	ir_alu(ir, BPF_SUB, a, IR_R(sb));
}

static ir_reg cg_binop(struct cg *g, const struct pexpr *x)
{
	struct ir *ir = g->ir;
	ir_reg a = cg_int(g, x->a);
	struct ir_opnd b = cg_opnd(g, x->b);
	static const int alu[] = {
		[PX_ADD] = BPF_ADD, [PX_SUB] = BPF_SUB, [PX_MUL] = BPF_MUL,
		[PX_AND] = BPF_AND, [PX_OR] = BPF_OR, [PX_XOR] = BPF_XOR,
		[PX_SHL] = BPF_LSH, [PX_SHR] = BPF_RSH,
	};

	cg_pos(g, x);
	switch (x->op) {
	case PX_DIV:
	case PX_MOD:
		cg_sdiv(g, a, b, x->op == PX_MOD);
		return a;
	case PX_SHL:
	case PX_SHR:
		if (b.kind == IR_O_IMM)
			b.imm &= 63;
		else
			ir_alu(ir, BPF_AND, b.reg, IR_I(63));
		/* fall through */
	default:
		ir_alu(ir, alu[x->op], a, b);
		return a;
	}
}

static ir_reg cg_int(struct cg *g, const struct pexpr *x)
{
	struct ir *ir = g->ir;
	ir_reg r;

	int64_t v;

	cg_pos(g, x);
	if (px_const(x, &v))
		return cg_imm(g, v);
	switch (x->op) {
	case PX_FIELD:
		return cg_field(g, x);
	case PX_ARG:
		return cg_arg(g, x->idx, x);
	case PX_SAVED:
		r = ir_vreg(ir);
		ir_mov(ir, r, IR_R(g->saved[x->idx]));
		return r;
	case PX_TPFIELD:
		return cg_tpfield(g, x);
	case PX_LET:
		r = ir_vreg(ir);
		if (g->let_slot[x->idx])
			cg_qfail(g, x, "internal: a string let used as an integer");
		else
			ir_mov(ir, r, IR_R(g->let_reg[x->idx]));
		return r;
	case PX_NEG:
		r = cg_int(g, x->a);
		ir_alu(ir, BPF_NEG, r, IR_I(0));
		return r;
	case PX_BNOT:
		r = cg_int(g, x->a);
		ir_alu(ir, BPF_XOR, r, IR_I(-1));
		return r;
	case PX_ADD: case PX_SUB: case PX_MUL: case PX_DIV: case PX_MOD:
	case PX_AND: case PX_OR: case PX_XOR: case PX_SHL: case PX_SHR:
		return cg_binop(g, x);
	case PX_EQ: case PX_NE: case PX_LT: case PX_LE: case PX_GT: case PX_GE:
	case PX_LAND: case PX_LOR: case PX_NOT: case PX_STREQ: case PX_STRNE: {
		int f = ir_label_new(ir);

		r = ir_vreg(ir);
		ir_mov(ir, r, IR_I(0));
		cg_cond(g, x, f, false);
		ir_mov(ir, r, IR_I(1));
		ir_label(ir, f);
		return r;
	}
	default:
		r = ir_vreg(ir);
		cg_qfail(g, x, "this expression cannot be computed in a probe");
		return r;
	}
}

/* ---- aggregates ------------------------------------------------------------- */

/* *(u64 *)(base + off) += add (a register or constant). */
static void cg_add_word(struct cg *g, ir_reg base, int off, struct ir_opnd add)
{
	ir_reg t = ir_vreg(g->ir);

	ir_load(g->ir, t, IR_R(base), off, 8, 0);
	ir_alu(g->ir, BPF_ADD, t, add);
	ir_store(g->ir, IR_R(base), off, 8, IR_R(t));
}

/* base[off + 8 * b] += 1 with b a bucket number in [0, nb). */
static void cg_bucket_inc(struct cg *g, ir_reg val, int off, ir_reg b, int nb)
{
	struct ir *ir = g->ir;
	int ok = ir_label_new(ir);
	ir_reg ptr = ir_vreg(ir);

	/* The verifier wants b bounded: it is, but say so. */
	ir_jmp(ir, BPF_JLE, b, IR_I(nb - 1), ok);
	ir_mov(ir, b, IR_I(nb - 1));
	ir_label(ir, ok);
	ir_alu(ir, BPF_LSH, b, IR_I(3));
	ir_mov(ir, ptr, IR_R(val));
	ir_alu(ir, BPF_ADD, ptr, IR_R(b));
	cg_add_word(g, ptr, off, IR_I(1));
}

/* The 64-bit hash of a distinct() argument, as aggr_hash64() /
 * aggr_hash_bytes() compute it. */
static ir_reg cg_hash(struct cg *g, const struct pexpr *x)
{
	struct ir *ir = g->ir;
	ir_reg h;

	if (x->type == VT_STR) {
		int size = round8(x->size), slot = ir_stack_alloc(ir, (unsigned)size, 8);
		ir_reg w = ir_vreg(ir);

		cg_str(g, x, slot, size);
		h = cg_imm(g, 0);
		for (int i = 0; i < x->size; i += 8) {
			ir_load(ir, w, IR_S(slot), i, 8, 0);
			ir_alu(ir, BPF_XOR, h, IR_R(w));
			cg_fmix64(g, h);
		}
		return h;
	}
	h = cg_int(g, x);
	cg_fmix64(g, h);
	return h;
}

static void cg_update(struct cg *g, const struct plan_aggr *ag, ir_reg val)
{
	struct ir *ir = g->ir;
	const struct aggr_desc *d = &ag->desc;
	int off = ag->offset;
	ir_reg v = IR_NOREG, t, b;

	if (ag->arg && d->kind != AGGR_DISTINCT)
		v = cg_int(g, ag->arg);
	cg_pos(g, ag->arg);
	ir_comment(ir, "%s", ag->text);
	switch (d->kind) {
	case AGGR_COUNT:
		cg_add_word(g, val, off, IR_I(1));
		break;
	case AGGR_SUM:
		cg_add_word(g, val, off, IR_R(v));
		break;
	case AGGR_AVG:
		cg_add_word(g, val, off, IR_R(v));
		cg_add_word(g, val, off + 8, IR_I(1));
		break;
	case AGGR_MIN:
	case AGGR_MAX: {
		int set = ir_label_new(ir), skip = ir_label_new(ir);

		t = ir_vreg(ir);
		ir_load(ir, t, IR_R(val), off, 8, 0);
		ir_jmp(ir, BPF_JEQ, t, IR_I(0), set);
		ir_load(ir, t, IR_R(val), off + 8, 8, 0);
		ir_jmp(ir, d->kind == AGGR_MIN ? BPF_JSGE : BPF_JSLE, v, IR_R(t), skip);
		ir_label(ir, set);
		ir_store(ir, IR_R(val), off + 8, 8, IR_R(v));
		ir_label(ir, skip);
		cg_add_word(g, val, off, IR_I(1));
		break;
	}
	case AGGR_HIST: {
		int done = ir_label_new(ir);

		/* 0: v <= 0; else msb(v) + 1 */
		b = cg_imm(g, 0);
		ir_jmp(ir, BPF_JSLE, v, IR_I(0), done);
		cg_msb(g, b, v);
		ir_alu(ir, BPF_ADD, b, IR_I(1));
		ir_label(ir, done);
		cg_bucket_inc(g, val, off, b, AGGR_HIST_BUCKETS);
		break;
	}
	case AGGR_LHIST: {
		int done = ir_label_new(ir);

		b = cg_imm(g, 0);
		ir_jmp(ir, BPF_JSLT, v, IR_I(d->lo), done);
		ir_mov(ir, b, IR_I(d->nbuckets + 1));
		ir_jmp(ir, BPF_JSGE, v, IR_I(d->hi), done);
		ir_mov(ir, b, IR_R(v));
		ir_alu(ir, BPF_SUB, b, IR_I(d->lo));
		ir_alu(ir, BPF_DIV, b, IR_I(d->step));
		ir_alu(ir, BPF_ADD, b, IR_I(1));
		ir_label(ir, done);
		cg_bucket_inc(g, val, off, b, (int)d->nbuckets + 2);
		break;
	}
	case AGGR_QUANTILE: {
		int done = ir_label_new(ir), low = ir_label_new(ir);
		ir_reg e = ir_vreg(ir), x = ir_vreg(ir);

		/* v < 16: bucket v (0 for negatives) */
		b = cg_imm(g, 0);
		ir_jmp(ir, BPF_JSLT, v, IR_I(0), done);
		ir_jmp(ir, BPF_JSLT, v, IR_I(AGGR_Q_SUB), low);
		/* e = msb(v); b = 16 (e - 3) + ((v >> (e - 4)) & 15) */
		ir_mov(ir, x, IR_R(v));
		cg_msb(g, e, x);
		ir_mov(ir, x, IR_R(v));
		ir_mov(ir, b, IR_R(e));
		ir_alu(ir, BPF_SUB, b, IR_I(AGGR_Q_SUB_BITS));
		ir_alu(ir, BPF_RSH, x, IR_R(b));
		ir_alu(ir, BPF_AND, x, IR_I(AGGR_Q_SUB - 1));
		ir_mov(ir, b, IR_R(e));
		ir_alu(ir, BPF_SUB, b, IR_I(AGGR_Q_SUB_BITS - 1));
		ir_alu(ir, BPF_LSH, b, IR_I(AGGR_Q_SUB_BITS));
		ir_alu(ir, BPF_ADD, b, IR_R(x));
		ir_goto(ir, done);
		ir_label(ir, low);
		ir_mov(ir, b, IR_R(v));
		ir_label(ir, done);
		cg_bucket_inc(g, val, off, b, AGGR_Q_BUCKETS);
		break;
	}
	case AGGR_DISTINCT: {
		/* r[h >> 54] = max(r[h >> 54], clz(h << 10) + 1) */
		int have = ir_label_new(ir), skip = ir_label_new(ir);
		ir_reg h = cg_hash(g, ag->arg), rest = ir_vreg(ir), rank = ir_vreg(ir);
		ir_reg ptr = ir_vreg(ir), old = ir_vreg(ir), m = ir_vreg(ir);

		cg_pos(g, ag->arg);
		ir_mov(ir, rest, IR_R(h));
		ir_alu(ir, BPF_LSH, rest, IR_I(AGGR_HLL_P));
		ir_mov(ir, rank, IR_I(64 - AGGR_HLL_P + 1));
		ir_jmp(ir, BPF_JEQ, rest, IR_I(0), have);
		cg_msb(g, m, rest);
		ir_mov(ir, rank, IR_I(64));
		ir_alu(ir, BPF_SUB, rank, IR_R(m));
		ir_label(ir, have);
		ir_alu(ir, BPF_RSH, h, IR_I(64 - AGGR_HLL_P));
		ir_mov(ir, ptr, IR_R(val));
		ir_alu(ir, BPF_ADD, ptr, IR_R(h));
		ir_load(ir, old, IR_R(ptr), off, 1, 0);
		ir_jmp(ir, BPF_JGE, old, IR_R(rank), skip);
		ir_store(ir, IR_R(ptr), off, 1, IR_R(rank));
		ir_label(ir, skip);
		break;
	}
	default:
		cg_qfail(g, ag->arg, "internal: unknown aggregate");
	}
}

/* ---- bodies --------------------------------------------------------------- */

static void cg_pid_filter(struct cg *g)
{
	struct ir *ir = g->ir;
	ir_reg r = ir_vreg(ir);

	if (g->e->opts.pid <= 0)
		return;
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

/* The per-thread key: the thread id as u32 in an 8-byte slot. */
static int cg_tid_key(struct cg *g)
{
	struct ir *ir = g->ir;
	int k = ir_stack_alloc(ir, 8, 8);
	ir_reg t = ir_vreg(ir);

	ir_call(ir, t, BPF_FUNC_get_current_pid_tgid, 0);
	ir_store(ir, IR_S(k), 0, 4, IR_R(t));
	return k;
}

/* Inline (e->slot_pairs): the calling thread's record in its slot of
 * the pairs array (key 0), or g->out if none (never). */
static ir_reg cg_slot_rec(struct cg *g)
{
	struct ir *ir = g->ir;
	int k = ir_stack_alloc(ir, 8, 8);
	ir_reg rec = ir_vreg(ir);

	ir_store(ir, IR_S(k), 0, 8, IR_I(0));
	ir_call(ir, rec, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->pairs), IR_S(k));
	ir_jmp(ir, BPF_JEQ, rec, IR_I(0), g->out);
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
	if (p->entry_pred) {
		cg_pos(g, p->entry_pred);
		cg_cond(g, p->entry_pred, g->out, false);
		ir_set_pos(ir, 0, 0);
	}
	if (g->e->slot_pairs) {		/* inline: then the "set" word */
		r = cg_slot_rec(g);
		cg_save(g, IR_R(r));
		ir_store(ir, IR_R(r), p->saved_size, 8, IR_I(1));
		return;
	}
	rec = ir_stack_alloc(ir, (unsigned)p->saved_size, 8);
	cg_save(g, IR_S(rec));
	key = cg_tid_key(g);
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
		ir_comment(ir, "exit: the entry record of this thread, if set");
		rec = cg_slot_rec(g);
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
	key = cg_tid_key(g);
	rec = ir_vreg(ir);
	ir_comment(ir, "exit: the entry record of this thread");
	ir_call(ir, rec, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->pairs), IR_S(key));
	ir_jmp(ir, BPF_JEQ, rec, IR_I(0), g->out);
	for (int i = 0; i < p->nsaved; i++) {
		g->saved[i] = ir_vreg(ir);
		ir_load(ir, g->saved[i], IR_R(rec), 8 * i, 8, 0);
	}
	ir_call(ir, IR_NOREG, BPF_FUNC_map_delete_elem, 2, IR_M(g->e->pairs), IR_S(key));
}

/* The value of x into the stack record at slot + off: an integer as 8
 * bytes, a string as size zero-padded bytes. */
static void cg_put(struct cg *g, const struct pexpr *x, int slot, int off, int size)
{
	ir_reg r;

	if (x->type == VT_STR) {
		cg_str(g, x, slot + off, size);
		return;
	}
	r = cg_int(g, x);
	ir_store(g->ir, IR_S(slot), off, 8, IR_R(r));
}

static void cg_stream(struct cg *g)
{
	const struct plan *p = g->p;
	struct ir *ir = g->ir;
	int rec = ir_stack_alloc(ir, (unsigned)p->record_size, 8);
	ir_reg r;

	for (int i = 0; i < p->ncols; i++) {
		const struct plan_col *c = &p->cols[i];

		ir_comment(ir, "column %s", c->name);
		cg_put(g, c->e, rec, c->offset, round8(c->size));
	}
	ir_set_pos(ir, 0, 0);
	r = ir_vreg(ir);
	if (g->e->use_ringbuf) {
		ir_call(ir, r, BPF_FUNC_ringbuf_output, 4, IR_M(g->e->out), IR_S(rec),
			IR_I(p->record_size), IR_I(0));
	} else {
		ir_call(ir, r, BPF_FUNC_perf_event_output, 5, IR_R(ir_ctx(ir)),
			IR_M(g->e->out), IR_I(0xffffffffll) /* BPF_F_CURRENT_CPU */,
			IR_S(rec), IR_I(p->record_size));
	}
	cg_drop_if_failed(g, r, EC_LOST);
}

/* Windowed aggregates: the window epoch (engine_int.h) into the last 8
 * bytes of the key at key + off; a missing epoch map entry (never)
 * counts as a full map. */
static void cg_epoch(struct cg *g, int key, int off, int full)
{
	struct ir *ir = g->ir;
	ir_reg ep = ir_vreg(ir), v = ir_vreg(ir);
	int k0 = ir_stack_alloc(ir, 8, 8);

	ir_comment(ir, "the window's epoch");
	ir_store(ir, IR_S(k0), 0, 8, IR_I(0));
	ir_call(ir, ep, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->epoch), IR_S(k0));
	ir_jmp(ir, BPF_JEQ, ep, IR_I(0), full);
	ir_load(ir, v, IR_R(ep), 0, 8, 0);
	ir_store(ir, IR_S(key), off, 8, IR_R(v));
}

static void cg_aggregate(struct cg *g)
{
	const struct plan *p = g->p;
	struct ir *ir = g->ir;
	int key, kz, have = ir_label_new(ir), full = ir_label_new(ir);
	int done = ir_label_new(ir);
	int ksize = p->key_size + (g->e->epochs ? 8 : 0);
	ir_reg val = ir_vreg(ir), z = ir_vreg(ir);

	if (ksize) {
		key = ir_stack_alloc(ir, (unsigned)ksize, 8);
		for (int i = 0; i < p->nkeys; i++) {
			const struct plan_key *k = &p->keys[i];

			ir_comment(ir, "key %s", k->name);
			cg_put(g, k->e, key, k->offset, k->size);
		}
		if (g->e->epochs)
			cg_epoch(g, key, p->key_size, full);
	} else {
		key = ir_stack_alloc(ir, 8, 8);
		ir_store(ir, IR_S(key), 0, 8, IR_I(0));
	}
	ir_set_pos(ir, 0, 0);
	ir_comment(ir, "the per-CPU value of the key");
	ir_call(ir, val, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->vals), IR_S(key));
	ir_jmp(ir, BPF_JNE, val, IR_I(0), have);
	if (ksize) {
		kz = ir_stack_alloc(ir, 8, 8);
		ir_store(ir, IR_S(kz), 0, 8, IR_I(0));
		ir_call(ir, z, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->zero), IR_S(kz));
		ir_jmp(ir, BPF_JEQ, z, IR_I(0), full);
		ir_call(ir, IR_NOREG, BPF_FUNC_map_update_elem, 4, IR_M(g->e->vals),
			IR_S(key), IR_R(z), IR_I(BPF_NOEXIST));
		ir_call(ir, val, BPF_FUNC_map_lookup_elem, 2, IR_M(g->e->vals), IR_S(key));
		ir_jmp(ir, BPF_JNE, val, IR_I(0), have);
	}
	ir_label(ir, full);
	cg_count_drop(g, EC_MAP_FULL);
	ir_goto(ir, done);
	ir_label(ir, have);
	for (int i = 0; i < p->naggrs; i++)
		if (p->aggrs[i].share < 0)	/* a shared sketch is updated once */
			cg_update(g, &p->aggrs[i], val);
	ir_label(ir, done);
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
