#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/bench_store against a ClickHouse server of its own: starts Debian's
# clickhouse-server with the tests' config (tests/lib/clickhouse.bash: its
# own data directory and free loopback ports), runs bench_store with the
# server's pid (for its CPU time) and the arguments given, prints the load
# average before and after, and stops the server.
#
#   bench/store.sh [-n SPANS] [-b BATCH] [-r RUNS] [-q QUERIES] ...
#   (run from the top of the tree after `make bench`; FAY_BUILD as for tests)
. "$(dirname "$0")/../tests/lib/lib.sh"
. "$(dirname "$0")/../tests/lib/clickhouse.bash"
# the server's data and the SQLite file on disk, not in /tmp (tmpfs on
# some machines, and test clean-ups sweep /tmp/fay-test.*)
rmdir "$T_TMP"
T_TMP=$(mktemp -d /var/tmp/fay-bench-store.XXXXXX)
BENCH=$BUILD/bench/bench_store
[ -x "$BENCH" ] || { echo "bench/store.sh: no $BENCH (make bench)" >&2; exit 1; }
ch_start bench >/dev/null || { echo "bench/store.sh: clickhouse-server did not start" >&2; exit 1; }
echo "# $(date -u '+%F %T UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
	"ClickHouse $(ch_q bench 'SELECT version()')"
"$BENCH" --clickhouse "$(ch_url bench)/fay_bench" --ch-pid "${CH_PID[bench]}" \
	--db "$T_TMP/bench.db" "$@"
rc=$?
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
