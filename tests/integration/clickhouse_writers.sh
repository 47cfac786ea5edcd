#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Several ClickHouse writers (--clickhouse-writers, src/collector/ingest.c
# and src/store/ch_write.c): one writer prepares its rows while another's
# INSERTs run.  Checked on a real collector and server with many agents
# and no linger, so that writes do overlap
# (fay_collector_store_writes_overlapped_total; none with one writer):
# every ACKed span is stored once, each agent's seq row (HELLO's
# last_seq, table agents) ends at its last batch, a resent batch is a
# duplicate, later batches go on from there; 200 agents fit in one write;
# and the option is checked.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/collector_lib.bash"

ok "ClickHouse starts" ch_start one
# agent_id K: the id fay-wire-client -c gives its K-th agent
agent_id() { printf '0123456789abcdef0123456789abcd%x%x' $(($1 / 16)) $(($1 % 16)); }

# send NAME ARGS...: fay-wire-client's send to the collector, its output
# in $T_TMP/NAME.out
send() {
	local out=$T_TMP/$1.out
	shift
	"$CLIENT" -a "127.0.0.1:$WP" "$@" send >"$out" 2>&1
}

# 1. twelve agents, 60 batches of 200 spans each, 4 in flight, 4 writers
ok "collector up (4 writers, no linger)" ch_coll_start one w4 --clickhouse-writers 4 --clickhouse-linger 0
send first -c 12 -n 60 -m 200 -W 4
ok "720 batches sent, 720 ACKs, each stored whole" [ "$(acked "$T_TMP/first.out" 200)" = 720 ]
diag "store writes: $(metric fay_collector_store_writes_total)," \
	"$(metric fay_collector_store_writes_overlapped_total) begun while another was under way"
ok "writes overlapped" [ "$(metric fay_collector_store_writes_overlapped_total)" -ge 1 ]
ok "every ACKed span stored once (144000)" \
	[ "$(ch_q one 'SELECT count() FROM w4.spans FINAL')" = 144000 ]
ok "... and no copies" [ "$(ch_q one 'SELECT count() FROM w4.spans')" = 144000 ]
ok "... 144000 index rows" [ "$(ch_q one 'SELECT count() FROM w4.span_index')" = 144000 ]
ok "every agent's row: last seq 60, 60 batches, 12000 spans" \
	[ "$(ch_q one 'SELECT count() FROM (SELECT agent_id, argMax(last_seq, ver) AS s,
		argMax(batches, ver) AS b, argMax(spans, ver) AS n FROM w4.agents GROUP BY agent_id)
		WHERE s = 60 AND b = 60 AND n = 12000')" = 12 ]
bad=0
for k in 0 5 11; do
	"$CLIENT" -a 127.0.0.1:$WP -i "$(agent_id $k)" hello >"$T_TMP/hello.out" 2>&1
	grep -q "welcome last_seq=60" "$T_TMP/hello.out" || { diag "agent $k: $(cat "$T_TMP/hello.out")"; bad=1; }
done
ok "HELLO answers last_seq 60 to agents 0, 5 and 11" [ $bad = 0 ]

# a batch sent again is a duplicate; the next ones go on
send again -i "$(agent_id 3)" -s 55 -n 6 -m 200
ok "batches 55-60 of agent 3 again: 6 duplicates" \
	[ "$(grep -c '^ack .*"duplicate":true' "$T_TMP/again.out")" = 6 ]
send more -c 12 -s 61 -n 20 -m 200 -W 4
ok "batches 61-80 of every agent: 240 ACKs, stored whole" \
	[ "$(acked "$T_TMP/more.out" 200)" = 240 ]

r=$(ch_q one 'SELECT count(), uniqExact(trace_lo, trace_hi, id, src) FROM w4.spans FINAL' | tr '\t' ' ')
diag "spans, distinct spans: $r"
ok "192000 spans, each once" [ "$r" = "192000 192000" ]
ok "fay_collector_spans_stored_total 192000" \
	[ "$(metric fay_collector_spans_stored_total)" = 192000 ]
coll_stop

# 2. one writer: the same traffic, no write ever overlaps another
ok "collector up (1 writer, no linger)" ch_coll_start one w1 --clickhouse-writers 1 --clickhouse-linger 0
send one -c 12 -n 20 -m 200 -W 4
ok "240 ACKs" [ "$(acked "$T_TMP/one.out" 200)" = 240 ]
ok "no overlapping writes with --clickhouse-writers 1" \
	[ "$(metric fay_collector_store_writes_overlapped_total)" = 0 ]
ok "48000 spans" [ "$(ch_q one 'SELECT count() FROM w1.spans FINAL')" = 48000 ]
coll_stop

# 3. 200 agents, one batch each in flight, a long linger: a write holds
# batches of more than 64 agents (a write had room for 64 agents' rows and
# failed whole past that: NACKed, resent, failed again)
ok "collector up (linger 2s)" ch_coll_start one many --clickhouse-linger 2s
timeout 120 "$CLIENT" -a "127.0.0.1:$WP" -c 200 -n 3 -m 10 -W 1 send >"$T_TMP/many.out" 2>&1
ok "200 agents x 3 batches: 600 ACKs, each stored whole" [ "$(acked "$T_TMP/many.out" 10)" = 600 ]
diag "store writes: $(metric fay_collector_store_writes_total)"
ok "... in at most 9 writes (so a write held more than 64 agents)" \
	[ "$(metric fay_collector_store_writes_total)" -le 9 ]
ok "... and no store error" [ "$(metric fay_collector_store_errors_total)" = 0 ]
ok "every agent's row at seq 3" [ "$(ch_q one 'SELECT count() FROM (SELECT agent_id,
	argMax(last_seq, ver) AS s FROM many.agents GROUP BY agent_id) WHERE s = 3')" = 200 ]
coll_stop

# 4. the option
coll_try --clickhouse "$(ch_url one)/bad" --clickhouse-writers 0
ok "--clickhouse-writers 0: exit 2" [ $? = 2 ]
coll_try --clickhouse "$(ch_url one)/bad" --clickhouse-writers 5
ok "--clickhouse-writers 5: exit 2" [ $? = 2 ]
ok "... naming the range" grep -q -- "--clickhouse-writers '5': expected a number of writer threads from 1 to 4" "$T_TMP/try.log"
coll_try --clickhouse-writers 2
ok "--clickhouse-writers without --clickhouse: exit 2" [ $? = 2 ]
ok "... saying why" grep -q -- "--clickhouse-writers needs --clickhouse URL" "$T_TMP/try.log"
done_testing
