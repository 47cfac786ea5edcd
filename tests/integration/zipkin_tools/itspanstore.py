#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cases of Zipkin's storage tests of search and read-back
(openzipkin/zipkin zipkin-tests/src/main/java/zipkin2/storage/ITSpanStore.java,
with zipkin-tests' TestObjects: spanBuilder(), newClientSpan(),
requestBuilder() = endTs TODAY + DAY, lookback 2 DAYs, limit 100) against
a running collector with an empty store, through /api/v2/traces and
/api/v2/trace/ID.  Each case has its own service name suffix and trace
ids, as in Zipkin.  TAP on stdout.  argv: URL"""
import json, sys, time, urllib.parse

from zapi import Tap, get, post

url = sys.argv[1]
DAY = 86400000
TODAY = int(time.time()) // 86400 * 86400 * 1000
tap = Tap("ITSpanStore.")
check = tap.check
tid_no = 0


def new_trace_id():
    global tid_no
    tid_no += 1
    return "%016x" % (0x5e0000 + tid_no)


def span_builder(sfx, **kw):
    """spanBuilder(suffix): name get, TODAY + 100 us, 200 ms, frontend, environment=test"""
    s = {"traceId": new_trace_id(), "id": "0000000000000001", "name": "get",
         "timestamp": TODAY * 1000 + 100, "duration": 200000,
         "localEndpoint": {"serviceName": "frontend_" + sfx, "ipv4": "127.0.0.1"},
         "tags": {"environment": "test"}}
    s.update(kw)
    return s


def client_span(sfx):
    """newClientSpan(suffix)"""
    return span_builder(sfx, kind="CLIENT", name="get /foo",
                        remoteEndpoint={"serviceName": "backend" + sfx, "ipv4": "192.168.99.101",
                                        "port": 9000},
                        tags={"http.method": "GET", "http.path": "/foo"})


def traces(**q):
    q.update(endTs=TODAY + DAY, lookback=2 * DAY, limit=100)
    return get(url, "/api/v2/traces?" + urllib.parse.urlencode(q))


def key(s):
    return json.dumps(s, sort_keys=True)


def same(a, b):
    return sorted(map(key, a)) == sorted(map(key, b))


def found(ts, spans):
    """the trace of spans is among ts, span for span"""
    return any(same(t, spans) for t in ts)


# readback_minimalErrorSpan
svc = "isao01_minimal"
err = {"traceId": new_trace_id(), "id": "0000000000000001", "timestamp": TODAY * 1000,
       "localEndpoint": {"serviceName": svc}, "kind": "CLIENT", "tags": {"error": ""}}
post(url, [err])
check(found(traces(serviceName=svc), [err]), "readback_minimalErrorSpan: by serviceName")
check(found(traces(serviceName=svc, annotationQuery="error"), [err]),
      "readback_minimalErrorSpan: annotationQuery=error")
check(traces(serviceName=svc, annotationQuery="error=1") == [],
      "readback_minimalErrorSpan: annotationQuery=error=1 finds nothing")
check(same(get(url, "/api/v2/trace/" + err["traceId"]), [err]), "readback_minimalErrorSpan: getTrace")

# getTraces_lateDuration: the duration arrives in a second fragment
cs = client_span("late")
missing = dict(cs)
del missing["duration"]
late = {k: cs[k] for k in ("traceId", "id", "timestamp", "duration", "localEndpoint")}
post(url, [missing])
post(url, [late])
check(traces(minDuration=cs["duration"] + 1) == [],
      "getTraces_lateDuration: minDuration above it finds nothing")
got = traces(minDuration=cs["duration"])
check(found(got, [late, missing]), "getTraces_lateDuration: minDuration = the late duration",
      "got %s" % got)

# getTraces_absentWhenNoTimestamp
span = span_builder("absent")
no_ts = {k: v for k, v in span.items() if k not in ("timestamp", "duration")}
post(url, [no_ts])
s = "frontend_absent"
check(traces(serviceName=s) == [] and traces(serviceName=s, spanName="get") == [],
      "getTraces_absentWhenNoTimestamp: a span without a timestamp is not found")
post(url, [span])
check(found(traces(serviceName=s), [no_ts, span]),
      "getTraces_absentWhenNoTimestamp: once a timestamped span arrives, the trace is")

# spanWithProblematicData: dots in tag keys, JSON as a span name
part1 = span_builder("problem")
part1["tags"] = dict(part1["tags"], **{"http.path": "/api"})
part2 = dict(part1, name='{"foo":"bar"}', tags={"http.path.morepath": "/api/api"})
post(url, [part1])
post(url, [part2])
got = traces(serviceName="frontend_problem", spanName='{"foo":"bar"}')
check(found(got, [part2, part1]), "spanWithProblematicData: by a JSON span name", "got %s" % got)
check(same(get(url, "/api/v2/trace/" + part1["traceId"]), [part2, part1]),
      "spanWithProblematicData: getTrace")

# names_goLowercase
cs = client_span("lower")
post(url, [cs])
check(found(traces(serviceName="frontend_lower", remoteServiceName="BACKENDLOWER"), [cs]),
      "names_goLowercase: remoteServiceName upper-cased")
check(found(traces(serviceName="frontend_lower", spanName="GET /FOO"), [cs]),
      "names_goLowercase: spanName upper-cased")
sys.exit(1 if tap.failed else 0)
