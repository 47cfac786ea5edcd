#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A pid that exits and is handed to another process (issue #27's
# reused-pid test): the new process is not attached to nor reported.
# The pid is reused on purpose (query_tools/pid_reuse.py: the kernel's
# ns_last_pid set to PID - 1 before each fork, as CRIU does), by a
# process that is no descendant of anything fay follows, running
# query_work calls 50 (50 calls of the probed function).
#  - -c: a descendant of the command (a subshell that exits without an
#    exec) leaves the follow map at its exit; its pid, taken by an
#    unrelated process that execs query_work, is not held, probed nor
#    counted (before: the pid stayed followed, and the stranger's exec
#    was stopped, probed and its 50 calls reported);
#  - -p PID, uprobe and auto (inline) modes: the process exits, its pid
#    is taken by another query_work: the query ends with the first
#    process's calls alone.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/query_lib.bash"
need_query_work
REUSE=$(dirname "$0")/query_tools/pid_reuse.py
[ -w /proc/sys/kernel/ns_last_pid ] || skip_all "no writable /proc/sys/kernel/ns_last_pid"
Q="from f in function(\"$W:fay_work_fn\") group f by f.pid into g select { pid: g.key, n: g.count() }"

# ---- -c: a descendant's pid, reused by a stranger -------------------------------------
: >"$T_TMP/err"
timeout 90 "$FAY" query --json -c "sh -c '( : ) & c=\$!; wait \$c; echo \$c >$T_TMP/c.pid; while [ ! -e $T_TMP/go2 ]; do sleep 0.05; done'" \
	"$Q" >"$T_TMP/out" 2>"$T_TMP/err" & q=$!
wait_for 60 test -s "$T_TMP/c.pid"
c=$(cat "$T_TMP/c.pid")
timeout 60 env -u QW_WAIT -u QW_READY python3 "$REUSE" "$c" "$W" calls 50 2>"$T_TMP/reuse.err"
rrc=$?
touch "$T_TMP/go2"
wait $q
RC=$?
if [ $rrc = 3 ]; then
	diag "pid $c was taken by another process first: the -c check is not made"
else
	ok "the stranger that took pid $c ran (exit $rrc, $(cat "$T_TMP/reuse.err"))" test $rrc = 0
	same "$T_TMP/out" "" "-c: the exited descendant's pid, reused by another process: nothing of it reported"
	ok "... and it was not followed (no 'process $c, a descendant')" \
		bash -c "! grep -q 'process $c, a descendant' '$T_TMP/err'"
fi

# ---- -p PID: the process exits, its pid is reused -----------------------------------------
for mode in uprobe auto; do
	rm -f "$T_TMP/go" "$T_TMP/ready"
	QW_READY=$T_TMP/ready QW_WAIT=$T_TMP/go "$W" calls 100 >/dev/null & p=$!
	wait_for 60 test -e "$T_TMP/ready"
	: >"$T_TMP/err"
	timeout 90 "$FAY" query --json --probe-mode=$mode -p $p "$Q for 20s" >"$T_TMP/out" 2>"$T_TMP/err" & q=$!
	wait_for 60 attached_or_gone "$T_TMP/err" $q
	touch "$T_TMP/go"
	wait $p
	timeout 60 env -u QW_WAIT -u QW_READY python3 "$REUSE" "$p" "$W" calls 50 2>"$T_TMP/reuse.err"
	rrc=$?
	wait $q
	RC=$?
	[ $rrc = 3 ] && diag "pid $p was taken by another process first"
	same "$T_TMP/out" "{\"pid\":$p,\"n\":100}" \
		"-p $p ($mode): the first process's 100 calls alone, not the 50 of the process that took its pid (exit $rrc)"
done
done_testing
