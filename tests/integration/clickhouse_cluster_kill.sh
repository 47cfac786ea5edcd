#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Delivery through a two-shard ClickHouse cluster while things die: two
# real agents (each with traced processes of its own) ship to two
# collectors that write one Distributed database; mid-ingest one shard's
# server is killed -9 (the collectors fail their writes, NACK, and the
# agents keep spooling) and started again, then one collector is killed
# -9 and started again.  Afterwards every span the processes ended is
# there exactly once: in both collectors' trace search, and in SQL on
# each shard's own local table (spans_local FINAL, summed over the two
# shards, no span id on both, and fay's counts answer the same).
# The collector dies at the worst point for sure: its test point
# (FAY_CH_TEST_KILL_FILE) SIGKILLs it once ClickHouse accepted a write's
# spans and before the agents' seq row and the ACKs, so agent a resends
# batches the store already has; with merges stopped on spans_local those
# copies are physically there (count() > count() FINAL), and no answer
# shows them; merged (OPTIMIZE ... FINAL) they are gone.
. "$(dirname "$0")/../lib/lib.sh"
need_root
command -v python3 >/dev/null || skip_all "needs python3"
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/agent_tools/lib.sh"

ok "a two-shard ClickHouse cluster starts" ch_cluster two
DB=fay_kill
CH="$(ch_url two1)/$DB,$(ch_url two2)/$DB"
declare -A C_WP C_HP C_PID A_PID

# collector NAME [ENV=VALUE...]: start it (again) on its ports
collector() {
	local n=$1; shift
	: "${C_WP[$n]:=$(free_port)}" "${C_HP[$n]:=$(free_port)}"
	env "$@" "$FAY" collector --listen "127.0.0.1:${C_WP[$n]}" --http "127.0.0.1:${C_HP[$n]}" \
		--otlp-http off --otlp-grpc off --db "$T_TMP/$n.db" \
		--clickhouse "$CH" --clickhouse-cluster two 2>>"$T_TMP/coll-$n.log" &
	C_PID[$n]=$!
	T_PIDS+=(${C_PID[$n]})
	wait_for 15 curl -sf "http://127.0.0.1:${C_HP[$n]}/health"
}
# agent NAME COLLECTOR: a real agent with its own shm and state dirs
agent() {
	mkdir -p "$T_TMP/shm-$1" "$T_TMP/state-$1"
	"$FAY" agent --collector "127.0.0.1:${C_WP[$2]}" --shm-dir "$T_TMP/shm-$1" \
		--state-dir "$T_TMP/state-$1" --flush-interval 250ms --stats-interval 200ms \
		2>>"$T_TMP/agent-$1.log" &
	A_PID[$1]=$!
	T_PIDS+=(${A_PID[$1]})
}
# producer NAME COUNT: traced threads of agent NAME's host, in the background
producer() {
	FAY_SHM_DIR=$T_TMP/shm-$1 "$TOOLS/span_producer" --count "$2" --threads 2 --rate 1000 \
		--service "svc-$1" --ids "$T_TMP/ids-$1" &
	PRODS+=($!)
	T_PIDS+=($!)
}
# ids_in HP: span ids of every trace either agent's services sent, from a
# collector's trace search (one line per span in the answer)
ids_in() {
	local now=$(( $(date +%s) * 1000 + 60000 )) s
	for s in svc-a svc-b; do
		curl -sf "http://127.0.0.1:$1/api/v2/traces?serviceName=$s&endTs=$now&lookback=3600000&limit=1000000" ||
			return 1
		echo
	done | python3 -c 'import json,sys
for l in sys.stdin:
    if l.strip():
        [print(s["id"]) for t in json.loads(l) for s in t]'
}
want_ids() { cat "$T_TMP"/ids-a "$T_TMP"/ids-a2 "$T_TMP"/ids-b | sort -u; }
all_answered() { [ "$(ids_in "$1" | sort -u | wc -l)" -ge "$(want_ids | wc -l)" ]; }
exactly_once_in() {
	ids_in "$1" | sort >"$T_TMP/got"
	want_ids >"$T_TMP/want"
	cmp -s "$T_TMP/got" "$T_TMP/want" && return 0
	echo "# want $(wc -l <"$T_TMP/want"), answered $(wc -l <"$T_TMP/got"), distinct $(sort -u "$T_TMP/got" | wc -l)"
	return 1
}
errors_of() {
	curl -s "http://127.0.0.1:${C_HP[$1]}/metrics" |
		awk '$1 == "fay_collector_store_errors_total" { print $2 }'
}

ok "collector A on the cluster (its test point armed)" collector A FAY_CH_TEST_KILL_FILE="$T_TMP/kill-A"
ok "collector B on the same cluster database" collector B
# merges would fold resent rows away at any time: keep them apart
stop_merges() { ch_q "$1" "SYSTEM STOP MERGES $DB.spans_local"; }
both_stop() { stop_merges two1 && stop_merges two2; }
ok "merges of spans_local stopped on both shards" both_stop
agent a A
agent b B
PRODS=()
producer a 12000
producer b 12000
sleep 2
ch_kill two2
diag "$SECONDS s: shard two2 killed -9"
sleep 2
health_up() { curl -s "http://127.0.0.1:${C_HP[$1]}/health" | grep -q '"status":"UP"'; }
health_down() { curl -s "http://127.0.0.1:${C_HP[$1]}/health" | grep -q '"status":"DOWN"'; }
both() { "$1" A && "$1" B; }
ok "a shard down: both collectors' /health say DOWN" wait_for 10 both health_down
ok "both collectors' writes fail while a shard is down" \
	wait_for 10 bash -c "[ \"\$(curl -s http://127.0.0.1:${C_HP[A]}/metrics | awk '\$1 == \"fay_collector_store_errors_total\" { print \$2 }')\" -gt 0 ] &&
		[ \"\$(curl -s http://127.0.0.1:${C_HP[B]}/metrics | awk '\$1 == \"fay_collector_store_errors_total\" { print \$2 }')\" -gt 0 ]"
ok "... and the agents spool meanwhile" bash -c "[ -n \"\$(ls '$T_TMP/state-a/spool')\" ]"
ok "the shard restarted on its data" ch_restart two2
ok "... merges of its spans_local stopped again" stop_merges two2
ok "... and both say UP again by themselves" wait_for 15 both health_up
touch "$T_TMP/kill-A"
# more spans for agent a, so that collector A has a write to die in
FAY_SHM_DIR=$T_TMP/shm-a "$TOOLS/span_producer" --count 2000 --threads 1 --rate 1000 \
	--service svc-a --ids "$T_TMP/ids-a2" &
PRODS+=($!)
T_PIDS+=($!)
dead() { ! kill -0 "${C_PID[A]}" 2>/dev/null; }
ok "collector A killed itself at its test point" wait_for 60 dead
wait "${C_PID[A]}" 2>/dev/null
diag "$SECONDS s: collector A killed (SIGKILL) after a write's spans, before its ACKs"
ok "... after ClickHouse accepted the write's spans, before the ACKs (its log)" \
	grep -q "test point FAY_CH_TEST_KILL_FILE: killed after the data INSERTs" "$T_TMP/coll-A.log"
raw_of() { echo $(( $(ch_q two1 "SELECT count() FROM $DB.spans_local") + $(ch_q two2 "SELECT count() FROM $DB.spans_local") )); }
raw_before=$(raw_of)
ok "collector A restarted" collector A
for p in "${PRODS[@]}"; do wait "$p"; done
diag "$SECONDS s: the processes are done"
N=$(want_ids | wc -l)
ok "the processes ended $N spans" [ "$N" -eq 26000 ]
ok "all of them answered by collector A" wait_for 120 all_answered "${C_HP[A]}"
diag "$SECONDS s: answered"
ok "agent a's spool drained (all acknowledged)" \
	wait_for 30 bash -c "[ -z \"\$(ls '$T_TMP/state-a/spool')\" ]"
ok "agent b's spool drained" wait_for 30 bash -c "[ -z \"\$(ls '$T_TMP/state-b/spool')\" ]"
ok "collector A: each span exactly once in the trace search" exactly_once_in "${C_HP[A]}"
ok "collector B: the same" exactly_once_in "${C_HP[B]}"

# SQL on each shard's own table: FINAL keeps one row per key
q_local() { ch_q "$1" "SELECT $2 FROM $DB.spans_local FINAL WHERE local_service IN ('svc-a', 'svc-b')"; }
n1=$(q_local two1 "count()")
n2=$(q_local two2 "count()")
u1=$(q_local two1 "uniqExact(trace_lo, trace_hi, id)")
u2=$(q_local two2 "uniqExact(trace_lo, trace_hi, id)")
raw=$(( $(ch_q two1 "SELECT count() FROM $DB.spans_local") + $(ch_q two2 "SELECT count() FROM $DB.spans_local") ))
diag "shard 1: $n1 rows ($u1 spans), shard 2: $n2 rows ($u2 spans); $raw rows before FINAL"
ok "SQL: both shards hold spans" [ "${n1:-0}" -gt 0 -a "${n2:-0}" -gt 0 ]
ok "SQL: FINAL rows on the two shards add up to $N, one per span" \
	[ $((n1 + n2)) -eq "$N" -a "$n1" -eq "$u1" -a "$n2" -eq "$u2" ]
ch_q two1 "SELECT lower(hex(id)) FROM $DB.spans_local" | sort -u >"$T_TMP/s1"
ch_q two2 "SELECT lower(hex(id)) FROM $DB.spans_local" | sort -u >"$T_TMP/s2"
ok "SQL: no span id on both shards (a trace lives on one)" \
	[ "$(comm -12 "$T_TMP/s1" "$T_TMP/s2" | wc -l)" -eq 0 ]
ok "SQL through the Distributed table: $N distinct spans" \
	[ "$(ch_q two1 "SELECT count() FROM (SELECT DISTINCT trace_lo, trace_hi, id FROM $DB.spans WHERE local_service IN ('svc-a', 'svc-b'))")" -eq "$N" ]
dups=$(( raw - n1 - n2 ))
diag "rows the resends wrote again under the same keys: $dups (rows at the kill: $raw_before)"
ok "duplicates physically present: count() $raw > count() FINAL $((n1 + n2)) (the resent batches)" \
	[ "$raw" -gt $((n1 + n2)) ]
ok "... and every answer above had each span once" [ "$((n1 + n2))" -eq "$N" ]
ok "fay sql through collector B agrees" bash -c "\"$FAY\" sql --collector http://127.0.0.1:${C_HP[B]} \
	\"SELECT count() FROM spans FINAL WHERE local_service IN ('svc-a', 'svc-b')\" | grep -qw $N"
for n in two1 two2; do
	ch_q $n "SYSTEM START MERGES $DB.spans_local"
	ch_q $n "OPTIMIZE TABLE $DB.spans_local FINAL"
done
ok "merged (OPTIMIZE ... FINAL), the copies are gone: count() = $N" [ "$(raw_of)" -eq "$N" ]
kill "${A_PID[a]}" "${A_PID[b]}" 2>/dev/null
done_testing
