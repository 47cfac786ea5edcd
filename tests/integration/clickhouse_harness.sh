#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The ClickHouse test harness itself (tests/lib/clickhouse.bash): one node
# on its own ports and data directory, kill -9 and restart on the same
# data, and a two-shard local cluster whose Distributed table sees both
# shards.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../lib/clickhouse.bash"

ok "one node starts" ch_start one
v=$(ch_q one 'SELECT version()')
diag "clickhouse-server version $v"
ok "it answers SELECT version()" test -n "$v"
ch_q one "CREATE TABLE default.t (d Date, x UInt64) ENGINE = MergeTree PARTITION BY d ORDER BY x" &&
ch_q one "INSERT INTO default.t VALUES ('2026-01-01', 1), ('2026-01-02', 2)"
ok "a MergeTree table takes rows" [ "$(ch_q one 'SELECT sum(x) FROM default.t')" = 3 ]
ch_kill one
ok "killed with -9, it is gone" bash -c "! curl -sf $(ch_url one)/ping"
ok "restarts on the same data" ch_restart one
ok "the rows are still there" [ "$(ch_q one 'SELECT sum(x) FROM default.t')" = 3 ]

ok "a two-shard cluster starts" ch_cluster two
for n in two1 two2; do
	ch_q $n "CREATE TABLE default.l (x UInt64) ENGINE = MergeTree ORDER BY x"
	ch_q $n "CREATE TABLE default.d AS default.l ENGINE = Distributed(two, default, l, x)"
done
ch_q two1 "INSERT INTO default.d VALUES (1), (2), (3), (4)"
# the Distributed table sends the other shard's rows in the background;
# 18.16 has no SYSTEM FLUSH DISTRIBUTED (400), so they are polled for (a
# fixed 0.5 s was the only wait: without it 3 runs of 5 failed)
ch_q two1 "SYSTEM FLUSH DISTRIBUTED default.d" 2>/dev/null
on_both() { [ "$(ch_q two1 'SELECT count() FROM default.l')" -ge 1 ] && [ "$(ch_q two2 'SELECT count() FROM default.l')" -ge 1 ]; }
ok "rows written through the Distributed table land on both shards" wait_for 30 on_both
sum_is() { [ "$(ch_q "$1" 'SELECT sum(x) FROM default.d')" = "$2" ]; }
ok "either node's Distributed table sees all of them" wait_for 30 sum_is two2 10
done_testing
