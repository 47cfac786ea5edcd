#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Probe events in keep mode across hosts (#22 item 4): a collector and
# three agent hosts, each in its own network namespace.  A standing query
# in keep mode ('... keep 30s max 250') on a uprobe of the workload
# (each host runs its own copy: ./qw in the agent's directory, so each
# host's events are its own, exactly) keeps every event on its host:
#  - nothing is sent: the query's hosts keep exactly the calls made on
#    them (100, 200, 300 in stats.json: keep.added), h3 over its bound
#    (max 250: 50 overwritten, exactly);
. "$(dirname "$0")/../lib/lib.sh"
. "$TOP/tests/lib/netns.bash"
ns_need_query_work
command -v python3 >/dev/null || skip_all "needs python3"
ns_init

ns_hosts root h1 h2 h3
pass "4 hosts: root $(ns_ip root), h1 $(ns_ip h1), h2 $(ns_ip h2), h3 $(ns_ip h3)"
printf 'agt write agents\ncli read,probe client\n' >"$T_TMP/tokens"
echo agt >"$T_TMP/agent.tok"
echo cli >"$T_TMP/cli.tok"
chmod 600 "$T_TMP/tokens" "$T_TMP/agent.tok" "$T_TMP/cli.tok"
ok "collector up" ns_collector root "$T_TMP/root.log" --db "$T_TMP/root.db" \
	--token-file "$T_TMP/tokens" || { done_testing; exit; }
declare -A K=([h1]=100 [h2]=200 [h3]=300)
for h in h1 h2 h3; do
	mkdir -p "$T_TMP/$h"
	cp "$W" "$T_TMP/$h/qw"
	( cd "$T_TMP/$h" && exec ip netns exec "$NS_PREFIX-$h" timeout 900 "$FAY" agent \
		--collector "$(ns_ip root):9410" --host $h --shm-dir "$T_TMP/$h" \
		--state-dir "$T_TMP/$h" --stats-interval 200ms --token-file "$T_TMP/agent.tok" ) \
		>"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
done
CL=(--cluster http://127.0.0.1:9411 --token-file "$T_TMP/cli.tok")
peers() { [ "$(ns_run root curl -s -H "Authorization: Bearer cli" http://127.0.0.1:9411/api/cluster/peers | grep -o '"host":' | wc -l)" -ge 3 ]; }
ok "the collector has h1, h2 and h3" wait_for 30 peers || { done_testing; exit; }

# kstat HOST KEY: a number of that host's stats.json "keep" (0: none)
kstat() {
	python3 - "$T_TMP/$1/stats.json" "$2" <<'PY'
import json, sys
try: print(int(json.load(open(sys.argv[1]))["keep"][sys.argv[2]]))
except Exception: print(0)
PY
}
kstat_eq() { [ "$(kstat "$1" "$2")" -eq "$3" ]; }
all_kstat_eq() {	# KEY VALUE: on every host
	local h
	for h in h1 h2 h3; do kstat_eq $h "$1" "$2" || return 1; done
}

KQ='from c in cluster.function("./qw:fay_work_fn") select { host: c.host, i: c.arg(0) } keep 30s max 250'
ns_run root "$FAY" query "${CL[@]}" --keep kq "$KQ" >"$T_TMP/keep.out" 2>&1
ok "a standing query in keep mode is registered" grep -q '^standing query kq' "$T_TMP/keep.out" ||
	diag "$(cat "$T_TMP/keep.out")"

go=$T_TMP/go
for h in h1 h2 h3; do
	( cd "$T_TMP/$h" && QW_WAIT=$go exec ./qw calls ${K[$h]} ) & T_PIDS+=($!)
	eval "QW_$h=$!"
done
ok "every host runs it in keep mode (keep.queries 1)" wait_for 60 all_kstat_eq queries 1 ||
	diag "$(tail -5 "$T_TMP/h1.log")"
sleep 1
touch "$go"
for h in h1 h2 h3; do eval "wait \$QW_$h"; done
added_ok() { kstat_eq h1 added 100 && kstat_eq h2 added 200 && kstat_eq h3 added 300; }
ok "each host kept exactly its own calls (100, 200, 300 seen)" wait_for 30 added_ok ||
	diag "h1 $(kstat h1 added), h2 $(kstat h2 added), h3 $(kstat h3 added)"
ok "... held 100, 200 and 250 (h3's bound)" bash -c '[ "$1 $2 $3" = "100 200 250" ]' _ \
	"$(kstat h1 held)" "$(kstat h2 held)" "$(kstat h3 held)"
ok "... h3 overwrote exactly 50, the others none" bash -c '[ "$1 $2 $3" = "0 0 50" ]' _ \
	"$(kstat h1 overwritten)" "$(kstat h2 overwritten)" "$(kstat h3 overwritten)"

# ---- an ad hoc cluster query in keep mode sends no event -------------------
AQ='from c in cluster.function("./qw:fay_work_fn") select { host: c.host, i: c.arg(0) } keep 30s for 6s'
go2=$T_TMP/go2
for h in h1 h2 h3; do ( cd "$T_TMP/$h" && QW_WAIT=$go2 exec ./qw calls 10 ) & T_PIDS+=($!); done
ns_run root timeout 60 "$FAY" query "${CL[@]}" --json "$AQ" >"$T_TMP/adhoc.out" 2>"$T_TMP/adhoc.err" &
q=$!
n_att() { [ "$(hosts_attached "$T_TMP/adhoc.err")" -ge 3 ]; }
wait_for 20 n_att && touch "$go2"
wait $q
ok "an ad hoc cluster query in keep mode: 3 hosts attached, no event sent" \
	bash -c '[ "$1" -eq 3 ] && [ -z "$2" ]' _ \
	"$(hosts_attached "$T_TMP/adhoc.err")" "$(cq_rows "$T_TMP/adhoc.out")" || diag "$(cat "$T_TMP/adhoc.out" "$T_TMP/adhoc.err")"
done_testing
