// SPDX-License-Identifier: MIT
/*
 * The verifier's numbers: unsigned and signed ranges through BPF's ALU
 * operations and conditional jumps, and the join of two states where
 * paths meet.  Everything here is conservative: an operation whose result
 * range cannot be bounded cheaply gives "any number", which costs a
 * rejection later, never a wrong acceptance.
 */
#include <limits.h>
#include <string.h>

#include "vm/verify_int.h"

void vv_sc_unknown(struct reg *r)
{
	*r = (struct reg){ .type = R_SCALAR, .umin = 0, .umax = UINT64_MAX,
			   .smin = INT64_MIN, .smax = INT64_MAX };
}

void vv_sc_range(struct reg *r, uint64_t lo, uint64_t hi)
{
	vv_sc_unknown(r);
	r->umin = lo;
	r->umax = hi;
}

void vv_sc_const(struct reg *r, uint64_t c)
{
	vv_sc_range(r, c, c);
	r->smin = r->smax = (int64_t)c;
}

bool vv_sc_is_const(const struct reg *r)
{
	return r->type == R_SCALAR && r->umin == r->umax;
}

static uint64_t umin64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t umax64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static int64_t smin64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t smax64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Make the unsigned and signed ranges agree; false if they are empty. */
static bool sc_sync(struct reg *r)
{
	for (int k = 0; k < 2; k++) {
		if (r->umax <= INT64_MAX || r->umin > (uint64_t)INT64_MAX) {
			/* u range does not cross the sign boundary */
			r->smin = smax64(r->smin, (int64_t)r->umin);
			r->smax = smin64(r->smax, (int64_t)r->umax);
		}
		if (r->smin >= 0 || r->smax < 0) {
			r->umin = umax64(r->umin, (uint64_t)r->smin);
			r->umax = umin64(r->umax, (uint64_t)r->smax);
		}
		if (r->umin > r->umax || r->smin > r->smax)
			return false;
	}
	return true;
}

/* All ones up to the highest bit of x. */
static uint64_t fill_bits(uint64_t x)
{
	x |= x >> 1; x |= x >> 2; x |= x >> 4;
	x |= x >> 8; x |= x >> 16; x |= x >> 32;
	return x;
}

/* d op= s on numbers, 64-bit. */
void vv_sc_alu64(int op, struct reg *d, const struct reg *s)
{
	uint64_t a = d->umin, b = d->umax, c = s->umin, e = s->umax;

	switch (op) {
	case BPF_MOV:
		*d = *s;
		return;
	case BPF_ADD:
		if (b + e >= b)
			return vv_sc_range(d, a + c, b + e), (void)sc_sync(d);
		break;
	case BPF_SUB:
		if (a >= e)
			return vv_sc_range(d, a - e, b - c), (void)sc_sync(d);
		break;
	case BPF_MUL:
		if (!e || b <= UINT64_MAX / e)
			return vv_sc_range(d, a * c, b * e), (void)sc_sync(d);
		break;
	case BPF_DIV:
		if (c > 0)
			return vv_sc_range(d, a / e, b / c), (void)sc_sync(d);
		return vv_sc_range(d, 0, b), (void)sc_sync(d);
	case BPF_MOD:
		if (c > 0)
			return vv_sc_range(d, 0, umin64(b, e - 1)), (void)sc_sync(d);
		return vv_sc_range(d, 0, b), (void)sc_sync(d);
	case BPF_AND:
		return vv_sc_range(d, 0, umin64(b, e)), (void)sc_sync(d);
	case BPF_OR:
		return vv_sc_range(d, umax64(a, c), fill_bits(b | e)), (void)sc_sync(d);
	case BPF_XOR:
		return vv_sc_range(d, 0, fill_bits(b | e)), (void)sc_sync(d);
	case BPF_LSH:
		if (c == e && c < 64 && b <= UINT64_MAX >> c)
			return vv_sc_range(d, a << c, b << c), (void)sc_sync(d);
		break;
	case BPF_RSH:
		if (c == e)
			return vv_sc_range(d, a >> (c & 63), b >> (c & 63)), (void)sc_sync(d);
		return vv_sc_range(d, 0, b), (void)sc_sync(d);
	case BPF_ARSH:
		if (c == e) {
			int64_t lo = d->smin >> (c & 63), hi = d->smax >> (c & 63);

			vv_sc_unknown(d);
			d->smin = lo;
			d->smax = hi;
			sc_sync(d);
			return;
		}
		break;
	}
	vv_sc_unknown(d);
}

/* d op= s on numbers, 32-bit (the result is zero-extended). */
void vv_sc_alu32(int op, struct reg *d, const struct reg *s)
{
	struct reg a = *d, b = *s;

	if (a.umax > UINT32_MAX)
		vv_sc_range(&a, 0, UINT32_MAX);
	if (b.umax > UINT32_MAX)
		vv_sc_range(&b, 0, UINT32_MAX);
	if (op == BPF_ARSH || op == BPF_NEG ||
	    ((op == BPF_LSH || op == BPF_RSH) && b.umax > 31)) {
		vv_sc_range(d, 0, UINT32_MAX);
		return;
	}
	vv_sc_alu64(op, &a, &b);
	if (a.umax > UINT32_MAX)
		vv_sc_range(&a, 0, UINT32_MAX);
	*d = a;
	sc_sync(d);
}

/* Narrow a number r by "r op c" being taken (or not): false if impossible. */
bool vv_narrow(struct reg *r, int op, uint64_t c, bool taken)
{
	int64_t sc = (int64_t)c;

	if (!taken) {
		switch (op) {
		case BPF_JEQ: op = BPF_JNE; break;
		case BPF_JNE: op = BPF_JEQ; break;
		case BPF_JGT: op = BPF_JLE; break;
		case BPF_JGE: op = BPF_JLT; break;
		case BPF_JLT: op = BPF_JGE; break;
		case BPF_JLE: op = BPF_JGT; break;
		case BPF_JSGT: op = BPF_JSLE; break;
		case BPF_JSGE: op = BPF_JSLT; break;
		case BPF_JSLT: op = BPF_JSGE; break;
		case BPF_JSLE: op = BPF_JSGT; break;
		case BPF_JSET:
			if (c == UINT64_MAX)	/* r & ~0 == 0: r is 0 */
				return r->umin <= 0 ? (vv_sc_const(r, 0), true) : false;
			return true;
		}
	} else if (op == BPF_JSET) {
		return !(r->umin == r->umax && !(r->umin & c));
	}
	switch (op) {
	case BPF_JEQ:
		if (c < r->umin || c > r->umax || sc < r->smin || sc > r->smax)
			return false;
		vv_sc_const(r, c);
		return true;
	case BPF_JNE:
		if (r->umin == c)
			r->umin++;
		if (r->umax == c)
			r->umax--;
		if (r->umin > r->umax || (r->umin == c && r->umax == c))
			return false;
		break;
	case BPF_JGT:
		if (c == UINT64_MAX) return false;
		r->umin = umax64(r->umin, c + 1); break;
	case BPF_JGE: r->umin = umax64(r->umin, c); break;
	case BPF_JLT:
		if (c == 0) return false;
		r->umax = umin64(r->umax, c - 1); break;
	case BPF_JLE: r->umax = umin64(r->umax, c); break;
	case BPF_JSGT:
		if (sc == INT64_MAX) return false;
		r->smin = smax64(r->smin, sc + 1); break;
	case BPF_JSGE: r->smin = smax64(r->smin, sc); break;
	case BPF_JSLT:
		if (sc == INT64_MIN) return false;
		r->smax = smin64(r->smax, sc - 1); break;
	case BPF_JSLE: r->smax = smin64(r->smax, sc); break;
	}
	if (r->umin > r->umax || r->smin > r->smax)
		return false;
	return sc_sync(r);
}

/* The lookup result id is NULL (null true) or a value everywhere. */
/* ---- joins -------------------------------------------------------------- */

void vv_reg_join(struct reg *a, const struct reg *b)
{
	if (a->type != b->type || a->type == R_NONE) {
		a->type = R_NONE;
		return;
	}
	switch (a->type) {
	case R_SCALAR:
		a->umin = umin64(a->umin, b->umin);
		a->umax = umax64(a->umax, b->umax);
		a->smin = smin64(a->smin, b->smin);
		a->smax = smax64(a->smax, b->smax);
		return;
	case R_CTX: case R_STACK:
		if (a->lo != b->lo)
			a->type = R_NONE;
		return;
	case R_MAP:
		if (a->map != b->map)
			a->type = R_NONE;
		return;
	case R_MAPV_NULL:
		if (a->id != b->id || a->lo != b->lo || a->hi != b->hi)
			a->type = R_NONE;
		return;
	case R_MAPV:
		if (a->map != b->map) {
			a->type = R_NONE;
			return;
		}
		a->lo = smin64(a->lo, b->lo);
		a->hi = smax64(a->hi, b->hi);
		return;
	}
}

void vv_state_join(struct state *a, const struct state *b)
{
	for (int i = 0; i < 11; i++)
		vv_reg_join(&a->r[i], &b->r[i]);
	for (int s = 0; s < VM_STACK_SIZE / 8; s++) {
		uint8_t *x = &a->st[s * 8];
		const uint8_t *y = &b->st[s * 8];
		bool sa = x[0] == S_SPILL, sb = y[0] == S_SPILL;

		if (sa && sb) {
			vv_reg_join(&a->spill[s], &b->spill[s]);
			if (a->spill[s].type == R_NONE)
				memset(x, S_UNINIT, 8);
			continue;
		}
		if (sa || sb) {
			/* a spill on one side, bytes on the other: data if the
			 * spill was a number, unreadable if it was a pointer */
			const struct reg *sp = sa ? &a->spill[s] : &b->spill[s];
			const uint8_t *other = sa ? y : x;
			uint8_t nb[8];

			for (int k = 0; k < 8; k++)
				nb[k] = sp->type == R_SCALAR && other[k] == S_MISC
					? S_MISC : S_UNINIT;
			memcpy(x, nb, 8);
			continue;
		}
		for (int k = 0; k < 8; k++)
			if (y[k] == S_UNINIT)
				x[k] = S_UNINIT;
	}
}

/* Propagate st to instruction t (a copy; joined with what is there). */
