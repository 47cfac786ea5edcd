#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The calls fay misses in a new container's first milliseconds (issue #25
# item 2).  function("libc:getppid") in every process is attached; then,
# RUNS times, a process starts in a new container whose libc is a file no
# probe is on yet (a fresh copy each round: another inode), and calls
# getppid() from the first instruction of its main() for MS ms (16 calls,
# then a 20 us pause: about 0.5 M calls a second).  fay sees it exec
# (sched:sched_process_exec), resolves libc in its root and attaches to
# the new file; the calls before that are not counted.  Per round: the
# calls made and counted, and the gap: the time of the first counted call
# (s.time, CLOCK_MONOTONIC) minus that of the first call made.  A process
# whose file is probed already (a second one in the same container) has
# no gap: tests/integration/container_rescan.sh.
#
#   [RUNS=10] [MS=200] bench/exec_first_calls.sh FAY CTR_WORK
#
# Run as root; note `uptime` with the figures.
set -u
RUNS=${RUNS:-10} MS=${MS:-200}
FAY=${1:?usage: [RUNS=N] [MS=MS] $0 FAY CTR_WORK}
CW=${2:?usage: [RUNS=N] [MS=MS] $0 FAY CTR_WORK}
W=$(mktemp -d /tmp/fay-first-calls.XXXXXX)
QP=
trap '[ -n "$QP" ] && kill "$QP" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
. "$(dirname "$0")/ctr_root.bash"
for i in $(seq "$RUNS"); do ctr_bench_root "$W/r$i" "$CW"; done

timeout 600 nice -n 10 "$FAY" query --json 'from f in function("libc:getppid") where f.comm == "ctr_work" group f by f.pid into g select { p: g.key, n: g.count(), first: g.min(f.time) }' \
	>"$W/q.out" 2>"$W/q.err" &
QP=$!
for _ in $(seq 600); do grep -q attached "$W/q.err" && break; sleep 0.1; done
grep -q attached "$W/q.err" || { echo "fay did not attach: $(cat "$W/q.err")" >&2; exit 1; }
declare -A PIDOF
for i in $(seq "$RUNS"); do
	# unshare execs chroot, which execs ctr_work: $! is its pid
	nice -n 10 unshare -m chroot "$W/r$i" /bin/ctr_work /w "$MS" burst &
	PIDOF[$i]=$!
	wait "${PIDOF[$i]}"
	sleep 0.2	# rounds apart (a measurement, not a test)
done
kill -INT "$QP"
wait "$QP"
QP=

printf '| round | calls made | counted | missed | gap (ms) |\n|---:|---:|---:|---:|---:|\n'
for i in $(seq "$RUNS"); do
	read -r t0 calls <"$W/r$i/w/done"
	row=$(grep "\"p\":${PIDOF[$i]}," "$W/q.out")
	n=$(echo "$row" | sed -n 's/.*"n":\([0-9]*\).*/\1/p')
	first=$(echo "$row" | sed -n 's/.*"first":\([0-9]*\).*/\1/p')
	n=${n:-0}
	gap=-
	[ -n "$first" ] && gap=$(awk -v a="$first" -v b="$t0" 'BEGIN { printf "%.2f", (a - b) / 1e6 }')
	printf '| %d | %d | %d | %d | %s |\n' "$i" "$calls" "$n" $((calls - n)) "$gap"
done | tee "$W/rows"
# column C of the rows: median and max
col() { awk -F'|' -v c="$1" '{ print $c + 0 }' "$W/rows" | sort -g |
	awk '{ v[NR] = $1 } END { printf "median %s, max %s", v[int((NR + 1) / 2)], v[NR] }'; }
printf '\nmissed calls: %s; gap (ms): %s (%d rounds)\n' "$(col 5)" "$(col 6)" "$RUNS"
grep -c "one more file" "$W/q.err" | sed 's/^/files attached after the start: /'
