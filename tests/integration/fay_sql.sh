#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay sql: one read-only statement on an SQLite store, a ClickHouse store
# and a running collector's store; a table or JSON; statements that would
# write are refused by the store itself (SQLite read-only + stmt_readonly,
# ClickHouse readonly=1) and nothing changes.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"

ok "--help is a manual" bash -c "'$FAY' sql --help | grep -q '^SYNOPSIS' && '$FAY' sql --help | grep -q '^EXIT STATUS'"
"$FAY" sql >/dev/null 2>&1; ok "no statement: exit 2" [ $? -eq 2 ]
"$FAY" sql --db a --clickhouse http://x 'SELECT 1' >/dev/null 2>&1; ok "two stores: exit 2" [ $? -eq 2 ]

ok "ClickHouse starts" ch_start one
NOW=$(( $(date +%s) * 1000000 ))
spans() {
	echo "[{\"traceId\":\"00000000000000a1\",\"id\":\"0000000000000001\",\"name\":\"get\",\"timestamp\":$NOW,\"duration\":1500,\"localEndpoint\":{\"serviceName\":\"web\"},\"tags\":{\"http.status_code\":\"200\"}},
	 {\"traceId\":\"00000000000000a1\",\"id\":\"0000000000000002\",\"parentId\":\"0000000000000001\",\"name\":\"query\",\"timestamp\":$((NOW + 10)),\"duration\":700,\"localEndpoint\":{\"serviceName\":\"db\"},\"tags\":{\"http.status_code\":\"500\",\"error\":\"x\"}}]"
}
for backend in sqlite clickhouse; do
	if [ $backend = sqlite ]; then
		coll_start "$T_TMP/s.db"; WHERE=(--db "$T_TMP/s.db")
	else
		FAY_TEST_CH_URLS=$(ch_url one) coll_start "$T_TMP/c.db"
		WHERE=(--clickhouse "$(ch_url one)/$(FAY_TEST_CH_URLS=x coll_store_args "$T_TMP/c.db" | sed -n 4p | sed 's|.*/||')")
	fi
	spans | curl -sf -X POST "$URL/api/v2/spans" -H 'Content-Type: application/json' --data-binary @- >/dev/null
	out=$("$FAY" sql "${WHERE[@]}" "SELECT local_service, duration_us FROM spans ORDER BY duration_us")
	ok "$backend: a table with a header, the rows, the count" \
		[ "$(printf '%s\n' "$out" | tr -s ' ')" = "$(printf 'local_service duration_us\n------------- -----------\ndb 700\nweb 1500\n(2 rows)')" ]
	out=$("$FAY" sql --json "${WHERE[@]}" "SELECT name, NULL AS empty FROM spans ORDER BY name")
	ok "$backend: --json, an array of objects, null for NULL" python3 -c "
import json, sys
assert json.loads(sys.argv[1]) == [{'name': 'get', 'empty': None}, {'name': 'query', 'empty': None}]" "$out"
	if [ $backend = sqlite ]; then
		BAD=("DELETE FROM spans" "DROP TABLE spans" "INSERT INTO spans (id) VALUES (9)")
	else
		BAD=("ALTER TABLE spans DELETE WHERE 1" "DROP TABLE spans" "INSERT INTO names VALUES (0, 'x', '', 1)")
	fi
	for bad in "${BAD[@]}"; do
		"$FAY" sql "${WHERE[@]}" "$bad" >/dev/null 2>"$T_TMP/err"
		ok "$backend: '$bad' refused (exit 2, the reason)" bash -c "[ $? -eq 2 ] && grep -qi 'read' '$T_TMP/err'"
	done
	ok "$backend: nothing changed" [ "$("$FAY" sql --json "${WHERE[@]}" "SELECT count(*) AS n FROM spans")" = "$(printf '[\n{"n":"2"}\n]')" ]
	"$FAY" sql "${WHERE[@]}" "SELEC 1" >/dev/null 2>"$T_TMP/err"
	ok "$backend: a syntax error: exit 2, the store's reason" bash -c "[ $? -eq 2 ] && grep -qi 'syntax' '$T_TMP/err'"
	out=$("$FAY" sql --collector "$URL" "SELECT count(*) AS n FROM spans")
	ok "$backend: --collector: the collector's store answers" [ "$(printf '%s\n' "$out" | sed -n 3p)" = 2 ]
	"$FAY" sql --collector "$URL" "${BAD[1]}" >/dev/null 2>"$T_TMP/err"
	ok "$backend: --collector refuses a write with 403" bash -c "[ $? -eq 2 ] && grep -q 403 '$T_TMP/err'"
	"$FAY" sql --collector "$URL/not-fay" "SELECT 1" >/dev/null 2>"$T_TMP/err"
	ok "$backend: --collector at a URL with no /api/sql (HTTP 404): exit 1, not a usage error" \
		bash -c "[ $? -eq 1 ] && grep -q 404 '$T_TMP/err'"
	coll_stop
done
# tags are SQL-queryable on ClickHouse (Nested columns)
out=$("$FAY" sql "${WHERE[@]}" "SELECT tags.value[indexOf(tags.key, 'http.status_code')] AS code FROM spans FINAL WHERE error = 1")
ok "clickhouse: tags reachable with SQL" [ "$(printf '%s\n' "$out" | sed -n 3p)" = 500 ]
"$FAY" sql --clickhouse http://127.0.0.1:1/fay "SELECT 1" >/dev/null 2>&1
ok "a ClickHouse that does not answer: exit 1" [ $? -eq 1 ]
done_testing
