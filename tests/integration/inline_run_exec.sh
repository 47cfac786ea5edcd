#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay run follows exec (issue 19 item 6): `fay run --query Q -- sh -c
# 'exec prog'` traces prog.  The shell's image does not map prog, so fay
# lets it run (INL_NEXT: its next image holds again) and arms the site in
# the image the process execs.  Before: inline mode failed ("not mapped
# executable") or the session died with the shell's image ("the fay
# runtime: Connection reset by peer").  Exact counts, 3 runs per mode.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"

Q="from f in function(\"$W:fay_inline_fn\") select { n: count(), s: sum(f.arg(0)) }"
for m in inline auto; do
	for i in 1 2 3; do
		timeout 60 "$FAY" run --json --probe-mode=$m --query "$Q" -- sh -c "exec $W calls 1000" \
			>"$T_TMP/out" 2>"$T_TMP/err"
		rc=$?
		a=$(tail -1 "$T_TMP/out")
		if [ $rc -eq 0 ] && [ "$a" = '{"n":1000,"s":499500}' ] &&
		   grep -q "^fay: pid [0-9]*: inline (fay_inline_fn" "$T_TMP/err"; then
			pass "$m, run $i: the program sh exec()ed traced inline, every call ($a)"
		else
			fail "$m, run $i: exit $rc, answer '$a'" "$(cat "$T_TMP/err")"
		fi
	done
done
# a wrapper that forks instead: its child is another process, not traced
timeout 60 "$FAY" run --json --probe-mode=inline --query "$Q" -- sh -c "$W calls 10; true" \
	>"$T_TMP/out" 2>"$T_TMP/err"
ok "a wrapper that forks and never execs: inline refuses with the reason" \
	grep -q "error: --probe-mode=inline: pid [0-9]*: .* is not mapped executable in it" "$T_TMP/err"
done_testing
