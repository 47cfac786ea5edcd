/* SPDX-License-Identifier: MIT */
/*
 * libfay: Dapper-style request tracing for C programs.
 *
 *   fay_init("mapperd", "10.0.0.7", 7001);
 *   struct fay_span *s = fay_span_root("write");
 *   fay_span_tag(s, "object", "rbd.0001");
 *   fay_span_event(s, "queued");
 *   ...
 *   char tp[FAY_TRACEPARENT_LEN];
 *   fay_span_traceparent(s, tp, sizeof(tp));   // send tp with the request
 *   fay_span_end(s);
 *
 * and on the other side  fay_span_remote(tp_received, "handle_write").
 *
 * Spans are recorded into a shared-memory file under $FAY_SHM_DIR (default
 * /dev/shm), one lock-free ring per thread, which `fay agent` drains and
 * ships to `fay collector`.  Recording never blocks, never takes a lock,
 * never allocates and makes no system call once a thread has its ring.
 * Every function here is safe to call with a NULL span (it does nothing),
 * and before fay_init() (spans are then not recorded).
 *
 * Environment (read by fay_init):
 *   FAY_SAMPLE     "N" records 1 root in N (1 = all, 0 = none);
 *                  "rate:R" records about R traces per second (adaptive).
 *                  Overrides fay_set_sampling().
 *   FAY_SHM_DIR    where the shm file goes (default /dev/shm).
 *   FAY_SERVICE    overrides the service name given to fay_init().
 *   FAY_DISABLE=1  record nothing (spans still propagate context).
 *   FAY_RECORD     "all" records the spans sampling did not choose too,
 *                  marked unsampled: the agent keeps them on the host
 *                  (fay agent --flight) for fay capture instead of
 *                  shipping them; "sampled" (the default) records the
 *                  sampled ones only.  Sampling and propagation are
 *                  unchanged (docs/ABI.md 2.4).
 *   FAY_RINGS      rings in the file, one per recording thread (default
 *                  64, 1..4096); a thread that finds every ring taken
 *                  counts its spans in lost_no_ring.
 *   FAY_RING_KB    size of each ring in KiB, a power of two (default 1024
 *                  = 16384 slots of 64 bytes, 4..65536): about 5000
 *                  BlkKin-style records or 2000 spans with a few tags,
 *                  the backlog a thread may build between two drains.
 *   FAY_POOL       span handles: spans open at once in the process
 *                  (default 4096, 1..1048576); beyond, spans are not
 *                  recorded (lost_no_handle) but still propagate.
 * A malformed value makes fay_init() return -EINVAL and create nothing.
 *
 * The file is named fay-<pid>-<16 hex>.shm, mode 0600, sparse (only pages
 * touched cost memory), and is left in place at exit for the agent to
 * drain and remove.  A child made by fork() never writes into its
 * parent's file: it gets its own at its first recorded span (spans it
 * inherited open are ended by the parent, not by it).  Unsampled spans
 * carry their ids in a few per-thread handles that are reused in turn:
 * keep at most 8 unsampled spans open at once per thread, or the oldest
 * loses its ids (its propagation, never memory safety).  libfay keeps
 * about 490 bytes of initial-exec thread-local storage; when it is
 * dlopen()ed that comes from glibc's static TLS surplus.
 * See docs/ABI.md for the file format and docs/ARCHITECTURE.md for the path
 * a span takes from here to the UI.
 */
#ifndef FAY_TRACE_H
#define FAY_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FAY_BUILD_LIB)
#define FAY_API __attribute__((visibility("default")))
#else
#define FAY_API
#endif

/* The span calls a request path makes are called through the GOT, not a
 * PLT stub (resolved at load: one jump less per call, a fifth of an
 * unsampled span); where the compiler knows the attribute, outside
 * libfay. */
#define FAY_HOT
#if !defined(FAY_BUILD_LIB) && defined(__has_attribute)
#if __has_attribute(noplt)
#undef FAY_HOT
#define FAY_HOT __attribute__((noplt))
#endif
#endif

struct fay_span;

/* "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>" and a NUL. */
#define FAY_TRACEPARENT_LEN 56

/**
 * fay_init() - start recording for this process.
 * @service: the local endpoint's service name ("mapperd"); required.
 * @ip: the endpoint's IPv4 or IPv6 address as text, or NULL.
 * @port: the endpoint's port, or 0.
 *
 * Creates the process's shm file.  Calling it again changes the endpoint.
 * Return: 0, or -errno (-EINVAL on a bad argument, or the error from
 * creating the shm file); spans are not recorded after a failure, but
 * context still propagates.
 */
FAY_API int fay_init(const char *service, const char *ip, int port);

/**
 * fay_set_sampling() - record one root span (and its whole trace) in N.
 * 1 records all, 0 records none.  The decision is made once per trace, at
 * the root, and travels with the context.  FAY_SAMPLE overrides it.
 */
FAY_API void fay_set_sampling(unsigned one_in_n);

/**
 * fay_set_sampling_rate() - adaptive sampling: aim for about
 * @traces_per_sec sampled traces per second for this process.
 */
FAY_API void fay_set_sampling_rate(double traces_per_sec);

/**
 * fay_span_root() - begin a new trace: a root span named @name, sampled
 * according to fay_set_sampling().  The result is never NULL after
 * fay_init() (an unsampled span still carries ids for propagation) and must
 * be passed to fay_span_end() exactly once.
 */
FAY_API FAY_HOT struct fay_span *fay_span_root(const char *name);

/**
 * fay_span_child() - begin a span whose parent is @parent (same trace,
 * same sampling decision).  NULL parent gives NULL.
 */
FAY_API FAY_HOT struct fay_span *fay_span_child(const struct fay_span *parent,
					const char *name);

/**
 * fay_span_remote() - begin a span continuing a trace from another process:
 * @traceparent is a W3C traceparent header value.  Its sampled flag decides
 * whether this span is recorded.  A missing or malformed @traceparent
 * starts a new root instead (and counts it).
 */
FAY_API FAY_HOT struct fay_span *fay_span_remote(const char *traceparent,
					 const char *name);

/**
 * fay_span_traceparent() - write @s's context as a W3C traceparent value
 * into @buf (@len >= FAY_TRACEPARENT_LEN).  Works for unsampled spans too.
 * Return: the length written, or -EINVAL / -ENOSPC.
 */
FAY_API int fay_span_traceparent(const struct fay_span *s, char *buf, size_t len);

/** fay_span_event() - a timestamp annotation ("queued", "cs", "sr" ...). */
FAY_API FAY_HOT void fay_span_event(struct fay_span *s, const char *event);

/** fay_span_tag() - a key-value annotation (Zipkin tag). */
FAY_API FAY_HOT void fay_span_tag(struct fay_span *s, const char *key, const char *value);

/** fay_span_tag_int() - an integer key-value annotation. */
FAY_API FAY_HOT void fay_span_tag_int(struct fay_span *s, const char *key, int64_t value);

/**
 * fay_span_end() - finish @s: its duration is taken now and it is written
 * to this thread's ring.  @s must not be used afterwards.
 */
FAY_API FAY_HOT void fay_span_end(struct fay_span *s);

/* What fay_current_span() fills (version 1; docs/ABI.md, "The current
 * span"). */
#define FAY_CURRENT_VERSION 1
struct fay_current {
	uint64_t trace_hi, trace_lo;
	uint64_t span_id;
	char name[64];		/* cut to 63 bytes, NUL padded */
};

/**
 * fay_current_span() - the calling thread's current span, for tracers
 * running in the process (fay's inline probes: trace_id and span_name of
 * a function(...) event).  The current span is the innermost span this
 * thread began (and libfay records) that has not ended; spans ended on
 * another thread stop being current at once; up to 8 levels of nesting
 * are tracked (deeper spans leave the 8th current).  Unsampled spans
 * are not recorded and never current (unless FAY_RECORD=all records
 * them).  Async-signal-safe, no lock, no
 * allocation; @version is FAY_CURRENT_VERSION.
 * Return: 0 with *@out filled, -ENOENT (none: *@out zeroed), -EINVAL (a
 * version or size this libfay does not know).
 */
FAY_API int fay_current_span(struct fay_current *out, size_t size, int version);

/*
 * The unsampled path, inline (docs/ABI.md 3.8).  An unsampled root and the
 * event, tag and end calls on a span that is not recorded cost no call
 * into libfay: fay_span_root() takes a root from the thread's skip budget
 * (the unsampled roots libfay's sampler has already decided on, set only
 * under the sampling generation fay_fast_gen) and hands out one of the
 * thread's non-recording handles; event, tag and end call libfay only for
 * a span being recorded.  Everything else, and every decision the budget
 * cannot make, is the exported function of the same name.
 *
 * What these functions touch is ABI, versioned by its symbols
 * (LIBFAY_0.3.0: fay_fast_tls_1 and fay_fast_gen): a new layout gets new
 * names.  It is no API: nothing but the functions below may touch it.
 * Define FAY_NO_INLINE before including this header for plain calls (a
 * program built so runs with a libfay older than 0.3.0).
 */
#if !defined(FAY_BUILD_LIB) && !defined(FAY_NO_INLINE) && defined(__GNUC__) && \
	(defined(__x86_64__) || defined(__aarch64__))
#define FAY_FAST 1
#endif

#define FAY_FAST_OPEN   1u          /* a recording handle's first word */
#define FAY_FAST_NONREC 0x4e4f4e52u /* a non-recording handle's */
#define FAY_FAST_FRESH  0x80u       /* nonrec flags: no ids made yet */
#define FAY_FAST_NR     8u          /* non-recording handles per thread */

/* A non-recording handle: a span that is not recorded, carrying its ids
 * for propagation (made on demand).  Its first word is where a recording
 * handle (struct fay_pool_slot, docs/ABI.md 1.3) has its state. */
struct fay_fast_nonrec {
	uint32_t state;         /* FAY_FAST_NONREC, set by libfay */
	uint8_t flags;          /* 1: sampled upstream; FAY_FAST_FRESH */
	uint8_t _pad[3];
	uint64_t trace_hi, trace_lo;
	uint64_t span_id;       /* 0: made on demand */
};

/* A thread's unsampled-root state. */
struct fay_fast_tls {
	/* bits 0-31: roots fay_span_root() may still pass as unsampled;
	 * bits 32-63: the next non-recording handle (mod FAY_FAST_NR) */
	uint64_t budget;
	uint32_t gen;           /* fay_fast_gen the budget holds under, 0 none */
	uint32_t _pad;
	struct fay_fast_nonrec nr[FAY_FAST_NR];
};

/* fay_span_root(), fay_span_event(), fay_span_tag() with the strings'
 * lengths known (len == strlen(str); NULL strings as the plain calls):
 * the inline path calls them for constant strings, whose lengths the
 * compiler knows.  ABI, not API (LIBFAY_0.3.0). */
FAY_API FAY_HOT struct fay_span *fay_fast_root_n(const char *name, size_t len);
FAY_API FAY_HOT void fay_fast_event_n(struct fay_span *s, const char *event, size_t len);
FAY_API FAY_HOT void fay_fast_tag_n(struct fay_span *s, const char *key, size_t klen,
				    const char *value, size_t vlen);

#ifdef FAY_FAST
extern __thread struct fay_fast_tls fay_fast_tls_1
	__attribute__((tls_model("initial-exec")));
extern uint32_t fay_fast_gen;

/* strlen(s), 0 for NULL: a constant for a constant string (or NULL),
 * which FAY_FAST_CONST() tells once the inline function is inlined. */
#define FAY_FAST_LEN(s)   __builtin_strlen((s) ? (s) : "")
#define FAY_FAST_CONST(s) __builtin_constant_p(FAY_FAST_LEN(s))

static inline struct fay_span *fay_fast_root(const char *name)
{
	struct fay_fast_tls *t = &fay_fast_tls_1;
	uint64_t b = t->budget;

	if (__builtin_expect((uint32_t)b != 0, 1) &&
	    __builtin_expect(t->gen == __atomic_load_n(&fay_fast_gen, __ATOMIC_RELAXED), 1)) {
		struct fay_fast_nonrec *n = &t->nr[(b >> 32) % FAY_FAST_NR];

		t->budget = b + ((uint64_t)1 << 32) - 1;
		n->flags = FAY_FAST_FRESH;
		return (struct fay_span *)n;
	}
	if (FAY_FAST_CONST(name))
		return fay_fast_root_n(name, FAY_FAST_LEN(name));
	return (fay_span_root)(name);
}

/* A plain load: a span is used by one thread at a time (the API's rule),
 * and the compiler may then test an unsampled span's handle once for the
 * calls that follow its root. */
static inline int fay_fast_open(const struct fay_span *s)
{
	return s && __builtin_expect(*(const uint32_t *)(const void *)s == FAY_FAST_OPEN, 0);
}

static inline void fay_fast_event(struct fay_span *s, const char *event)
{
	if (!fay_fast_open(s))
		return;
	if (FAY_FAST_CONST(event))
		fay_fast_event_n(s, event, FAY_FAST_LEN(event));
	else
		(fay_span_event)(s, event);
}

static inline void fay_fast_tag(struct fay_span *s, const char *key, const char *value)
{
	if (!fay_fast_open(s))
		return;
	if (FAY_FAST_CONST(key) && FAY_FAST_CONST(value))
		fay_fast_tag_n(s, key, FAY_FAST_LEN(key), value, FAY_FAST_LEN(value));
	else
		(fay_span_tag)(s, key, value);
}

static inline void fay_fast_tag_int(struct fay_span *s, const char *key, int64_t value)
{
	if (fay_fast_open(s))
		(fay_span_tag_int)(s, key, value);
}

static inline void fay_fast_end(struct fay_span *s)
{
	if (fay_fast_open(s))
		(fay_span_end)(s);
}

/* Function-like: &fay_span_end and (fay_span_end)(s) still name the
 * exported functions. */
#define fay_span_root(name)            fay_fast_root(name)
#define fay_span_event(s, event)       fay_fast_event(s, event)
#define fay_span_tag(s, key, value)    fay_fast_tag(s, key, value)
#define fay_span_tag_int(s, key, value) fay_fast_tag_int(s, key, value)
#define fay_span_end(s)                fay_fast_end(s)
#endif

#ifdef __cplusplus
}
#endif

#endif
