// SPDX-License-Identifier: MIT
/*
 * The current span of each thread (fay_current_span(), include/fay/trace.h):
 * a stack of the recorded spans the thread began and has not ended, each
 * entry the pool slot and the span id it had then.  An entry is alive
 * while its slot is open with that span id, so a span ended on another
 * thread (a request handed to a worker) stops being current at once: a
 * reader skips dead entries and the owner drops them from the top at its
 * next begin or end.  A full stack forgets its outermost entry.  Only the
 * owning thread writes its stack; a reader runs on that same thread (an
 * inline probe's handler, maybe inside a signal handler), so plain
 * stores ordered by compiler barriers suffice.  The stack is its own
 * thread variable, not in struct lib_tls: that one is initial-exec and
 * must fit glibc's static TLS surplus when libfay is dlopen()ed
 * (mk/libfay.mk); this one is reached through a TLS descriptor.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "lib/libfay.h"

#define CUR_MAX 8u

struct cur {
	const struct fay_pool_slot *sl;
	uint64_t span_id;
};

static __thread struct {
	uint32_t n;
	struct cur e[CUR_MAX];
} cs;

static const struct fay_pool_slot dead;	/* state FREE: never alive */

static inline bool alive(const struct cur *c)
{
	const struct fay_pool_slot *sl = c->sl;

	return READ_ONCE(sl->state) == FAY_POOL_OPEN &&
	       READ_ONCE(sl->fixed.span_id) == c->span_id;
}

static void prune(void)
{
	while (cs.n && !alive(&cs.e[cs.n - 1]))
		cs.n--;
}

void lib_cur_push(const struct fay_pool_slot *sl)
{
	prune();
	if (cs.n == CUR_MAX) {
		cs.n--;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		memmove(&cs.e[0], &cs.e[1], (CUR_MAX - 1) * sizeof(cs.e[0]));
	}
	cs.e[cs.n] = (struct cur){ sl, sl->fixed.span_id };
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	cs.n++;
}

void lib_cur_pop(const struct fay_pool_slot *sl)
{
	for (uint32_t i = cs.n; i-- > 0;) {
		if (cs.e[i].sl != sl || cs.e[i].span_id != sl->fixed.span_id)
			continue;
		/* above it, if anything: spans begun later, still open */
		cs.e[i].sl = &dead;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		for (uint32_t j = i; j + 1 < cs.n; j++)
			cs.e[j] = cs.e[j + 1];
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		cs.n--;
		break;
	}
	prune();
}

/* The span's name: the first item of its record (begin() puts it there). */
static void name_of(const struct fay_pool_slot *sl, char *name, size_t cap)
{
	uint32_t used = READ_ONCE(sl->used);
	size_t n = 0;

	memset(name, 0, cap);
	if (used >= SPANREC_ITEM_HDR && sl->buf[0] == SPAN_ITEM_NAME) {
		n = (size_t)sl->buf[2] | (size_t)sl->buf[3] << 8;
		if (n > used - SPANREC_ITEM_HDR)
			n = used - SPANREC_ITEM_HDR;
		if (n > cap - 1)
			n = cap - 1;
		memcpy(name, sl->buf + SPANREC_ITEM_HDR, n);
	}
}

FAY_API int fay_current_span(struct fay_current *out, size_t size, int version)
{
	if (!out || version != FAY_CURRENT_VERSION || size != sizeof(*out))
		return -EINVAL;
	for (uint32_t i = READ_ONCE(cs.n); i-- > 0;) {
		const struct cur *c = &cs.e[i < CUR_MAX ? i : CUR_MAX - 1];
		const struct fay_pool_slot *sl = c->sl;

		if (!alive(c))
			continue;
		out->trace_hi = sl->fixed.trace_hi;
		out->trace_lo = sl->fixed.trace_lo;
		out->span_id = c->span_id;
		name_of(sl, out->name, sizeof(out->name));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (alive(c))		/* not ended (elsewhere) while copying */
			return 0;
	}
	memset(out, 0, sizeof(*out));
	return -ENOENT;
}
