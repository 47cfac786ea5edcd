#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The inline-probe runtime's slow paths keep the whole vector state: a
# function of eight __m256d arguments returning an __m256d (ymm0-7 in,
# ymm0 out; inline_vec), called first on fresh threads (each thread's
# first call is its first probe: the slow path that takes a slot and
# calls libc), under fay run (LD_PRELOAD) and under auto mode (the
# runtime injected with ptrace into a process started without fay);
# every lane of every result exact and every call counted.  Queries:
# count() (entry only, the slow path on each thread's first call) and a
# group by comm with the duration (a helper out of line: the slow path
# on every entry and exit, where ymm0 holds the result).  Each also with
# GLIBC_TUNABLES masking AVX-512, so glibc picks the string functions an
# AVX2-only CPU runs (ending in vzeroupper, which zeroes the upper halves
# of ymm0-15), and once more with the runtime's XSAVE path
# (FAY_RT_VECSAVE=xsave) instead of its XSAVEC.  The same with __m512d
# (zmm0-7) where the CPU has AVX-512F.  Skipped when the CPU has no AVX2.
#
# The runtime that saved xmm0-15 only (before vec_call.c) fails the 12
# comm checks on this VM (Xeon, AVX-512, glibc 2.36): every call wrong
# with glibc's AVX2 functions, the process's first call with its default
# (EVEX) ones; its count() checks pass (a thread's first probe reaches
# no AVX code in this glibc).  Run against another runtime with
# FAY_PROBE_LIB=path/libfay-probe.so.
. "$(dirname "$0")/../lib/lib.sh"
need_root
V=$BUILD/tests/bin/inline_vec
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$V" ] || skip_all "inline_vec is not built (make)"
grep -qw avx2 /proc/cpuinfo || skip_all "this CPU has no AVX2 (/proc/cpuinfo)"
NT=8 K=200
# glibc as on a CPU without AVX-512 (its AVX2 string functions)
AVX2_ONLY=glibc.cpu.hwcaps=-AVX512VL,-AVX512BW,-AVX512F
COUNT="select { n: count() }"
SLOW="group f by { c: f.comm } into g select { c: g.c, n: g.count(), t: g.min(f.duration) }"

# check WHAT: the workload's output ($T_TMP/w.out, status in $T_TMP/w.rc)
# and the query's ($T_TMP/q.out, stderr $T_TMP/q.err) are right: every
# result exact, every call counted
check() {
	local n=$((NT * K)) wo qo
	wo=$(cat "$T_TMP/w.out") qo=$(grep '^{' "$T_TMP/q.out")
	if [ "$(cat "$T_TMP/w.rc")" = 0 ] && [ "$wo" = "calls $n bad 0 first_bad 0" ] &&
		python3 -c "
import json, sys
r = json.loads(sys.argv[1])
sys.exit(0 if r['n'] == $n and r.get('c', 'inline_vec') == 'inline_vec' else 1)" "$qo" 2>/dev/null; then
		pass "$1 ($wo; $qo)"
	else
		fail "$1 (rc=$(cat "$T_TMP/w.rc"))" "workload: $wo" "query: $qo" \
			"$(head -c 600 "$T_TMP/q.err")"
	fi
}

# preload FN Q: fay run --query Q on inline_vec MODE (fay_inline_MODE)
preload() {
	local m=$1 q=$2
	: >"$T_TMP/q.out"
	timeout 120 "$FAY" run -q --json \
		--query "from f in function(\"$V:fay_inline_$m\") $q" -- "$V" $m $NT $K \
		>"$T_TMP/q.out" 2>"$T_TMP/q.err"
	echo $? >"$T_TMP/w.rc"
	grep '^calls' "$T_TMP/q.out" >"$T_TMP/w.out"
}

# auto MODE Q: inline_vec started without fay, waiting until the query
# attached (auto mode: the runtime loaded with ptrace)
auto() {
	local m=$1 q=$2 go=$T_TMP/go.$RANDOM ready=$T_TMP/ready.$RANDOM wpid qpid
	: >"$T_TMP/w.out"
	: >"$T_TMP/q.err"
	QW_READY=$ready QW_WAIT=$go "$V" $m $NT $K >"$T_TMP/w.out" 2>&1 & wpid=$!
	T_PIDS+=($wpid)
	# in main (glibc mapped and started): fay may inject
	wait_for 60 test -e "$ready"
	timeout 120 "$FAY" query --json --probe-mode=auto -p $wpid \
		"from f in process($wpid).function(\"fay_inline_$m\") $q" \
		>"$T_TMP/q.out" 2>"$T_TMP/q.err" & qpid=$!
	attached_or_gone() { grep -q 'attached' "$T_TMP/q.err" || ! kill -0 $qpid 2>/dev/null; }
	wait_for 60 attached_or_gone
	touch "$go"
	wait $wpid
	echo $? >"$T_TMP/w.rc"
	wait $qpid
	grep -q "^fay: pid $wpid: inline, runtime loaded with ptrace" "$T_TMP/q.err" ||
		echo "not inline: $(cat "$T_TMP/q.err")" >>"$T_TMP/w.out"
}

modes=(ymm)
if grep -qw avx512f /proc/cpuinfo; then
	modes+=(zmm)
fi
for m in "${modes[@]}"; do
	for glibc in default avx2 avx2-xsave; do
		unset GLIBC_TUNABLES FAY_RT_VECSAVE
		[ $glibc != default ] && export GLIBC_TUNABLES=$AVX2_ONLY
		# the runtime's XSAVE (standard format) instead of XSAVEC
		[ $glibc = avx2-xsave ] && export FAY_RT_VECSAVE=xsave
		what="$m, glibc $glibc"
		if [ $glibc != avx2-xsave ]; then
			preload $m "$COUNT"
			check "fay run, $what, count(): each of $NT threads' first call through the slow path, every lane exact"
			auto $m "$COUNT"
			check "auto mode (injected), $what, count(): every lane exact"
		fi
		preload $m "$SLOW"
		check "fay run, $what, group by comm + duration: the slow path on every entry and exit, every lane exact"
		auto $m "$SLOW"
		check "auto mode (injected), $what, group by comm + duration: every lane exact"
	done
	unset GLIBC_TUNABLES FAY_RT_VECSAVE
done
[ "${modes[*]}" = ymm ] && pass "__m512d arguments # SKIP this CPU has no AVX-512F"
done_testing
