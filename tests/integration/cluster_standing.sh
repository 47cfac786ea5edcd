#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Standing cluster queries (fay query --cluster URL --keep NAME / --drop
# NAME): registered, their windows kept as history, the latest exported on
# /metrics, surviving a restart of the collector and of an agent, dropped
# with every agent detaching; bad names and queries refused with reasons.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/collector_lib.bash"

declare -A APID
agent_start() {
	local d=$T_TMP/$1
	mkdir -p "$d"
	"$FAY" agent --collector 127.0.0.1:$WP --host "$1" --shm-dir "$d" --state-dir "$d" \
		>>"$T_TMP/$1.log" 2>&1 &
	APID[$1]=$!
	T_PIDS+=($!)
}
peers() { [ "$(curl -s "$URL/api/cluster/peers" | grep -o '"host":' | wc -l)" -ge "$1" ]; }
series() { curl -s "$URL/metrics" | grep -c "^fay_query_$1{host=\"$2\",column=\"n\"} [0-9]*$"; }
windows() { curl -s "$URL/api/queries/$1/results?limit=1000" | grep -o '"type":"window"' | wc -l; }
has_series() { [ "$(series "$1" "$2")" -eq 1 ]; }
more_windows() { [ "$(windows "$1")" -gt "$2" ]; }

W=$BUILD/tests/bin/query_work
[ -x "$W" ] || skip_all "query_work is not built (make)"
# getppid calls all along, so that every window has rows
( while :; do "$W" getppid 20 >/dev/null; sleep 0.1; done ) &
T_PIDS+=($!)

coll_start "$T_TMP/c.db"
agent_start a1
agent_start a2
ok "two agents with query connections" wait_for 15 peers 2

Q='from s in cluster.syscall("getppid") group s by s.host into g select { host: g.key, n: g.count() } window 1s'
"$FAY" query --cluster "$URL" --keep ppid "$Q" >"$T_TMP/o" 2>"$T_TMP/e"
RC=$?
[ $RC -eq 0 ] && grep -q 'standing query ppid: runs until' "$T_TMP/o" &&
	pass "--keep registers a standing query" || fail "--keep (rc=$RC)" "$(cat "$T_TMP/o" "$T_TMP/e")"
ok "its latest window is on /metrics: fay_query_ppid{host=\"a1\",column=\"n\"}" wait_for 10 has_series ppid a1
ok "... and a2's" wait_for 10 has_series ppid a2
grep -q '^# TYPE fay_query_ppid gauge' <(curl -s "$URL/metrics") && pass "a gauge with HELP and TYPE" ||
	fail "TYPE line"
ok "its windows are kept as history" wait_for 10 more_windows ppid 2
n=$(windows ppid)
curl -s "$URL/api/queries/ppid/results?limit=2" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["name"] == "ppid" and len(r["windows"]) == 2, r
w = r["windows"]
assert w[0]["start_ns"] < w[1]["start_ns"] and w[1]["start_ns"] - w[0]["start_ns"] == 10**9, w
assert all(x["hosts"]["asked"] == 2 for x in w), w
' && pass "results?limit=2: the last two windows, oldest first, aligned" || fail "results"

# errors
"$FAY" query --cluster "$URL" --keep ppid "$Q" >"$T_TMP/o" 2>"$T_TMP/e"
[ $? -eq 1 ] && grep -q 'a standing query named ppid exists' "$T_TMP/e" && pass "the same name twice: refused (409)" ||
	fail "duplicate" "$(cat "$T_TMP/e")"
"$FAY" query --cluster "$URL" --keep 'bad-name' "$Q" >"$T_TMP/o" 2>"$T_TMP/e"
[ $? -eq 2 ] && grep -q 'name: 1 to 64 letters, digits' "$T_TMP/e" && pass "a name that is no metric name: refused" ||
	fail "bad name" "$(cat "$T_TMP/e")"
"$FAY" query --cluster "$URL" --keep nowin 'from s in cluster.syscall("getppid") select { n: count() }' >"$T_TMP/o" 2>"$T_TMP/e"
[ $? -eq 2 ] && grep -q "needs aggregates and 'window DUR'" "$T_TMP/e" && pass "no window: refused with the reason" ||
	fail "no window" "$(cat "$T_TMP/e")"
"$FAY" query --cluster "$URL" --keep broken 'from s in cluster.syscall("getppid") select { n: count( } window 1s' >"$T_TMP/o" 2>"$T_TMP/e"
[ $? -eq 2 ] && grep -q '<standing query>:1:' "$T_TMP/e" && pass "a query error: refused at its line:col" ||
	fail "query error" "$(cat "$T_TMP/e")"

# a collector restart: the standing query comes back by itself
coll_stop
"$FAY" collector --listen 127.0.0.1:$WP --http 127.0.0.1:$HP --db "$T_TMP/c.db" >>"$T_TMP/collector.log" 2>&1 &
CPID=$!
T_PIDS+=($CPID)
wait_for 10 curl -sf "$URL/health"
grep -q 'standing query ppid: running again' "$T_TMP/collector.log" && pass "restarted: the collector runs it again" ||
	fail "not resumed" "$(tail -5 "$T_TMP/collector.log")"
ok "restarted: new windows are added to the same history" wait_for 15 more_windows ppid $((n + 1))

# an agent restart: it rejoins
kill "${APID[a2]}"
wait "${APID[a2]}" 2>/dev/null
agent_start a2
# polled, not read once after a fixed 4 s (the agent's start, its query
# connection and its attach can take longer under load); only windows
# begun after the restart count: the one under way may predate it
m=$(( $(windows ppid) + 1 ))
rejoined() { more_windows ppid "$m" && curl -s "$URL/api/queries/ppid/results?limit=1" | grep -q '"answered":2'; }
wait_for 60 rejoined &&
	pass "a restarted agent rejoins: the latest window has both hosts" ||
	fail "agent rejoin" "$(curl -s "$URL/api/queries/ppid/results?limit=2")"

# drop: gone from the list and from /metrics; agents detach
"$FAY" query --cluster "$URL" --drop ppid >"$T_TMP/o" 2>"$T_TMP/e"
[ $? -eq 0 ] && grep -q 'standing query ppid dropped' "$T_TMP/o" && pass "--drop stops it" || fail "--drop" "$(cat "$T_TMP/e")"
[ "$(curl -s "$URL/api/queries")" = "[]" ] && pass "the list is empty" || fail "list" "$(curl -s "$URL/api/queries")"
[ "$(series ppid a1)" -eq 0 ] && pass "its series are gone from /metrics" || fail "series left"
detached() { grep -q 'cancelled, probes detached' "$T_TMP/a1.log" && grep -q 'cancelled, probes detached' "$T_TMP/a2.log"; }
ok "both agents detached its probes" wait_for 30 detached
"$FAY" query --cluster "$URL" --drop ppid >"$T_TMP/o" 2>"$T_TMP/e"
[ $? -eq 1 ] && grep -q 'no standing query named ppid' "$T_TMP/e" && pass "dropping it again: no such query" ||
	fail "second drop" "$(cat "$T_TMP/e")"
coll_alive && pass "the collector is up" || fail "collector died"
done_testing
