#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Schema 4 -> 5 (the spans keyed by trace_seq << 20 | no, the view spans):
# a store written by a fay of schema 4 (tests/data/store/v4.sql.gz, made by
# store_tools/make_v4_store.sh with main's build) is migrated when a
# collector opens it, and then answers every route (store_tools/
# same_answers.py compare: services, every trace, searches with every
# filter, dependencies, dashboard ...) and `fay sql` (SELECT * of spans,
# traces, span_parts, as a table and as JSON) byte for byte as a new
# store fed the same requests; spans added afterwards to a migrated trace
# continue its numbers.  A schema 4 file with a span numbered past what
# the key holds is refused with the reason and left as it was.  And a
# collector killed (-9) in the middle of the migration of a big file
# loses nothing: the file is still schema 4 with every span, and the
# next open migrates it.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"
command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 CLI"
. "$(dirname "$0")/store_tools/v4_feed.bash"

OLD=$T_TMP/old.db NEW=$T_TMP/new.db
ok "the schema 4 store loads (main's build wrote it)" \
	bash -c "gunzip -c '$TOP/tests/data/store/v4.sql.gz' | sqlite3 '$OLD' && [ \"\$(sqlite3 '$OLD' 'PRAGMA user_version')\" = 4 ]"
N4=$(sqlite3 "$OLD" 'SELECT count(*) FROM spans')
ok "... a WITHOUT ROWID spans table of $N4 spans" \
	bash -c "[ $N4 -ge 300 ] && sqlite3 '$OLD' 'SELECT sql FROM sqlite_master WHERE name = \"spans\"' | grep -q 'WITHOUT ROWID'"

# what SQL saw of schema 4's table, to see again of schema 5's view
for q in "SELECT * FROM spans" "SELECT * FROM spans WHERE trace_seq = 7 ORDER BY no DESC"; do
	sqlite3 -header -json "$OLD" "$q" >>"$T_TMP/v4.answers"
done
ok "a collector on a new store" coll_start "$NEW" --retention 0
ok "... the same requests as the old store had" v4_feed "$URL" "127.0.0.1:$WP" "$CLIENT"
coll_stop
ok "a collector on the schema 4 store" coll_start "$OLD" --retention 0
coll_stop
ok "it said it migrated 4 -> 5" grep -q "migrated schema 4 -> 5" "$T_TMP/collector.log"
ok "the file is schema 5" [ "$(sqlite3 "$OLD" 'PRAGMA user_version')" = 5 ]
ok "spans is a view over span_rows, the old table gone" \
	[ "$(sqlite3 "$OLD" "SELECT group_concat(type || ' ' || name, ',') FROM sqlite_master WHERE name IN ('spans', 'span_rows', 'v4_spans')")" = "table span_rows,view spans" ]
ok "every span is there ($N4)" [ "$(sqlite3 "$OLD" 'SELECT count(*) FROM span_rows')" = "$N4" ]

ok "SELECT * FROM spans (and WHERE trace_seq = 7) answer as schema 4's table did, column names included" bash -c "
	for q in 'SELECT * FROM spans' 'SELECT * FROM spans WHERE trace_seq = 7 ORDER BY no DESC'; do
		sqlite3 -header -json '$OLD' \"\$q\"
	done | cmp -s - '$T_TMP/v4.answers' && [ \$(grep -c trace_seq '$T_TMP/v4.answers') -ge 300 ]"

# sql_same Q: fay sql's answer to Q (table and --json) is the same on both
sql_same() {
	local a b fmt
	for fmt in "" --json; do
		a=$("$FAY" sql --db "$OLD" $fmt "$1" 2>&1; echo "exit $?")
		b=$("$FAY" sql --db "$NEW" $fmt "$1" 2>&1; echo "exit $?")
		if [ "$a" != "$b" ] || [ "$(echo "$a" | wc -l)" -lt 3 ]; then
			diff <(echo "$a") <(echo "$b") | head -5 | sed 's/^/# /'
			return 1
		fi
	done
}
for q in "SELECT * FROM spans" "SELECT * FROM traces" "SELECT * FROM span_parts" \
	"SELECT * FROM spans WHERE trace_seq = 3" \
	"SELECT t.trace_lo, s.no, s.name FROM traces t JOIN spans s ON s.trace_seq = t.seq ORDER BY 1, 2"; do
	ok "fay sql '$q': the migrated store answers as the new one" sql_same "$q"
done

coll_start "$OLD" --retention 0 && U_OLD=$URL P_OLD=$CPID
coll_start "$NEW" --retention 0 && U_NEW=$URL P_NEW=$CPID
python3 "$V4_SAME" compare "$V4_BASE_MS" new="$U_NEW" migrated="$U_OLD" >"$T_TMP/same.tap" 2>&1
tap_relay "$T_TMP/same.tap"

# one more span to a trace that was migrated, to both
TID=$(sqlite3 "$OLD" "SELECT printf('%016x%016x', trace_hi, trace_lo) FROM traces WHERE nspans > 3 ORDER BY seq LIMIT 1")
NEXT=$(sqlite3 "$OLD" "SELECT next_no FROM traces WHERE printf('%016x%016x', trace_hi, trace_lo) = '$TID'")
SPAN='[{"traceId":"'$TID'","id":"00000000000abcde","name":"late","timestamp":'$(( V4_BASE_MS * 1000 + 5000 ))',"duration":7,"localEndpoint":{"serviceName":"latecomer"}}]'
for u in "$U_OLD" "$U_NEW"; do
	ok "a late span to migrated trace $TID: 202" \
		[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data "$SPAN" "$u/api/v2/spans")" = 202 ]
done
ok "both answer the trace with it, alike" bash -c "
	a=\$(curl -sf '$U_OLD/api/v2/trace/$TID') && b=\$(curl -sf '$U_NEW/api/v2/trace/$TID') &&
	[ \"\$a\" = \"\$b\" ] && echo \"\$a\" | grep -q latecomer"
kill "$P_OLD" "$P_NEW"; wait "$P_OLD" "$P_NEW" 2>/dev/null
ok "the late span took the trace's next number ($NEXT)" \
	[ "$(sqlite3 "$OLD" "SELECT s.no FROM spans s JOIN traces t ON s.trace_seq = t.seq WHERE s.name = 'late'")" = "$NEXT" ]

# A schema 4 file with a span numbered past what the key holds: refused,
# saying why, and left at schema 4 with its spans.
FULL=$T_TMP/full.db
gunzip -c "$TOP/tests/data/store/v4.sql.gz" | sqlite3 "$FULL"
sqlite3 "$FULL" "UPDATE spans SET no = 1048576 WHERE (trace_seq, no) = (SELECT trace_seq, no FROM spans LIMIT 1)"
timeout 20 "$FAY" collector --listen 127.0.0.1:$(free_port) --http 127.0.0.1:$(free_port) --otlp-http off \
	--otlp-grpc off --db "$FULL" --retention 0 >"$T_TMP/full.log" 2>&1
rc=$?
ok "a schema 4 file with a span numbered 2^20: the collector refuses it (exit $rc)" [ $rc = 1 ]
ok "... saying why (the key's limits, the file stays at 4)" \
	grep -q "migrating the schema: 4 -> 5: 1 spans have .* 2^20 or more.*stays at version 4" "$T_TMP/full.log"
ok "... and it is still schema 4 with its $N4 spans" \
	[ "$(sqlite3 "$FULL" 'PRAGMA user_version')/$(sqlite3 "$FULL" 'SELECT count(*) FROM spans')" = "4/$N4" ]

# A collector killed in the middle of migrating a big file.
BIG=$T_TMP/big.db
sqlite3 "$BIG" < <(gunzip -c "$TOP/tests/data/store/v4.sql.gz")
sqlite3 "$BIG" "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 600000)
	INSERT INTO spans (trace_seq, no, id, kind, name, local_service, start_us, duration_us, extra)
	SELECT 1 + i % 50, 1000 + i, i, 2, 'bulk', 'bulk', $(( V4_BASE_MS * 1000 )) + i, 5, randomblob(40) FROM c;"
NB=$(sqlite3 "$BIG" 'SELECT count(*) FROM spans')
HB=$(sqlite3 "$BIG" 'SELECT sum(id & 65535) || "/" || sum(no) || "/" || total(length(extra)) FROM spans')
: >"$T_TMP/collector.log"
WP=$(free_port) HP=$(free_port)
"$FAY" collector --listen 127.0.0.1:$WP --http 127.0.0.1:$HP --otlp-http off --otlp-grpc off \
	--db "$BIG" --retention 0 >>"$T_TMP/collector.log" 2>&1 &
CPID=$!
T_PIDS+=($CPID)
migrating() { grep -q "migrating schema 4 -> 5" "$T_TMP/collector.log"; }
for _ in $(seq 500); do migrating && break; sleep 0.01; done
kill -9 $CPID
wait $CPID 2>/dev/null
ok "a collector killed -9 while migrating $NB spans (it had not finished)" \
	bash -c "grep -q 'migrating schema 4 -> 5' '$T_TMP/collector.log' && ! grep -q 'migrated schema 4 -> 5' '$T_TMP/collector.log'"
ok "the file is still schema 4" [ "$(sqlite3 "$BIG" 'PRAGMA user_version')" = 4 ]
ok "with every span in its spans table, unchanged" \
	[ "$(sqlite3 "$BIG" 'SELECT count(*) FROM spans')/$(sqlite3 "$BIG" 'SELECT sum(id & 65535) || "/" || sum(no) || "/" || total(length(extra)) FROM spans')" = "$NB/$HB" ]
ok "the next collector migrates it" coll_start "$BIG" --retention 0
coll_stop
ok "... schema 5, the same spans ($NB)" \
	[ "$(sqlite3 "$BIG" 'PRAGMA user_version')/$(sqlite3 "$BIG" 'SELECT count(*) FROM spans')/$(sqlite3 "$BIG" 'SELECT sum(id & 65535) || "/" || sum(no) || "/" || total(length(extra)) FROM spans')" = "5/$NB/$HB" ]
done_testing
