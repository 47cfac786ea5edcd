#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two collectors side by side on one ClickHouse database (not a tree: as
# two behind a load balancer), each with two agent hosts of its own in
# network namespaces (tests/lib/netns.bash), share a standing query
# (#23): the lease's holder asks the other collector for its hosts'
# answers (it links to the holder as a child collector to its parent,
# its address from the store's collectors table), so
# - every window counts the four hosts of both (asked 4, answered 4,
#   nothing missing), and the calls each host made are its rows exactly
#   (each host runs its own copy of the workload: its own truth);
# - each window is written once;
# - the other collector killed -9: its two hosts are missing in the next
#   windows (asked 4, answered 2), never left out;
# - started again, it is back; the holder killed -9: the other takes the
#   lease, covers its own hosts exactly and counts the dead one's missing.
# Off loopback a collector wants tokens: every hop here carries one.
HERE=$(dirname "$0")
. "$HERE/../lib/lib.sh"
. "$TOP/tests/lib/netns.bash"
ns_need_query_work
command -v python3 >/dev/null || skip_all "needs python3"
. "$HERE/../lib/clickhouse.bash"
ns_init

ns_hosts h1 h2 h3 h4
ns_root || { fail "the root namespace on the switch"; done_testing; exit; }
ROOT=$(ns_ip root)
pass "4 hosts: h1 $(ns_ip h1), h2 $(ns_ip h2), h3 $(ns_ip h3), h4 $(ns_ip h4); collectors at $ROOT"
ok "a ClickHouse node starts" ch_start one
DBURL=$(ch_url one)/flat
chq() { ch_q one "$1"; }

# each collector's own token (--token, to the other when it links to it)
# is in the other's file
printf 'agt write agents\ncolb write b\ncli read,probe client\n' >"$T_TMP/tokens.A"
printf 'agt write agents\ncola write a\ncli read,probe client\n' >"$T_TMP/tokens.B"
echo agt >"$T_TMP/agent.tok"
echo cli >"$T_TMP/cli.tok"
chmod 600 "$T_TMP/tokens.A" "$T_TMP/tokens.B" "$T_TMP/agent.tok" "$T_TMP/cli.tok"
AUTH="Authorization: Bearer cli"

declare -A WP HP PID
for x in A B; do WP[$x]=$(free_port); HP[$x]=$(free_port); done
# kill9 X: collector X (timeout's child) killed -9, and gone
kill9() {
	kill -9 $(pgrep -P "${PID[$1]}") 2>/dev/null
	wait "${PID[$1]}" 2>/dev/null
	! kill -0 "${PID[$1]}" 2>/dev/null
}
# start X: collector X on its own ports (the same again after a kill)
start() {
	timeout 600 nice -n 10 "$FAY" collector --listen "$ROOT:${WP[$1]}" --http "127.0.0.1:${HP[$1]}" \
		--otlp-http off --otlp-grpc off --db "$T_TMP/$1.db" --clickhouse "$DBURL" \
		--token-file "$T_TMP/tokens.$1" --token "col${1,,}" >>"$T_TMP/$1.log" 2>&1 &
	PID[$1]=$!
	T_PIDS+=(${PID[$1]})
	wait_for 30 curl -sf "http://127.0.0.1:${HP[$1]}/health" ||
		{ diag "$(tail -n 5 "$T_TMP/$1.log")"; return 1; }
}
ok "collector A starts on ClickHouse database flat" start A
ok "collector B starts on the same database" start B

declare -A ON=([h1]=A [h2]=A [h3]=B [h4]=B)
for h in h1 h2 h3 h4; do
	mkdir -p "$T_TMP/$h"
	cp "$W" "$T_TMP/$h/qw"
	( cd "$T_TMP/$h" && exec ip netns exec "$NS_PREFIX-$h" timeout 600 "$FAY" agent \
		--collector "$ROOT:${WP[${ON[$h]}]}" --host $h --shm-dir "$T_TMP/$h" \
		--state-dir "$T_TMP/$h" --token-file "$T_TMP/agent.tok" --no-containers ) \
		>"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
done
# peers X H...: X's query connections include hosts H...
peers() {
	local j x=$1; shift
	j=$(curl -sf -H "$AUTH" "http://127.0.0.1:${HP[$x]}/api/cluster/peers") || return 1
	for h in "$@"; do [[ $j == *"\"host\":\"$h\""* ]] || return 1; done
}
ok "A has h1 and h2" wait_for 30 peers A h1 h2
ok "B has h3 and h4" wait_for 30 peers B h3 h4

Q='from c in cluster.function("./qw:fay_work_fn") group c by c.host into g select { host: g.key, n: g.count() } window 1s'
"$FAY" query --cluster "http://127.0.0.1:${HP[A]}" --token-file "$T_TMP/cli.tok" --keep calls "$Q" \
	>"$T_TMP/keep" 2>&1 && pass "fay query --cluster A --keep calls" || fail "--keep on A" "$(cat "$T_TMP/keep")"
# runs X: X's /api/queries says it runs calls
runs() {
	curl -sf -H "$AUTH" "http://127.0.0.1:${HP[$1]}/api/queries" | python3 -c '
import json, sys
q = [x for x in json.load(sys.stdin) if x["name"] == "calls"]
sys.exit(0 if q and q[0]["runs"] else 1)'
}
one_runs() { runs A && ! runs B && R=A O=B || { runs B && ! runs A && R=B O=A; }; }
ok "exactly one of A and B runs it" wait_for 30 one_runs
one_runs || { diag "$(tail -n 20 "$T_TMP/A.log" "$T_TMP/B.log")"; done_testing; exit; }
declare -A HOSTS=([A]="h1 h2" [B]="h3 h4")
diag "holder: $R (${HOSTS[$R]}), beside it: $O (${HOSTS[$O]})"
# (each collector writes its row at its next beat: waited for)
both_rows() { [ "$(chq "SELECT count() FROM (SELECT id, argMax(hosts, ver) AS h FROM flat.collectors GROUP BY id) WHERE h IN ('[\"h1\",\"h2\"]', '[\"h2\",\"h1\"]', '[\"h3\",\"h4\"]', '[\"h4\",\"h3\"]')")" = 2 ]; }
ok "the store's collectors table has both, each with its hosts" wait_for 30 both_rows

now_us() { echo $(( $(date +%s%N) / 1000 )); }
# wins FROM [TO]: the merged windows ending in (FROM, TO] (us) as lines
# "end asked answered missing(sorted, comma-joined) host=n,...", oldest first
wins() {
	chq "SELECT end_us, asked, answered, missing, answer FROM flat.query_windows FINAL WHERE name = 'calls' AND host = '*' AND end_us > $1 AND end_us <= ${2:-18446744073709551615} ORDER BY end_us FORMAT TSVRaw" |
	python3 -c '
import json, sys
for l in sys.stdin:
    end, asked, answered, missing, answer = l.rstrip("\n").split("\t", 4)
    rows = json.loads(answer).get("rows", [])
    print(end, asked, answered, ",".join(sorted(json.loads(missing))) or "-",
          ",".join("%s=%s" % (r[0], r[1]) for r in sorted(rows)) or "-")'
}
# sums FROM: each host's calls summed over the windows ending after FROM
sums() { wins "$1" | awk '$5 != "-" { n = split($5, a, ","); for (i = 1; i <= n; i++) { split(a[i], kv, "="); s[kv[1]] += kv[2] } } END { for (h in s) print h "=" s[h] }' | sort | paste -sd, -; }
# a window ending after FROM with asked ASKED, answered ANSWERED, missing MISSING
has_win() { wins "$1" | awk -v a="$2" -v b="$3" -v m="$4" '$2 == a && $3 == b && $4 == m { f = 1 } END { exit !f }'; }

T0=$(now_us)
ok "windows with the 4 hosts of both collectors, none missing" wait_for 40 has_win "$T0" 4 4 -
TF=$(wins "$T0" | awk '$2 == 4 && $3 == 4 && $4 == "-" { print $1; exit }')
# each host runs its own copy of the workload: K calls, counted by its agent only
declare -A K=([h1]=100 [h2]=200 [h3]=300 [h4]=400)
for h in h1 h2 h3 h4; do "$T_TMP/$h/qw" calls ${K[$h]} >/dev/null; done
WANT=h1=100,h2=200,h3=300,h4=400
sums_are() { [ "$(sums "$1")" = "$2" ]; }
ok "each host's calls exactly, across the windows: $WANT" wait_for 30 sums_are "$TF" "$WANT" ||
	diag "sums: $(sums "$TF")"
# at least 3 windows after the first full one (on a quiet machine the
# sums are right after 2, and the check below wants 3 to say "every")
three() { [ "$(wins "$TF" | wc -l)" -ge 3 ]; }
wait_for 30 three
T1=$(now_us)
wait_for 10 has_win "$(( T1 + 2000000 ))" 4 4 -
full() { wins "$TF" "$T1" | awk '!($2 == 4 && $3 == 4 && $4 == "-") { bad++ } END { exit bad > 0 || NR < 3 }'; }
ok "every window since has all 4 hosts answered, none missing ($(wins "$TF" "$T1" | wc -l) windows)" full ||
	diag "$(wins "$TF" "$T1" | head -20)"
dups() { chq "SELECT count() - uniqExact(end_us, host) FROM flat.query_windows WHERE name = 'calls'"; }
ok "each window written once (no two rows of one end and host)" [ "$(dups)" = 0 ]

# ---- the collector beside the holder dies: its hosts are missing ----
diag "$(date +%T) $O killed -9"
kill9 "$O"
T2=$(now_us)
MISS=$(echo ${HOSTS[$O]} | tr ' ' ',')
ok "$O killed -9: its hosts $MISS missing in the next windows (asked 4, answered 2)" \
	wait_for 30 has_win "$T2" 4 2 "$MISS"
T3=$(now_us)
wait_for 10 has_win "$(( T3 + 3000000 ))" 4 2 "$MISS"
T4=$(now_us)
missing_all() { wins "$(( T2 + 3000000 ))" "$T4" | awk -v m="$MISS" '!($2 == 4 && $3 == 2 && $4 == m) { bad++ } END { exit bad > 0 || NR < 2 }'; }
ok "... in every window after it (none says fewer hosts were asked)" missing_all ||
	diag "$(wins "$T2" "$T4" | head -20)"
ok "$R runs on" runs "$R"

# ---- back, then the holder dies: the other takes over ----
ok "$O started again" start "$O"
ok "... its agents connect again (their back-off)" wait_for 60 peers "$O" ${HOSTS[$O]}
T5=$(now_us)
ok "... its hosts answer again (4 of 4)" wait_for 40 has_win "$T5" 4 4 - ||
	diag "$(wins "$T5" | tail -n 5)"
diag "$(date +%T) $R killed -9"
kill9 "$R"
T6=$(now_us)
ok "$R killed -9: $O takes the lease over and runs calls" wait_for 40 runs "$O"
MISS=$(echo ${HOSTS[$R]} | tr ' ' ',')
ok "... its windows count $R's hosts $MISS missing (asked 4, answered 2)" \
	wait_for 30 has_win "$T6" 4 2 "$MISS"
T7=$(wins "$T6" | awk -v m="$MISS" '$2 == 4 && $3 == 2 && $4 == m { print $1; exit }')
set -- ${HOSTS[$O]}
for h in "$@"; do "$T_TMP/$h/qw" calls 50 >/dev/null; done
ok "... and its own hosts' calls exactly: $1=50,$2=50" wait_for 30 sums_are "$T7" "$1=50,$2=50" ||
	diag "sums: $(sums "$T7")"
ok "no window written twice across it all" [ "$(dups)" = 0 ]
kill "${PID[$O]}"
wait "${PID[$O]}" 2>/dev/null
ok "$O stopped cleanly: its row says gone" [ "$(chq "SELECT argMax(gone, ver) FROM flat.collectors WHERE id = '$ROOT:${WP[$O]}' GROUP BY id")" = 1 ]
done_testing
