/* SPDX-License-Identifier: MIT */
/*
 * ceph/blkin's C API (blkin-lib/zipkin_c.h), recorded by libfay.
 *
 * The names, types, struct layouts and macros a BlkKin program uses are
 * the same, so such a program builds unchanged against libfay: include
 * <fay/blkin.h> (or <zipkin_c.h> with -I<prefix>/include/fay) and link
 * -lfay.  Annotations go into libfay's shm rings instead of LTTng-UST:
 * each blkin_record() writes one span record at once (BlkKin has no "end")
 * flagged SPAN_F_PARTIAL; the collector merges the records of one span id
 * into a Zipkin span by Zipkin's V1 rule (cs/cr: client, sr/ss: server).
 *
 *   struct blkin_endpoint ep;
 *   struct blkin_trace t;
 *   blkin_init();
 *   blkin_init_endpoint(&ep, "10.0.0.1", 5000, "service a");
 *   blkin_init_new_trace(&t, "write", &ep);
 *   BLKIN_TIMESTAMP(&t, &ep, CLIENT_SEND);
 *   BLKIN_KEYVAL_STRING(&t, &ep, "object", "rbd.0001");
 *   BLKIN_TIMESTAMP(&t, &ep, CLIENT_RECV);
 *
 * Differences from ceph/blkin (a program cannot tell, except as noted):
 * - blkin_init() starts libfay (fay_init()) with the service named by
 *   $FAY_SERVICE or the program's name, unless fay_init() ran already.
 *   The environment of include/fay/trace.h applies (FAY_SAMPLE ...).
 * - Sampling: blkin_init_new_trace() and blkin_init_trace_info() ask the
 *   process's sampler (fay_set_sampling(), FAY_SAMPLE).  BlkKin's ids are
 *   non-negative, so the decision travels in the trace id's sign bit: a
 *   negative trace id is a trace not sampled, and its annotations are not
 *   recorded, here or in any process it reaches (children copy the id,
 *   blkin_pack_trace_info keeps it).  Traces from real BlkKin (positive
 *   ids) are always recorded.
 * - Ids come from a per-thread xoshiro generator seeded by getrandom(2).
 * - blkin_record() uses the annotation's endpoint, or the trace's when the
 *   annotation has none.
 */
#ifndef FAY_BLKIN_H
#define FAY_BLKIN_H

#include <stdint.h>
#include <asm/byteorder.h>

#if defined(FAY_BUILD_LIB)
#define BLKIN_API __attribute__((visibility("default")))
#else
#define BLKIN_API
#endif

/* Record a timestamp annotation "event" of trace at endp (now). */
#define BLKIN_TIMESTAMP(trace, endp, event)				\
	do {								\
		struct blkin_annotation __annot;			\
		blkin_init_timestamp_annotation(&__annot, event, endp);	\
		blkin_record(trace, &__annot);				\
	} while (0);

/* Record a string key-value annotation. */
#define BLKIN_KEYVAL_STRING(trace, endp, key, val)			\
	do {								\
		struct blkin_annotation __annot;			\
		blkin_init_string_annotation(&__annot, key, val, endp);	\
		blkin_record(trace, &__annot);				\
	} while (0);

/* Record an integer key-value annotation. */
#define BLKIN_KEYVAL_INTEGER(trace, endp, key, val)			\
	do {								\
		struct blkin_annotation __annot;			\
		blkin_init_integer_annotation(&__annot, key, val, endp);\
		blkin_record(trace, &__annot);				\
	} while (0);

#ifdef __cplusplus
extern "C" {
#endif

/* Zipkin's core annotations: "cs", "cr", "ss", "sr", "ws", "wr", "csf",
 * "crf", "ssf", "srf". */
BLKIN_API extern const char *const CLIENT_SEND;
BLKIN_API extern const char *const CLIENT_RECV;
BLKIN_API extern const char *const SERVER_SEND;
BLKIN_API extern const char *const SERVER_RECV;
BLKIN_API extern const char *const WIRE_SEND;
BLKIN_API extern const char *const WIRE_RECV;
BLKIN_API extern const char *const CLIENT_SEND_FRAGMENT;
BLKIN_API extern const char *const CLIENT_RECV_FRAGMENT;
BLKIN_API extern const char *const SERVER_SEND_FRAGMENT;
BLKIN_API extern const char *const SERVER_RECV_FRAGMENT;

/* Where an annotation happens.  The strings are not copied: they must
 * outlive the traces and annotations that point at the endpoint. */
struct blkin_endpoint {
	const char *ip;
	int16_t port;            /* Zipkin's port is a signed 16-bit integer */
	const char *name;        /* the service */
};

/* The ids that travel between layers and processes. */
struct blkin_trace_info {
	int64_t trace_id;
	int64_t span_id;
	int64_t parent_span_id;  /* 0 for a root */
};

/* The same, big-endian and packed, for the wire. */
struct blkin_trace_info_packed {
	__be64 trace_id;
	__be64 span_id;
	__be64 parent_span_id;
} __attribute__((packed));

/* A span: its name, ids and default endpoint. */
struct blkin_trace {
	const char *name;
	struct blkin_trace_info info;
	const struct blkin_endpoint *endpoint;
};

typedef enum {
	ANNOT_STRING = 0,
	ANNOT_INTEGER,
	ANNOT_TIMESTAMP
} blkin_annotation_type;

/* A key-value or timestamp annotation (for a timestamp, val_str is the
 * event). */
struct blkin_annotation {
	blkin_annotation_type type;
	const char *key;
	union {
		const char *val_str;
		int64_t val_int;
	};
	const struct blkin_endpoint *endpoint;
};

/** blkin_init() - start recording (see above).  Return: 0 or -errno. */
BLKIN_API int blkin_init(void);

/**
 * blkin_init_new_trace() - a new root span @name at @endpoint: new trace
 * id, span id = trace id, parent 0; sampled or not by the process's
 * sampler.  Return: 0, or -EINVAL when @new_trace is NULL.
 */
BLKIN_API int blkin_init_new_trace(struct blkin_trace *new_trace,
				   const char *name,
				   const struct blkin_endpoint *endpoint);

/** blkin_init_trace_info() - root ids as blkin_init_new_trace() makes them. */
BLKIN_API void blkin_init_trace_info(struct blkin_trace_info *trace_info);

/**
 * blkin_init_child() - @child becomes a span of @parent's trace whose
 * parent is @parent; @endpoint NULL takes @parent's.  Return: 0 or -EINVAL.
 */
BLKIN_API int blkin_init_child(struct blkin_trace *child,
			       const struct blkin_trace *parent,
			       const struct blkin_endpoint *endpoint,
			       const char *child_name);

/**
 * blkin_init_child_info() - as blkin_init_child(), from the parent's ids
 * (received from another process).  Return: 0, or -EINVAL when an
 * argument is NULL.
 */
BLKIN_API int blkin_init_child_info(struct blkin_trace *child,
				    const struct blkin_trace_info *info,
				    const struct blkin_endpoint *endpoint,
				    const char *child_name);

/** blkin_init_endpoint() - fill @endpoint (@ip NULL gives "NaN"). */
BLKIN_API int blkin_init_endpoint(struct blkin_endpoint *endpoint,
				  const char *ip, int16_t port, const char *name);

/** blkin_init_string_annotation() - @key = @val.  0 or -EINVAL. */
BLKIN_API int blkin_init_string_annotation(struct blkin_annotation *annotation,
					   const char *key, const char *val,
					   const struct blkin_endpoint *endpoint);

/** blkin_init_integer_annotation() - @key = @val.  0 or -EINVAL. */
BLKIN_API int blkin_init_integer_annotation(struct blkin_annotation *annotation,
					    const char *key, int64_t val,
					    const struct blkin_endpoint *endpoint);

/** blkin_init_timestamp_annotation() - @event happened.  0 or -EINVAL. */
BLKIN_API int blkin_init_timestamp_annotation(struct blkin_annotation *annot,
					      const char *event,
					      const struct blkin_endpoint *endpoint);

/**
 * blkin_record() - record @annotation of @trace now, as one partial span
 * record.  Return: 0 (also when the trace is not sampled or recording is
 * off), -EINVAL for a NULL or incomplete argument (no name, no endpoint,
 * an endpoint without ip or name, a NULL string, span id 0), or the
 * ring's error (-EBUSY every ring taken, -E2BIG too large), counted in the
 * shm header.
 */
BLKIN_API int blkin_record(const struct blkin_trace *trace,
			   const struct blkin_annotation *annotation);

/** blkin_get_trace_info() - copy @trace's ids to @info.  0 or -EINVAL. */
BLKIN_API int blkin_get_trace_info(const struct blkin_trace *trace,
				   struct blkin_trace_info *info);

/** blkin_set_trace_info() - set @trace's ids from @info.  0 or -EINVAL. */
BLKIN_API int blkin_set_trace_info(struct blkin_trace *trace,
				   const struct blkin_trace_info *info);

/** blkin_set_trace_properties() - set ids, name and endpoint.  0 or -EINVAL. */
BLKIN_API int blkin_set_trace_properties(struct blkin_trace *trace,
					 const struct blkin_trace_info *info,
					 const char *name,
					 const struct blkin_endpoint *endpoint);

/** blkin_pack_trace_info() - to big-endian for the wire.  0 or -EINVAL. */
BLKIN_API int blkin_pack_trace_info(const struct blkin_trace_info *info,
				    struct blkin_trace_info_packed *pinfo);

/** blkin_unpack_trace_info() - from the wire.  0 or -EINVAL. */
BLKIN_API int blkin_unpack_trace_info(const struct blkin_trace_info_packed *pinfo,
				      struct blkin_trace_info *info);

#ifdef __cplusplus
}
#endif

#endif
