#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""span_canon.py: the content of the spans span_golden made, as the
collector returns them (/api/v2/traces JSON on stdin), in a form that does
not change from run to run, for tests/integration/span_golden.sh.

    span_canon.py BEFORE_NS AFTER_NS < traces.json > canonical.json

Random ids (trace ids libfay drew, every span id it drew) become labels
(T1, S1, ...) numbered in an order that does not depend on them; ids that
came from the workload's fixed traceparents are kept.  Timestamps and
durations are left out of the output but checked: every span lies within
[BEFORE, AFTER] (the wall clock the workload read around itself), every
annotation within its span, every child within its parent (to 2 us: the
API gives microseconds, start and duration each rounded down).  A check that
fails is printed to stderr and the exit status is 1.
"""
import json
import sys

# The ids span_golden.c sets (trace ids whose high half is 0 come back as
# 16 hex digits).
FIXED = {"0af7651916cd43dd8448eb211c80319c", "000000000000abcd",
         "000000000000beef", "0000000000001234",
         "b7ad6b7169203331", "00000000000000ef", "0000000000000001",
         "0000000000005678"}


def main():
    # libfay's times are TSC ticks the agent converts with the line it
    # publishes (src/common/tsc.c); that line may be a microsecond or two
    # off the CLOCK_REALTIME reading the test takes before and after
    slack_us = 2
    before_us = int(sys.argv[1]) // 1000 - slack_us
    after_us = (int(sys.argv[2]) + 999) // 1000 + slack_us
    traces = json.load(sys.stdin)
    spans = [s for t in traces for s in t]
    errors = []
    by_id = {(s["traceId"], s["id"]): s for s in spans}

    for s in spans:
        ts, dur = s.get("timestamp", 0), s.get("duration", 0)
        what = "span %s (%s)" % (s.get("name", ""), s["id"])
        if not before_us <= ts or ts + dur > after_us:
            errors.append("%s: [%d, +%d] outside [%d, %d]" % (what, ts, dur, before_us, after_us))
        for a in s.get("annotations", []):
            if not ts <= a["timestamp"] <= ts + dur + 2:
                errors.append("%s: annotation %s at %d outside [%d, +%d]" %
                              (what, a["value"], a["timestamp"], ts, dur))
        p = by_id.get((s["traceId"], s.get("parentId")))
        if p and not (p.get("timestamp", 0) <= ts and
                      ts + dur <= p.get("timestamp", 0) + p.get("duration", 0) + 2):
            errors.append("%s: not within its parent %s" % (what, p.get("name", "")))

    def key(s):
        # Nothing random: fixed ids, name, annotations' values, tags.
        return (s["traceId"] if s["traceId"] in FIXED else "",
                s.get("name", ""),
                json.dumps(s.get("tags", {}), sort_keys=True),
                [a["value"] for a in s.get("annotations", [])],
                s.get("parentId", "") if s.get("parentId", "") in FIXED else "")

    labels = {}

    def label(kind, v):
        if v is None or v in FIXED:
            return v
        if (kind, v) not in labels:
            labels[(kind, v)] = "%s%d" % (kind, sum(1 for k in labels if k[0] == kind) + 1)
        return labels[(kind, v)]

    out = []
    for s in sorted(spans, key=key):
        c = {k: v for k, v in s.items() if k not in ("timestamp", "duration")}
        c["traceId"] = label("T", s["traceId"])
        c["id"] = label("S", s["id"])
        if "parentId" in s:
            c["parentId"] = label("S", s["parentId"])
        # as a sorted list: two in the same microsecond come back in
        # either order
        c["annotations"] = sorted(a["value"] for a in s.get("annotations", []))
        out.append(c)
    json.dump(out, sys.stdout, indent=1, sort_keys=True, ensure_ascii=True)
    sys.stdout.write("\n")
    for e in errors:
        print("span_canon: " + e, file=sys.stderr)
    return 1 if errors else 0


sys.exit(main())
