#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A query from a non-root user probes only that user's processes (#10):
# fay query as nobody with capabilities, with real processes of root and
# of nobody running.  A uprobe or USDT probe of root's process, and a
# process-wide uprobe of a binary nobody does not own, are refused with
# the reason; nobody's own process is probed and counted exactly; a
# process-wide uprobe of nobody's binary and a syscall query count
# nobody's events alone while root runs the same program;
# --allow-other-users counts everyone's.  The same rule in a non-root
# agent (cluster queries) and a non-root collector (POST /api/query),
# whose requester is the user they run as.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/unpriv_lib.bash"
. "$(dirname "$0")/../lib/query_bg.bash"
unpriv_workloads ou
# the capabilities a uprobe needs here (this kernel's perf_event_open()
# of uprobes asks for CAP_SYS_ADMIN; least_privilege.sh shows that)
CAPS=+bpf,+perfmon,+dac_read_search,+sys_ptrace,+sys_admin
held_pair
diag "root's process $RPID, $U's process $UPID"

refused() { # NAME RC OUT PATTERN: exit 1 and the reason
	ok "$1: refused (exit $2)" test "$2" -eq 1
	ok "... saying why" grep -q "$4" <<<"$3"
	diag "$3"
}
out=$(as "$CAPS" "$D/fay" query -q -p $RPID "from f in function(\"$D/wroot:fay_work_fn\") select count()" 2>&1)
refused "-p of root's process" $? "$out" "in process $RPID: the process belongs to uid 0 (root).*asked by uid $UID_U ($U).*--allow-other-users"
out=$(as "$CAPS" "$D/fay" query -q "from f in process($RPID).function(\"fay_work_fn\") select count()" 2>&1)
refused "process(PID) of root's process" $? "$out" "function(\"fay_work_fn\") in process $RPID: the process belongs to uid 0 (root)"
out=$(as "$CAPS" "$D/fay" query -q -p $RPID "from u in usdt(\"$D/wroot:fayq:tick\") select count()" 2>&1)
refused "a USDT probe of root's process" $? "$out" "usdt(\"tick\") in process $RPID: the process belongs to uid 0"
out=$(as "$CAPS" "$D/fay" query -q 'from f in function("libc:getppid") select count() for 1s' 2>&1)
refused "libc in every process" $? "$out" "function(\"libc:getppid\") in every process: .*libc.* belongs to uid 0 (root).*process(PID), -p PID or -c CMD"
out=$(as "$CAPS" "$D/fay" query -q "from u in usdt(\"$D/wroot:fayq:tick\") select count() for 1s" 2>&1)
refused "a USDT probe of root's binary in every process" $? "$out" "usdt(.*) in every process: $D/wroot belongs to uid 0"
ok "root's process was not disturbed" kill -0 $RPID

# nobody's own process: allowed, counted exactly
query_bg 1 "$T_TMP/own.out" "$T_TMP/own.err" \
	as "$CAPS" "$D/fay" query -p $UPID "from f in function(\"$D/$UN:fay_work_fn\") select { n: count() }"
QPID=$QBG
grep -q "only its own processes are probed" "$T_TMP/own.err" && pass "the query says it probes $U's processes alone" ||
	fail "the query says it probes $U's processes alone" "$(cat "$T_TMP/own.err")"
touch "$D/go.user"
wait $QPID
ok "$U's own process: the query runs (exit $?) and counts its 200 calls" grep -qx " *200" "$T_TMP/own.out"
diag "$(cat "$T_TMP/own.out" "$T_TMP/own.err")"

# nobody's binary run by nobody (200 times) and by root (300): process-wide
# queries count nobody's calls alone
mixed() { as "" "$D/$UN" "$1" 200 >/dev/null; "$D/$UN" "$1" 300 >/dev/null; }
counts() { # WHAT WORKLOAD EXPECTED QUERY [FAY-OPTION]
	query_bg 1 "$T_TMP/q.out" "$T_TMP/q.err" as "$CAPS" "$D/fay" query ${5:-} "$4"
	mixed "$2"
	wait $QBG
	ok "$1" grep -qx " *$3" "$T_TMP/q.out"
	diag "$(cat "$T_TMP/q.out" "$T_TMP/q.err")"
}
counts "$U's binary in every process: only $U's 200 calls of 500" calls 200 \
	"from f in function(\"$D/$UN:fay_work_fn\") select { n: count() } for 4s"
counts "... and all 500 with --allow-other-users" calls 500 \
	"from f in function(\"$D/$UN:fay_work_fn\") select { n: count() } for 4s" --allow-other-users
counts "a syscall query counts $U's 200 getppid calls of 500" getppid 200 \
	"from s in syscall(\"getppid\") where s.comm == \"$UN\" select { n: count() } for 4s"
query_bg 1 "$T_TMP/r.out" "$T_TMP/r.err" as "$CAPS" "$D/fay" query --allow-other-users -p $RPID \
	"from f in function(\"$D/wroot:fay_work_fn\") select { n: count() }"
touch "$D/go.root"
wait $QBG
ok "--allow-other-users: root's process is probed (300 calls)" grep -qx " *300" "$T_TMP/r.out"
diag "$(cat "$T_TMP/r.out" "$T_TMP/r.err")"

# a non-root agent: the requester is its user
coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
agent_as_user "$CAPS" ou-host
query_bg 1 "$T_TMP/cq.out" "$T_TMP/cq.err" "$FAY" query --cluster "$URL" \
	"from s in cluster.syscall(\"getppid\") where s.comm == \"$UN\" select { n: count() } for 4s"
mixed getppid
wait $QBG
ok "a cluster query on the $U agent counts $U's 200 calls alone" grep -qx " *200" "$T_TMP/cq.out"
diag "$(cat "$T_TMP/cq.out" "$T_TMP/cq.err")"
out=$("$FAY" query --cluster "$URL" 'from f in cluster.function("libc:getppid") select { n: count() } for 2s' 2>&1)
ok "a cluster uprobe of libc in every process is refused with the reason" \
	grep -q "in every process: .*libc.* belongs to uid 0 (root).*asked by uid $UID_U" <<<"$out"
diag "$out"
ok "the agent is still running" kill -0 "$APID"

# a non-root collector: /api/query's requester is the collector's user
HP2=$(free_port); WP2=$(free_port)
mkdir -p "$D/cdb"; chown "$U" "$D/cdb"
as "$CAPS" "$D/fay" collector --listen 127.0.0.1:$WP2 --http 127.0.0.1:$HP2 --otlp-http off \
	--otlp-grpc off --db "$D/cdb/c.db" >"$T_TMP/c2.log" 2>&1 &
C2=$!; T_PIDS+=($C2)
ok "a collector as $U starts" wait_for 30 curl -sf "http://127.0.0.1:$HP2/health"
curl -s -X POST --data-binary 'from f in function("libc:getppid") select { n: count() } for 1s' \
	"http://127.0.0.1:$HP2/api/query" >"$T_TMP/api.out" 2>&1
ok "POST /api/query of libc in every process on the $U collector: refused with the reason" \
	grep -q "in every process: .*belongs to uid 0 (root).*asked by uid $UID_U" "$T_TMP/api.out"
diag "$(head -c 600 "$T_TMP/api.out")"
# (-o /dev/null: its body ran into this TAP line, "{...}ok 24", which
# tests/run did not count, pass or fail)
ok "the collector is still up" curl -sf -o /dev/null "http://127.0.0.1:$HP2/health"
done_testing
