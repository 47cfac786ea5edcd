#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ClickHouse killed -9 mid-ingest under a real agent (#20 item 4), in a
# loop: each round runs blockstack (400 requests, every one sampled)
# through a real agent to a collector on a fresh ClickHouse database,
# kills the server while the spans flow, starts it again on its data, and
# wants every trace and span the workload recorded answered exactly once
# within 30 s of the server's return.  Seen once in five runs (#20): 48
# of 400 traces 60 s after ClickHouse came back.  Here, with the agent's 8
# batches in flight, 2 of 20 rounds were late (31 s; 2937 of 2942 spans in
# one) at a load of 12-16: the backlog went 8 batches a ClickHouse write;
# with 32, 20 of 20, every batch ACKed 1-8 s after the server's return.
#
# FAY_CH_KILL_ROUNDS (default 5, what fits a CI run: 40-75 s a round on
# a loaded 2-core machine) sets the rounds; the issue's check is 20
# (FAY_CH_KILL_ROUNDS=20 by hand: 20 of 20 on 2026-11-28, 17 min).
# Rings large enough (FAY_RING_KB) that a busy 2-core machine cannot make
# them overflow: a shortfall is the store's or the resend's, not the drain.
export FAY_RING_KB=4096
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/lib/e2e.bash"
e2e_need
. "$(dirname "$0")/../lib/clickhouse.bash"
ROUNDS=${FAY_CH_KILL_ROUNDS:-5}

ok "ClickHouse starts" ch_start one || { done_testing; exit; }
metric() { curl -s "$E2E_URL/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
stored_gt0() { [ "$(metric fay_collector_spans_stored_total)" -gt 0 ]; }
# each line of stdin into file $1 after the time it came (the logs say
# how long each step took)
stamp() { while IFS= read -r l; do printf '%(%T)T.%s %s\n' -1 "${EPOCHREALTIME#*.}" "$l"; done >>"$1"; }
# a collector on ClickHouse database $1 (and its own files beside it)
coll_on() {
	"$FAY" collector --listen "$E2E_WIRE" --http "$E2E_HTTP" --otlp-http off \
		--otlp-grpc off --db "$T_TMP/$1.db" --clickhouse "$(ch_url one)/$1" \
		> >(stamp "$T_TMP/collector.log") 2>&1 &
	COLLECTOR_PID=$!
	T_PIDS+=("$COLLECTOR_PID")
	wait_for 30 curl -sf "$E2E_URL/api/v2/services"
}
e2e_ports
agent_on() {
	"$FAY" agent --collector "$E2E_WIRE" --shm-dir "$E2E_SHM" --state-dir "$E2E_STATE" \
		> >(stamp "$T_TMP/agent.log") 2>&1 &
	AGENT_PID=$!
	T_PIDS+=("$AGENT_PID")
	wait_for 10 test -s "$E2E_STATE/agent_id"
}
ok "agent starts" agent_on
slow=0
for r in $(seq 1 "$ROUNDS"); do
	ok "round $r: collector on database r$r" coll_on "r$r" || break
	e2e_bs_background --requests 400 --rate 100 --sample 1 --size 4k
	wait_for 30 stored_gt0
	sleep 0.$((RANDOM % 10))
	ch_kill one
	echo "$(date +%T.%N) ---- round $r: ClickHouse killed" | tee -a "$T_TMP/agent.log" >>"$T_TMP/collector.log"
	diag "round $r: ClickHouse killed after $(metric fay_collector_spans_stored_total) spans stored"
	sleep 1
	ok "round $r: ClickHouse restarted on its data" ch_restart one || break
	back=$SECONDS
	echo "$(date +%T.%N) ---- round $r: ClickHouse back" | tee -a "$T_TMP/agent.log" >>"$T_TMP/collector.log"
	wait "$BS"
	rc=$?
	out=$(cat "$T_TMP/blockstack.out")
	spans=$(bs_spans "$out")
	ok "round $r: blockstack succeeds ($spans spans)" test $rc -eq 0 -a -n "$spans"
	left=$((30 - (SECONDS - back)))
	[ $left -lt 1 ] && left=1
	# cheap first (the agent's spool empty: every batch ACKed, i.e.
	# committed), then the answer (a search of every trace takes ~2 s
	# here: polled alone it made the wait look 15 s longer than it was)
	emptied=
	delivered() {
		[ -z "$(ls "$E2E_STATE/spool" 2>/dev/null)" ] || return 1
		[ -n "$emptied" ] || emptied=$((SECONDS - back))
		read -r _ s < <(stored || echo "0 0")
		[ "$s" -ge "$1" ]
	}
	if ! ok "round $r: every span stored within 30 s of ClickHouse's return" \
		wait_for $left delivered "${spans:-1}"; then
		slow=$((slow + 1))
		grep -E 'NACK|not stored|reconnect|connected' "$T_TMP/agent.log" | tail -n 8 | sed 's/^/#   agent: /'
		tail -n 8 "$T_TMP/collector.log" | sed 's/^/#   collector: /'
	fi
	diag "round $r: every batch ACKed ${emptied:-?} s after ClickHouse's return, answered by $((SECONDS - back)) s"
	check_traces --traces 400 --spans "${spans:--1}"
	ok "round $r: no ring overwrote records" e2e_no_ring_loss
	e2e_kill9 "$COLLECTOR_PID"
done
diag "$slow of $ROUNDS rounds late"
e2e_logs_on_failure
done_testing
