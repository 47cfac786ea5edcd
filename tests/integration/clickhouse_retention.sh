#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --retention on the ClickHouse store: whole day partitions older than
# the cutoff are dropped (spans, span_index, span_parts), today's stay,
# and the traces of the dropped days are gone from the answers.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/collector_lib.bash"

ok "ClickHouse starts" ch_start one
export FAY_TEST_CH_URLS=$(ch_url one)
DB=$T_TMP/r.db
ok "collector without retention" coll_start "$DB" --retention 0
NOW=$(( $(date +%s) * 1000000 ))
post() {  # post TRACE_ID TIMESTAMP_US
	echo "[{\"traceId\":\"$1\",\"id\":\"0000000000000001\",\"name\":\"op\",\"timestamp\":$2,\"duration\":10,\"localEndpoint\":{\"serviceName\":\"svc\"}}]" |
		curl -sf -X POST "$URL/api/v2/spans" -H 'Content-Type: application/json' --data-binary @- >/dev/null
}
post 00000000000000d5 $((NOW - 5 * 86400000000))
post 00000000000000d3 $((NOW - 3 * 86400000000))
post 00000000000000d0 "$NOW"
ok "three days of spans stored" bash -c "curl -sf $URL/api/v2/trace/00000000000000d5 >/dev/null && curl -sf $URL/api/v2/trace/00000000000000d3 >/dev/null"
DBN=$(coll_store_args "$DB" | sed -n 4p | sed 's|.*/||')
days() { ch_q one "SELECT count(DISTINCT partition) FROM system.parts WHERE active AND database = '$DBN' AND table = 'spans'"; }
ok "three day partitions" [ "$(days)" = 3 ]
coll_stop
ok "collector with --retention 2d" coll_start "$DB" --retention 2d
ok "the days before the cutoff are dropped" wait_for 10 bash -c "[ \"\$(curl -sf $(ch_url one) --data-binary \"SELECT count(DISTINCT partition) FROM system.parts WHERE active AND database = '$DBN' AND table IN ('spans', 'span_index')\")\" = 1 ]"
ok "their traces are gone (404)" bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' $URL/api/v2/trace/00000000000000d5) = 404 ] && [ \$(curl -s -o /dev/null -w '%{http_code}' $URL/api/v2/trace/00000000000000d3) = 404 ]"
ok "today's trace stays" curl -sf -o /dev/null "$URL/api/v2/trace/00000000000000d0"
ok "the collector logged what it dropped" grep -q "retention dropped day" "$T_TMP/collector.log"
coll_stop
done_testing
