#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One conformance suite, every store backend: the route tests (the Zipkin
# v2 API and ingest, Zipkin's own storage cases (zipkin_fixtures.sh), the
# UI's API, export, agent metrics, agent ids, OpenTelemetry's JS SDK over
# OTLP/HTTP, gRPC and Zipkin (otlp_clients.sh), far timestamps)
# run again, unchanged, against a ClickHouse node and a two-shard
# ClickHouse cluster (collector_lib.bash's coll_start gives every
# collector its own database there).  SQLite runs them in the suite
# already (they are the same files, with the same expected answers).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../lib/clickhouse.bash"
command -v python3 >/dev/null || skip_all "needs python3"

ok "a ClickHouse node starts" ch_start one
ok "a two-shard ClickHouse cluster starts" ch_cluster two

SUITE=(collector_http zipkin_fixtures api_ui api_export api_agent_metrics
       collector_agent_ids otlp_clients collector_far_timestamps)
HERE=$(dirname "$0")

# run_on NAME URLS CLUSTER: every test of SUITE on that backend, one line each
run_on() {
	local name=$1 urls=$2 cluster=$3 t log p f
	for t in "${SUITE[@]}"; do
		log=$T_TMP/$name-$t.log
		FAY_TEST_CH_URLS=$urls FAY_TEST_CH_CLUSTER=$cluster \
			timeout 600 bash "$HERE/$t.sh" >"$log" 2>&1 </dev/null
		p=$(grep -c '^ok ' "$log")
		f=$(grep -c '^not ok ' "$log")
		if grep -q '^1\.\.0 # SKIP' "$log"; then
			pass "$name: $t.sh # SKIP $(sed -n 's/^1\.\.0 # SKIP //p' "$log")"
		elif [ "$f" -eq 0 ] && [ "$p" -gt 0 ] && grep -q "^1\.\.$p\$" "$log"; then
			pass "$name: $t.sh: all $p"
		else
			fail "$name: $t.sh: $p passed, $f failed" "$(grep -E '^not ok|^1\.\.|^#' "$log" | head -8)"
		fi
	done
}

run_on clickhouse "$(ch_url one)" ""
run_on "clickhouse 2 shards" "$(ch_url two1),$(ch_url two2)" two

# the cluster really spread the rows over both shards
n1=$(ch_q two1 "SELECT count() FROM system.parts WHERE active AND table = 'spans_local'")
n2=$(ch_q two2 "SELECT count() FROM system.parts WHERE active AND table = 'spans_local'")
ok "the cluster's spans are on both shards ($n1 and $n2 parts)" [ "${n1:-0}" -gt 0 -a "${n2:-0}" -gt 0 ]
done_testing
