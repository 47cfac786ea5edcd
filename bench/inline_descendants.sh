#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes in a command's descendants against uprobes (issue #25):
# one command starts KIDS children at once, each `chroot ROOT ctr_work`
# making CALLS calls of libc's getppid() from main()'s first instruction
# (a root of its own with its own copy of libc); `fay query -c CMD` counts
# them in uprobe mode (a uprobe attached for each descendant at its exec)
# and in inline mode (fay's runtime loaded at each descendant's entry
# point: the chroot process in fay's root, then ctr_work in the root),
# the two modes alternated, RUNS runs each.  Per run: the wall time of
# the whole query and its answer (must be KIDS * CALLS); then each
# mode's median and inline / uprobe.  libfay-probe.so must be beside FAY.
#
#   [RUNS=5] [KIDS=50] [CALLS=100] bench/inline_descendants.sh FAY CTR_WORK
#
# Run as root; it prints `uptime` before and after.
set -u
RUNS=${RUNS:-5} KIDS=${KIDS:-50} CALLS=${CALLS:-100}
FAY=${1:?usage: [RUNS=N] [KIDS=N] [CALLS=N] $0 FAY CTR_WORK}
CW=${2:?usage: [RUNS=N] [KIDS=N] [CALLS=N] $0 FAY CTR_WORK}
W=$(mktemp -d /tmp/fay-inline-kids.XXXXXX)
trap 'rm -rf "$W"' EXIT
. "$(dirname "$0")/ctr_root.bash"
ctr_bench_root "$W/r" "$CW"
# (the runtime needs libgcc_s in the root, as every Debian root has it, a
# /run, where it binds its control socket, and a /tmp)
cp "$(ldd "$(dirname "$FAY")/libfay-probe.so" | grep -o '/[^ ]*libgcc_s[^ ]*')" \
	"$W/r/usr/lib/x86_64-linux-gnu/"
mkdir -p "$W/r/run" "$W/r/tmp" && chmod 1777 "$W/r/tmp"
for i in $(seq "$KIDS"); do mkdir -p "$W/r/w$i"; done
CMD="sh -c 'for i in \$(seq $KIDS); do chroot $W/r /bin/ctr_work /w\$i $CALLS now & done; wait'"
Q='from f in function("libc:getppid") where f.comm == "ctr_work" select { n: count() }'
want="{\"n\":$((KIDS * CALLS))}"

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "load before: $(uptime)"
: >"$W/uprobe" && : >"$W/inline"
for r in $(seq "$RUNS"); do
	for m in uprobe inline; do
		t0=$(date +%s.%N)
		a=$(timeout 300 "$FAY" query --json --probe-mode=$m -c "$CMD" "$Q" 2>"$W/err")
		t1=$(date +%s.%N)
		dt=$(echo "$t1 - $t0" | bc)
		[ "$a" = "$want" ] || { echo "run $r $m: answer $a, want $want: $(tail -3 "$W/err")" >&2; exit 1; }
		echo "$dt" >>"$W/$m"
		printf 'run %d %-6s %6.2f s  %s\n' "$r" "$m" "$dt" "$a"
	done
done
mu=$(median <"$W/uprobe") mi=$(median <"$W/inline")
echo "load after: $(uptime)"
printf 'median: uprobe %.2f s, inline %.2f s, inline / uprobe %.2f (%d runs each, %d children of %d calls)\n' \
	"$mu" "$mi" "$(echo "$mi / $mu" | bc -l)" "$RUNS" "$KIDS" "$CALLS"
