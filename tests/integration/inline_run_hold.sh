#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay run holds the program until every probe is armed, whatever mode
# the site ended in (issue 19 item 6): in auto mode a site the patcher
# refuses falls back to a uprobe, and the program's main() must still
# wait for it.  Before, the runtime's session was closed on the refusal,
# which let main() run at once: a short program gave "error: no process
# N" or a count short of its calls.  Here a program making 3 calls of a
# refused site and exiting at once, 6 times: the exact count each time;
# then the same with --probe-mode=uprobe, which arms no inline session;
# then fay SIGKILLed 0-20 ms after it started the program, before or
# while the runtime's constructor holds main(): the program must run on
# at once, not wait out the hold's 30 s (it did when fay died before the
# constructor ran: the constructor took its new parent for fay).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"

Q="from f in function(\"$W:fay_inline_branchy\") select { n: count(), s: sum(f.arg(0)) }"
for i in 1 2 3 4 5 6; do
	timeout 60 "$FAY" run --json --probe-mode=auto --query "$Q" -- "$W" branchy 3 \
		>"$T_TMP/out" 2>"$T_TMP/err"
	rc=$?
	a=$(tail -1 "$T_TMP/out")
	if [ $rc -eq 0 ] && [ "$a" = '{"n":3,"s":3}' ]; then
		pass "run $i: every call counted ($a)"
	else
		fail "run $i: exit $rc, answer '$a' (want {\"n\":3,\"s\":3})" "$(cat "$T_TMP/err")"
	fi
done
grep -q "uprobe: .*fay_inline_branchy" "$T_TMP/err" &&
	pass "the site fell back to a uprobe (the case this test is about)" ||
	diag "the site ran inline: this test then checks the hold of an inline site only"

# --probe-mode=uprobe: no inline session ever arms, so the preloaded
# runtime must not hold main() (it used to, until its 30 s limit: every
# fay run --probe-mode=uprobe started its program 30 s late); fay holds it
# itself until the uprobe is attached.  Exact count, and no 30 s wait.
for i in 1 2 3; do
	t0=$(date +%s%N)
	timeout 60 "$FAY" run --json --probe-mode=uprobe --query "$Q" -- "$W" branchy 3 \
		>"$T_TMP/out" 2>"$T_TMP/err"
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	a=$(tail -1 "$T_TMP/out")
	if [ $rc -eq 0 ] && [ "$a" = '{"n":3,"s":3}' ] && [ $ms -lt 20000 ]; then
		pass "uprobe run $i: every call counted ($a), in $ms ms"
	else
		fail "uprobe run $i: exit $rc, answer '$a' in $ms ms (want {\"n\":3,\"s\":3}, well under the runtime's 30 s hold)" \
			"$(cat "$T_TMP/err")"
	fi
done

# fay killed early: its session (setsid) is left with the program alone,
# which must end within 5 s of the kill.
for d in 0 0.001 0.002 0.003 0.005 0.008 0.013 0.020; do
	setsid "$FAY" run --json --probe-mode=inline --query "$Q" -- "$W" branchy 3 \
		>"$T_TMP/out" 2>"$T_TMP/err" &
	fp=$!
	sleep "$d"
	kill -KILL $fp 2>/dev/null
	wait $fp 2>/dev/null
	t0=$(date +%s%N)
	while pgrep -s $fp >/dev/null && [ $((($(date +%s%N) - t0) / 1000000)) -lt 10000 ]; do
		sleep 0.05
	done
	ms=$((($(date +%s%N) - t0) / 1000000))
	left=$(pgrep -s $fp | tr '\n' ' ')
	pkill -KILL -s $fp 2>/dev/null
	if [ -z "$left" ] && [ $ms -lt 5000 ]; then
		pass "fay killed ${d} s after it started: the program ended $ms ms after the kill"
	else
		fail "fay killed ${d} s after it started: the program still ran $ms ms after the kill (pids $left)"
	fi
done
done_testing
