# SPDX-License-Identifier: MIT
# Sourced by the ClickHouse schema tests (clickhouse_schema2.sh,
# clickhouse_migrate_race.sh; not a test itself: no .sh), after
# clickhouse.bash and collector_lib.bash: spans to post, the searches
# whose answers a migration must keep, and a schema-1 span_index.
NOW=$(( $(date +%s) * 1000000 ))
SERVICES="a bc frontend frontend-api 0123456789abcdef checkout-service-eu1"
# post_all: 6 services x 5 traces x 2 spans (names "get" and "op-N") to $URL
post_all() {
	local s t json=
	for s in $SERVICES; do
		for t in 1 2 3 4 5; do
			local tid
			tid=$(printf '%016x' $(( ${#s} * 100 + t )))
			json+="${json:+,}{\"traceId\":\"$tid\",\"id\":\"$(printf '%016x' $((t * 10 + 1)))\",\"name\":\"get\",\"timestamp\":$((NOW - t * 1000)),\"duration\":$((t * 1000)),\"localEndpoint\":{\"serviceName\":\"$s\"}}"
			json+=",{\"traceId\":\"$tid\",\"id\":\"$(printf '%016x' $((t * 10 + 2)))\",\"parentId\":\"$(printf '%016x' $((t * 10 + 1)))\",\"name\":\"op-$t\",\"timestamp\":$((NOW - t * 1000 + 10)),\"duration\":$((t * 100)),\"localEndpoint\":{\"serviceName\":\"$s\"}}"
		done
	done
	curl -sf -o /dev/null -w '%{http_code}' -X POST "$URL/api/v2/spans" \
		-H 'Content-Type: application/json' --data-binary "[$json]"
}
# ids QUERY [URL]: the trace ids /api/v2/traces answers, sorted, one line
ids() {
	curl -sf "${2:-$URL}/api/v2/traces?$1&lookback=86400000&endTs=$((NOW / 1000 + 1000))&limit=100" |
		python3 -c 'import json,sys; print(" ".join(sorted(t[0]["traceId"] for t in json.load(sys.stdin))))'
}
# answers [URL]: the search answers the tests compare, one per line
answers() {
	ids "serviceName=frontend" "$@"
	ids "serviceName=checkout-service-eu1&spanName=op-3" "$@"
	ids "serviceName=bc&minDuration=3000" "$@"
	ids "spanName=op-2" "$@"
	ids "serviceName=a&spanName=nothing" "$@"
}
# V1_INDEX: span_index as schema 1 made it (service and name as strings)
V1_INDEX="(day Date, service String, name String, start_us UInt64,
	duration_us UInt64, trace_hi UInt64, trace_lo UInt64)
	ENGINE = MergeTree PARTITION BY day ORDER BY (service, name, start_us)"
# schema1_fay NODE DB: DB's fay_schema says 1, as a schema-1 build left it
schema1_fay() {
	ch_q "$1" "DROP TABLE IF EXISTS $2.fay_schema" &&
	ch_q "$1" "CREATE TABLE $2.fay_schema (version UInt32, applied_us UInt64) ENGINE = TinyLog" &&
	ch_q "$1" "INSERT INTO $2.fay_schema VALUES (1, 0)"
}
