#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes through the whole user path (issue #8): the added CPU
# time per call of a function() query run by `fay run --query` (inline:
# libfay-probe.so preloaded, the programs sent over the control socket)
# vs `fay query --probe-mode=uprobe -c` (a kernel uprobe) vs
# `uftrace record -P`, same run, medians.  The workload is query_work's
# `lat` loop over fay_work_lat (an empty function: "mov rax, rdi; ret",
# 4 bytes, patched over its alignment padding inline; the kernel
# single-steps it).  Each round checks that the query counted every call.
#
#   make bench && sudo bench/bench_inline_run.sh [ROUNDS]
#
# Added ns per call = (the process's CPU time in the loop, QW_TIME's
# cpu_ns, with the probe - without) / calls: the probes run in the traced
# process (inline: the whole cost; uprobe: the trap is charged to the
# thread); uftrace's writer and fay's reader are other processes.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
B=${FAY_BUILD:-$TOP/build}
FAY=$B/fay W=$B/tests/bin/query_work
R=${1:-5} K=${K:-2000000} KU=${KU:-20000}
T=$(mktemp -d /tmp/fay-bench-inline-run.XXXXXX)
trap 'rm -rf "$T"' EXIT
[ -x "$FAY" ] && [ -x "$W" ] || { echo "build first: make bench" >&2; exit 1; }

cpu() { sed -n 's/.*cpu_ns \([0-9]*\).*/\1/p' "$1"; }
median() { python3 -c 'import sys; v=sorted(float(x) for x in sys.argv[1:]); print("%.1f" % v[len(v)//2])' "$@"; }
check() {	# check FILE WANT: the query's answer
	[ "$(cat "$1")" = "$2" ] || { echo "wrong answer: $(cat "$1") (want $2)" >&2; exit 1; }
}

base=() inl=() inlh=() up=() uft=()
for r in $(seq "$R"); do
	QW_TIME=1 "$W" lat "$K" >"$T/o"
	b=$(cpu "$T/o"); base+=("$(python3 -c "print($b / $K)")")
	QW_TIME=1 "$FAY" run -q --json --query "from f in function(\"$W:fay_work_lat\") select { n: count() }" -- "$W" lat "$K" >"$T/o"
	check <(grep '"n"' "$T/o") "{\"n\":$K}"
	inl+=("$(python3 -c "print(($(cpu "$T/o") - $b) / $K)")")
	QW_TIME=1 "$FAY" run -q --json --query "from f in function(\"$W:fay_work_lat\") select { n: count(), h: hist(f.duration) }" -- "$W" lat "$K" >"$T/o"
	grep -q "\"n\":$K," "$T/o" || { echo "hist: wrong count: $(cat "$T/o")" >&2; exit 1; }
	inlh+=("$(python3 -c "print(($(cpu "$T/o") - $b) / $K)")")
	QW_TIME=1 "$FAY" query -q --json --probe-mode=uprobe -c "$W lat $KU" "from f in function(\"$W:fay_work_lat\") select { n: count() }" >"$T/o"
	check <(grep '"n"' "$T/o") "{\"n\":$KU}"
	up+=("$(python3 -c "print(($(cpu "$T/o") - $b * $KU / $K) / $KU)")")
	if command -v uftrace >/dev/null; then
		QW_TIME=1 uftrace record --no-libcall -d "$T/uft" -P fay_work_lat "$W" lat "$K" >"$T/o" 2>/dev/null
		uft+=("$(python3 -c "print(($(cpu "$T/o") - $b) / $K)")")
		rm -rf "$T/uft"
	fi
done
mi=$(median "${inl[@]}") mh=$(median "${inlh[@]}") mu=$(median "${up[@]}")
echo "date: $(date -u '+%F %T') UTC; $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "first instruction of fay_work_lat: $(objdump -d "$W" --no-show-raw-insn | grep -A1 '<fay_work_lat>:' | tail -1 | cut -f2-)"
echo "baseline ns per call (median): $(median "${base[@]}")"
echo "fay run, inline count:           $mi ns/call (rounds: ${inl[*]})"
echo "fay run, inline count+hist(dur): $mh ns/call (rounds: ${inlh[*]})"
echo "fay query, uprobe count:         $mu ns/call (rounds: ${up[*]})"
if [ ${#uft[@]} -gt 0 ]; then
	mf=$(median "${uft[@]}")
	echo "uftrace record -P (entry+exit):  $mf ns/call (rounds: ${uft[*]})"
	if python3 -c "import sys; sys.exit(0 if $mf > 5 else 1)"; then
		echo "ratios: inline count / uprobe $(python3 -c "print('%.4f' % ($mi / $mu))"), inline hist / uftrace $(python3 -c "print('%.3f' % ($mh / $mf))")"
	else
		echo "uftrace added nothing: it did not patch fay_work_lat (4 bytes; it moves 5)"
		echo "ratios: inline count / uprobe $(python3 -c "print('%.4f' % ($mi / $mu))")"
	fi
else
	echo "ratios: inline count / uprobe $(python3 -c "print('%.4f' % ($mi / $mu))") (no uftrace)"
fi
