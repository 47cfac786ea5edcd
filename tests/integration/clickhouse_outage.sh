#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Delivery through the ClickHouse store: a real agent ships spans of a
# traced process to `fay collector --clickhouse` while ClickHouse is
# killed -9 and restarted (the collector says DOWN on /health and
# /metrics, the agent's batches are NACKed and spooled, ingest resumes by
# itself) and then the collector is killed -9 and restarted; every span
# the process produced is in the answers exactly once.  A second
# collector on the same ClickHouse database answers with every span too,
# including those agents sent to the first.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/agent_tools/lib.sh"
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"

ok "ClickHouse starts" ch_start one
CHURL=$(ch_url one)/fay_outage
PORT=$(free_port)
HTTP=$(free_port)
CPID=
start_real() {
	"$FAY" collector --listen "127.0.0.1:$PORT" --http "127.0.0.1:$HTTP" --otlp-http off \
		--db "$T_TMP/a.db" --clickhouse "$CHURL" 2>>"$T_TMP/coll.log" &
	CPID=$!
	T_PIDS+=($CPID)
	wait_for 10 curl -sf "http://127.0.0.1:$HTTP/health"
}
health_is() { curl -s "http://127.0.0.1:$HTTP/health" | grep -q "\"status\":\"$1\""; }
metric_of() { curl -s "http://127.0.0.1:$HTTP/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
# span ids in the answer of URL's trace search (every trace of the last hour)
answer_ids() {
	local now=$(( $(date +%s) * 1000 + 60000 ))
	curl -sf "$1/api/v2/traces?serviceName=producer&endTs=$now&lookback=3600000&limit=1000000" |
		python3 -c 'import json,sys; [print(s["id"]) for t in json.load(sys.stdin) for s in t]'
}
# exactly_once_in URL: every produced id once in URL's answer
exactly_once_in() {
	answer_ids "$1" | sort >"$T_TMP/got"
	sort -u "$T_TMP/ids" >"$T_TMP/want"
	cmp -s "$T_TMP/got" "$T_TMP/want" && return 0
	echo "# want $(wc -l <"$T_TMP/want"), answered $(wc -l <"$T_TMP/got"), distinct $(sort -u "$T_TMP/got" | wc -l)"
	return 1
}
answered_ge() { [ "$(answer_ids "$1" | sort -u | wc -l)" -ge "$2" ]; }

ok "collector on ClickHouse up" start_real
ok "/health: UP, store clickhouse UP" bash -c "curl -s http://127.0.0.1:$HTTP/health | grep -q '\"store\":{\"backend\":\"clickhouse\",\"status\":\"UP\"}'"
start_agent
produce_bg --count 9000 --threads 3 --rate 1500 --ids "$T_TMP/ids" --ready "$T_TMP/ready"
P=$PROD
sleep 1.5
ch_kill one
ok "ClickHouse killed -9: /health says DOWN" wait_for 30 health_is DOWN
ok "... with 503 and the reason" bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$HTTP/health) = 503 ]"
ok "... /metrics fay_collector_store_up 0" [ "$(metric_of fay_collector_store_up)" = 0 ]
sleep 1.5
ok "batches NACKed or refused while it is down" \
	wait_for 30 bash -c "[ \$(curl -s http://127.0.0.1:$HTTP/metrics | awk '\$1 == \"fay_collector_store_errors_total\" { print \$2 }') -gt 0 ]"
ok "ClickHouse restarted on its data" ch_restart one
ok "the collector says UP again by itself" wait_for 30 health_is UP
sleep 1
kill -9 "$CPID"; wait "$CPID" 2>/dev/null
ok "collector killed -9 mid-ingest and restarted" start_real
wait $P
ok "all 9000 spans answered" wait_for 60 answered_ge "http://127.0.0.1:$HTTP" 9000
sleep 1
ok "each exactly once in the trace search" exactly_once_in "http://127.0.0.1:$HTTP"
ok "agent spool empty (all acknowledged)" wait_for 10 bash -c "[ -z \"\$(ls '$STATE/spool')\" ]"
stop_agent

# a second collector on the same database
A_HTTP=$HTTP A_PORT=$PORT
PORT=$(free_port) HTTP=$(free_port)
ok "a second collector on the same ClickHouse database" start_real
ok "it answers with every span the first one stored, once" exactly_once_in "http://127.0.0.1:$HTTP"
"$CLIENT" -a "127.0.0.1:$PORT" -i 0123456789abcdef0123456789abcdef -n 5 -m 40 send >"$T_TMP/send.out"
ok "an agent of the second: 5 batches ACKed" [ "$(grep -c '^ack ' "$T_TMP/send.out")" = 5 ]
TRACE=$(printf '%s%016x' 0123456789abcdef 3)
ok "the first collector answers with its trace" bash -c "curl -sf http://127.0.0.1:$A_HTTP/api/v2/trace/$TRACE | python3 -c 'import json,sys; assert len(json.load(sys.stdin)) == 40'"
ok "both list the agents of both" bash -c "curl -s http://127.0.0.1:$A_HTTP/api/ui/hosts | grep -q 0123456789abcdef0123456789abcdef"
done_testing
