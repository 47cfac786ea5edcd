#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# OTLP protobuf ingest, instructions a span stage by stage (callgrind:
# load-independent), of two builds of fay in one run: A (the base, e.g.
# main's) and B (this tree), and B's over A's.
#
#   bench/otlp_callgrind.sh [-s SPANS_PER_REQUEST] [-t SECONDS] [-T pb|grpc|json]
#       FAY_A BENCH_OTLP_A FAY_B BENCH_OTLP_B
#
# Each build's `fay collector` runs under valgrind --tool=callgrind (a
# wrapper given to its own bench_otlp's --fay), taking `bench_otlp -s 512
# -r 1 -t 2 -T pb` (SDK-like spans, 16 traces a request, 1 and 4
# connections).  A stage's figure is its function's inclusive
# instructions over the spans stored (the calls of sq_span_claim, once a
# span): decode (otlp_pb_decode or
# otlp_json_decode), map (otlp_map), the store's preparation on the
# connection thread (store__prepare: 0 in a build without it), the
# store's whole transaction on the writer (sq__write), and in it the
# spans row INSERTs' sqlite3_step.
#
# If valgrind stops at a SIGTRAP in libc (another session's uprobe on the
# system libc), set CG_LIBC_DIR to a directory holding a copy of
# libc.so.6 (another inode, no uprobe): the collector runs with it.
#
#   bench/otlp_callgrind.sh -P N [-s SPANS_PER_REQUEST] BENCH_OTLP_A BENCH_OTLP_B
#
# -P N: decode and map alone, in process, no collector: each bench_otlp
# (built with its own tree's src/otlp) runs `bench_otlp -P N -s SPANS`
# under callgrind with --toggle-collect=pb_rounds; the figures are
# otlp_pb_decode's and otlp_map's inclusive instructions over the N x
# SPANS spans (exact: the same spans every run).  A's bench_otlp must
# know -P: build this tree's bench/bench_otlp.c against A's library.
set -eu
spr=512 secs=2 tr=pb pn=0
while getopts s:t:T:P: o; do
	case $o in s) spr=$OPTARG ;; t) secs=$OPTARG ;; T) tr=$OPTARG ;; P) pn=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
if [ "$pn" != 0 ]; then
	[ $# = 2 ] || { sed -n '/^#   bench\/otlp_callgrind.sh -P/p' "$0" >&2; exit 2; }
	command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
		{ echo "needs valgrind (callgrind_annotate)" >&2; exit 2; }
	work=$(mktemp -d /tmp/fay-otlp-cg.XXXXXX)
	trap 'rm -rf "$work"' EXIT
	# inproc NAME BENCH: prints "decode map"
	inproc() {
		valgrind --tool=callgrind --toggle-collect=pb_rounds \
			--callgrind-out-file="$work/cg.$1" "$2" -P "$pn" -s "$spr" >"$work/$1.out" 2>&1 ||
			{ cat "$work/$1.out" >&2; return 1; }
		callgrind_annotate --inclusive=yes "$work/cg.$1" | awk -v n=$((pn * spr)) '
			/:otlp_pb_decode / && !d { gsub(",", "", $1); d = $1 }
			/:otlp_map / && !m { gsub(",", "", $1); m = $1 }
			END { printf "%.0f %.0f\n", d / n, m / n }'
	}
	read -r da ma < <(inproc A "$1")
	read -r db mb < <(inproc B "$2")
	echo "# otlp_callgrind -P, $(date -u '+%Y-%m-%d %H:%M UTC'), bench_otlp -P $pn -s $spr: $((pn * spr)) spans, decode + map in process"
	printf '%-32s %9s %9s %7s\n' "instructions a span" A B "B/A"
	for r in "decode (otlp_pb_decode) $da $db" "map (otlp_map) $ma $mb" \
		 "decode + map $((da + ma)) $((db + mb))"; do
		set -- $r
		b=${*: -1}; a=${*: -2:1}
		printf '%-32s %9s %9s %7s\n' "${*:1:$#-2}" "$a" "$b" \
			"$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", a ? b / a : 0}')"
	done
	exit 0
fi
[ $# = 4 ] || { sed -n 6,8p "$0" >&2; exit 2; }
command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
	{ echo "needs valgrind (callgrind_annotate)" >&2; exit 2; }
work=$(mktemp -d /tmp/fay-otlp-cg.XXXXXX)
trap 'rm -rf "$work"' EXIT
decode=otlp_pb_decode
[ "$tr" = json ] && decode=otlp_json_decode

# measure NAME FAY BENCH: prints "decode map store step spans prepare"
measure() {
	local name=$1 fay=$2 bench=$3 w=$work/$1
	mkdir -p "$w"
	{
		echo '#!/bin/sh'
		[ -n "${CG_LIBC_DIR:-}" ] && echo "export LD_LIBRARY_PATH='$CG_LIBC_DIR'"
		echo "exec valgrind --tool=callgrind --callgrind-out-file='$w/cg.%p' '$fay' \"\$@\""
	} >"$w/fay"
	chmod +x "$w/fay"
	"$bench" -s "$spr" -r 1 -t "$secs" -T "$tr" --fay "$w/fay" >"$w/bench.out" 2>&1 ||
		{ cat "$w/bench.out" >&2; return 1; }
	sleep 1
	python3 - "$w"/cg.* "$decode" <<'PY'
import re, subprocess, sys
f, decode = sys.argv[1], sys.argv[2]
# calls of sq_span_claim (one a span stored or dropped) from the raw file's cfn/calls lines
names, calls, cur = {}, 0, None
for line in open(f):
    m = re.match(r'c?fn=\((\d+)\)(?: (.*))?', line)
    if m:
        if m.group(2):
            names[m.group(1)] = m.group(2).strip()
        if line.startswith('cfn='):
            cur = names.get(m.group(1))
        continue
    if line.startswith('calls=') and cur == 'sq_span_claim':
        calls += int(line.split('=')[1].split()[0])
        cur = None
out = subprocess.run(['callgrind_annotate', '--inclusive=yes', '--threshold=100', f],
                     capture_output=True, text=True).stdout
ir = {}
for line in out.splitlines():
    m = re.match(r'\s*([\d,]+)\s.*:(\w+)\s', line + ' ')
    if m and m.group(2) not in ir:
        ir[m.group(2)] = int(m.group(1).replace(',', ''))
def per(fn):
    return ir.get(fn, 0) / calls if calls else 0
print(f"{per(decode):.0f} {per('otlp_map'):.0f} {per('sq__write'):.0f} {per('sqlite3_step'):.0f} {calls} {per('store__prepare'):.0f}")
PY
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
read -r da ma sa pa na ra < <(measure A "$1" "$2")
read -r db mb sb pb nb rb < <(measure B "$3" "$4")
echo "# otlp_callgrind, $(date -u '+%Y-%m-%d %H:%M UTC'), bench_otlp -s $spr -r 1 -t $secs -T $tr, load average $load0 (instructions do not depend on it)"
echo "# spans stored: A $na, B $nb"
printf '%-44s %9s %9s %7s\n' "instructions a span" A B "B/A"
row() { printf '%-44s %9s %9s %7s\n' "$1" "$2" "$3" "$(awk -v a="$2" -v b="$3" 'BEGIN {printf "%.3f", a ? b / a : 0}')"; }
row "decode ($decode)" "$da" "$db"
row "map (otlp_map)" "$ma" "$mb"
row "store's preparation (store__prepare)" "$ra" "$rb"
row "connection thread (decode + map + prepare)" "$((da + ma + ra))" "$((db + mb + rb))"
row "store, whole transaction (sq__write)" "$sa" "$sb"
row "  of which sqlite3_step (every statement)" "$pa" "$pb"
row "decode + map + prepare + store" "$((da + ma + ra + sa))" "$((db + mb + rb + sb))"
