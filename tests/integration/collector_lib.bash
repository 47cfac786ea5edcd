# SPDX-License-Identifier: MIT
# Sourced by tests/integration/collector_*.sh (not a test itself: no .sh): start and stop a real
# 'fay collector' on free loopback ports with a temp store.
CLIENT=${CLIENT:-$BUILD/tests/fay-wire-client}

[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"
[ -x "$CLIENT" ] || skip_all "no wire test client at $CLIENT (make builds it)"
command -v curl >/dev/null || skip_all "needs curl"

# The store backend of every collector these helpers start: SQLite (DB)
# by default; with FAY_TEST_CH_URLS (comma-separated ClickHouse HTTP URLs,
# see tests/integration/store_conformance.sh) a ClickHouse database of
# its own per DB path, with FAY_TEST_CH_CLUSTER on that cluster.
# coll_store_args DB: the options that select the store
coll_store_args() {
	local db=$1 name urls="" u
	if [ -z "${FAY_TEST_CH_URLS:-}" ]; then
		printf '%s\n' --db "$db"
		return
	fi
	name=t_$(printf '%s' "$db" | md5sum | cut -c1-16)
	for u in ${FAY_TEST_CH_URLS//,/ }; do urls+=${urls:+,}$u/$name; done
	printf '%s\n' --db "$db" --clickhouse "$urls"
	[ -n "${FAY_TEST_CH_CLUSTER:-}" ] && printf '%s\n' --clickhouse-cluster "$FAY_TEST_CH_CLUSTER"
	return 0
}

# coll_start DB [ARGS...]: sets CPID, WP (wire port), HP (HTTP port), URL.
# The OTLP listeners are off unless ARGS name them (the last option wins).
# Waits COLL_WAIT seconds (default 10) for /health.
coll_start() {
	local db=$1; shift
	local store
	mapfile -t store < <(coll_store_args "$db")
	WP=$(free_port)
	HP=$(free_port)
	URL=http://127.0.0.1:$HP
	"$FAY" collector --listen 127.0.0.1:$WP --http 127.0.0.1:$HP --otlp-http off --otlp-grpc off "${store[@]}" "$@" \
		>>"$T_TMP/collector.log" 2>&1 &
	CPID=$!
	T_PIDS+=($CPID)
	wait_for "${COLL_WAIT:-10}" curl -sf "$URL/health"
}

# coll_try ARGS...: a collector on free loopback ports (OTLP off, a scratch
# store) that is expected to refuse to start: its exit status, its output
# in $T_TMP/try.log.
coll_try() {
	"$FAY" collector --listen 127.0.0.1:$(free_port) --http 127.0.0.1:$(free_port) \
		--otlp-http off --otlp-grpc off --db "$T_TMP/try.db" "$@" >"$T_TMP/try.log" 2>&1
}

coll_stop() {
	kill "$CPID" 2>/dev/null
	wait "$CPID" 2>/dev/null
}

coll_alive() { kill -0 "$CPID" 2>/dev/null && curl -sf "$URL/health" >/dev/null; }

# metric NAME: its value from /metrics
metric() { curl -s "$URL/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
# metric_is NAME VALUE: it is that now (for wait_for, which runs it again
# each time: `wait_for N test "$(metric X)" = V` would test one reading)
metric_is() { [ "$(metric "$1")" = "$2" ]; }

# captured_spans URL TRACE BY: how many spans of TRACE the collector at URL
# stores that a capture (the flight recorder) marked with a fay.capture.by
# starting with BY ("trace ID", "rule NAME: ", "": any capture)
captured_spans() {
	curl -s "$1/api/v2/trace/$2" | python3 -c '
import json, sys
try:
    s = json.load(sys.stdin)
except Exception:
    s = []
print(sum(1 for x in s if x.get("tags", {}).get("fay.capture.by", "").startswith(sys.argv[1])))' "$3"
}

# acked FILE M: how many ACKs fay-wire-client's send printed to FILE for
# batches stored whole (M spans each, not duplicates)
acked() { grep -c "^ack .*\"stored\":$2,\"duplicate\":false" "$1"; }

# coll_agents HOST...: a fay agent per HOST (named so, its files in
# $T_TMP/HOST) connected to this collector; true once the collector lists
# every one as a peer with a query connection (30 s at most).
# AGENT_CONTAINERS: their container option (default --no-containers: the
# containers other tests run on the machine are not this test's).
coll_agents() {
	local h
	for h in "$@"; do
		mkdir -p "$T_TMP/$h"
		( cd "$T_TMP/$h" && exec "$FAY" agent --collector 127.0.0.1:$WP --host "$h" \
			--shm-dir "$T_TMP/$h" --state-dir "$T_TMP/$h" ${AGENT_CONTAINERS:---no-containers} ) \
			>>"$T_TMP/$h.log" 2>&1 &
		T_PIDS+=($!)
	done
	wait_for 30 coll_peers "$@"
}
# coll_peers HOST...: does the collector list each HOST as a peer?
coll_peers() {
	local got h
	got=$(curl -s "$URL/api/cluster/peers")
	for h in "$@"; do
		[[ $got == *"\"host\":\"$h\""* ]] || return 1
	done
}

# flight_agent HOST [ARGS...]: a fay agent named HOST for the flight
# recorder's tests (#22), its shm and state in $T_TMP/HOST/{shm,state},
# stats every 200 ms, ARGS added (--flight SIZE); its pid (timeout's: the
# agent is its child) in APID_HOST.
flight_agent() {
	local h=$1; shift
	mkdir -p "$T_TMP/$h/shm" "$T_TMP/$h/state"
	timeout 800 nice -n 10 "$FAY" agent --collector 127.0.0.1:$WP --host "$h" \
		--shm-dir "$T_TMP/$h/shm" --state-dir "$T_TMP/$h/state" --stats-interval 200ms \
		--flush-interval 20ms "$@" >>"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
	eval "APID_$h=$!"
}
# agent_stat HOST KEY.KEY: a number from that flight_agent's stats.json
# (0 when absent)
agent_stat() {
	python3 - "$T_TMP/$1/state/stats.json" "$2" <<'PY'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
    for k in sys.argv[2].split('.'):
        v = v[k]
    print(int(v))
except Exception:
    print(0)
PY
}
