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
 *
 * The top of the stack is also published in the thread's cell of the shm
 * file (struct fay_cur_cell, include/fay/ring.h), for a sampler that
 * interrupts the thread from outside (fay's profile(...) BPF program):
 * two plain stores per begin and end, span_id before slot_off, so a
 * reader on the thread's CPU sees either a whole pair or one that fails
 * its check against the handle.
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

struct cstack {
	uint32_t n;
	struct cur e[CUR_MAX];
	struct fay_cur_cell *cell; /* this thread's cell, NULL none */
	const uint8_t *cell_base;  /* the mapping cell is in: lib.base then */
};

static __thread struct cstack cs_tls;

/* The thread's stack, its address computed once per call (a TLS
 * descriptor call each time otherwise: lib_tls() in libfay.h). */
static inline struct cstack *cstack(void)
{
	struct cstack *cs = &cs_tls;

	__asm__("" : "+r"(cs));
	return cs;
}

static const struct fay_pool_slot dead;	/* state FREE: never alive */

static inline bool alive(const struct cur *c)
{
	const struct fay_pool_slot *sl = c->sl;

	return READ_ONCE(sl->state) == FAY_POOL_OPEN &&
	       READ_ONCE(sl->fixed.span_id) == c->span_id;
}

static inline __attribute__((always_inline)) void prune(struct cstack *cs)
{
	while (cs->n && !alive(&cs->e[cs->n - 1]))
		cs->n--;
}

/* The thread's cell in the current file: taken at its first recorded
 * span in that file (a fork child's new file included); NULL when another
 * live thread of the process holds it. */
static __attribute__((noinline, cold)) struct fay_cur_cell *cell_take(struct cstack *cs,
									const uint8_t *base)
{
	struct fay_cur_cell *c;
	uint32_t tid, zero = 0;

	cs->cell_base = base;
	cs->cell = NULL;
	if (!base || !lib.cur)
		return NULL;
	tid = lib_gettid();
	c = &lib.cur[tid & (LIB_NCUR - 1)];
	if (READ_ONCE(c->tid) != tid && !atomic_cas(&c->tid, &zero, tid))
		return NULL;
	if (!lib_t.key_set) {
		/* thread_exit() gives the cell back */
		pthread_setspecific(lib.key, &lib_t);
		lib_t.key_set = 1;
	}
	cs->cell = c;
	return c;
}

/* Entry top (NULL: the stack is empty) into the thread's cell. */
static inline __attribute__((always_inline)) void publish_top(struct cstack *cs,
							       const struct cur *top)
{
	const uint8_t *base = READ_ONCE(lib.base);
	struct fay_cur_cell *c = cs->cell;

	if (unlikely(cs->cell_base != base))
		c = cell_take(cs, base);
	if (!c)
		return;
	if (!top) {
		WRITE_ONCE(c->slot_off, 0);
		return;
	}
	WRITE_ONCE(c->span_id, top->span_id);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	WRITE_ONCE(c->slot_off, (uint64_t)((const uint8_t *)top->sl - base));
}

/* The top of the stack into the thread's cell. */
static inline __attribute__((always_inline)) void publish(struct cstack *cs)
{
	uint32_t n = cs->n;

	publish_top(cs, n ? &cs->e[n - 1] : NULL);
}

void lib_cur_release(void)
{
	struct cstack *cs = cstack();
	struct fay_cur_cell *c = cs->cell;

	if (!c || cs->cell_base != READ_ONCE(lib.base))
		return;
	cs->cell = NULL;
	cs->cell_base = NULL;
	WRITE_ONCE(c->slot_off, 0);
	smp_store_release(&c->tid, 0);
}

void lib_cur_push(const struct fay_pool_slot *sl)
{
	struct cstack *cs = cstack();

	prune(cs);
	if (cs->n == CUR_MAX) {
		cs->n--;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		memmove(&cs->e[0], &cs->e[1], (CUR_MAX - 1) * sizeof(cs->e[0]));
	}
	struct cur *top = &cs->e[cs->n];

	*top = (struct cur){ sl, sl->fixed.span_id };
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	cs->n++;
	publish_top(cs, top);
}

void lib_cur_pop(const struct fay_pool_slot *sl)
{
	struct cstack *cs = cstack();
	uint32_t n = cs->n;

	/* the common case: sl is the top, and below it nothing or a live
	 * span (its parent, on the same thread) */
	if (likely(n) && cs->e[n - 1].sl == sl && cs->e[n - 1].span_id == sl->fixed.span_id) {
		cs->n = --n;
		if (!n) {
			publish_top(cs, NULL);
			return;
		}
		if (likely(alive(&cs->e[n - 1]))) {
			publish_top(cs, &cs->e[n - 1]);
			return;
		}
		prune(cs);
		publish(cs);
		return;
	}
	for (uint32_t i = cs->n; i-- > 0;) {
		if (cs->e[i].sl != sl || cs->e[i].span_id != sl->fixed.span_id)
			continue;
		/* above it, if anything: spans begun later, still open */
		cs->e[i].sl = &dead;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		for (uint32_t j = i; j + 1 < cs->n; j++)
			cs->e[j] = cs->e[j + 1];
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		cs->n--;
		break;
	}
	prune(cs);
	publish(cs);
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
	struct cstack *cs = cstack();

	for (uint32_t i = READ_ONCE(cs->n); i-- > 0;) {
		const struct cur *c = &cs->e[i < CUR_MAX ? i : CUR_MAX - 1];
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
