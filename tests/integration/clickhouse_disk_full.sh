#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ClickHouse's own disk full (#20): the server's data directory on a
# small tmpfs that a file fills while a real agent ships spans to
# `fay collector --clickhouse`.  The INSERTs ClickHouse refuses for want
# of space make the collector's disk low, as SQLite's watermark does:
# /health DOWN with disk LOW and the server's reason, /metrics
# fay_collector_disk_low 1, the agent's batches NACKed (kept in its
# spool); once the file goes, the next write that gets through ends it
# and every span is answered exactly once.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/agent_tools/lib.sh"
. "$(dirname "$0")/../lib/clickhouse.bash"
command -v python3 >/dev/null || skip_all "needs python3"

# the harness's data path for node one (its logs stay beside it, off the
# tmpfs: a server that cannot write its log answers with that instead)
DATA=$T_TMP/ch-one/data
mkdir -p "$DATA"
mount -t tmpfs -o size=128m tmpfs "$DATA" || skip_all "cannot mount a tmpfs here"
trap 't_cleanup; umount -l "$DATA" 2>/dev/null; [ -n "${FAY_TEST_KEEP:-}" ] || rm -rf "$T_TMP"' EXIT
ok "ClickHouse starts with its data on a 128 MiB tmpfs" ch_start one || { done_testing; exit; }
PORT=$(free_port)
HTTP=$(free_port)
URL=http://127.0.0.1:$HTTP
"$FAY" collector --listen "127.0.0.1:$PORT" --http "127.0.0.1:$HTTP" --otlp-http off \
	--otlp-grpc off --db "$T_TMP/c.db" --clickhouse "$(ch_url one)/fay_disk" \
	2>>"$T_TMP/coll.log" &
T_PIDS+=($!)
ok "collector on ClickHouse up" wait_for 30 curl -sf "$URL/health"
metric() { curl -s "$URL/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
answer_ids() {
	local now=$(( $(date +%s) * 1000 + 60000 ))
	curl -sf "$URL/api/v2/traces?serviceName=producer&endTs=$now&lookback=3600000&limit=1000000" |
		python3 -c 'import json,sys; [print(s["id"]) for t in json.load(sys.stdin) for s in t]'
}
all_answered() { [ "$(answer_ids | sort -u | wc -l)" -ge "$(sort -u "$T_TMP/ids" | wc -l)" ]; }
start_agent
produce --count 200 --threads 1 --ids "$T_TMP/ids0"
ok "spans go in before the disk fills" wait_for 30 bash -c "[ \"\$(curl -s '$URL/metrics' | awk '\$1 == \"fay_collector_spans_stored_total\" { print \$2 }')\" -ge 200 ]"

dd if=/dev/zero of="$DATA/fill" bs=64k 2>/dev/null
sync
ok "ClickHouse's disk is full" test "$(df -k --output=avail "$DATA" | tail -n 1)" -lt 64
produce_bg --count 3000 --threads 2 --rate 1000 --ids "$T_TMP/ids1"
low() { [ "$(metric fay_collector_disk_low)" = 1 ]; }
ok "an INSERT refused for want of space: /metrics fay_collector_disk_low 1" wait_for 60 low
ok "... /health: 503, disk LOW with ClickHouse's reason" \
	bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' '$URL/health') = 503 ] && curl -s '$URL/health' | grep -q '\"disk\":{\"status\":\"LOW\",\"error\":\"disk low: '"
ok "... the agent's batches NACKed" wait_for 30 bash -c "[ \"\$(curl -s '$URL/metrics' | awk '\$1 == \"fay_collector_batches_nacked_total\" { print \$2 }')\" -gt 0 ]"
wait "$PROD"
rm -f "$DATA/fill"
cat "$T_TMP/ids0" "$T_TMP/ids1" >"$T_TMP/ids"
ok "the file removed: every span answered by itself" wait_for 60 all_answered
ok "... exactly once" bash -c "[ \"\$($(declare -f answer_ids); URL='$URL' answer_ids | sort | uniq -d | wc -l)\" = 0 ]"
ok "/metrics fay_collector_disk_low 0 again" wait_for 10 bash -c "[ \"\$(curl -s '$URL/metrics' | awk '\$1 == \"fay_collector_disk_low\" { print \$2 }')\" = 0 ]"
ok "/health UP again" curl -sf -o /dev/null "$URL/health"
ok "agent spool empty (all acknowledged)" wait_for 20 bash -c "[ -z \"\$(ls '$STATE/spool')\" ]"
grep -m1 'disk low' "$T_TMP/coll.log" | sed 's/^/# collector: /'
stop_agent
done_testing
