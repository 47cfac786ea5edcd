#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cluster queries on a containerized process (issue #25 item 1: "cluster
# queries with a process scope" resolve in the process's own file
# system).  A real collector and agent; a workload in its own pid and
# mount namespaces and root (unshare + chroot) with its own COPY of libc
# calls getppid() exactly N times.  host("NAME").process(PID).function()
# counts N, with s.pid its host pid and s.vpid its own, in the agent's
# two modes: by default the agent loads fay's runtime into the process
# (inline, the runtime copied into its root), with --no-inject it uses a
# uprobe on the container's libc; cluster.function("libc:getppid") in
# every process counts the container's calls too (the agent probes each
# file of that name).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"
. "$(dirname "$0")/collector_lib.bash"
trap 'touch "$R/w/stop" 2>/dev/null; t_cleanup' EXIT

R=$T_TMP/root
ctr_root "$R"
coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
COLLPID=$CPID
N=400

# agent MODE-OPTS...: (re)start agent alpha with these options
agent() {
	[ -n "${APID:-}" ] && { kill "$APID"; wait "$APID" 2>/dev/null; }
	mkdir -p "$T_TMP/alpha"
	"$FAY" agent --collector 127.0.0.1:$WP --host alpha --shm-dir "$T_TMP/alpha" \
		--state-dir "$T_TMP/alpha" --no-containers "$@" >>"$T_TMP/alpha.log" 2>&1 &
	APID=$!
	T_PIDS+=($APID)
	wait_for 30 coll_peers alpha
}

# cq WHAT QUERY: a fresh workload calling N times, the cluster query (its
# __PID__ the workload's host pid) attached first, then the calls; the
# --json rows (not the hosts line) in $T_TMP/q.out
cq() {
	local q=$2 qp
	ctr_start "$R" $N || { fail "$1: workload started" "$(cat "$T_TMP/ctr.out")"; return 1; }
	q=${q//__PID__/$CPID}
	# emptied here, not by the job's redirection: that runs in the job,
	# after the wait below may have read the last query's "attached" (the
	# calls then ran before the probe was in place: n = 0)
	: >"$T_TMP/q.err"
	timeout 60 "$FAY" query --cluster "$URL" --json "$q for 8s" >"$T_TMP/q.raw" 2>"$T_TMP/q.err" & qp=$!
	wait_for 30 bash -c "grep -q ': attached' '$T_TMP/q.err' || ! kill -0 $qp" ||
		{ fail "$1: attached" "$(cat "$T_TMP/q.err")"; }
	ctr_go "$R"
	ctr_done "$R"
	wait $qp
	ctr_stop "$R"
	wait_for 30 bash -c "! kill -0 $CPID 2>/dev/null"
	grep -v '"hosts":{' "$T_TMP/q.raw" >"$T_TMP/q.out"
}

for m in inline uprobe; do
	if [ $m = inline ]; then agent; else agent --no-inject; fi
	ok "$m: agent alpha has a query connection" test $? -eq 0
	cq "$m" 'from f in host("alpha").process(__PID__).function("libc:getppid") select { n: count(), pid: max(f.pid), vpid: max(f.vpid) }'
	want="{\"n\":$N,\"pid\":$CPID,\"vpid\":$CVPID}"
	[ "$(cat "$T_TMP/q.out")" = "$want" ] && [ "$CPID" != "$CVPID" ] &&
		pass "$m: host(\"alpha\").process(PID).function(\"libc:getppid\") in a container: n = $N, pid $CPID (host), vpid $CVPID" ||
		fail "$m: process scope" "got: $(cat "$T_TMP/q.out")" "want: $want" "$(cat "$T_TMP/q.err")" "$(tail -5 "$T_TMP/alpha.log")"
	# how it ran: the agent's note, passed on to the client
	if [ $m = inline ]; then
		grep -q "pid $CPID: inline" "$T_TMP/q.err" "$T_TMP/alpha.log" &&
			pass "inline: the agent loaded its runtime into the container's process" ||
			fail "inline: how it ran" "$(cat "$T_TMP/q.err")" "$(tail -5 "$T_TMP/alpha.log")"
	else
		grep -q "pid $CPID: uprobe" "$T_TMP/q.err" "$T_TMP/alpha.log" &&
			pass "uprobe: --no-inject: a uprobe on the container's libc" ||
			fail "uprobe: how it ran" "$(cat "$T_TMP/q.err")" "$(tail -5 "$T_TMP/alpha.log")"
	fi
	cq "$m: every process" 'from f in cluster.function("libc:getppid") where f.comm == "ctr_work" group f by f.pid into g select { p: g.key, n: g.count() }'
	# other tests' ctr_work processes may run beside this one: this
	# container's process is the row asked for
	grep -qx "{\"p\":$CPID,\"n\":$N}" "$T_TMP/q.out" &&
		pass "$m agent: cluster.function(\"libc:getppid\") in every process counts the container's $N calls" ||
		fail "$m: every process" "got: $(cat "$T_TMP/q.out")" "$(cat "$T_TMP/q.err")" "$(tail -5 "$T_TMP/alpha.log")"
	# (item 2) the host's answer says how many files it probed: its libc
	# and the container's copy, mapped when the query attached
	grep -q "and [0-9]* other files\? of that name mapped on this host ([0-9]* files)" "$T_TMP/q.err" &&
		pass "$m agent: its attach answer says how many files were probed" ||
		fail "$m: files in the answer" "$(cat "$T_TMP/q.err")"
done
ok "collector still up" kill -0 $COLLPID
done_testing
