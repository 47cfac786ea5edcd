#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every process means every process (issue #25 item 2), also those that
# start after the query attached: function("libc:getppid") without -p is
# attached, THEN a plain host process and a process in a new container
# (its own pid and mount namespaces and root, unshare + chroot, with its
# own copy of libc: a file no process mapped at the attach) start.  fay
# sees them exec (sched:sched_process_exec), resolves libc in the new
# root and attaches to that file; each process's calls are counted
# exactly, entry and return probes alike.  With podman installed, the
# same with a podman container run from an image imported from a root
# the test builds (no registry).  A second process of a container whose
# libc is probed already is counted from its very first call.  Libraries
# mapped from elsewhere (dlopen() from /opt/x in a container,
# LD_LIBRARY_PATH on the host) are followed too.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"
trap 'for d in "$RA" "$H" "$RP"; do [ -d "$d/w" ] && touch "$d/w/stop"; done; ctr_podman_clean; t_cleanup' EXIT

RA=$T_TMP/ra H=$T_TMP/h RP=$T_TMP/rp
ctr_root "$RA"
mkdir -p "$H/w"
NA=300 NH=200

# follow Q: the query attached first, then a host ctr_work ($NH calls)
# and one in a container of runtime $CTR_RUNTIME ($NA calls); --json
# answer in $T_TMP/q.out, stderr in $T_TMP/q.err; host pids in PH, CPID
follow() {
	local q=$1 qp ph
	: >"$T_TMP/q.err"
	timeout 120 "$FAY" query --json "$q" >"$T_TMP/q.out" 2>"$T_TMP/q.err" & qp=$!
	T_PIDS+=($qp)
	wait_for 60 bash -c "grep -q attached '$T_TMP/q.err' || ! kill -0 $qp" ||
		{ fail "the query attached" "$(cat "$T_TMP/q.err")"; return 1; }
	rm -f "$H"/w/{ready,go,done,stop}
	timeout 300 nice -n 10 "$CW" "$H/w" $NH >/dev/null 2>&1 & PH=$!
	T_PIDS+=($PH)
	ctr_start "$RA" $NA || { fail "the container started" "$(cat "$T_TMP/ctr.out")"; return 1; }
	wait_for 30 test -s "$H/w/ready" || { fail "the host process started"; return 1; }
	PH=$(cat "$H/w/ready")	# ctr_work's own pid (PH was timeout's)
	# fay found the container's libc: the file its root maps
	wait_for 30 grep -q "one more file, .*libc.so.6 (process $CPID," "$T_TMP/q.err" ||
		{ fail "fay attached to the container's libc" "$(cat "$T_TMP/q.err")"; }
	touch "$RA/w/go" "$H/w/go"
	wait_for 60 test -s "$RA/w/done" -a -s "$H/w/done"
	kill -INT $qp 2>/dev/null
	wait $qp
	touch "$RA/w/stop" "$H/w/stop"
	wait_for 30 bash -c "! kill -0 $CPID 2>/dev/null && ! kill -0 $PH 2>/dev/null"
}

check() {
	local what=$1 want
	want=$(printf '{"p":%d,"n":%d}\n{"p":%d,"n":%d}\n' "$CPID" $NA "$PH" $NH | sort)
	[ "$(sort "$T_TMP/q.out")" = "$want" ] &&
		pass "$what: the container's process $NA calls, the host's $NH, both started after the attach" ||
		fail "$what" "got: $(cat "$T_TMP/q.out")" "want: $want" "$(cat "$T_TMP/q.err")"
}

follow 'from f in function("libc:getppid") where f.comm == "ctr_work" group f by f.pid into g select { p: g.key, n: g.count() }' &&
	check 'function("libc:getppid") without -p'
nf=$(grep -o "one more file, [^ ]* (process $CPID, started after the attach): [0-9]* files" "$T_TMP/q.err" |
	head -1 | grep -o '[0-9]* files' | tr -dc 0-9)
ok "the new file is counted in the probe's files (${nf:-none} files)" test "${nf:-0}" -ge 2

# an entry and a return probe: both follow (exit first)
follow 'from f in function("libc:getppid") where f.comm == "ctr_work" && f.duration >= 0 group f by f.pid into g select { p: g.key, n: g.count() }' &&
	check 'entry and return probes (f.duration)'
[ "$(grep -c "one more file, .*(process $CPID," "$T_TMP/q.err")" -ge 2 ] &&
	pass "entry and return probes each attached to the new file" ||
	fail "both probes followed" "$(cat "$T_TMP/q.err")"

# a host process alone costs no resolution: nothing more is attached for it
! grep -q "one more file, .*(process $PH," "$T_TMP/q.err" &&
	pass "the host's process needed no new file (the host's libc is probed)" ||
	fail "host process" "$(cat "$T_TMP/q.err")"

# The calls a process makes before fay attached to its file are missed
# only for a file no probe is on yet: a uprobe is on the file's inode, so
# a second process of a container whose libc is probed already is counted
# from its first call.  ctr_work "now" calls getppid() from the first
# instruction of its main(), in the first container's namespaces and root.
: >"$T_TMP/q.err"
timeout 120 "$FAY" query --json 'from f in function("libc:getppid") where f.comm == "ctr_work" group f by f.pid into g select { p: g.key, n: g.count() }' \
	>"$T_TMP/q.out" 2>"$T_TMP/q.err" & qp=$!
T_PIDS+=($qp)
wait_for 60 bash -c "grep -q attached '$T_TMP/q.err' || ! kill -0 $qp"
if ctr_start "$RA" 0 &&
	wait_for 30 grep -q "one more file, .*libc.so.6 (process $CPID," "$T_TMP/q.err"; then
	NN=5000
	rm -f "$RA/w2/done"; mkdir -p "$RA/w2"
	timeout 60 nsenter -t "$CPID" -m -p -r /bin/ctr_work /w2 $NN now
	ok "the second process ran" test "$(cat "$RA/w2/done" 2>/dev/null)" = $NN
	kill -INT $qp 2>/dev/null
	wait $qp
	touch "$RA/w/go" "$RA/w/stop"
	wait_for 30 bash -c "! kill -0 $CPID 2>/dev/null"
	n2=$(grep -v "\"p\":$CPID," "$T_TMP/q.out" | grep -o '"n":[0-9]*' | tr -dc 0-9)
	[ "$(grep -vc "\"p\":$CPID," "$T_TMP/q.out")" = 1 ] && [ "$n2" = $NN ] &&
		pass "a second process in a container whose libc is probed: all $NN calls from its start counted" ||
		fail "second process in a probed container" "got: $(cat "$T_TMP/q.out")" "$(cat "$T_TMP/q.err")"
else
	fail "fay attached to the first container process's libc" "$(cat "$T_TMP/q.err")"
	kill -INT $qp 2>/dev/null; wait $qp
fi

# Libraries mapped from elsewhere than the root's library directories,
# which resolving the name in the root at exec does not find; fay sees
# the mmap() of the file (syscalls:sys_enter/exit_mmap) and attaches:
# (1) a container's process dlopen()s its own copy of libz from /opt/x;
# (2) a host process runs with LD_LIBRARY_PATH naming a directory that
# holds a copy of libc.  Each process's calls, made once fay said so,
# counted exactly.
# mapped WHAT FILE-RE QUERY START...: the query attached, then START (a
# command that sets P, the process's host pid, and DIR, its /w)
mapped() {
	local what=$1 re=$2 q=$3 qp
	shift 3
	: >"$T_TMP/q.err"
	timeout 120 "$FAY" query --json "$q" >"$T_TMP/q.out" 2>"$T_TMP/q.err" & qp=$!
	T_PIDS+=($qp)
	wait_for 60 bash -c "grep -q attached '$T_TMP/q.err' || ! kill -0 $qp"
	"$@" || { fail "$what: started"; kill -INT $qp; wait $qp; return 1; }
	wait_for 30 grep -q "one more file, $re (process $P, mapped after the attach)" "$T_TMP/q.err" &&
		pass "$what: fay saw the file mapped and attached to it" ||
		fail "$what: attached to the mapped file" "$(cat "$T_TMP/q.err")"
	touch "$DIR/go"
	wait_for 60 test -s "$DIR/done"
	kill -INT $qp 2>/dev/null
	wait $qp
	touch "$DIR/stop"
	wait_for 30 bash -c "! kill -0 $P 2>/dev/null"
	[ "$(cat "$T_TMP/q.out")" = "{\"p\":$P,\"n\":$NM}" ] &&
		pass "$what: its $NM calls counted" ||
		fail "$what: counted" "got: $(cat "$T_TMP/q.out")" "$(cat "$T_TMP/q.err")"
}
NM=250
mkdir -p "$RA/opt/x"
cp /lib/x86_64-linux-gnu/libz.so.1 "$RA/opt/x/libz.so.1"
start_dl() {
	local rc=0
	CTR_ARGS=(dlopen /opt/x/libz.so.1 zlibVersion)
	ctr_start "$RA" $NM || rc=1
	CTR_ARGS=()
	P=$CPID DIR=$RA/w
	return $rc
}
if [ -e /lib/x86_64-linux-gnu/libz.so.1 ]; then
	mapped "a container's dlopen(\"/opt/x/libz.so.1\")" "[^ ]*/opt/x/libz.so.1" \
		'from f in function("libz:zlibVersion") where f.comm == "ctr_work" group f by f.pid into g select { p: g.key, n: g.count() }' \
		start_dl
else
	diag "no host libz.so.1 (zlib1g): no dlopen case"
fi
LC=$T_TMP/libcopy
mkdir -p "$LC" "$T_TMP/hl/w"
cp /lib/x86_64-linux-gnu/libc.so.6 "$LC/libc.so.6"
start_llp() {
	rm -f "$T_TMP"/hl/w/{ready,go,done,stop}
	timeout 300 nice -n 10 env LD_LIBRARY_PATH="$LC" "$CW" "$T_TMP/hl/w" $NM >/dev/null 2>&1 &
	T_PIDS+=($!)
	wait_for 30 test -s "$T_TMP/hl/w/ready" || return 1
	P=$(cat "$T_TMP/hl/w/ready") DIR=$T_TMP/hl/w
	T_PIDS+=($P)
}
mapped "a host process with LD_LIBRARY_PATH=DIR holding a copy of libc" "$LC/libc.so.6" \
	'from f in function("libc:getppid") where f.comm == "ctr_work" group f by f.pid into g select { p: g.key, n: g.count() }' \
	start_llp

# inline probes serve one process: in every process they are refused, saying so
timeout 60 "$FAY" query --probe-mode=inline 'from f in function("libc:getppid") select { n: count() } for 1s' \
	>/dev/null 2>"$T_TMP/e"
grep -q 'in every process: uprobe (inline probes run in one process' "$T_TMP/e" &&
	pass "--probe-mode=inline in every process is refused with the reason" ||
	fail "inline in every process" "$(cat "$T_TMP/e")"

# podman, from an image imported from a root built here (no registry)
if ctr_podman_image "$RP"; then
	CTR_RUNTIME=podman RA=$RP follow 'from f in function("libc:getppid") where f.comm == "ctr_work" group f by f.pid into g select { p: g.key, n: g.count() }' &&
		RA=$RP check 'podman container started after the attach'
else
	diag "no podman case: $CTR_PODMAN_WHY"
fi
done_testing
