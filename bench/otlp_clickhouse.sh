#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# OTLP into ClickHouse against SQLite, beside the agent protocol's same
# ratio, in one run (issue 26: "into ClickHouse, the same ratio to SQLite
# as the agent protocol gets").
#
#   bench/otlp_clickhouse.sh [-r ROUNDS] [-t SECONDS] [-s SPANS_PER_REQUEST]
#   (from the top of the tree after `make` and
#    `make build/bench/bench_otlp`; FAY_BUILD as for tests)
#
# 1. The agent protocol: bench/collector_store.sh with the shapes of the
#    OTLP bench's cells: 1 and 4 agents, batches of SPANS, one in flight
#    each (-W 1), traces of 32 spans; SQLite and ClickHouse runs
#    alternating, ROUNDS each: its ratio of medians for each.
# 2. OTLP: build/bench/bench_otlp -s SPANS --clickhouse (a clickhouse-server
#    of this script's own, a fresh database), every cell on SQLite then on
#    ClickHouse, for HTTP protobuf, gRPC and HTTP JSON (1 and 4
#    connections): each cell's ClickHouse/SQLite ratio.  Between
#    transports the server finishes its merges (as collector_store.sh
#    does after each run), so a transport does not pay for the parts of
#    the one before.
# Then each OTLP cell's ratio over the agent protocol's with as many
# senders: 1.00 is "the same ratio".
. "$(dirname "$0")/../tests/lib/lib.sh"
. "$(dirname "$0")/../tests/lib/clickhouse.bash"
BENCH=$BUILD/bench/bench_otlp
[ -x "$FAY" ] && [ -x "$BENCH" ] || { echo "otlp_clickhouse.sh: build first (make; make $BENCH)" >&2; exit 1; }
rounds=3 secs=1 spr=512
while getopts r:t:s: o; do
	case $o in r) rounds=$OPTARG ;; t) secs=$OPTARG ;; s) spr=$OPTARG ;;
	*) echo "usage: bench/otlp_clickhouse.sh [-r ROUNDS] [-t SECONDS] [-s SPANS]" >&2; exit 2 ;;
	esac
done
echo "# otlp_clickhouse, $(date -u '+%F %T UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"

declare -A ra
for c in 1 4; do
	echo "## 1. agent protocol: bench/collector_store.sh -c $c -n $((160 / c)) -m $spr -k 32 -W 1 -r $rounds"
	agent=$("$(dirname "$0")/collector_store.sh" -c $c -n $((160 / c)) -m "$spr" -k 32 -W 1 -r "$rounds") ||
		{ echo "otlp_clickhouse.sh: collector_store.sh failed" >&2; exit 1; }
	printf '%s\n' "$agent" | sed 's/^/    /'
	ra[$c]=$(printf '%s\n' "$agent" | awk '/^ratio clickhouse\/sqlite \(medians\)/ { sub(/x$/, "", $4); print $4 }')
	[ -n "${ra[$c]}" ] || { echo "otlp_clickhouse.sh: no ratio from collector_store.sh" >&2; exit 1; }
done

ch_start otlp >/dev/null || { echo "otlp_clickhouse.sh: clickhouse-server did not start" >&2; exit 1; }
out=$T_TMP/otlp.out
: >"$out"
for tr in pb grpc json; do
	echo "## 2. OTLP: bench_otlp -s $spr -r $rounds -t $secs -T $tr --clickhouse (load $(cut -d' ' -f1 /proc/loadavg))"
	"$BENCH" -s "$spr" -r "$rounds" -t "$secs" -T "$tr" --fay "$FAY" \
		--clickhouse "$(ch_url otlp)/otlp_$tr" | tee -a "$out" | sed 's/^/    /'
	ch_q otlp "DROP DATABASE IF EXISTS otlp_$tr" >/dev/null
	for ((i = 0; i < 600; i++)); do
		[ "$(ch_q otlp 'SELECT count() FROM system.merges')" = 0 ] && break
		sleep 0.1
	done
done
echo
echo "| spans/request | connections | transport | OTLP ClickHouse/SQLite | agent protocol ClickHouse/SQLite, as many senders | OTLP's over the agent's |"
echo "|---|---|---|---:|---:|---:|"
# bench_otlp's ClickHouse table: its last column is "ClickHouse / SQLite"
awk -v ra1="${ra[1]}" -v ra4="${ra[4]}" -F'|' '/^into fay collector \(ClickHouse/ { seen = 1 }
	/^into fay collector \(SQLite/ { seen = 0 }
	seen && /^\| *[0-9]/ && NF > 6 {
		r = $(NF - 1); gsub(/[ x]/, "", r)
		ra = $3 + 0 == 1 ? ra1 : ra4
		if (r ~ /^[0-9.]+$/)
			printf "|%s|%s|%s| %.2f | %.2f | %.2f |\n", $2, $3, $4, r, ra, r / ra
	}' "$out"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
