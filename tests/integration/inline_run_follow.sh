#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay run follows every exec of the command (issue 19 item 6), in inline
# and auto mode, for a function every image maps (libc's) as for one of
# the program: the session of each image sends NEXT (the image it execs
# holds its main() again), and when its socket hangs up at the exec fay
# connects to the next image's runtime and arms the site there with the
# same maps, so the counts go on.  Every count must equal the kernel
# uprobe's (which stays on the pid through its execs) and the program's
# own calls; before, libc:getppid through `sh -c 'exec prog'` answered
# the shell's 1 call (its image alone was armed) and liblzma's lzma_code
# under `sh -c 'exec xz ...'` 0.  A real program's output must be
# byte-identical to an unprobed run's; an image without the runtime (a
# static program) runs on untraced and the query ends cleanly; a fay
# killed while an exec()ed image holds for it lets that image run on.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"
WS=$BUILD/tests/bin/inline_work_static
[ -x "$WS" ] || skip_all "inline_work_static is not built (make)"
command -v xz >/dev/null || skip_all "xz is not installed"

# q MODE FN CMD...: fay run's count of FN in n (empty: failed), exit in rc
q() {
	local m=$1 fn=$2
	shift 2
	timeout 120 "$FAY" run --json --probe-mode=$m \
		--query "from f in function(\"$fn\") select { n: count() }" -- "$@" \
		>"$T_TMP/q.out" 2>"$T_TMP/q.err"
	rc=$?
	a=$(tail -1 "$T_TMP/q.out")
	n=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["n"])' "$a" 2>/dev/null)
	[ $rc -eq 0 ] || n=
}

# case_ NAME FN WANT CMD...: the uprobe's count must be WANT (the
# program's own calls: the shells call neither function), then inline
# and auto must count the same, with the program's own "sid calls K bad
# 0" lines intact
case_() {
	local name=$1 fn=$2 want=$3 up m
	shift 3
	q uprobe "$fn" "$@"
	up=$n
	if [ "$up" != "$want" ]; then
		fail "$name, uprobe: exit $rc, answer '$a' (want $want)" "$(cat "$T_TMP/q.err")"
		return
	fi
	for m in inline auto; do
		q $m "$fn" "$@"
		if [ -n "$n" ] && [ "$n" = "$up" ] && ! grep -q "bad [1-9]" "$T_TMP/q.out" &&
		   grep -q "^fay: 1 probe attached: inline " "$T_TMP/q.err"; then
			pass "$name, $m: n = $n = the uprobe's"
		else
			fail "$name, $m: exit $rc, answer '$a', the uprobe's $up" \
				"$(cat "$T_TMP/q.out" "$T_TMP/q.err")"
		fi
	done
}

# one exec: the program's 1000 calls (getsid:
# a libc function no other test probes; libc:getppid, which other tests
# on this shared machine probe in every process, is done the same way)
case_ "libc:getsid through sh -c 'exec prog'" libc:getsid 1000 \
	sh -c "exec $W sid 1000"
# two levels: sh execs sh, which execs the program
case_ "libc:getsid through two execs" libc:getsid 1000 \
	sh -c "exec sh -c 'exec $W sid 1000'"
# the program execs a shell (which maps no inline_work: it runs on, its
# session idle) that execs the program again: both runs count
case_ "program function through prog -> sh -> prog" "$W:fay_inline_fn" 1000 \
	"$W" sid 500 /bin/sh -c "exec $W sid 500"
case_ "libc:getsid through prog -> sh -> prog" libc:getsid 1000 \
	"$W" sid 500 /bin/sh -c "exec $W sid 500"

# a static program (no runtime: nothing holds, nothing to arm) after a
# traced image: the traced calls count, the query ends with the command
for m in inline auto; do
	t0=$(date +%s%N)
	q $m libc:getsid "$W" sid 300 "$WS" sid 300
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$n" = 300 ] && [ "$(grep -c 'sid calls 300 bad 0' "$T_TMP/q.out")" = 2 ] &&
	   [ $ms -lt 8000 ]; then
		pass "$m: an exec into a static program ends cleanly in $ms ms (n = $n, its image untraced)"
	else
		fail "$m: exit $rc, answer '$a' in $ms ms" "$(cat "$T_TMP/q.out" "$T_TMP/q.err")"
	fi
done

# auto mode whose first image falls back to a uprobe (another query's
# uprobe on the function, in every process, leaves its int3 there):
# that session had told the image its next one holds, and it ended
# without following, so the next image must not hold (it would wait 30 s
# for a fay that is not coming); the uprobe counts both images
"$FAY" query --probe-mode=uprobe "from f in function(\"$W:fay_inline_fn\") select { n: count() }" \
	>"$T_TMP/bg.out" 2>"$T_TMP/bg.err" & bgq=$!
T_PIDS+=($bgq)
wait_for 60 grep -q attached "$T_TMP/bg.err"
t0=$(date +%s%N)
q auto "$W:fay_inline_fn" "$W" sid 500 /bin/sh -c "exec $W sid 500"
ms=$((($(date +%s%N) - t0) / 1000000))
kill -INT $bgq 2>/dev/null
wait $bgq
if [ "$n" = 1000 ] && [ $ms -lt 15000 ] && grep -q "^fay: pid [0-9]*: uprobe: .*int3" "$T_TMP/q.err"; then
	pass "auto, a uprobe fallback in the first image: the exec()ed images run at once ($ms ms), n = $n"
else
	fail "auto, a uprobe fallback in the first image: exit $rc, answer '$a' in $ms ms" \
		"$(cat "$T_TMP/q.out" "$T_TMP/q.err")"
fi

# a real program behind a wrapper: xz exec()ed by sh, output compared
D=$T_TMP/d
mkdir -p "$D"
head -c 300000 /dev/urandom | base64 >"$D/in.txt"
xz -9 -c "$D/in.txt" >"$D/ref.xz" || fail "xz runs unprobed"
for m in uprobe inline auto; do
	rm -f "$D/out.xz"
	q $m liblzma:lzma_code sh -c "exec xz -9 -c $D/in.txt >$D/out.xz"
	[ $m = uprobe ] && up=$n
	if [ -z "$n" ] || [ "$n" -le 0 ] || [ "$n" != "$up" ]; then
		fail "xz behind sh -c exec, $m: exit $rc, answer '$a', the uprobe's $up" \
			"$(cat "$T_TMP/q.err")"
	elif ! cmp -s "$D/out.xz" "$D/ref.xz"; then
		fail "xz behind sh -c exec, $m: the output differs from the unprobed run's"
	else
		pass "xz behind sh -c exec, $m: output identical, lzma_code n = $n$([ $m = uprobe ] || echo " = the uprobe's")"
	fi
done
# fay gone while an exec()ed image holds for it: fay stopped before the
# exec (so it cannot connect), the new image held, then fay killed: the
# image runs on at once, not after the hold's 30 s (the mark names the
# fay it waits for, and the hold looks at it every 250 ms)
"$FAY" run --json --probe-mode=inline --query 'from f in function("libc:getsid") select { n: count() }' \
	-- sh -c "sleep 2; exec $W sid 300" >"$T_TMP/k.out" 2>"$T_TMP/k.err" & kf=$!
T_PIDS+=($kf)
wait_for 30 grep -q attached "$T_TMP/k.err"
kc=$(pgrep -P $kf | head -1)
kill -STOP $kf
wait_for 30 test "$(readlink /proc/$kc/exe)" = "$W"
sleep 1		# held: fay cannot connect
t0=$(date +%s%N)
kill -KILL $kf
kill -CONT $kf 2>/dev/null
wait_for 40 grep -q "sid calls 300 bad 0" "$T_TMP/k.out"
ms=$((($(date +%s%N) - t0) / 1000000))
ok "fay killed while the exec()ed image holds for it: the program runs on at once ($ms ms, under 5 s)" \
	test $ms -lt 5000 -a "$(grep -c 'sid calls 300 bad 0' "$T_TMP/k.out")" = 1
# the runtime's marks that a fay follows the next image (PID.next beside
# its socket) are gone once each fay run ended (none of this test's is
# left: a process that exited leaves its own, fay removes it)
left=$(ls /run/fay/inline/ 2>/dev/null | grep '\.next$' | tr '\n' ' ')
ok "no INL_NEXT mark left behind in /run/fay/inline ($left)" test -z "$left"
done_testing
