#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Probe events in keep mode across hosts (#22 item 4): a collector and
# three agent hosts, each in its own network namespace.  A standing query
# in keep mode ('... keep 300s max 250') on a uprobe of the workload
# (each host runs its own copy: ./qw in the agent's directory, so each
# host's events are its own, exactly) keeps every event on its host:
#  - nothing is sent: the query's hosts keep exactly the calls made on
#    them (100, 200, 300 in stats.json: keep.added), h3 over its bound
#    (max 250: 50 overwritten, exactly);
#  - fay capture --query kq --last DUR brings them back from every host:
#    550 events, each host's exactly (h3's newest 250: its arguments 50 to
#    299), 50 already overwritten in the account; --show ID prints them;
#    --list lists the capture;
#  - a later, shorter window holds only the calls made in it;
#  - a capture rule with --with-query kq --last 2s: when a slow span
#    appears on h1, its trace is captured and so are kq's events of the
#    last 2 s on the trace's host (h1): exactly the 30 calls made there
#    just before, none of h2's 5 (not a host of the trace), none older;
#  - an agent stopped and then killed while the capture waits for it is
#    reported missing, the others answer;
#  - an ad hoc cluster query in keep mode is refused, saying why.
. "$(dirname "$0")/../lib/lib.sh"
. "$TOP/tests/lib/netns.bash"
ns_need_query_work
command -v python3 >/dev/null || skip_all "needs python3"
ns_init

ns_hosts root h1 h2 h3
pass "4 hosts: root $(ns_ip root), h1 $(ns_ip h1), h2 $(ns_ip h2), h3 $(ns_ip h3)"
printf 'agt write agents\ncli read,write,probe client\n' >"$T_TMP/tokens"
echo agt >"$T_TMP/agent.tok"
echo cli >"$T_TMP/cli.tok"
chmod 600 "$T_TMP/tokens" "$T_TMP/agent.tok" "$T_TMP/cli.tok"
ok "collector up" ns_collector root "$T_TMP/root.log" --db "$T_TMP/root.db" \
	--token-file "$T_TMP/tokens" || { done_testing; exit; }
declare -A K=([h1]=100 [h2]=200 [h3]=300)
for h in h1 h2 h3; do
	mkdir -p "$T_TMP/$h"
	cp "$W" "$T_TMP/$h/qw"
	( cd "$T_TMP/$h" && exec ip netns exec "$NS_PREFIX-$h" "$FAY" agent \
		--collector "$(ns_ip root):9410" --host $h --shm-dir "$T_TMP/$h" \
		--state-dir "$T_TMP/$h" --stats-interval 200ms --token-file "$T_TMP/agent.tok" ) \
		>"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
	eval "AGENT_$h=$!"
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

KQ='from c in cluster.function("./qw:fay_work_fn") select { host: c.host, i: c.arg(0) } keep 300s max 250'
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

# ---- capture by query ------------------------------------------------------
# acc FILE KEY: a value of a capture's JSON account; hacc FILE HOST KEY: of
# one host's entry
acc() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
hacc() {
	python3 -c 'import json,sys
a = json.load(open(sys.argv[1]))
print(next((h[sys.argv[3]] for h in a["hosts"] if h["host"] == sys.argv[2]), "absent"))' "$@"
}
ns_run root timeout 30 "$FAY" capture "${CL[@]}" --query kq --last 5m --json >"$T_TMP/c1.json" 2>&1
ok "capture --query kq --last 5m: 550 events found, 50 already overwritten" \
	bash -c '[ "$1 $2" = "550 50" ]' _ "$(acc "$T_TMP/c1.json" events_found)" \
	"$(acc "$T_TMP/c1.json" events_overwritten)" || diag "$(cat "$T_TMP/c1.json")"
ok "... 3 hosts asked, 3 answered" bash -c '[ "$1 $2" = "3 3" ]' _ \
	"$(acc "$T_TMP/c1.json" hosts_asked)" "$(acc "$T_TMP/c1.json" hosts_answered)"
ok "... each host's: 100, 200, 250 events; h3 overwrote 50" \
	bash -c '[ "$1 $2 $3 $4 $5 $6" = "100 200 250 0 0 50" ]' _ \
	"$(hacc "$T_TMP/c1.json" h1 events)" "$(hacc "$T_TMP/c1.json" h2 events)" \
	"$(hacc "$T_TMP/c1.json" h3 events)" "$(hacc "$T_TMP/c1.json" h1 overwritten)" \
	"$(hacc "$T_TMP/c1.json" h2 overwritten)" "$(hacc "$T_TMP/c1.json" h3 overwritten)"
CID=$(acc "$T_TMP/c1.json" id)
ns_run root "$FAY" capture "${CL[@]}" --show "$CID" >"$T_TMP/show.out" 2>&1
ok "--show $CID prints the 550 events, each host's arguments exactly (h3: the newest 250)" \
	python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
got = {}
for e in ev:
    assert e["host"] == e["event"]["host"] and e["t_ns"] > 0, e
    got.setdefault(e["host"], []).append(e["event"]["i"])
want = {"h1": list(range(100)), "h2": list(range(200)), "h3": list(range(50, 300))}
assert len(ev) == 550 and {h: sorted(v) for h, v in got.items()} == want, \
    {h: (len(v), min(v), max(v)) for h, v in got.items()}
' "$T_TMP/show.out" || diag "$(head -3 "$T_TMP/show.out")"
ns_run root "$FAY" capture "${CL[@]}" --list >"$T_TMP/list.out" 2>&1
ok "--list shows it with its account" \
	grep -q "events found 550, already overwritten 50 (fay capture --show $CID)" "$T_TMP/list.out" ||
	diag "$(cat "$T_TMP/list.out")"
ns_run root "$FAY" capture "${CL[@]}" --query nosuch --last 5s >"$T_TMP/nosuch.out" 2>&1
ok "a query that is not kept: refused, named (2)" bash -c '[ $1 -eq 2 ] && grep -q "no standing query named nosuch" "$2"' _ $? "$T_TMP/nosuch.out"

# a later window: 3 s on, 7 more calls on h1; the last 2 s hold them alone
sleep 3
( cd "$T_TMP/h1" && exec ./qw calls 7 )
sleep 0.5
ns_run root timeout 30 "$FAY" capture "${CL[@]}" --query kq --last 2s --json >"$T_TMP/c2.json" 2>&1
ok "capture --last 2s after 7 more calls on h1: those 7 alone" \
	bash -c '[ "$1 $2 $3 $4" = "7 7 0 0" ]' _ "$(acc "$T_TMP/c2.json" events_found)" \
	"$(hacc "$T_TMP/c2.json" h1 events)" "$(hacc "$T_TMP/c2.json" h2 events)" \
	"$(hacc "$T_TMP/c2.json" h3 events)" || diag "$(cat "$T_TMP/c2.json")"

# ---- a rule that captures kq's events with a slow span's trace --------------
WL=$BUILD/tests/bin/flight_workload
RULE='sp.name == "request" && sp.service == "slowsvc" && sp.duration > 150ms'
ns_run root "$FAY" capture "${CL[@]}" --when "$RULE" --name slowreq --with-query kq --last 2s \
	--follow 0 >"$T_TMP/rule.out" 2>&1
ok "a rule with --with-query kq --last 2s is registered" grep -q '^capture rule slowreq' "$T_TMP/rule.out" ||
	diag "$(cat "$T_TMP/rule.out")"
rules() { ns_run root curl -s -H "Authorization: Bearer cli" http://127.0.0.1:9411/api/captures/rules; }
rule_running() { rules | grep -q '"running":true'; }
ok "... running on the agents" wait_for 30 rule_running
rules >"$T_TMP/rules.json"
ok "... GET /api/captures/rules lists with_query kq, with_last_ms 2000" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["rules"]
assert [(x["name"], x.get("with_query"), x.get("with_last_ms")) for x in r] == [("slowreq", "kq", 2000)], r
' "$T_TMP/rules.json" || diag "$(cat "$T_TMP/rules.json")"
sleep 2.5	# the earlier calls leave the 2 s window
( cd "$T_TMP/h1" && exec ./qw calls 30 )
( cd "$T_TMP/h2" && exec ./qw calls 5 )
FAY_SHM_DIR=$T_TMP/h1 FAY_SAMPLE=1 timeout 60 "$WL" --requests 1 --children 1 \
	--child-pause-us 200000 --service slowsvc >"$T_TMP/slow.out" 2>&1
caps() { ns_run root curl -s -H "Authorization: Bearer cli" http://127.0.0.1:9411/api/captures; }
linked() { caps | grep -q '"events_capture"'; }
ok "the slow span's trace is captured, with an events capture" wait_for 30 linked ||
	diag "$(caps)"
caps >"$T_TMP/caps.json"
ok "... of exactly h1's 30 calls of the last 2 s, h1 alone asked, linked both ways" python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["captures"]
t = [a for a in c if a.get("rule") == "slowreq" and "events_capture" in a]
assert len(t) == 1, c
q = [a for a in c if a["id"] == t[0]["events_capture"]]
assert len(q) == 1 and q[0]["trace_capture"] == t[0]["id"] and q[0]["rule"] == "slowreq", q
q = q[0]
assert q["query"] == "kq" and q["events_found"] == 30, q
assert [(h["host"], h["state"], h["events"]) for h in q["hosts"]] == [("h1", "answered", 30)], q
open(sys.argv[2], "w").write(q["id"])
' "$T_TMP/caps.json" "$T_TMP/qid" || diag "$(cat "$T_TMP/caps.json")"
ns_run root "$FAY" capture "${CL[@]}" --show "$(cat "$T_TMP/qid" 2>/dev/null)" >"$T_TMP/show2.out" 2>&1
ok "... --show prints them: h1's arguments 0 to 29" python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert sorted((e["host"], e["event"]["i"]) for e in ev) == [("h1", i) for i in range(30)], ev[:3]
' "$T_TMP/show2.out" || diag "$(head -3 "$T_TMP/show2.out")"
ns_run root "$FAY" capture "${CL[@]}" --drop slowreq >/dev/null 2>&1

# ---- an agent killed during the capture --------------------------------------
A2=$AGENT_h2
kill -STOP "$A2"
ns_run root timeout 30 "$FAY" capture "${CL[@]}" --query kq --last 5m --json >"$T_TMP/kill.json" 2>&1 &
CAP=$!
unread() { ns_run h2 ss -Htnp | awk -v p="pid=$A2," '$2 > 0 && index($0, p)' | grep -q .; }
ok "the CAPTURE reached the stopped h2 agent, unread" wait_for 30 unread
kill -9 "$A2"
wait "$CAP"
ok "h2's agent killed during the capture: missing; h1 and h3 answered with their events" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
h = {x["host"]: (x["state"], x["events"]) for x in a["hosts"]}
assert h == {"h1": ("answered", 137), "h2": ("missing", 0), "h3": ("answered", 250)}, h
assert a["hosts_asked"] == 3 and a["hosts_answered"] == 2 and a["events_found"] == 387, a
' "$T_TMP/kill.json" || diag "$(cat "$T_TMP/kill.json")"

# ---- an ad hoc cluster query in keep mode is refused, saying why -----------
# (its events would be kept on every host, and no capture could name it)
AQ='from c in cluster.function("./qw:fay_work_fn") select { host: c.host, i: c.arg(0) } keep 30s for 6s'
ns_run root timeout 60 "$FAY" query "${CL[@]}" --json "$AQ" >"$T_TMP/adhoc.out" 2>"$T_TMP/adhoc.err"
arc=$?
ok "an ad hoc cluster query in keep mode is refused (exit $arc), naming --keep NAME and fay capture --query" \
	bash -c '[ "$1" -ne 0 ] && grep -q "keep mode on the cluster needs a standing query" "$2" &&
		grep -q -- "--keep NAME" "$2" && grep -q "fay capture --query NAME" "$2"' _ \
	"$arc" "$T_TMP/adhoc.err" || diag "$(cat "$T_TMP/adhoc.out" "$T_TMP/adhoc.err")"
kq_ok() { [ "$(ns_run root curl -s -H "Authorization: Bearer cli" http://127.0.0.1:9411/api/queries | grep -o '"name":"kq"' | wc -l)" = 1 ]; }
ok "... and nothing is attached for it: the standing kq runs on, alone" kq_ok
done_testing
