/* SPDX-License-Identifier: MIT */
/*
 * OTLP traces <-> fay's span model (struct zspan), both directions, for
 * any transport: the collector's OTLP/HTTP and OTLP/gRPC receivers
 * (src/collector/otlp_*.c) and its --export otlp=URL.  Nothing here knows
 * the collector.
 *
 * One intermediate form of an ExportTraceServiceRequest that both front
 * ends produce,
 *
 *   otlp_json_dec.c  OTLP/JSON, streamed (common/json_tok.h) -> struct otlp_req
 *   otlp_pb_dec.c  OTLP/protobuf, read from the wire format -> struct otlp_req
 *   otlp_scan.c  a protobuf request's structure checked (the text of a
 *                refusal)
 *   otlp_pb.c    struct otlp_req and answers -> protobuf (protobuf-c, the
 *                one file that includes it)
 *   otlp_export.c  fay's spans -> struct otlp_req (--export), which
 *                otlp_json.c writes as OTLP/JSON and otlp_pb.c as protobuf
 *
 * and the one mapping to Zipkin spans (otlp_map.c) that both share, so
 * JSON, protobuf and gRPC requests give the same spans and the same
 * partial_success answers.
 *
 * A front end only decodes: what it cannot read is marked on the span
 * (otlp_span.bad) or the value (OTLP_V_BAD), and the mapping rejects that
 * span alone and counts it; the rest of the request is kept.  Everything
 * lives in the request's arena.
 */
#ifndef FAY_OTLP_OTLP_H
#define FAY_OTLP_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include "store/span.h"

/* Bytes (not NUL-terminated). */
struct otlp_str {
	const char *p;
	size_t len;
};

enum otlp_vtype {
	OTLP_V_NONE,            /* no value set */
	OTLP_V_STRING, OTLP_V_BOOL, OTLP_V_INT, OTLP_V_DOUBLE,
	OTLP_V_BYTES,           /* raw bytes (protobuf) */
	OTLP_V_BYTES_B64,       /* already base64 (OTLP/JSON's bytesValue) */
	OTLP_V_ARRAY, OTLP_V_KVLIST,
	OTLP_V_BAD,             /* present but not an AnyValue */
};

struct otlp_kv;

/* An AnyValue. */
struct otlp_value {
	enum otlp_vtype type;
	union {
		struct otlp_str s;              /* STRING, BYTES, BYTES_B64 */
		int b;
		int64_t i;
		double d;
		struct {
			struct otlp_value *v;
			size_t n;
		} arr;
		struct {
			struct otlp_kv *kv;
			size_t n;
		} kvl;
	} u;
};

struct otlp_kv {
	struct otlp_str key;
	struct otlp_value value;
};

struct otlp_event {
	uint64_t time_ns;
	struct otlp_str name;
	int has_name;
	struct otlp_kv *attrs;
	size_t nattrs;
};

/* Id lengths as sent: 16/8 are valid, 0 absent, anything else wrong. */
struct otlp_span {
	uint8_t trace_id[16], span_id[8], parent_id[8];
	size_t trace_len, span_len, parent_len;
	struct otlp_str name;
	int kind;                       /* 0..5 valid; -1 unknown */
	uint64_t start_ns, end_ns;
	struct otlp_kv *attrs;
	size_t nattrs;
	struct otlp_event *events;
	size_t nevents;
	size_t nlinks;                  /* links: decoded, not mapped (Zipkin has none) */
	int status_code;                /* 0..2 valid; -1 unknown */
	struct otlp_str status_msg;
	const char *bad;                /* the front end could not read a field:
					 * "name: expected a string" */
};

struct otlp_scope_spans {
	struct otlp_str scope_name, scope_version;
	struct otlp_span *spans;
	size_t nspans;
};

struct otlp_resource_spans {
	struct otlp_kv *attrs;          /* resource attributes */
	size_t nattrs;
	struct otlp_scope_spans *ss;
	size_t nss;
};

struct otlp_req {
	struct otlp_resource_spans *rs;
	size_t nrs;
};

/* Spans in the request (valid or not). */
size_t otlp_req_nspans(const struct otlp_req *r);

/*
 * The result of mapping a request: the valid spans (arena-allocated,
 * normalized), how many were rejected and why the first one was
 * ("resourceSpans[0].scopeSpans[1].spans[3].traceId: ...").
 */
struct otlp_result {
	struct zspan *spans;
	size_t nspans;
	size_t rejected;
	char first_error[512];
};

/*
 * Map r to Zipkin spans (OpenTelemetry's Zipkin transformation, see
 * otlp_map.c's header): every span that passes is kept, every other one is
 * counted in res->rejected.  The spans' strings point into r's strings
 * where they are kept as they are (keys, string values, names of events,
 * scope name and version): r's strings must live as long as the spans,
 * as the front ends' do (in the arena they decoded into, a).  Returns 0,
 * or -ENOMEM (nothing kept).
 */
int otlp_map(const struct otlp_req *r, struct zarena *a, struct otlp_result *res);

/*
 * Front ends.  Decode body into *r (arena-allocated).  Returns 0, or
 * -EINVAL when the body as a whole cannot be decoded (not JSON, not an
 * ExportTraceServiceRequest, nested deeper than OTLP_MAX_DEPTH) with the
 * reason in err (JSON: the byte, or the field's path), or -ENOMEM.  Per-span problems are not errors here: they
 * are marked for otlp_map().
 */
int otlp_json_decode(const char *body, size_t len, struct zarena *a,
		     struct otlp_req *r, char *err, size_t errlen);
int otlp_pb_decode(const void *body, size_t len, struct zarena *a,
		   struct otlp_req *r, char *err, size_t errlen);

/*
 * An OTLP/JSON id of n bytes (16: trace, 8: span) into out: 2n hex digits
 * (the spec), or base64 (24/12 characters, as older exporters wrote).
 * 0, or -EINVAL (out may be half written).
 */
int otlp_id_parse(const char *s, size_t len, uint8_t *out, size_t n);

/*
 * A proto3 JSON 64-bit number given as a string (timeUnixNano, intValue):
 * the len bytes of s (no NUL among them), read exactly as C's strtoull
 * (otlp_dec_u64) or strtoll (otlp_dec_i64) in base 10 read them, in the C
 * locale, when they must take the whole string: white space, one '+' or
 * '-', at least one digit, nothing after; strtoull's '-' negates modulo
 * 2^64 (but a string that starts with '-' is refused).  Refused (-EINVAL,
 * *out untouched): empty, OTLP_DEC_MAX bytes or more, no digit, any other
 * byte, beyond 2^64 - 1 (u64) or outside -2^63..2^63-1 (i64).  0 when read.
 */
#define OTLP_DEC_MAX 64
int otlp_dec_u64(const char *s, size_t len, uint64_t *out);
int otlp_dec_i64(const char *s, size_t len, int64_t *out);

/* AnyValues nest (arrays of arrays, maps of maps) at most this deep. */
#define OTLP_MAX_DEPTH 32

/*
 * otlp_scan.c: walk a protobuf ExportTraceServiceRequest without decoding
 * it.  0, or -EINVAL with the first problem in err ("body: field 2 at
 * byte 17 runs past the end of its message", "nested deeper than 32").
 */
int otlp_pb_scan(const void *body, size_t len, char *err, size_t errlen);

/*
 * The ExportTraceServiceRequest of r in protobuf (*out malloc'ed).  Values
 * are written with their types (OTLP_V_BYTES_B64 as a string).  0 or
 * -ENOMEM.
 */
int otlp_pb_encode(const struct otlp_req *r, void **out, size_t *outlen);

/*
 * The ExportTraceServiceResponse in protobuf: empty when rejected is 0,
 * else partial_success {rejected_spans, error_message msg}.  *out is
 * malloc'ed (possibly NULL when *outlen is 0).  0 or -ENOMEM.
 */
int otlp_pb_response(uint64_t rejected, const char *msg, void **out, size_t *outlen);

/*
 * A google.rpc.Status {code, message} in protobuf (the error body of
 * OTLP/HTTP protobuf answers, grpc-status-details-bin), with a RetryInfo
 * of retry_s seconds in its details when retry_s > 0.  *out malloc'ed.
 * 0 or -ENOMEM.
 */
int otlp_pb_status(int code, const char *msg, unsigned retry_s, void **out, size_t *outlen);

/* ---- export: fay's spans -> OTLP (--export otlp=URL, otlp-protobuf=URL) -- */

/*
 * otlp_export.c: the n spans as a request in a (arena-allocated): one
 * ResourceSpans per service, in the order the spans name them, the rules
 * in otlp_export.c's header.  Every value is a string (OTLP_V_STRING).
 * 0 or -ENOMEM.
 */
int otlp_req_from_zspans(const struct zspan *s, size_t n, struct zarena *a,
			 struct otlp_req *r);

/*
 * otlp_json.c: r as compact OTLP/JSON text (*out malloc'ed and
 * NUL-terminated, *outlen bytes before the NUL).  Attribute values must be
 * strings (what otlp_req_from_zspans() makes): another type is -EINVAL.
 * 0, -EINVAL or -ENOMEM.
 */
int otlp_json_encode(const struct otlp_req *r, char **out, size_t *outlen);

#endif
