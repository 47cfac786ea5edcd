#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The trace page shows the profile of the request's own threads (issue
# #27 item 5), in Debian's chromium (playwright-core), against a real
# collector, a real agent and real eBPF sampling: a standing query
# samples CPU by s.trace_id and s.ustack on the cluster while
# span_profile (a libfay program: "heavy" and "light" root spans that
# burn CPU) runs under the agent; the page of the trace with the most
# samples draws them as a flame graph, exactly the samples the store
# holds for that trace (results?trace=ID), with span_profile's spin
# frame; a trace without samples says so; with no such query, the page
# says how to keep one; the standing query's own page draws all its
# kept samples as one flame graph.  tests/ui/trace_profile.mjs; screenshots in
# $FAY_UI_IMG (default $BUILD/test-logs/ui-img).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../integration/collector_lib.bash"
. "$(dirname "$0")/lib.bash"
[ -x /usr/bin/chromium ] || skip_all "needs Debian's chromium (scripts/install-deps)"
SP=$BUILD/tests/bin/span_profile
[ -x "$SP" ] || skip_all "span_profile is not built (make)"
ui_npm

coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
ok "an agent with a query connection" coll_agents h1

Q='from s in cluster.profile(499) where s.trace_id != 0 group s by {trace: s.trace_id, stack: s.ustack} into g select {trace: g.trace, stack: g.stack, n: g.count()} window 1s'
timeout 30 "$FAY" query --cluster "$URL" --keep cpu "$Q" >"$T_TMP/keep" 2>&1
ok "a standing profile query by trace id and stack" grep -q 'standing query cpu: runs until' "$T_TMP/keep"
cols() { curl -s "$URL/api/queries" | grep -q '"trace":true'; }
ok "its trace id column is marked for the trace page" cols
attached() { curl -s "$URL/api/queries/cpu/results?limit=1" | grep -q '"answered":1'; }
ok "the agent answers its windows" wait_for 30 attached

# the requests: 30 of each kind, "heavy" ones ~10 ms of CPU (about 5 samples
# each), their spans through the agent to the store
FAY_SHM_DIR=$T_TMP/h1 FAY_SAMPLE=1 timeout 60 nice -n 10 "$SP" 30 "$T_TMP/ids" 10
t_end=$(($(date +%s%N)))
# every window up to the program's end is stored: one that began after it
after_end() {
	curl -s "$URL/api/queries/cpu/results?limit=100000" | python3 -c '
import json, sys
w = json.load(sys.stdin)["windows"]
sys.exit(0 if any(x["start_ns"] > int(sys.argv[1]) for x in w) else 1)' "$t_end"
}
ok "the windows of the run are stored" wait_for 30 after_end

# the trace with the most samples, its id as stored, the samples it has
curl -s "$URL/api/queries/cpu/results?limit=100000" >"$T_TMP/all.json"
python3 - "$T_TMP/all.json" "$T_TMP/ids" >"$T_TMP/pick" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cols = [c["name"] for c in r["columns"]]
t, n = cols.index("trace"), cols.index("n")
per = {}
for w in r["windows"]:
    for row in w["rows"]:
        per[row[t] % 2**64] = per.get(row[t] % 2**64, 0) + row[n]
ids = [int(l) for l in open(sys.argv[2]) if l.strip()]
best = max(per, key=per.get)
quiet = next(i for i in ids if i not in per)	# a request no sample fell in
print("%016x %d %016x %d %d" % (best, per[best], quiet, len(per), sum(per.values())))
PY
read -r lo n quiet ntraces total <"$T_TMP/pick"
ok "samples were tied to the program's requests ($ntraces traces, the most $n samples)" [ "${n:-0}" -ge 3 ]
# the stored trace ids (128-bit or 64-bit) whose low 64 bits these are
full() {
	curl -s "$URL/api/v2/traces?serviceName=span-profile&limit=1000&lookback=600000" | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    if t[0]["traceId"].endswith(sys.argv[1]):
        print(t[0]["traceId"]); break' "$1"
}
stored() { [ -n "$(full "$lo")" ] && [ -n "$(full "$quiet")" ]; }
ok "both traces are stored" wait_for 30 stored
TRACE=$(full "$lo")
QUIET=$(full "$quiet")
m=$(curl -s "$URL/api/queries/cpu/results?limit=100000&trace=$TRACE" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(sum(row[2] for w in r["windows"] for row in w["rows"]))')
ok "results?trace=ID keeps that trace's rows only ($m samples, $n expected)" [ "$m" = "$n" ]
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/queries/cpu/results?trace=xyz")
ok "results?trace=xyz: 400" [ "$code" = 400 ]
curl -s -o /dev/null -X POST "$URL/api/queries" -d '{"name":"comms","query":"from s in cluster.profile(99) group s by s.comm into g select {c: g.key, n: g.count()} window 1s"}'
curl -s -o "$T_TMP/nokey" -w '%{http_code}' "$URL/api/queries/comms/results?trace=$TRACE" >"$T_TMP/code"
refused() { [ "$(cat "$T_TMP/code")" = 400 ] && grep -q 'does not group profile' "$T_TMP/nokey"; }
ok "results?trace=ID of a query without an s.trace_id key: 400, saying so" refused
curl -s -o /dev/null -X DELETE "$URL/api/queries/comms"

IMG=${FAY_UI_IMG:-$BUILD/test-logs/ui-img}
URL=$URL IMG_DIR=$IMG TRACE=$TRACE QUIET=$QUIET SAMPLES=$n TOTAL=$total node "$TOP/tests/ui/trace_profile.mjs" >"$T_TMP/tap" 2>&1
relay_tap "$T_TMP/tap"
ok "collector still up" coll_alive
diag "screenshots in $IMG"
done_testing
