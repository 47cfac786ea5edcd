#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Capture rules (#22 item 2, retroactive tail sampling) across three hosts.
# Each host is a network namespace (tests/lib/netns.bash) with its own
# `fay agent --flight`, reporting to a collector in a fourth.  A request
# crosses the three (flight_hop: h1's client "request" + "call", h2's
# "hop" + "call", h3's "leaf": 5 spans, services front, middle, back),
# recorded with FAY_RECORD=all and head sampling 1 in 1000, so that its
# spans stay in the hosts' flight buffers.  Every 10th request's leaf
# sleeps 200 ms.  The rule `sp.name == "leaf" && sp.duration > 100ms`,
# registered with `fay capture --when`, is evaluated by h3's agent on the
# unsampled leaf spans; each match captures the whole trace:
#  - every slow request's trace is stored with its 5 spans, each exactly
#    once, from the three hosts, marked captured by the rule;
#  - no span of a fast (unmatched, unsampled) request is stored;
#  - the rule's counts say matches = captures = the slow requests;
#  - a rule with an error is refused with its line and column;
#  - a rule that matches everything, with --per-second 2, makes at most
#    its budget of captures and counts the rest over_budget;
#  - a span that ends 3 s after its leaf (long after the settle) is
#    brought by the capture's follow rounds, stored once, tagged and
#    counted late;
#  - the list of captures (GET /api/captures) and the rule's counts
#    (GET /api/captures/rules) are the same after a restart of the
#    collector.
. "$(dirname "$0")/../lib/lib.sh"
. "$TOP/tests/lib/netns.bash"
HOP=$BUILD/tests/bin/flight_hop
[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"
[ -x "$HOP" ] || skip_all "no $HOP (make)"
command -v curl >/dev/null || skip_all "needs curl"
command -v python3 >/dev/null || skip_all "needs python3"
ns_init

for h in coll h1 h2 h3; do
	ns_add $h || { fail "namespace $h"; done_testing; exit; }
done
pass "4 hosts: collector $(ns_ip coll), h1..h3 $(ns_ip h1)..$(ns_ip h3)"

printf 'agt write agents\ncli read,write,probe client\n' >"$T_TMP/tokens"
echo agt >"$T_TMP/agent.tok"
chmod 600 "$T_TMP/tokens" "$T_TMP/agent.tok"
ns_bg coll timeout 600 "$FAY" collector --listen 0.0.0.0:9410 --http 127.0.0.1:9411 \
	--db "$T_TMP/c.db" --token-file "$T_TMP/tokens" --otlp-http off --otlp-grpc off \
	>"$T_TMP/coll.log" 2>&1
COLL_PID=$NS_PID
URL=http://127.0.0.1:9411
api() { ns_run coll curl -s -H "Authorization: Bearer cli" "$@"; }
capture() { ns_run coll timeout 30 "$FAY" capture --cluster "$URL" --token cli "$@"; }
ok "collector up" wait_for 30 ns_run coll curl -sfo /dev/null "$URL/health"

for h in h1 h2 h3; do
	mkdir -p "$T_TMP/$h/shm" "$T_TMP/$h/state"
	ns_enter_bg $h timeout 600 nice -n 10 "$FAY" agent --collector "$(ns_ip coll):9410" --host $h \
		--flight 16M --shm-dir "$T_TMP/$h/shm" --state-dir "$T_TMP/$h/state" \
		--token-file "$T_TMP/agent.tok" --flush-interval 20ms --stats-interval 200ms \
		>"$T_TMP/$h.log" 2>&1
done
peers() { [ "$(api "$URL/api/cluster/peers" | grep -o '"host":"h[1-3]"' | sort -u | wc -l)" -eq 3 ]; }
ok "three agents open query connections" wait_for 30 peers

# ---- a rule with an error: refused, with where ------------------------------
capture --when 'sp.duration > > 5ms' --name bad >"$T_TMP/bad.out" 2>&1
rc=$?
ok "a rule with an error: exit 2, line:col of the rule's own text, a caret" \
	bash -c '[ "$1" = 2 ] && grep -q "^rule:1:15: error" "$2" && grep -q "^              ^$" "$2"' \
	_ "$rc" "$T_TMP/bad.out" || diag "$(cat "$T_TMP/bad.out")"
capture --when 'sp.nosuch == 1' --name bad2 >"$T_TMP/bad2.out" 2>&1
ok "a rule naming no field of spans: refused, naming it" grep -q "nosuch" "$T_TMP/bad2.out" ||
	diag "$(cat "$T_TMP/bad2.out")"

# ---- the rule ------------------------------------------------------------------
# --settle 1s, not the default 300ms: on a loaded machine an agent may
# drain the parents' spans (h1's, ending after the leaf) later than 300 ms
# after the leaf's row reached the collector (bench/RESULTS.md)
capture --when 'sp.name == "leaf" && sp.duration > 100ms' --name slow_leaf --settle 1s \
	>"$T_TMP/add.out" 2>&1
ok "fay capture --when registers the rule" grep -q "^capture rule slow_leaf: " "$T_TMP/add.out" ||
	diag "$(cat "$T_TMP/add.out")"
# the rule's query attached on each host before any request runs
# attached TEXT: a query with TEXT in it runs on h1, h2 and h3
attached() {
	api "$URL/api/cluster/peers" | python3 -c '
import json, sys
p = json.load(sys.stdin)["peers"]
hosts = {x["host"] for x in p if any(q["state"] == "attached" and sys.argv[1] in q["query"]
                                     for q in x.get("queries", []))}
sys.exit(0 if {"h1", "h2", "h3"} <= hosts else 1)' "$1"
}
ok "the rule runs on the three agents" wait_for 30 attached 'sp.name == "leaf"' ||
	diag "$(api "$URL/api/cluster/peers")"

REQ=40
# hop H ARGS...: flight_hop in host H's namespace, recording all, in the background
hop() {
	local h=$1; shift
	ns_enter_bg $h env FAY_SHM_DIR="$T_TMP/$h/shm" FAY_SAMPLE=1000 FAY_RECORD=all \
		timeout 120 nice -n 10 "$HOP" "$@"
}
# listening H PORT: a process listens on PORT in H's namespace
listening() { ns_run "$1" ss -Hltn "sport = :$2" | grep -q LISTEN; }
hop h3 --serve 7300 --service back 2>"$T_TMP/hop3.err"
wait_for 30 listening h3 7300
hop h2 --serve 7300 --next "$(ns_ip h3):7300" --service middle 2>"$T_TMP/hop2.err"
wait_for 30 listening h2 7300
ns_enter h1 env FAY_SHM_DIR="$T_TMP/h1/shm" FAY_SAMPLE=1000 \
	FAY_RECORD=all timeout 120 nice -n 10 "$HOP" --client "$(ns_ip h2):7300" --service front \
	--requests $REQ --slow-every 10 --slow-ms 200 --pause-us 20000 >"$T_TMP/req.out" 2>"$T_TMP/hop1.err"
ok "$REQ requests crossed h1 -> h2 -> h3, every 10th slow" \
	bash -c '[ "$(wc -l <"$1")" -eq "$2" ] && [ "$(awk "\$2 == 1" "$1" | wc -l)" -eq $(($2 / 10)) ]' \
	_ "$T_TMP/req.out" "$REQ" ||
	diag "$(head "$T_TMP"/hop*.err)"
NSLOW=$(awk '$2 == 1' "$T_TMP/req.out" | wc -l)
FAST_U=$(awk '$2 == 0 && $3 == 0 { print $1 }' "$T_TMP/req.out")
diag "$NSLOW slow requests, $(awk '$2 == 1 && $3 == 0' "$T_TMP/req.out" | wc -l) of them unsampled; $(awk '$3 == 1' "$T_TMP/req.out" | wc -l) sampled in all"

# rule KEY: a count of rule slow_leaf
rule() {
	api "$URL/api/captures/rules" | python3 -c '
import json, sys
r = [x for x in json.load(sys.stdin)["rules"] if x["name"] == sys.argv[1]]
print(r[0][sys.argv[2]] if r else -1)' "${2:-slow_leaf}" "$1"
}
captured() { [ "$(rule captures)" -ge "$NSLOW" ]; }
ok "the rule captured the $NSLOW slow requests" wait_for 30 captured || diag "$(api "$URL/api/captures/rules")"
ok "... matches $NSLOW, captures $NSLOW, none over budget" \
	bash -c '[ "$1" = "$4" ] && [ "$2" = "$4" ] && [ "$3" = 0 ]' _ \
	"$(rule matches)" "$(rule captures)" "$(rule over_budget)" "$NSLOW"

# every stored span, once: each trace's spans checked against req.out
# PY_SPANS: the start of a python check: spans, each trace's stored
# spans (argv[1]: /api/v2/traces' answer) by 32-digit trace id
PY_SPANS='import json, sys, collections
spans = collections.defaultdict(list)
for tr in json.load(open(sys.argv[1])):
    for x in tr:
        spans[x["traceId"].rjust(32, "0")].append(x)
'
api "$URL/api/v2/traces?limit=100000&lookback=86400000" >"$T_TMP/traces.json"
# check WHAT: the traces of that kind of request whose spans are not as
# they must be (slow: 5 spans, each once, services front=2 middle=2
# back=1, all marked by the rule; fast: none stored)
check() {
	python3 -c "$PY_SPANS$(cat <<'PY'
bad = []
for line in open(sys.argv[2]):
    tid, slow, sampled = line.split()
    if sampled == "1" or (slow == "1") != (sys.argv[3] == "slow"):
        continue
    s = spans.get(tid, [])
    if sys.argv[3] == "fast":
        if s:
            bad.append("%s: %d spans stored" % (tid, len(s)))
        continue
    svc = collections.Counter(x.get("localEndpoint", {}).get("serviceName", "?") for x in s)
    ruled = sum(1 for x in s if x.get("tags", {}).get("fay.capture.by", "")
                .startswith("rule slow_leaf: span leaf on h3"))
    if (len(s) != 5 or len({x["id"] for x in s}) != 5 or ruled != 5 or
            svc != {"front": 2, "middle": 2, "back": 1}):
        bad.append("%s: %d spans, %d ids, %d marked, %s" % (tid, len(s), len({x["id"] for x in s}),
                                                            ruled, dict(svc)))
print("; ".join(bad))
PY
)" "$T_TMP/traces.json" "$T_TMP/req.out" "$1"
}
bad=$(check slow)
ok "every slow request's trace stored whole: 5 spans, each once, from h1 h2 h3, marked by the rule" \
	[ -z "$bad" ] || diag "$bad"
bad=$(check fast)
ok "no span of the $(echo $FAST_U | wc -w) fast unsampled requests stored" [ -z "$bad" ] || diag "$bad"
api "$URL/api/captures" >"$T_TMP/list.json"
ok "GET /api/captures: the rule's captures, each with its hosts and latency" python3 -c '
import json, sys
c = [x for x in json.load(open(sys.argv[1]))["captures"] if x.get("rule") == "slow_leaf"]
assert len(c) == int(sys.argv[2]), len(c)
for x in c:
    assert x["hosts_asked"] == 3 and x["hosts_answered"] == 3, x
    assert x["match"]["host"] == "h3" and x["match"]["span"] == "leaf", x
    assert x["latency_ms"] >= 0, x
print(" ".join(str(x["latency_ms"]) for x in c))
' "$T_TMP/list.json" "$NSLOW" >"$T_TMP/lat.out" 2>&1 || diag "$(cat "$T_TMP/lat.out")"
diag "latency from the leaf's end to stored (ms): $(cat "$T_TMP/lat.out")"
capture --list >"$T_TMP/list.out" 2>&1
ok "fay capture --list shows the rule and its counts" \
	grep -q "^rule slow_leaf: sp.name == \"leaf\" && sp.duration > 100ms" "$T_TMP/list.out"
api "$URL/metrics" >"$T_TMP/metrics"
ok "/metrics counts the rule's captures" \
	grep -q "^fay_capture_rule_captures_total{rule=\"slow_leaf\"} $NSLOW\$" "$T_TMP/metrics"

# ---- a budget -------------------------------------------------------------------
capture --drop slow_leaf >"$T_TMP/drop.out" 2>&1
ok "fay capture --drop" [ "$(rule captures)" = -1 ]
capture --when 'sp.duration >= 0' --name everything --per-second 2 --settle 0 >/dev/null 2>&1
ok "a rule matching every span, 2 captures a second" wait_for 30 attached 'sp.duration >= 0' ||
	diag "$(api "$URL/api/cluster/peers")"
hop h3 --serve 7301 --service back
wait_for 30 listening h3 7301
hop h2 --serve 7301 --next "$(ns_ip h3):7301" --service middle
wait_for 30 listening h2 7301
T0=$(date +%s%N)	# no span of this phase before
ns_enter h1 env FAY_SHM_DIR="$T_TMP/h1/shm" FAY_SAMPLE=1000 \
	FAY_RECORD=all timeout 120 nice -n 10 "$HOP" --client "$(ns_ip h2):7301" --service front \
	--requests 60 --slow-every 0 --pause-us 20000 >"$T_TMP/req2.out" 2>&1
matched() { [ "$(rule matches everything)" -ge 300 ]; }
ok "its matches: the 300 spans of 60 requests" wait_for 30 matched ||
	diag "$(api "$URL/api/captures/rules"; wc -l <"$T_TMP/req2.out"; api "$URL/api/cluster/peers")"
# every match accounted for: captured (its capture made), deduplicated or over budget
settled() {
	api "$URL/api/captures/rules" | python3 -c '
import json, sys
r = [x for x in json.load(sys.stdin)["rules"] if x["name"] == "everything"][0]
sys.exit(0 if r["captures"] + r["deduplicated"] + r["over_budget"] == r["matches"] else 1)'
}
wait_for 30 settled
T1=$(date +%s%N)
caps=$(rule captures everything)
over=$(rule over_budget everything)
dedup=$(rule deduplicated everything)
# at most the bucket's 2 at the start plus 2 a second since
max=$(( 2 + 2 * (T1 - T0 + 999999999) / 1000000000 ))
ok "captures within the budget ($caps <= $max), the rest counted: over budget $over, deduplicated $dedup" \
	bash -c '[ "$1" -ge 1 ] && [ "$1" -le "$2" ] && [ "$3" -gt 0 ] && [ $(($1 + $3 + $4)) -eq "$5" ]' \
	_ "$caps" "$max" "$over" "$dedup" "$(rule matches everything)"
ok "the collector runs on" ns_run coll curl -sfo /dev/null "$URL/health"

# ---- late spans: a capture follows its trace -------------------------------------
# Each slow leaf also starts a span "late" that ends 3 s after the leaf
# answered: long after the 300 ms settle, so the capture's first round
# cannot have it; a follow round (250 ms, 500 ms, 1 s, 2 s, 4 s, 6 s after
# the capture) must bring it, stored once, tagged late, counted late.
capture --drop everything >/dev/null 2>&1
capture --when 'sp.name == "leaf" && sp.duration > 100ms' --name late_leaf --follow 6s \
	>"$T_TMP/add3.out" 2>&1
ok "fay capture --when ... --follow 6s" grep -q "^capture rule late_leaf: " "$T_TMP/add3.out" ||
	diag "$(cat "$T_TMP/add3.out")"
ok "the rule runs on the three agents" wait_for 30 attached 'sp.name == "leaf"' ||
	diag "$(api "$URL/api/cluster/peers")"
hop h3 --serve 7302 --service back --late-ms 3000 2>"$T_TMP/hop3l.err"
wait_for 30 listening h3 7302
hop h2 --serve 7302 --next "$(ns_ip h3):7302" --service middle
wait_for 30 listening h2 7302
ns_enter h1 env FAY_SHM_DIR="$T_TMP/h1/shm" FAY_SAMPLE=1000 \
	FAY_RECORD=all timeout 120 nice -n 10 "$HOP" --client "$(ns_ip h2):7302" --service front \
	--requests 10 --slow-every 5 --slow-ms 200 --pause-us 20000 >"$T_TMP/req3.out" 2>&1
# followed: the late_leaf captures, every one's follow ended
followed() {
	api "$URL/api/captures" | python3 -c '
import json, sys
c = [x for x in json.load(sys.stdin)["captures"] if x.get("rule") == "late_leaf"]
sys.exit(0 if len(c) >= int(sys.argv[1]) and not any(x["following"] for x in c) else 1)' \
	"$(awk '$2 == 1' "$T_TMP/req3.out" | wc -l)"
}
ok "the captures of the slow requests followed their traces to the end" \
	wait_for 30 followed || diag "$(api "$URL/api/captures")"
api "$URL/api/v2/traces?limit=100000&lookback=86400000" >"$T_TMP/traces3.json"
api "$URL/api/captures" >"$T_TMP/list3.json"
# late_check: each unsampled slow trace has its 6 spans once, "late"
# among those tagged fay.capture.late_ms (h1's two may be too: at the
# default 300 ms settle its agent may drain them after the first round,
# and then a follow round brings them, which is the point), and its
# capture's account counts as late what is so tagged, 1 from h3 (the
# leaf, which matched, was there); prints the problems, then the late
# spans in all on the last line
late_check() {
	python3 -c "$PY_SPANS$(cat <<'PY'
caps = {}
for c in json.load(open(sys.argv[3]))["captures"]:
    if c.get("rule") == "late_leaf":
        caps[c["by"].rsplit("trace ", 1)[1]] = c
bad, n, total = [], 0, 0
for line in open(sys.argv[2]):
    tid, slow, sampled = line.split()
    if slow != "1" or sampled == "1":
        continue
    n += 1
    s = spans.get(tid, [])
    late = [x for x in s if "fay.capture.late_ms" in x.get("tags", {})]
    names = [x["name"] for x in late]
    if (len(s) != 6 or len({x["id"] for x in s}) != 6 or "late" not in names or
            not set(names) <= {"late", "request", "call"}):
        bad.append("%s: %d spans, %d ids, late-tagged: %s" % (tid, len(s), len({x["id"] for x in s}),
                                                              sorted(names)))
    c = caps.get(tid)
    h3 = [h for h in (c or {}).get("hosts", []) if h["host"] == "h3"]
    if (not c or c["spans_late"] != len(late) or c["spans_stored"] != 6 or
            c["follow_rounds"] < 1 or not h3 or h3[0].get("late") != 1 or
            c["last_late_ms"] < 1000):
        bad.append("%s: account %s" % (tid, json.dumps(c)))
    total += len(late)
print("; ".join(bad) if bad or n else "no unsampled slow request")
print(total)
PY
)" "$T_TMP/traces3.json" "$T_TMP/req3.out" "$T_TMP/list3.json"
}
late_check >"$T_TMP/late.out"
bad=$(head -n -1 "$T_TMP/late.out")
NLATE=$(tail -1 "$T_TMP/late.out")
ok "each trace stored with its late span (6 spans, once each; 'late' tagged fay.capture.late_ms); each account counts its late spans, 1 from h3" \
	[ -z "$bad" ] || diag "$bad"
diag "$NLATE spans came late in all"
ok "the rule counts the $NLATE late spans" [ "$(rule spans_late late_leaf)" = "$NLATE" ] ||
	diag "$(api "$URL/api/captures/rules")"
capture --list >"$T_TMP/list3.out" 2>&1
ok "fay capture --list says what came late" \
	grep -Eq "^  followed: [1-9][0-9]* spans late \(the last [0-9]+ ms after the capture\)" \
	"$T_TMP/list3.out" ||
	diag "$(cat "$T_TMP/list3.out")"

# ---- the list of captures outlives a restart of the collector --------------------
ids() {
	api "$URL/api/captures" | python3 -c '
import json, sys
for c in json.load(sys.stdin)["captures"]:
    print(c["id"], c.get("rule", ""), c["spans_stored"], c.get("spans_late", 0))' | sort
}
# counts: each rule's name and counts
counts() {
	api "$URL/api/captures/rules" | python3 -c '
import json, sys
for r in json.load(sys.stdin)["rules"]:
    print(r["name"], *(r[k] for k in ("matches", "captures", "deduplicated", "over_budget",
                                      "spans_late", "unfollowed")))' | sort
}
ids >"$T_TMP/ids.before"
counts >"$T_TMP/counts.before"
kill "$COLL_PID"
wait_for 30 bash -c '! kill -0 "$1" 2>/dev/null' _ "$COLL_PID"
ns_bg coll timeout 600 "$FAY" collector --listen 0.0.0.0:9410 --http 127.0.0.1:9411 \
	--db "$T_TMP/c.db" --token-file "$T_TMP/tokens" --otlp-http off --otlp-grpc off \
	>"$T_TMP/coll2.log" 2>&1
ok "the collector restarted" wait_for 30 ns_run coll curl -sfo /dev/null "$URL/health"
ids >"$T_TMP/ids.after"
ok "GET /api/captures after the restart: the same $(wc -l <"$T_TMP/ids.before") captures, their counts and late spans" \
	bash -c '[ -s "$1" ] && grep -q late_leaf "$1" && cmp -s "$1" "$2"' _ \
	"$T_TMP/ids.before" "$T_TMP/ids.after" || diag "$(diff "$T_TMP/ids.before" "$T_TMP/ids.after")"
counts >"$T_TMP/counts.after"
ok "the rule's counts after the restart: as before ($(cat "$T_TMP/counts.before"))" \
	bash -c '[ -s "$1" ] && awk "\$1 == \"late_leaf\" && \$2 > 0 && \$3 > 0" "$1" | grep -q . &&
		cmp -s "$1" "$2"' _ "$T_TMP/counts.before" "$T_TMP/counts.after" ||
	diag "$(diff "$T_TMP/counts.before" "$T_TMP/counts.after")"
ok "the collector runs on" ns_run coll curl -sfo /dev/null "$URL/health"
done_testing
