#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What watching execs costs (issue #25 item 2): function("lib:sym") in
# every process watches every exec (a BPF program on
# sched:sched_process_exec) and looks at each process that sees a new
# file system (a container) for a new copy of the library.  The exec rate
# of N short processes started one after another by a shell loop, with
# nothing attached, with `fay query 'from f in function("libc:getppid")
# select count()'` running, and with bpftrace (the peer) running the same
# kernel hooks (uprobe:libc:getppid and tracepoint:sched:sched_process_exec
# counting); and fay's own CPU time over the loop, less what it uses
# idle over the same time (its loop's periodic checks).  Three kinds of
# process: /bin/true on the host (fay's own view: nothing to look at), a
# program in a chroot (one view, looked at once), and `unshare -m` +
# chroot (a new mount namespace each exec: every exec is a new view that
# fay resolves libc in, the worst case of the watch); and "fresh" (not
# in the default KINDS): `unshare -m` + chroot into a root of its own
# each exec, N roots made first, each with its own copy of libc (a new
# file for fay each exec: each process is held at its mmap() of it until
# fay has attached, the hold's worst case; bpftrace misses their calls).
# Medians of RUNS rounds.
#
#   [KINDS="host chroot unshare fresh"] bench/exec_watch.sh [--runs N] [--n N] FAY CTR_WORK
#
# Run as root at nice 10; note `uptime` with the figures.
set -u
RUNS=5 N=1000
while [ $# -gt 2 ]; do
	case "$1" in
	--runs) RUNS=$2; shift 2 ;;
	--n) N=$2; shift 2 ;;
	*) break ;;
	esac
done
FAY=${1:?usage: $0 [--runs N] [--n N] FAY CTR_WORK}
CW=${2:?usage: $0 [--runs N] [--n N] FAY CTR_WORK}
W=$(mktemp -d /tmp/fay-exec-watch.XXXXXX)
TP=
trap '[ -n "$TP" ] && kill $TP 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT

# a root with ctr_work and its own libc copy
. "$(dirname "$0")/ctr_root.bash"
R=$W/root
ctr_bench_root "$R" "$CW"

loop_host() { for ((i = 0; i < N; i++)); do /bin/true; done; }
loop_chroot() { for ((i = 0; i < N; i++)); do chroot "$R" /bin/ctr_work 2>/dev/null; done; }
loop_unshare() { for ((i = 0; i < N; i++)); do unshare -m chroot "$R" /bin/ctr_work 2>/dev/null; done; }
loop_fresh() { for ((i = 0; i < N; i++)); do unshare -m chroot "$W/f$i" /bin/ctr_work 2>/dev/null; done; }
case " ${KINDS:-} " in
*" fresh "*) for ((i = 0; i < N; i++)); do ctr_bench_root "$W/f$i" "$CW"; done ;;
esac

# rate LOOP: execs per second of the loop (the unshare loop execs 2 a
# process: unshare's child chroot, then ctr_work; counted as processes)
rate() {
	local t0 t1
	t0=$(date +%s%N)
	"$1"
	t1=$(date +%s%N)
	awk -v n="$N" -v d=$((t1 - t0)) 'BEGIN { printf "%.1f\n", n * 1e9 / d }'
}
# CPU ns of fay's (one) thread: schedstat's time on CPU
cpu_ns() { awk '{print $1}' "/proc/$1/schedstat" 2>/dev/null || echo 0; }
median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# start TOOL: fay or bpftrace attached in the background ($TP)
start() {
	: >"$W/err"
	case "$1" in
	fay) timeout 600 "$FAY" query 'from f in function("libc:getppid") select { n: count() }' \
		>/dev/null 2>"$W/err" & TP=$!
		for _ in $(seq 300); do grep -q attached "$W/err" && break; sleep 0.1; done ;;
	bpftrace) timeout 600 bpftrace -e 'uprobe:libc:getppid { @n = count(); }
		tracepoint:sched:sched_process_exec { @e = count(); }' >"$W/err" 2>&1 & TP=$!
		for _ in $(seq 300); do grep -q Attaching "$W/err" && break; sleep 0.1; done ;;
	esac
}
stop() { kill -INT $TP 2>/dev/null; wait $TP 2>/dev/null; TP=; }

printf '| processes | nothing (exec/s) | fay query (exec/s) | fay CPU, idle subtracted (us per process) | bpftrace (exec/s) |\n'
printf '|---|---:|---:|---:|---:|\n'
for kind in ${KINDS:-host chroot unshare}; do
	base=() fay=() cpu=() bt=()
	for r in $(seq "$RUNS"); do
		base+=("$(rate loop_$kind)")
		start fay
		fp=$(pgrep -P $TP -x fay || echo $TP)
		# fay's own idle CPU (its loop's ticks) over 2 s, subtracted below
		i0=$(cpu_ns $fp) t0=$(date +%s%N)
		sleep 2
		c0=$(cpu_ns $fp) t1=$(date +%s%N)
		fay+=("$(rate loop_$kind)")
		c1=$(cpu_ns $fp) t2=$(date +%s%N)
		cpu+=("$(((c1 - c0 - (c0 - i0) * (t2 - t1) / (t1 - t0)) / 1000 / N))")
		stop
		start bpftrace
		bt+=("$(rate loop_$kind)")
		stop
	done
	printf '| %s | %s | %s | %s | %s |\n' "$kind" \
		"$(printf '%s\n' "${base[@]}" | median)" "$(printf '%s\n' "${fay[@]}" | median)" \
		"$(printf '%s\n' "${cpu[@]}" | median)" "$(printf '%s\n' "${bt[@]}" | median)"
done
