#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Collectors started at the same instant on one ClickHouse database
# (src/store/ch_lock.c, ch_schema.c): the migration runs once, under a
# lock made of CREATE TABLE, and every collector starts.  On a real
# server: a new database and rounds of a schema-1 database with rows
# (each round made anew) under 3 collectors released at once from a
# gate: each answers /health, fay_schema says 1, 2, 3, 4, 5 once, span_index
# has exactly the rows of the schema-1 table keyed by their hashes,
# no table is left behind and the searches answer as on a database
# created at schema 2.  Then the holder killed -9 between the copy and
# the rename (test point FAY_CH_TEST_MIGRATE_KILL=copied): the next two
# collectors find its process gone, one breaks the lock (logged) and
# finishes the migration, the other waits (logged) and starts too.  Then
# a lock of a holder on another machine: kept while a query of its runs
# (system.processes, by its query ids), broken FAY_CH_MIGRATE_STALE_S
# seconds after.  Then 2 rounds of 3 collectors on a two-shard cluster
# (a lock on each node; span_index_local and its Distributed table).
# Last, a holder stopped between the copy and the rename (judged dead by
# its queries) whose lock another breaks: continued, it leaves the
# migration to that one, and both start.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/ch_schema_lib.bash"
command -v flock >/dev/null || skip_all "needs flock (util-linux)"
command -v python3 >/dev/null || skip_all "needs python3"

ROUNDS=${ROUNDS:-4}
BULK=200000     # rows besides the posted spans': a copy long enough to race in
ok "ClickHouse starts" ch_start one

# the base: a database made at schema 2, its spans, its answers
ok "collector up on a new database (base)" ch_coll_start one base
ok "60 spans posted" [ "$(post_all)" = 202 ]
answers >"$T_TMP/base.txt"
coll_stop
# tpl.v1: span_index as a schema-1 build had it: the posted spans, BULK more
BULK_ROWS="SELECT today(), concat('bulk-', toString(number % 37)),
	concat('bulk-op-', toString(number % 11)), $NOW - number, number % 5000,
	number, cityHash64(number) FROM numbers($BULK)"
ch_q one "CREATE DATABASE tpl" &&
ch_q one "CREATE TABLE tpl.v1 $V1_INDEX" &&
ch_q one "INSERT INTO tpl.v1 SELECT day, local_service, name, start_us, duration_us,
	trace_hi, trace_lo FROM base.spans FINAL" &&
ch_q one "INSERT INTO tpl.v1 $BULK_ROWS"
ok "a schema-1 span_index of $((BULK + 60)) rows" \
	[ "$(ch_q one 'SELECT count() FROM tpl.v1')" = $((BULK + 60)) ]
WANT=$(ch_q one "SELECT count(), sum(cityHash64(day, murmurHash2_64(service),
	murmurHash2_64(name), start_us, duration_us, trace_hi, trace_lo)) FROM tpl.v1")

# make_v1 DB: DB as a schema-1 build left it, with base's rows
make_v1() {
	local db=$1 t
	ch_q one "DROP DATABASE IF EXISTS $db" && ch_q one "CREATE DATABASE $db" || return 1
	for t in spans span_parts names agents; do
		ch_q one "CREATE TABLE $db.$t AS base.$t" &&
		ch_q one "INSERT INTO $db.$t SELECT * FROM base.$t" || return 1
	done
	ch_q one "CREATE TABLE $db.span_index $V1_INDEX" &&
	ch_q one "INSERT INTO $db.span_index SELECT * FROM tpl.v1" &&
	schema1_fay one "$db"
}

# store DB: the collector options of database DB on node one, or with
# CLUSTER set on both nodes of that cluster
CLUSTER=
store() {
	if [ -z "$CLUSTER" ]; then
		printf '%s\n' --clickhouse "$(ch_url one)/$1"
	else
		printf '%s\n' --clickhouse "$(ch_url ${CLUSTER}1)/$1,$(ch_url ${CLUSTER}2)/$1" \
			--clickhouse-cluster "$CLUSTER"
	fi
}
# race DB N [VAR=VALUE...]: N collectors on DB, each held at a gate
# (flock) until all are there, then released at once.  RPID[i], RURL[i],
# $T_TMP/race-i.log.
declare -a RPID RURL
race() {
	local db=$1 n=$2 gate i p st
	gate=$T_TMP/gate-$db
	shift 2
	mapfile -t st < <(store "$db")
	exec 9>"$gate"
	flock -x 9
	for ((i = 1; i <= n; i++)); do
		local hp wp
		hp=$(free_port)
		wp=$(free_port)
		RURL[i]=http://127.0.0.1:$hp
		: >"$T_TMP/race-$i.log"
		env "$@" bash -c 'flock -s "$0" true && exec "$@"' "$gate" \
			"$FAY" collector --listen 127.0.0.1:$wp --http 127.0.0.1:$hp \
			--otlp-http off --otlp-grpc off --db "$T_TMP/$db-$i.db" \
			"${st[@]}" >"$T_TMP/race-$i.log" 2>&1 &
		RPID[i]=$!
		T_PIDS+=($!)
	done
	# every one waits at the gate (its flock child) before the release
	for ((i = 1; i <= n; i++)); do
		p=${RPID[i]}
		wait_for 30 bash -c "ps --ppid $p -o comm= | grep -qx flock" ||
			diag "collector $i not seen at the gate"
	done
	flock -u 9
	exec 9>&-
}
# up I: collector I answers /health (30 s), or says why it is not running
up() {
	local i=$1 end=$((SECONDS + 30))
	while [ $SECONDS -lt $end ]; do
		curl -sf "${RURL[i]}/health" >/dev/null && return 0
		if ! kill -0 "${RPID[i]}" 2>/dev/null; then
			diag "collector $i exited: $(grep -m2 -i 'error\|schema' "$T_TMP/race-$i.log")"
			return 1
		fi
		sleep 0.1
	done
	diag "collector $i: no /health in 30 s: $(tail -2 "$T_TMP/race-$i.log")"
	return 1
}
stop_all() {
	local i
	for i in "${!RPID[@]}"; do
		kill "${RPID[i]}" 2>/dev/null
		wait "${RPID[i]}" 2>/dev/null
	done
	RPID=()
}
versions() {
	ch_q one "SELECT groupArray(version) FROM (SELECT version FROM $1.fay_schema ORDER BY version)"
}
# leftovers DB: tables of DB other than the schema's
leftovers() {
	ch_q one "SELECT groupArray(name) FROM system.tables WHERE database = '$1'
		AND name NOT IN ('spans', 'span_index', 'span_parts', 'names', 'agents', 'query_windows', 'standing_queries', 'standing_lease', 'collectors', 'fay_schema')"
}
index_sum() {
	ch_q one "SELECT count(), sum(cityHash64(day, service_h, name_h, start_us, duration_us,
		trace_hi, trace_lo)) FROM $1.span_index"
}
# migrated DB N WHAT: the checks after N collectors migrated DB
migrated() {
	local db=$1 n=$2 what=$3 i bad=0
	for ((i = 1; i <= n; i++)); do
		up $i || bad=1
	done
	ok "$what: all $n collectors up" [ $bad = 0 ]
	ok "$what: fay_schema 1, 2, 3, 4, 5: migrated once" [ "$(versions "$db")" = "[1,2,3,4,5]" ]
	local got
	got=$(index_sum "$db")
	ok "$what: span_index has each schema-1 row once, by its hashes" [ "$got" = "$WANT" ] ||
		diag "count, sum: $(echo $got) want $(echo $WANT)"
	ok "$what: no table left behind" [ "$(leftovers "$db")" = "[]" ] ||
		diag "left: $(leftovers "$db")"
	bad=0
	for ((i = 1; i <= n; i++)); do
		[ -n "${RPID[i]:-}" ] || continue
		answers "${RURL[i]}" >"$T_TMP/got-$i.txt" 2>/dev/null
		cmp -s "$T_TMP/base.txt" "$T_TMP/got-$i.txt" || { diag "collector $i answers otherwise"; bad=1; }
	done
	ok "$what: every collector's searches answer as before" [ $bad = 0 ]
	grep -h "migrat\|lock" "$T_TMP"/race-*.log | sed 's/^/#   /' | head -8
}

# 1. a new database: 3 collectors at once
race fresh 3
bad=0
for i in 1 2 3; do up $i || bad=1; done
ok "new database: all 3 collectors up" [ $bad = 0 ]
ok "new database: fay_schema 1, 2, 3, 4, 5 once" [ "$(versions fresh)" = "[1,2,3,4,5]" ] ||
	diag "fay_schema: $(versions fresh)"
ok "new database: no table left behind" [ "$(leftovers fresh)" = "[]" ]
stop_all

# 2. rounds of a schema-1 database, 3 collectors at once
for ((r = 1; r <= ROUNDS; r++)); do
	ok "round $r: a schema-1 database" make_v1 r$r || continue
	race r$r 3
	migrated r$r 3 "round $r"
	stop_all
done

# 3. the holder killed -9 between the copy and the rename
make_v1 k1
race k1 1 FAY_CH_TEST_MIGRATE_KILL=copied
gone() { ! kill -0 "${RPID[1]}" 2>/dev/null; }
wait_for 60 gone || { diag "the holder did not stop at the test point: killed"; kill "${RPID[1]}"; }
wait "${RPID[1]}" 2>/dev/null
rc=$?
ok "killed at the test point: SIGKILL (rc $rc)" [ $rc = 137 ]
ok "... after the copy: its log says so" \
	grep -q "test point FAY_CH_TEST_MIGRATE_KILL: killed at 'copied'" "$T_TMP/race-1.log"
ok "... left the copy and its lock (span_index_v2, fay_migrate_lock_1)" \
	[ "$(leftovers k1)" = "['fay_migrate_lock_1','span_index_v2']" ]
ok "... fay_schema still 1" [ "$(versions k1)" = "[1]" ]
RPID=()
race k1 2
migrated k1 2 "after the kill"
ok "... one broke the dead holder's lock, saying why" \
	grep -q "breaking the migration lock fay_migrate_lock_1 of .*: its process is gone" \
	"$T_TMP/race-1.log" "$T_TMP/race-2.log"
stop_all

# 4. a lock whose holder, on another machine, runs a query for 6 s (as a
# long copy would) and then none: not broken while the query runs, broken
# FAY_CH_MIGRATE_STALE_S=2 seconds after
make_v1 k2
QID=fay-migrate-elsewhere-4242-1
ch_q one "CREATE TABLE k2.fay_migrate_lock_1 ENGINE = Log AS SELECT
	'elsewhere pid 4242' AS holder, 'no-such-boot' AS boot_id, '' AS pidns,
	toUInt32(4242) AS pid, toUInt64(1) AS start, toUInt64(now()) * 1000000 AS since_us,
	'$QID' AS qid"
curl -sf "$(ch_url one)/?query_id=$QID-7&max_block_size=1" \
	--data-binary "SELECT sleep(2) FROM numbers(3)" >/dev/null &
QPID=$!
running() { [ "$(ch_q one "SELECT count() FROM system.processes WHERE query_id = '$QID-7'")" = 1 ]; }
wait_for 10 running || diag "the holder's query is not seen running"
race k2 1 FAY_CH_MIGRATE_STALE_S=2
wait $QPID
ok "a lock whose holder runs a query (6 s) is not broken (bound 2 s)" \
	[ "$(leftovers k2)" = "['fay_migrate_lock_1']" ]
migrated k2 1 "foreign stale lock"
ok "... it said what it waited for" \
	grep -q "waiting for the migration lock fay_migrate_lock_1 of elsewhere pid 4242" "$T_TMP/race-1.log"
ok "... and broke it 2 s after the holder's last query" \
	grep -q "breaking the migration lock fay_migrate_lock_1 of elsewhere pid 4242: no query of it for 2 s" \
	"$T_TMP/race-1.log"
stop_all

# 5. a two-shard cluster (span_index_local on each node under a
# Distributed span_index; the posted spans' rows where they were written,
# BULK_ROWS split between the nodes): a lock a node, 3
# collectors at once, 2 rounds
ok "a two-shard ClickHouse cluster starts" ch_cluster two
CLUSTER=two
mapfile -t CST < <(store cb)
COLL_WAIT=30
ok "collector up on a new database of the cluster" coll_start "$T_TMP/cb.db" "${CST[@]}"
ok "60 spans posted to it" [ "$(post_all)" = 202 ]
coll_stop
# cluster_v1: cb as a schema-1 build left it, on both nodes; WANT_n the
# count and sum of node n's rows by their hashes
declare -A CWANT
cluster_v1() {
	local n
	for n in two1 two2; do
		ch_q $n "DROP TABLE IF EXISTS cb.span_index" &&
		ch_q $n "DROP TABLE IF EXISTS cb.span_index_local" &&
		ch_q $n "CREATE TABLE cb.span_index_local $V1_INDEX" &&
		ch_q $n "INSERT INTO cb.span_index_local SELECT day, local_service, name, start_us,
			duration_us, trace_hi, trace_lo FROM cb.spans_local FINAL" &&
		ch_q $n "INSERT INTO cb.span_index_local $BULK_ROWS
			WHERE number % 2 = ${n#two} - 1" &&
		ch_q $n "CREATE TABLE cb.span_index AS cb.span_index_local
			ENGINE = Distributed(two, cb, span_index_local, trace_lo)" &&
		schema1_fay $n cb || return 1
		CWANT[$n]=$(ch_q $n "SELECT count(), sum(cityHash64(day, murmurHash2_64(service),
			murmurHash2_64(name), start_us, duration_us, trace_hi, trace_lo))
			FROM cb.span_index_local")
	done
	[ "$(ch_q two1 'SELECT count() FROM cb.span_index')" = $((BULK + 60)) ]
}
for r in 1 2; do
	ok "cluster round $r: a schema-1 database on both shards ($((BULK + 60)) rows)" cluster_v1 || continue
	race cb 3
	bad=0
	for i in 1 2 3; do up $i || bad=1; done
	ok "cluster round $r: all 3 collectors up" [ $bad = 0 ]
	bad=0
	for n in two1 two2; do
		[ "$(ch_q $n 'SELECT groupArray(version) FROM (SELECT version FROM cb.fay_schema ORDER BY version)')" = "[1,2,3,4,5]" ] ||
			{ diag "$n: fay_schema $(ch_q $n 'SELECT groupArray(version) FROM cb.fay_schema')"; bad=1; }
		got=$(ch_q $n "SELECT count(), sum(cityHash64(day, service_h, name_h, start_us,
			duration_us, trace_hi, trace_lo)) FROM cb.span_index_local")
		[ "$got" = "${CWANT[$n]}" ] || { diag "$n: span_index_local $(echo $got), want $(echo ${CWANT[$n]})"; bad=1; }
		left=$(ch_q $n "SELECT groupArray(name) FROM system.tables WHERE database = 'cb'
			AND (name LIKE 'span_index_v%' OR name LIKE 'fay_migrate_lock%')")
		[ "$left" = "[]" ] || { diag "$n: left $left"; bad=1; }
	done
	ok "cluster round $r: on each shard fay_schema 1, 2, 3, 4, 5, every row once by its hashes, nothing left" [ $bad = 0 ]
	ok "cluster round $r: the Distributed span_index reads the new columns" \
		[ "$(ch_q two1 "SELECT count() FROM cb.span_index WHERE service_h = murmurHash2_64('frontend')")" = 10 ]
	bad=0
	for i in 1 2 3; do
		answers "${RURL[i]}" >"$T_TMP/got-$i.txt" 2>/dev/null
		cmp -s "$T_TMP/base.txt" "$T_TMP/got-$i.txt" || { diag "collector $i answers otherwise"; bad=1; }
	done
	ok "cluster round $r: every collector's searches answer as on one node" [ $bad = 0 ]
	stop_all
done

# 6. a holder stopped (SIGSTOP, test point FAY_CH_TEST_MIGRATE_STOP) between
# the copy and the rename, in a pid namespace of its own (a holder
# "elsewhere": judged by its queries): a second collector breaks its lock
# FAY_CH_MIGRATE_STALE_S=2 s after its last query and migrates; the first,
# continued, finds its lock gone at that point, leaves its migration there
# and starts on the database the second made
CLUSTER=
make_v1 k3
mapfile -t ST < <(store k3)
AHP=$(free_port)
FAY_CH_TEST_MIGRATE_STOP=copied unshare --pid --fork --kill-child bash -c '"$@"; exit $?' _ \
	"$FAY" collector --listen 127.0.0.1:$(free_port) --http 127.0.0.1:$AHP --otlp-http off \
	--otlp-grpc off --db "$T_TMP/k3-a.db" "${ST[@]}" >"$T_TMP/stop-a.log" 2>&1 &
UPID=$!
# unshare --fork blocks SIGTERM (t_cleanup's): SIGKILL takes it, and
# --kill-child the namespace, down
trap 'kill -9 $UPID 2>/dev/null; t_cleanup' EXIT
# the collector's pid here: unshare's grandchild (bash is the namespace's 1)
APID=
stopped() {
	local b
	b=$(ps --ppid $UPID -o pid= | tr -d ' ')
	[ -n "$b" ] && APID=$(ps --ppid "$b" -o pid= | tr -d ' ')
	[ -n "$APID" ] && [ "$(awk '{ print $3 }' "/proc/$APID/stat" 2>/dev/null)" = T ]
}
ok "a holder in its own pid namespace stopped itself after the copy" wait_for 60 stopped
ok "... its log says so" grep -q "test point FAY_CH_TEST_MIGRATE_STOP: stopped at 'copied'" \
	"$T_TMP/stop-a.log"
race k3 1 FAY_CH_MIGRATE_STALE_S=2
ok "a second collector starts" up 1
ok "... having broken the stopped holder's lock 2 s after its last query" \
	grep -q "breaking the migration lock fay_migrate_lock_1 of .*: no query of it for 2 s" \
	"$T_TMP/race-1.log"
kill -CONT "$APID" 2>/dev/null
ok "the first, continued, starts too" wait_for 30 curl -sf "http://127.0.0.1:$AHP/health"
ok "... having found its lock gone at 'copied' and stopped its migration there" \
	grep -q "fay_migrate_lock_1 is no longer ours at 'copied'" "$T_TMP/stop-a.log"
ok "fay_schema 1, 2, 3, 4, 5: migrated once" [ "$(versions k3)" = "[1,2,3,4,5]" ]
ok "span_index has each schema-1 row once, by its hashes" [ "$(index_sum k3)" = "$WANT" ]
ok "no table left behind" [ "$(leftovers k3)" = "[]" ] || diag "left: $(leftovers k3)"
answers "http://127.0.0.1:$AHP" >"$T_TMP/got-a.txt" 2>/dev/null
answers "${RURL[1]}" >"$T_TMP/got-b.txt" 2>/dev/null
ok "both answer as before" bash -c 'cmp -s "$1" "$2" && cmp -s "$1" "$3"' _ \
	"$T_TMP/base.txt" "$T_TMP/got-a.txt" "$T_TMP/got-b.txt"
grep -h "migrat\|lock" "$T_TMP/stop-a.log" | sed 's/^/#   /'
stop_all
kill -9 "$UPID" 2>/dev/null
wait "$UPID" 2>/dev/null
done_testing
