/* SPDX-License-Identifier: MIT */
/*
 * The event a spans(...) query reads: one finished span, laid out as a
 * fixed context (like a tracepoint record) that the planner names with
 * tracepoint-style fields, so the code generator emits the same program
 * it emits for any source reading a context, and fay's in-process VM runs
 * it once per span the agent drains (engine/engine.h, engine_span_feed()).
 *
 *   offset  bytes
 *        0      8   time       start, CLOCK_REALTIME ns since the epoch
 *        8      8   duration   ns
 *       16      8   trace_id   the low 64 bits of the trace id
 *       24      8   span_id
 *       32      8   parent_id  0 for a root span
 *       40      8   pid        the process that recorded the span
 *       48      8   error      1 when the span is marked an error (the
 *                              SPAN_F_ERROR flag or an "error" tag), else 0
 *       56      8   trace_id_hi  the high 64 bits of the trace id
 *       64     16   kind       "server" "client" "producer" "consumer" or ""
 *       80     64   name       NUL padded; a longer name is cut to 64 bytes
 *      144     64   service    the span's local endpoint, else the process's
 *      208     64   cgroup     the process's cgroup v2 path, "" when unknown
 *                              (a longer one keeps its end after "...", as
 *                              s.cgroup of a probe)
 *      272     64   container  the container that path names (common/cgroup.h),
 *                              "" for the host's processes
 *      336  64 * N  tag        one slot per key the query names with
 *                              sp.tag("KEY"), in the order sema met them:
 *                              the value as text (an integer tag in
 *                              decimal), "" when the span has no such tag
 *
 * Everything lives in the query's arena or is filled by the caller; nothing
 * here allocates at fill time (the agent fills contexts on its drain
 * thread).
 */
#ifndef FAY_QUERY_SPANCTX_H
#define FAY_QUERY_SPANCTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/spanrec.h"
#include "query/query.h"

#define SPANCTX_KIND_LEN	16
#define SPANCTX_STR		QUERY_STR_MAX
#define SPANCTX_FIXED		336	/* bytes before the first tag slot */

struct plan;

/* The context field for a built-in field of spans(...) (F_TIME, F_DURATION,
 * F_TRACE_ID, F_TRACE_HI, F_SPAN_ID, F_PARENT_ID, F_PID, F_ERROR, F_KIND,
 * F_NAME, F_SERVICE, F_CGROUP, F_CONTAINER), or NULL for one the context does not hold (F_HOST is a
 * constant of the query). */
const struct tp_field *spanctx_field(enum field_id f);

/* Bytes of the context of a query naming ntags tag keys. */
size_t spanctx_size(int ntags);

/* The kind as the query sees it ("server" ...; "" for unset or unknown). */
const char *spanctx_kind_name(unsigned kind);

/*
 * Whether span r, recorded by a process whose service is proc_service
 * (may be NULL), is one plan p asks for: spans("X") takes the spans whose
 * service (their local endpoint's, else their process's) matches X, a
 * service name or a shell pattern (fnmatch(3): spans("blocker-*")); spans
 * takes all.
 */
bool spanctx_match(const struct plan *p, const struct spanrec *r, const char *proc_service);

/*
 * Fill ctx (spanctx_size(p->ntags) bytes, overwritten entirely) with span
 * r of process pid, whose service is proc_service when the span names no
 * local endpoint, whose cgroup path is cgroup and container container
 * (either NULL or "": none known; a long path is cut as the layout says).
 */
void spanctx_fill(const struct plan *p, const struct spanrec *r,
		  const char *proc_service, uint32_t pid, const char *cgroup,
		  const char *container, void *ctx);

#endif
