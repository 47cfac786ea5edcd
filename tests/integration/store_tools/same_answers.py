#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The same spans into several collectors, then their answers side by side
(tests/integration/store_same_answers.sh).

  same_answers.py post BASE_MS URL...
      POST to every URL, in the same order and with the same bytes: Zipkin's
      fixtures (tests/data/zipkin: test_objects and lens_* moved so that
      they start at BASE_MS, every case of dependency_linker.json and
      itdependencies.json in a 10 s window of its own after BASE_MS + 1 h)
      as Zipkin v2 JSON, and OTLP/JSON requests (plain and gzip) to
      /v1/traces.
  same_answers.py compare BASE_MS NAME=URL...
      GET every route of the first URL's answers (services, span names,
      remote services, every trace by id, traceMany, trace searches with
      every filter, dependencies of every window, autocomplete, the
      dashboard, hosts) from every URL and compare status and body byte
      for byte with the first's.  The only thing normalised is what is
      documented to differ between two collectors whatever their store
      (docs/ARCHITECTURE.md, "The span store"): in /api/ui/hosts the
      times (now_ms, last_seen_ms, "up", which follows from them) and the
      OTLP senders (a collector's own memory).  TAP on stdout; the list
      of trace ids, one per line, to the file $SAME_IDS when set.
"""
import gzip
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "data", "zipkin")
sys.path.insert(0, os.path.join(HERE, "..", "zipkin_tools"))
import zapi  # noqa: E402  (the dependency-linker cases as spans)


def request(url, path, body=None, headers=None):
    """status and body bytes of one request (errors included)"""
    req = urllib.request.Request(url + path, data=body, headers=headers or {},
                                 method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# ---- what is posted ---------------------------------------------------------

def fixture_bodies(base_ms):
    """(path, body, headers) of every Zipkin fixture request, base_ms on"""
    out = []
    hdr = {"Content-Type": "application/json"}
    files = ["test_objects.json", "lens_messaging.json", "lens_messaging_kafka.json",
             "lens_skew.json", "lens_yelp.json"]
    for k, f in enumerate(files):
        trace = json.load(open(os.path.join(DATA, f)))["trace"]
        ts = [s["timestamp"] for s in trace if s.get("timestamp")]
        ts += [a["timestamp"] for s in trace for a in s.get("annotations", [])]
        shift = (base_ms + k * 60000) * 1000 - min(ts)
        for s in trace:
            if s.get("timestamp"):
                s["timestamp"] += shift
            for a in s.get("annotations", []):
                a["timestamp"] += shift
        out.append(("/api/v2/spans", json.dumps(trace).encode(), hdr))
    no = 0
    for fi, f in enumerate(["dependency_linker.json", "itdependencies.json"]):
        for k, case in enumerate(json.load(open(os.path.join(DATA, f)))["cases"]):
            start_us = (base_ms + 3600000 + (fi * 100 + k) * 10000) * 1000
            body = []
            for trace in case["traces"]:
                no += 1
                body += zapi.case_spans(trace, "%032x" % (0xd0 << 32 | no), start_us)
            out.append(("/api/v2/spans", json.dumps(body).encode(), hdr))
    return out


def otlp_bodies(base_ms):
    """OTLP/JSON export requests: two services, events, status, every
    attribute type, a 64-bit and a 128-bit trace; one gzip"""
    s = (base_ms + 7200000) * 1000000

    def attr(k, v):
        return {"key": k, "value": v}
    spans = []
    for t in range(6):
        tid = "%032x" % (0x07 << 96 | t)
        root = "%016x" % (0x100 + t)
        spans.append({"traceId": tid, "spanId": root, "name": "POST /pay/%d" % (t % 3),
                      "kind": 2, "startTimeUnixNano": str(s + t * 10**9),
                      "endTimeUnixNano": str(s + t * 10**9 + (t + 1) * 2500000),
                      "attributes": [attr("http.method", {"stringValue": "POST"}),
                                     attr("http.status_code", {"intValue": str(200 + 300 * (t % 2))}),
                                     attr("retry", {"boolValue": t % 2 == 0}),
                                     attr("ratio", {"doubleValue": t / 4}),
                                     attr("environment", {"stringValue": "prod%d" % (t % 2)}),
                                     attr("peer.service", {"stringValue": "Bank"})],
                      "events": [{"timeUnixNano": str(s + t * 10**9 + 1000000), "name": "auth"}],
                      "status": {"code": 2 if t % 2 else 1, "message": "card declined" if t % 2 else ""}})
        spans.append({"traceId": tid, "spanId": "%016x" % (0x200 + t), "parentSpanId": root,
                      "name": "db", "kind": 3, "startTimeUnixNano": str(s + t * 10**9 + 500000),
                      "endTimeUnixNano": str(s + t * 10**9 + 1500000)})
    res = {"attributes": [attr("service.name", {"stringValue": "Checkout"}),
                          attr("host.name", {"stringValue": "h1"})]}
    doc = {"resourceSpans": [{"resource": res, "scopeSpans": [
        {"scope": {"name": "io.opentelemetry.http", "version": "1.2"}, "spans": spans[:6]}]}]}
    doc2 = {"resourceSpans": [{"resource": {"attributes": [attr("service.name", {"stringValue": "Ledger"})]},
                               "scopeSpans": [{"spans": spans[6:]}]}]}
    hdr = {"Content-Type": "application/json"}
    return [("/v1/traces", json.dumps(doc).encode(), hdr),
            ("/v1/traces", gzip.compress(json.dumps(doc2).encode(), mtime=0),
             dict(hdr, **{"Content-Encoding": "gzip"}))]


def cmd_post(base_ms, urls):
    bad = 0
    reqs = fixture_bodies(base_ms) + otlp_bodies(base_ms)
    for url in urls:
        for path, body, hdr in reqs:
            st, ans = request(url, path, body, hdr)
            if st not in (200, 202):
                print("# %s%s: %d %s" % (url, path, st, ans[:200]), file=sys.stderr)
                bad += 1
    print("# posted %d requests to each of %d collectors" % (len(reqs), len(urls)))
    return 1 if bad else 0


# ---- what is compared -------------------------------------------------------

def q(**kw):
    return urllib.parse.urlencode(kw)


def norm_hosts(body):
    """/api/ui/hosts without what differs between any two collectors"""
    d = json.loads(body)
    d.pop("now_ms", None)
    d.pop("otlp_senders", None)
    for a in d.get("agents", []):
        a.pop("last_seen_ms", None)
        a.pop("up", None)
    return json.dumps(d, sort_keys=True).encode()


def paths(url, base_ms):
    """every path to compare, from url's own answers"""
    end = base_ms + 3 * 3600000
    win = dict(endTs=end, lookback=4 * 3600000)
    out = ["/api/v2/services", "/api/v2/autocompleteKeys",
           "/api/v2/autocompleteValues?key=environment",
           "/api/v2/autocompleteValues?key=http.path",
           "/api/v2/dependencies?" + q(**win),
           "/api/v2/traces?" + q(limit=100000, **win),
           "/api/v2/traces?" + q(limit=3, **win),
           "/api/v2/traces?" + q(limit=100000, minDuration=1000, **win),
           "/api/v2/traces?" + q(limit=100000, minDuration=100, maxDuration=20000, **win),
           "/api/v2/traces?" + q(limit=100000, annotationQuery="error", **win),
           "/api/v2/traces?" + q(limit=100000, annotationQuery="http.path=/api", **win),
           "/api/v2/traces?" + q(limit=100000, annotationQuery="environment=prod1 and auth", **win),
           "/api/v2/traces?" + q(limit=100000, endTs=base_ms + 120000, lookback=60000),
           "/api/v2/trace/00000000000000000000000000000bad",
           "/api/v2/traces?" + q(limit=100000, minDuration="x", **win),
           "/api/ui/dashboard?" + q(window=4 * 3600, step=600, endTs=end),
           "/api/ui/dashboard?" + q(window=600, step=30, endTs=base_ms + 3600000 + 300000),
           "/api/ui/hosts"]
    st, body = request(url, "/api/v2/services")
    services = json.loads(body) if st == 200 else []
    for s in services:
        out.append("/api/v2/spans?" + q(serviceName=s))
        out.append("/api/v2/remoteServices?" + q(serviceName=s))
        out.append("/api/v2/traces?" + q(serviceName=s, limit=100000, **win))
        out.append("/api/v2/traces?" + q(serviceName=s, limit=2, **win))
        out.append("/api/v2/traces?" + q(serviceName=s, minDuration=5000, limit=100000, **win))
        st, body = request(url, "/api/v2/spans?" + q(serviceName=s))
        for n in (json.loads(body) if st == 200 else []):
            out.append("/api/v2/traces?" + q(serviceName=s, spanName=n, limit=100000, **win))
        st, body = request(url, "/api/v2/remoteServices?" + q(serviceName=s))
        for n in (json.loads(body) if st == 200 else []):
            out.append("/api/v2/traces?" + q(serviceName=s, remoteServiceName=n,
                                              limit=100000, **win))
    # dependencies: each case's window, and the whole hour of them
    for k in range(200):
        e = base_ms + 3600000 + k * 10000 + 5000
        out.append("/api/v2/dependencies?" + q(endTs=e, lookback=8000))
    st, body = request(url, "/api/v2/traces?" + q(limit=100000, **win))
    ids = sorted({sp["traceId"] for t in (json.loads(body) if st == 200 else []) for sp in t})
    for i in ids:
        out.append("/api/v2/trace/" + i)
    for k in range(0, len(ids), 7):
        out.append("/api/v2/traceMany?" + q(traceIds=",".join(ids[k:k + 7])))
    return out, ids


def cmd_compare(base_ms, named):
    names = [n for n, _ in named]
    urls = [u for _, u in named]
    todo, ids = paths(urls[0], base_ms)
    if os.environ.get("SAME_IDS"):
        with open(os.environ["SAME_IDS"], "w") as f:
            f.write("".join(i + "\n" for i in ids))
    n = failed = 0
    same = full = 0
    for path in todo:
        answers = []
        for u in urls:
            st, body = request(u, path)
            if path == "/api/ui/hosts" and st == 200:
                body = norm_hosts(body)
            answers.append((st, body))
        full += answers[0][0] == 200 and answers[0][1] not in (b"[]", b"{}", b"")
        diff = [names[i] for i in range(1, len(urls)) if answers[i] != answers[0]]
        if not diff:
            same += 1
            continue
        n += 1
        failed += 1
        print("not ok %d - %s: %s answer%s differently from %s" %
              (n, path, " and ".join(diff), "" if len(diff) > 1 else "s", names[0]))
        other = answers[names.index(diff[0])][1]
        for i, (st, body) in enumerate(answers):
            ref = other if i == 0 else answers[0][1]
            at = next((k for k in range(min(len(body), len(ref))) if body[k] != ref[k]),
                      min(len(body), len(ref)))
            print("#   %-12s %d, %d bytes, from byte %d: %r" %
                  (names[i], st, len(body), at, body[max(0, at - 60):at + 100]))
    n += 1
    print("%s %d - %d routes and queries answered byte for byte the same by %s" %
          ("ok" if not failed else "not ok", n, same, ", ".join(names)))
    if not failed and len(ids) < 75:
        failed += 1
    n += 1
    print("%s %d - ... over %d traces" % ("ok" if len(ids) >= 75 else "not ok", n, len(ids)))
    n += 1
    failed += full * 2 < len(todo)
    print("%s %d - ... %d of the %d answers are 200 with content (not [] or {})" %
          ("ok" if full * 2 >= len(todo) else "not ok", n, full, len(todo)))
    return 1 if failed else 0


def main(argv):
    if len(argv) < 4 or argv[1] not in ("post", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    base_ms = int(argv[2])
    if argv[1] == "post":
        return cmd_post(base_ms, argv[3:])
    return cmd_compare(base_ms, [a.split("=", 1) for a in argv[3:]])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
