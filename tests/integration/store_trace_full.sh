#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A trace at the SQLite store's most spans (2^20: schema 5's span key,
# src/store/schema.sql) through a real collector: the spans beyond are
# not stored, the collector logs the trace, an OTLP/HTTP sender gets 200
# with partial_success naming how many and why, the other spans of the
# same request are stored, and the trace reads back with the spans that
# fit (the last one numbered 2^20 - 1).  The trace is brought near the
# limit through SQL (a million spans would take a minute here).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 CLI"
[ -z "${FAY_TEST_CH_URLS:-}" ] || skip_all "the limit is SQLite's"

DB=$T_TMP/fay.db OP=$(free_port)
T=0af7651916cd43dd8448eb211c80319c
NOW=$(( $(date +%s) * 1000000000 ))
# otlp SPAN_ID... : an OTLP/JSON request of those spans of trace T, and
# one span of another trace
otlp() {
	local s="" id
	for id in "$@"; do
		s+='{"traceId":"'$T'","spanId":"'$id'","name":"work","kind":2,"startTimeUnixNano":"'$NOW'","endTimeUnixNano":"'$((NOW + 1000))'"},'
	done
	s+='{"traceId":"1bf7651916cd43dd8448eb211c80319c","spanId":"00000000000000ff","name":"other","startTimeUnixNano":"'$NOW'","endTimeUnixNano":"'$((NOW + 1000))'"}'
	printf '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"full"}}]},"scopeSpans":[{"spans":[%s]}]}]}' "$s"
}
post() { curl -s -w ' %{http_code}' -X POST -H 'Content-Type: application/json' --data "$1" "http://127.0.0.1:$OP/v1/traces"; }

ok "collector up" coll_start "$DB" --otlp-http 127.0.0.1:$OP
ok "a trace's first span: 200 {}" [ "$(post "$(otlp 0000000000000001)")" = "{} 200" ]
coll_stop
ok "the trace's next span number set to 2^20 - 1" \
	sqlite3 "$DB" "UPDATE traces SET next_no = 1048575 WHERE printf('%016x%016x', trace_hi, trace_lo) = '$T'"
ok "collector up again" coll_start "$DB" --otlp-http 127.0.0.1:$OP
ANS=$(post "$(otlp 0000000000000002 0000000000000003 0000000000000004)")
ok "3 more spans of the trace, 1 of another: 200 with partialSuccess, 2 rejected" \
	bash -c "echo '$ANS' | grep -q '\"partialSuccess\":{\"rejectedSpans\":\"2\",\"errorMessage\":\"2 of 4 spans not stored: their trace holds the most spans the store keeps a trace\"}} 200'"
[ $T_FAILED = 0 ] || diag "answer: $ANS"
ok "the collector logged the full trace by its id" \
	grep -q "trace $T has used its 1048576 span numbers" "$T_TMP/collector.log"
ok "the trace reads back with the spans that fit (2)" \
	[ "$(curl -sf "$URL/api/v2/trace/$T" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 2 ]
ok "the other trace's span is stored (its trace has one from each request)" \
	[ "$(sqlite3 "$DB" "SELECT nspans FROM traces WHERE trace_lo = 0x8448eb211c80319c AND trace_hi = 0x1bf7651916cd43dd")" = 2 ]
ok "fay sql: the last span is number 2^20 - 1" \
	[ "$("$FAY" sql --db "$DB" --json "SELECT max(no) AS n FROM spans WHERE name = 'work'")" = "$(printf '[\n{"n":"1048575"}\n]')" ]
ok "the collector is still up" coll_alive
coll_stop
done_testing
