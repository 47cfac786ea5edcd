/* SPDX-License-Identifier: MIT */
/*
 * The LTTng-UST peer of bench/bench_span.c: BlkKin's three event shapes
 * (provider "zipkin": timestamp, keyval_string, keyval_integer), with the
 * fields BlkKin logs on every annotation (trace name, service, port, ip,
 * trace/span/parent ids, then the event or the key and value).  Written
 * for this benchmark with the LTTng-UST 2.13 macros.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER zipkin

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "bench_span_lttng.h"

#if !defined(FAY_BENCH_SPAN_LTTNG_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define FAY_BENCH_SPAN_LTTNG_H

#include <stdint.h>
#include <lttng/tracepoint.h>

/* The fields every BlkKin annotation starts with. */
#define BENCH_ZIPKIN_ARGS \
	const char *, trace_name, const char *, service, int, port, \
	const char *, ip, long, trace, long, span, long, parent_span

#define BENCH_ZIPKIN_FIELDS \
	lttng_ust_field_string(trace_name, trace_name) \
	lttng_ust_field_string(service_name, service) \
	lttng_ust_field_integer(int, port_no, port) \
	lttng_ust_field_string(ip, ip) \
	lttng_ust_field_integer(long, trace_id, trace) \
	lttng_ust_field_integer(long, span_id, span) \
	lttng_ust_field_integer(long, parent_span_id, parent_span)

LTTNG_UST_TRACEPOINT_EVENT(zipkin, timestamp,
	LTTNG_UST_TP_ARGS(BENCH_ZIPKIN_ARGS, const char *, event),
	LTTNG_UST_TP_FIELDS(
		BENCH_ZIPKIN_FIELDS
		lttng_ust_field_string(event, event)
	)
)

LTTNG_UST_TRACEPOINT_EVENT(zipkin, keyval_string,
	LTTNG_UST_TP_ARGS(BENCH_ZIPKIN_ARGS, const char *, key, const char *, val),
	LTTNG_UST_TP_FIELDS(
		BENCH_ZIPKIN_FIELDS
		lttng_ust_field_string(key, key)
		lttng_ust_field_string(val, val)
	)
)

LTTNG_UST_TRACEPOINT_EVENT(zipkin, keyval_integer,
	LTTNG_UST_TP_ARGS(BENCH_ZIPKIN_ARGS, const char *, key, int64_t, val),
	LTTNG_UST_TP_FIELDS(
		BENCH_ZIPKIN_FIELDS
		lttng_ust_field_string(key, key)
		lttng_ust_field_integer(int64_t, val, val)
	)
)

#endif

#include <lttng/tracepoint-event.h>
