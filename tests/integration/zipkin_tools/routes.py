#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Post Zipkin's test traces (tests/data/zipkin/{test_objects,lens_*}.json)
as JSON to a running collector and read them back through every v2 route,
comparing with Zipkin's answers: the links each file's "expect" names (from
Zipkin's tests, or worked through on Zipkin's linker), and for the other
routes Zipkin's rules applied to the posted spans (zipkin2.Span's
normalisation; services are local service names, remote services and span
names per local service, a trace is found by any of its local services).
TAP lines on stdout.  argv: URL FILE..."""
import json, sys, time, urllib.parse

import zapi

url, files = sys.argv[1], sys.argv[2:]
tap = zapi.Tap()
check = tap.check


def get(path):
    return zapi.get(url, path)


def norm_id(t):
    """Span.normalizeTraceId: pad to 16/32, a 32-digit id with 16 leading zeros is 64-bit"""
    t = t.rjust(16 if len(t) <= 16 else 32, "0")
    return t[16:] if len(t) == 32 and t.startswith("0" * 16) else t


def norm_ep(e):
    if not e:
        return None
    out = {}
    if e.get("serviceName"):
        out["serviceName"] = e["serviceName"].lower()
    for k in ("ipv4", "ipv6"):
        if e.get(k):
            out[k] = e[k]
    if e.get("port"):
        out["port"] = e["port"]
    return out or None


def norm(s):
    """zipkin2.Span.Builder.build(): what Zipkin stores and answers"""
    o = {"traceId": norm_id(s["traceId"]), "id": s["id"].rjust(16, "0")}
    if s.get("parentId") and s["parentId"] != s["id"]:
        o["parentId"] = s["parentId"].rjust(16, "0")
    for k in ("kind",):
        if s.get(k):
            o[k] = s[k]
    if s.get("name"):
        o["name"] = s["name"].lower()
    for k in ("timestamp", "duration"):
        if s.get(k, 0) > 0:
            o[k] = s[k]
    for k in ("localEndpoint", "remoteEndpoint"):
        e = norm_ep(s.get(k))
        if e:
            o[k] = e
    if s.get("annotations"):
        o["annotations"] = sorted(s["annotations"], key=lambda a: (a["timestamp"], a["value"]))
    if s.get("tags"):
        o["tags"] = s["tags"]
    if s.get("debug"):
        o["debug"] = True
    if s.get("shared") and s.get("kind") != "CLIENT":
        o["shared"] = True
    return o


def key(s):
    return json.dumps(s, sort_keys=True, ensure_ascii=False)


traces = []
for path in files:
    doc = json.load(open(path))
    spans = doc["trace"]
    name = path.rsplit("/", 1)[-1]
    if "today_ms" in doc:   # TestObjects: TODAY-relative, moved to today
        shift = (int(time.time()) // 86400 * 86400 * 1000 - doc["today_ms"]) * 1000
        for s in spans:
            s["timestamp"] += shift
            for a in s.get("annotations", []):
                a["timestamp"] += shift
    check(zapi.post(url, spans) == 202, "%s: POST /api/v2/spans (JSON): 202" % name)
    traces.append((name, [norm(s) for s in spans], doc["expect"]))

services, span_names, remotes = set(), {}, {}
for name, spans, expect in traces:
    tid = spans[0]["traceId"]
    got = get("/api/v2/trace/" + tid)
    check(sorted(map(key, got)) == sorted(map(key, spans)),
          "%s: GET /api/v2/trace/%s: the spans as Zipkin would store them" % (name, tid),
          "got  %s" % sorted(map(key, got)), "want %s" % sorted(map(key, spans)))
    start = min(s["timestamp"] for s in spans if "timestamp" in s)
    end = max(s["timestamp"] + s.get("duration", 0) for s in spans if "timestamp" in s)
    end_ms, lookback = end // 1000 + 1, (end - start) // 1000 + 2
    win = "endTs=%d&lookback=%d" % (end_ms, lookback)
    deps = get("/api/v2/dependencies?" + win)
    got = sorted((l["parent"], l["child"], l["callCount"], l.get("errorCount", 0)) for l in deps)
    want = sorted(tuple(l) for l in expect["dependencies"])
    check(got == want, "%s: GET /api/v2/dependencies: Zipkin's links" % name,
          "got  %s" % got, "want %s" % want)
    local = sorted({s["localEndpoint"]["serviceName"] for s in spans
                    if s.get("localEndpoint", {}).get("serviceName")})
    for svc in local:
        found = [t[0]["traceId"] for t in get("/api/v2/traces?serviceName=%s&%s&limit=10" %
                                             (urllib.parse.quote(svc), win))]
        check(found == [tid], "%s: GET /api/v2/traces?serviceName=%s finds it" % (name, svc),
              "got %s" % found)
    longest = max(s.get("duration", 0) for s in spans)
    found = [t[0]["traceId"] for t in get("/api/v2/traces?minDuration=%d&%s" % (longest, win))]
    check(found == [tid], "%s: traces?minDuration=%d (its longest span) finds it" % (name, longest))
    found = get("/api/v2/traces?minDuration=%d&%s" % (longest + 1, win))
    check(found == [], "%s: traces?minDuration=%d finds nothing" % (name, longest + 1))
    for s in spans:
        for k, v in sorted(s.get("tags", {}).items())[:1]:
            q = urllib.parse.quote("%s=%s" % (k, v) if v else k)
            found = [t[0]["traceId"] for t in get("/api/v2/traces?annotationQuery=%s&%s" % (q, win))]
            check(found == [tid], "%s: traces?annotationQuery=%s finds it" % (name, q))
            break
    for s in spans:
        svc = s.get("localEndpoint", {}).get("serviceName")
        if not svc:
            continue
        services.add(svc)
        if s.get("name"):
            span_names.setdefault(svc, set()).add(s["name"])
        r = s.get("remoteEndpoint", {}).get("serviceName")
        if r:
            remotes.setdefault(svc, set()).add(r)

ids = ",".join(t[1][0]["traceId"] for t in traces)
many = get("/api/v2/traceMany?traceIds=" + ids)
check(sorted(t[0]["traceId"] for t in many) == sorted(t[1][0]["traceId"] for t in traces),
      "GET /api/v2/traceMany: every trace")
got = get("/api/v2/services")
check(got == sorted(services), "GET /api/v2/services: the local service names",
      "got  %s" % got, "want %s" % sorted(services))
bad = [(svc, get("/api/v2/spans?serviceName=" + urllib.parse.quote(svc)), sorted(span_names.get(svc, [])))
       for svc in sorted(services)]
bad = [b for b in bad if b[1] != b[2]]
check(not bad, "GET /api/v2/spans?serviceName=S: each service's span names", *map(str, bad))
bad = [(svc, get("/api/v2/remoteServices?serviceName=" + urllib.parse.quote(svc)),
        sorted(remotes.get(svc, []))) for svc in sorted(services)]
bad = [b for b in bad if b[1] != b[2]]
check(not bad, "GET /api/v2/remoteServices?serviceName=S: each service's remote services",
      *map(str, bad))
print("# %d traces, %d services" % (len(traces), len(services)))
sys.exit(1 if tap.failed else 0)
