#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of TLS on the agent port: two collectors of one fay binary in
# the same run, one plaintext, one with --tls-cert/--tls-key (certificates
# made here by openssl), each fed by fay-wire-client (BATCHes of SPANS
# spans, WINDOW in flight, one connection, a token), RUNS times in turn;
# prints spans/s of each run, the medians and TLS/plain.  The collectors'
# stores are SQLite on the same disk, so what differs is the TLS session
# and the socketpair pump of common/tls.c.
#
#   [RUNS=5] [BATCHES=400] [SPANS=200] bench/bench_tls.sh [BUILD_DIR]
set -u
RUNS=${RUNS:-5} NB=${BATCHES:-400} NS=${SPANS:-200}
B=${1:-build}
FAY=$B/fay CLIENT=$B/tests/fay-wire-client
[ -x "$FAY" ] && [ -x "$CLIENT" ] || { echo "need $FAY and $CLIENT (make)" >&2; exit 2; }
W=$(mktemp -d /tmp/fay-bench-tls.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/ca.key" \
	-out "$W/ca.pem" -days 1 -subj /CN=bench-ca 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/srv.key" \
	-out "$W/srv.csr" -subj /CN=bench 2>/dev/null
openssl x509 -req -in "$W/srv.csr" -CA "$W/ca.pem" -CAkey "$W/ca.key" -CAcreateserial \
	-out "$W/srv.pem" -days 1 -extfile <(echo subjectAltName=IP:127.0.0.1) 2>/dev/null
chmod 600 "$W"/*.key
printf 'bench-token write bench\n' >"$W/tokens" && chmod 600 "$W/tokens"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# start NAME ARGS...: a collector; its agent port in P_NAME
start() {
	local n=$1 wp hp; shift
	wp=$(port) hp=$(port)
	"$FAY" collector --listen 127.0.0.1:$wp --http 127.0.0.1:$hp --otlp-http off --otlp-grpc off \
		--db "$W/$n.db" --token-file "$W/tokens" "$@" >"$W/$n.log" 2>&1 &
	PIDS+=($!)
	eval "P_$n=$wp"
	for _ in $(seq 50); do grep -q 'agents on' "$W/$n.log" && return; sleep 0.1; done
	echo "collector $n did not start: $(cat "$W/$n.log")" >&2; exit 1
}
start plain
start tls --tls-cert "$W/srv.pem" --tls-key "$W/srv.key"

# run KIND SEQ: spans/s of one run
run() {
	local args=(-a "127.0.0.1:$(eval echo \$P_$1)" -t bench-token -s "$2" -n "$NB" -m "$NS" -W 8 -q)
	[ "$1" = tls ] && args+=(-C "$W/ca.pem")
	"$CLIENT" "${args[@]}" send | awk '/^rate/ { print $2 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# $(date -u '+%F %T UTC'), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $RUNS runs of $NB batches x $NS spans, window 8, one connection"
: >"$W/plain.rates"; : >"$W/tls.rates"
for i in $(seq "$RUNS"); do
	seq0=$(( (i - 1) * NB + 1 ))
	p=$(run plain "$seq0"); t=$(run tls "$seq0")
	echo "run $i: plain $p spans/s, tls $t spans/s"
	echo "$p" >>"$W/plain.rates"; echo "$t" >>"$W/tls.rates"
done
mp=$(median <"$W/plain.rates") mt=$(median <"$W/tls.rates")
echo "median: plain $mp spans/s, tls $mt spans/s, tls/plain $(awk -v a="$mt" -v b="$mp" 'BEGIN { printf "%.2f", a / b }')"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
