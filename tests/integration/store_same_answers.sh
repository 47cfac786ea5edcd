#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Same answers from every store backend, side by side: the same spans
# (Zipkin's fixtures as Zipkin v2 JSON, OTLP/JSON plain and gzip, OTLP
# protobuf over HTTP (plain, gzip) and OTLP/gRPC (plain, gzip) sent by
# OpenTelemetry's JS exporters (tests/otlp, when node is there), and
# agent batches over the wire: whole spans, BlkKin partial records in one
# batch and split over two, a resent batch, a corrupt span, agent stats),
# all with fixed times, go into three collectors: SQLite, one ClickHouse
# node and a two-shard ClickHouse cluster.  The collectors are restarted
# (every answer then comes from the store), and every Zipkin v2 route,
# the dashboard, dependencies, hosts (store_tools/same_answers.py) and
# `fay traces ls` / `fay traces show` (text and --json) must answer byte
# for byte the same on all three.  Normalised: only /api/ui/hosts' times
# and OTLP senders (a collector's own clock and memory, not the store's).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"
SAME=$(dirname "$0")/store_tools/same_answers.py

ok "a ClickHouse node starts" ch_start one
ok "a two-shard ClickHouse cluster starts" ch_cluster two

NAMES=(sqlite clickhouse clickhouse-2-shards)
declare -A CH_URLS=([sqlite]="" [clickhouse]="$(ch_url one)" \
	[clickhouse-2-shards]="$(ch_url two1),$(ch_url two2)")
declare -A CH_CL=([sqlite]="" [clickhouse]="" [clickhouse-2-shards]=two)
declare -A C_URL C_WP C_PID C_GP

# start NAME: its collector (again) on its store, OTLP/gRPC on its port
start() {
	: "${C_GP[$1]:=$(free_port)}"
	# coll_start waits for /health, which the collector answers once every
	# listener is open, OTLP/gRPC too (collector_ready_gate.sh)
	FAY_TEST_CH_URLS=${CH_URLS[$1]} FAY_TEST_CH_CLUSTER=${CH_CL[$1]} \
		coll_start "$T_TMP/$1.db" --autocomplete-keys environment,http.path --retention 0 \
		--otlp-grpc "127.0.0.1:${C_GP[$1]}" || return 1
	C_URL[$1]=$URL C_WP[$1]=$WP C_PID[$1]=$CPID
}
stop() { kill "${C_PID[$1]}"; wait "${C_PID[$1]}" 2>/dev/null; return 0; }

for n in "${NAMES[@]}"; do
	ok "collector on $n up" start "$n"
done

# the base of every time: 3.5 h ago, on a whole second
BASE_MS=$(( ($(date +%s) - 12600) * 1000 ))
T_NS=$(( (BASE_MS + 9000000) * 1000000 ))
A1=a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
A2=b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2
A3=c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3
# wire NAME: the same agent batches to NAME's collector
wire() {
	local a=127.0.0.1:${C_WP[$1]} o=$T_TMP/wire-$1
	"$CLIENT" -a "$a" -i $A1 -H host-a -T "$T_NS" -n 6 -m 25 send >"$o" &&
	"$CLIENT" -a "$a" -i $A2 -H host-b -S inventory -T $((T_NS + 60000000000)) -n 4 -m 9 -s 3 send >>"$o" &&
	"$CLIENT" -a "$a" -i $A3 -H host-c -T $((T_NS + 120000000000)) -s 1 partial >>"$o" &&
	"$CLIENT" -a "$a" -i $A3 -H host-c -T $((T_NS + 180000000000)) -s 2 partial-split >>"$o" &&
	"$CLIENT" -a "$a" -i $A3 -H host-c -T $((T_NS + 240000000000)) -s 4 -m 5 dup >>"$o" &&
	"$CLIENT" -a "$a" -i $A3 -H host-c -T $((T_NS + 300000000000)) -s 5 badspan >>"$o" &&
	"$CLIENT" -a "$a" -i $A2 stats >>"$o" &&
	[ "$(grep -c "^ack " "$o")" = 16 ]
}
for n in "${NAMES[@]}"; do
	ok "$n: agent batches acknowledged (16)" wire "$n"
done
# otlp_there NAME: the spans of the four OTLP exporters are answered
otlp_there() {
	local s n=0
	for s in same-proto same-proto-gzip same-grpc same-grpc-gzip; do
		n=$((n + $(curl -sf "${C_URL[$1]}/api/v2/traces?serviceName=$s&endTs=$((BASE_MS + 3 * 3600000))&lookback=14400000&limit=1000" |
			python3 -c 'import json,sys; print(sum(len(t) for t in json.load(sys.stdin)))')))
	done
	[ "$n" = 48 ]
}
ok "the same Zipkin and OTLP requests to each, all accepted" \
	python3 "$SAME" post "$BASE_MS" "${C_URL[sqlite]}" "${C_URL[clickhouse]}" "${C_URL[clickhouse-2-shards]}"
# OTLP protobuf and gRPC from OpenTelemetry's own exporters, the same
# spans (fixed ids and times) to each
OTLP_DIR=$TOP/tests/otlp
if command -v node >/dev/null && [ -f "$OTLP_DIR/node_modules/.package-lock.json" ]; then
	# to_all MODE SUFFIX HOSTS...: MODE's exporter, the same spans to each
	to_all() {
		local mode=$1 sfx=$2; shift 2
		timeout 120 node "$OTLP_DIR/otlp_client.js" same "$mode" "$BASE_MS" \
			$(for h in "$@"; do echo "http://$h$sfx"; done)
	}
	hp() { echo "${C_URL[$1]#http://}"; }
	for mode in proto proto-gzip; do
		ok "OTLP/HTTP $mode (the JS SDK's exporter): the same spans to each, accepted" \
			to_all $mode /v1/traces "$(hp sqlite)" "$(hp clickhouse)" "$(hp clickhouse-2-shards)"
	done
	for mode in grpc grpc-gzip; do
		ok "OTLP/gRPC $mode (the JS SDK's exporter): the same spans to each, accepted" \
			to_all $mode "" "127.0.0.1:${C_GP[sqlite]}" "127.0.0.1:${C_GP[clickhouse]}" \
			"127.0.0.1:${C_GP[clickhouse-2-shards]}"
	done
	for n in "${NAMES[@]}"; do
		ok "$n: the four OTLP exporters' 48 spans are there" wait_for 30 otlp_there "$n"
	done
else
	diag "no node or no tests/otlp/node_modules (make tests installs them): OTLP protobuf/gRPC not sent"
fi

for n in "${NAMES[@]}"; do
	stop "$n"
	ok "$n: collector restarted on its store" start "$n"
done

SAME_IDS=$T_TMP/ids python3 "$SAME" compare "$BASE_MS" sqlite="${C_URL[sqlite]}" \
	clickhouse="${C_URL[clickhouse]}" clickhouse-2-shards="${C_URL[clickhouse-2-shards]}" \
	>"$T_TMP/same.tap" 2>&1
tap_relay "$T_TMP/same.tap"

# fay traces: NAME ARGS... -> its output for NAME's collector
traces_of() {
	local n=$1; shift
	TZ=UTC NO_COLOR=1 "$FAY" traces "$@" --server "${C_URL[$n]}" 2>&1
	echo "exit $?"
}
# same_cli ARGS...: fay traces ARGS answers the same on every backend
same_cli() {
	local want got n
	want=$(traces_of sqlite "$@")
	for n in clickhouse clickhouse-2-shards; do
		got=$(traces_of "$n" "$@")
		if [ "$got" != "$want" ]; then
			echo "# fay traces $*: $n differs from sqlite"
			diff <(echo "$want") <(echo "$got") | head -6 | sed 's/^/#   /'
			return 1
		fi
	done
}
for args in "ls --limit 1000" "ls --limit 1000 --json" "ls --limit 5" \
	"ls --service frontend --limit 1000" "ls --service checkout --json" \
	"ls --service wiretest --span read --limit 1000" "ls --min-duration 5ms --limit 1000" \
	"ls --min-duration 100us --max-duration 2ms --limit 1000 --json" "ls --ascii --limit 1000"; do
	ok "fay traces $args: the same on all three" same_cli $args
done
bad=0 total=0
while read -r id; do
	total=$((total + 1))
	same_cli show "$id" --width 120 >>"$T_TMP/cli.diff" &&
	same_cli show "$id" --json >>"$T_TMP/cli.diff" &&
	same_cli show "$id" -v --width 100 >>"$T_TMP/cli.diff" || bad=$((bad + 1))
done <"$T_TMP/ids"
ok "fay traces show ID (text, -v, --json) of all $total traces: the same on all three ($bad differ)" \
	[ "$total" -ge 75 -a "$bad" = 0 ]
[ "$bad" = 0 ] || head -20 "$T_TMP/cli.diff"
for n in "${NAMES[@]}"; do
	ok "$n: collector still up" bash -c "curl -sf ${C_URL[$n]}/health >/dev/null"
done
done_testing
