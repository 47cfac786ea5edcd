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
#   the zipkin:* events enabled, runs bench_span N times (default 3, each
#   run itself a median over rounds) and prints the median of the runs,
#   checks that LTTng really recorded (a snapshot is taken and its size
#   shown), then counts instructions per span with callgrind.  The last
#   lines are the ones to paste into bench/RESULTS.md.
#
# OPTIONS
#   --runs N    bench_span runs (default 3); other options go to bench_span
#               (--rounds N, --spans N).
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
runs=3
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--runs)
		case "${2:-}" in
		[1-9]|[1-9][0-9]) runs=$2 ;;
		*) echo "error: --runs wants a number from 1 to 99, not '${2:-}'" >&2; exit 1 ;;
		esac
		shift 2 ;;
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
sessiond_pid=

cleanup() {
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
if ! lttng create "$session" --snapshot >/dev/null ||
   ! lttng enable-event --userspace --session="$session" 'zipkin:*' >/dev/null ||
   ! lttng start "$session" >/dev/null; then
	echo "error: could not start an LTTng userspace session (see $work/sessiond.log)" >&2
	exit 1
fi

# Each run prints its medians; keep the numbers and take the median of runs.
fs=() fu=() lt=()
for i in $(seq "$runs"); do
	out=$("$bin" "${args[@]}")
	echo "$out" | sed "s/^/run $i: /" >&2
	fs+=("$(echo "$out" | sed -n 's/^sampled span: *fay *\([0-9.]*\) ns.*/\1/p')")
	lt+=("$(echo "$out" | sed -n 's/.*lttng-ust *\([0-9.]*\) ns.*/\1/p')")
	fu+=("$(echo "$out" | sed -n 's/^unsampled span: *fay *\([0-9.]*\) ns.*/\1/p')")
done
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
mfs=$(med "${fs[@]}") mlt=$(med "${lt[@]}") mfu=$(med "${fu[@]}")

lttng stop "$session" >/dev/null
lttng snapshot record --session="$session" "$work/snap" >/dev/null
snap=$(du -sb "$work/snap" | cut -f1)

# Instructions per span (user space; callgrind runs clock_gettime as a
# system call, so the vDSO's few dozen instructions per read are not in it).
ir() {
	valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1" \
		--toggle-collect="$1" "$bin_fay" --callgrind 1000 >/dev/null 2>&1
	awk '/^(summary|totals):/ {print int($2 / 1000); exit}' "$work/cg.$1"
}
ir_s=$(ir one_span_sampled) ir_u=$(ir one_span_unsampled)

ratio=$(awk -v a="$mfs" -v b="$mlt" 'BEGIN {printf "%.2f", a / b}')
echo
echo "bench_span, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), median of $runs runs"
echo "  sampled span (root+event+tag+end): fay $mfs ns, LTTng-UST $mlt ns (4 tracepoints, BlkKin fields): ratio $ratio (goal <= 0.30)"
echo "  unsampled span (same 4 calls):     fay $mfu ns (goal <= 10 ns)"
echo "  callgrind: sampled span $ir_s instructions, unsampled span $ir_u instructions"
echo "  LTTng snapshot after the runs: $snap bytes of trace data (the tracepoints recorded)"
