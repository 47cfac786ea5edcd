#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The SQLite store's WAL stays bounded under sustained ingest
# (src/store/sqlite.c, the checkpoint thread): PASSIVE checkpoints alone
# never let the WAL start again from its beginning while the writer keeps
# committing, so it grew with everything ingested (345-630 MB for 1.6 M
# spans).  A real collector takes 1.2 M spans from 8 agents as fast as
# they come, shaped like real traces (random trace ids); the WAL, sampled
# every 50 ms, must stay under 128 MiB (a RESTART checkpoint at 64 MiB
# plus the commit that crossed it) while trace searches and service lists
# read the store all along, and every ACKed span is in the store.  Then
# a reader keeps a read transaction open through another 1 000 000 spans:
# the WAL cannot start again meanwhile, and the writer must not wait for
# it at every commit; once the reader is gone, the WAL file is cut back.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
[ -z "${FAY_TEST_CH_URLS:-}" ] || skip_all "the SQLite store's WAL (no ClickHouse run)"

DB=$T_TMP/wal.db
ok "collector up" coll_start "$DB"
# the WAL's largest size while the collector runs, in $T_TMP/wal.max
(
	max=0
	while kill -0 "$CPID" 2>/dev/null && [ ! -e "$T_TMP/stop" ]; do
		s=$(stat -c %s "$DB-wal" 2>/dev/null || echo 0)
		[ "$s" -gt "$max" ] && { max=$s; echo "$max" >"$T_TMP/wal.max"; }
		sleep 0.05
	done
) &
T_PIDS+=($!)
# readers all along: searches and service lists on the HTTP API
(
	n=0
	while [ ! -e "$T_TMP/stop" ]; do
		curl -sf "$URL/api/v2/traces?serviceName=wiretest-3&limit=10" >/dev/null &&
		curl -sf "$URL/api/v2/services" >/dev/null && n=$((n + 2))
	done
	echo "$n" >"$T_TMP/queries"
) &
T_PIDS+=($!)
"$CLIENT" -a "127.0.0.1:$WP" -c 8 -n 150 -m 1000 -k 8 -W 16 send >"$T_TMP/send.out" 2>&1
touch "$T_TMP/stop"
wait_for 10 test -s "$T_TMP/queries"
diag "queries answered meanwhile: $(cat "$T_TMP/queries")"
ok "the store answered queries during the ingest" [ "$(cat "$T_TMP/queries")" -gt 10 ]
ok "1200 batches of 1000 spans, each ACKed stored whole" \
	[ "$(acked "$T_TMP/send.out" 1000)" = 1200 ]
diag "$(grep '^rate' "$T_TMP/send.out")"
max=$(cat "$T_TMP/wal.max" 2>/dev/null || echo 0)
diag "largest WAL: $((max / 1048576)) MiB ($max bytes)"
ok "the WAL grew (the sampler saw it)" [ "$max" -gt $((16 * 1048576)) ]
ok "the WAL stayed under 128 MiB" [ "$max" -lt $((128 * 1048576)) ]
ok "every span is in the store" \
	[ "$("$FAY" sql --db "$DB" 'SELECT count(*) FROM spans' | sed -n 3p | tr -d ' ')" = 1200000 ]

# a reader that keeps the WAL (a read transaction open for the whole
# ingest): no RESTART can get through, and the writer must not wait for
# one at every commit (it did: 68 000 spans/s instead of 250 000)
rate1=$(awk '/^rate/ { print $2 }' "$T_TMP/send.out")
python3 -c '
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN")
c.execute("SELECT count(*) FROM traces").fetchone()
open(sys.argv[2], "w").write("reading\n")
time.sleep(60)
' "$DB" "$T_TMP/reading" &
reader=$!
T_PIDS+=($reader)
wait_for 10 test -s "$T_TMP/reading"
"$CLIENT" -a "127.0.0.1:$WP" -c 8 -s 151 -n 125 -m 1000 -k 8 -W 16 send >"$T_TMP/send2.out" 2>&1
kill $reader
rate2=$(awk '/^rate/ { print $2 }' "$T_TMP/send2.out")
diag "with a reader holding the WAL: $rate2 spans/s, without: $rate1"
ok "1000 more batches ACKed with the reader holding the WAL" \
	[ "$(acked "$T_TMP/send2.out" 1000)" = 1000 ]
ok "... at more than 40% of the rate without it" [ $((rate2 * 5)) -gt $((rate1 * 2)) ]

# the reader gone, the WAL it made grow is cut back (journal_size_limit)
# by the first commit after the next RESTART: wait out the back-off of a
# failed RESTART, then ingest again
wal2=$(stat -c %s "$DB-wal")
diag "WAL after the reader: $((wal2 / 1048576)) MiB"
sleep 5.5
"$CLIENT" -a "127.0.0.1:$WP" -c 4 -s 276 -n 25 -m 1000 -k 8 -W 16 send >"$T_TMP/send3.out" 2>&1
ok "100 more batches ACKed" [ "$(acked "$T_TMP/send3.out" 1000)" = 100 ]
wal3=$(stat -c %s "$DB-wal")
diag "WAL then: $((wal3 / 1048576)) MiB"
ok "the WAL grew behind the reader (past 160 MiB)" [ "$wal2" -gt $((160 * 1048576)) ]
ok "... and is cut back to 128 MiB once it is gone" [ "$wal3" -le $((128 * 1048576)) ]
coll_stop
ok "the store opens again, with every trace" \
	[ "$("$FAY" sql --db "$DB" 'SELECT count(*) FROM traces' | sed -n 3p | tr -d ' ')" = 287500 ]
done_testing
