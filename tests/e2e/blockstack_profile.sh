#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Blockstack's CPU profile by span (issue #27 item 5, its last check):
# blockstack with a known CPU cost per layer (BLOCKSTACK_CPU_US: vm-client
# 0.5 ms, composer 1 ms, mapper 1.5 ms, blocker-1 2 ms, blocker-2 3 ms per
# request, each spun inside the span the layer opens for the request)
# runs through a real agent and collector while `fay query` samples
# profile(499) grouped by comm, span_name and trace_id.  Checked:
#   * each layer's samples, by (layer, span name), are in the shares the
#     knob and the run's writes and reads predict (within sampling error);
#   * the libfay layers (composer, blocker-N) spend >= 80% of their
#     samples inside a span ("write"/"read"/"object"), the rest being the
#     wait for the next message;
#   * the BlkKin layers (vm-client, mapper: blkin_* annotations, no open
#     span a thread is in) have span_name "" and trace_id 0: libfay
#     publishes no current span for them (documented limit);
#   * every (trace_id, layer, span name) a sample carried is a span the
#     collector stored: that trace has a span of that service and name.
export FAY_RING_KB=4096	# as blockstack_traces.sh: no ring overflow under load
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/lib/e2e.bash"
e2e_setup

export BLOCKSTACK_CPU_US="vm-client=500,composer=1000,mapper=1500,blocker-1=2000,blocker-2=3000"
Q='from s in profile(499) where s.comm == "vm-client" || s.comm == "composer" || s.comm == "mapper" || s.comm == "blocker-1" || s.comm == "blocker-2" group s by { comm: s.comm, span: s.span_name, trace: s.trace_id } into g select { comm: g.comm, span: g.span, trace: g.trace, n: g.count() }'
"$FAY" query --json "$Q" >"$T_TMP/prof" 2>"$T_TMP/prof.err" &
QP=$!
T_PIDS+=("$QP")
ok "fay query profile(499) attaches" wait_for 30 grep -q attached "$T_TMP/prof.err"
out=$("$BLOCKSTACK" --requests 300 --sample 1 --write-ratio 0.7 --size 4k --seed 1 2>"$T_TMP/blockstack.err")
rc=$?
kill -INT "$QP"
wait "$QP"
qrc=$?
diag "$out"
ok "blockstack with BLOCKSTACK_CPU_US succeeds" test $rc -eq 0
ok "the query prints its result on SIGINT" test $qrc -eq 0
spans=$(bs_spans "$out")
ok "all spans reach the collector" wait_stored 60 "${spans:-1}"
curl -sf "$E2E_URL/api/v2/traces?limit=1000000&lookback=86400000" >"$T_TMP/traces.json"

python3 - "$T_TMP/prof" "$T_TMP/traces.json" "$out" "$BLOCKSTACK_CPU_US" >"$T_TMP/cmp" 2>&1 <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
traces = json.load(open(sys.argv[2]))
m = re.search(r"\((\d+) writes, (\d+) reads\)", sys.argv[3])
W, R = int(m.group(1)), int(m.group(2))
cost = {k: int(v) for k, v in (e.split("=") for e in sys.argv[4].split(","))}
n = {}
for r in rows:
    n[(r["comm"], r["span"])] = n.get((r["comm"], r["span"]), 0) + r["n"]
print("samples by (layer, span):", ", ".join("%s/%s %d" % (c, s or '""', v)
      for (c, s), v in sorted(n.items(), key=lambda kv: -kv[1])))
bad = []
# 1. shares: the keys whose CPU is known (a blocker's reads split between
# the two by object, unknown here: left out)
want = {("vm-client", ""): cost["vm-client"] * (W + R),
        ("composer", "write"): cost["composer"] * W,
        ("composer", "read"): cost["composer"] * R,
        ("mapper", ""): cost["mapper"] * (W + R),
        ("blocker-1", "write"): cost["blocker-1"] * W,
        ("blocker-2", "write"): cost["blocker-2"] * W}
tw, tg = sum(want.values()), sum(n.get(k, 0) for k in want)
if tg < 500:
    bad.append("too few samples in the known keys: %d" % tg)
for k, w in sorted(want.items()):
    es, gs = w / tw, n.get(k, 0) / max(tg, 1)
    ok = abs(gs - es) <= max(0.03, 0.25 * es)
    print("  %-10s %-6s expected %.3f got %.3f%s" % (k[0], k[1] or '""', es, gs, "" if ok else "  <- off"))
    if not ok:
        bad.append("share of %s/%s: %.3f, expected %.3f" % (k[0], k[1], gs, es))
# 2. the libfay layers' CPU is inside their spans
for c in ("composer", "blocker-1", "blocker-2"):
    tot = sum(v for (cc, s), v in n.items() if cc == c)
    ins = sum(v for (cc, s), v in n.items() if cc == c and s)
    print("  %s: %d of %d samples in a span (%.0f%%)" % (c, ins, tot, 100.0 * ins / max(tot, 1)))
    if not tot or ins < 0.8 * tot:
        bad.append("%s: %d of %d samples in a span" % (c, ins, tot))
    if {s for (cc, s) in n if cc == c and s} - {"write", "read", "object"}:
        bad.append("%s: span names %s" % (c, sorted(s for (cc, s) in n if cc == c)))
# 3. the BlkKin layers: no current span
for r in rows:
    if r["comm"] in ("vm-client", "mapper") and (r["span"] or r["trace"]):
        bad.append("BlkKin layer sample in a span: %r" % r)
# 4. every sample's span is one the collector stored
have = {}
for t in traces:
    for s in t:
        have.setdefault(int(s["traceId"][-16:], 16), set()).add(
            (s.get("localEndpoint", {}).get("serviceName"), s.get("name")))
linked = missing = 0
for r in rows:
    if not r["trace"]:
        continue
    tid = r["trace"] % 2**64
    if (r["comm"], r["span"]) in have.get(tid, ()):
        linked += r["n"]
    else:
        missing += 1
        if missing <= 5:
            bad.append("sample of %s/%s in trace %016x: no such span stored (trace has %s)"
                       % (r["comm"], r["span"], tid, sorted(have.get(tid, ()))))
print("  %d samples in %d traces, each in a stored span of its layer and name; %d not"
      % (linked, len({r["trace"] for r in rows if r["trace"]}), missing))
if linked < 300:
    bad.append("too few span-linked samples: %d" % linked)
for b in bad:
    print("BAD", b)
sys.exit(1 if bad else 0)
PY
if [ $? -eq 0 ]; then
	pass "profile(499) by span: each layer's CPU in its spans, in the knob's shares, tied to stored spans"
	sed 's/^/# /' "$T_TMP/cmp"
else
	fail "profile(499) by span" "$(cat "$T_TMP/cmp")" "$(head -c 600 "$T_TMP/prof.err")"
fi
e2e_logs_on_failure
done_testing
