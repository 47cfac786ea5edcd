#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two collectors on one ClickHouse database share the standing queries'
# definitions (tables standing_queries and standing_lease, #23 item 3):
# - a query kept on A is listed by B (read from the store within 2 s);
# - exactly one of them runs it (the lease's holder), so each window is
#   written once: query_windows holds one row per (end, host), no copy;
#   the other links to it (table collectors), so its host answers in the
#   holder's windows too (standing_flat.sh tests that across namespaces);
# - the runner killed -9, the other takes the lease over (10 s) and the
#   windows go on, now its own host's; the killed one started again lists
#   the query and does not run it; a runner stopped gives the lease back;
#   a collector under a parent never runs them;
# - dropped on B, it is gone on A, and the store keeps the drop;
# - a collector's queries.json of before (definitions kept beside its own
#   store) goes into the store at its first start and is renamed.
HERE=$(dirname "$0")
. "$HERE/../lib/lib.sh"
need_root
W=$BUILD/tests/bin/query_work
[ -x "$W" ] || skip_all "query_work is not built (make)"
command -v python3 >/dev/null || skip_all "needs python3"
. "$HERE/../lib/clickhouse.bash"
. "$HERE/collector_lib.bash"

ok "a ClickHouse node starts" ch_start one
DBURL=$(ch_url one)/sq
declare -A C_URL C_PID C_WP
# start X: collector X (its own --db, so its own DB.queries) on database sq
start() {
	COLL_WAIT=30 coll_start "$T_TMP/$1.db" --clickhouse "$DBURL" || return 1
	C_URL[$1]=$URL C_PID[$1]=$CPID C_WP[$1]=$WP
}
# agent X: an agent named h$X on collector X
agent() {
	local d=$T_TMP/agent-$1
	mkdir -p "$d"
	"$FAY" agent --collector 127.0.0.1:${C_WP[$1]} --host "h$1" --shm-dir "$d" --state-dir "$d" \
		--no-containers >>"$d.log" 2>&1 &
	T_PIDS+=($!)
	URL=${C_URL[$1]} wait_for 30 coll_peers "h$1"
}
# listed X NAME [RUNS]: does X's /api/queries list NAME (with runs RUNS)?
listed() {
	curl -sf "${C_URL[$1]}/api/queries" | python3 -c '
import json, sys
q = [x for x in json.load(sys.stdin) if x["name"] == sys.argv[1]]
sys.exit(0 if q and (len(sys.argv) < 3 or str(q[0]["runs"]).lower() == sys.argv[2]) else 1)' "${@:2}"
}
gone() { ! listed "$@" && curl -sf "${C_URL[$1]}/api/queries" >/dev/null; }
chq() { ch_q one "$1"; }
# merged windows of calls answered by N hosts (N: ${N:-1}), host H among
# them, written after T (us)
windows_of() { chq "SELECT count() FROM sq.query_windows FINAL WHERE name = 'calls' AND host = '*' AND answered = ${N:-1} AND answer LIKE '%\"$1\"%' AND written_us > ${2:-0}"; }
ge() { [ "$(windows_of "$1" "${3:-0}")" -ge "$2" ]; }
ge2() { N=2 ge "$@"; }

ok "collector A starts on ClickHouse database sq" start A
ok "collector B starts on the same database" start B
ok "agent hA on A" agent A
ok "agent hB on B" agent B
( while :; do "$W" getppid 20 >/dev/null; sleep 0.1; done ) &
T_PIDS+=($!)

Q='from s in cluster.syscall("getppid") group s by s.host into g select { host: g.key, n: g.count() } window 1s'
"$FAY" query --cluster "${C_URL[A]}" --keep calls "$Q" >"$T_TMP/keep" 2>&1 &&
	pass "fay query --cluster A --keep calls" || fail "--keep on A" "$(cat "$T_TMP/keep")"
ok "A lists calls" listed A calls
ok "B lists calls (read from the store)" wait_for 30 listed B calls
ok "the definition is a row of standing_queries" [ "$(chq "SELECT argMax(query, ver) FROM sq.standing_queries WHERE name = 'calls' GROUP BY name")" = "$Q" ]
one_runs() { listed A calls true && listed B calls false && R=A O=B || { listed B calls true && listed A calls false && R=B O=A; }; }
ok "exactly one of A and B runs it" wait_for 30 one_runs
one_runs
diag "runner: $R"
ok "its windows are rows of query_windows, with its own host h$R ..." wait_for 30 ge2 "h$R" 4
ok "... and the other's host h$O, asked through the other collector's link" ge2 "h$O" 4
# each window written once: no copy of a key, even before any merge
dups() { chq "SELECT count() - uniqExact(end_us, host) FROM sq.query_windows WHERE name = 'calls'"; }
ok "each window written once (no two rows of one end and host)" [ "$(dups)" = 0 ]
ok "the host's own rows are there too (host h$R)" [ "$(chq "SELECT count() FROM sq.query_windows WHERE name = 'calls' AND host = 'h$R'")" -ge 3 ]
ok "... and the other collector's, under its address" [ "$(chq "SELECT count() FROM sq.query_windows WHERE name = 'calls' AND host = '127.0.0.1:${C_WP[$O]}'")" -ge 3 ]
# (a window may land between the two reads: read again until they agree)
same_results() {
	local a b
	a=$(curl -sf "${C_URL[A]}/api/queries/calls/results?limit=3") &&
	b=$(curl -sf "${C_URL[B]}/api/queries/calls/results?limit=3") &&
	printf '%s\n' "$a" >"$T_TMP/results.A"
	printf '%s\n' "$b" >"$T_TMP/results.B"
	[ "$a" = "$b" ] && [[ $a == *'"type":"window"'* ]]
}
ok "/api/queries/calls/results is the same on A and B" wait_for 30 same_results ||
	diag "A: $(head -c 600 "$T_TMP/results.A") B: $(head -c 600 "$T_TMP/results.B")"

diag "$(date +%T) the runner dies"
# ---- the runner dies: the other takes over ----
kill -9 "${C_PID[$R]}"
wait "${C_PID[$R]}" 2>/dev/null
T0=$(( $(date +%s%N) / 1000 ))
ok "$R killed: $O takes the lease over and runs calls" wait_for 30 listed "$O" calls true
ok "... its windows go on, with its own host h$O" wait_for 30 ge "h$O" 3 "$T0"
ok "no window written twice across the take-over" [ "$(dups)" = 0 ]
ok "$R started again" start "$R"
ok "... lists calls without running it ($O holds the lease)" wait_for 30 listed "$R" calls false
sleep_until() { [ "$(date +%s)" -ge "$1" ]; }
wait_for 10 sleep_until $(( $(date +%s) + 4 ))
ok "... and still does not run it (two syncs later)" listed "$R" calls false

diag "$(date +%T) drop"
# ---- dropped on B, gone on A ----
curl -sf -X DELETE "${C_URL[B]}/api/queries/calls" >/dev/null &&
	pass "DELETE /api/queries/calls on B" || fail "drop on B"
ok "B no longer lists it" gone B calls
ok "A no longer lists it (within a sync)" wait_for 30 gone A calls
ok "the store keeps the drop (deleted = 1, its newest row)" [ "$(chq "SELECT argMax(deleted, ver) FROM sq.standing_queries WHERE name = 'calls' GROUP BY name")" = 1 ]
N1=$(chq "SELECT count() FROM sq.query_windows WHERE name = 'calls' AND host = '*'")
wait_for 10 sleep_until $(( $(date +%s) + 3 ))
N2=$(chq "SELECT count() FROM sq.query_windows WHERE name = 'calls' AND host = '*'")
ok "no window written after the drop ($N1, then $N2)" [ "$N1" = "$N2" ]
ok "its windows stay in the store ($N2)" [ "$N2" -ge 4 ]
"$FAY" query --cluster "${C_URL[A]}" --keep calls "$Q" >"$T_TMP/keep2" 2>&1 &&
	pass "the name can be kept again on A" || fail "keep again" "$(cat "$T_TMP/keep2")"
ok "... and B lists it again" wait_for 30 listed B calls

diag "$(date +%T) queries.json"
# ---- a queries.json of before goes into the store ----
mkdir -p "$T_TMP/C.db.queries"
python3 - "$T_TMP/C.db.queries/queries.json" "${Q/getppid/getpid}" <<'PY'
import json, sys
json.dump({"queries": [{"name": "old", "query": sys.argv[2], "grace_ms": 0, "created_ms": 5}]},
          open(sys.argv[1], "w"))
PY
ok "collector C starts with a queries.json of its own" start C
ok "... its definition is in the store, listed by A" wait_for 30 listed A old
ok "... the file renamed queries.json.imported" [ -f "$T_TMP/C.db.queries/queries.json.imported" -a ! -e "$T_TMP/C.db.queries/queries.json" ]
ok "C lists calls, kept on A" listed C calls
for x in A B C; do
	CPID=${C_PID[$x]} URL=${C_URL[$x]}
	coll_alive && pass "$x is up" || fail "$x died"
done
diag "$(date +%T) stop"
# a collector that stops gives the lease back: the next takes it at its
# next sync, without waiting for the lease to run out
runner() { for x in A B C; do listed "$x" calls true && echo "$x" && return; done; }
R=$(runner)
if [ -n "$R" ]; then
	CPID=${C_PID[$R]} coll_stop
	others() { for x in A B C; do [ "$x" != "$R" ] && listed "$x" calls true && return 0; done; return 1; }
	ok "$R stopped: it gave the lease back" grep -q "standing queries: the lease given back" "$T_TMP/collector.log"
	ok "... and another runs calls" wait_for 30 others
else
	fail "no collector runs calls"
fi
# a collector under a parent (--parent) lists them but never takes the
# lease (its parent's run reaches its hosts), even once it is free
COLL_WAIT=30 coll_start "$T_TMP/D.db" --clickhouse "$DBURL" --parent "127.0.0.1:${C_WP[A]}" --host dcoll &&
	C_URL[D]=$URL C_PID[D]=$CPID && pass "collector D starts under A (--parent)" || fail "D under A"
ok "D lists calls" wait_for 30 listed D calls false
for x in A B C; do CPID=${C_PID[$x]} coll_stop; done
free_lease() { [ "$(chq "SELECT argMax(until_us, ver) < toUInt64(now()) * 1000000 FROM sq.standing_lease GROUP BY lease")" = 1 ]; }
ok "A, B and C stopped: the lease is free" wait_for 30 free_lease
wait_for 10 sleep_until $(( $(date +%s) + 5 ))
ok "... and D, under a parent, does not take it (two syncs later)" listed D calls false
CPID=${C_PID[D]} coll_stop
done_testing
