/* SPDX-License-Identifier: MIT */
/*
 * The patcher's internals, shared by its three files: patch.c (site
 * analysis and the public calls), tramp.c (trampolines: code emission
 * and unwind information), live.c (the live write protocol: int3 first,
 * membarrier, the SIGTRAP and thread-moving handlers).
 */
#ifndef FAY_PATCH_PATCH_INT_H
#define FAY_PATCH_PATCH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "patch/decode.h"
#include "patch/patch.h"

#define JMP_LEN		5

struct patch_site {
	uint8_t *func;
	size_t size;
	struct dinsn head[JMP_LEN];	/* the relocated instructions */
	uint16_t newoff[JMP_LEN];	/* where each starts in the trampoline's body */
	int nhead;
	size_t len;			/* bytes they cover (>= 5) */
	uint8_t orig[16];
	bool nop, armed;
	bool unreached;			/* PATCH_ARM_UNREACHED: move no thread */
	uint8_t *tramp;			/* mapping, never unmapped (reused: tramp.c) */
	size_t tramp_map;
	uint8_t *body;			/* where the relocated code starts */
	size_t ret_at;			/* the return point after "call body" (exit
					 * handler), 0: none */
	uint8_t *eh;			/* registered .eh_frame, or NULL */
	int trap_slot;			/* in trap_sites, -1 before the first write */
	int tramp_slot;			/* tramp.c's record of s->tramp, or -1 */
};

/* printf into err (errlen bytes, when err is not NULL); returns rc. */
int patch_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Map and fill s's trampoline for these handlers (s->tramp, s->body,
 * s->eh set).  0, or -errno with a reason in err. */
int patch_build(struct patch_site *s, patch_fn on_entry, patch_fn on_exit, void *arg,
		unsigned int flags, char *err, size_t errlen);
/* s no longer needs its trampoline (its jump is out, or its code is
 * gone): a later site of the same function may take it again when its
 * bytes are the same (patch_build()). */
void patch_tramp_release(struct patch_site *s);
/* Emit s's relocated first instructions into w, whose first byte will
 * be at address base, followed by the jump back past them; set
 * s->newoff.  0, or -errno with a reason in err. */
int patch_relocate(struct patch_site *s, struct wbuf *w, uint64_t base, char *err,
		   size_t errlen);
/* Where a thread stopped at pc, an instruction of s's patched bytes,
 * goes on in the relocated copy (s->body set), or NULL when pc is not
 * the start of one. */
uint8_t *patch_body_pc(const struct patch_site *s, uint64_t pc);
/* Replace s's first JMP_LEN bytes with new[] while other threads run
 * (hold, tail, head, each step serialised on every core); to_patch: the
 * jump goes in (a trapped thread is sent to the trampoline), else the
 * original bytes (to the relocated copy).  On a failure the original
 * bytes are put back.  0, or -EAGAIN (an int3 write and a thread blocks
 * SIGTRAP), -EBUSY (a thread that blocks the move signal may be inside
 * the replaced instructions), -ETIMEDOUT (a thread did not answer the
 * move signal in 1 s), -ENOSPC, or another -errno. */
int patch_live_write(struct patch_site *s, const uint8_t *new, bool to_patch);
/* s's code was unmapped (patch_site_forget()): its trap slot is freed
 * for reuse and matches no address meanwhile. */
void patch_live_forget(struct patch_site *s);

#endif
