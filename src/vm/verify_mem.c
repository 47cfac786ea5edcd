// SPDX-License-Identifier: MIT
/*
 * The verifier's memory rules: what a load, a store or a helper's memory
 * argument may touch through each kind of pointer, the stack's per-byte
 * state and spills, and the helper signatures.
 */
#include <errno.h>
#include <string.h>

#include "vm/verify_int.h"

const char *vv_rname(int r)
{
	static const char *const n[] = { "r0", "r1", "r2", "r3", "r4", "r5",
					  "r6", "r7", "r8", "r9", "r10" };
	return n[r];
}

/* Stack bytes [off, off+size) of the frame (off negative). */
static int stack_range(struct vctx *v, int r, int64_t off, int64_t size)
{
	if (off < -VM_STACK_SIZE || off + size > 0)
		return vv_fail(v, "%s%+lld: %lld bytes outside the %d-byte stack",
			    vv_rname(r), (long long)off, (long long)size, VM_STACK_SIZE);
	return 0;
}

static int stack_readable(struct vctx *v, struct state *s, int r, int64_t off,
			  int64_t size)
{
	int rc = stack_range(v, r, off, size);

	if (rc)
		return rc;
	for (int64_t k = off; k < off + size; k++) {
		int64_t b = k + VM_STACK_SIZE;

		if (s->st[b] == S_UNINIT)
			return vv_fail(v, "reads stack byte fp%lld that is not written on every path",
				    (long long)k);
		if (s->st[b] == S_SPILL && s->spill[b / 8].type != R_SCALAR)
			return vv_fail(v, "reads part of a spilled pointer at fp%lld as data",
				    (long long)k);
	}
	return 0;
}

/* Bytes become data (a spill they overlap loses its register). */
static void stack_write_misc(struct state *s, int64_t off, int64_t size)
{
	for (int64_t k = off; k < off + size; k++) {
		int64_t b = k + VM_STACK_SIZE, slot = b / 8;

		if (s->st[b] == S_SPILL) {
			uint8_t keep = s->spill[slot].type == R_SCALAR ? S_MISC : S_UNINIT;

			for (int j = 0; j < 8; j++)
				s->st[slot * 8 + j] = keep;
		}
	}
	memset(&s->st[off + VM_STACK_SIZE], S_MISC, (size_t)size);
}

/* A pointer register r (+ insn offset) accessed for size bytes. */
int vv_check_mem(struct vctx *v, struct state *s, int r, int16_t off,
		     int size, bool write, const struct reg *val, struct reg *out)
{
	const struct reg *p = &s->r[r];
	int64_t lo, hi;

	switch (p->type) {
	case R_NONE:
		return vv_fail(v, "%s is not written on every path (or holds different "
			    "kinds of values on two paths)", vv_rname(r));
	case R_SCALAR:
		return vv_fail(v, "%s is a number, not a pointer: loads and stores go "
			    "through the context, the stack or a map value (read other "
			    "memory with probe_read_user)", vv_rname(r));
	case R_MAP:
		return vv_fail(v, "%s is a map, not a pointer to memory", vv_rname(r));
	case R_MAPV_NULL:
		return vv_fail(v, "%s may be NULL: compare the result of map_lookup_elem "
			    "with 0 before using it", vv_rname(r));
	case R_CTX:
		lo = p->lo + off;
		if (write)
			return vv_fail(v, "writes the read-only context (%s%+d)", vv_rname(r), off);
		if (lo < 0 || lo + size > (int64_t)v->p->ctx_size || lo % size)
			return vv_fail(v, "reads %d bytes at context offset %lld: the context "
				    "is %zu bytes, accesses must be aligned", size,
				    (long long)lo, v->p->ctx_size);
		if (out)
			vv_sc_range(out, 0, size == 8 ? UINT64_MAX : (1ull << (size * 8)) - 1);
		return 0;
	case R_STACK: {
		int rc;

		lo = p->lo + off;
		if (!write) {
			rc = stack_readable(v, s, r, lo, size);
			if (rc)
				return rc;
			if (size == 8 && lo % 8 == 0 &&
			    s->st[lo + VM_STACK_SIZE] == S_SPILL)
				*out = s->spill[(lo + VM_STACK_SIZE) / 8];
			else
				vv_sc_range(out, 0, size == 8 ? UINT64_MAX
							   : (1ull << (size * 8)) - 1);
			return 0;
		}
		rc = stack_range(v, r, lo, size);
		if (rc)
			return rc;
		if (val->type != R_SCALAR && (size != 8 || lo % 8))
			return vv_fail(v, "stores part of %s (%s) on the stack", vv_rt_name[val->type],
				    "a pointer is spilled only whole, to an aligned slot");
		if (size == 8 && lo % 8 == 0) {
			int64_t b = lo + VM_STACK_SIZE;

			memset(&s->st[b], S_SPILL, 8);
			s->spill[b / 8] = *val;
		} else {
			stack_write_misc(s, lo, size);
		}
		return 0;
	}
	case R_MAPV: {
		uint32_t vs = vm_map_def(v->p->maps[p->map])->value_size;

		lo = p->lo + off;
		hi = p->hi + off;
		if (lo < 0 || hi + size > (int64_t)vs)
			return vv_fail(v, "%s is a map value pointer with offset %lld..%lld, "
				    "%d bytes from there leave the %u-byte value", vv_rname(r),
				    (long long)lo, (long long)hi, size, vs);
		if (write && val->type != R_SCALAR)
			return vv_fail(v, "stores %s into a map value (a pointer leak)",
				    vv_rt_name[val->type]);
		if (out)
			vv_sc_range(out, 0, size == 8 ? UINT64_MAX : (1ull << (size * 8)) - 1);
		return 0;
	}
	}
	return vv_fail(v, "bad register state");
}

/* A helper's memory argument: size bytes at register r. */
static int check_arg_mem(struct vctx *v, struct state *s, int r, uint64_t size,
			 bool write, const char *what)
{
	const struct reg *p = &s->r[r];

	if (size > (1u << 20))
		return vv_fail(v, "%s of %llu bytes is too large", what,
			    (unsigned long long)size);
	if (p->type == R_STACK) {
		int rc = write ? stack_range(v, r, p->lo, (int64_t)size)
			       : stack_readable(v, s, r, p->lo, (int64_t)size);

		if (!rc && write)
			stack_write_misc(s, p->lo, (int64_t)size);
		return rc;
	}
	if (p->type == R_MAPV) {
		uint32_t vs = vm_map_def(v->p->maps[p->map])->value_size;

		if (p->lo < 0 || p->hi + (int64_t)size > (int64_t)vs)
			return vv_fail(v, "%s: %s points at offset %lld..%lld of a %u-byte map "
				    "value, %llu bytes do not fit", what, vv_rname(r),
				    (long long)p->lo, (long long)p->hi, vs,
				    (unsigned long long)size);
		return 0;
	}
	return vv_fail(v, "%s: %s is %s, not a pointer to the stack or a map value",
		    what, vv_rname(r), vv_rt_name[p->type]);
}

int vv_do_call(struct vctx *v, struct state *s, const struct bpf_insn *in)
{
	const struct vm_helper *h = vm_helper(in->imm);
	const struct vm_map_def *md = NULL;
	int mapidx = -1, rc;

	if (in->src_reg != 0)
		return vv_fail(v, "calls of BPF functions and kernel functions are not supported");
	if (!h)
		return vv_fail(v, "helper %d is not supported in-process", in->imm);
	for (int a = 0; a < 5 && h->args[a] != VA_NONE; a++) {
		int r = a + 1;
		const struct reg *x = &s->r[r];

		if (x->type == R_NONE)
			return vv_fail(v, "%s: argument %s is not initialised", h->name, vv_rname(r));
		switch (h->args[a]) {
		case VA_ANY:
			if (x->type != R_SCALAR)
				return vv_fail(v, "%s: %s is %s where a number is wanted (a pointer leak)",
					    h->name, vv_rname(r), vv_rt_name[x->type]);
			break;
		case VA_MAP:
			if (x->type != R_MAP)
				return vv_fail(v, "%s: %s is %s, not a map", h->name, vv_rname(r),
					    vv_rt_name[x->type]);
			mapidx = x->map;
			md = vm_map_def(v->p->maps[mapidx]);
			/* one map per call site: a join of two maps is no map */
			v->p->cmap[v->pc] = (uint8_t)(mapidx + 1);
			if (h->map_type > 0 ? md->type != (uint32_t)h->map_type :
			    (h->map_type == -1) != (md->type == BPF_MAP_TYPE_RINGBUF) ||
			    md->type == BPF_MAP_TYPE_STACK_TRACE)
				return vv_fail(v, "%s: map %d has the wrong type (%u)", h->name,
					    mapidx, md->type);
			break;
		case VA_CTX:
			if (x->type != R_CTX || x->lo != 0)
				return vv_fail(v, "%s: %s is %s, not the context (r1 at entry)",
					    h->name, vv_rname(r), vv_rt_name[x->type]);
			break;
		case VA_KEY:
			rc = check_arg_mem(v, s, r, md->key_size, false, h->name);
			if (rc)
				return rc;
			break;
		case VA_VALUE:
			rc = check_arg_mem(v, s, r, md->value_size, false, h->name);
			if (rc)
				return rc;
			break;
		case VA_MEM: case VA_UNINIT_MEM: {
			const struct reg *sz = &s->r[r + 1];

			if (sz->type != R_SCALAR)
				return vv_fail(v, "%s: the size %s is %s, not a number", h->name,
					    vv_rname(r + 1), vv_rt_name[sz->type]);
			if (sz->umax == 0 || sz->umax > (1u << 20))
				return vv_fail(v, "%s: the size in %s is not bounded to 1..%u",
					    h->name, vv_rname(r + 1), 1u << 20);
			rc = check_arg_mem(v, s, r, sz->umax, h->args[a] == VA_UNINIT_MEM,
					   h->name);
			if (rc)
				return rc;
			break;
		}
		case VA_SIZE: case VA_NONE:
			break;
		}
	}
	for (int r = 1; r <= 5; r++)
		s->r[r].type = R_NONE;
	if (h->ret == VR_MAP_VALUE_OR_NULL)
		s->r[0] = (struct reg){ .type = R_MAPV_NULL, .map = (uint8_t)mapidx,
					.id = ++v->next_id };
	else
		vv_sc_unknown(&s->r[0]);
	return 0;
}
