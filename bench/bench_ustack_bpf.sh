#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of a user stack key on a uprobe (#27): the traced process's CPU
# time per call of stack_work's C, called K times from N + 3 frames
# (`stack_work deep N K`, QW_TIME's cpu_ns of the loop), minus the
# unprobed loop's, under
#
#   count      fay, select { n: count() }                    the uprobe alone
#   fp         fay, group by f.ustack, FAY_UNWIND=fp         bpf_get_stackid(): frame pointers
#   table      fay, group by f.ustack (stack_work_fp)        the program's walk by the unwind table
#   nofp       fay, group by f.ustack (stack_work_nofp)      the same through code without frame pointers
#   bt         bpftrace, @[ustack] = count() (stack_work_fp) bpftrace's ustack (frame pointers)
#
# each on a run of the command fay (fay run --probe-mode=uprobe) or
# bpftrace (-c) starts; medians of ROUNDS rounds; the counts checked, and
# the stacks of table and nofp hold main and every Deep frame.
#
#   make && sudo bench/bench_ustack_bpf.sh [ROUNDS]     (N=20 K=100000)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
B=${FAY_BUILD:-$TOP/build}
FAY=$B/fay W=$B/tests/bin/stack_work_fp WN=$B/tests/bin/stack_work_nofp
R=${1:-5} N=${N:-20} K=${K:-100000}
BT=$(command -v bpftrace || true)
[ -x "$FAY" ] && [ -x "$W" ] && [ -x "$WN" ] || { echo "build first: make" >&2; exit 1; }
T=$(mktemp -d /tmp/fay-bench-ustack-bpf.XXXXXX) && trap 'rm -rf "$T"' EXIT
export QW_TIME=1

. "$TOP/bench/stack_lib.bash"

# one NAME BASE_NS_PER_CALL: added ns per call
one() {
	local w=$W how= q
	[ "$1" = nofp ] && w=$WN
	[ "$1" = fp ] && how=fp
	if [ "$1" = bt ]; then
		timeout 300 "$BT" -c "$w deep $N $K" -e "uprobe:$w:C { @[ustack] = count(); }" \
			>"$T/o" 2>"$T/e" || { echo "bpftrace failed: $(tail -3 "$T/e")" >&2; exit 1; }
	else
		q="from f in function(\"$w:C\") group f by f.ustack into g select { s: g.key, n: g.count() }"
		[ "$1" = count ] && q="from f in function(\"$w:C\") select { n: count() }"
		FAY_UNWIND=$how timeout 300 "$FAY" run --json --probe-mode=uprobe --query "$q" -- \
			"$w" deep "$N" "$K" >"$T/o" 2>"$T/e" ||
			{ echo "fay run failed ($1): $(tail -3 "$T/e")" >&2; exit 1; }
		python3 - "$T/o" "$K" "$1" "$N" <<'PY' || { cat "$T/e" >&2; exit 1; }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
n = sum(r["n"] for r in rows)
assert n == int(sys.argv[2]), ("wrong count", sys.argv[3], n, rows[:3])
if sys.argv[3] in ("table", "nofp"):
    want = "main;" + "Deep;" * (int(sys.argv[4]) + 1) + "C"
    assert all(r["s"].endswith(want) for r in rows), (sys.argv[3], rows[:3])
PY
	fi
	python3 -c "print('%.1f' % (($(cpu "$T/o") - $2 * $K) / $K))"
}

NAMES=(count fp table nofp)
[ -n "$BT" ] && NAMES+=(bt)
declare -A res
for r in $(seq "$R"); do
	stack_bases
	order=("${NAMES[@]}")
	[ $((r % 2)) = 0 ] && order=($(printf '%s\n' "${NAMES[@]}" | tac))
	for q in "${order[@]}"; do
		b=$base
		[ "$q" = nofp ] && b=$base_nofp
		res[$q]+=" $(one "$q" "$b")"
	done
done
declare -A med
stack_report "$K calls"
stack_compare "" probe
