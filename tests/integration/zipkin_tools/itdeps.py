#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Zipkin's storage tests of the dependency window (openzipkin/zipkin
zipkin-tests/src/main/java/zipkin2/storage/ITDependencies.java) against a
running collector: TestObjects.TRACE (tests/data/zipkin/test_objects.json)
with service names suffixed per test as ITDependencies does, each test's
trace on a day of its own, three days apart (TODAY = that day's midnight), and the windows and
links those tests assert.  TAP on stdout.  argv: URL TEST_OBJECTS_JSON"""
import copy, json, sys, time

from zapi import get, post

url, path = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
DAY = 86400000
today0 = int(time.time()) // 86400 * 86400 * 1000
n = failed = 0


def new_trace(k, suffix, tid):
    """newTrace(testSuffix) moved to TODAY = k days ago"""
    shift = (today0 - k * DAY - doc["today_ms"]) * 1000
    spans = copy.deepcopy(doc["trace"])
    for s in spans:
        s["traceId"] = tid
        s["timestamp"] += shift
        for a in s.get("annotations", []):
            a["timestamp"] += shift
        for e in ("localEndpoint", "remoteEndpoint"):
            if e in s:
                s[e]["serviceName"] += "_" + suffix
    return spans


def links(suffix):
    return sorted([("frontend_" + suffix, "backend_" + suffix, 1, 0),
                   ("backend_" + suffix, "db_" + suffix, 1, 1)])


def end_ts(trace):
    return max((s["timestamp"] + s.get("duration", 0)) // 1000 for s in trace)


def check(name, trace, end, lookback, want):
    global n, failed
    status = post(url, trace)
    got = sorted((l["parent"], l["child"], l["callCount"], l.get("errorCount", 0))
                 for l in get(url, "/api/v2/dependencies?endTs=%d&lookback=%d" % (end, lookback)))
    n += 1
    if status == 202 and got == want:
        print("ok %d - ITDependencies.%s" % (n, name))
    else:
        failed += 1
        print("not ok %d - ITDependencies.%s\n#   want %s\n#   got  %s" % (n, name, want, got))


t = new_trace(1, "gd", "1" * 32)
check("getDependencies", t, end_ts(t), DAY, links("gd"))
t = new_trace(4, "headless", "2" * 32)[1:]
check("dependencies_headlessTrace (the root span removed)", t, end_ts(t), DAY, links("headless"))
t = new_trace(7, "inside", "3" * 32)
start = min(s["timestamp"] for s in t) // 1000
check("endTsInsideTheTrace (whole traces, even past endTs)", t, start + 100, 200, links("inside"))
t = new_trace(10, "before", "4" * 32)
start = min(s["timestamp"] for s in t) // 1000
check("endTimeBeforeData", t, start - 1000, 1000, [])
t = new_trace(13, "after", "5" * 32)
check("lookbackAfterData", t, today0 - 13 * DAY + 2 * DAY, DAY, [])
# getDependencies_linksMixedTraceId: the server dropped the high half
tid = "6" * 16 + "0123456789abcdef"
t0 = (today0 - 16 * DAY) * 1000
mixed = [
    {"traceId": tid, "id": "1", "name": "get", "kind": "SERVER", "timestamp": t0,
     "duration": 350000, "localEndpoint": {"serviceName": "frontend_mixed", "ipv4": "127.0.0.1"}},
    {"traceId": tid[16:], "parentId": "1", "id": "2", "name": "get", "kind": "SERVER",
     "shared": True, "timestamp": t0 + 100000, "duration": 250000,
     "localEndpoint": {"serviceName": "backend_mixed", "ipv4": "192.168.99.101", "port": 9000}},
    {"traceId": tid, "parentId": "1", "id": "2", "kind": "CLIENT", "timestamp": t0 + 50000,
     "duration": 300000, "localEndpoint": {"serviceName": "frontend_mixed", "ipv4": "127.0.0.1"}},
]
check("getDependencies_linksMixedTraceId (128-bit and its 64-bit form are one trace)", mixed,
      end_ts(mixed), DAY, [("frontend_mixed", "backend_mixed", 1, 0)])
sys.exit(1 if failed else 0)
