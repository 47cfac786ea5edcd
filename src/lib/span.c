// SPDX-License-Identifier: MIT
/*
 * libfay: the span API of include/fay/trace.h.
 *
 * A sampled span is a handle in the shm pool (struct fay_pool_slot):
 * begin fills its spanrec_fixed and a NAME item, events and tags append
 * items to its buffer (spanrec_put_item), end writes fixed + items as one
 * FAY_REC_SPAN record into the calling thread's ring and frees the handle.
 *
 * An unsampled span is one of the thread's LIB_NR_HANDLES non-recording
 * handles (struct fay_fast_nonrec, reused in turn): a root its thread's
 * skip budget passes costs a decrement and two stores, made inline in the
 * caller by include/fay/trace.h (or here, for a caller built without it),
 * and event/tag/end return at their first test (inline too).  Its ids
 * are made only when something asks for them (a child, a traceparent), so
 * propagation still works.
 *
 * With FAY_RECORD=all (lib.record_all) the spans sampling did not choose
 * are recorded too, as any other but with SPAN_F_UNSAMPLED instead of
 * SPAN_F_SAMPLED in their flags: the agent keeps them on the host (its flight buffer) instead of
 * shipping them.  The sampling decision, and what travels in a
 * traceparent, are unchanged.  With the mode off, the unsampled path
 * costs one more load and test of a word next to the sampling threshold.
 *
 * Recording calls take a per-thread guard: a span call from a signal
 * handler that interrupted one on the same thread does not record, is
 * counted in lost_nested, and leaves the ring and the thread's handle
 * cache alone.
 */
#define FAY_NO_INLINE 1         /* this file defines the calls */
#include <string.h>

#include "common/clock.h"
#include "lib/libfay.h"

static inline struct fay_pool_slot *as_slot(const struct fay_span *s)
{
	return (struct fay_pool_slot *)s;
}

static inline int is_open(const struct fay_span *s)
{
	return s && as_slot(s)->state == FAY_POOL_OPEN;
}

/* A non-recording handle of thread block t for this trace (hi = lo = 0: a
 * new trace, ids made on demand). */
static inline struct fay_span *nonrec(struct lib_tls *t, uint64_t hi,
				      uint64_t lo, uint8_t flags)
{
	struct lib_nonrec *n = lib_nr_next(lib_fast());

	(void)t;
	n->state = LIB_NONREC;
	n->flags = flags;
	n->trace_hi = hi;
	n->trace_lo = lo;
	n->span_id = 0;
	return (struct fay_span *)n;
}

/* The ids of any handle, making those of a non-recording one if needed.
 * Returns 0, or -EINVAL for an inert handle (inherited across fork). */
static int span_ids(const struct fay_span *s, uint64_t *hi, uint64_t *lo,
		    uint64_t *id, uint8_t *flags)
{
	const struct fay_pool_slot *sl = as_slot(s);
	struct lib_nonrec *n;

	if (sl->state == FAY_POOL_OPEN) {
		*hi = sl->fixed.trace_hi;
		*lo = sl->fixed.trace_lo;
		*id = sl->fixed.span_id;
		*flags = sl->fixed.flags & SPAN_F_SAMPLED;
		return 0;
	}
	if (sl->state != LIB_NONREC)
		return -EINVAL;
	n = (struct lib_nonrec *)s;
	if (n->flags & FAY_FAST_FRESH) {
		/* an unsampled root's (fay_span_root(), maybe inline) */
		n->trace_hi = 0;
		n->trace_lo = 0;
		n->span_id = 0;
		n->flags = 0;
	}
	if (!n->trace_hi && !n->trace_lo) {
		n->trace_hi = lib_id(lib_tls());
		n->trace_lo = lib_id(lib_tls());
	}
	if (!n->span_id)
		n->span_id = lib_id(lib_tls());
	*hi = n->trace_hi;
	*lo = n->trace_lo;
	*id = n->span_id;
	*flags = n->flags & SPAN_F_SAMPLED;
	return 0;
}

void lib_put(struct spanrec_fixed *f, uint8_t *buf, uint32_t cap,
	     uint32_t *used, unsigned type, uint64_t val,
	     const char *a, size_t alen, const char *b, size_t blen)
{
	size_t off = *used;

	if (unlikely(spanrec_put_item(buf, cap, &off, type, val, a, alen, b, blen))) {
		if (!(f->flags & SPAN_F_TRUNCATED)) {
			struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);

			f->flags |= SPAN_F_TRUNCATED;
			if (h)
				atomic_add(&h->truncated, 1);
		}
		f->dropped_items++;
		return;
	}
	*used = (uint32_t)off;
	f->nitems++;
}

/* Copy n <= PUT_FAST_STR bytes with fixed-size moves (two overlapping
 * ones for odd sizes), never writing past dst + n: a call into libc's
 * memcpy costs more than these copies. */
#define PUT_FAST_STR 32u
static inline void copy_short(uint8_t *dst, const char *src, size_t n)
{
	if (n >= 16) {
		memcpy(dst, src, 16);
		memcpy(dst + n - 16, src + n - 16, 16);
	} else if (n >= 8) {
		memcpy(dst, src, 8);
		memcpy(dst + n - 8, src + n - 8, 8);
	} else if (n >= 4) {
		memcpy(dst, src, 4);
		memcpy(dst + n - 4, src + n - 4, 4);
	} else {
		for (size_t i = 0; i < n; i++)
			dst[i] = (uint8_t)src[i];
	}
}

/*
 * Append one item to an open span.  Short strings with room to spare (the
 * common case) are written here, inline, in the bytes spanrec_put_item()
 * writes; anything else goes through it (lib_put), which cuts, drops and
 * counts.  The header is stored as one 8-byte word: its last two bytes
 * land where the value or strings go next, or past sl->used (never
 * shipped).  Always inlined: each caller's item type (and a name's
 * missing second string) are constants, which leaves ~20 instructions an
 * item instead of ~58 through a call.
 */
static inline __attribute__((always_inline)) void
put(struct fay_pool_slot *sl, unsigned type, uint64_t val,
    const char *a, size_t alen, const char *b, size_t blen)
{
	uint32_t off = sl->used;
	uint64_t hdr;
	uint8_t *d;

	if (unlikely(alen > PUT_FAST_STR || blen > PUT_FAST_STR ||
		     off + SPANREC_ITEM_HDR + 8 + 2 * PUT_FAST_STR + 8 > lib.item_cap)) {
		lib_put(&sl->fixed, sl->buf, lib.item_cap, &sl->used, type, val,
			a, alen, b, blen);
		return;
	}
	d = sl->buf + off;
	hdr = (uint64_t)(type & 0xff) | (uint64_t)alen << 16 | (uint64_t)blen << 32;
	memcpy(d, &hdr, 8);
	d += SPANREC_ITEM_HDR;
	if (spanrec_item_has_val(type)) {
		memcpy(d, &val, 8);
		d += 8;
	}
	copy_short(d, a, alen);
	d += alen;
	copy_short(d, b, blen);
	d += blen;
	sl->used = (uint32_t)(d - sl->buf);
	sl->fixed.nitems++;
}

/*
 * Begin a recorded span of trace (hi, lo) (0, 0: a new trace) under
 * parent (0: a root), with flags SPAN_F_SAMPLED, or SPAN_F_UNSAMPLED for a
 * span recorded though not sampled (FAY_RECORD=all).  Falls back to a non-recording
 * handle carrying the same ids (and flags) when the span cannot be
 * recorded.
 */
static __attribute__((noinline)) struct fay_span *
begin_n(const char *name, size_t nlen, uint64_t hi, uint64_t lo, uint64_t parent,
	uint8_t flags)
{
	struct lib_tls *t = lib_tls();
	struct fay_shm_hdr *h;
	struct fay_pool_slot *sl;
	struct fay_span *nr;
	int64_t idx;

	if (!hi && !lo) {
		hi = lib_id(t);
		lo = lib_id(t);
	}
	h = READ_ONCE(lib.recording) ? lib_hdr() : NULL;
	if (!h || lib_enter())
		goto nonrec;
	idx = lib_pool_get();
	if (idx < 0) {
		atomic_add(&h->lost_no_handle, 1);
		lib_leave();
		goto nonrec;
	}
	sl = lib_slot((uint32_t)idx);
	sl->used = 0;
	sl->owner_tid = lib_gettid();
	memset(&sl->fixed, 0, sizeof(sl->fixed));
	sl->fixed.trace_hi = hi;
	sl->fixed.trace_lo = lo;
	sl->fixed.span_id = lib_id(t);
	sl->fixed.parent_id = parent;
	sl->fixed.flags = flags | lib_ticks_flag(t);
	put(sl, SPAN_ITEM_NAME, 0, name, nlen, NULL, 0);
	sl->fixed.start_ns = lib_stamp(t, sl->fixed.flags & SPAN_F_TICKS);
	smp_store_release(&sl->state, FAY_POOL_OPEN);
	lib_cur_push(sl);
	/* spans_started counts sampled spans (an unsampled root is counted
	 * in spans_unsampled, recorded or not) */
	if ((flags & SPAN_F_SAMPLED) && unlikely(++lib_t.started >= LIB_STARTED_FLUSH))
		lib_flush_counters();
	lib_leave();
	return (struct fay_span *)sl;

nonrec:
	nr = nonrec(t, hi, lo, flags);
	((struct lib_nonrec *)nr)->span_id = lib_id(t);
	return nr;
}

/* A name's length as recorded: cut to LIB_NAME_MAX; NULL is "". */
static inline size_t name_len(const char *name)
{
	return name ? strnlen(name, LIB_NAME_MAX) : 0;
}

static inline struct fay_span *begin(const char *name, uint64_t hi, uint64_t lo,
				     uint64_t parent, uint8_t flags)
{
	return begin_n(name ? name : "", name_len(name), hi, lo, parent, flags);
}

void lib_count_unsampled_slow(void)
{
	if (lib.hdr)
		lib_flush_counters();
	else
		lib_t.unsampled = 0;    /* no file to count them in */
}

/* A root that its thread's skip budget did not pass: sampled, recorded
 * unsampled (FAY_RECORD=all), or not recorded.  Inlined into its two
 * callers: one call less on the way to begin_n(). */
static inline __attribute__((always_inline)) struct fay_span *
root_slow(struct lib_tls *t, const char *name, size_t nlen)
{
	/* sampling all, and no budget left to count: no more to decide */
	if ((READ_ONCE(lib.sample_thresh) == UINT64_MAX && !t->skip_set) ||
	    lib_root_slow(t))
		return begin_n(name, nlen, 0, 0, 0, SPAN_F_SAMPLED);
	if (unlikely(READ_ONCE(lib.record_all)))
		return begin_n(name, nlen, 0, 0, 0, SPAN_F_UNSAMPLED);
	return nonrec(t, 0, 0, 0);
}

/* A root the thread's skip budget passes (the same as fay_fast_root() of
 * include/fay/trace.h), or NULL. */
static inline struct fay_span *root_skip(void)
{
	if (likely(lib_root_skip())) {
		/* unsampled, not recorded (no budget under FAY_RECORD=all):
		 * a non-recording handle of a new trace, ids made on demand;
		 * its state word is set already (lib_nonrec_prepare) */
		struct lib_nonrec *n = lib_nr_next(lib_fast());

		n->flags = FAY_FAST_FRESH;
		return (struct fay_span *)n;
	}
	return NULL;
}

struct fay_span *fay_span_root(const char *name)
{
	struct fay_span *s = root_skip();

	if (likely(s))
		return s;
	return root_slow(lib_tls(), name ? name : "", name_len(name));
}

/* fay_span_root() with the name's length known (the inline path of
 * include/fay/trace.h, for a constant name): len is strlen(name).  Only
 * that path calls it, once its own test of the skip budget has failed
 * (the budget is the thread's own, and a changed generation never
 * returns to the old one): the test is not made again. */
struct fay_span *fay_fast_root_n(const char *name, size_t len)
{
	if (!name)
		name = "";
	return root_slow(lib_tls(), name, len < LIB_NAME_MAX ? len : LIB_NAME_MAX);
}

struct fay_span *fay_span_child(const struct fay_span *parent, const char *name)
{
	uint64_t hi, lo, id;
	uint8_t flags;

	if (!parent)
		return NULL;
	if (span_ids(parent, &hi, &lo, &id, &flags))
		return fay_span_root(name);
	if (flags & SPAN_F_SAMPLED)
		return begin(name, hi, lo, id, SPAN_F_SAMPLED);
	if (unlikely(READ_ONCE(lib.record_all)))
		return begin(name, hi, lo, id, SPAN_F_UNSAMPLED);
	return nonrec(lib_tls(), hi, lo, 0);
}

struct fay_span *fay_span_remote(const char *traceparent, const char *name)
{
	uint64_t hi, lo, id;
	uint8_t flags;

	if (lib_tp_parse(traceparent, &hi, &lo, &id, &flags)) {
		struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);

		if (h)
			atomic_add(&h->bad_traceparent, 1);
		return fay_span_root(name);
	}
	if (flags & 1)
		return begin(name, hi, lo, id, SPAN_F_SAMPLED);
	if (unlikely(READ_ONCE(lib.record_all)))
		return begin(name, hi, lo, id, SPAN_F_UNSAMPLED);
	return nonrec(lib_tls(), hi, lo, 0);
}

int fay_span_traceparent(const struct fay_span *s, char *buf, size_t len)
{
	uint64_t hi, lo, id;
	uint8_t flags;

	if (!s || !buf)
		return fay_err(-EINVAL);
	if (len < FAY_TRACEPARENT_LEN)
		return fay_err(-ENOSPC);
	if (span_ids(s, &hi, &lo, &id, &flags))
		return fay_err(-EINVAL);
	return lib_tp_format(buf, len, hi, lo, id, flags & SPAN_F_SAMPLED ? 1 : 0);
}

/* The recording halves of event and tag.  The plain calls reach them
 * out of line (span_event, span_tag), so that they are a test or two and
 * a jump when the span is not recorded; the _n calls of the inline path,
 * made only for a recording span, have them inline (one call less). */
static inline __attribute__((always_inline)) void
event_rec(struct fay_pool_slot *sl, const char *event, size_t len)
{
	if (lib_enter())
		return;
	put(sl, SPAN_ITEM_EVENT, lib_stamp(lib_tls(), sl->fixed.flags & SPAN_F_TICKS), event,
	    len, NULL, 0);
	lib_leave();
}

static inline __attribute__((always_inline)) void
tag_rec(struct fay_pool_slot *sl, const char *key, size_t klen,
	const char *value, size_t vlen)
{
	if (lib_enter())
		return;
	put(sl, SPAN_ITEM_TAG, 0, key, klen, value, vlen);
	lib_leave();
}

static __attribute__((noinline)) void span_event(struct fay_pool_slot *sl,
						 const char *event, size_t len)
{
	event_rec(sl, event, len);
}

static __attribute__((noinline)) void span_tag(struct fay_pool_slot *sl,
					       const char *key, size_t klen,
					       const char *value, size_t vlen)
{
	tag_rec(sl, key, klen, value, vlen);
}

static __attribute__((noinline)) void span_tag_int(struct fay_pool_slot *sl,
						   const char *key, int64_t value)
{
	if (lib_enter())
		return;
	if (!key)
		key = "";
	put(sl, SPAN_ITEM_TAG_INT, (uint64_t)value, key, strlen(key), NULL, 0);
	lib_leave();
}

void fay_span_event(struct fay_span *s, const char *event)
{
	if (is_open(s))
		span_event(as_slot(s), event ? event : "", event ? strlen(event) : 0);
}

/* The same with the length known (strlen(event); the inline path). */
void fay_fast_event_n(struct fay_span *s, const char *event, size_t len)
{
	if (is_open(s))
		event_rec(as_slot(s), event ? event : "", event ? len : 0);
}

void fay_span_tag(struct fay_span *s, const char *key, const char *value)
{
	if (is_open(s))
		span_tag(as_slot(s), key ? key : "", key ? strlen(key) : 0,
			 value ? value : "", value ? strlen(value) : 0);
}

/* The same with the lengths known (the inline path). */
void fay_fast_tag_n(struct fay_span *s, const char *key, size_t klen,
		    const char *value, size_t vlen)
{
	if (is_open(s))
		tag_rec(as_slot(s), key ? key : "", key ? klen : 0,
			value ? value : "", value ? vlen : 0);
}

void fay_span_tag_int(struct fay_span *s, const char *key, int64_t value)
{
	if (is_open(s))
		span_tag_int(as_slot(s), key, value);
}

/* lib_write_record(), inline in span_end(): one call less a span. */
static inline __attribute__((always_inline)) int
write_record(struct spanrec_fixed *f, const void *items, uint32_t items_len)
{
	struct fay_shm_hdr *h = lib_hdr();
	struct ring_piece pc[2];
	struct ring_prod *p;
	int err;

	if (!h)
		return -ENODEV;
	p = lib_ring();
	if (unlikely(!p)) {
		if (lib_tls()->no_room) {
			atomic_add(&h->lost_no_room, 1);
			return -ENOSPC;
		}
		atomic_add(&h->lost_no_ring, 1);
		return -EBUSY;
	}
	f->items_len = items_len;
	if ((const void *)(f + 1) == items) {
		/* a pool handle: fixed and items are contiguous */
		err = ring_write1(p, FAY_REC_SPAN, f, (uint32_t)sizeof(*f) + items_len);
	} else {
		pc[0].p = f;
		pc[0].len = sizeof(*f);
		pc[1].p = items;
		pc[1].len = items_len;
		err = ring_write(p, FAY_REC_SPAN, pc, 2);
	}
	if (unlikely(err))
		atomic_add(&h->lost_too_big, 1);
	return err;
}

int lib_write_record(struct spanrec_fixed *f, const void *items,
		     uint32_t items_len)
{
	return write_record(f, items, items_len);
}

static __attribute__((noinline)) void span_end(struct fay_pool_slot *sl)
{
	uint64_t now;

	if (lib_enter()) {
		/* nested in another span call of this thread: the handle
		 * goes back without touching the thread's cache or ring */
		smp_store_release(&sl->state, FAY_POOL_FREE);
		lib_pool_push(lib_slot_idx(sl));
		return;
	}
	lib_cur_pop(sl);
	now = lib_stamp(lib_tls(), sl->fixed.flags & SPAN_F_TICKS);
	sl->fixed.duration_ns = now > sl->fixed.start_ns ? now - sl->fixed.start_ns : 0;
	write_record(&sl->fixed, sl->buf, sl->used);
	smp_store_release(&sl->state, FAY_POOL_FREE);
	lib_pool_put(lib_slot_idx(sl));
	lib_leave();
}

void fay_span_end(struct fay_span *s)
{
	if (is_open(s))
		span_end(as_slot(s));
}
