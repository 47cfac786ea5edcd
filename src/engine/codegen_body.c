// SPDX-License-Identifier: MIT
/*
 * Code generation of a query's body: STREAM builds a record on the
 * stack and copies it to the ring buffer / perf buffer; AGGREGATE
 * builds the key (windowed: with the epoch), finds or creates the
 * per-CPU value and updates each aggregate in it.
 */
#include "engine/codegen.h"

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

void cg_stream(struct cg *g)
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

void cg_aggregate(struct cg *g)
{
	const struct plan *p = g->p;
	struct ir *ir = g->ir;
	int key, kz, have = ir_label_new(ir), full = ir_label_new(ir);
	int done = ir_label_new(ir);
	int ksize = p->bpf_key_size + (g->e->epochs ? 8 : 0);
	ir_reg val = ir_vreg(ir), z = ir_vreg(ir);

	if (ksize) {
		key = ir_stack_alloc(ir, (unsigned)ksize, 8);
		for (int i = 0; i < p->nkeys; i++) {
			const struct plan_key *k = &p->keys[i];

			ir_comment(ir, "key %s", k->name);
			if (k->stack)
				cg_stack(g, k, key);
			else
				cg_put(g, k->e, key, k->bpf_offset, k->size);
		}
		if (g->e->epochs)
			cg_epoch(g, key, p->bpf_key_size, full);
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
