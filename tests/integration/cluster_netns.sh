#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cluster queries across real addresses (tests/lib/netns.bash): a root
# collector, an intermediate collector and three agent hosts, each in its
# own network namespace on one switch.  h1 and h2 report to the root, h3
# through the intermediate one.  Each host has its own copy of the
# workload binary (its own truth; the hosts share a kernel).  Answers are
# exact; pulling h2's cable during a windowed query makes h2 missing while
# the others go on, and plugging it back brings h2 back into the query.
# Off loopback a collector wants tokens: every hop here carries one.
. "$(dirname "$0")/../lib/lib.sh"
. "$TOP/tests/lib/netns.bash"
ns_need_query_work
ns_init

ns_hosts root mid h1 h2 h3
pass "5 hosts: root $(ns_ip root), mid $(ns_ip mid), h1 $(ns_ip h1), h2 $(ns_ip h2), h3 $(ns_ip h3)"

# beyond loopback, tokens: agents and the intermediate collector (its own
# token to the root) write, the client reads and probes
printf 'agt write agents\ncli read,probe client\n' >"$T_TMP/tokens.mid"
printf 'agt write agents\nmidt write mid\ncli read,probe client\n' >"$T_TMP/tokens"
echo agt >"$T_TMP/agent.tok"
echo cli >"$T_TMP/cli.tok"
chmod 600 "$T_TMP/tokens" "$T_TMP/tokens.mid" "$T_TMP/agent.tok" "$T_TMP/cli.tok"
ok "root collector up" ns_collector root "$T_TMP/root.log" --db "$T_TMP/root.db" \
	--token-file "$T_TMP/tokens"
ok "intermediate collector up" ns_collector mid "$T_TMP/mid.log" --db "$T_TMP/mid.db" \
	--token-file "$T_TMP/tokens.mid" --parent "$(ns_ip root):9410" --token midt --host mid

declare -A K=([h1]=100 [h2]=200 [h3]=300) UP=([h1]=root [h2]=root [h3]=mid)
for h in h1 h2 h3; do
	mkdir -p "$T_TMP/$h"
	cp "$W" "$T_TMP/$h/qw"
	( cd "$T_TMP/$h" && exec ip netns exec "$NS_PREFIX-$h" "$FAY" agent \
		--collector "$(ns_ip ${UP[$h]}):9410" --host $h --shm-dir "$T_TMP/$h" \
		--state-dir "$T_TMP/$h" --token-file "$T_TMP/agent.tok" ) >"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
done
peers() { [ "$(ns_run $1 curl -s -H "Authorization: Bearer cli" http://127.0.0.1:9411/api/cluster/peers | grep -o '"host":' | wc -l)" -ge "$2" ]; }
ok "the root has h1, h2 and mid" wait_for 20 peers root 3
ok "mid has h3" wait_for 20 peers mid 1

# n_attached N ERR: N of the root's members (h1, h2, mid) attached: members,
# not lines (each time one more answers, fay query prints every attached
# one again, and after 2 s without all answers the lines add up early)
n_attached() { [ "$(hosts_attached "$2")" -ge "$1" ]; }
# 8 s: a query's time counts from its start, the attach comes out of it
Q='from c in cluster.function("./qw:fay_work_fn") group c by c.host into g select { host: g.key, n: g.count(), s: g.sum(c.arg(0)) } for 8s'
go=$T_TMP/go1
for h in h1 h2 h3; do QW_WAIT=$go "$T_TMP/$h/qw" calls ${K[$h]} & T_PIDS+=($!); done
ns_run root timeout 60 "$FAY" query --cluster http://127.0.0.1:9411 --token-file "$T_TMP/cli.tok" --json "$Q" >"$T_TMP/o1" 2>"$T_TMP/e1" &
q=$!
wait_for 20 n_attached 3 "$T_TMP/e1" && touch "$go"
wait $q
want='{"host":"h1","n":100,"s":4950}
{"host":"h2","n":200,"s":19900}
{"host":"h3","n":300,"s":44850}'
[ "$(cq_rows "$T_TMP/o1")" = "$want" ] && grep -q '3 of 3 hosts answered' "$T_TMP/e1" &&
	pass "across addresses and a tree: every host's count and sum exactly, 3 of 3 hosts" ||
	fail "exact answers" "$(cat "$T_TMP/o1")" "$(cat "$T_TMP/e1")"

# pull h2's cable during a windowed query, then plug it back
QW='from c in cluster.syscall("getppid") group c by c.host into g select { host: g.key, n: g.count() >= 0 } window 1s for 16s'
ns_run root timeout 60 "$FAY" query --cluster http://127.0.0.1:9411 --token-file "$T_TMP/cli.tok" --grace 500ms "$QW" >"$T_TMP/o2" 2>"$T_TMP/e2" &
q=$!
wait_for 20 n_attached 3 "$T_TMP/e2"
sleep 2
ns_link h2 down
sleep 5
ns_link h2 up
wait $q
RC=$?
[ $RC -eq 0 ] && grep -q 'missing: h2$' "$T_TMP/e2" &&
	pass "h2's cable out: h2 is missing from the windows that follow, the query goes on" ||
	fail "cable out (rc=$RC)" "$(cat "$T_TMP/e2")"
grep -q ': 2 of 3 hosts answered; missing: h2' "$T_TMP/e2" &&
	pass "h1 and h3 keep answering meanwhile" || fail "others while h2 out" "$(cat "$T_TMP/e2")"
tail -n 3 "$T_TMP/e2" | grep -q ': 3 of 3 hosts answered' &&
	pass "h2 plugged back: it rejoins the running query" || fail "h2 rejoins" "$(cat "$T_TMP/e2")"
done_testing
