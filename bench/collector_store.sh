#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The collector's whole write path, SQLite vs ClickHouse, in one run: a
# real `fay collector` receives the same batches over the agent protocol
# (tests' fay-wire-client: AGENTS connections, BATCHES batches of SPANS
# spans each, WINDOW in flight, fixed span times so both stores get the
# same spans), ACK after the store accepted them; once with --db (SQLite),
# once with --clickhouse (a clickhouse-server of its own, fresh database
# each run), RUNS times alternating.  Prints per run the spans/s the
# client measured (first BATCH to last ACK), the CPU seconds of the
# collector and of the ClickHouse server, then the medians and their
# ratio.  After a ClickHouse run the bench waits until the server has no
# merge left (the next run must not share the CPU with them), counts
# their CPU too, and gives a second rate: the spans over the client's
# time plus that tail (until idle), and its ratio.  Extra ARGS go to the
# ClickHouse collector (--clickhouse-linger 0 to compare without the
# linger).  -k K: traces of K spans shaped like real ones (fay-wire-client
# -k: random-looking ids, 20 services, 50 span names; default 8); -k 0: a
# batch's spans are one trace with an id in sequence (the shape of results
# before 2026-11-26 evening: it lets SQLite's trace-id index append).
# -d DIR: where both stores and the server's data go (default /var/tmp;
# e.g. a journaled ext4: on ext4 without a journal every new file's inode
# is checked against the ones deleted in the last minutes, and ClickHouse
# makes ~100 files a write).
#
#   bench/collector_store.sh [-c AGENTS] [-n BATCHES] [-m SPANS] [-k SPANS_A_TRACE]
#                            [-W WINDOW] [-d DIR]
#                            [-r RUNS] [-- COLLECTOR_ARGS...]
#   (run from the top of the tree after `make`; FAY_BUILD as for tests)
. "$(dirname "$0")/../tests/lib/lib.sh"
. "$(dirname "$0")/../tests/lib/clickhouse.bash"
CLIENT=$BUILD/tests/fay-wire-client
[ -x "$FAY" ] && [ -x "$CLIENT" ] || { echo "collector_store.sh: build first (make)" >&2; exit 1; }
rmdir "$T_TMP"
conns=8 nb=50 m=500 win=8 runs=3 dir=/var/tmp per_trace=8
while [ $# -gt 0 ]; do
	case $1 in
	-d) dir=$2; shift 2 ;;
	-k) per_trace=$2; shift 2 ;;
	-c) conns=$2; shift 2 ;;
	-n) nb=$2; shift 2 ;;
	-m) m=$2; shift 2 ;;
	-W) win=$2; shift 2 ;;
	-r) runs=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: bench/collector_store.sh [-c AGENTS] [-n BATCHES] [-m SPANS] [-k K] [-W WINDOW] [-r RUNS] [-d DIR] [-- ARGS]" >&2
	   exit 2 ;;
	esac
done
T_TMP=$(mktemp -d "$dir/fay-bench-cstore.XXXXXX")
extra=("$@")
ch_start bench >/dev/null || { echo "collector_store.sh: clickhouse-server did not start" >&2; exit 1; }
spans=$((conns * nb * m))
echo "# $(date -u '+%F %T UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
	"ClickHouse $(ch_q bench 'SELECT version()')"
echo "# $conns agents x $nb batches x $m spans = $spans spans, $([ "$per_trace" = 0 ] && echo "a batch one trace" || echo "traces of $per_trace"), window $win, runs $runs," \
	"ClickHouse collector args: ${extra[*]:-(defaults)}"

# cpu_s PID: user+system CPU seconds of a process so far
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"; }

# one STORE N: start a collector on STORE, send, print "rate cpu server_cpu"
one() {
	local store=$1 k=$2 wp hp pid args rate c0 s0 s1 ccpu writes
	wp=$(free_port) hp=$(free_port)
	if [ "$store" = sqlite ]; then
		args=(--db "$T_TMP/s$k.db")
	else
		args=(--db "$T_TMP/c$k.db" --clickhouse "$(ch_url bench)/b$k" "${extra[@]}")
	fi
	"$FAY" collector --listen 127.0.0.1:$wp --http 127.0.0.1:$hp --otlp-http off \
		--otlp-grpc off --retention 0 "${args[@]}" >>"$T_TMP/collector.log" 2>&1 &
	pid=$!
	wait_for 30 curl -sf "http://127.0.0.1:$hp/health" || { echo "collector did not start" >&2; kill $pid; return 1; }
	s0=$(cpu_s "${CH_PID[bench]}")
	c0=$(cpu_s $pid)
	rate=$("$CLIENT" -a 127.0.0.1:$wp -c "$conns" -n "$nb" -m "$m" -k "$per_trace" -W "$win" \
		-T 1764000000000000000 -q send | awk '/^rate/ { print $2 }')
	ccpu=$(awk -v a="$(cpu_s $pid)" -v b="$c0" 'BEGIN { printf "%.2f", a - b }')
	writes=$(curl -s "http://127.0.0.1:$hp/metrics" | awk '$1 == "fay_collector_store_writes_total" { print $2 }')
	s1=$(awk -v a="$(cpu_s "${CH_PID[bench]}")" -v b="$s0" 'BEGIN { printf "%.2f", a - b }')
	kill $pid; wait $pid 2>/dev/null
	rm -rf "$T_TMP/s$k.db"*
	tail=0 s2=0
	if [ "$store" = ch ]; then
		# the merges the run left behind: until the server has none
		# (part of the ingest's cost; the next run must not share the
		# CPU with them), then the database goes
		t0=$(date +%s%N)
		while [ "$(ch_q bench 'SELECT count() FROM system.merges')" != 0 ] &&
		      [ $(( ($(date +%s%N) - t0) / 1000000000 )) -lt 300 ]; do
			sleep 0.05
		done
		tail=$(( ($(date +%s%N) - t0) / 1000000 ))
		s2=$(awk -v a="$(cpu_s "${CH_PID[bench]}")" -v b="$s0" 'BEGIN { printf "%.2f", a - b }')
		ch_q bench "DROP DATABASE b$k" >/dev/null
	fi
	# until idle: the spans over the client's time plus the merge tail
	idle=$(awk -v r="$rate" -v n="$spans" -v t="$tail" 'BEGIN { printf "%.0f", n / (n / r + t / 1000) }')
	echo "$rate $ccpu $s1 $writes $idle $tail $s2"
}

med() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
: >"$T_TMP/sqlite" ; : >"$T_TMP/ch" ; : >"$T_TMP/sqlite.idle" ; : >"$T_TMP/ch.idle"
for ((k = 0; k < runs; k++)); do
	for store in sqlite ch; do
		[ $((k % 2)) = 1 ] && store=$([ $store = sqlite ] && echo ch || echo sqlite)
		read -r rate ccpu scpu writes idle tail s2 < <(one $store $k) || exit 1
		echo "$rate" >>"$T_TMP/$store"
		echo "$idle" >>"$T_TMP/$store.idle"
		printf 'run %d %-10s %9.0f spans/s  cpu: collector %6.2f s (%.2f us/span)' $k \
			"$([ $store = ch ] && echo clickhouse || echo sqlite)" "$rate" "$ccpu" \
			"$(awk -v c="$ccpu" -v n=$spans 'BEGIN { print c * 1e6 / n }')"
		[ $store = ch ] && printf ', server %6.2f s (%.2f us/span), %6.2f s (%.2f us/span) with the %d ms of merges after: %.0f spans/s until idle' \
			"$scpu" "$(awk -v c="$scpu" -v n=$spans 'BEGIN { print c * 1e6 / n }')" \
			"$s2" "$(awk -v c="$s2" -v n=$spans 'BEGIN { print c * 1e6 / n }')" "$tail" "$idle"
		[ $store = sqlite ] && printf ' (the idle ClickHouse server meanwhile: %.2f s)' "$scpu"
		printf '  %s writes (%d spans each)  load %s\n' "$writes" $((spans / (writes ? writes : 1))) \
			"$(cut -d' ' -f1 /proc/loadavg)"
	done
done
ms=$(med <"$T_TMP/sqlite") mc=$(med <"$T_TMP/ch")
mci=$(med <"$T_TMP/ch.idle")
echo "sqlite     collector median $ms spans/s"
echo "clickhouse collector median $mc spans/s (ACKed), $mci spans/s until the server is idle"
awk -v a="$mc" -v b="$ms" 'BEGIN { printf "ratio clickhouse/sqlite (medians) %.2fx\n", a / b }'
awk -v a="$mci" -v b="$ms" 'BEGIN { printf "ratio clickhouse/sqlite until idle (medians) %.2fx\n", a / b }'
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$T_TMP"
