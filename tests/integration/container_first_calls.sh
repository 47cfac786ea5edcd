#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The first calls of containers fay did not start (issue #25 item 2):
# function("libc:getppid") in every process is attached, then, ROUNDS
# times, a process starts in a new container whose libc is a file no
# probe is on yet (a fresh root each round: another copy, another inode)
# and calls getppid() N times from the first instruction of its main()
# (ctr_work "now").  Each round's calls are all counted: the process is
# held at its mapping of the new libc (SIGSTOP from the mmap() exit
# program, for a process in another mount namespace than fay) until fay
# has attached to it.  Before, 3 rounds of 20 missed 16 to 3699 calls
# (bench/exec_first_calls.sh).  Runtimes: unshare + chroot (each round),
# systemd-nspawn and podman (runc, an image imported from a root built
# here) once each where installed; and one more unshare round while fay
# is stopped for half a second (a fay slow to look: without the hold that
# round's calls are all missed).  Then the guard: fay stopped (so it
# cannot look), a container's process held at its libc's mapping, fay
# killed: the process is continued all the same and finishes.  And a
# fay in a mount namespace of its own (PrivateTmp=) never holds a
# process of the host's.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"
trap 'kill -CONT $FP $fp 2>/dev/null; ctr_podman_clean; t_cleanup' EXIT

ROUNDS=${ROUNDS:-20} N=3000 FP= fp=
# ctr_work as ctr_first: other tests' ctr_work may run meanwhile
export CTR_WORK_NAME=ctr_first
Q='from f in function("libc:getppid") where f.comm == "ctr_first" group f by f.pid into g select { p: g.key, n: g.count() }'

# round DIR RUNTIME: ctr_work DIR/w N now in a container of DIR; 0 when
# it said it made its N calls
round() {
	local r=$1 rt=$2
	rm -f "$r/w/done"
	case "$rt" in
	unshare)
		timeout 60 nice -n 10 unshare -p -m -f --mount-proc="$r/proc" \
			chroot "$r" /bin/ctr_first /w $N now >>"$T_TMP/ctr.out" 2>&1 ;;
	nspawn)
		timeout 60 nice -n 10 systemd-nspawn -q -D "$r" --register=no --keep-unit \
			--as-pid2 /bin/ctr_first /w $N now >>"$T_TMP/ctr.out" 2>&1 ;;
	podman)
		timeout 120 nice -n 10 podman "${CTR_PODMAN_OPTS[@]}" run "${CTR_PODMAN_RUN[@]}" \
			-v "$r/w:/w" "$CTR_PODMAN_IMG" /bin/ctr_first /w $N now \
			>>"$T_TMP/ctr.out" 2>&1 ;;
	esac
	[ "$(cat "$r/w/done" 2>/dev/null)" = $N ]
}

RTS=()
for i in $(seq "$ROUNDS"); do ctr_root "$T_TMP/r$i"; RTS+=(unshare); done
ctr_root "$T_TMP/rs"
RTS+=(slow)
if command -v systemd-nspawn >/dev/null; then
	ctr_root "$T_TMP/rn"
	RTS+=(nspawn)
else
	diag "systemd-nspawn is not installed (package systemd-container): no nspawn round"
fi
if ctr_podman_image "$T_TMP/rp"; then
	RTS+=(podman)
else
	diag "no podman round: $CTR_PODMAN_WHY"
fi

: >"$T_TMP/q.err"
timeout 600 "$FAY" query --json "$Q" >"$T_TMP/q.out" 2>"$T_TMP/q.err" & qp=$!
T_PIDS+=($qp)
wait_for 60 bash -c "grep -q attached '$T_TMP/q.err' || ! kill -0 $qp" ||
	fail "the query attached" "$(cat "$T_TMP/q.err")"
ran=0
for i in $(seq ${#RTS[@]}); do
	rt=${RTS[$((i - 1))]}
	case $rt in unshare) r=$T_TMP/r$i ;; slow) r=$T_TMP/rs ;; nspawn) r=$T_TMP/rn ;; podman) r=$T_TMP/rp ;; esac
	if [ $rt = slow ]; then
		# fay cannot look for 0.5 s from before the process starts
		fp=$(pgrep -P $qp -x fay)
		kill -STOP $fp
		(sleep 0.5; kill -CONT $fp) &
		round "$r" unshare && ran=$((ran + 1)) ||
			fail "round $i ($rt): the workload ran" "$(tail -5 "$T_TMP/ctr.out")"
		wait $!
		continue
	fi
	round "$r" "$rt" && ran=$((ran + 1)) ||
		fail "round $i ($rt): the workload ran" "$(tail -5 "$T_TMP/ctr.out")"
done
kill -INT $qp 2>/dev/null
wait $qp
ok "the ${#RTS[@]} workloads ran (${RTS[*]})" test $ran = ${#RTS[@]}
rows=$(grep -c '"n":' "$T_TMP/q.out")
full=$(grep -c "\"n\":$N}" "$T_TMP/q.out")
[ "$rows" = ${#RTS[@]} ] && [ "$full" = ${#RTS[@]} ] &&
	pass "each of the ${#RTS[@]} new containers: all its $N calls counted, from its first" ||
	fail "each new container counted from its first call" \
		"rows: $rows, with n = $N: $full, want ${#RTS[@]}" "$(cat "$T_TMP/q.out")" \
		"$(grep -i 'held\|warn\|error' "$T_TMP/q.err" | head -5)"
nf=$(grep -c "one more file, .*libc.so.6" "$T_TMP/q.err")
ok "a new file of libc probed for each container ($nf)" test "$nf" -ge ${#RTS[@]}

# The guard: fay stopped, a new container's process held at its libc's
# mapping (state T: fay cannot look), fay killed: continued all the same.
ctr_root "$T_TMP/rg"
"$FAY" query --json "$Q" >"$T_TMP/g.out" 2>"$T_TMP/g.err" & FP=$!
T_PIDS+=($FP)
wait_for 60 bash -c "grep -q attached '$T_TMP/g.err' || ! kill -0 $FP" ||
	fail "the guard's query attached" "$(cat "$T_TMP/g.err")"
kill -STOP $FP
rm -f "$T_TMP/rg/w/done"
timeout 120 unshare -p -m -f --mount-proc="$T_TMP/rg/proc" \
	chroot "$T_TMP/rg" /bin/ctr_first /w $N now >>"$T_TMP/ctr.out" 2>&1 & up=$!
T_PIDS+=($up)
held() {
	local p
	for p in $(pgrep -x ctr_first); do
		[ "/proc/$p/root" -ef "$T_TMP/rg" ] &&
			[ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)" = T ] && return 0
	done
	return 1
}
wait_for 30 held &&
	pass "with fay stopped, the container's process is held at its libc's mapping" ||
	fail "held while fay cannot look" "$(ps -o pid,stat,args -C ctr_first)"
kill -KILL $FP
wait $FP 2>/dev/null
FP=
wait_for 30 test -s "$T_TMP/rg/w/done" &&
	[ "$(cat "$T_TMP/rg/w/done")" = $N ] &&
	pass "fay killed: the guard continued the held process, which made its $N calls" ||
	fail "continued after fay was killed" "$(ps -o pid,stat,args -C ctr_first)"
wait $up
# fay in a mount namespace of its own (as in a systemd unit with
# PrivateTmp=): a process of the host's mount namespace with a new libc
# file (chroot, no unshare -m) is the host's, never held, even with fay
# stopped (held against fay's own namespace, it would stay stopped)
ctr_root "$T_TMP/rh"
unshare -m "$FAY" query --json "$Q" >"$T_TMP/h.out" 2>"$T_TMP/h.err" & FP=$!
T_PIDS+=($FP)
wait_for 60 bash -c "grep -q attached '$T_TMP/h.err' || ! kill -0 $FP" ||
	fail "the query in a mount namespace of its own attached" "$(cat "$T_TMP/h.err")"
kill -STOP $FP
rm -f "$T_TMP/rh/w/done"
timeout -s KILL 60 chroot "$T_TMP/rh" /bin/ctr_first /w $N now >>"$T_TMP/ctr.out" 2>&1
[ "$(cat "$T_TMP/rh/w/done" 2>/dev/null)" = $N ] &&
	pass "fay in a private mount namespace, stopped: a host process with a new libc is not held" ||
	fail "a host process is not held by a fay in a private mount namespace" \
		"$(ps -o pid,stat,args -C ctr_first)"
kill -CONT $FP
kill -INT $FP
wait $FP 2>/dev/null
FP=
# (ctr_first is this test's name alone: any one left is of this test)
wait_for 30 bash -c '! pgrep -x ctr_first >/dev/null' &&
	pass "no workload left behind (stopped or running)" ||
	fail "no workload left behind" "$(ps -o pid,stat,args -C ctr_first)"
done_testing
