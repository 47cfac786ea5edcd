# SPDX-License-Identifier: MIT
# Sourced by tests/integration/collector_*.sh (not a test itself: no .sh): start and stop a real
# 'fay collector' on free loopback ports with a temp store.
CLIENT=${CLIENT:-$BUILD/tests/fay-wire-client}

[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"
[ -x "$CLIENT" ] || skip_all "no wire test client at $CLIENT (make builds it)"
command -v curl >/dev/null || skip_all "needs curl"

# coll_start DB [ARGS...]: sets CPID, WP (wire port), HP (HTTP port), URL.
# The OTLP listeners are off unless ARGS name them (the last option wins).
coll_start() {
	local db=$1; shift
	WP=$(free_port)
	HP=$(free_port)
	URL=http://127.0.0.1:$HP
	"$FAY" collector --listen 127.0.0.1:$WP --http 127.0.0.1:$HP --otlp-http off --otlp-grpc off --db "$db" "$@" \
		>>"$T_TMP/collector.log" 2>&1 &
	CPID=$!
	T_PIDS+=($CPID)
	wait_for 10 curl -sf "$URL/health"
}

coll_stop() {
	kill "$CPID" 2>/dev/null
	wait "$CPID" 2>/dev/null
}

coll_alive() { kill -0 "$CPID" 2>/dev/null && curl -sf "$URL/health" >/dev/null; }

# metric NAME: its value from /metrics
metric() { curl -s "$URL/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
