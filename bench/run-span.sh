#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# NAME
#   bench/run-span.sh - one span with libfay vs LTTng-UST (BlkKin's events)
#
# SYNOPSIS
#   bench/run-span.sh [--runs N] [bench_span options...]
#
# DESCRIPTION
#   Builds bench/bench_span (make O=$O bench-span), starts an LTTng session
#   daemon if none runs (and stops it afterwards), creates a userspace
#   snapshot session (overwrite mode, like fay's flight-recorder rings) with
#   the zipkin:* events enabled, runs bench_span N times (default 5, each
#   run itself a median over rounds) and prints the median of the runs for
#   each figure (sampled span vs LTTng-UST, unsampled span, child of a
#   remote parent, two threads at once) and the machine's floor (the three
#   TSC reads a span with one event makes, alone, on one thread and on two
#   threads sharing nothing), with the load average before and
#   after (the machine may be shared: say so with the figures), checks that
#   LTTng really recorded (a snapshot is taken and its size shown), then
#   counts instructions per span with callgrind.  The last lines are the
#   ones to paste into bench/RESULTS.md.
#
# OPTIONS
#   --runs N    bench_span runs (default 5); other options go to bench_span
#               (--rounds N, --spans N).
#   --live      with the rest of each pipeline running, as in production:
#               a fay collector (SQLite in a temporary directory) and a
#               fay agent draining the rings and shipping to it, and an
#               LTTng session in normal mode (its consumer daemon writing
#               the trace to disk) instead of a snapshot session.  The
#               figures then include what sharing the CPUs and the rings'
#               cache lines with the consumers costs the producer.
#
# EXAMPLES
#   O=/tmp/fay-me bench/run-span.sh --runs 5
#   bench/run-span.sh --runs 1 --rounds 3 --spans 50000     # a quick look
#
# ENVIRONMENT
#   O           build tree (default build); the binaries are $O/bench/.
#
# EXIT STATUS
#   0 when the benchmark ran; 1 when it could not (build, LTTng session).
set -euo pipefail
cd "$(dirname "$0")/.."

O=${O:-build}
runs=5
live=0
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--runs)
		case "${2:-}" in
		[1-9]|[1-9][0-9]) runs=$2 ;;
		*) echo "error: --runs wants a number from 1 to 99, not '${2:-}'" >&2; exit 1 ;;
		esac
		shift 2 ;;
	--live) live=1; shift ;;
	-h|--help) sed -n '4,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) args+=("$1"); shift ;;
	esac
done

make --no-print-directory -s O="$O" bench-span >&2
bin=$O/bench/bench_span
bin_fay=$O/bench/bench_span_fay

work=$(mktemp -d /tmp/fay-bench-span.XXXXXX)
export FAY_SHM_DIR=$work/shm
mkdir -p "$FAY_SHM_DIR"
session=fay-bench-span-$$
sessiond_pid= coll_pid= agent_pid=

cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	[ -n "$coll_pid" ] && kill "$coll_pid" 2>/dev/null && wait "$coll_pid" 2>/dev/null
	lttng destroy "$session" >/dev/null 2>&1 || true
	if [ -n "$sessiond_pid" ]; then
		kill "$sessiond_pid" 2>/dev/null || true
		wait "$sessiond_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

if ! lttng list >/dev/null 2>&1; then
	lttng-sessiond --no-kernel >"$work/sessiond.log" 2>&1 &
	sessiond_pid=$!
	for _ in $(seq 50); do
		lttng list >/dev/null 2>&1 && break
		sleep 0.1
	done
fi
if [ $live = 1 ]; then
	lttng_mode=(--output="$work/lttng")
	make --no-print-directory -s O="$O" >&2
	# a free port pair for the collector (wire, HTTP)
	for _ in $(seq 50); do
		port=$((20000 + RANDOM % 30000))
		ss -Hltn "sport = :$port or sport = :$((port + 1))" | grep -q . || break
	done
	"$O/fay" collector --listen "127.0.0.1:$port" --http "127.0.0.1:$((port + 1))" \
		--db "$work/fay.db" >"$work/collector.log" 2>&1 &
	coll_pid=$!
	mkdir -p "$work/agent"
	"$O/fay" agent --collector "127.0.0.1:$port" --shm-dir "$FAY_SHM_DIR" \
		--state-dir "$work/agent" >"$work/agent.log" 2>&1 &
	agent_pid=$!
	for _ in $(seq 100); do
		grep -q "connected" "$work/agent.log" 2>/dev/null && break
		sleep 0.1
	done
	grep -q "connected" "$work/agent.log" ||
		{ echo "error: the agent did not connect (see $work/agent.log)" >&2; exit 1; }
else
	lttng_mode=(--snapshot)
fi
if ! lttng create "$session" "${lttng_mode[@]}" >/dev/null ||
   ! lttng enable-event --userspace --session="$session" 'zipkin:*' >/dev/null ||
   ! lttng start "$session" >/dev/null; then
	echo "error: could not start an LTTng userspace session (see $work/sessiond.log)" >&2
	exit 1
fi

# Each run prints its medians; keep the numbers and take the median of runs.
load0=$(cut -d' ' -f1-3 /proc/loadavg)
fs=() fu=() lt=() fr=() f2=() c1=() c2=()
for i in $(seq "$runs"); do
	out=$("$bin" "${args[@]}")
	echo "$out" | sed "s/^/run $i: /" >&2
	fs+=("$(echo "$out" | sed -n 's/^sampled span: *fay *\([0-9.]*\) ns.*/\1/p')")
	lt+=("$(echo "$out" | sed -n 's/.*lttng-ust *\([0-9.]*\) ns.*/\1/p')")
	fu+=("$(echo "$out" | sed -n 's/^unsampled span: *fay *\([0-9.]*\) ns.*/\1/p')")
	fr+=("$(echo "$out" | sed -n 's/^remote parent: *fay *\([0-9.]*\) ns.*/\1/p')")
	f2+=("$(echo "$out" | sed -n 's/^two threads: *fay *\([0-9.]*\) ns.*/\1/p')")
	c1+=("$(echo "$out" | sed -n 's/^machine floor: *3 TSC reads *\([0-9.]*\) ns.*/\1/p')")
	c2+=("$(echo "$out" | sed -n 's/^machine floor: .*sharing nothing: \([0-9.]*\)x.*/\1/p')")
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
mfs=$(med "${fs[@]}") mlt=$(med "${lt[@]}") mfu=$(med "${fu[@]}")
mfr=$(med "${fr[@]}") mf2=$(med "${f2[@]}")
mc1=$(med "${c1[@]}") mc2=$(med "${c2[@]}")

lttng stop "$session" >/dev/null
if [ $live = 1 ]; then
	snap=$(du -sb "$work/lttng" | cut -f1)
	kill "$agent_pid"
	wait "$agent_pid" 2>/dev/null || true
	agent_pid=
	shipped=$(sed -n 's/.*agent stopped: .* \([0-9]*\) spans spooled, \([0-9]*\) acknowledged.*/\1 spooled, \2 acknowledged by the collector/p' \
		"$work/agent.log" | tail -1)
else
	lttng snapshot record --session="$session" "$work/snap" >/dev/null
	snap=$(du -sb "$work/snap" | cut -f1)
fi

# Instructions per span (user space; callgrind runs clock_gettime as a
# system call, so the vDSO's few dozen instructions per read are not in
# it).  Under valgrind the TSC reads are emulated and slow, so libfay's
# clock never trusts a (TSC, clock_gettime) pair and takes its slow path
# at every read: the second figure leaves lib_clock_slow out (natively it
# runs once per 64 ms per thread).
ir() {
	valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1" \
		--toggle-collect="$1" "$bin_fay" --callgrind 1000 >/dev/null 2>&1
	tot=$(awk '/^(summary|totals):/ {print $2; exit}' "$work/cg.$1")
	slow=$(callgrind_annotate --inclusive=yes "$work/cg.$1" 2>/dev/null |
		awk '/:lib_clock_slow / {gsub(",", "", $1); print $1; exit}')
	echo "$((tot / 1000)) ($(((tot - ${slow:-0}) / 1000)) without the clock's slow path)"
}
ir_s=$(ir one_span_sampled) ir_u=$(ir one_span_unsampled) ir_r=$(ir one_span_remote)

ratio=$(awk -v a="$mfs" -v b="$mlt" 'BEGIN {printf "%.2f", a / b}')
ratio2=$(awk -v a="$mf2" -v b="$mfs" 'BEGIN {printf "%.2f", a / b}')
echo
echo "bench_span, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), median of $runs runs, load average $load0 before, $load1 after$([ $live = 1 ] && echo ", live: fay agent + collector draining, LTTng consumer writing")"
echo "  sampled span (root+event+tag+end): fay $mfs ns, LTTng-UST $mlt ns (4 tracepoints, BlkKin fields): ratio $ratio (goal <= 50 ns, <= 0.10)"
echo "  unsampled span (same 4 calls):     fay $mfu ns (goal <= 3 ns)"
echo "  child of a remote parent:          fay $mfr ns (goal <= 80 ns)"
echo "  two threads at once:               fay $mf2 ns per span per thread, ${ratio2}x one thread's (goal <= 1.10)"
echo "  machine floor:                     3 TSC reads (a span's begin, event, end) $mc1 ns; on two threads sharing nothing ${mc2}x one thread's"
echo "  callgrind: sampled span $ir_s instructions, remote parent $ir_r, unsampled span $ir_u"
if [ $live = 1 ]; then
	echo "  LTTng trace written by its consumer: $snap bytes; fay agent: ${shipped:-unknown (see agent.log)}"
else
	echo "  LTTng snapshot after the runs: $snap bytes of trace data (the tracepoints recorded)"
fi
