#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# IFUNC symbols (issue 19 item 4): function("libc:strlen") probes the
# implementation this CPU selects (resolved in fay's own process), in
# every mode: a program calling strlen, memcpy, memset and strcmp 500
# times each after the query attached (-p PID: uprobe, inline, auto; and
# a uprobe on every process filtered by pid) and under fay run (inline,
# auto) counts exactly 500.  A site inline mode must refuse (memcpy:
# another entry point, __mempcpy_*, jumps into the bytes a patch would
# replace) is refused with the reason, and auto counts it with a uprobe.
# A uprobe is refused where the kernel's would change the program's
# results (memset: its first instruction is EVEX-encoded, AVX-512).
# The program's output and exit status are those of an unprobed run.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"
IW=$BUILD/tests/bin/ifunc_work
[ -x "$IW" ] || skip_all "ifunc_work is not built (make)"
N=500
want=$("$IW" $N) || { fail "ifunc_work runs unprobed"; done_testing; exit 1; }
answer() { grep -o '"n":[0-9]*' "$1" | tail -1 | cut -d: -f2; }

# check WHAT FN MODE RC OUT ERR: the count is N, the program's output right
check() {
	local what=$1 fn=$2 m=$3 rc=$4 out=$5 err=$6 n
	n=$(answer "$out")
	if { [ "$m" = uprobe ] || [ "$m" = every ]; } && [ "$fn" = memset ]; then
		# its implementation starts with an EVEX instruction, which the
		# kernel's uprobe executes wrongly (the program's memset wrote
		# other bytes): refused, the program unharmed
		grep -q "error: .*libc.so.6:memset.*begins with an EVEX (AVX-512) instruction" "$err" &&
		[ "$(cat "$T_TMP/prog.out")" = "$want" ] &&
			pass "$what, $m: memset (an EVEX first instruction) refused with the reason, the program's output right" ||
			fail "$what, $m memset: not refused as expected" "$(cat "$out" "$err")"
		return
	fi
	if [ "$m" = inline ] && [ "$fn" = memcpy ]; then
		grep -q "error: --probe-mode=inline: .*memcpy: a jump at file offset 0x[0-9a-f]* of .*libc.so.6 targets its first [0-9]* bytes" "$err" &&
			pass "$what, inline: memcpy refused with the reason (another entry point jumps into its first bytes)" ||
			fail "$what, inline memcpy: not refused as expected" "$(cat "$out" "$err")"
		return
	fi
	if [ "$rc" -ne 0 ] || [ "$(cat "$T_TMP/prog.out")" != "$want" ]; then
		fail "$what, $fn, $m: the program's exit $rc, output '$(cat "$T_TMP/prog.out")' (unprobed: '$want')" "$(cat "$err")"
	elif [ "$n" != $N ]; then
		fail "$what, $fn, $m: count '$n', the truth $N" "$(cat "$out" "$err")"
	elif [ "$m" != uprobe ] && [ "$m" != every ] && [ "$fn" != memcpy ] &&
	     ! grep -q "inline.*($fn: " "$err"; then
		fail "$what, $fn, $m: not inline" "$(cat "$err")"
	else
		pass "$what, $fn, $m: $n calls of $N, output and exit status right"
	fi
}

for fn in strlen memcpy memset strcmp; do
	# -p PID (and every process, by pid): attached before the calls
	for m in uprobe every inline auto; do
		go=$T_TMP/go.$fn.$m
		"$IW" $N "$go" >"$T_TMP/prog.out" 2>&1 & wpid=$!
		if [ $m = every ]; then
			go_query "$go" --json --probe-mode=uprobe \
				"from f in function(\"libc:$fn\") where f.pid == $wpid select { n: count() }"
		else
			go_query "$go" --json --probe-mode=$m -p $wpid \
				"from f in process($wpid).function(\"libc:$fn\") select { n: count() }"
		fi
		check "-p PID" $fn $m $WRC "$T_TMP/q.out" "$T_TMP/q.err"
	done
	# fay run: held until armed
	for m in inline auto; do
		timeout 60 nice -n 10 "$FAY" run --json --probe-mode=$m \
			--query "from f in function(\"libc:$fn\") select { n: count() }" -- "$IW" $N \
			>"$T_TMP/r.out" 2>"$T_TMP/r.err"
		rc=$?
		head -1 "$T_TMP/r.out" >"$T_TMP/prog.out"
		check "fay run" $fn $m $rc "$T_TMP/r.out" "$T_TMP/r.err"
	done
done
done_testing
