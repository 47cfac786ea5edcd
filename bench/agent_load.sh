#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Agent under load: collector + agent + `blockstack --requests N`, run with
# two fay binaries in turn (BEFORE and AFTER), RUNS times each; prints the
# records each agent lost to ring overwrite (its "process ... gone" lines),
# the spans it drained, and the medians.  With --stress, two CPU hogs and a
# writer doing write+fsync+rename in a loop on the state directory's file
# system run during every run (a busy host with a busy disk).
#
#   bench/agent_load.sh [--runs N] [--requests N] [--stress] BEFORE_FAY AFTER_FAY
#
# BEFORE_FAY / AFTER_FAY: fay binaries; blockstack is taken from the
# directory of AFTER_FAY (make O=... all examples).  Run as root on an idle
# or deliberately loaded host; note `uptime` with the figures.
set -u
RUNS=5 REQ=3000 STRESS=0
while [ $# -gt 2 ]; do
	case "$1" in
	--runs) RUNS=$2; shift 2 ;;
	--requests) REQ=$2; shift 2 ;;
	--stress) STRESS=1; shift ;;
	*) echo "usage: $0 [--runs N] [--requests N] [--stress] BEFORE_FAY AFTER_FAY" >&2; exit 2 ;;
	esac
done
[ $# -eq 2 ] || { echo "usage: $0 [--runs N] [--requests N] [--stress] BEFORE_FAY AFTER_FAY" >&2; exit 2; }
BEFORE=$1 AFTER=$2
BS=$(dirname "$AFTER")/blockstack
[ -x "$BEFORE" ] && [ -x "$AFTER" ] && [ -x "$BS" ] || { echo "need $BEFORE, $AFTER, $BS" >&2; exit 2; }
W=$(mktemp -d /tmp/fay-agent-load.XXXXXX)
HOGS=()
cleanup() {
	[ ${#HOGS[@]} -gt 0 ] && kill "${HOGS[@]}" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

stress_start() {
	HOGS=()
	for _ in 1 2; do (while :; do :; done) & HOGS+=($!); done
	(i=0; while :; do
		dd if=/dev/zero of="$W/io.tmp" bs=1M count=8 conv=fsync status=none
		mv "$W/io.tmp" "$W/io.$((i++ % 2))"
	done) & HOGS+=($!)
}
stress_stop() { [ ${#HOGS[@]} -gt 0 ] && kill "${HOGS[@]}" 2>/dev/null; wait "${HOGS[@]}" 2>/dev/null; HOGS=(); }

# one FAY: prints "lost drained max_gap_ms"
one() {
	local F=$1 D=$W/run CP AP WP lost drained gap
	rm -rf "$D"; mkdir -p "$D/shm"
	"$F" collector --listen 127.0.0.1:0 --http 127.0.0.1:0 --db "$D/db" >"$D/coll.log" 2>&1 &
	CP=$!
	for _ in $(seq 50); do
		WP=$(grep -o "agents on 127.0.0.1:[0-9]*" "$D/coll.log" | grep -o "[0-9]*$")
		[ -n "$WP" ] && break; sleep 0.1
	done
	"$F" agent --collector "127.0.0.1:$WP" --shm-dir "$D/shm" --state-dir "$D/state" \
		--stats-interval 200ms >"$D/agent.log" 2>&1 &
	AP=$!
	sleep 0.5
	[ $STRESS = 1 ] && stress_start
	FAY_SHM_DIR=$D/shm "$BS" --requests "$REQ" --quiet >"$D/bs.log" 2>&1
	[ $STRESS = 1 ] && stress_stop
	sleep 1.5
	kill "$AP"; wait "$AP" 2>/dev/null
	kill "$CP"; wait "$CP" 2>/dev/null
	read -r drained lost < <(grep -o "gone ([a-z ]*): [0-9]* spans shipped to the spool; lost: [0-9]* ring overwrite" \
		"$D/agent.log" | awk '{d += $(NF-9); l += $(NF-2)} END {print d+0, l+0}')
	gap=$(grep -o '"max_gap_ms":[0-9]*' "$D/state/stats.json" 2>/dev/null | cut -d: -f2)
	echo "$lost $drained ${gap:--}"
}

median() { sort -n | awk '{v[NR] = $1} END {print NR ? v[int((NR + 1) / 2)] : "-"}'; }

echo "# agent under load: blockstack --requests $REQ, $RUNS runs each$([ $STRESS = 1 ] && echo ', with 2 CPU hogs + fsync writer')"
echo "# $(uptime)"
: >"$W/before" ; : >"$W/after"
for i in $(seq "$RUNS"); do
	b=$(one "$BEFORE"); a=$(one "$AFTER")
	echo "$b" >>"$W/before"; echo "$a" >>"$W/after"
	echo "run $i: before lost/drained/max_gap_ms $b | after $a"
done
mb=$(cut -d' ' -f1 "$W/before" | median); ma=$(cut -d' ' -f1 "$W/after" | median)
db=$(cut -d' ' -f2 "$W/before" | median); da=$(cut -d' ' -f2 "$W/after" | median)
echo "median lost to ring overwrite: before $mb of ~$db, after $ma of ~$da"
echo "max lost: before $(cut -d' ' -f1 "$W/before" | sort -n | tail -1), after $(cut -d' ' -f1 "$W/after" | sort -n | tail -1)"
echo "median max drain gap (after, ms): $(cut -d' ' -f3 "$W/after" | median)"
echo "# $(uptime)"
