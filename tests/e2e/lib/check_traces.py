#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check the blockstack traces a fay collector holds (Zipkin v2 API).

Prints one TAP line per check ("ok N - ..." / "not ok N - ..."), numbered
from --first, and "# ..." lines naming what is wrong; exits 0 if all pass.

Checks, for every trace:
  * exactly one root span, and it is the vm-client's write or read;
  * every parentId names a span of the same trace;
  * no span id twice in a trace (nor a trace id twice in the answer);
  * every child's [timestamp, timestamp + duration] lies inside its
    parent's (one host clock; 1 us of slack for the rounding of ns to us);
  * completeness of the blockstack shape: root -> one composer span ->
    object spans -> one mapper "map" each -> two "replicate" (writes) or
    one "read" -> one blocker span each, the blocker the replicate names;
  * it spans vm-client, composer, mapper and a blocker (4+ services).
Totals: --traces N (exact) or --traces-between LO HI; --spans N (exact).
--missing-blocker K: exactly K traces may lack exactly one blocker span
(an app killed mid-span); they must be complete otherwise.
"""
import argparse
import json
import sys
import urllib.request

TOL_US = 1


def fetch(url):
    with urllib.request.urlopen(url + "/api/v2/traces?limit=1000000&lookback=86400000",
                                timeout=60) as r:
        return json.load(r)


def check_trace(spans):
    """Return (problems, missing_blockers) for one trace."""
    probs = []
    tid = spans[0].get("traceId")
    by_id = {}
    for s in spans:
        if s["id"] in by_id:
            probs.append("span id %s twice" % s["id"])
        by_id[s["id"]] = s
    roots = [s for s in spans if not s.get("parentId")]
    if len(roots) != 1:
        probs.append("%d root spans" % len(roots))
    for s in spans:
        p = s.get("parentId")
        if p and p not in by_id:
            probs.append("span %s (%s %s): parent %s not in the trace" %
                         (s["id"], svc(s), s.get("name"), p))
    for s in spans:
        p = by_id.get(s.get("parentId") or "")
        if not p or "timestamp" not in s or "timestamp" not in p:
            continue
        cs, ce = s["timestamp"], s["timestamp"] + s.get("duration", 0)
        ps, pe = p["timestamp"], p["timestamp"] + p.get("duration", 0)
        if cs < ps or ce > pe + TOL_US:
            probs.append("span %s (%s %s) [%d, %d] not inside its parent %s (%s %s) [%d, %d]"
                         % (s["id"], svc(s), s.get("name"), cs, ce, p["id"], svc(p),
                            p.get("name"), ps, pe))
    if any(not s.get("timestamp") for s in spans):
        probs.append("a span without timestamp")
    services = {svc(s) for s in spans}
    need = {"vm-client", "composer", "mapper"}
    if not need <= services or not services & {"blocker-1", "blocker-2"}:
        probs.append("services %s: want vm-client, composer, mapper and a blocker"
                     % sorted(services))
    # The blockstack shape.
    kids = {}
    for s in spans:
        kids.setdefault(s.get("parentId"), []).append(s)
    missing = 0
    if len(roots) == 1:
        r = roots[0]
        op = r.get("name")
        if svc(r) != "vm-client" or op not in ("write", "read"):
            probs.append("root is %s %s, want vm-client write|read" % (svc(r), op))
        comp = kids.get(r["id"], [])
        if len(comp) != 1 or svc(comp[0]) != "composer":
            probs.append("root has %d children, want one composer span" % len(comp))
        for c in comp:
            objs = kids.get(c["id"], [])
            if not objs:
                probs.append("composer span %s has no object spans" % c["id"])
            for o in objs:
                maps = kids.get(o["id"], [])
                if o.get("name") != "object" or len(maps) != 1 or \
                   svc(maps[0]) != "mapper" or maps[0].get("name") != "map":
                    probs.append("object span %s: %d children, want one mapper map"
                                 % (o["id"], len(maps)))
                    continue
                subs = kids.get(maps[0]["id"], [])
                want = 2 if op == "write" else 1
                name = "replicate" if op == "write" else "read"
                if len(subs) != want or any(x.get("name") != name or svc(x) != "mapper"
                                            for x in subs):
                    probs.append("map span %s: children %s, want %d mapper %s"
                                 % (maps[0]["id"], [(svc(x), x.get("name")) for x in subs],
                                    want, name))
                    continue
                for x in subs:
                    bl = kids.get(x["id"], [])
                    target = x.get("tags", {}).get("blocker")
                    if not bl:
                        missing += 1
                        continue
                    if len(bl) != 1 or svc(bl[0]) != target or bl[0].get("name") != op:
                        probs.append("%s span %s: children %s, want one %s %s"
                                     % (name, x["id"], [(svc(b), b.get("name")) for b in bl],
                                        target, op))
    return ["trace %s: %s" % (tid, p) for p in probs], missing


def svc(s):
    return (s.get("localEndpoint") or {}).get("serviceName", "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--traces", type=int)
    ap.add_argument("--traces-between", type=float, nargs=2)
    ap.add_argument("--spans", type=int)
    ap.add_argument("--missing-blocker", type=int, default=0)
    a = ap.parse_args()
    n = a.first - 1
    failed = 0

    def report(ok, what, details=()):
        nonlocal n, failed
        n += 1
        print("%sok %d - %s" % ("" if ok else "not ", n, what))
        if not ok:
            failed += 1
            for d in list(details)[:15]:
                print("#   " + d)
            if len(details) > 15:
                print("#   ... and %d more" % (len(details) - 15))

    traces = fetch(a.url)
    nspans = sum(len(t) for t in traces)
    ids = [t[0]["traceId"] for t in traces if t]
    print("# collector holds %d traces, %d spans" % (len(traces), nspans))
    if a.traces is not None:
        report(len(traces) == a.traces, "exactly %d traces stored" % a.traces,
               ["got %d" % len(traces)])
    if a.traces_between:
        lo, hi = a.traces_between
        report(lo <= len(traces) <= hi,
               "trace count %d within [%.1f, %.1f]" % (len(traces), lo, hi))
    if a.spans is not None:
        report(nspans == a.spans, "exactly %d spans stored (what the workload recorded)"
               % a.spans, ["got %d" % nspans])
    report(len(ids) == len(set(ids)), "no trace id twice")
    probs, missing_traces = [], []
    for t in traces:
        p, m = check_trace(t)
        probs += p
        if m:
            missing_traces.append((t[0]["traceId"], m))
    report(not probs, "every trace: one root, parents present, ids unique, children "
           "inside parents, 4+ services, blockstack shape complete", probs)
    report(len(missing_traces) == a.missing_blocker and
           all(m == 1 for _, m in missing_traces),
           "%d trace(s) missing exactly one blocker span" % a.missing_blocker,
           ["trace %s misses %d blocker spans" % x for x in missing_traces])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
