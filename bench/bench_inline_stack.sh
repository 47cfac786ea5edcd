#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of a stack key on inline probes (#27), against the kernel's
# uprobe path in the same run: the traced process's CPU time per call of
# stack_work_fp's C, called K times from N + 3 frames (main, N + 1 of
# Deep, C: `stack_work deep N K`, QW_TIME's cpu_ns of the loop), minus
# the unprobed loop's, under `fay run --query` for
#
#   count     select { n: count() }                     inline fast path
#   comm      group by f.comm, count                    inline slow path (an
#                                                       out-of-line helper), no stack
#   ustack    group by f.ustack, count                  inline: walk + table (the
#                                                       walk steps by the unwind
#                                                       table's rows, #27)
#   ustack:fp the same, FAY_UNWIND=fp                   inline: frame pointers only
#   nofp      the same on stack_work_nofp               inline: the table's rows
#                                                       through code without frame
#                                                       pointers (its own base)
#   ustack4   group by f.ustack(4), count               inline: 4 frames
#   u:count   the same as count, --probe-mode=uprobe     the kernel's uprobe
#   u:ustack  the same as ustack, --probe-mode=uprobe    + the program's walk by the
#                                                       unwind table (k27; before:
#                                                       bpf_get_stackid(), now
#                                                       bench/bench_ustack_bpf.sh's fp)
#
# medians of ROUNDS rounds, the order of the queries alternating; every
# run's counts are checked (the sum of n is the number of calls).
#
#   make && sudo bench/bench_inline_stack.sh [ROUNDS]     (N=20 K=1000000 KU=100000)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
B=${FAY_BUILD:-$TOP/build}
FAY=$B/fay W=$B/tests/bin/stack_work_fp WN=$B/tests/bin/stack_work_nofp
R=${1:-5} N=${N:-20} K=${K:-1000000} KU=${KU:-100000}
[ -x "$FAY" ] && [ -x "$W" ] && [ -x "$WN" ] || { echo "build first: make" >&2; exit 1; }
T=$(mktemp -d /tmp/fay-bench-inline-stack.XXXXXX) && trap 'rm -rf "$T"' EXIT
export QW_TIME=1

. "$TOP/bench/stack_lib.bash"
Q="from f in function(\"$W:C\")"
declare -A QS=(
	[count]="$Q select { n: count() }"
	[comm]="$Q group f by f.comm into g select { c: g.key, n: g.count() }"
	[ustack]="$Q group f by f.ustack into g select { s: g.key, n: g.count() }"
	[ustack:fp]="$Q group f by f.ustack into g select { s: g.key, n: g.count() }"
	[nofp]="from f in function(\"$WN:C\") group f by f.ustack into g select { s: g.key, n: g.count() }"
	[ustack4]="$Q group f by f.ustack(4) into g select { s: g.key, n: g.count() }"
	[u:count]="$Q select { n: count() }"
	[u:ustack]="$Q group f by f.ustack into g select { s: g.key, n: g.count() }"
)
NAMES=(count comm ustack ustack:fp nofp ustack4 u:count u:ustack)

# one NAME CALLS BASE_NS_PER_CALL: added ns per call (the count checked;
# a stack key's stacks end in Deep;C, and those of the whole walk hold
# main and N + 1 Deep frames)
one() {
	local mode=inline w=$W how=
	[ "${1#u:}" != "$1" ] && mode=uprobe
	[ "$1" = nofp ] && w=$WN
	[ "$1" = ustack:fp ] && how=fp
	FAY_UNWIND=$how "$FAY" run --json --probe-mode=$mode --query "${QS[$1]}" -- "$w" deep "$N" "$2" \
		>"$T/o" 2>"$T/e" || { echo "fay run failed ($1): $(cat "$T/e")" >&2; exit 1; }
	python3 - "$T/o" "$2" "$1" "$N" <<'PY' || { cat "$T/e" >&2; exit 1; }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
n = sum(r["n"] for r in rows)
assert n == int(sys.argv[2]), ("wrong count", sys.argv[3], n, rows[:3])
if "ustack" in sys.argv[3] or sys.argv[3] == "nofp":
    assert all(r["s"].endswith("Deep;C") for r in rows), rows[:3]
if sys.argv[3] in ("ustack", "ustack:fp", "nofp"):
    want = ";main;" + "Deep;" * (int(sys.argv[4]) + 1) + "C"
    assert all(r["s"].endswith(want) for r in rows), (sys.argv[3], rows[:3])
PY
	python3 -c "print('%.1f' % (($(cpu "$T/o") - $3 * $2) / $2))"
}

declare -A res
for r in $(seq "$R"); do
	stack_bases
	order=("${NAMES[@]}")
	[ $((r % 2)) = 0 ] && order=(u:ustack u:count ustack4 nofp ustack:fp ustack comm count)
	for q in "${order[@]}"; do
		k=$K b=$base
		[ "${q#u:}" != "$q" ] && k=$KU
		[ "$q" = nofp ] && b=$base_nofp
		res[$q]+=" $(one "$q" "$k" "$b")"
	done
done
declare -A med
stack_report "$K calls inline, $KU with uprobes"
python3 - "${med[count]}" "${med[comm]}" "${med[ustack]}" "${med[ustack4]}" "${med[u:count]}" "${med[u:ustack]}" \
	"${med[ustack:fp]}" "${med[nofp]}" "$N" <<'PY'
import sys
c, comm, us, us4, uc, uus, usfp, nofp = map(float, sys.argv[1:9])
print("inline: a stack key adds %.1f ns to a call on the slow path (ustack - comm), "
      "%.1f with 4 frames" % (us - comm, us4 - comm))
print("inline, %d frames: by the unwind table %.1f ns, by frame pointers only %.1f "
      "(table / fp: %.2f); without frame pointers, by the table: %.1f"
      % (int(sys.argv[9]) + 3, us - comm, usfp - comm, (us - comm) / (usfp - comm), nofp - comm))
print("uprobe: the walk by the unwind table adds %.1f ns (u:ustack - u:count)" % (uus - uc))
print("ustack per call, uprobe / inline: %.1f" % (uus / us))
PY
