# SPDX-License-Identifier: MIT
"""What the Zipkin fixture scripts share: the collector's v2 API over HTTP."""
import json
import urllib.request


def post(url, spans):
    """POST spans (a list of dicts) as JSON to url/api/v2/spans: the status"""
    req = urllib.request.Request(url + "/api/v2/spans", data=json.dumps(spans).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req) as r:
        return r.status


def case_spans(trace, tid, start_us):
    """The Zipkin v2 spans of one trace of a dependency-linker case
    (tests/data/zipkin/dependency_linker.json: [parent, id, kind, local,
    remote, error, shared[, annotations]] each), trace id tid, the i-th
    starting at start_us + i and lasting 10 us"""
    out = []
    for i, sp in enumerate(trace):
        parent, sid, kind, local, remote, error, shared = sp[:7]
        s = {"traceId": tid, "id": sid.rjust(16, "0"), "name": "op",
             "timestamp": start_us + i, "duration": 10}
        if parent:
            s["parentId"] = parent.rjust(16, "0")
        if kind:
            s["kind"] = kind
        if local:
            s["localEndpoint"] = {"serviceName": local}
        if remote:
            s["remoteEndpoint"] = {"serviceName": remote}
        if error:
            s["tags"] = {"error": ""}
        if shared:
            s["shared"] = True
        if len(sp) > 7:
            s["annotations"] = [{"timestamp": a[0], "value": a[1]} for a in sp[7]]
        out.append(s)
    return out


def get(url, path):
    """GET url + path: the decoded JSON answer"""
    with urllib.request.urlopen(url + path) as r:
        return json.load(r)


class Tap:
    """TAP lines: tap.check(cond, what, *diagnostics); tap.failed counts"""

    def __init__(self, prefix=""):
        self.n = self.failed = 0
        self.prefix = prefix

    def check(self, cond, what, *diag):
        self.n += 1
        print("%s %d - %s%s" % ("ok" if cond else "not ok", self.n, self.prefix, what))
        if not cond:
            self.failed += 1
            for d in diag:
                print("#   %s" % d)
        return cond
