#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay agent --metrics ADDR: Prometheus text of the agent's counters (losses
# by reason, processes, shipping; counters named _total, levels gauges),
# fresh with --stats-interval; the agent's
# counters also reach the collector's /metrics through STATS.
. "$(dirname "$0")/../lib/lib.sh"
for f in collector_lib.bash collector_lib.sh; do
	[ -f "$(dirname "$0")/$f" ] && { . "$(dirname "$0")/$f"; break; }
done

ok "--help documents --metrics" bash -c "'$FAY' agent --help | grep -q -- '--metrics ADDR'"
mkdir -p "$T_TMP/shm" "$T_TMP/st" "$T_TMP/st2"
"$FAY" agent --shm-dir "$T_TMP/shm" --state-dir "$T_TMP/st2" --metrics 256.0.0.1:99999 >/dev/null 2>"$T_TMP/err"
ok "a bad --metrics address: exit 1 with the reason" bash -c "[ $? -eq 1 ] && grep -q -- '--metrics' '$T_TMP/err'"

ok "collector starts" coll_start "$T_TMP/fay.db"
MP=$(free_port)
"$FAY" agent --collector 127.0.0.1:$WP --shm-dir "$T_TMP/shm" --state-dir "$T_TMP/st" \
	--stats-interval 1s --host metrics-host --metrics 127.0.0.1:$MP >>"$T_TMP/agent.log" 2>&1 &
APID=$!
T_PIDS+=($APID)
M=http://127.0.0.1:$MP/metrics
ok "the agent answers /metrics" wait_for 10 curl -sf "$M"
ok "counters arrive with --stats-interval, labelled with host and agent" wait_for 10 bash -c \
	"curl -s $M | grep -q '^fay_agent_records_lost_total{host=\"metrics-host\",agent=\"[0-9a-f]\{32\}\",reason=\"ring_overwrite\"} 0$'"
ok "shipping: connected to the collector" wait_for 10 bash -c "curl -s $M | grep -q '^fay_agent_shipping_connected{.*} 1$'"
ok "the agent's counters are _total counters: connections to the collector" bash -c \
	"curl -s $M | grep -qx '# TYPE fay_agent_shipping_connects_total counter' &&
	 curl -s $M | grep -q '^fay_agent_shipping_connects_total{.*} [1-9][0-9]*$'"
ok "its levels are gauges without _total: connected, the spool's bytes" bash -c \
	"curl -s $M | grep -qx '# TYPE fay_agent_shipping_connected gauge' &&
	 curl -s $M | grep -qx '# TYPE fay_agent_spool_bytes gauge'"
ok "no untyped family, and every counter is named _total" bash -c \
	"! curl -s $M | grep -q ' untyped$' &&
	 ! curl -s $M | grep -E '^# TYPE [a-z_]+ counter$' | grep -vq '_total counter$'"
ok "keep mode's buffers: what they hold a gauge, what they overwrote a counter" bash -c \
	"curl -s $M | grep -qx '# TYPE fay_agent_keep_held gauge' &&
	 curl -s $M | grep -q '^fay_agent_keep_queries{.*} 0$' &&
	 curl -s $M | grep -q '^fay_agent_keep_overwritten_total{.*} 0$' &&
	 ! curl -s $M | grep -q '^fay_agent_keep_held_total'"
ok "processes by state" bash -c "curl -s $M | grep -q '^fay_agent_processes{.*state=\"live\"} 0$'"
ok "how old the counters are" bash -c "curl -s $M | grep -qE '^fay_agent_stats_age_seconds\{.*\} [0-9.]+$'"
ok "every sample line parses" bash -c "curl -s $M | grep -v '^#' | grep -vqE '^[a-z_]+\{[^}]*\} [0-9.e+-]+$' && exit 1 || exit 0"
ok "other paths: 404" bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$MP/) = 404 ]"
ok "the collector exports the agent's losses too" wait_for 10 bash -c \
	"curl -s $URL/metrics | grep -q '^fay_agent_records_lost_total{agent=\"[0-9a-f]*\",host=\"metrics-host\",reason=\"nested\"} 0$'"
ok "agent and collector name an agent's losses alike: fay_agent_records_lost_total, a counter" bash -c \
	"curl -s $M | grep -qx '# TYPE fay_agent_records_lost_total counter' &&
	 curl -s $URL/metrics | grep -qx '# TYPE fay_agent_records_lost_total counter' &&
	 ! curl -s $URL/metrics | grep -qE '^# TYPE fay_agent_(records_lost|probe_hits) '"
kill "$APID"; wait "$APID" 2>/dev/null
ok "stopped with the agent" bash -c "! curl -sf $M >/dev/null"
done_testing
