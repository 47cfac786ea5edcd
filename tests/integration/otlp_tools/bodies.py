#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Request bodies of N SDK-like spans (16 traces, 8 attributes and 2
events a span) in three encodings, written to files:

  bodies.py N OUT_PREFIX [TRACE_BASE]

OUT_PREFIX.json: OTLP/JSON, OUT_PREFIX.pb: OTLP protobuf (an
ExportTraceServiceRequest, encoded here by hand: no protobuf module
needed), OUT_PREFIX.zipkin.json: Zipkin v2 JSON; the same spans in
each.  TRACE_BASE (default 1) numbers the traces, so that two calls
with different bases make spans of different traces."""
import json, struct, sys

n, prefix = int(sys.argv[1]), sys.argv[2]
base = int(sys.argv[3]) if len(sys.argv) > 3 else 1
T0 = 1795600000000000000


def spans():
    for i in range(n):
        t0 = T0 + i * 1000000
        yield {"trace": base * 1000 + i % 16, "id": i + 1, "name": "op %d" % (i % 7),
               "start": t0, "end": t0 + 700000,
               "attrs": [("attr.%d" % k, "value %d of span %d" % (k, i)) for k in range(8)],
               "events": [(t0 + 1000 * e, "event %d" % e) for e in range(2)]}


def otlp_json():
    out = []
    for s in spans():
        out.append({"traceId": "%032x" % s["trace"], "spanId": "%016x" % s["id"],
                    "name": s["name"], "kind": 2,
                    "startTimeUnixNano": str(s["start"]), "endTimeUnixNano": str(s["end"]),
                    "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in s["attrs"]],
                    "events": [{"timeUnixNano": str(t), "name": e} for t, e in s["events"]]})
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "budget"}}]},
        "scopeSpans": [{"spans": out}]}]}).encode()


def varint(v):
    b = bytearray()
    while True:
        x = v & 0x7F
        v >>= 7
        if v:
            b.append(x | 0x80)
        else:
            b.append(x)
            return bytes(b)


def field(num, payload):        # a length-delimited field
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def fixed64(num, v):
    return varint(num << 3 | 1) + struct.pack("<Q", v)


def kv(k, v):                   # KeyValue{key, AnyValue{string_value}}
    return field(1, k.encode()) + field(2, field(1, v.encode()))


def otlp_pb():
    body = b""
    for s in spans():
        sp = (field(1, s["trace"].to_bytes(16, "big")) + field(2, s["id"].to_bytes(8, "big")) +
              field(5, s["name"].encode()) + varint(6 << 3) + varint(2) +
              fixed64(7, s["start"]) + fixed64(8, s["end"]) +
              b"".join(field(9, kv(k, v)) for k, v in s["attrs"]) +
              b"".join(field(11, fixed64(1, t) + field(2, e.encode())) for t, e in s["events"]))
        body += field(2, sp)    # ScopeSpans.spans
    res = field(1, field(1, kv("service.name", "budget")))      # Resource.attributes
    return field(1, res + field(2, body))   # ExportTraceServiceRequest.resource_spans


def zipkin():
    return json.dumps([{"traceId": "%032x" % s["trace"], "id": "%016x" % s["id"],
                        "name": s["name"], "kind": "SERVER",
                        "timestamp": s["start"] // 1000, "duration": (s["end"] - s["start"]) // 1000,
                        "localEndpoint": {"serviceName": "budget"},
                        "tags": dict(s["attrs"]),
                        "annotations": [{"timestamp": t // 1000, "value": e} for t, e in s["events"]]}
                       for s in spans()]).encode()


for ext, f in ((".json", otlp_json), (".pb", otlp_pb), (".zipkin.json", zipkin)):
    with open(prefix + ext, "wb") as out:
        out.write(f())
