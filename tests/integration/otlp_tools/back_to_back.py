#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""N small requests back to back on one keep-alive connection, written
the way a naive client writes them: no TCP_NODELAY, the request's head
and its body in two send()s (HTTP: headers, then body; gRPC: HEADERS,
then DATA).  A server that delays its ACK of the head holds the body
back ~40 ms (Nagle), once per request.

  back_to_back.py PORT MODE N
  MODE: otlp-pb | otlp-json (POST /v1/traces), zipkin (POST /api/v2/spans),
        grpc (TraceService/Export over HTTP/2 cleartext)

Prints "answered A of N in S s, p25 Q ms, median M ms, slowest X ms"; exits 1 when
a request is not answered with success (HTTP 2xx; gRPC: a response
message before the end of the stream)."""
import socket, struct, sys, time

port, mode, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
T0 = 1795600000000000000


def varint(v):
    b = b""
    while True:
        x, v = v & 0x7F, v >> 7
        if v:
            b += bytes([x | 0x80])
        else:
            return b + bytes([x])


def ld(no, data):
    return varint(no << 3 | 2) + varint(len(data)) + data


def pb_request(i):
    """An ExportTraceServiceRequest of one span, ids from i."""
    span = (ld(1, struct.pack(">QQ", 7, i + 1)) + ld(2, struct.pack(">Q", i + 1)) +
            ld(5, b"back-to-back") + varint(7 << 3 | 1) + struct.pack("<Q", T0 + i * 1000) +
            varint(8 << 3 | 1) + struct.pack("<Q", T0 + i * 1000 + 500))
    resource = ld(1, ld(1, b"service.name") + ld(2, ld(1, b"b2b")))
    return ld(1, ld(1, resource) + ld(2, ld(2, span)))


def json_request(i):
    return ('{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name",'
            '"value":{"stringValue":"b2b"}}]},"scopeSpans":[{"spans":[{"traceId":'
            '"%032x","spanId":"%016x","name":"back-to-back","startTimeUnixNano":"%d",'
            '"endTimeUnixNano":"%d"}]}]}]}' % (i + 1, i + 1, T0 + i * 1000, T0 + i * 1000 + 500)).encode()


def zipkin_request(i):
    return ('[{"traceId":"%016x","id":"%016x","name":"back-to-back","timestamp":%d,'
            '"duration":5,"localEndpoint":{"serviceName":"b2b"}}]' % (i + 1, i + 1, 1795600000000000 + i)).encode()


def http_call(s, path, ctype, body):
    s.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: %s\r\n"
              b"Content-Length: %d\r\n\r\n" % (path, port, ctype, len(body)))
    s.sendall(body)
    buf = b""
    while b"\r\n\r\n" not in buf:
        r = s.recv(65536)
        if not r:
            return False
        buf += r
    head, rest = buf.split(b"\r\n\r\n", 1)
    clen = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            clen = int(v)
    while len(rest) < clen:
        r = s.recv(65536)
        if not r:
            return False
        rest += r
    return head[9:10] == b"2"


def frame(typ, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([typ, flags]) + struct.pack(">I", sid) + payload


def hpack_literal(name, value):
    # literal header field without indexing, new name, no Huffman
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


class H2:
    def __init__(self, s):
        self.s, self.buf = s, b""
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))

    def read_frame(self):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            r = self.s.recv(65536)
            if not r:
                raise EOFError
            self.buf += r
        ln = int.from_bytes(self.buf[:3], "big")
        typ, flags, sid = self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
        payload, self.buf = self.buf[9:9 + ln], self.buf[9 + ln:]
        return typ, flags, sid, payload

    def call(self, sid, msg):
        hdrs = b"".join(hpack_literal(k, v) for k, v in (
            (b":method", b"POST"), (b":scheme", b"http"),
            (b":path", b"/opentelemetry.proto.collector.trace.v1.TraceService/Export"),
            (b":authority", b"127.0.0.1:%d" % port), (b"content-type", b"application/grpc"),
            (b"te", b"trailers")))
        self.s.sendall(frame(1, 0x4, sid, hdrs))                      # HEADERS, END_HEADERS
        self.s.sendall(frame(0, 0x1, sid, b"\0" + struct.pack(">I", len(msg)) + msg))  # DATA, END_STREAM
        got_message = False
        while True:
            typ, flags, fsid, payload = self.read_frame()
            if typ == 4 and not flags & 1:                           # SETTINGS: ACK it
                self.s.sendall(frame(4, 1, 0))
            elif typ == 6 and not flags & 1:                         # PING
                self.s.sendall(frame(6, 1, 0, payload))
            elif typ == 7 or (typ == 3 and fsid == sid):             # GOAWAY, RST_STREAM
                return False
            elif fsid == sid and typ == 0 and payload:
                got_message = True
            if fsid == sid and typ in (0, 1) and flags & 1:          # END_STREAM
                return got_message


s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
s.settimeout(30)
h2 = H2(s) if mode == "grpc" else None
times, answered = [], 0
t0 = time.monotonic()
for i in range(n):
    t = time.monotonic()
    if mode == "otlp-pb":
        good = http_call(s, b"/v1/traces", b"application/x-protobuf", pb_request(i))
    elif mode == "otlp-json":
        good = http_call(s, b"/v1/traces", b"application/json", json_request(i))
    elif mode == "zipkin":
        good = http_call(s, b"/api/v2/spans", b"application/json", zipkin_request(i))
    else:
        good = h2.call(2 * i + 1, pb_request(i))
    times.append(time.monotonic() - t)
    if not good:
        break
    answered += 1
elapsed = time.monotonic() - t0
times.sort()
print("answered %d of %d in %.3f s, p25 %.1f ms, median %.1f ms, slowest %.1f ms" %
      (answered, n, elapsed, times[len(times) // 4] * 1000, times[len(times) // 2] * 1000,
       times[-1] * 1000))
sys.exit(0 if answered == n else 1)
