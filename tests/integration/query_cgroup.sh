#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay query --cgroup PATH: only the tasks of one cgroup v2 and those below
# it, from a tracepoint, a uprobe and an inline probe.  Two workloads
# with known counts run in two sibling cgroups A and B and one in a
# cgroup made below A after the query attached; each count is exact.
. "$(dirname "$0")/../lib/lib.sh"
need_root
W=$BUILD/tests/bin/query_work
[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"
[ -x "$W" ] || skip_all "query_work is not built (make)"
CG=/sys/fs/cgroup
[ -e $CG/cgroup.controllers ] || CG=/sys/fs/cgroup/unified
[ -e $CG/cgroup.controllers ] || skip_all "no cgroup2 file system"
A=fayq$$-a
B=fayq$$-b
mkdir "$CG/$A" "$CG/$B" || skip_all "cannot make cgroups under $CG"
cg_gone() { rmdir "$CG/$A/late" "$CG/$A" "$CG/$B" 2>/dev/null; }
trap 't_cleanup; cg_gone' EXIT

# run_in CG MODE K: query_work MODE K in cgroup CG once $go exists
run_in() {
	bash -c 'echo $$ >"$1/cgroup.procs" && QW_WAIT=$2 exec timeout 60 "$3" "$4" "$5"' \
		_ "$CG/$1" "$go" "$W" "$2" "$3" &
	T_PIDS+=($!)
}

# a tracepoint: getppid calls of A (and of a cgroup made below A after the
# attach), not of B
go=$T_TMP/go1
Q='from s in syscall("getppid") where s.comm == "query_work" select count() for 6s'
timeout 60 "$FAY" query --cgroup "/$A" --json "$Q" >"$T_TMP/o1" 2>"$T_TMP/e1" &
q=$!
ok "the query attaches" wait_for 30 grep -q attached "$T_TMP/e1"
mkdir "$CG/$A/late"
run_in "$A" getppid 3000
run_in "$A/late" getppid 400
run_in "$B" getppid 5000
touch "$go"
wait $q
ok "syscall(\"getppid\") --cgroup /$A: A's 3000 and late's 400, none of B's ($(cat "$T_TMP/o1"))" \
	grep -q '^{"count()":3400}$' "$T_TMP/o1"

# a uprobe on the workload's own function (every process running it)
go=$T_TMP/go2
Q="from f in function(\"$W:fay_work_fn\") select count() for 5s"
timeout 60 "$FAY" query --probe-mode=uprobe --cgroup "/$B/" --json "$Q" >"$T_TMP/o2" 2>"$T_TMP/e2" &
q=$!
ok "the uprobe query attaches" wait_for 30 grep -q attached "$T_TMP/e2"
run_in "$A" calls 700
run_in "$B" calls 250
touch "$go"
wait $q
ok "function(fay_work_fn) --cgroup /$B/: B's 250 calls alone ($(cat "$T_TMP/o2"))" \
	grep -q '^{"count()":250}$' "$T_TMP/o2"

# inline: the process must be in the scope
"$W" sleep 60000 1000 &
P=$!
T_PIDS+=($P)
Q="from f in process($P).function(\"fay_work_sleep\") select count() for 1s"
ok "inline, a process outside the scope: refused, saying where it is" \
	bash -c '! timeout 30 "$1" query --probe-mode=inline --cgroup "$2" "$3" 2>"$4" &&
		grep -q "process $5 is in cgroup .*, outside it" "$4"' _ "$FAY" "/$A" "$Q" "$T_TMP/e3" "$P"
echo "$P" >"$CG/$A/cgroup.procs"
ok "... moved into it: probed" bash -c 'timeout 30 "$1" query --probe-mode=inline --cgroup "$2" --json "$3" >"$4" &&
	grep -q "count()\":[1-9]" "$4"' _ "$FAY" "/$A" "$Q" "$T_TMP/o3"
kill "$P" 2>/dev/null
wait "$P" 2>/dev/null

ok "a cgroup that does not exist: refused, naming it" \
	bash -c '! "$1" query --cgroup /fay-no-such "from s in syscall(\"read\") select count() for 1s" 2>"$2" &&
		grep -q "no such cgroup.*fay-no-such" "$2"' _ "$FAY" "$T_TMP/e4"
ok "--cgroup with --cluster: refused" \
	bash -c '! "$1" query --cluster http://127.0.0.1:1 --cgroup / "from s in syscall(\"read\") select count() for 1s" 2>"$2" &&
		grep -q "fay agent --cgroup" "$2"' _ "$FAY" "$T_TMP/e5"
done_testing
