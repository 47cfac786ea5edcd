#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two builds of the inline-probe runtime (libfay-probe.so) in the same
# run, rounds alternating A B / B A: the added CPU time per call of the
# probed function under `fay run --query` (bench_inline_run.sh's
# measure: the traced process's CPU in inline_work's loop, QW_TIME's
# cpu_ns, minus the unprobed loop's, per call), for
#
#   count      select { n: count() }                 the fast path (entry)
#   hist       count() + hist(f.duration)            the fast path (entry + exit)
#   slow       group by comm, count, min duration    the slow path on every
#              (a helper called out of line)         entry and exit (rt_vec_call)
#
# and the median of each, with B / A.  Every round checks the count.
#
#   make bench && sudo FAY_PROBE_LIB_A=old.so FAY_PROBE_LIB_B=new.so \
#       bench/bench_inline_ab.sh [ROUNDS]
#
# K calls for count and hist, KS for slow.  Both runtimes are driven by
# the same fay ($FAY_BUILD/fay): the control channel must be the same.
# FAY_A=old/fay drives A with its own fay instead, for a change of the
# generated programs too (a fay and its runtime against another pair).
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
B=${FAY_BUILD:-$TOP/build}
FAY=$B/fay W=$B/tests/bin/inline_work F=fay_inline_lat
R=${1:-7} K=${K:-2000000} KS=${KS:-200000}
A=${FAY_PROBE_LIB_A:-} BB=${FAY_PROBE_LIB_B:-$B/libfay-probe.so} FA=${FAY_A:-$FAY}
T=$(mktemp -d /tmp/fay-bench-inline-ab.XXXXXX)
trap 'rm -rf "$T"' EXIT
[ -x "$FAY" ] && [ -x "$W" ] || { echo "build first: make bench" >&2; exit 1; }
[ -r "$A" ] && [ -r "$BB" ] || { echo "FAY_PROBE_LIB_A and FAY_PROBE_LIB_B: two runtimes" >&2; exit 1; }
export QW_TIME=1

cpu() { sed -n 's/.*cpu_ns \([0-9]*\).*/\1/p' "$1"; }
median() { python3 -c 'import sys; v=sorted(float(x) for x in sys.argv[1:]); print("%.1f" % v[len(v)//2])' "$@"; }
Q="from f in function(\"$W:$F\")"
QC="$Q select { n: count() }"
QH="$Q select { n: count(), h: hist(f.duration) }"
QS="$Q group f by { c: f.comm } into g select { c: g.c, n: g.count(), t: g.min(f.duration) }"

# one LIB QUERY CALLS BASE_NS_PER_CALL [FAY]: added ns per call, the count
# checked
one() {
	FAY_PROBE_LIB=$1 "${5:-$FAY}" run -q --json --query "$2" -- "$W" lat "$3" >"$T/o" ||
		{ echo "fay run failed: $(cat "$T/o")" >&2; exit 1; }
	grep -q "\"n\":$3[,}]" "$T/o" || { echo "wrong count: $(cat "$T/o")" >&2; exit 1; }
	python3 -c "print('%.1f' % (($(cpu "$T/o") - $4 * $3) / $3))"
}

declare -A res
for r in $(seq "$R"); do
	"$W" lat "$K" >"$T/o"
	base=$(python3 -c "print($(cpu "$T/o") / $K)")
	order="a b"
	[ $((r % 2)) = 0 ] && order="b a"
	for w in $order; do
		lib=$A f=$FA
		[ $w = b ] && lib=$BB f=$FAY
		res[$w,count]+=" $(one "$lib" "$QC" "$K" "$base" "$f")"
		res[$w,hist]+=" $(one "$lib" "$QH" "$K" "$base" "$f")"
		res[$w,slow]+=" $(one "$lib" "$QS" "$KS" "$base" "$f")"
	done
done
echo "date: $(date -u '+%F %T') UTC; $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "A: $A (driven by $FA)"
echo "B: $BB (driven by $FAY)"
for q in count hist slow; do
	# shellcheck disable=SC2086
	ma=$(median ${res[a,$q]}) mb=$(median ${res[b,$q]})
	printf '%-6s A %7s ns/call  B %7s ns/call  B/A %s   (A:%s; B:%s)\n' "$q" "$ma" "$mb" \
		"$(python3 -c "print('%.3f' % ($mb / $ma))")" "${res[a,$q]}" "${res[b,$q]}"
done
