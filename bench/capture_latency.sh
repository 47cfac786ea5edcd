#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Capture rules (#22): the time from a matching span's end to its whole
# trace stored, with three hosts in network namespaces (the setup of
# tests/integration/flight_rule_netns.sh: a request crossing h1 -> h2 ->
# h3, 5 spans, FAY_RECORD=all, head sampling 1 in 1000, every agent with
# --flight 16M, --flush-interval 20ms).  Every Kth request's leaf sleeps
# 200 ms and the rule `sp.name == "leaf" && sp.duration > 100ms` captures
# it; the collector's account of each capture has latency_ms (the leaf's
# end to the trace stored).  Runs once per --settle value and prints
# p50, p99 and max of latency_ms for each, and the spans stored per
# capture in its first round and after its follow rounds (the rule's
# default --follow 10s), with when the late ones were stored, and the
# bytes on the wire of each capture's first round and of its follow
# rounds (the account's wire_bytes, follow_wire_bytes).  No other tool
# captures a trace retroactively across hosts on this machine: there is
# no peer to run beside it.
#
#   bench/capture_latency.sh [REQUESTS [EVERY [SETTLES]]]   (default 200 4 "300 100")
#
# TREE=1: a two-level tree of collectors: h3's agent reports to a child
# collector (namespace mid, fay collector --parent), h1's and h2's to the
# root, where the rule is registered; the latency then includes the
# child's round to h3 (the issue's goal: 2 s at p99).
#
# Needs root (network namespaces) and a build (FAY_BUILD, default build).
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
REQ=${1:-200}
EVERY=${2:-4}
SETTLES=${3:-300 100}
# the tests' helpers: T_TMP, T_PIDS (killed at exit), wait_for, netns
. "$TOP/tests/lib/lib.sh" >/dev/null
. "$TOP/tests/lib/netns.bash"
HOP=$BUILD/tests/bin/flight_hop
[ -x "$HOP" ] || { echo "no $HOP: make" >&2; exit 1; }
ns_init
TREE=${TREE:-0}
for h in coll h1 h2 h3; do ns_add $h || exit 1; done
[ "$TREE" = 1 ] && { ns_add mid || exit 1; }
URL=http://127.0.0.1:9411
# listening on a network needs tokens (the collector refuses otherwise)
printf 'agt write agents\ncli read,write,probe client\n' >"$T_TMP/tokens"
cp "$T_TMP/tokens" "$T_TMP/mid.tokens"	# the child's own (TREE=1)
echo 'kid write agents' >>"$T_TMP/tokens"	# the child's to the root
echo agt >"$T_TMP/agent.tok"
chmod 600 "$T_TMP/tokens" "$T_TMP/mid.tokens" "$T_TMP/agent.tok"
ns_bg coll timeout 900 "$FAY" collector --listen 0.0.0.0:9410 --http 127.0.0.1:9411 \
	--db "$T_TMP/c.db" --token-file "$T_TMP/tokens" --otlp-http off --otlp-grpc off \
	>"$T_TMP/coll.log" 2>&1
wait_for 30 ns_run coll curl -sfo /dev/null "$URL/health" || exit 1
up3=coll
if [ "$TREE" = 1 ]; then
	up3=mid
	ns_bg mid timeout 900 "$FAY" collector --listen 0.0.0.0:9410 --http 127.0.0.1:9411 \
		--db "$T_TMP/mid.db" --token-file "$T_TMP/mid.tokens" --otlp-http off --otlp-grpc off \
		--parent "$(ns_ip coll):9410" --host mid --token kid >"$T_TMP/mid.log" 2>&1
	wait_for 30 ns_run mid curl -sfo /dev/null "$URL/health" || exit 1
fi
for h in h1 h2 h3; do
	mkdir -p "$T_TMP/$h/shm" "$T_TMP/$h/state"
	up=coll
	[ $h = h3 ] && up=$up3
	ns_enter_bg $h timeout 900 nice -n 10 "$FAY" agent --collector "$(ns_ip $up):9410" --host $h \
		--flight 16M --shm-dir "$T_TMP/$h/shm" --state-dir "$T_TMP/$h/state" \
		--token-file "$T_TMP/agent.tok" --flush-interval 20ms >"$T_TMP/$h.log" 2>&1
done
api() { ns_run coll curl -s -H "Authorization: Bearer cli" "$@"; }
listening() { ns_run "$1" ss -Hltn "sport = :$2" | grep -q LISTEN; }
attached() {
	api "$URL/api/cluster/peers" | python3 -c '
import json, sys
p = json.load(sys.stdin)["peers"]
hosts = {x["host"] for x in p if any(q["state"] == "attached" for q in x.get("queries", []))}
sys.exit(0 if {"h1", "h2", sys.argv[1]} <= hosts else 1)' "$([ "$TREE" = 1 ] && echo mid || echo h3)" &&
		{ [ "$TREE" != 1 ] || ns_run mid curl -s -H "Authorization: Bearer cli" "$URL/api/cluster/peers" | grep -q '"state":"attached"'; }
}
port=7400
echo "# $(date -u +%F) $(uname -m) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $REQ requests, every ${EVERY}th slow (200 ms leaf), 3 hosts in netns$([ "$TREE" = 1 ] && echo ", h3 under a child collector")"
for settle in $SETTLES; do
	name=lat_$settle
	ns_run coll "$FAY" capture --cluster "$URL" --token cli --name "$name" --settle "${settle}ms" \
		--per-second 100 --when 'sp.name == "leaf" && sp.duration > 100ms' >/dev/null || exit 1
	wait_for 30 attached || { echo "rule not attached" >&2; exit 1; }
	port=$((port + 1))
	for h in h3 h2; do
		next=()
		[ $h = h2 ] && next=(--next "$(ns_ip h3):$port")
		ns_enter_bg $h env FAY_SHM_DIR="$T_TMP/$h/shm" FAY_SAMPLE=1000 FAY_RECORD=all \
			timeout 600 nice -n 10 "$HOP" --serve $port "${next[@]}" --service $h
		wait_for 30 listening $h $port
	done
	ns_enter h1 env FAY_SHM_DIR="$T_TMP/h1/shm" FAY_SAMPLE=1000 \
		FAY_RECORD=all timeout 600 nice -n 10 "$HOP" --client "$(ns_ip h2):$port" --service h1 \
		--requests "$REQ" --slow-every "$EVERY" --slow-ms 200 --pause-us 20000 >"$T_TMP/req.out"
	want=$(awk '$2 == 1 && $3 == 0' "$T_TMP/req.out" | wc -l)
	done_caps() {
		[ "$(api "$URL/api/captures" | python3 -c 'import json,sys
print(sum(1 for c in json.load(sys.stdin)["captures"] if c.get("rule") == sys.argv[1]))' "$name")" -ge "$want" ]
	}
	wait_for 60 done_caps
	# and every follow ended (the rule's default --follow 10s)
	followed() {
		api "$URL/api/captures" | python3 -c 'import json,sys
sys.exit(any(c.get("following") for c in json.load(sys.stdin)["captures"] if c.get("rule") == sys.argv[1]))' "$name"
	}
	wait_for 60 followed
	api "$URL/api/captures" | python3 -c '
import json, sys, collections
c = [x for x in json.load(sys.stdin)["captures"] if x.get("rule") == sys.argv[1]]
lat = sorted(x["latency_ms"] for x in c)
first = collections.Counter(x["spans_stored"] - x["spans_late"] for x in c)
final = collections.Counter(x["spans_stored"] for x in c)
late = sorted(x["last_late_ms"] for x in c if x["spans_late"])
q = lambda v, p: v[min(len(v) - 1, int(p * len(v)))] if v else 0
wb = sorted(x["wire_bytes"] for x in c)
rounds = sum(x["follow_rounds"] for x in c)
fwb = sorted(x["follow_wire_bytes"] / x["follow_rounds"] for x in c if x["follow_rounds"])
print("settle %4s ms: %d captures (want %s), latency ms p50 %d p99 %d max %d; spans per capture "
      "(count: captures) in the first round %s, after the follow %s; %d captures had late spans "
      "(%d spans), stored by the round at p50 %d ms, max %d ms after the capture; bytes on the "
      "wire (CAPTURE + CAPTURED frames, 3 hosts) per first round p50 %d max %d, per follow round "
      "p50 %d max %d (%d rounds, %d bytes in all)"
      % (sys.argv[2], len(c), sys.argv[3], q(lat, 0.5), q(lat, 0.99), lat[-1], dict(first),
         dict(final), len(late), sum(x["spans_late"] for x in c), q(late, 0.5), q(late, 1),
         q(wb, 0.5), wb[-1], q(fwb, 0.5), fwb[-1] if fwb else 0, rounds,
         sum(x["follow_wire_bytes"] for x in c)))
' "$name" "$settle" "$want"
	ns_run coll "$FAY" capture --cluster "$URL" --token cli --drop "$name" >/dev/null
done
