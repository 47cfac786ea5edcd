#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Flight memory per host (#22): what an agent's flight buffer costs in
# memory, per span recorded and in all.  One collector and, side by side
# in the same run, an agent with --flight SIZE and one without (the peer:
# the agent as it is with the flight recorder off).  The same workload
# (tests/bin/flight_workload, FAY_RECORD=all, head sampling 1 in 1000,
# requests of a root span and 3 children) runs on each host in steps of
# REQ requests until the buffer has wrapped; after each step the script
# prints, for each agent, its RSS (VmRSS) and for the flight agent its
# buffer's figures (stats.json flight: spans held, bytes used, dropped).
# Bytes per recorded span = used / held (the buffer's own accounting:
# entry header + span record with the process's endpoint); RSS per span =
# (RSS flight - RSS peer) / held.
#
#   bench/flight_memory.sh [SIZE [REQ [STEPS]]]    (default 16M 5000 6)
#
# Needs a build (FAY_BUILD, default build).
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
SIZE=${1:-16M}
REQ=${2:-5000}
STEPS=${3:-6}
. "$TOP/tests/lib/lib.sh" >/dev/null
WL=$BUILD/tests/bin/flight_workload
[ -x "$WL" ] || { echo "no $WL: make" >&2; exit 1; }
WP=$(free_port)
HP=$(free_port)
timeout 900 "$FAY" collector --listen 127.0.0.1:$WP --http 127.0.0.1:$HP --db "$T_TMP/c.db" \
	--otlp-http off --otlp-grpc off >"$T_TMP/coll.log" 2>&1 &
T_PIDS+=($!)
wait_for 30 curl -sfo /dev/null "http://127.0.0.1:$HP/health" || exit 1
agent() {	# HOST [ARGS...]
	local h=$1; shift
	mkdir -p "$T_TMP/$h/shm" "$T_TMP/$h/state"
	timeout 900 nice -n 10 "$FAY" agent --collector 127.0.0.1:$WP --host "$h" \
		--shm-dir "$T_TMP/$h/shm" --state-dir "$T_TMP/$h/state" --stats-interval 200ms \
		"$@" >"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
	eval "APID_$h=$!"
}
agent fl --flight "$SIZE"
agent peer
sleep 1
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$(pgrep -P "$1")/status"; }	# KiB
fstat() {	# KEY: stats.json flight.KEY of fl
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["flight"][sys.argv[2]])' \
		"$T_TMP/fl/state/stats.json" "$1" 2>/dev/null || echo 0
}
drained() {	# HOST N: the agent drained N unsampled records (1 in 1000 sampled: 99%)
	[ "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["unsampled"]["records"])' \
		"$T_TMP/$1/state/stats.json" 2>/dev/null || echo 0)" -ge "$(( $2 - $2 / 100 ))" ]
}
echo "# $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg), --flight $SIZE, $REQ requests x 4 spans a step"
printf '%-5s %10s %10s %10s %12s %10s %12s %14s %14s\n' step recorded held dropped used_B \
	B/span rss_fl_KiB rss_peer_KiB rss_delta/span
total=0
for s in $(seq 1 "$STEPS"); do
	for h in fl peer; do
		FAY_SHM_DIR=$T_TMP/$h/shm FAY_SAMPLE=1000 FAY_RECORD=all timeout 120 nice -n 10 \
			"$WL" --requests "$REQ" --children 3 --pause-us 20 >"$T_TMP/$h.$s.out" 2>&1
	done
	total=$((total + REQ * 4))
	wait_for 30 drained fl "$total" || echo "# fl: not all $total drained" >&2
	wait_for 30 drained peer "$total" || echo "# peer: not all $total drained" >&2
	sleep 0.5	# one stats interval past the drain
	held=$(fstat spans)
	used=$(fstat used)
	rf=$(rss "$APID_fl")
	rp=$(rss "$APID_peer")
	printf '%-5s %10s %10s %10s %12s %10s %12s %14s %14s\n' "$s" "$(fstat added)" "$held" \
		"$(fstat dropped)" "$used" "$(( held ? used / held : 0 ))" "$rf" "$rp" \
		"$(( held ? (rf - rp) * 1024 / held : 0 ))"
done
