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
median() { python3 -c 'import sys; v=sorted(float(x) for x in sys.argv[1:]); print("%.1f" % v[len(v)//2])' "$@"; }
added() { python3 -c "print('%.1f' % (($1 - $2 * $3 / $K) / $3))"; }	# CPU BASE CALLS
check() {	# check FILE WANT: the query's answer
	[ "$(cat "$1")" = "$2" ] || { echo "wrong answer: $(cat "$1") (want $2)" >&2; exit 1; }
}
Q="from f in function(\"$W:$F\")"

base=() inl=() inlh=() up=() uph=() bt=() bth=() uft=()
for r in $(seq "$R"); do
	"$W" lat "$K" >"$T/o"
	b=$(cpu "$T/o"); base+=("$(python3 -c "print($b / $K)")")
	"$FAY" run -q --json --query "$Q select { n: count() }" -- "$W" lat "$K" >"$T/o"
	check <(grep '"n"' "$T/o") "{\"n\":$K}"
	inl+=("$(added "$(cpu "$T/o")" "$b" "$K")")
	"$FAY" run -q --json --query "$Q select { n: count(), h: hist(f.duration) }" -- "$W" lat "$K" >"$T/o"
	grep -q "\"n\":$K," "$T/o" || { echo "hist: wrong count: $(cat "$T/o")" >&2; exit 1; }
	inlh+=("$(added "$(cpu "$T/o")" "$b" "$K")")
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
echo "goals: inline count <= 20 ns, inline hist <= 50 ns, hist / uftrace <= 0.15, count / uprobe <= 0.01"
