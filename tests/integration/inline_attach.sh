#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes in processes fay did not start: `fay query
# --probe-mode=inline -p PID` loads libfay-probe.so into the running
# process with ptrace (one thread made to call its own dlopen at a safe
# point, then put back), patches, and restores the function's bytes at
# the end; the process runs on and its own results stay right.  Exact
# counts against uprobe mode on a process waiting in nanosleep (the
# safe-system-call path), 8 busy threads (the safe-instruction path),
# a second query reusing the loaded runtime, and a program without glibc
# refused with its reason (auto mode: inline_auto.sh).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"

# count MODE K: K calls by a process started without fay, waiting in
# nanosleep until the query attached; prints the query's count
count() {
	local go=$T_TMP/go.$RANDOM ready=$T_TMP/ready.$RANDOM n
	QW_READY=$ready QW_WAIT=$go "$W" calls "$2" >"$T_TMP/w.out" 2>&1 & local wpid=$!
	in_main "$ready"
	# emptied here: the query's own redirection may come after the poll
	# below has read the previous query's "attached"
	: >"$T_TMP/c.err"
	timeout 30 "$FAY" query --json --probe-mode="$1" -p $wpid \
		"from f in process($wpid).function(\"fay_inline_fn\") select { n: count(), s: sum(f.arg(0)) }" \
		>"$T_TMP/c.out" 2>"$T_TMP/c.err" & local q=$!
	# until it attached, or failed: the workload is let go either way
	# (a query that failed left it waiting for ever)
	attached_or_gone() { grep -q 'attached' "$T_TMP/c.err" || ! kill -0 $q 2>/dev/null; }
	wait_for 60 attached_or_gone
	touch "$go"
	wait $wpid
	echo $? >"$T_TMP/w.rc"
	kill -INT $q 2>/dev/null
	wait $q
	cat "$T_TMP/c.out"
}

up=$(count uprobe 1000)
inl=$(count inline 1000)
ok "1000 calls: inline (runtime loaded with ptrace into a process in nanosleep) = uprobe = the truth" \
	test "$inl" = "$up" -a "$inl" = '{"n":1000,"s":499500}'
grep -q 'inline, runtime loaded with ptrace' "$T_TMP/c.err" &&
	pass "the note says the runtime was loaded with ptrace" || fail "note" "$(cat "$T_TMP/c.err")"
ok "the process, put back after the load, finished its own work right (exit 0)" test "$(cat "$T_TMP/w.rc")" -eq 0

# ---- 8 busy threads -----------------------------------------------------------------
busy 8
Q="from f in process($wpid).function(\"fay_inline_fn\") select { n: count(), b: sum(f.arg(1)) } for 300ms"
t0=$(date +%s%N)
timeout 30 "$FAY" query --json --probe-mode=inline -p $wpid "$Q" >"$T_TMP/o1" 2>"$T_TMP/e1"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
python3 -c "
import json, sys
r = json.loads(open('$T_TMP/o1').read())
sys.exit(0 if r['n'] > 0 and r['b'] == 7 * r['n'] else 1)" &&
	pass "8 busy threads: loaded, attached, counted (sum(arg1) = 7 x count), detached in $ms ms for a 300 ms query" ||
	fail "8 threads (rc=$rc)" "$(cat "$T_TMP/o1" "$T_TMP/e1")"
ok "its function's bytes are the original ones after the query" test "$(first_bytes $wpid)" = "$orig"
grep -q 'libfay-probe.so' /proc/$wpid/maps && [ -S /run/fay/inline/$wpid.sock ] &&
	pass "the runtime stays loaded, idle (its trampolines may still be returned into)" ||
	fail "runtime after the query" "$(grep fay /proc/$wpid/maps)"
# leftovers of killed processes in the control directory: a gone pid's
# socket and mark (a minute old) go at the end of an inline session; a
# live pid's and one made this instant stay
true & gone=$!
wait $gone
D=/run/fay/inline
touch -d '1 minute ago' "$D/$gone.sock" "$D/$gone.next" "$D/$$.sock"
sleep 0 & gone2=$!
wait $gone2
touch "$D/$gone2.sock"
timeout 30 "$FAY" query --json --probe-mode=inline -p $wpid "$Q" >"$T_TMP/o2" 2>"$T_TMP/e2"
[ ! -e "$D/$gone.sock" ] && [ ! -e "$D/$gone.next" ] &&
	pass "a gone process's socket and mark are removed by the next session" ||
	fail "stale socket removed" "$(ls -l "$D" | head)"
[ -e "$D/$$.sock" ] && [ -e "$D/$gone2.sock" ] &&
	pass "a live pid's socket and a fresh one stay" ||
	fail "live/fresh socket kept" "$(ls -l "$D/$$.sock" "$D/$gone2.sock" 2>&1)"
rm -f "$D/$$.sock" "$D/$gone2.sock"
grep -q "pid $wpid: inline (" "$T_TMP/e2" && ! grep -q ptrace "$T_TMP/e2" &&
	pass "a second query uses the loaded runtime (no second load)" || fail "second query" "$(cat "$T_TMP/e2")"
[ "$(grep -c 'r-xp.*libfay-probe.so' /proc/$wpid/maps)" = 1 ] &&
	pass "the runtime is mapped once" || fail "mapped" "$(grep fay /proc/$wpid/maps)"
timeout 30 "$FAY" query --json -p $wpid "$Q" >/dev/null 2>"$T_TMP/e3"
kill -STOP $wpid
ok "its function's bytes are the original ones after three queries" test "$(first_bytes $wpid)" = "$orig"
kill -CONT $wpid
touch "$stop"
wait $wpid
wrc=$?
ok "the 8 threads' own results are all right (exit 0: $(cat "$T_TMP/work.out"))" test $wrc -eq 0

# ---- a program without glibc ------------------------------------------------------------
WS=$BUILD/tests/bin/inline_work_static
rm -f "$stop"
QW_READY=$T_TMP/ready.static "$WS" threads 1 "$stop" >/dev/null & spid=$!
T_PIDS+=($spid)
in_main "$T_TMP/ready.static"
timeout 30 "$FAY" query --probe-mode=inline -p $spid \
	"from f in process($spid).function(\"fay_inline_fn\") select { n: count() } for 100ms" \
	>/dev/null 2>"$T_TMP/e5"
grep -q "error: --probe-mode=inline: pid $spid: cannot load the fay runtime: static binary (no glibc mapped in pid $spid" "$T_TMP/e5" &&
	kill -0 $spid && pass "a static program: refused with the reason, left running" ||
	fail "static program" "$(cat "$T_TMP/e5")"
touch "$stop"
wait $spid
done_testing
