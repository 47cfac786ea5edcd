#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The flight recorder (#22), capture by trace id and by time: a collector,
# an agent with --flight (h1), one without (h2) and one killed before the
# captures (h3), real processes and sockets.  On h1 a workload of requests
# (a root span and 3 children each) runs with head sampling 1 in 1000 and
# FAY_RECORD=all, printing each request's trace id, whether it was sampled
# and its span count: the truth every count is checked against.
#  - the spans shipped normally are exactly those of the sampled traces
#    (about 1 in 1000), none of the others;
#  - fay capture --trace ID of unsampled traces stores exactly their spans,
#    marked with the fay.capture tags; its account says 3 hosts asked... h2
#    has no flight buffer, h3 is not connected;
#  - fay capture --last DUR after a pause returns exactly the spans of the
#    requests run since, none of before, and --service filters;
#  - a capture's account counts its bytes on the wire, exactly;
#  - an agent killed while a capture waits for it is reported missing;
#  - GET /api/captures lists the captures; --help is a manual;
#  - a capture rule (--when) is still there after the collector restarts,
#    and a dropped one is not.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
WL=$BUILD/tests/bin/flight_workload
[ -x "$WL" ] || skip_all "no $WL (make)"
command -v python3 >/dev/null || skip_all "needs python3"

"$FAY" capture --help >"$T_TMP/help.out" 2>&1
ok "fay capture --help is a manual" grep -q '^SYNOPSIS' "$T_TMP/help.out"
"$FAY" capture --cluster http://127.0.0.1:1 --trace 1 --last 1s >/dev/null 2>"$T_TMP/usage.err"
ok "--trace with --last: a usage error (2)" [ $? -eq 2 ]

coll_start "$T_TMP/c.db" || { fail "collector starts" "$(cat "$T_TMP/collector.log")"; done_testing; exit; }
flight_agent h1 --flight 64M
flight_agent h2
flight_agent h3 --flight 8M
peers() { [ "$(curl -s "$URL/api/cluster/peers" | grep -o '"host":' | wc -l)" -ge 3 ]; }
ok "three agents with query connections" wait_for 30 peers
# h3 is known to the collector (its span connection said HELLO) and then
# killed: a capture must say so
known3() { curl -s "$URL/api/ui/hosts" | grep -q '"h3"'; }
wait_for 30 known3
# the agent itself (timeout's child), not timeout
kill -9 $(pgrep -P "$APID_h3") "$APID_h3"
gone3() { ! curl -s "$URL/api/cluster/peers" | grep -q '"h3"'; }
ok "h3 killed: its query connection is gone" wait_for 30 gone3

stat() { agent_stat "$@"; }
stat_eq() { [ "$(stat "$1" "$2")" -eq "$3" ]; }

# ---- phase A: 2000 requests, 1 in 1000 sampled, all recorded -----------------
FAY_SHM_DIR=$T_TMP/h1/shm FAY_SAMPLE=1000 FAY_RECORD=all timeout 120 nice -n 10 \
	"$WL" --requests 2000 --children 3 --pause-us 200 >"$T_TMP/a.out" 2>"$T_TMP/a.err"
ok "workload A ran (2000 requests)" bash -c '[ "$(wc -l <"$1")" -eq 2000 ]' _ "$T_TMP/a.out" ||
	diag "$(cat "$T_TMP/a.err")"
A_SAMPLED=$(awk '$2 == 1 { n += $3 } END { print n + 0 }' "$T_TMP/a.out")
A_UNSAMPLED=$(awk '$2 == 0 { n += $3 } END { print n + 0 }' "$T_TMP/a.out")
A_STRACES=$(awk '$2 == 1' "$T_TMP/a.out" | wc -l)
diag "A: $A_STRACES sampled traces ($A_SAMPLED spans), $A_UNSAMPLED unsampled spans"
ok "head sampling stayed about 1 in 1000 ($A_STRACES of 2000 traces sampled)" [ "$A_STRACES" -le 12 ]
ok "h1 kept every unsampled span in its flight buffer ($A_UNSAMPLED)" \
	wait_for 30 stat_eq h1 flight.added "$A_UNSAMPLED"
ok "... and shipped exactly the sampled ones ($A_SAMPLED)" \
	wait_for 30 stat_eq h1 shipping.spans_acked "$A_SAMPLED"
ok "... nothing dropped from the flight buffer" stat_eq h1 flight.dropped 0

# stored_trace ID: spans the collector holds of trace ID
stored_trace() {
	curl -s "$URL/api/v2/trace/$1" | python3 -c 'import json,sys
try: print(len(json.load(sys.stdin)))
except Exception: print(0)'
}
# what the store holds in all: spans, and those marked captured
stored_all() {
	curl -s "$URL/api/v2/traces?limit=100000&lookback=86400000" | python3 -c 'import json,sys
t = json.load(sys.stdin)
s = [x for tr in t for x in tr]
print(len(s), sum(1 for x in s if "fay.capture" in x.get("tags", {})))'
}
read -r N0 C0 < <(stored_all)
ok "the store holds the sampled spans only ($N0, want $A_SAMPLED), none captured" \
	bash -c '[ "$1" -eq "$2" ] && [ "$3" -eq 0 ]' _ "$N0" "$A_SAMPLED" "$C0"

# ---- capture by trace id ------------------------------------------------------
# acc FILE KEY: a number or string from a capture's JSON account
acc() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
hstate() {	# FILE HOST: that host's state in the account
	python3 -c 'import json,sys
a = json.load(open(sys.argv[1]))
print(next((h["state"] for h in a["hosts"] if h["host"] == sys.argv[2]), "absent"))' "$1" "$2"
}
n=0
bad=""
for id in $(awk '$2 == 0 { print $1 }' "$T_TMP/a.out" | sed -n '1p;500p;1000p;1900p'); do
	n=$((n + 1))
	timeout 30 "$FAY" capture --cluster "$URL" --trace "$id" --json >"$T_TMP/cap$n.json" 2>&1
	want=$(awk -v id="$id" '$1 == id { print $3 }' "$T_TMP/a.out")
	found=$(acc "$T_TMP/cap$n.json" spans_found)
	stored=$(acc "$T_TMP/cap$n.json" spans_stored)
	have=$(stored_trace "$id")
	[ "$found" = "$want" ] && [ "$stored" = "$want" ] && [ "$have" = "$want" ] ||
		bad+=" $id: want $want, found $found, stored $stored, in the store $have;"
done
ok "capture --trace of $n unsampled traces: exactly their spans found and stored" \
	bash -c '[ -z "$1" ] && [ "$2" -eq 4 ]' _ "$bad" "$n" ||
	diag "$bad $(cat "$T_TMP/cap1.json")"
ok "... the account: 2 hosts asked, 2 answered" bash -c '[ "$1" = 2 ] && [ "$2" = 2 ]' _ \
	"$(acc "$T_TMP/cap1.json" hosts_asked)" "$(acc "$T_TMP/cap1.json" hosts_answered)"
ok "... h1 answered" [ "$(hstate "$T_TMP/cap1.json" h1)" = answered ]
ok "... h2 has no flight buffer" [ "$(hstate "$T_TMP/cap1.json" h2)" = "no flight buffer" ]
ok "... h3 (killed) is reported not connected" [ "$(hstate "$T_TMP/cap1.json" h3)" = "not connected" ]
id1=$(awk '$2 == 0 { print $1; exit }' "$T_TMP/a.out")
curl -s "$URL/api/v2/trace/$id1" >"$T_TMP/trace1.json"
ok "captured spans carry fay.capture, fay.capture.at and fay.capture.by" python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
cid = json.load(open(sys.argv[2]))["id"]
assert s and all(x["tags"].get("fay.capture") == cid and x["tags"].get("fay.capture.at")
                 and x["tags"].get("fay.capture.by") == "trace " + sys.argv[3] for x in s), s
' "$T_TMP/trace1.json" "$T_TMP/cap1.json" "$id1"
timeout 30 "$FAY" capture --cluster "$URL" --trace 0123456789abcdef0123456789abcdef >"$T_TMP/none.out" 2>&1
ok "a trace id no host holds: found 0, printed as an account" \
	grep -q 'spans found 0, stored 0' "$T_TMP/none.out" || diag "$(cat "$T_TMP/none.out")"
ok "... with one line per host" grep -q 'h3 .*not connected' "$T_TMP/none.out"
timeout 30 "$FAY" capture --cluster "$URL" --trace 0123456789abcdef0123456789abcdef --json \
	>"$T_TMP/none.json" 2>&1
# a CAPTURE by trace id is a 24-byte header and 38 bytes (cid, kind, two
# ids, a window, an empty service); a CAPTURED of no span 24 + 20 bytes,
# and a byte more per LEB128 byte of held and dropped after their first
ok "... its bytes on the wire: 2 CAPTUREs and 2 CAPTUREDs of no span, exactly" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
leb = lambda v: max(1, (v.bit_length() + 6) // 7)
want = sum(62 + 44 + leb(h["held"]) - 1 + leb(h["dropped"]) - 1
           for h in a["hosts"] if h["state"] in ("answered", "no flight buffer"))
assert a["hosts_answered"] == 2 and a["wire_bytes"] == want, (a["wire_bytes"], want, a)
' "$T_TMP/none.json" || diag "$(cat "$T_TMP/none.json")"

# ---- capture by time ------------------------------------------------------------
# B runs 3 s after A ended; --last covers B (from just before it started)
# and none of A.
sleep 3
T0=$(date +%s%N)
FAY_SHM_DIR=$T_TMP/h1/shm FAY_SAMPLE=1000 FAY_RECORD=all timeout 120 nice -n 10 \
	"$WL" --requests 300 --children 2 --service flightb --pause-us 200 >"$T_TMP/b.out" 2>"$T_TMP/b.err"
B_UNSAMPLED=$(awk '$2 == 0 { n += $3 } END { print n + 0 }' "$T_TMP/b.out")
ok "h1 kept B's unsampled spans too" wait_for 30 stat_eq h1 flight.added $((A_UNSAMPLED + B_UNSAMPLED))
LAST_MS=$(( ($(date +%s%N) - T0) / 1000000 + 1000 ))
timeout 30 "$FAY" capture --cluster "$URL" --last ${LAST_MS}ms --json >"$T_TMP/last.json" 2>&1
ok "capture --last ${LAST_MS}ms: exactly B's $B_UNSAMPLED unsampled spans" \
	[ "$(acc "$T_TMP/last.json" spans_found)" = "$B_UNSAMPLED" ] || diag "$(cat "$T_TMP/last.json")"
ok "... all stored" [ "$(acc "$T_TMP/last.json" spans_stored)" = "$B_UNSAMPLED" ]
timeout 30 "$FAY" capture --cluster "$URL" --last 1h --service flightb --host h1 --json \
	>"$T_TMP/svc.json" 2>&1
ok "capture --last 1h --service flightb --host h1: B's spans only" \
	[ "$(acc "$T_TMP/svc.json" spans_found)" = "$B_UNSAMPLED" ] || diag "$(cat "$T_TMP/svc.json")"
ok "... only h1 asked" bash -c '[ "$1" = 1 ] && [ "$2" = absent ]' _ \
	"$(acc "$T_TMP/svc.json" hosts_asked)" "$(hstate "$T_TMP/svc.json" h2)"

# ---- the list ------------------------------------------------------------------
curl -s "$URL/api/captures" >"$T_TMP/list.json"
ok "GET /api/captures lists the 8 captures, newest first" python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["captures"]
assert len(c) == 8, len(c)
assert c[0]["by"].startswith("last 3600000ms service flightb"), c[0]["by"]
' "$T_TMP/list.json"
"$FAY" capture --cluster "$URL" --list >"$T_TMP/list.out" 2>&1
ok "fay capture --list prints them" [ "$(grep -c '^capture ' "$T_TMP/list.out")" -eq 8 ]
curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"trace_id":"xyz"}' "$URL/api/captures" >"$T_TMP/bad.code"
ok "a bad trace id: 400" [ "$(cat "$T_TMP/bad.code")" = 400 ]
ok "the collector runs on" coll_alive

# ---- an agent killed during a capture ------------------------------------------------
# h1's agent stopped (SIGSTOP) cannot answer: once the CAPTURE sits unread
# in its query socket (the collector sends it nothing else), it is killed
A1=$(pgrep -P "$APID_h1")
kill -STOP "$A1"
timeout 30 "$FAY" capture --cluster "$URL" --trace 0123456789abcdef0123456789abcdef --json \
	>"$T_TMP/kill.json" 2>&1 &
CAP_PID=$!
unread() { ss -Htnp | awk -v p="pid=$A1," '$2 > 0 && index($0, p)' | grep -q .; }
ok "the CAPTURE reached the stopped h1's agent, unread" wait_for 30 unread
kill -9 "$A1"
wait "$CAP_PID"
ok "h1's agent killed during the capture: reported missing, h2 answered, h3 not connected" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
h = {x["host"]: x["state"] for x in a["hosts"]}
assert h == {"h1": "missing", "h2": "no flight buffer", "h3": "not connected"}, h
assert a["hosts_asked"] == 2 and a["hosts_answered"] == 1, a' "$T_TMP/kill.json" ||
	diag "$(cat "$T_TMP/kill.json")"

# ---- a capture rule outlives the collector -----------------------------------------
"$FAY" capture --cluster "$URL" --when 'sp.duration > 10s' --name keepme --per-second 3 \
	>"$T_TMP/rule.out" 2>&1
ok "fay capture --when registers a rule" grep -q "^capture rule keepme: " "$T_TMP/rule.out"
coll_stop
coll_start "$T_TMP/c.db" || { fail "the collector starts again" "$(tail "$T_TMP/collector.log")"; done_testing; exit; }
curl -s "$URL/api/captures/rules" >"$T_TMP/rules.json"
ok "after a restart the rule is there, as registered" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["rules"]
assert [(x["name"], x["expr"], x["per_s"]) for x in r] == [("keepme", "sp.duration > 10s", 3)], r
' "$T_TMP/rules.json" || diag "$(cat "$T_TMP/rules.json")"
"$FAY" capture --cluster "$URL" --drop keepme >/dev/null 2>&1
coll_stop
coll_start "$T_TMP/c.db"
ok "a dropped rule stays dropped" [ "$(curl -s "$URL/api/captures/rules")" = '{"rules":[]}' ]
done_testing
