#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The page faults a collector takes a request, once warm: N OTLP/HTTP
JSON requests of S spans each (an SDK-like batch: 16 traces, 8
attributes and 2 events a span) back to back on each of C keep-alive
connections at once; the collector's minor faults (/proc/PID/stat,
field 10) are read before and after the second half of them.

  page_faults.py PORT PID N S C

Prints "faults a request F (R requests of B bytes, M MiB of pages a
request)"; exits 1 when a request is not answered with 2xx."""
import http.client, sys, threading

port, pid, n, spans, conns = (int(a) for a in sys.argv[1:6])
T0 = 1795600000000000000


def body(r):
    out = []
    for i in range(spans):
        t = r * spans + i
        attrs = ",".join('{"key":"attr.%d","value":{"stringValue":"value %d of span %d"}}'
                         % (k, k, t) for k in range(8))
        events = ",".join('{"timeUnixNano":"%d","name":"event %d"}' % (T0 + t * 1000 + e, e)
                          for e in range(2))
        out.append('{"traceId":"%032x","spanId":"%016x","name":"op %d","kind":2,'
                   '"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s],'
                   '"events":[%s]}' % (r * 16 + i % 16 + 1, t + 1, i % 7, T0 + t * 1000,
                                       T0 + t * 1000 + 700, attrs, events))
    return ('{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name",'
            '"value":{"stringValue":"pages"}}]},"scopeSpans":[{"scope":{"name":"t"},'
            '"spans":[%s]}]}]}' % ",".join(out)).encode()


def minflt():
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


bodies = [body(r) for r in range(n * conns)]
half = threading.Barrier(conns + 1)
done = threading.Barrier(conns + 1)
bad = []


def client(k):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for r in range(n):
        if r == n // 2:
            half.wait()
            half.wait()
        c.request("POST", "/v1/traces", bodies[k * n + r], {"Content-Type": "application/json"})
        a = c.getresponse()
        a.read()
        if a.status // 100 != 2:
            bad.append("connection %d request %d: HTTP %d" % (k, r, a.status))
            break
    done.wait()


for k in range(conns):
    threading.Thread(target=client, args=(k,), daemon=True).start()
half.wait()        # every connection has sent its first half
f0 = minflt()
half.wait()
done.wait()
if bad:
    print("; ".join(bad))
    sys.exit(1)
m = (n - n // 2) * conns
f = (minflt() - f0) / m
print("faults a request %.1f (%d requests of %d bytes on %d connections, %.2f MiB of pages a request)"
      % (f, m, len(bodies[-1]), conns, f * 4096 / (1 << 20)))
