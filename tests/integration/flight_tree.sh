#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The flight recorder through a tree of collectors (#22): a root
# collector, a child collector under it (--parent), agent a1 (--flight)
# under the child and agent a2 (--flight) under the root, real processes
# and sockets.  A workload on a1's host records every request
# (FAY_RECORD=all, head sampling 1 in 1000) and prints each trace's id,
# whether it was sampled and its span count, which every count here is
# checked against:
#  - fay capture --trace ID at the root stores the trace's spans in the
#    root's store: the child collector answers for a1 (one host, its
#    spans and a1's buffer counts), a2 answers with none;
#  - a capture rule registered at the root runs on a1 through the child
#    (its predicate picks one service's spans) and captures each of that
#    service's unsampled traces whole, marked by the rule, and no other
#    (the other service's requests run meanwhile: nothing of them stored);
#  - fay capture --last --host a1 at the root asks a1 through the child
#    (its account names a1 "via c1", with every unsampled span a1 holds),
#    --host a2 asks a2 only (the child, without a2 under it, is left
#    out), and a host under no one is asked nowhere;
#  - probe events in keep mode (a standing query registered at the root,
#    '... keep 300s') are kept on a1 (under the child) and a2 (under the
#    root), each its own calls of its own copy of query_work, and fay
#    capture --query at the root brings back both: a1's through c1;
#  - a1 stopped (SIGSTOP): --host a1 reports a1 (via c1) "missing", not
#    "no flight buffer", and so does a capture by id for c1 (its only
#    host silent); a1 killed while the child waits on it: missing too.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
WL=$BUILD/tests/bin/flight_workload
QW=$BUILD/tests/bin/query_work
[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"
[ -x "$WL" ] || skip_all "no $WL (make)"
[ -x "$QW" ] || skip_all "no $QW (make)"
command -v curl >/dev/null || skip_all "needs curl"
command -v python3 >/dev/null || skip_all "needs python3"

# coll NAME [ARGS...]: a collector on free ports; sets ${NAME}_W, ${NAME}_H
coll() {
	local n=$1 w h
	shift
	w=$(free_port)
	h=$(free_port)
	timeout 800 "$FAY" collector --listen 127.0.0.1:$w --http 127.0.0.1:$h --db "$T_TMP/$n.db" \
		--otlp-http off --otlp-grpc off "$@" >>"$T_TMP/$n.log" 2>&1 &
	T_PIDS+=($!)
	printf -v "${n}_W" %s "$w"
	printf -v "${n}_H" %s "$h"
	wait_for 30 curl -sf "http://127.0.0.1:$h/health"
}
agent() {	# HOST WIREPORT; it runs in $T_TMP/HOST, where ./qw is its own
	mkdir -p "$T_TMP/$1/shm" "$T_TMP/$1/state"
	cp "$QW" "$T_TMP/$1/qw"
	cd "$T_TMP/$1" || return
	timeout 800 nice -n 10 "$FAY" agent --collector 127.0.0.1:$2 --host "$1" --flight 16M \
		--shm-dir "$T_TMP/$1/shm" --state-dir "$T_TMP/$1/state" --stats-interval 200ms \
		--flush-interval 20ms >>"$T_TMP/$1.log" 2>&1 &
	T_PIDS+=($!)
	eval "APID_$1=$!"
	cd - >/dev/null
}
ok "root collector up" coll root
ok "child collector up, under the root" coll c1 --parent 127.0.0.1:$root_W --host c1
agent a1 "$c1_W"
agent a2 "$root_W"
ROOT=http://127.0.0.1:$root_H
# peers URL NAMES...: each has a query connection there
peers() {
	local u=$1 h; shift
	for h; do curl -s "$u/api/cluster/peers" | grep -q "\"host\":\"$h\"" || return 1; done
}
ok "a1 under c1; c1 and a2 under the root" \
	wait_for 30 bash -c "$(declare -f peers); peers http://127.0.0.1:$c1_H a1 && peers $ROOT c1 a2"
capture() { timeout 30 "$FAY" capture --cluster "$ROOT" "$@"; }

# run SERVICE N OUT: N requests of 3 children on a1, recorded all
run() {
	FAY_SHM_DIR=$T_TMP/a1/shm FAY_SAMPLE=1000 FAY_RECORD=all timeout 60 nice -n 10 \
		"$WL" --requests "$2" --children 3 --pause-us 2000 --service "$1" >"$3" 2>"$3.err"
}
run shop 20 "$T_TMP/w1.out"
ok "the workload ran 20 requests" bash -c '[ "$(wc -l <"$1")" -eq 20 ]' _ "$T_TMP/w1.out" ||
	diag "$(cat "$T_TMP/w1.out.err")"
ALL1=$(awk '$2 == 0 { n += $3 } END { print n + 0 }' "$T_TMP/w1.out")
held() {
	python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["flight"]["added"] >= int(sys.argv[2]) else 1)' \
		"$T_TMP/a1/state/stats.json" "$1" 2>/dev/null
}
ok "a1 holds the $ALL1 unsampled spans" wait_for 30 held "$ALL1"
read -r T N < <(awk '$2 == 0 { print $1, $3; exit }' "$T_TMP/w1.out")

# ---- by trace id, through the child ---------------------------------------------
capture --trace "$T" --json >"$T_TMP/cap.json" 2>"$T_TMP/cap.err"
ok "fay capture --trace at the root: c1 answers for a1 with the $N spans, a2 with none" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
h = {x["host"]: x for x in a["hosts"]}
assert a["hosts_asked"] == 2 and a["hosts_answered"] == 2, a
assert h["c1"]["state"] == "answered" and h["c1"]["spans"] == int(sys.argv[2]), h
assert h["c1"]["held"] >= int(sys.argv[3]), h
assert h["a2"]["state"] == "answered" and h["a2"]["spans"] == 0, h
assert a["spans_stored"] == int(sys.argv[2]), a' "$T_TMP/cap.json" "$N" "$ALL1" ||
	diag "$(cat "$T_TMP/cap.json" "$T_TMP/cap.err")"
ok "the root's store has the trace's $N spans, marked" [ "$(captured_spans "$ROOT" "$T" "trace $T")" = "$N" ]

# ---- a rule at the root, run on a1 through the child ------------------------------
capture --when 'sp.service == "depot" && sp.name == "request"' --name depot --follow 0 \
	>"$T_TMP/rule.out" 2>&1
ok "a rule registered at the root" grep -q "^capture rule depot: " "$T_TMP/rule.out" ||
	diag "$(cat "$T_TMP/rule.out")"
attached() {
	curl -s "http://127.0.0.1:$c1_H/api/cluster/peers" | grep -q '"state":"attached"'
}
ok "its query reached a1 through c1" wait_for 30 attached
run depot 10 "$T_TMP/w2.out"
ok "the second workload ran 10 requests" bash -c '[ "$(wc -l <"$1")" -eq 10 ]' _ "$T_TMP/w2.out"
NU=$(awk '$2 == 0' "$T_TMP/w2.out" | wc -l)
rule() {
	curl -s "$ROOT/api/captures/rules" | python3 -c '
import json, sys
print([x for x in json.load(sys.stdin)["rules"] if x["name"] == "depot"][0][sys.argv[1]])' "$1"
}
captured() { [ "$(rule captures)" -ge 10 ]; }
ok "the rule captured the 10 depot traces" wait_for 30 captured ||
	diag "$(curl -s "$ROOT/api/captures/rules")"
bad=""
while read -r t s n _; do
	[ "$s" = 0 ] || continue
	got=$(captured_spans "$ROOT" "$t" "rule depot: span request on ")
	[ "$got" = "$n" ] || bad+=" $t: $got of $n;"
done <"$T_TMP/w2.out"
ok "each of the $NU unsampled depot traces stored whole at the root, marked by the rule" [ -z "$bad" ] ||
	diag "$bad"
# shop requests again, while the rule runs: none of them matches
run shop 10 "$T_TMP/w3.out"
ok "a third workload (shop) ran 10 requests" wait_for 30 held "$((ALL1 + $(awk '$2 == 0 { n += $3 } END { print n + 0 }' "$T_TMP/w2.out" "$T_TMP/w3.out")))"
bad=""
while read -r t s n _; do
	[ "$s" = 0 ] || continue
	got=$(captured_spans "$ROOT" "$t" "")
	[ "$got" = 0 ] || bad+=" $t: $got;"
done <"$T_TMP/w3.out"
ok "no span of the shop traces run while the rule ran is stored" [ -z "$bad" ] || diag "$bad"
ok "the rule matched the depot roots only" [ "$(rule matches)" = 10 ]

# ---- --last --host: a host under the child, one under the root, one nowhere -------
ALLA1=$(awk '$2 == 0 { n += $3 } END { print n + 0 }' "$T_TMP/w1.out" "$T_TMP/w2.out" "$T_TMP/w3.out")
capture --last 1h --host a1 --json >"$T_TMP/h1.json" 2>"$T_TMP/h1.err"
ok "capture --last 1h --host a1 at the root: a1 asked via c1, its $ALLA1 unsampled spans, no one else" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["hosts_asked"] == 1 and a["hosts_answered"] == 1, a
h = a["hosts"]
assert len(h) == 1 and h[0]["host"] == "a1" and h[0].get("via") == "c1", h
assert h[0]["state"] == "answered" and h[0]["spans"] == int(sys.argv[2]), h
assert a["spans_found"] == int(sys.argv[2]), a' "$T_TMP/h1.json" "$ALLA1" ||
	diag "$(cat "$T_TMP/h1.json" "$T_TMP/h1.err")"
capture --last 1h --host a1 >"$T_TMP/h1.out" 2>&1
ok "... printed as a1 (via c1)" grep -Eq '^  a1 \(via c1\) +answered: '"$ALLA1"' spans' "$T_TMP/h1.out" ||
	diag "$(cat "$T_TMP/h1.out")"
capture --last 1h --host a2 --json >"$T_TMP/h2.json" 2>"$T_TMP/h2.err"
ok "capture --last 1h --host a2: a2 only (c1, without a2 under it, left out)" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["hosts_asked"] == 1 and a["hosts_answered"] == 1, a
h = a["hosts"]
assert len(h) == 1 and h[0]["host"] == "a2" and "via" not in h[0], h
assert h[0]["state"] == "answered" and h[0]["spans"] == 0, h' "$T_TMP/h2.json" ||
	diag "$(cat "$T_TMP/h2.json" "$T_TMP/h2.err")"
capture --last 1h --host nosuch --json >"$T_TMP/h3.json" 2>"$T_TMP/h3.err"
ok "capture --last 1h --host nosuch: no host asked, none found" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["hosts_asked"] == 0 and a["hosts"] == [] and a["spans_found"] == 0, a' "$T_TMP/h3.json" ||
	diag "$(cat "$T_TMP/h3.json" "$T_TMP/h3.err")"
# ---- probe events in keep mode, through the child ---------------------------------
KQ='from c in cluster.function("./qw:fay_work_fn") select { host: c.host, i: c.arg(0) } keep 300s'
timeout 30 "$FAY" query --cluster "$ROOT" --keep kq "$KQ" >"$T_TMP/kq.out" 2>&1
ok "a standing query in keep mode registered at the root" grep -q '^standing query kq' "$T_TMP/kq.out" ||
	diag "$(cat "$T_TMP/kq.out")"
# kept HOST: how many events HOST's keep buffers have taken (stats.json)
kept() {
	python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["keep"]["added"]))' \
		"$T_TMP/$1/state/stats.json" 2>/dev/null || echo 0
}
keeping() {
	python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["keep"]["queries"] >= 1 else 1)' \
		"$T_TMP/$1/state/stats.json" 2>/dev/null
}
ok "a1 (under c1) and a2 run it in keep mode" wait_for 60 bash -c "$(declare -f keeping); T_TMP=$T_TMP; keeping a1 && keeping a2"
sleep 1
( cd "$T_TMP/a1" && exec ./qw calls 40 ) >/dev/null 2>&1
( cd "$T_TMP/a2" && exec ./qw calls 15 ) >/dev/null 2>&1
kept_all() { [ "$(kept a1) $(kept a2)" = "40 15" ]; }
ok "a1 kept its 40 calls, a2 its 15" wait_for 30 kept_all || diag "a1 $(kept a1), a2 $(kept a2)"
capture --query kq --last 5m --json >"$T_TMP/kq.json" 2>"$T_TMP/kq.err"
ok "fay capture --query kq at the root: 55 events, c1 answering for a1's 40, a2 its 15" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
h = {x["host"]: x for x in a["hosts"]}
assert a["events_found"] == 55 and a["hosts_answered"] == 2, a
assert h["c1"]["state"] == "answered" and h["c1"]["events"] == 40, h
assert h["a2"]["state"] == "answered" and h["a2"]["events"] == 15, h' "$T_TMP/kq.json" ||
	diag "$(cat "$T_TMP/kq.json" "$T_TMP/kq.err")"
capture --show "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T_TMP/kq.json")" \
	>"$T_TMP/kq.show" 2>&1
ok "... --show prints a1's arguments 0..39 and a2's 0..14" python3 -c '
import json, sys
got = {}
for l in open(sys.argv[1]):
    e = json.loads(l)
    got.setdefault(e["event"]["host"], []).append(e["event"]["i"])
assert {h: sorted(v) for h, v in got.items()} == {"a1": list(range(40)), "a2": list(range(15))}, got' \
	"$T_TMP/kq.show" || diag "$(head -5 "$T_TMP/kq.show")"

# ---- a1 silent, then killed, under the child: missing -------------------------
A1=$(pgrep -P "$APID_a1")
# stop_a1: SIGSTOP, and wait until every thread of a1 is stopped (on a
# loaded machine the group stop can still be under way when a capture
# reaches a1 otherwise)
stop_a1() {
	kill -STOP "$A1"
	wait_for 10 bash -c 'for t in /proc/$1/task/*/stat; do
		[ "$(sed "s/.*) //" "$t" | cut -d" " -f1)" = T ] || exit 1; done' _ "$A1"
}
# each stop shorter than WIRE_DEAD_MS: c1 keeps a1's connection
stop_a1
capture --last 1h --host a1 --json >"$T_TMP/s1.json" 2>"$T_TMP/s1.err"
kill -CONT "$A1"
stop_a1
capture --trace "$T" --json >"$T_TMP/s2.json" 2>"$T_TMP/s2.err"
kill -CONT "$A1"
ok "a1 continued: still under c1" wait_for 30 bash -c "$(declare -f peers); peers http://127.0.0.1:$c1_H a1"
ok "a1 stopped: --last --host a1 reports a1 (via c1) missing, not \"no flight buffer\"" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
h = a["hosts"]
assert len(h) == 1 and h[0]["host"] == "a1" and h[0].get("via") == "c1", h
assert h[0]["state"] == "missing" and a["hosts_asked"] == 1 and a["hosts_answered"] == 0, a' \
	"$T_TMP/s1.json" || diag "$(cat "$T_TMP/s1.json" "$T_TMP/s1.err")"
ok "... --trace: c1 (its only host silent) missing, a2 answered" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
h = {x["host"]: x["state"] for x in a["hosts"]}
assert h == {"c1": "missing", "a2": "answered"}, h
assert a["hosts_asked"] == 2 and a["hosts_answered"] == 1, a' "$T_TMP/s2.json" ||
	diag "$(cat "$T_TMP/s2.json" "$T_TMP/s2.err")"
# killed while the child waits on it: the CAPTURE sits unread in its socket
unread() { ss -Htnp | awk -v p="pid=$A1," '$2 > 0 && index($0, p)' | grep -q .; }
wait_for 30 bash -c "$(declare -f unread); A1=$A1; ! unread"
stop_a1
capture --last 1h --host a1 --json >"$T_TMP/s3.json" 2>"$T_TMP/s3.err" &
CAP_PID=$!
ok "a CAPTURE reached the stopped a1 through c1, unread" wait_for 30 unread
kill -9 "$A1"
wait "$CAP_PID"
ok "a1 killed during a capture through c1: reported missing (via c1)" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
h = a["hosts"]
assert len(h) == 1 and h[0]["host"] == "a1" and h[0].get("via") == "c1", h
assert h[0]["state"] == "missing" and a["hosts_answered"] == 0, a' "$T_TMP/s3.json" ||
	diag "$(cat "$T_TMP/s3.json" "$T_TMP/s3.err")"
ok "the collectors run on" bash -c "curl -sf $ROOT/health >/dev/null && curl -sf http://127.0.0.1:$c1_H/health >/dev/null"
done_testing
