#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of a profile(...) sample's user stack (#27, p27): the
# perf_event program's own time per sample of `stack_work deep N` (C
# called in a loop from N + 3 frames; its samples are 24 to 26 frames
# deep), as the kernel times it (BPF run-time statistics, turned on by
# bench/bpf_prog_info.py for the bench's time), under
#
#   count   fay, select { n: count() }                        the sample alone
#   fp      fay, group by s.ustack, FAY_UNWIND=fp (fp code)   bpf_get_stackid(): frame pointers
#   table   fay, group by s.ustack (stack_work_fp)            the walk by the unwind table
#   nofp    fay, group by s.ustack (stack_work_nofp)          the same through code without frame pointers
#   bt      bpftrace, profile:hz:HZ /pid == P/ { @[ustack] = count(); } (stack_work_fp)
#
# each on -p of a running workload: fay (or bpftrace) attaches, the
# workload runs SECS seconds, is stopped (SIGSTOP: no more of its
# samples), the program's run_time_ns and run_cnt read, and again 1 s
# later: the runs meanwhile are other tasks' samples (the other CPU,
# idle or another process: they end at the pid check), whose mean, o, is
# taken out; then the query ends and its count of the workload's
# samples, n, is read.  ns a sample = (run_time_ns - (run_cnt - n) o) / n.
# The table's stacks are checked to hold main and every Deep frame.
# Medians of ROUNDS rounds (the order alternating); the verifier's
# processed instructions (bpf_prog_info.verified_insns) of each program.
#
#   make && sudo bench/bench_profile_ustack.sh [ROUNDS]    (N=20 HZ=999 SECS=3)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
B=${FAY_BUILD:-$TOP/build}
FAY=$B/fay W=$B/tests/bin/stack_work_fp WN=$B/tests/bin/stack_work_nofp
INFO=$TOP/bench/bpf_prog_info.py
R=${1:-3} N=${N:-20} HZ=${HZ:-999} SECS=${SECS:-3}
BT=$(command -v bpftrace || true)
[ -x "$FAY" ] && [ -x "$W" ] && [ -x "$WN" ] || { echo "build first: make" >&2; exit 1; }
T=$(mktemp -d /tmp/fay-bench-profile-ustack.XXXXXX)
STATS=
cleanup() {
	[ -n "$STATS" ] && kill "$STATS" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
python3 "$INFO" stats >"$T/stats" & STATS=$!
for _ in $(seq 50); do [ -s "$T/stats" ] && break; sleep 0.1; done
[ "$(cat "$T/stats")" = on ] || { echo "cannot turn BPF statistics on" >&2; exit 1; }

. "$TOP/bench/stack_lib.bash"

# wait_for FILE PATTERN: up to 30 s for PATTERN in FILE
wait_for() {
	for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}

# one NAME: "NS_PER_SAMPLE N VERIFIED_INSNS" of one run
one() {
	local w=$W how= q id n tpid p info
	[ "$1" = nofp ] && w=$WN
	[ "$1" = fp ] && how=fp
	"$w" deep "$N" 4000000000 >/dev/null & p=$!
	if [ "$1" = bt ]; then
		"$BT" -e "profile:hz:$HZ /pid == $p/ { @[ustack] = count(); }" >"$T/o" 2>"$T/e" & tpid=$!
		wait_for "$T/o" "^Attaching" || { echo "bpftrace did not attach: $(tail -3 "$T/e")" >&2; kill -9 $p; exit 1; }
		# (bpftrace 0.17 names the program by its rate, "999", and
		# loads it after it printed "Attaching")
		for _ in $(seq 100); do
			id=$(bpftool prog show -j | python3 -c 'import json, sys
ids = [p["id"] for p in json.load(sys.stdin) if p["type"] == "perf_event" and
       p.get("name", "") in (sys.argv[1], "profile_hz_" + sys.argv[1])]
print(max(ids) if ids else "")' "$HZ")
			[ -n "$id" ] && break
			sleep 0.1
		done
	else
		q="from s in profile($HZ) group s by s.ustack into g select { s: g.key, n: g.count() }"
		[ "$1" = count ] && q="from s in profile($HZ) select { n: count() }"
		FAY_UNWIND=$how FAY_LOG_LEVEL=debug timeout 300 "$FAY" query --json -p $p "$q" \
			>"$T/o" 2>"$T/e" & tpid=$!
		wait_for "$T/e" "probe attached" || { echo "fay did not attach ($1): $(tail -3 "$T/e")" >&2; kill -9 $p; exit 1; }
		id=$(sed -n 's/.*(prog id \([0-9]*\)).*/\1/p' "$T/e" | head -1)
	fi
	sleep "$SECS"
	kill -STOP $p
	sleep 0.05
	info=$(python3 "$INFO" "$id")
	sleep 1		# the other tasks' runs alone: their cost
	info2=$(python3 "$INFO" "$id")
	kill -INT $tpid
	wait $tpid
	kill -KILL $p
	wait $p 2>/dev/null
	if [ "$1" = bt ]; then
		n=$(sed -n 's/^\]: \([0-9]*\)$/\1/p' "$T/o" | awk '{ t += $1 } END { print t + 0 }')
	else
		n=$(python3 - "$T/o" "$1" "$N" <<'PY' || { cat "$T/e" >&2; exit 1; }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
if sys.argv[2] in ("table", "nofp"):
    want = "main;" + ";".join(["Deep"] * (int(sys.argv[3]) + 1))
    deep = sum(r["n"] for r in rows if want in r["s"])
    assert deep >= 0.9 * sum(r["n"] for r in rows), (sys.argv[2], rows[:3])
print(sum(r["n"] for r in rows))
PY
)
	fi
	python3 -c "
t, c, v = (int(x) for x in '$info'.split()[1::2])
t2, c2, _ = (int(x) for x in '$info2'.split()[1::2])
n = $n
assert n > 0 and c2 > c, ('no samples', n, c, c2)
other = (t2 - t) / (c2 - c)
print('%.1f %d %d %d %.1f' % ((t - (c - n) * other) / n, n, c, v, other))"
}

NAMES=(count fp table nofp)
[ -n "$BT" ] && NAMES+=(bt)
declare -A res cnt ver
for r in $(seq "$R"); do
	order=("${NAMES[@]}")
	[ $((r % 2)) = 0 ] && order=($(printf '%s\n' "${NAMES[@]}" | tac))
	for q in "${order[@]}"; do
		read -r ns n runs v other < <(one "$q") || exit 1
		[ -n "${ns:-}" ] || exit 1
		res[$q]+=" $ns"
		cnt[$q]+=" $n/$runs:$other"
		ver[$q]=$v
	done
done
echo "date: $(date -u '+%F %T') UTC; $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); kernel $(uname -r)"
echo "profile($HZ), stack_work deep $N, ${SECS}s a run; $R rounds; ns a workload sample (runs: its samples / all runs: ns an other task's run)"
declare -A med
for q in "${NAMES[@]}"; do
	# shellcheck disable=SC2086
	med[$q]=$(median ${res[$q]})
	printf '%-6s %8s ns/sample  verified_insns %-7s (%s) (%s)\n' "$q" "${med[$q]}" "${ver[$q]}" \
		"${res[$q]# }" "${cnt[$q]# }"
done
stack_compare " a sample" program
