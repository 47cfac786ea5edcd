#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Standing queries' windows are rows of the span store (table
# query_windows), SQLite and ClickHouse alike (#23 item 3):
# - the NDJSON history files of older versions (DB.queries/NAME.ndjson and
#   NAME.ndjson.1) are imported once at start and renamed *.imported; a
#   restart imports nothing again; an import run again (files put back, as
#   a collector killed before the rename leaves them) adds no row;
# - the same history gives identical `fay sql` answers and identical
#   /api/queries/NAME/results on SQLite, one ClickHouse node and a
#   two-shard ClickHouse cluster (query_windows_local + Distributed);
# - --retention drops old windows on all three (SQLite: deleted;
#   ClickHouse: their day partitions dropped), leaving identical answers;
# - a live standing query's windows, merged and each host's own, land in
#   SQLite and in ClickHouse (one agent each).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../lib/clickhouse.bash"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"
W=$BUILD/tests/bin/query_work
[ -x "$W" ] || skip_all "query_work is not built (make)"

ok "a ClickHouse node starts" ch_start one
ok "a two-shard ClickHouse cluster starts" ch_cluster two
NAMES=(sqlite clickhouse clickhouse-2-shards)
CHN=(clickhouse clickhouse-2-shards)
declare -A CHU=([sqlite]="" [clickhouse]="$(ch_url one)" \
	[clickhouse-2-shards]="$(ch_url two1),$(ch_url two2)")
declare -A CHC=([sqlite]="" [clickhouse]="" [clickhouse-2-shards]=two)
declare -A NODES=([clickhouse]=one [clickhouse-2-shards]="two1 two2")
declare -A C_URL C_PID C_WP C_HP

Q='from s in cluster.syscall("getppid") group s by s.host into g select { host: g.key, n: g.count() } window 1s'
NOW=$(date +%s)
# history NAME: the same history files for NAME's collector: 3 windows 5
# days old (.ndjson.1), 4 of a minute ago and a line cut by a crash
# (.ndjson); queries.json keeps 'reads' (no agent: it adds no window)
history() {
	local d=$T_TMP/$1.db.queries
	mkdir -p "$d"
	python3 - "$NOW" "$d" "$Q" <<'PY'
import json, sys
now, d, q = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def line(end_s, n, missing):
    return json.dumps({"type": "window", "t": end_s * 1000 + 120, "start_ns": (end_s - 1) * 10**9,
        "end_ns": end_s * 10**9, "rows": [["a1", n]], "final": False, "provisional": bool(missing),
        "amended": False, "hosts": {"asked": 2, "answered": 2 - len(missing), "late": 0,
        "missing": missing, "failed": []}}, separators=(",", ":"))
old = [line(now - 5 * 86400 + i, i, []) for i in range(3)]
new = [line(now - 60 + i, 10 + i, ["a2"] if i == 2 else []) for i in range(4)]
open(d + "/reads.ndjson.1", "w").write("\n".join(old) + "\n")
open(d + "/reads.ndjson", "w").write("\n".join(new) + "\n" + '{"type":"window","t":17')
json.dump({"queries": [{"name": "reads", "query": q, "grace_ms": 0, "created_ms": 1}]},
          open(d + "/queries.json", "w"))
PY
}

# start NAME ARGS...: its collector (again) on its store
start() {
	local n=$1; shift
	# up to 30 s: on a loaded machine a two-shard ClickHouse's schema
	# check and the shared standing definitions took over 10
	COLL_WAIT=30 FAY_TEST_CH_URLS=${CHU[$n]} FAY_TEST_CH_CLUSTER=${CHC[$n]} \
		coll_start "$T_TMP/$n.db" "$@" || return 1
	C_URL[$n]=$URL C_PID[$n]=$CPID C_WP[$n]=$WP
}
stop() { CPID=${C_PID[$1]}; coll_stop; }
sql() { "$FAY" sql --collector "${C_URL[$1]}" "$2"; }
COLS="name, start_us, end_us, host, asked, answered, missing, provisional, amended, written_us, answer"
all_sql() { sql "$1" "SELECT $COLS FROM query_windows WHERE name = 'reads' ORDER BY end_us"; }
results() { curl -sf "${C_URL[$1]}/api/queries/reads/results?limit=1000"; }
nres() { results "$1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["windows"]))'; }
dbn() { echo "t_$(printf '%s' "$T_TMP/$1.db" | md5sum | cut -c1-16)"; }
# ch_rows NAME [FINAL]: rows of reads in NAME's ClickHouse (physically
# there / one per key), through the Distributed table on a cluster
ch_rows() {
	local n=$1 nodes=(${NODES[$1]})
	ch_q "${nodes[0]}" "SELECT count() FROM $(dbn "$n").query_windows ${2:-} WHERE name = 'reads'"
}
# merged NAME: OPTIMIZE ... FINAL on each node, then 7 rows of reads
merged() {
	local n=$1 nd sfx=${CHC[$1]:+_local}
	for nd in ${NODES[$n]}; do
		ch_q "$nd" "OPTIMIZE TABLE $(dbn "$n").query_windows$sfx FINAL" || return 1
	done
	[ "$(ch_rows "$n")" = 7 ]
}
# parts NAME: day partitions of query_windows on NAME's nodes (summed)
parts() {
	local n=$1 nd sum=0 sfx=${CHC[$1]:+_local}
	for nd in ${NODES[$n]}; do
		sum=$((sum + $(ch_q "$nd" "SELECT count(DISTINCT partition) FROM system.parts WHERE active AND database = '$(dbn "$n")' AND table = 'query_windows$sfx'")))
	done
	echo $sum
}

# ---- import ----
for n in "${NAMES[@]}"; do
	history "$n"
	ok "$n: collector starts on a history of NDJSON files" start "$n" --retention 0
	ok "$n: the import is logged (7 windows)" \
		grep -q "standing query reads: imported 7 windows of $T_TMP/$n.db.queries/reads.ndjson" "$T_TMP/collector.log"
	ok "$n: both files renamed *.imported" bash -c "cd $T_TMP/$n.db.queries && [ -f reads.ndjson.imported ] && [ -f reads.ndjson.1.imported ] && [ ! -e reads.ndjson ] && [ ! -e reads.ndjson.1 ]"
	ok "$n: /api/queries/reads/results has the 7 windows" [ "$(nres "$n")" = 7 ]
done
ok "sqlite: 7 rows in query_windows" [ "$(sql sqlite "SELECT count(*) FROM query_windows" | sed -n 3p | tr -d ' ')" = 7 ]
all_sql sqlite >"$T_TMP/sql.sqlite"
results sqlite >"$T_TMP/res.sqlite"
for n in "${CHN[@]}"; do
	ok "$n: 7 rows in query_windows" [ "$(ch_rows "$n")" = 7 ]
	all_sql "$n" >"$T_TMP/sql.$n"
	grep -q "(7 rows)" "$T_TMP/sql.sqlite" && cmp -s "$T_TMP/sql.sqlite" "$T_TMP/sql.$n" &&
		pass "fay sql: the same 7 rows from SQLite and $n" ||
		fail "fay sql answers differ ($n)" "$(diff "$T_TMP/sql.sqlite" "$T_TMP/sql.$n" | head -20)"
	results "$n" >"$T_TMP/res.$n"
	cmp -s "$T_TMP/res.sqlite" "$T_TMP/res.$n" &&
		pass "/api/queries/reads/results: byte for byte the same from SQLite and $n" ||
		fail "results differ ($n)" "$(head -c 600 "$T_TMP/res.sqlite")" "$(head -c 600 "$T_TMP/res.$n")"
done
python3 - "$T_TMP/res.sqlite" "$NOW" <<'PY' && pass "results: the windows oldest first, the provisional one with its missing host" || fail "results' content"
import json, sys
r = json.load(open(sys.argv[1])); now = int(sys.argv[2])
w = r["windows"]
ends = [x["end_ns"] for x in w]
assert ends == sorted(ends) and len(set(ends)) == 7, ends
assert w[0]["end_ns"] == (now - 5 * 86400) * 10**9, w[0]
assert [x["rows"][0][1] for x in w] == [0, 1, 2, 10, 11, 12, 13], w
assert w[5]["provisional"] and w[5]["hosts"]["missing"] == ["a2"], w[5]
PY
curl -sf "${C_URL[clickhouse]}/api/queries/reads/results?limit=2" | python3 -c '
import json, sys
w = json.load(sys.stdin)["windows"]
assert [x["rows"][0][1] for x in w] == [12, 13], w' && pass "results?limit=2: the last two" || fail "limit=2"

diag "$(date +%T) restarts"
# ---- once: two restarts import nothing; files put back import the same rows ----
for round in 1 2; do
	for n in "${NAMES[@]}"; do stop "$n"; start "$n" --retention 0 || fail "$n: restart $round"; done
done
for n in "${CHN[@]}"; do
	ok "two restarts later: still 7 rows in $n, none written again" [ "$(ch_rows "$n")" = 7 ]
done
ok "... and in SQLite" [ "$(sql sqlite "SELECT count(*) FROM query_windows" | sed -n 3p | tr -d ' ')" = 7 ]
[ "$(grep -c 'standing query reads: imported' "$T_TMP/collector.log")" = 3 ] &&
	pass "the import ran once per store" || fail "imports: $(grep -c 'standing query reads: imported' "$T_TMP/collector.log")"
# as a collector killed after the import and before the renames leaves them
for n in "${NAMES[@]}"; do
	stop "$n"
	(cd "$T_TMP/$n.db.queries" && cp reads.ndjson.imported reads.ndjson && cp reads.ndjson.1.imported reads.ndjson.1)
	start "$n" --retention 0 || fail "$n: restart with the files back"
done
ok "files back: the import runs again" [ "$(grep -c 'standing query reads: imported 7' "$T_TMP/collector.log")" = 6 ]
ok "... SQLite: still 7 rows" [ "$(sql sqlite "SELECT count(*) FROM query_windows" | sed -n 3p | tr -d ' ')" = 7 ]
for n in "${CHN[@]}"; do
	ok "... $n: still 7 windows (FINAL: one row per key)" [ "$(ch_rows "$n" FINAL)" = 7 ]
	results "$n" >"$T_TMP/res2.$n"
	cmp -s "$T_TMP/res.sqlite" "$T_TMP/res2.$n" && pass "... $n's results unchanged (each window once)" ||
		fail "results after the second import ($n)" "$(head -c 600 "$T_TMP/res2.$n")"
	# the second copies are there until a merge (as spans sent twice:
	# clickhouse_cluster_kill.sh); a merge leaves one row per key
	ok "... $n: the merge leaves 7 rows" merged "$n"
done

diag "$(date +%T) retention"
# ---- retention ----
for n in "${NAMES[@]}"; do stop "$n"; start "$n" --retention 2d || fail "$n: --retention 2d"; done
for n in "${NAMES[@]}"; do
	ok "$n: --retention 2d drops the 3 windows of 5 days ago" wait_for 30 bash -c "[ \"\$(curl -sf '${C_URL[$n]}/api/queries/reads/results?limit=1000' | grep -o '\"type\":\"window\"' | wc -l)\" = 4 ]"
done
all_sql sqlite >"$T_TMP/sql2.sqlite"
for n in "${CHN[@]}"; do
	all_sql "$n" >"$T_TMP/sql2.$n"
	grep -q "(4 rows)" "$T_TMP/sql2.sqlite" && cmp -s "$T_TMP/sql2.sqlite" "$T_TMP/sql2.$n" &&
		pass "fay sql after retention: the same 4 rows from SQLite and $n" ||
		fail "fay sql after retention ($n)" "$(diff "$T_TMP/sql2.sqlite" "$T_TMP/sql2.$n" | head -20)"
	ok "$n: the day partition of the old windows is gone" [ "$(parts "$n")" = 1 ]
done

diag "$(date +%T) live"
# ---- live: one agent per collector, a standing query's windows in each store ----
( while :; do "$W" getppid 20 >/dev/null; sleep 0.1; done ) &
T_PIDS+=($!)
for n in sqlite clickhouse; do
	d=$T_TMP/agent-$n
	mkdir -p "$d"
	"$FAY" agent --collector 127.0.0.1:${C_WP[$n]} --host "h-$n" --shm-dir "$d" --state-dir "$d" \
		>>"$T_TMP/agent-$n.log" 2>&1 &
	T_PIDS+=($!)
	peer() { curl -s "${C_URL[$1]}/api/cluster/peers" | grep -q '"host":'; }
	ok "$n: an agent with a query connection" wait_for 30 peer "$n"
	"$FAY" query --cluster "${C_URL[$n]}" --keep live "$Q" >"$T_TMP/o" 2>&1 ||
		fail "$n: --keep live" "$(cat "$T_TMP/o")"
	live_rows() {
		[ "$(sql "$1" "SELECT count(*) FROM query_windows WHERE name = 'live' AND host = '*' AND answered = 1 AND answer LIKE '%\"h-$1\"%'" | sed -n 3p | tr -d ' ')" -ge 3 ]
	}
	ok "$n: live windows are rows of query_windows (fay sql)" wait_for 30 live_rows "$n"
	curl -sf "${C_URL[$n]}/api/queries/live/results?limit=2" | python3 -c '
import json, sys
w = json.load(sys.stdin)["windows"]
assert len(w) == 2 and w[1]["start_ns"] - w[0]["start_ns"] == 10**9, w
assert all(x["hosts"]["asked"] == 1 for x in w), w' &&
		pass "$n: /api/queries/live/results reads them (the last two, aligned)" ||
		fail "$n: live results" "$(curl -s "${C_URL[$n]}/api/queries/live/results?limit=2" | head -c 600)"
	# one host: its own rows are the merged rows of the same window
	host_rows() {
		[ "$(sql "$1" "SELECT count(*) FROM query_windows WHERE name = 'live' AND host = 'h-$1' AND asked = 1 AND answered = 1 AND answer LIKE '%\"h-$1\"%'" | sed -n 3p | tr -d ' ')" -ge 2 ]
	}
	ok "$n: the host's own answers are rows too (host 'h-$n')" wait_for 30 host_rows "$n"
	"$FAY" sql --json --collector "${C_URL[$n]}" "SELECT host, end_us, answer FROM query_windows WHERE name = 'live' ORDER BY end_us, host" | python3 -c '
import json, sys
rows = json.load(sys.stdin)
by = {}
for r in rows:
    by.setdefault(str(r["end_us"]), {})[r["host"]] = json.loads(r["answer"])
both = [v for v in by.values() if "*" in v and len(v) == 2]
# every pair agrees; the first window may be empty (the query was
# installed mid-window), so at least two of them must have rows
for v in both:
    h = [x for k, x in v.items() if k != "*"][0]
    assert h["type"] == "host_window" and h["rows"] == v["*"]["rows"], v
assert len([v for v in both if v["*"]["rows"]]) >= 2, by
' && pass "$n: a host's answer has the merged window's rows (one host)" ||
		fail "$n: host rows" "$("$FAY" sql --collector "${C_URL[$n]}" "SELECT host, end_us, answer FROM query_windows WHERE name = 'live' ORDER BY end_us LIMIT 6")"
	"$FAY" query --cluster "${C_URL[$n]}" --drop live >/dev/null 2>&1
done
for n in "${NAMES[@]}"; do
	CPID=${C_PID[$n]} URL=${C_URL[$n]}
	coll_alive && pass "$n: the collector is up" || fail "$n: collector died"
	stop "$n"
done
done_testing
