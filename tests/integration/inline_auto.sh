#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Auto mode (the default) on processes started normally, not under fay:
# it loads fay's runtime with ptrace and runs inline when it may, else
# it falls back to a uprobe with one line saying exactly why.  Exact
# counts in auto and uprobe mode on the same workload; the function's
# bytes restored after the query and the process's own results right;
# the fallbacks: a static binary, a site the patcher refuses, a site
# whose ARM fails (no room for a trampoline near it), another
# tracer (strace), --no-inject, Yama's ptrace_scope=3
# (restored by a trap; skipped where the kernel has no Yama) and a
# non-root requester without CAP_SYS_PTRACE on root's process.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"

# (FN: the probed function, WMODE: the workload's mode calling it)
Q() { echo "from f in process($1).function(\"${FN:-fay_inline_fn}\") select { n: count(), s: sum(f.arg(0)) }"; }

# count EXE MODE K [FAY ARGS...]: K calls by EXE started without fay,
# waiting in nanosleep until the query attached; prints the query's
# answer, its notes in $T_TMP/c.err, the workload's exit status in
# $T_TMP/w.rc, its pid in $T_TMP/w.pid, the number of its mappings of
# libfay-probe.so once the query attached in $T_TMP/w.lib
count() {
	local exe=$1 mode=$2 k=$3 go=$T_TMP/go.$RANDOM ready=$T_TMP/ready.$RANDOM
	shift 3
	QW_READY=$ready QW_WAIT=$go "$exe" "${WMODE:-calls}" "$k" >"$T_TMP/w.out" 2>&1 & local wpid=$!
	echo $wpid >"$T_TMP/w.pid"
	in_main "$ready"
	if [ -n "${TRACER:-}" ]; then	# strace holds it (it ends with the process)
		strace -o /dev/null -p $wpid 2>/dev/null & echo $! >"$T_TMP/t.pid"
		traced() { ! grep -q '^TracerPid:[[:space:]]*0$' /proc/$wpid/status; }
		wait_for 30 traced
	fi
	: >"$T_TMP/c.err"
	timeout 60 "$FAY" query --json --probe-mode="$mode" "$@" -p $wpid "$(Q $wpid)" \
		>"$T_TMP/c.out" 2>"$T_TMP/c.err" & local q=$!
	# until it attached, or ended (a refusal)
	attached_or_gone() { grep -q 'attached' "$T_TMP/c.err" || ! kill -0 $q 2>/dev/null; }
	wait_for 60 attached_or_gone
	grep -c libfay-probe.so /proc/$wpid/maps >"$T_TMP/w.lib"
	touch "$go"
	wait $wpid
	echo $? >"$T_TMP/w.rc"
	wait $q
	cat "$T_TMP/c.out"
}
TRUTH='{"n":1000,"s":499500}'

# ---- auto loads the runtime and runs inline ---------------------------------------
up=$(count "$W" uprobe 1000)
ok "uprobe mode: the truth ($up)" test "$up" = "$TRUTH"
au=$(count "$W" auto 1000)
wpid=$(cat "$T_TMP/w.pid")
ok "auto mode on a process fay did not start: the same answer ($au)" test "$au" = "$up"
grep -q "^fay: pid $wpid: inline, runtime loaded with ptrace in [0-9.]* ms (fay_inline_fn" "$T_TMP/c.err" &&
	pass "auto loaded the runtime with ptrace and ran inline, and said so" ||
	fail "auto's note" "$(cat "$T_TMP/c.err")"
ok "the process finished its own work right (exit 0)" test "$(cat "$T_TMP/w.rc")" -eq 0

# bytes restored, the process runs on (2 busy threads)
busy 2
timeout 60 "$FAY" query --json -p $wpid \
	"from f in process($wpid).function(\"fay_inline_fn\") select { n: count(), b: sum(f.arg(1)) } for 300ms" \
	>"$T_TMP/o1" 2>"$T_TMP/e1"
grep -q "^fay: pid $wpid: inline, runtime loaded with ptrace" "$T_TMP/e1" &&
	python3 -c "
import json, sys
r = json.loads(open('$T_TMP/o1').read())
sys.exit(0 if r['n'] > 0 and r['b'] == 7 * r['n'] else 1)" &&
	pass "2 busy threads: auto went inline and counted (sum(arg1) = 7 x count: $(cat "$T_TMP/o1"))" ||
	fail "2 busy threads" "$(cat "$T_TMP/o1" "$T_TMP/e1")"
kill -STOP $wpid
ok "the function's bytes are the original ones after the query" test "$(first_bytes $wpid)" = "$orig"
kill -CONT $wpid
touch "$stop"
wait $wpid
ok "the threads' own results are all right (exit 0: $(cat "$T_TMP/work.out"))" test $? -eq 0

# ---- fallbacks ----------------------------------------------------------------------
# fellback WHAT PATTERN ANSWER: a uprobe, the exact count, the note
fellback() {
	local wpid=$(cat "$T_TMP/w.pid")
	[ "$3" = "$TRUTH" ] && grep -q "^fay: pid $wpid: uprobe: $2" "$T_TMP/c.err" &&
		grep -q "probe attached: uprobe" "$T_TMP/c.err" &&
		pass "$1: a uprobe, the exact count, and the note says why ($(head -1 "$T_TMP/c.err"))" ||
		fail "$1" "$3" "$(cat "$T_TMP/c.err")"
}
a=$(count "$BUILD/tests/bin/inline_work_static" auto 1000)
fellback "a static binary" "cannot load the fay runtime: static binary (no glibc mapped" "$a"

a=$(count "$W" auto 1000 --no-inject)
fellback "--no-inject" "the fay runtime is not loaded and --no-inject forbids loading it" "$a"
ok "--no-inject: nothing was loaded into the process" test "$(cat "$T_TMP/w.lib")" = 0

a=$(FN=fay_inline_branchy WMODE=branchy count "$W" auto 1000)
fellback "a site the patcher refuses (a jump back into its first 5 bytes)" \
	"site refused: fay_inline_branchy: the instruction at +[0-9]* (jne .*) jumps into the patched bytes (+3) (nothing loaded)" "$a"
ok "a refused site: the refusal came from fay, nothing was loaded into the process" test "$(cat "$T_TMP/w.lib")" = 0
a=$(FN=fay_inline_branchy WMODE=branchy count "$W" inline 1000)
grep -q "error: --probe-mode=inline: pid $(cat "$T_TMP/w.pid"): site refused: fay_inline_branchy: " "$T_TMP/c.err" &&
	pass "inline mode: the same refusal is an error" || fail "inline mode, refused site" "$(cat "$T_TMP/c.err")"

# ARM itself fails after the site was accepted: no room for a trampoline
# near the function (the workload fills the address space around it)
a=$(QW_NOROOM=1 count "$W" auto 1000)
fellback "ARM fails (no room for a trampoline near the function)" \
	"the fay runtime could not arm the inline probe: fay_inline_fn: no room for a trampoline within 2 GiB of the function" "$a"
ok "ARM failed: the process finished its own work right (exit 0)" test "$(cat "$T_TMP/w.rc")" -eq 0
a=$(QW_NOROOM=1 count "$W" inline 1000)
grep -q "error: pid $(cat "$T_TMP/w.pid"): the fay runtime refuses: fay_inline_fn: no room for a trampoline" "$T_TMP/c.err" &&
	pass "inline mode: the same ARM failure is an error" || fail "inline mode, ARM fails" "$(cat "$T_TMP/c.err")"

if command -v strace >/dev/null; then
	a=$(TRACER=1 count "$W" auto 1000)
	fellback "a process another tracer holds (strace)" \
		"cannot load the fay runtime: traced by pid $(cat "$T_TMP/t.pid") (a debugger?)" "$a"
else
	pass "another tracer # SKIP no strace"
fi

YAMA=/proc/sys/kernel/yama/ptrace_scope
if [ -w "$YAMA" ]; then
	old_scope=$(cat $YAMA)
	trap 'echo "$old_scope" >'"$YAMA"' 2>/dev/null; t_cleanup' EXIT
	# 3 cannot be lowered again without a reboot: only when it is 3 already
	if [ "$old_scope" = 3 ]; then
		a=$(count "$W" auto 1000)
		fellback "ptrace_scope=3" "cannot load the fay runtime: ptrace_scope=3" "$a"
	else
		echo 2 >$YAMA
		a=$(count "$W" auto 1000)
		echo "$old_scope" >$YAMA
		# root has CAP_SYS_PTRACE: 2 allows it
		grep -q "inline, runtime loaded with ptrace" "$T_TMP/c.err" && [ "$a" = "$TRUTH" ] &&
			pass "ptrace_scope=2 with CAP_SYS_PTRACE: inline" ||
			fail "ptrace_scope=2" "$a" "$(cat "$T_TMP/c.err")"
	fi
else
	pass "ptrace_scope # SKIP this kernel has no Yama ($YAMA)"
fi

# a non-root requester (nobody, no CAP_SYS_PTRACE, --allow-other-users)
# on root's process
U=nobody
if command -v setpriv >/dev/null && id $U >/dev/null 2>&1; then
	. "$(dirname "$0")/unpriv_lib.bash"
	D=$(mktemp -d /tmp/fay-ia.XXXXXX)
	chmod 755 "$D"
	cp "$FAY" "$BUILD/libfay-probe.so" "$D/"
	cp "$W" "$D/wroot"
	chmod 755 "$D"/*
	go=$D/go
	QW_READY=$D/ready QW_WAIT=$go "$D/wroot" calls 1000 >"$T_TMP/w.out" 2>&1 & wpid=$!
	T_PIDS+=($wpid)
	echo $wpid >"$T_TMP/w.pid"
	in_main "$D/ready"
	: >"$T_TMP/c.err"
	# the capabilities a uprobe needs on this kernel (query_own_uid.sh),
	# not sys_ptrace (without it /proc/PID/exe is closed: the binary by path)
	: >"$T_TMP/c.err"	# not by the job's redirection: the wait may read it first
	as +bpf,+perfmon,+dac_read_search,+sys_admin timeout 60 "$D/fay" query --json \
		--allow-other-users -p $wpid \
		"from f in function(\"$D/wroot:fay_inline_fn\") select { n: count(), s: sum(f.arg(0)) }" \
		>"$T_TMP/c.out" 2>"$T_TMP/c.err" &
	q=$!
	wait_for 60 grep -q 'attached' "$T_TMP/c.err"
	touch "$go"
	wait $wpid
	wait $q
	fellback "nobody without CAP_SYS_PTRACE on root's process" \
		"cannot load the fay runtime: not permitted: pid $wpid runs as uid 0, fay as uid $(id -u $U) without CAP_SYS_PTRACE" \
		"$(cat "$T_TMP/c.out")"
	rm -rf "$D"
else
	pass "non-root requester # SKIP needs setpriv and the user $U"
fi
"$FAY" query --help >"$T_TMP/h1"
"$FAY" agent --help >"$T_TMP/h2"
ok "fay query --help documents --no-inject" grep -q -- '--no-inject' "$T_TMP/h1"
ok "fay agent --help documents --no-inject" grep -q -- '--no-inject' "$T_TMP/h2"
"$FAY" query --cluster http://127.0.0.1:1 --no-inject 'from f in function("a:b") select count()' 2>"$T_TMP/e"
RC=$?
[ $RC -eq 2 ] && grep -q 'fay agent --no-inject' "$T_TMP/e" &&
	pass "--cluster with --no-inject: a usage error pointing at fay agent --no-inject" ||
	fail "--cluster --no-inject (rc=$RC)" "$(cat "$T_TMP/e")"
done_testing
