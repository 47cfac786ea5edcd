#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The flight recorder (#22): a capture says how many spans of its trace
# the flight buffer had already overwritten when it asked.  A collector
# and one agent with the smallest buffer (--flight 1M), real processes
# and sockets.  A request of 3001 spans (trace A) is recorded first, then
# requests of 500 spans until the buffer is full: the spans evicted are
# A's, the oldest, and the agent's stats count them (flight.dropped).
#  - capture --trace A: found + overwritten == 3001, overwritten ==
#    flight.dropped exactly, both in the JSON account (spans_overwritten,
#    the host's overwritten) and printed;
#  - capture --trace of the newest request: all its spans, 0 overwritten.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
WL=$BUILD/tests/bin/flight_workload
[ -x "$WL" ] || skip_all "no $WL (make)"
command -v python3 >/dev/null || skip_all "needs python3"

coll_start "$T_TMP/c.db" || { fail "collector starts" "$(cat "$T_TMP/collector.log")"; done_testing; exit; }
flight_agent h1 --flight 1M
peers() { curl -s "$URL/api/cluster/peers" | grep -q '"host":"h1"'; }
ok "h1's agent has a query connection" wait_for 30 peers

stat() { agent_stat h1 "$1"; }
stat_ge() { [ "$(stat "$1")" -ge "$2" ]; }
# run N CHILDREN OUT: N requests, recorded all, never head-sampled in
# practice (1 in 10^6: the test checks it)
run() {
	FAY_SHM_DIR=$T_TMP/h1/shm FAY_SAMPLE=1000000 FAY_RECORD=all timeout 60 nice -n 10 \
		"$WL" --requests "$1" --children "$2" --child-pause-us 50 --pause-us 0 >"$3" 2>"$3.err"
}
run 1 3000 "$T_TMP/a.out"
read -r A SA NA _ <"$T_TMP/a.out"
ok "trace A: 3001 spans recorded, not head-sampled" bash -c '[ "$1" = 3001 ] && [ "$2" = 0 ]' _ "$NA" "$SA" ||
	diag "$(cat "$T_TMP/a.out" "$T_TMP/a.out.err")"
ok "... all in h1's flight buffer" wait_for 30 stat_ge flight.added 3001
added=3001
for i in $(seq 1 20); do
	[ "$(stat flight.dropped)" -gt 0 ] && break
	run 1 499 "$T_TMP/b$i.out"
	B=$(cut -d' ' -f1 "$T_TMP/b$i.out")
	added=$((added + 500))
	wait_for 30 stat_ge flight.added "$added"
done
DROPPED=$(stat flight.dropped)
ok "the buffer is full: $DROPPED spans evicted, fewer than A's 3001" \
	bash -c '[ "$1" -gt 0 ] && [ "$1" -lt 3001 ]' _ "$DROPPED"
ok "no request was head-sampled" bash -c '! cat "$@" | awk "\$2 != 0" | grep -q .' _ "$T_TMP"/*.out

timeout 30 "$FAY" capture --cluster "$URL" --trace "$A" --json >"$T_TMP/a.json" 2>&1
ok "capture --trace A: $((3001 - DROPPED)) found, $DROPPED already overwritten, exactly" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
d = int(sys.argv[2])
assert a["spans_found"] == 3001 - d and a["spans_stored"] == 3001 - d, a
assert a["spans_overwritten"] == d, a
h = a["hosts"][0]
assert h["host"] == "h1" and h["overwritten"] == d and h["dropped"] == d, h' \
	"$T_TMP/a.json" "$DROPPED" || diag "$(cat "$T_TMP/a.json")"
timeout 30 "$FAY" capture --cluster "$URL" --trace "$A" >"$T_TMP/a.txt" 2>&1
ok "... printed" grep -Eq "spans found $((3001 - DROPPED)), stored [0-9]+, already overwritten $DROPPED\$" \
	"$T_TMP/a.txt" || diag "$(cat "$T_TMP/a.txt")"
ok "... and on h1's line" grep -q "; $DROPPED of the trace already overwritten" "$T_TMP/a.txt"
timeout 30 "$FAY" capture --cluster "$URL" --trace "$B" --json >"$T_TMP/b.json" 2>&1
ok "capture --trace of the newest request: its 500 spans, none overwritten" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["spans_found"] == 500 and a["spans_overwritten"] == 0, a' "$T_TMP/b.json" ||
	diag "$(cat "$T_TMP/b.json")"
ok "the collector runs on" coll_alive
done_testing
