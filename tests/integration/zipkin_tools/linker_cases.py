#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Post the cases of tests/data/zipkin/dependency_linker.json (Zipkin's own
DependencyLinkerTest) or itdependencies.json (ITDependencies) to a running
collector, each case in a time window of its own (HOURS ago, 10 s apart;
a run of its own trace ids), and compare GET /api/v2/dependencies for that
window with the links Zipkin's test asserts.  TAP lines on stdout.
argv: URL FIXTURE [HOURS [TEST_CLASS]]"""
import json, sys, time

from zapi import case_spans, get, post

url, path = sys.argv[1], sys.argv[2]
hours = int(sys.argv[3]) if len(sys.argv) > 3 else 3
cls = sys.argv[4] if len(sys.argv) > 4 else "DependencyLinkerTest"
cases = json.load(open(path))["cases"]
base_ms = (int(time.time()) - hours * 3600) * 1000
n = 0
failed = 0

trace_no = 0
for k, case in enumerate(cases):
    start_us = (base_ms + k * 10000) * 1000
    body = []
    for trace in case["traces"]:
        trace_no += 1
        body += case_spans(trace, "%032x" % (hours << 32 | trace_no), start_us)
    status = post(url, body)
    end_ms = base_ms + k * 10000 + 5000
    got = sorted((l["parent"], l["child"], l["callCount"], l.get("errorCount", 0))
                 for l in get(url, "/api/v2/dependencies?endTs=%d&lookback=8000" % end_ms))
    want = sorted(tuple(l) for l in case["links"])
    n += 1
    if status == 202 and got == want:
        print("ok %d - %s.%s" % (n, cls, case["name"]))
    else:
        failed += 1
        print("not ok %d - %s.%s" % (n, cls, case["name"]))
        print("#   POST %d, want %s" % (status, want))
        print("#   got  %s" % got)
sys.exit(1 if failed else 0)
