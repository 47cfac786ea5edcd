#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A BlkKin program that records its own events ("start" ... "end", no
# cs/sr: tests/compile/blkin_events.c, linked against libfay) through a
# real agent and a real collector: its spans get Zipkin 1.x's timestamp
# (first annotation) and duration (last - first) at ingest, so that
# /api/v2/traces search finds the trace (by service, span name, duration),
# and the dashboard and the trace's row for retention have it.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
PROG=$BUILD/tests/compile/blkin_events
[ -x "$PROG" ] || skip_all "no $PROG (make tests builds it)"
command -v python3 >/dev/null || skip_all "needs python3"
command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 shell"

DB=$T_TMP/fay.db
SHM=$T_TMP/shm
mkdir -p "$SHM"
ok "collector up" coll_start "$DB"
"$FAY" agent --collector "127.0.0.1:$WP" --shm-dir "$SHM" --state-dir "$T_TMP/state" \
	--flush-interval 20ms 2>>"$T_TMP/agent.log" &
T_PIDS+=($!)
TID=$(FAY_SHM_DIR=$SHM "$PROG")
ok "the BlkKin program ran: trace $TID" [ -n "$TID" ]
HEX=$(printf '%016x' "$TID")
have_trace() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v2/trace/$HEX")" = 200 ]; }
ok "its trace reaches the store through the agent" wait_for 20 have_trace
# both spans' partial records (7) may come in more than one batch: waited
# for until both spans hold their last annotation (a fixed 0.5 s was the
# only wait for the later batches)
complete() {
	curl -s "$URL/api/v2/trace/$HEX" | python3 -c '
import json, sys
v = {a["value"] for s in json.load(sys.stdin) for a in s.get("annotations", [])}
sys.exit(0 if {"end", "journal done"} <= v else 1)'
}
wait_for 30 complete
curl -s "$URL/api/v2/trace/$HEX" >"$T_TMP/trace.json"
python3 - "$T_TMP/trace.json" <<'PY' && pass "each span: timestamp = first annotation, duration = last - first" || fail "each span: timestamp = first annotation, duration = last - first" "$(cat "$T_TMP/trace.json")"
import json, sys
spans = json.load(open(sys.argv[1]))
assert len(spans) == 2, spans
by = {s["name"]: s for s in spans}
for name, first, last in (("op_write", "start", "end"), ("journal_write", "journal start", "journal done")):
    s = by[name]
    ann = {a["value"]: a["timestamp"] for a in s["annotations"]}
    assert s["timestamp"] == ann[first], s
    assert s["duration"] == ann[last] - ann[first], s
    assert s["localEndpoint"] == {"serviceName": "osd.1", "ipv4": "10.0.0.3", "port": 6801}, s
assert by["op_write"]["duration"] >= 8000, by["op_write"]    # 3 + 2 + 3 ms of pauses
assert by["op_write"]["tags"] == {"object": "rbd_data.2"}
assert by["journal_write"]["parentId"] == by["op_write"]["id"]
PY
search() { curl -s "$URL/api/v2/traces?$1" | python3 -c "import json,sys; print(' '.join(s['traceId'] for t in json.load(sys.stdin) for s in t[:1]))"; }
ok "found by serviceName=osd.1" [ "$(search 'serviceName=osd.1')" = "$HEX" ]
ok "found by spanName=journal_write" [ "$(search 'serviceName=osd.1&spanName=journal_write')" = "$HEX" ]
ok "found by minDuration=8000 (us)" [ "$(search 'serviceName=osd.1&minDuration=8000')" = "$HEX" ]
ok "found by annotationQuery=queued" [ "$(search 'annotationQuery=queued')" = "$HEX" ]
ok "not found by a window before it (endTs, lookback)" \
	[ "$(search "endTs=$(( $(date +%s) * 1000 - 3600000 ))&lookback=60000")" = "" ]
ok "the trace row has the timestamp (search, retention)" \
	[ "$(sqlite3 "$DB" "select ts_us > 0 and end_us >= ts_us + 8000 from traces")" = 1 ]
ok "the dashboard counts op_write" bash -c "curl -s '$URL/api/ui/dashboard?window=600&step=60' | grep -q '\"op_write\"'"
done_testing
