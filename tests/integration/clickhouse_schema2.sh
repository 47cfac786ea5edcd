#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ClickHouse schema 2 (src/store/ch_schema.c): span_index keys spans by
# the murmurHash2_64 of their service and span name.  On a real server:
# a new database is created at schema 1 and migrated to 2 at once; the
# keys the collector computes are the server's murmurHash2_64 (for names
# of 1 to 20 bytes); trace search by service, span name and duration
# answers from them; and a database left at schema 1 (its span_index
# with the names as strings, rows in it) is migrated in place at the
# next start: the rows kept, the search answering the same, the old
# table gone, and a later start does nothing more.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/ch_schema_lib.bash"

ok "ClickHouse starts" ch_start one
# 1. a new database
ok "collector up on a new database" ch_coll_start one s2
ok "the log says schema 0, then the server's features" \
	grep -q "database s2 at schema 0: TTL no" "$T_TMP/collector.log"
ok "fay_schema: 1, 2, 3, 4, 5" [ "$(ch_q one 'SELECT groupArray(version) FROM (SELECT version FROM s2.fay_schema ORDER BY version)')" = "[1,2,3,4,5]" ]
ok "span_index has service_h and name_h, no strings" \
	[ "$(ch_q one "SELECT groupArray(name) FROM system.columns WHERE database = 's2' AND table = 'span_index' AND type = 'String'")" = "[]" ]
ok "60 spans posted" [ "$(post_all)" = 202 ]
bad=0
for s in $SERVICES; do
	n=$(ch_q one "SELECT count() FROM s2.span_index WHERE service_h = murmurHash2_64('$s')")
	[ "$n" = 10 ] || { diag "$s (${#s} bytes): $n rows by the server's hash, want 10"; bad=1; }
done
ok "span_index keys are the server's murmurHash2_64 (names of 1 to 20 bytes)" [ $bad = 0 ]
ok "... span names too" \
	[ "$(ch_q one "SELECT count() FROM s2.span_index WHERE name_h = murmurHash2_64('op-4')")" = 6 ]
answers >"$T_TMP/new.txt"
diag "searches: $(tr '\n' '|' <"$T_TMP/new.txt")"
ok "search by service: frontend's 5 traces" [ "$(sed -n 1p "$T_TMP/new.txt" | wc -w)" = 5 ]
ok "... service and span name: one trace" \
	[ "$(sed -n 2p "$T_TMP/new.txt")" = "$(printf '%016x' $((20 * 100 + 3)))" ]
ok "... service and minDuration: 3 traces" [ "$(sed -n 3p "$T_TMP/new.txt" | wc -w)" = 3 ]
ok "... span name alone: one trace a service" [ "$(sed -n 4p "$T_TMP/new.txt" | wc -w)" = 6 ]
ok "... a span name nobody has: none" [ -z "$(sed -n 5p "$T_TMP/new.txt")" ]
coll_stop

# 2. a database at schema 1: put s2 back as a schema-1 build left it
# (span_index with the names as strings, its rows from spans; fay_schema 1)
ch_q one "RENAME TABLE s2.span_index TO s2.span_index_new" &&
ch_q one "CREATE TABLE s2.span_index $V1_INDEX" &&
ch_q one "INSERT INTO s2.span_index SELECT day, local_service, name, start_us,
	duration_us, trace_hi, trace_lo FROM s2.spans FINAL" &&
ch_q one "DROP TABLE s2.span_index_new" &&
schema1_fay one s2
ok "a schema-1 database made (60 rows in its span_index)" \
	[ "$(ch_q one 'SELECT count() FROM s2.span_index')" = 60 ]
: >"$T_TMP/collector.log"
ok "collector up on it" ch_coll_start one s2
ok "the log says schema 1" grep -q "database s2 at schema 1:" "$T_TMP/collector.log"
ok "fay_schema now ends at 5" [ "$(ch_q one 'SELECT max(version) FROM s2.fay_schema')" = 5 ]
ok "span_index migrated: 60 rows, keyed by the hashes" \
	[ "$(ch_q one "SELECT count(), countIf(service_h = murmurHash2_64('frontend')) FROM s2.span_index" | tr '\t' ' ')" = "60 10" ]
ok "no table left behind" \
	[ "$(ch_q one "SELECT count() FROM system.tables WHERE database = 's2' AND name LIKE 'span_index_%'")" = 0 ]
answers >"$T_TMP/migrated.txt"
ok "every search answers as before the migration" cmp "$T_TMP/new.txt" "$T_TMP/migrated.txt"
coll_stop
ok "collector up again" ch_coll_start one s2
ok "... nothing migrated twice (fay_schema 1, 2, 3, 4, 5)" \
	[ "$(ch_q one 'SELECT count() FROM s2.fay_schema')" = 5 ]
answers >"$T_TMP/again.txt"
ok "... the same answers" cmp "$T_TMP/new.txt" "$T_TMP/again.txt"
coll_stop
done_testing
