#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay query killed with SIGKILL while its inline probes are attached, and
# a new query on the same process at once (issue #19): the runtime serves
# one session at a time and refused a newcomer ("traced by another fay
# query") until the killed fay's socket hung up, which the kernel does
# only when it closes the dead process's files, after freeing its
# memory.  Now a newcomer that finds the session's fay exiting, a zombie
# or gone (SO_PEERCRED's pid, src/rt/control.c) ends that session and
# is served.  TAKEOVER_ROUNDS (default 10) rounds of: attach, kill -9,
# a new inline query at once (accepted, exit 0, sum(arg1) = 7 x count);
# then exact counts of a phase of K calls, the bytes restored, every
# result right.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"
. "$(dirname "$0")/query_lib.bash"

K=50000 N=${TAKEOVER_ROUNDS:-10}
D=$T_TMP/d
mkdir -p "$D"
"$FAY" run -- "$W" phases "$D" $K >"$T_TMP/work.out" 2>"$T_TMP/work.err" & wpid=$!
T_PIDS+=($wpid)
wait_for 60 test -S /run/fay/inline/$wpid.sock
orig=$(first_bytes $wpid)
Q="from f in process($wpid).function(\"fay_inline_fn\") select { n: count(), s: sum(f.arg(1)) }"
refused=0 bad=0
for i in $(seq $N); do
	: >"$T_TMP/k.err"
	"$FAY" query --json -p $wpid --probe-mode=inline "$Q" >/dev/null 2>"$T_TMP/k.err" & k=$!
	T_PIDS+=($k)
	attached_or_gone() { grep -q 'attached' "$T_TMP/k.err" || ! kill -0 $k 2>/dev/null; }
	wait_for 60 attached_or_gone
	grep -q attached "$T_TMP/k.err" || { bad=$((bad + 1)); diag "round $i: the first query: $(head -c 300 "$T_TMP/k.err")"; }
	kill -9 $k
	timeout -k 5 60 "$FAY" query -q --json -p $wpid --probe-mode=inline "$Q for 50ms" >"$T_TMP/out" 2>"$T_TMP/err"
	rc=$?
	wait $k 2>/dev/null
	if grep -q "traced by another fay query" "$T_TMP/err"; then
		refused=$((refused + 1))
	elif [ $rc -ne 0 ] || ! python3 -c "
import json, sys
r = json.loads(open('$T_TMP/out').read())
sys.exit(0 if r['s'] == 7 * r['n'] else 1)"; then
		bad=$((bad + 1))
		diag "round $i: rc $rc $(cat "$T_TMP/out") $(head -c 300 "$T_TMP/err")"
	fi
done
ok "$N rounds of kill -9 of an attached inline query and a new one at once: none refused ($refused refused)" test $refused -eq 0
ok "... each new query's answer right (sum(arg1) = 7 x count; $bad bad)" test $bad -eq 0
touch "$D/stop1"
wait_for 60 test -e "$D/ready2"
# the query ends at SIGINT, or is killed after 60 s (a detach that hangs)
phase_query "$D/go2" "$D/done2" --json -p $wpid --probe-mode=inline "$Q"
same "$T_TMP/q.out" "{\"n\":$K,\"s\":$((7 * K))}" "afterwards a query counts exactly the $K calls of phase 2"
ok "the function's bytes are the original ones after the last detach" test "$(first_bytes $wpid)" = "$orig"
touch "$D/end"
wait $wpid; wrc=$?
ok "the process ends normally, every result right ($(tr '\n' ' ' <"$T_TMP/work.out"))" test $wrc -eq 0
done_testing
