#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Kernel-function wildcards through kprobe.multi, fay against bpftrace in
# the same guest (issue #27 item 1: kernel.function("*")).  Runs in the
# QEMU guest booting bookworm-backports' kernel (6.12, CONFIG_FPROBE):
#
#   make && cd build && sudo VMTEST_BACKPORTS=1 ../tests/vm/vmtest/run-in-vm.sh \
#       env FAY=$PWD/fay W=$PWD/tests/bin/query_work bash ../bench/kmulti_guest.sh [PATTERN...]
#
# Per pattern and tool: attach (launch to fay's "attached" line, to
# bpftrace's BEGIN, which runs once every probe is attached), detach
# (SIGINT to exit), and the CPU a read(2) of 1 byte of /dev/zero costs
# the reader with the probe counting (query_work read K 1, QW_TIME=1: the
# loop's CPU time, so the cost of the probes run in it; median of 3)
# against untraced just before; one attach each (a "*" attach takes minutes under TCG).  A
# tool that has not attached within ATTACH_MAX seconds (default 300) is
# stopped and said so (bpftrace 0.17 attaches a kprobe each).
FAY=${FAY:?FAY=path to fay}
W=${W:?W=path to query_work}
K=${K:-10000}
ATTACH_MAX=${ATTACH_MAX:-300}
[ $# -gt 0 ] || set -- 'vfs_*' '*'
# the median of 3 runs' loop CPU time: under TCG on a loaded host one
# run moves by tens of percent
cpu() {
	for _ in 1 2 3; do
		QW_TIME=1 "$W" read $K 1 | sed -n 's/.*cpu_ns \([0-9]*\).*/\1/p'
	done | sort -n | sed -n 2p
}
# run PATTERN fay|bpftrace: prints "attach_ms detach_ms ns_per_read
# untraced_ns_per_read" (the untraced run just before, not to compare
# across a guest whose speed drifts with the host's load)
run() {
	local pat=$1 tool=$2 err start att c end b
	b=$(cpu)
	err=$(mktemp)
	start=$(date +%s%N)
	if [ "$tool" = fay ]; then
		"$FAY" query "from f in kernel.function(\"$pat\") select { n: count() }" >/dev/null 2>"$err" &
	else
		BPFTRACE_MAX_PROBES=200000 bpftrace -e "kprobe:$pat { @n = count(); } BEGIN { printf(\"attached\\n\"); }" >"$err" 2>&1 &
	fi
	pid=$!
	while ! grep -q attached "$err" && kill -0 $pid 2>/dev/null &&
		[ $((($(date +%s%N) - start) / 1000000000)) -lt $ATTACH_MAX ]; do sleep 0.1; done
	att=$(date +%s%N)
	if ! grep -q attached "$err"; then
		kill -KILL $pid 2>/dev/null && wait $pid 2>/dev/null
		echo "$tool $pat: not attached after $(((att - start) / 1000000)) ms: $(head -c 300 "$err")" >&2
		echo "- - - $((b / K))"
		rm -f "$err"
		return
	fi
	c=$(cpu)
	kill -INT $pid
	local t=$(date +%s%N)
	wait $pid
	end=$(date +%s%N)
	echo "$(((att - start) / 1000000)) $(((end - t) / 1000000)) $((c / K)) $((b / K))"
	rm -f "$err"
}
echo "kernel $(uname -r); K=$K reads of 1 byte; CPU per read (ns), traced vs untraced just before"
for pat in "$@"; do
	read -r fa fd fc fb < <(run "$pat" fay)
	echo "$pat: fay attach $fa ms, detach $fd ms, read $fc ns (untraced $fb)"
	read -r ba bd bc bb < <(run "$pat" bpftrace)
	echo "$pat: bpftrace attach $ba ms, detach $bd ms, read $bc ns (untraced $bb)"
	if [ "$bc" != - ] && [ "$fc" != - ] && [ $((bc - bb)) -gt 0 ]; then
		echo "$pat: added CPU per read fay $((fc - fb)) ns, bpftrace $((bc - bb)) ns:" \
			"ratio $(awk -v f=$((fc - fb)) -v b=$((bc - bb)) 'BEGIN { printf "%.2f", f / b }');" \
			"attach ratio $(awk -v f=$fa -v b=$ba 'BEGIN { printf "%.2f", f / b }')"
	fi
done
