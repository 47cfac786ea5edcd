#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Seeds of fuzz_otlp_pb (tests/fuzz/corpus/otlp_pb/): OTLP protobuf
# ExportTraceServiceRequests written field by field, each showing a rule
# the direct decoder must share with protobuf-c (merges, unknown fields,
# wire types, NULs, UTF-8, nesting).  Usage: otlp_pb_seeds.py DIR
import os
import struct
import sys


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def key(num, wt):
    return varint(num << 3 | wt)


def ld(num, payload):
    return key(num, 2) + varint(len(payload)) + payload


def vi(num, v):
    return key(num, 0) + varint(v & 0xFFFFFFFFFFFFFFFF)


def f64(num, v):
    return key(num, 1) + struct.pack("<Q", v)


def f32(num, v):
    return key(num, 5) + struct.pack("<I", v)


def s(num, text):
    return ld(num, text if isinstance(text, bytes) else text.encode())


def anyv(kind, v):
    if kind == "s":
        return s(1, v)
    if kind == "b":
        return vi(2, v)
    if kind == "i":
        return vi(3, v)
    if kind == "d":
        return key(4, 1) + struct.pack("<d", v)
    if kind == "a":
        return ld(5, b"".join(ld(1, x) for x in v))
    if kind == "k":
        return ld(6, b"".join(ld(1, x) for x in v))
    if kind == "y":
        return ld(7, v)
    return b""


def kv(k, value=None):
    return s(1, k) + (ld(2, value) if value is not None else b"")


def span(tid=b"\x01" * 16, sid=b"\x02" * 8, name="op", extra=b"", attrs=()):
    body = ld(1, tid) + ld(2, sid) + s(5, name) + vi(6, 2) + f64(7, 1700000000000000000) + \
        f64(8, 1700000000001000000)
    for a in attrs:
        body += ld(9, a)
    return body + extra


def req(spans, res_attrs=(kv("service.name", anyv("s", "svc")),), scope=s(1, "lib") + s(2, "1.0"),
        rs_extra=b"", ss_extra=b""):
    res = b"".join(ld(1, a) for a in res_attrs)
    ss = ld(1, scope) + b"".join(ld(2, sp) for sp in spans) + ss_extra
    rs = ld(1, res) + ld(2, ss) + rs_extra
    return ld(1, rs)


seeds = {
    "plain": req([span(), span(sid=b"\x03" * 8, extra=ld(4, b"\x02" * 8))]),
    "every-value": req([span(attrs=[
        kv("s", anyv("s", "x")), kv("b", anyv("b", 1)), kv("i", anyv("i", -5)),
        kv("d", anyv("d", 1.5)), kv("y", anyv("y", b"\0\1")),
        kv("a", anyv("a", [anyv("s", "p"), anyv("i", 2), anyv("a", [anyv("b", 0)])])),
        kv("k", anyv("k", [kv("n", anyv("s", "v")), kv("e", anyv("b", 0))]))],
        extra=ld(11, f64(1, 5) + s(2, "ev") + ld(3, kv("ek", anyv("s", "ev")))) +
        ld(13, ld(1, b"\x05" * 16) + ld(2, b"\x06" * 8) + s(3, "ts") +
           ld(4, kv("lk", anyv("i", 1))) + vi(5, 1) + f32(6, 1)) +
        ld(15, s(2, "broken") + vi(3, 2)) + vi(10, 1) + vi(12, 1) + vi(14, 1) +
        f32(16, 1) + s(3, "tracestate"))],
        scope=s(1, "lib") + s(2, "1.0") + ld(3, kv("sk", anyv("s", "v"))) + vi(4, 1),
        rs_extra=s(3, "https://schema"), ss_extra=s(3, "https://schema")),
    "merges": req([span(extra=ld(15, s(2, "first") + vi(3, 2)) + ld(15, vi(3, 1)),
                        attrs=[kv("v") + ld(2, anyv("i", 7)) + ld(2, b""),
                               kv("w") + ld(2, anyv("s", "x")) + ld(2, b""),
                               kv("z") + ld(2, anyv("s", "x")) + ld(2, anyv("i", 1))])],
                  scope=s(1, "lib")) +
    ld(1, ld(1, ld(1, kv("service.name", anyv("s", "a")))) + ld(1, ld(1, kv("b", anyv("i", 1)))) +
       ld(2, ld(1, s(1, "one")) + ld(1, s(2, "v2")) + ld(2, span()))),
    "empty-value": req([span(attrs=[kv("none", b""), kv("k", anyv("s", "v"))])]),
    "nul-in-name": req([span(name=b"a\0b", attrs=[kv(b"k\0x", anyv("s", b"v\0w"))])]),
    "two-empty-values": req([span(attrs=[kv("v") + ld(2, b"") + ld(2, b"")])]),
    "unknown-fields": req([span(extra=vi(100, 1) + f64(101, 2) + s(102, "x") + f32(103, 3) +
                                key(2**28, 0) + b"\x01")]) + vi(2, 5) + s(9, "y"),
    "nul-and-utf8": req([span(name=b"a\0b", attrs=[kv(b"k\0x", anyv("s", b"\xff"))]),
                         span(name=b"\xc3\x28")]),
    "bad-utf8-resource": req([span()], res_attrs=(kv("service.name", anyv("s", b"\xe2\x82")),)),
    "bool-any-wire": req([span(attrs=[kv("b", key(2, 2) + b"\x01\x00"),
                                      kv("c", key(2, 1) + b"\x00" * 8),
                                      kv("d", key(2, 5) + b"\x80\x00\x00\x00")])]),
    "wrong-wire-type": req([span(extra=vi(5, 1))]),
    "long-key": req([span()]) + b"\x88\x80\x80\x80\x80\x00\x00",
    "overlong-key": req([span()]) + b"\x88\x80\x80\x80\x00" + b"\x00",
    "group": req([span()]) + key(7, 3) + key(7, 4),
    "deep": req([span(attrs=[kv("deep", (lambda f: f(f, 31))(
        lambda f, n: anyv("a", [f(f, n - 1)]) if n else anyv("i", 1)))])]),
    "truncated": req([span()])[:-3],
    "kind-status-range": req([span(extra=vi(6, 9) + ld(15, vi(3, 2**32 - 1)))]),
}

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, body in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(body)
