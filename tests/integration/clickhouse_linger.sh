#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The collector's write path into ClickHouse makes few, large INSERTs out
# of agents' small batches: a connection's pipelined batches are read
# ahead and stored as one chain (src/collector/wire_batch.c), and the
# writer lingers (--clickhouse-linger / --clickhouse-batch) for more.
# Checked on a real collector and server: many batches become few store
# writes (fay_collector_store_writes_total), every ACKed span is stored
# once, the linger ends early when every connected agent waits (one
# agent is not slowed) and when every HTTP sender seen lately waits (one
# is not slowed, four are written together), and the options are
# refused without --clickhouse.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/collector_lib.bash"

ok "ClickHouse starts" ch_start one

# 1. four agents, 40 batches of 100 spans each, 8 in flight: few writes
ok "collector up (linger 2s, batch 100000)" ch_coll_start one many --clickhouse-linger 2s --clickhouse-batch 100000
ok "the log names the server's version and the DDL features it has (18.16: none)" \
	grep -q "store: clickhouse $(ch_q one 'SELECT version()'), database many at schema 0: TTL no, codecs no, skip indexes no" "$T_TMP/collector.log"
: >"$T_TMP/send.out"
"$CLIENT" -a 127.0.0.1:$WP -c 4 -n 40 -m 100 -W 8 send >"$T_TMP/send.out" 2>&1
ok "160 batches sent, 160 ACKs, none refused" \
	[ "$(acked "$T_TMP/send.out" 100)" = 160 ]
writes=$(metric fay_collector_store_writes_total)
diag "store writes: $writes for 160 batches"
ok "160 batches in at most 30 store writes" [ "${writes:-999}" -le 30 ]
ok "... at least one" [ "${writes:-0}" -ge 1 ]
ok "every ACKed span stored once (16000)" \
	[ "$(ch_q one 'SELECT count() FROM many.spans FINAL')" = 16000 ]
ok "... and no resent copies" [ "$(ch_q one 'SELECT count() FROM many.spans')" = 16000 ]
ok "fay_collector_spans_stored_total 16000" [ "$(metric fay_collector_spans_stored_total)" = 16000 ]
coll_stop

# 2. one agent with a long linger: it is the only sender, so its batches
# are written at once (the whole run far below one linger per batch)
ok "collector up (linger 10s)" ch_coll_start one one_agent --clickhouse-linger 10s
t0=$(date +%s)
"$CLIENT" -a 127.0.0.1:$WP -c 1 -n 6 -m 50 -W 1 send >"$T_TMP/one.out" 2>&1
t1=$(date +%s)
diag "6 batches, one at a time, in $((t1 - t0)) s"
ok "6 ACKs" [ "$(grep -c '^ack .*"stored":50,' "$T_TMP/one.out")" = 6 ]
ok "no linger when the one agent waits (6 batches in < 30 s, a linger each is 60 s)" \
	[ $((t1 - t0)) -lt 30 ]
coll_stop

# 3. HTTP senders (no agent connected), linger 4s: the writer counts them
# by how many it had at once lately (src/collector/ingest.c), so that one
# sender posting one request after another never waits for the linger
# (before, each of its requests waited the whole 4 s), and four posting
# side by side are written together without waiting for the linger
ok "collector up (linger 4s)" ch_coll_start one http --clickhouse-linger 4s
now=$(( $(date +%s) * 1000000 ))
post() {
	curl -sf -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
		"$URL/api/v2/spans" --data-binary \
		"[{\"traceId\":\"$(printf %016x $((0xa000 + $1)))\",\"id\":\"$(printf %016x $1)\",\"name\":\"get\",\"timestamp\":$now,\"duration\":5,\"localEndpoint\":{\"serviceName\":\"web\"}}]"
}
: >"$T_TMP/codes"
t0=$(date +%s%N)
for i in $(seq 1 10); do post $i >>"$T_TMP/codes"; done
t1=$(date +%s%N)
diag "10 POSTs one after another answered in $(( (t1 - t0) / 1000000 )) ms"
ok "one sender: 10 POSTs 202" [ "$(grep -c 202 "$T_TMP/codes")" = 10 ]
ok "... in less than one linger (4 s) in all" [ $(( (t1 - t0) / 1000000 )) -lt 4000 ]
w0=$(metric fay_collector_store_writes_total)
: >"$T_TMP/codes"
t0=$(date +%s%N)
for k in 0 1 2 3; do
	( for i in $(seq 1 10); do post $((100 + k * 10 + i)); done >>"$T_TMP/codes" ) &
	pids+=($!)
done
wait "${pids[@]}"
t1=$(date +%s%N)
w=$(( $(metric fay_collector_store_writes_total) - w0 ))
diag "4 senders x 10 POSTs answered in $(( (t1 - t0) / 1000000 )) ms, in $w store writes"
ok "four senders: 40 POSTs 202" [ "$(grep -c 202 "$T_TMP/codes")" = 40 ]
ok "... in at most 30 store writes (written together)" [ "$w" -le 30 ]
ok "... in less than 5 lingers (20 s; each round waited 4 s before)" \
	[ $(( (t1 - t0) / 1000000 )) -lt 20000 ]
ok "every span there" [ "$(ch_q one 'SELECT count() FROM http.spans FINAL')" = 50 ]
coll_stop

# 4. the options need --clickhouse; bad values are refused
coll_try --clickhouse-linger 50ms
ok "--clickhouse-linger without --clickhouse: exit 2" [ $? = 2 ]
ok "... saying why" grep -q -- "--clickhouse-linger and --clickhouse-batch need --clickhouse" "$T_TMP/try.log"
coll_try --clickhouse "$(ch_url one)/x" --clickhouse-linger soon
ok "--clickhouse-linger soon: exit 2" [ $? = 2 ]
ok "... naming the value" grep -q -- "--clickhouse-linger 'soon'" "$T_TMP/try.log"
coll_try --clickhouse "$(ch_url one)/x" --clickhouse-batch 0
ok "--clickhouse-batch 0: exit 2" [ $? = 2 ]
done_testing
