/* SPDX-License-Identifier: MIT */
/*
 * libfay internals shared by the files of src/lib/ (never installed).
 *
 * One process-wide struct lib_proc (the mapping of the shm file, the
 * handle pool's free stack, sampling) and one struct lib_tls per thread
 * (the ring the thread owns, a cache of free handle indices, the
 * non-recording handles of unsampled spans, the recursion guard).
 *
 * A struct fay_span * is one of two things, told apart by its first
 * 32-bit word:
 *   FAY_POOL_OPEN  a struct fay_pool_slot in the shm pool: recording;
 *   LIB_NONREC     a struct fay_fast_nonrec in the thread's TLS
 *                  (fay_fast_tls_1, include/fay/trace.h): carries ids
 *                  for propagation only;
 *   anything else  (FAY_POOL_FREE: a handle inherited across fork(), whose
 *                  pages the child replaced with zeros) inert.
 */
#ifndef FAY_LIB_LIBFAY_H
#define FAY_LIB_LIBFAY_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include <fay/ring.h>
#include <fay/trace.h>

#include "common/atomic.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/ring/ring.h"
#include "common/spanrec.h"
#include "common/tsc.h"

/* Defaults and limits of the file's geometry (FAY_RINGS, FAY_RING_KB,
 * FAY_POOL override the defaults). */
#define LIB_NRINGS_DEF      64u
#define LIB_NRINGS_MAX      4096u
#define LIB_RING_KB_DEF     1024u
#define LIB_RING_KB_MIN     4u
#define LIB_RING_KB_MAX     65536u
#define LIB_NPOOL_DEF       4096u
#define LIB_NPOOL_MAX       (1u << 20)
#define LIB_POOL_STRIDE     1024u
#define LIB_NCUR            1024u    /* current-span cells (a power of two) */

#define LIB_NAME_MAX        256u     /* span names are cut to this */
#define LIB_NONREC          FAY_FAST_NONREC /* "RNON": a non-recording handle */
#define LIB_NR_HANDLES      FAY_FAST_NR /* unsampled spans in flight per thread */
#define LIB_CACHE_MAX       16u      /* free handle indices kept per thread */
#define LIB_CACHE_BATCH     8u       /* moved to/from the global stack at once */
#define LIB_UNSAMPLED_FLUSH 1024u    /* unsampled roots counted per thread before
				      * adding them to the header */
#define LIB_STARTED_FLUSH   64u      /* the same for sampled spans begun */
#define LIB_NO_ROOM_RETRY   256u     /* spans dropped between tries to
				      * reserve a ring when there was no room */
#define LIB_THRESH_RATE     1u       /* lib.sample_thresh in rate mode (1/N
				      * never gives 1: N < 2^32) */

/* A handle for a span that is not recorded: ids only (struct
 * fay_fast_nonrec of include/fay/trace.h, where the inline fay_span_root()
 * hands them out).  Its first word sits where struct fay_pool_slot has
 * state.  FAY_FAST_FRESH in flags, or a zero trace id or span id, means
 * "not generated yet" (ids of unsampled spans are made on demand). */
#define lib_nonrec fay_fast_nonrec
_Static_assert(FAY_FAST_OPEN == FAY_POOL_OPEN, "the inline open test");
_Static_assert(offsetof(struct fay_pool_slot, state) == 0, "a handle's state first");
_Static_assert((FAY_FAST_FRESH & SPAN_F_SAMPLED) == 0, "nonrec flags");
_Static_assert(LIB_NR_HANDLES == 8, "a power of two");

/* A thread's TSC clock (clock.c): realtime ns = ns + (TSC - tsc) * mult
 * >> 32 while TSC - tsc < lib_tls.clk_limit; cal_* the pair the rate is
 * measured from. */
struct lib_clock {
	uint64_t tsc, ns;
	uint64_t mult;           /* ns per tick << 32, 0 = not known yet */
	uint64_t cal_tsc, cal_ns;
};
#define LIB_CLK_RESYNC_NS   64000000u  /* retake the pair this often */
#define LIB_CLK_CAL_NS      256000000u /* remeasure the rate over this */

struct lib_tls {
	uint32_t nest;           /* recursion guard: inside a recording call */
	uint32_t ring;           /* ring index + 1 owned by this thread, 0 none */
	uint32_t tid;            /* gettid(), 0 until needed */
	uint32_t ncache;
	uint32_t unsampled;      /* unsampled roots not yet added to the header
				  * (besides skip_set - lib_skip()) */
	uint32_t skip_set;       /* the skip budget as last set (fay_fast_tls_1:
				  * lib_skip()): skip_set - lib_skip() roots
				  * passed, not yet in unsampled */
	uint32_t started;        /* sampled spans begun, not yet added */
	uint32_t key_set;        /* the thread-exit destructor is armed */
	uint32_t no_room;        /* spans to drop (lost_no_room) before trying
				  * to reserve a ring again; 0: try now */
	uint32_t clk_limit;      /* ticks after clk's pair that it converts;
				  * 0: every read is slow (here, not in
				  * struct lib_clock: the TLS is counted) */
	uint64_t rng;            /* sampling generator state, 0 = not seeded */
	uint64_t gap;            /* 1 in N with a large N: unsampled roots due
				  * before the next sampled one, beyond skip */
	struct lib_clock clk;
	struct ring_prod prod;
	uint32_t cache[LIB_CACHE_MAX];
};

struct lib_cfg {
	char service[64];
	char ip[48];
	uint16_t port;
	uint32_t nrings, ring_slots, npool;
	char dir[PATH_MAX - 64];
};

struct lib_proc {
	/* The mapping; hdr is published with release once the file is LIVE
	 * and is NULL when there is no file (not initialized, disabled, a
	 * fork child that has not recorded yet). */
	struct fay_shm_hdr *hdr;
	uint8_t *base;
	size_t size;
	uint8_t *pool;
	struct fay_cur_cell *cur; /* LIB_NCUR cells, the threads' current spans */
	uint8_t *rings;
	uint64_t ring_stride;
	uint32_t npool, pool_stride, item_cap;
	uint32_t nrings, ring_slots;
	int fd;                  /* the file, kept to reserve rings' pages */
	uint64_t ring_reserved[LIB_NRINGS_MAX / 64]; /* bit r: ring r's pages
				  * are reserved (set once, atomically) */

	int inited;              /* fay_init() succeeded (maybe disabled) */
	int rate_mode;           /* informational copy of the mode */
	int recording;           /* fay_init() succeeded and not FAY_DISABLE */
	int need_file;           /* fork child: create our own file on first use */
	int env_sampling;        /* FAY_SAMPLE given: the setters are ignored */
	int record_all;          /* FAY_RECORD=all: spans sampling did not
				  * choose are recorded too, flagged
				  * SPAN_F_UNSAMPLED (the agent's flight buffer) */

	/* Handle pool: Treiber stack of free indices, head = tag << 32 |
	 * (index + 1) (0 = empty), links in fay_pool_slot._reserved; handles
	 * never used yet are handed out from fresh, so untouched pool pages
	 * cost nothing. */
	uint64_t free_head;
	uint32_t fresh;

	/* Sampling: fixed 1/N (sample_thresh: a root is sampled when a random
	 * u64 < it; 0 none, UINT64_MAX all) or, when it is LIB_THRESH_RATE,
	 * rate mode (GCRA on rate_tat). */
	uint64_t sample_thresh;
	uint64_t rate_interval_ns, rate_tau_ns, rate_tat;

	/* The TSC clock (clock.c): tsc_state 0 not looked at yet, 1 usable,
	 * 2 not (clock_gettime every time); tsc_mult the last rate measured
	 * by any thread (a new thread's first guess), 0 none yet. */
	int tsc_state;
	uint64_t tsc_mult;

	pthread_mutex_t lock;    /* fay_init and creating the file only */
	pthread_key_t key;
	struct lib_cfg cfg;
};

/* Hidden even as declarations, so other objects of libfay.so reach them
 * without the GOT. */
#define LIB_HIDDEN __attribute__((visibility("hidden")))
extern struct lib_proc lib LIB_HIDDEN;
extern __thread struct lib_tls lib_t LIB_HIDDEN __attribute__((tls_model("initial-exec")));
/* Exported for the inline unsampled path of include/fay/trace.h: the
 * thread's skip budget and non-recording handles, and the sampling
 * generation (bumped, never 0, whenever sampling or record_all changes:
 * a thread's skip budget holds only under the generation it was set in;
 * shm.c). */
extern __thread struct fay_fast_tls fay_fast_tls_1 FAY_API
	__attribute__((tls_model("initial-exec")));
extern uint32_t fay_fast_gen FAY_API;

/* The thread's block, its address computed once per call: with TLS
 * descriptors the compiler would otherwise redo the lookup (a call) at
 * every use. */
static inline struct lib_tls *lib_tls(void)
{
	struct lib_tls *t = &lib_t;

	__asm__("" : "+r"(t));
	return t;
}

/* The thread's fay_fast_tls_1, its address computed once per call. */
static inline struct fay_fast_tls *lib_fast(void)
{
	struct fay_fast_tls *f = &fay_fast_tls_1;

	__asm__("" : "+r"(f));
	return f;
}

/* The thread's skip budget: roots fay_span_root() may still pass as
 * unsampled without a look at the sampler (sample.c: lib_root_slow sets
 * it), the low half of fay_fast_tls_1.budget. */
static inline uint32_t lib_skip(const struct fay_fast_tls *f)
{
	return (uint32_t)f->budget;
}

static inline void lib_set_skip(struct fay_fast_tls *f, uint32_t n)
{
	f->budget = (f->budget & ~(uint64_t)UINT32_MAX) | n;
}

/* The thread's next non-recording handle, in turn (the high half of the
 * budget word). */
static inline struct lib_nonrec *lib_nr_next(struct fay_fast_tls *f)
{
	uint64_t b = f->budget;

	f->budget = b + ((uint64_t)1 << 32);
	return &f->nr[(b >> 32) % LIB_NR_HANDLES];
}

/* A handle by index and back.  libfay's pool stride is always
 * LIB_POOL_STRIDE (shm.c), a power of two: a shift, where a division by
 * lib.pool_stride was a 64-bit div (tens of cycles) at every span's end. */
_Static_assert((LIB_POOL_STRIDE & (LIB_POOL_STRIDE - 1)) == 0, "a power of two");
static inline struct fay_pool_slot *lib_slot(uint32_t idx)
{
	return (struct fay_pool_slot *)(lib.pool + (size_t)idx * LIB_POOL_STRIDE);
}

static inline uint32_t lib_slot_idx(const struct fay_pool_slot *s)
{
	return (uint32_t)((size_t)((const uint8_t *)s - lib.pool) / LIB_POOL_STRIDE);
}

/* current.c: sl, just opened by this thread, becomes its current span;
 * pop: sl (about to end on this thread) is current no more.  Only the
 * owning thread calls them (a reader on the same thread sees whole
 * entries). */
void lib_cur_push(const struct fay_pool_slot *sl) LIB_HIDDEN;
void lib_cur_pop(const struct fay_pool_slot *sl) LIB_HIDDEN;
/* Thread exit: give the thread's current-span cell back. */
void lib_cur_release(void) LIB_HIDDEN;

/* shm.c: the file and the thread's ring. */
struct fay_shm_hdr *lib_hdr_slow(void);
/* The header to record into, or NULL.  Creates a fork child's file. */
static inline struct fay_shm_hdr *lib_hdr(void)
{
	struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);

	if (likely(h) || likely(!READ_ONCE(lib.need_file)))
		return h;
	return lib_hdr_slow();
}
struct ring_prod *lib_ring_claim(void);
/* The calling thread's ring, claimed on first use; NULL if every ring is
 * owned, or if no ring's pages could be reserved (then lib_t.no_room is
 * set: count the span in lost_no_room).  Call with the recursion guard
 * held. */
static inline struct ring_prod *lib_ring(void)
{
	if (likely(lib_t.ring))
		return &lib_t.prod;
	return lib_ring_claim();
}
/* The calling thread's id (gettid()), asked of the kernel once. */
uint32_t lib_gettid_slow(void);
static inline uint32_t lib_gettid(void)
{
	uint32_t tid = lib_t.tid;

	return likely(tid) ? tid : lib_gettid_slow();
}
int lib_parse_uint(const char *s, unsigned long long max, unsigned long long *v);
/* Add the thread's batched counters to the header. */
void lib_flush_counters(void);

/* pool.c: span handles. */
/* The slow halves of lib_pool_get() and lib_pool_put(): refill the
 * thread's cache from the global stack (-1: the pool is empty), spill
 * half of a full one to it. */
int64_t lib_pool_refill(void) LIB_HIDDEN;
void lib_pool_spill(void) LIB_HIDDEN;
/* A free handle index, or -1 when the pool is empty: from the thread's
 * cache, inline. */
static inline int64_t lib_pool_get(void)
{
	if (likely(lib_t.ncache))
		return lib_t.cache[--lib_t.ncache];
	return lib_pool_refill();
}

/* Give a handle index back (into the thread's cache). */
static inline void lib_pool_put(uint32_t idx)
{
	if (unlikely(lib_t.ncache == LIB_CACHE_MAX))
		lib_pool_spill();
	lib_t.cache[lib_t.ncache++] = idx;
}
/* Signal-safe: straight onto the global stack (no thread cache). */
void lib_pool_push(uint32_t idx);
/* Give the thread's cached indices back (thread exit). */
void lib_pool_spill_all(void);

/* sample.c */
int lib_sample_rate(void);
uint64_t lib_rng_seed(void);
int lib_parse_sample(const char *s);

/* The thread's sampling generator (wyrand: one add, one 64x64->128
 * multiply; statistically fine for Bernoulli trials, and no shared write).
 * Ids come from rand_u64() instead. */
static inline uint64_t lib_rand(struct lib_tls *t)
{
	uint64_t s = t->rng;
	__uint128_t m;

	if (unlikely(!s))
		s = lib_rng_seed();
	s += UINT64_C(0xa0761d6478bd642f);
	t->rng = s;
	m = (__uint128_t)s * (s ^ UINT64_C(0xe7037ed1a0b428db));
	return (uint64_t)(m >> 64) ^ (uint64_t)m;
}

/* A span or trace id half: never 0 (0 means "none" in a record).  From
 * the thread's generator, inline: the ids of a sampled span are three
 * draws, and rand_u64() (xoshiro256** behind a TLS descriptor) cost ~30
 * instructions each. */
static inline uint64_t lib_id(struct lib_tls *t)
{
	uint64_t r = lib_rand(t);

	return r ? r : 1;
}

/* sample.c: the decision lib_root_sampled() could not make from the
 * thread's skip budget. */
int lib_root_slow(struct lib_tls *t) LIB_HIDDEN;
/* Something the sampling decision reads changed (the mode, N, R,
 * record_all): every thread's skip budget is void. */
void lib_sample_changed(void) LIB_HIDDEN;

/* Is the thread's next root passed as unsampled at once?  Its skip
 * budget, set under the current sampling generation, is not spent.  Then
 * take one root from it: one TLS load, a compare with the generation and
 * a decrement (no clock, no random number, no atomic). */
static inline int lib_root_skip(void)
{
	struct fay_fast_tls *f = lib_fast();

	if (likely(lib_skip(f)) && likely(f->gen == READ_ONCE(fay_fast_gen))) {
		f->budget--;
		return 1;
	}
	return 0;
}

/* Is a new root sampled?  1 in N: an independent trial per root with
 * probability 1/N (for a large N made as geometric gaps between sampled
 * roots, sample.c); rate mode: the token bucket.  An unsampled root is
 * counted (spans_unsampled). */
static inline int lib_root_sampled(struct lib_tls *t)
{
	if (lib_root_skip())
		return 0;
	return lib_root_slow(t);
}

/* clock.c: decide once whether the TSC can be used (fay_init calls it). */
void lib_clock_init(void);
#if defined(__x86_64__)
/* Retake the thread's pair (and maybe the rate); returns realtime ns. */
uint64_t lib_clock_slow(struct lib_tls *t) LIB_HIDDEN;
/* A span's timestamp: the TSC itself when ticks (the span records ticks,
 * SPAN_F_TICKS: the agent converts them, docs/ABI.md 1.2.2), else
 * CLOCK_REALTIME ns since the epoch, from the TSC when it can be.  Either
 * way the thread's pair is retaken when due (which publishes the line). */
static inline uint64_t lib_stamp(struct lib_tls *t, unsigned ticks)
{
	uint64_t now = __rdtsc(), d = now - t->clk.tsc, ns;

	if (likely(d < t->clk_limit))
		return ticks ? now : t->clk.ns + (uint64_t)tsc_delta_ns((int64_t)d, t->clk.mult);
	ns = lib_clock_slow(t);
	return ticks ? now : ns;
}

/* SPAN_F_TICKS when this thread's new spans may record ticks: the TSC is
 * the clock and the thread has a rate, which it has published in the
 * header (clock.c); else 0 (its spans record ns). */
static inline uint8_t lib_ticks_flag(const struct lib_tls *t)
{
	return t->clk_limit ? SPAN_F_TICKS : 0;
}
#else
static inline uint64_t lib_stamp(struct lib_tls *t, unsigned ticks)
{
	(void)t;
	(void)ticks;
	return clock_realtime_ns();
}

static inline uint8_t lib_ticks_flag(const struct lib_tls *t)
{
	(void)t;
	return 0;
}
#endif

/* traceparent.c */
int lib_tp_parse(const char *tp, uint64_t *hi, uint64_t *lo, uint64_t *span,
		 uint8_t *flags);
int lib_tp_format(char *buf, size_t len, uint64_t hi, uint64_t lo,
		  uint64_t span, uint8_t flags);

/* span.c: append one item to a record being built (buf of cap bytes,
 * *used of them taken), keeping f->nitems; an item that does not fit is
 * dropped and counted (f->dropped_items, SPAN_F_TRUNCATED, hdr->truncated
 * once per record). */
void lib_put(struct spanrec_fixed *f, uint8_t *buf, uint32_t cap,
	     uint32_t *used, unsigned type, uint64_t val,
	     const char *a, size_t alen, const char *b, size_t blen);
/* A root was not sampled: counted per thread, added to the header in
 * batches; this adds them. */
void lib_count_unsampled_slow(void) LIB_HIDDEN;
/* Give the thread's non-recording handles their state word (once is
 * enough: nothing else is ever written there). */
static inline void lib_nonrec_prepare(void)
{
	struct fay_fast_tls *f = lib_fast();

	for (unsigned i = 0; i < LIB_NR_HANDLES; i++)
		f->nr[i].state = LIB_NONREC;
}
/* span.c: write one finished record (fixed + items) to the thread's ring
 * under the recursion guard; counts every loss.  Returns 0 or -errno. */
int lib_write_record(struct spanrec_fixed *f, const void *items,
		     uint32_t items_len);
/* Has the guard been taken?  Counts the nested call when it was. */
static inline int lib_enter(void)
{
	if (unlikely(lib_t.nest)) {
		struct fay_shm_hdr *h = smp_load_acquire(&lib.hdr);

		if (h)
			atomic_add(&h->lost_nested, 1);
		return -EBUSY;
	}
	lib_t.nest = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return 0;
}

static inline void lib_leave(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	lib_t.nest = 0;
}

#endif
