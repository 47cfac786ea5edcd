// SPDX-License-Identifier: MIT
/*
 * Relocation of a site's first instructions into its trampoline
 * (patch_int.h: patch_relocate()).  What patch.c accepted moves here:
 *
 *   plain instructions        copied; a RIP-relative disp32 re-based
 *   jcc rel8 / rel32          jcc rel32 to the same target, or, out of
 *                             reach, j!cc over "jmp [rip]; .quad target"
 *   jmp rel8 / rel32          jmp rel32, or "jmp [rip]; .quad target"
 *   loop, jrcxz (rel8 only)   "loop +2; jmp +N; jmp target"
 *   call rel32 / indirect     (only as the last one) the original return
 *                             address pushed, then a jmp to the callee:
 *                             the callee returns into the function, past
 *                             the patched bytes, with its own unwind
 *                             information, never into the trampoline
 *
 * A target among the patched bytes (a head instruction's branch to
 * another) goes to that instruction's copy.  Two passes: the first lays
 * out (the size of each copy depends only on whether its target is
 * within +-2 GiB), the second writes with the offsets known.
 */
#include <errno.h>
#include <string.h>

#include "patch/patch_int.h"

static void put(struct wbuf *w, int n, const uint8_t *p)
{
	wbuf_put(w, p, (size_t)n);
}

/* Whether a rel32 at the end of an instruction ending at `end` reaches
 * `to` (with room for the two passes' layouts to differ). */
static bool near32(uint64_t end, uint64_t to)
{
	int64_t d = (int64_t)(to - end);

	return d > INT32_MIN + 4096 && d < INT32_MAX - 4096;
}

static void rel32(struct wbuf *w, uint64_t end, uint64_t to)
{
	wbuf_le32(w, (uint32_t)(int32_t)(int64_t)(to - end));
}

/* jmp [rip+0]; .quad to */
static void jmp_abs(struct wbuf *w, uint64_t to)
{
	put(w, 6, (const uint8_t[]){ 0xff, 0x25, 0, 0, 0, 0 });
	wbuf_le64(w, to);
}

/* jmp to `to` from address at: e9 rel32, or jmp_abs(). */
static void jmp_to(struct wbuf *w, uint64_t at, uint64_t to)
{
	if (near32(at + 5, to)) {
		wbuf_u8(w, 0xe9);
		rel32(w, at + 5, to);
	} else {
		jmp_abs(w, to);
	}
}

static int jmp_len(uint64_t at, uint64_t to)
{
	return near32(at + 5, to) ? 5 : 14;
}

/* Push ret as a return address, every register and flag kept:
 * lea rsp,[rsp-8]; push rax; movabs rax, ret; mov [rsp+8], rax; pop rax */
static void push_ret(struct wbuf *w, uint64_t ret)
{
	put(w, 6, (const uint8_t[]){ 0x48, 0x8d, 0x64, 0x24, 0xf8, 0x50 });
	put(w, 2, (const uint8_t[]){ 0x48, 0xb8 });
	wbuf_le64(w, ret);
	put(w, 6, (const uint8_t[]){ 0x48, 0x89, 0x44, 0x24, 0x08, 0x58 });
}

/* d's bytes at address at, its RIP-relative disp32 re-based. */
static int copy_rebased(struct wbuf *w, struct dinsn d, uint64_t at, char *err,
			size_t errlen)
{
	if (d.rip_rel) {
		int32_t disp;
		int64_t nd;

		memcpy(&disp, d.bytes + d.disp_off, 4);
		nd = (int64_t)disp + (int64_t)d.addr - (int64_t)at;
		if (nd < INT32_MIN || nd > INT32_MAX)
			return patch_errf(err, errlen, -ERANGE, "%s: the RIP-relative operand is "
					  "out of reach of the trampoline", d.text);
		disp = (int32_t)nd;
		memcpy(d.bytes + d.disp_off, &disp, 4);
	}
	wbuf_put(w, d.bytes, d.size);
	return 0;
}

/* The relocated copy of d at address at; in-head targets through map. */
static int emit(struct wbuf *w, const struct patch_site *s, const struct dinsn *d,
		uint64_t at, uint64_t base, char *err, size_t errlen)
{
	uint64_t f = (uint64_t)(uintptr_t)s->func, to = d->target;
	struct dinsn c;

	if (d->rel && to >= f && to < f + s->len) {
		for (int k = 0; k < s->nhead; k++)
			if (s->head[k].addr == to)
				to = base + s->newoff[k];
	}
	switch (d->rel ? d->kind : DK_PLAIN) {
	case DK_JCC:
		if (near32(at + 6, to)) {
			put(w, 2, (const uint8_t[]){ 0x0f, (uint8_t)(0x80 | d->cc) });
			rel32(w, at + 6, to);
		} else {	/* j!cc over an absolute jump */
			put(w, 2, (const uint8_t[]){ (uint8_t)(0x70 | (d->cc ^ 1)), 14 });
			jmp_abs(w, to);
		}
		return 0;
	case DK_JMP:
		jmp_to(w, at, to);
		return 0;
	case DK_LOOP: {
		int n = jmp_len(at + d->opc_len + 3, to);

		wbuf_put(w, d->bytes, d->opc_len);
		put(w, 3, (const uint8_t[]){ 2, 0xeb, (uint8_t)n });
		jmp_to(w, at + d->opc_len + 3, to);
		return 0;
	}
	case DK_CALL:
		push_ret(w, d->addr + d->size);
		jmp_to(w, at + 22, to);
		return 0;
	default:
		break;
	}
	if (d->call) {		/* indirect: ff /2 becomes ff /4 */
		c = *d;
		c.bytes[c.modrm_off] = (uint8_t)((c.bytes[c.modrm_off] & ~0x38) | 0x20);
		push_ret(w, d->addr + d->size);
		return copy_rebased(w, c, at + 22, err, errlen);
	}
	return copy_rebased(w, *d, at, err, errlen);
}

int patch_relocate(struct patch_site *s, struct wbuf *w, uint64_t base, char *err,
		   size_t errlen)
{
	size_t start = w->len;
	struct wbuf lay = { 0 };
	int rc = 0;

	/* pass 1: the layout (offsets of each copy from the body's start) */
	for (int i = 0; i < s->nhead && !rc; i++) {
		s->newoff[i] = (uint16_t)lay.len;
		rc = emit(&lay, s, &s->head[i], base + lay.len, base, err, errlen);
	}
	wbuf_free(&lay);
	if (rc)
		return rc;
	/* pass 2 */
	for (int i = 0; i < s->nhead && !rc; i++) {
		if (w->len - start != s->newoff[i])
			return patch_errf(err, errlen, -EINVAL, "%s: the relocated layout "
					  "changed between passes", s->head[i].text);
		rc = emit(w, s, &s->head[i], base + (w->len - start), base, err, errlen);
	}
	if (rc)
		return rc;
	jmp_abs(w, (uint64_t)(uintptr_t)s->func + s->len);
	return w->err;
}

uint8_t *patch_body_pc(const struct patch_site *s, uint64_t pc)
{
	for (int k = 0; k < s->nhead; k++)
		if (s->head[k].addr == pc)
			return s->body + s->newoff[k];
	return NULL;
}
