#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What scanning every /proc/PID/maps costs (issue #25): function("lib:sym")
# in every process reads each process's maps at attach to find every
# file of that library on the host (a container's own libc among them);
# a probe on one process (-p PID) does not.  With N extra sleeping
# processes (each maps libc), the wall time of one whole
# `fay query ... for 100ms` (compile, load, attach, 100 ms, detach) in
# every process and with -p, and of bpftrace's uprobe on libc (its peer,
# which probes the host's libc file only) doing the same; the agent's
# root scan (two stat() calls a process, once a second, that finds
# containers' /dev/shm) from its stats.  Medians of RUNS rounds.
#
#   bench/attach_scan.sh [--runs N] FAY [N...]      (default N: 0 500 1000)
#
# Run as root; note `uptime` with the figures.
set -u
RUNS=5
[ "${1:-}" = --runs ] && { RUNS=$2; shift 2; }
FAY=${1:?usage: $0 [--runs N] FAY [N...]}
shift
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(0 500 1000)
W=$(mktemp -d /tmp/fay-attach-scan.XXXXXX)
SLEEPERS=()
trap 'kill "${SLEEPERS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
Q='from f in function("libc:getppid") select { n: count() } for 100ms'

# ms CMD...: wall milliseconds of CMD
ms() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>"$W/err" || { echo "failed: $* $(tail -2 "$W/err")" >&2; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

printf '| processes | every process (ms) | -p PID (ms) | scan share (ms) | bpftrace uprobe:libc (ms) | agent root scan: first (ms) | agent root scan: last (ms) |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|\n'
for n in "${COUNTS[@]}"; do
	while [ ${#SLEEPERS[@]} -lt "$n" ]; do
		sleep 600 &
		SLEEPERS+=($!)
	done
	total=$(ls -d /proc/[0-9]* 2>/dev/null | wc -l)
	every=() one=() bt=()
	for r in $(seq "$RUNS"); do
		every+=("$(ms timeout 60 "$FAY" query --json "$Q")")
		one+=("$(ms timeout 60 "$FAY" query --json -p $$ "$Q")")
		bt+=("$(ms timeout 60 bpftrace -e 'uprobe:libc:getppid { @n = count(); } interval:ms:100 { exit(); }')")
	done
	me=$(printf '%s\n' "${every[@]}" | median)
	mo=$(printf '%s\n' "${one[@]}" | median)
	mb=$(printf '%s\n' "${bt[@]}" | median)
	# the agent: its root scans for 3 s, the longest from its stats
	rm -rf "$W/a"; mkdir -p "$W/a"
	# (--containers-in a cgroup no process is in: it scans every root, but
	# drains no container's files: they are other programs')
	timeout 20 "$FAY" agent --collector 127.0.0.1:1 --shm-dir "$W/a" --state-dir "$W/a" \
		--stats-interval 500ms --containers-in /fay-bench-none 2>/dev/null &
	ap=$!
	sleep 3.2
	kill $ap; wait $ap 2>/dev/null
	# the longest scan is the first (every root new: cgroup read, openat2)
	scan=$(grep -o '"max_root_scan_ms":[0-9]*' "$W/a/stats.json" | cut -d: -f2)
	last=$(grep -o '"last_root_scan_us":[0-9]*' "$W/a/stats.json" | cut -d: -f2)
	printf '| %d (%d in all) | %s | %s | %s | %s | %s | %s |\n' "$n" "$total" "$me" "$mo" \
		"$(awk -v a="$me" -v b="$mo" 'BEGIN {print a - b}')" "$mb" "${scan:-?}" \
		"$(awk -v u="${last:-0}" 'BEGIN {printf "%.1f", u / 1000}')"
done
