// SPDX-License-Identifier: MIT
/*
 * Trampolines (patch_int.h: patch_build()): the code that calls the
 * handlers around the relocated first instructions, and its unwind
 * information.
 *
 * Trampoline, entry and exit probes (S = rsp at the function's entry):
 *
 *   entry:  sub rsp, 296; save the registers as struct patch_regs at
 *           [rsp] and xmm0-7 above (unless PATCH_HANDLERS_KEEP_VECTORS);
 *           on_entry(regs, arg); restore; add
 *   [exit]  sub rsp, 72; copy S+8..S+72 (stack arguments) to rsp..;
 *           call body                      <- return address with CFI
 *           sub rsp, 304; save; on_exit(regs, arg); restore; add;
 *           add rsp, 72; ret               (to the original caller)
 *   body:   the relocated first instructions (reloc.c); jmp func + patched
 *           bytes
 *
 * Without an exit probe the entry part falls through into body.  rsp is
 * 16-byte aligned at each handler call.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/bytes.h"
#include "patch/patch_int.h"

#define ENTRY_FRAME	296	/* struct patch_regs + xmm0-7; rsp % 16 == 0 */
#define EXIT_FRAME	304
#define ARGS_COPY	PATCH_RETURN_SLOT	/* 8 stack argument slots + 8 to align */
#define TRAMP_MAP	4096	/* one trampoline's mapping */

void __register_frame(void *begin);

static void b(struct wbuf *w, int n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		wbuf_u8(w, (uint8_t)va_arg(ap, int));
	va_end(ap);
}

/* mov [rsp + d], reg64 (store) or mov reg64, [rsp + d] (load) */
static void mov_rsp(struct wbuf *w, int reg, int32_t d, bool store)
{
	b(w, 4, 0x48 | (reg & 8 ? 4 : 0), store ? 0x89 : 0x8b, 0x84 | (reg & 7) << 3, 0x24);
	wbuf_le32(w, (uint32_t)d);
}

/* movdqu [rsp + d], xmmN / movdqu xmmN, [rsp + d] */
static void movdqu_rsp(struct wbuf *w, int x, int32_t d, bool store)
{
	b(w, 5, 0xf3, 0x0f, store ? 0x7f : 0x6f, 0x84 | (x & 7) << 3, 0x24);
	wbuf_le32(w, (uint32_t)d);
}

static void rsp_add(struct wbuf *w, int32_t v)	/* add rsp, imm32 */
{
	b(w, 3, 0x48, 0x81, 0xc4);
	wbuf_le32(w, (uint32_t)v);
}

static void movabs(struct wbuf *w, int reg, uint64_t v)
{
	b(w, 2, 0x48 | (reg & 8 ? 1 : 0), 0xb8 + (reg & 7));
	wbuf_le64(w, v);
}

/* x86 register number and its struct patch_regs offset. */
static const struct { uint8_t reg, off; } saved[] = {
	{ 15, 0 }, { 14, 8 }, { 13, 16 }, { 12, 24 }, { 5, 32 }, { 3, 40 },
	{ 11, 48 }, { 10, 56 }, { 9, 64 }, { 8, 72 }, { 0, 80 }, { 1, 88 },
	{ 2, 96 }, { 6, 104 }, { 7, 112 },
};

/*
 * Save the registers in a frame of `frame` bytes, call fn(regs, arg),
 * restore.  ip is the function (entry) or the return address at
 * [rsp + ip_at] (exit); sp is rsp + sp_at.
 */
static void call_handler(struct wbuf *w, int frame, patch_fn fn, void *arg,
			 uint64_t ip, int ip_at, int sp_at, bool vec)
{
	rsp_add(w, -frame);
	for (size_t i = 0; i < sizeof(saved) / sizeof(saved[0]); i++)
		mov_rsp(w, saved[i].reg, saved[i].off, true);
	for (int x = 0; vec && x < 8; x++)
		movdqu_rsp(w, x, 168 + 16 * x, true);
	mov_rsp(w, 0, 120, true);			/* orig_ax = ax */
	if (ip_at >= 0)
		mov_rsp(w, 11, frame + ip_at, false);
	else
		movabs(w, 11, ip);
	mov_rsp(w, 11, 128, true);			/* ip */
	b(w, 4, 0x4c, 0x8d, 0x9c, 0x24);		/* lea r11, [rsp + d] */
	wbuf_le32(w, (uint32_t)(frame + sp_at));
	mov_rsp(w, 11, 152, true);			/* sp */
	for (int off = 136; off <= 160; off += 8)	/* cs flags ss: 0 */
		if (off != 152) {
			b(w, 4, 0x48, 0xc7, 0x84, 0x24);
			wbuf_le32(w, (uint32_t)off);
			wbuf_le32(w, 0);
		}
	b(w, 3, 0x48, 0x89, 0xe7);			/* mov rdi, rsp */
	movabs(w, 6, (uint64_t)(uintptr_t)arg);		/* rsi */
	movabs(w, 0, (uint64_t)(uintptr_t)fn);		/* rax */
	b(w, 2, 0xff, 0xd0);				/* call rax */
	for (int x = 0; vec && x < 8; x++)
		movdqu_rsp(w, x, 168 + 16 * x, false);
	/* the handler kept rbx, rbp, r12-r15 (the System V ABI) */
	for (size_t i = 0; i < sizeof(saved) / sizeof(saved[0]); i++)
		if (saved[i].reg != 3 && saved[i].reg != 5 && saved[i].reg < 12)
			mov_rsp(w, saved[i].reg, saved[i].off, false);
	rsp_add(w, frame);
}

/* Trampoline pages go within REACH of their function (its jump back and
 * the relocated RIP-relative operands are rel32: 1 GiB leaves room for
 * targets in the function's object). */
#define REACH		(1ull << 30)
#define NHINTS		16

/* The last trampoline pages mapped (0: none), round robin: a new one is
 * mapped right after one of them when that is in reach and free, so the
 * trampolines of different functions fill consecutive pages (one VMA)
 * instead of one page per 1 MiB step of the search below, which tries
 * 2046 addresses (about 2000 trampolines a process, measured, before
 * these hints).  The patch lock serialises patch_build(). */
static uintptr_t hints[NHINTS];
static int next_hint;

static bool in_reach(uintptr_t a, size_t size, uintptr_t near)
{
	uintptr_t lo = a < near ? a : near, hi = a + size > near ? a + size : near;

	return a && hi - lo < REACH;
}

/* size bytes mapped at exactly a (MAP_FIXED_NOREPLACE), or NULL. */
static void *map_at(uintptr_t a, size_t size)
{
	void *p = mmap((void *)a, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if ((uintptr_t)p != a) {	/* a kernel without NOREPLACE: a hint */
		munmap(p, size);
		return NULL;
	}
	return p;
}

/* A mapping within REACH of near (RIP-relative operands must reach): next
 * to an earlier trampoline page, else the first free 1 MiB step out. */
static void *map_near(uint8_t *near, size_t size)
{
	uintptr_t n = (uintptr_t)near, base = n & ~(uintptr_t)0xfffff;
	void *p;

	for (int i = 0; i < NHINTS; i++) {
		uintptr_t a = hints[i] + size;

		if (!hints[i] || !in_reach(a, size, n))
			continue;
		if ((p = map_at(a, size))) {
			hints[i] = a;
			return p;
		}
		hints[i] = 0;	/* the next page is taken: this run is over */
	}
	for (uintptr_t d = 1u << 20; d < REACH; d += 1u << 20)
		for (int sgn = -1; sgn <= 1; sgn += 2) {
			uintptr_t a = sgn < 0 ? base - d : base + d;

			if (in_reach(a, size, n) && (p = map_at(a, size))) {
				hints[next_hint] = a;
				next_hint = (next_hint + 1) % NHINTS;
				return p;
			}
		}
	return NULL;
}

/* An .eh_frame (CIE + FDE + end) saying: at [pc, pc+len) the CFA is
 * rsp + cfa and the return address is at CFA - 8. */
static uint8_t *eh_frame(uint64_t pc, uint64_t len, int cfa)
{
	struct wbuf w = { 0 };
	size_t fde;

	/* CIE */
	wbuf_le32(&w, 0);			/* length, below */
	wbuf_le32(&w, 0);			/* CIE id */
	b(&w, 4, 1, 'z', 'R', 0);		/* version, augmentation */
	b(&w, 3, 1, 0x78, 16);			/* code 1, data -8, RA = r16 */
	b(&w, 2, 1, 0x00);			/* aug data: FDE ptrs absptr */
	b(&w, 3, 0x0c, 7, cfa);			/* def_cfa rsp, cfa */
	b(&w, 2, 0x90, 1);			/* offset r16, cfa-8 */
	while (w.len % 8 != 4 && !w.err)
		wbuf_u8(&w, 0);			/* DW_CFA_nop */
	if (!w.err)
		memcpy(w.p, &(uint32_t){ (uint32_t)w.len - 4 }, 4);
	/* FDE */
	fde = w.len;
	wbuf_le32(&w, 0);
	wbuf_le32(&w, (uint32_t)(w.len));	/* back to the CIE */
	wbuf_le64(&w, pc);
	wbuf_le64(&w, len);
	wbuf_u8(&w, 0);				/* aug data length */
	while ((w.len - fde) % 8 && !w.err)
		wbuf_u8(&w, 0);
	if (!w.err)
		memcpy(w.p + fde, &(uint32_t){ (uint32_t)(w.len - fde - 4) }, 4);
	wbuf_le32(&w, 0);			/* end */
	if (w.err) {
		wbuf_free(&w);
		return NULL;
	}
	return w.p;
}

/*
 * Every trampoline this process built (never unmapped: see
 * patch_build()).  busy: a site holds it (from its build to its free,
 * or for good when its jump could not be taken out).
 */
static struct tramp_slot {
	uint8_t *func, *t;
	size_t len, body_at;
	uint8_t *eh;
	bool busy;
} *tslots;
static int ntslots, tslots_cap;

/* Emit s's trampoline for these handlers into w as if it started at
 * base; *call_at: the offset of "call body" (exit only), *body_at: of
 * the relocated code.  0, or -errno with a reason in err. */
static int emit(struct patch_site *s, patch_fn on_entry, patch_fn on_exit, void *arg,
		bool vec, uint64_t base, struct wbuf *w, size_t *call_at, size_t *body_at,
		char *err, size_t errlen)
{
	uint64_t f = (uint64_t)(uintptr_t)s->func;
	size_t fix = 0;
	int rc;

	call_handler(w, ENTRY_FRAME, on_entry, arg, f, -1, 0, vec);
	if (on_exit) {
		rsp_add(w, -ARGS_COPY);
		for (int i = 0; i < 8; i++) {
			mov_rsp(w, 11, ARGS_COPY + 8 + 8 * i, false);
			mov_rsp(w, 11, 8 * i, true);
		}
		*call_at = w->len;
		b(w, 1, 0xe8);				/* call body */
		fix = w->len;
		wbuf_le32(w, 0);
		call_handler(w, EXIT_FRAME, on_exit, arg, 0, ARGS_COPY, ARGS_COPY + 8, vec);
		rsp_add(w, ARGS_COPY);
		b(w, 1, 0xc3);
	}
	*body_at = w->len;
	rc = patch_relocate(s, w, base + *body_at, err, errlen);
	if (rc)
		return rc;
	if (w->err || w->len > TRAMP_MAP)
		return patch_errf(err, errlen, -ENOMEM, "the trampoline does not fit in %d bytes",
				  TRAMP_MAP);
	if (on_exit) {
		int32_t rel = (int32_t)(*body_at - (fix + 4));

		memcpy(w->p + fix, &rel, 4);
	}
	return 0;
}

/* A free trampoline of s's function whose bytes are exactly those s
 * needs for these handlers (emitted at its address): its slot, or -1. */
static int reusable(struct patch_site *s, patch_fn on_entry, patch_fn on_exit, void *arg,
		    bool vec)
{
	for (int i = 0; i < ntslots; i++) {
		struct tramp_slot *ts = &tslots[i];
		struct wbuf w = { 0 };
		size_t call_at = 0, body_at = 0;
		bool same;

		if (ts->busy || ts->func != s->func)
			continue;
		same = !emit(s, on_entry, on_exit, arg, vec, (uint64_t)(uintptr_t)ts->t, &w,
			     &call_at, &body_at, NULL, 0) &&
		       w.len == ts->len && body_at == ts->body_at && !memcmp(w.p, ts->t, w.len);
		wbuf_free(&w);
		if (same)
			return i;
	}
	return -1;
}

/*
 * Trampolines are reused, never rewritten nor unmapped.  A thread may be
 * inside one long after its site was disarmed: stopped in it, returning
 * into it (the call-through's return address stays on the stack for as
 * long as the function runs, which may be for good: a server's accept
 * loop), or sent to it by a SIGTRAP delivered late.  None of that can be
 * seen from outside (a thread seen with its pc outside may still return
 * into it), so a trampoline is never given other bytes.  Instead, arming
 * a function again takes a free trampoline of the same function whose
 * bytes are exactly the ones it needs (same handlers, arg and flags:
 * emitted at that address and compared): a thread still in there runs
 * the code it would have run anyway.  Its unwind information stays
 * registered.  So arming and disarming a function for ever takes one
 * trampoline per set of handlers, not one per arm.
 */
int patch_build(struct patch_site *s, patch_fn on_entry, patch_fn on_exit, void *arg,
		unsigned int flags, char *err, size_t errlen)
{
	bool vec = !(flags & PATCH_HANDLERS_KEEP_VECTORS);
	struct wbuf w = { 0 };
	struct tramp_slot *ts;
	uint8_t *t;
	size_t call_at = 0, body_at = 0;
	int rc, i = reusable(s, on_entry, on_exit, arg, vec);

	if (i >= 0) {
		ts = &tslots[i];
		/* emit() set s->newoff for this address: redo it for s */
		rc = emit(s, on_entry, on_exit, arg, vec, (uint64_t)(uintptr_t)ts->t, &w,
			  &call_at, &body_at, err, errlen);
		wbuf_free(&w);
		if (rc)
			return rc;
		ts->busy = true;
		s->ret_at = on_exit ? call_at + 5 : 0;
		s->tramp = ts->t;
		s->tramp_map = TRAMP_MAP;
		s->body = ts->t + ts->body_at;
		s->eh = ts->eh;
		s->tramp_slot = i;
		return 0;
	}
	if (ntslots == tslots_cap) {
		int cap = tslots_cap ? 2 * tslots_cap : 64;
		struct tramp_slot *n = realloc(tslots, (size_t)cap * sizeof(*n));

		if (!n)
			return patch_errf(err, errlen, -ENOMEM, "out of memory");
		tslots = n;
		tslots_cap = cap;
	}
	s->tramp_map = TRAMP_MAP;
	t = map_near(s->func, s->tramp_map);
	if (!t)
		return patch_errf(err, errlen, -ENOMEM, "no room for a trampoline within 2 GiB "
			    "of the function");
	rc = emit(s, on_entry, on_exit, arg, vec, (uint64_t)(uintptr_t)t, &w, &call_at,
		  &body_at, err, errlen);
	if (rc) {
		munmap(t, s->tramp_map);
		wbuf_free(&w);
		return rc;
	}
	memcpy(t, w.p, w.len);
	if (mprotect(t, s->tramp_map, PROT_READ | PROT_EXEC)) {
		rc = -errno;
		munmap(t, s->tramp_map);
		wbuf_free(&w);
		return patch_errf(err, errlen, rc, "mprotect of the trampoline: %s",
				  strerror(-rc));
	}
	s->tramp = t;
	s->ret_at = on_exit ? call_at + 5 : 0;
	s->body = t + body_at;
	if (on_exit) {
		/* The return address after "call body": CFA = rsp + 72 + 8. */
		s->eh = eh_frame((uint64_t)(uintptr_t)t + call_at, 5 + 1, ARGS_COPY + 8);
		if (s->eh)
			__register_frame(s->eh);
	}
	ts = &tslots[ntslots];
	*ts = (struct tramp_slot){ s->func, t, w.len, body_at, s->eh, true };
	s->tramp_slot = ntslots++;
	wbuf_free(&w);
	return 0;
}

void patch_tramp_release(struct patch_site *s)
{
	if (s->tramp_slot < 0)
		return;
	tslots[s->tramp_slot].busy = false;
	s->tramp_slot = -1;
}
