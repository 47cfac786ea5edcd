#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How long a kernel-function wildcard takes to attach and detach where
# the kernel has no kprobe.multi (Debian 12's 6.1: no CONFIG_FPROBE), a
# kprobe each, at two sizes, to see how the time grows with the count
# (issue #27 item 3: kernel.function("*")).  Runs in the QEMU guest:
#
#   make && cd build && sudo ../tests/vm/vmtest/run-in-vm.sh \
#       env FAY=$PWD/fay bash ../bench/kprobe_each_guest.sh [PATTERN...]
#
# attach: launch to fay's "attached" line; detach: SIGINT to its exit.
# Prints the number of traceable functions "*" matches (the refusal
# says it) and a line per pattern.
FAY=${FAY:?FAY=path to fay}
"$FAY" query -c true 'from f in kernel.function("*") select { n: count() }' 2>&1 >/dev/null |
	grep -o 'matches [0-9]* traceable functions[^:]*' | head -1
[ $# -gt 0 ] || set -- 'vfs_*' '*_read*' '*_get*'
for pat in "$@"; do
	err=$(mktemp)
	start=$(date +%s%N)
	"$FAY" query "from f in kernel.function(\"$pat\") select { n: count() }" >/dev/null 2>"$err" &
	pid=$!
	while ! grep -q attached "$err" && kill -0 $pid 2>/dev/null; do sleep 0.1; done
	att=$(date +%s%N)
	sleep 1
	kill -INT $pid 2>/dev/null
	wait $pid
	rc=$?
	end=$(date +%s%N)
	echo "$pat: $(grep -o 'kprobe [^;]*' "$err" | head -1); attach $(((att - start) / 1000000)) ms," \
		"detach $(((end - att) / 1000000 - 1000)) ms, rc $rc"
	grep -v attached "$err" | head -3
	rm -f "$err"
done
