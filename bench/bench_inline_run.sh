#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes through the whole user path (issue #8): the added CPU
# time per call of a function() query run by `fay run --query` (inline:
# libfay-probe.so preloaded, the programs sent over the control socket)
# vs `fay query --probe-mode=uprobe -c` (a kernel uprobe) vs bpftrace
# (uprobe; uprobe + uretprobe) vs `uftrace record -P`, same run, medians.
# The workload is inline_work's `lat` loop over fay_inline_lat (8 bytes,
# "lea rax, [rdi + 1]; add rax, rsi; ret": the kernel single-steps its
# first instruction; uftrace can patch it).  Each fay round checks that
# the query counted every call.
#
#   make bench && sudo bench/bench_inline_run.sh [ROUNDS]
#
# Added ns per call = (the process's CPU time in the loop, QW_TIME's
# cpu_ns, with the probe - without) / calls: the probes run in the traced
# process (inline: the whole cost; uprobe: the trap is charged to the
# thread); uftrace's writer and fay's and bpftrace's readers are other
# processes.  K calls for inline and uftrace, KU for the kernel's probes.
#
# The whole cost (fay run inline and uftrace alike): the CPU time of every
# process and thread of the command (wait4()'s rusage of the tree: the
# traced program, fay and its reader, uftrace and its writer threads),
# run with K and with 2K calls; (tree(2K) - tree(K)) / K, minus the
# same of the program alone, is the added CPU per call of everything
# involved, the fixed costs (startup, planning, symbol loading, the
# final write) cancelled.  The loop's wall time per call is printed
# too; on a loaded machine it counts other processes' time slices.
# The floor: two TSC reads (inline_work tsc: rdtsc; rdtsc), what timing
# a call costs at the least.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
B=${FAY_BUILD:-$TOP/build}
FAY=$B/fay W=$B/tests/bin/inline_work F=fay_inline_lat
R=${1:-5} K=${K:-2000000} KU=${KU:-20000}
T=$(mktemp -d /tmp/fay-bench-inline-run.XXXXXX)
trap 'rm -rf "$T"' EXIT
[ -x "$FAY" ] && [ -x "$W" ] || { echo "build first: make bench" >&2; exit 1; }
export QW_TIME=1

cpu() { sed -n 's/.*cpu_ns \([0-9]*\).*/\1/p' "$1"; }
wall() { sed -n 's/.*loop_ns \([0-9]*\).*/\1/p' "$1"; }
# tree FILE CMD...: run CMD (its output in $T/o); FILE gets the CPU ns of
# its whole process tree (children and threads included)
tree() {
	local f=$1
	shift
	python3 - "$@" >"$T/o" 3>"$f" <<'PY'
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, st, ru = os.wait4(pid, 0)
os.write(3, b"%d\n" % int((ru.ru_utime + ru.ru_stime) * 1e9))
sys.exit(os.waitstatus_to_exitcode(st))
PY
}
# whole NAME CMD... (K and 2K substituted for @K@): added tree CPU per call
# against the program alone (the base arrays of this round)
whole() {
	local a b
	tree "$T/t1" "${@//@K@/$K}"
	tree "$T/t2" "${@//@K@/$((2 * K))}"
	a=$(cat "$T/t1") b=$(cat "$T/t2")
	python3 -c "print('%.1f' % ((($b - $a) - ($wb2 - $wb1)) / $K))"
}
median() { python3 -c 'import sys; v=sorted(float(x) for x in sys.argv[1:]); print("%.1f" % v[len(v)//2])' "$@"; }
added() { python3 -c "print('%.1f' % (($1 - $2 * $3 / $K) / $3))"; }	# CPU BASE CALLS
check() {	# check FILE WANT: the query's answer
	[ "$(cat "$1")" = "$2" ] || { echo "wrong answer: $(cat "$1") (want $2)" >&2; exit 1; }
}
Q="from f in function(\"$W:$F\")"

base=() inl=() inlh=() up=() uph=() bt=() bth=() uft=() tsc=()
winl=() winlh=() wuft=() lbase=() linlh=() luft=()
for r in $(seq "$R"); do
	"$W" tsc "$K" >"$T/o"
	tsc+=("$(python3 -c "print($(cpu "$T/o") / $K)")")
	tree "$T/t1" "$W" lat "$K"; tree "$T/t2" "$W" lat "$((2 * K))"
	wb1=$(cat "$T/t1") wb2=$(cat "$T/t2")
	"$W" lat "$K" >"$T/o"
	b=$(cpu "$T/o"); base+=("$(python3 -c "print($b / $K)")")
	lbase+=("$(python3 -c "print($(wall "$T/o") / $K)")")
	"$FAY" run -q --json --query "$Q select { n: count() }" -- "$W" lat "$K" >"$T/o"
	check <(grep '"n"' "$T/o") "{\"n\":$K}"
	inl+=("$(added "$(cpu "$T/o")" "$b" "$K")")
	"$FAY" run -q --json --query "$Q select { n: count(), h: hist(f.duration) }" -- "$W" lat "$K" >"$T/o"
	grep -q "\"n\":$K," "$T/o" || { echo "hist: wrong count: $(cat "$T/o")" >&2; exit 1; }
	inlh+=("$(added "$(cpu "$T/o")" "$b" "$K")")
	linlh+=("$(python3 -c "print($(wall "$T/o") / $K)")")
	winl+=("$(whole "$FAY" run -q --json --query "$Q select { n: count() }" -- "$W" lat @K@)")
	winlh+=("$(whole "$FAY" run -q --json --query "$Q select { n: count(), h: hist(f.duration) }" -- "$W" lat @K@)")
	"$FAY" query -q --json --probe-mode=uprobe -c "$W lat $KU" "$Q select { n: count() }" >"$T/o"
	check <(grep '"n"' "$T/o") "{\"n\":$KU}"
	up+=("$(added "$(cpu "$T/o")" "$b" "$KU")")
	"$FAY" query -q --json --probe-mode=uprobe -c "$W lat $KU" "$Q select { n: count(), h: hist(f.duration) }" >"$T/o"
	grep -q "\"n\":$KU," "$T/o" || { echo "uprobe hist: wrong count: $(cat "$T/o")" >&2; exit 1; }
	uph+=("$(added "$(cpu "$T/o")" "$b" "$KU")")
	if command -v bpftrace >/dev/null; then
		bpftrace -q -e "uprobe:$W:$F { @c = count(); }" -c "$W lat $KU" >"$T/o" 2>/dev/null
		bt+=("$(added "$(cpu "$T/o")" "$b" "$KU")")
		bpftrace -q -e "uprobe:$W:$F { @s[tid] = nsecs; } uretprobe:$W:$F /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }" \
			-c "$W lat $KU" >"$T/o" 2>/dev/null
		bth+=("$(added "$(cpu "$T/o")" "$b" "$KU")")
	fi
	if command -v uftrace >/dev/null; then
		uftrace record --no-libcall -d "$T/uft" -P "$F" "$W" lat "$K" >"$T/o" 2>/dev/null
		uft+=("$(added "$(cpu "$T/o")" "$b" "$K")")
		luft+=("$(python3 -c "print($(wall "$T/o") / $K)")")
		rm -rf "$T/uft"
		wuft+=("$(whole uftrace record --no-libcall -d "$T/uft" -P "$F" "$W" lat @K@ 2>/dev/null)")
		rm -rf "$T/uft"
	fi
done
mi=$(median "${inl[@]}") mh=$(median "${inlh[@]}") mu=$(median "${up[@]}") muh=$(median "${uph[@]}")
echo "date: $(date -u '+%F %T') UTC; $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "first instruction of $F: $(objdump -d "$W" --no-show-raw-insn | grep -A1 "<$F>:" | tail -1 | cut -f2-)"
echo "baseline ns per call (median): $(median "${base[@]}")"
echo "fay run, inline count:            $mi ns/call (rounds: ${inl[*]})"
echo "fay run, inline count+hist(dur):  $mh ns/call (rounds: ${inlh[*]})"
echo "fay query, uprobe count:          $mu ns/call (rounds: ${up[*]})"
echo "fay query, uprobe count+hist:     $muh ns/call (rounds: ${uph[*]})"
[ ${#bt[@]} -gt 0 ] && echo "bpftrace uprobe count:            $(median "${bt[@]}") ns/call (rounds: ${bt[*]})"
[ ${#bth[@]} -gt 0 ] && echo "bpftrace uprobe+uretprobe hist:   $(median "${bth[@]}") ns/call (rounds: ${bth[*]})"
ratios="inline count / uprobe count $(python3 -c "print('%.4f' % ($mi / $mu))"), inline hist / uprobe hist $(python3 -c "print('%.4f' % ($mh / $muh))")"
if [ ${#uft[@]} -gt 0 ]; then
	mf=$(median "${uft[@]}")
	echo "uftrace record -P (entry+exit):   $mf ns/call (rounds: ${uft[*]})"
	ratios="$ratios, inline hist / uftrace $(python3 -c "print('%.3f' % ($mh / $mf))")"
fi
echo "ratios: $ratios"
mt=$(median "${tsc[@]}")
echo "floor: two rdtsc back to back: $mt ns (rounds: ${tsc[*]})"
echo "whole cost (CPU of every process and thread per call, fixed costs cancelled):"
echo "  fay run, inline count:            $(median "${winl[@]}") ns/call (rounds: ${winl[*]})"
wh=$(median "${winlh[@]}")
echo "  fay run, inline count+hist(dur):  $wh ns/call (rounds: ${winlh[*]})"
echo "loop wall time per call (the load's time slices included): unprobed $(median "${lbase[@]}"), inline count+hist $(median "${linlh[@]}")"
if [ ${#wuft[@]} -gt 0 ]; then
	wf=$(median "${wuft[@]}")
	echo "  uftrace record -P (entry+exit):   $wf ns/call (rounds: ${wuft[*]})"
	echo "  uftrace loop wall time per call:  $(median "${luft[@]}") ns"
	echo "whole-cost ratio: inline hist / uftrace $(python3 -c "print('%.3f' % ($wh / $wf))")"
	echo "0.15 x uftrace: $(python3 -c "print('%.1f' % (0.15 * $mf))") ns of the calling thread's CPU, $(python3 -c "print('%.1f' % (0.15 * $wf))") ns whole; the floor of two TSC reads is $mt ns"
fi
echo "goals: inline count <= 20 ns, inline hist <= 50 ns, hist / uftrace <= 0.15, count / uprobe <= 0.01"
