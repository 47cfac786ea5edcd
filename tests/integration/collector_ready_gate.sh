#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Nothing is served before the collector is whole (coll_gate_wait(),
# src/collector/collector.c): its listeners open one after the other, then
# it checks its exposure (no token on a non-loopback address: it refuses
# to run) and loads its standing queries.  Before the gate, /health
# answered 200 in between: a collector about to refuse to run answered
# for a moment, and a client that waited for /health found /api/queries
# 503 and an OTLP port not yet open.  strace slows every write(2) of the
# collector (its log lines) by 0.7 s, which widens those moments to
# seconds; /health is polled all along.
. "$(dirname "$0")/../lib/lib.sh"
need_root
command -v strace >/dev/null || skip_all "no strace (to slow the collector's start)"

slow() {   # slow ARGS... &: fay collector under strace (\$! is strace's pid), every write 0.7 s late
	exec strace -f -o /dev/null -e trace=write -e inject=write:delay_enter=700000 \
		"$FAY" collector --db "$T_TMP/fay.db" "$@" >>"$T_TMP/c.log" 2>&1
}
# the collector under strace $1 (killing strace would leave it running)
tracee() { pgrep -P "$1" -x fay; }

# poll URL until PID exits or 30 s: "STATUS CONNECTS" of each try, a line
poll() {
	local url=$1 pid=$2 i
	for ((i = 0; i < 600; i++)); do
		curl -s -m 2 -o /dev/null -w '%{http_code} %{num_connects}\n' "$url" || true
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
}

# 1. no token, HTTP on every address: it must refuse to run, unserved
HP=$(free_port)
slow --listen 127.0.0.1:$(free_port) --http 0.0.0.0:$HP --otlp-http off --otlp-grpc off &
P=$!; T_PIDS+=($P)
ok "the HTTP port opens" wait_for 30 bash -c "ss -Hltn 'sport = :$HP' | grep -q ."
poll "http://127.0.0.1:$HP/health" $P >"$T_TMP/codes1"
wait $P; rc=$?
diag "statuses seen: $(sort "$T_TMP/codes1" | uniq -c | tr -s ' \n' ' ')"
ok "it refused to run (exit $rc)" [ $rc -ne 0 ]
ok "... naming the address and the missing token" \
	grep -q "0.0.0.0:$HP is not a loopback address and the collector has no token" "$T_TMP/c.log"
ok "/health was polled while its port was open (connected)" grep -q '^000 1$' "$T_TMP/codes1"
ok "... and never answered" bash -c "! grep -qv '^000 ' '$T_TMP/codes1'"

# 2. a collector that runs: once /health answers, everything else does
: >"$T_TMP/c.log"
HP=$(free_port) OP=$(free_port) GP=$(free_port)
slow --listen 127.0.0.1:$(free_port) --http 127.0.0.1:$HP --otlp-http 127.0.0.1:$OP \
	--otlp-grpc 127.0.0.1:$GP &
P=$!; T_PIDS+=($P)
wait_for 10 tracee $P && T_PIDS+=($(tracee $P))
ok "/health answers" wait_for 60 curl -sf -m 2 -o /dev/null "http://127.0.0.1:$HP/health"
q=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HP/api/queries")
ok "... and then so does /api/queries (200, not 503: $q)" [ "$q" = 200 ]
o=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	--data '{}' "http://127.0.0.1:$OP/v1/traces")
ok "... and the OTLP/HTTP port ($o)" [ "$o" = 200 ]
ok "... and the OTLP/gRPC port is open" bash -c "ss -Hltn 'sport = :$GP' | grep -q ."
ok "the collector logged its start line" grep -q "OTLP/gRPC on 127.0.0.1:$GP" "$T_TMP/c.log"
kill "$(tracee $P)"; wait $P 2>/dev/null
done_testing
