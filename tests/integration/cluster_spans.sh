#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# spans(...) cluster queries over real libfay programs: a collector and
# three real agents (h1 h2 h3, plain processes with --host, each with its
# own shm dir), each host running the blockstack example (five processes,
# libfay and BlkKin spans) with its own number of requests.  Several
# queries run at once over the same workload, and their answers are
# compared with two independent truths: the requests each host made, and
# the spans the agents shipped to the collector's store (merged there by
# the collector's own code).  Per-layer counts and average durations,
# tags, kind, error, group by host, the unscoped form with --cluster,
# POST /api/query, and the refusal of a local spans(...) query.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
BS=${BLOCKSTACK:-$BUILD/blockstack}
[ -x "$BS" ] || skip_all "no $BS (make examples)"
command -v python3 >/dev/null || skip_all "needs python3"

# ---- a local spans(...) query says what to type ---------------------------------
"$FAY" query 'from sp in spans("vm-client") select count()' >"$T_TMP/local.out" 2>"$T_TMP/local.err"
rc=$?
[ $rc -ne 0 ] && grep -q "fay query --cluster URL 'from sp in cluster.spans" "$T_TMP/local.err" &&
	pass "a local spans(...) query is refused, naming fay query --cluster (rc=$rc)" ||
	fail "local spans(...) refusal (rc=$rc)" "$(cat "$T_TMP/local.err")"

HOSTS="h1 h2 h3"

declare -A N=([h1]=20 [h2]=30 [h3]=40)
coll_start "$T_TMP/c.db"
for h in $HOSTS; do
	mkdir -p "$T_TMP/$h/shm" "$T_TMP/$h/state"
	"$FAY" agent --collector 127.0.0.1:$WP --host $h --shm-dir "$T_TMP/$h/shm" \
		--state-dir "$T_TMP/$h/state" --stats-interval 1s >>"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
done
peers() { [ "$(curl -s "$URL/api/cluster/peers" | grep -o '"host":' | wc -l)" -ge 3 ]; }
ok "three agents with query connections" wait_for 15 peers
# The collector's own POST /api/query of a local spans(...) query: refused
# with what to type, and the collector goes on.
curl -s -X POST -H 'Content-Type: application/json' -d '{"query":"from sp in spans select count()"}' \
	"$URL/api/query" >"$T_TMP/local_post.out" 2>&1
grep -q "fay query --cluster URL" "$T_TMP/local_post.out" && coll_alive &&
	pass "POST /api/query of a local spans(...) query: refused with what to type" ||
	fail "POST /api/query local spans" "$(head -c 600 "$T_TMP/local_post.out")"

# The queries (QT[NAME]); a client may run 4 at once (the collector's
# limit), so they run in rounds of up to 4, each over its own blockstack
# workload on every host, each round's truth being the traces it added to
# the store (traces.ROUND.json; RT[NAME] is the round of NAME).
D='for 10s'
declare -A QT RT
QT[layers]="from sp in cluster.spans group sp by {s: sp.service, n: sp.name} into g select {s: g.s, n: g.n, c: g.count(), d: g.avg(sp.duration)} $D"
QT[byname]="from sp in cluster.spans group sp by sp.name into g select {n: g.key, c: g.count(), d: g.avg(sp.duration)} $D"
QT[tags]="from sp in cluster.spans where sp.tag(\"object\") != \"\" group sp by {s: sp.service, n: sp.name, k: sp.kind} into g select {s: g.s, n: g.n, k: g.k, c: g.count(), e: g.sum(sp.error)} $D"
QT[hosts]="from sp in cluster.spans(\"vm-client\") where sp.kind == \"client\" && sp.tag(\"size\") == \"16384\" group sp by sp.host into g select {h: g.key, c: g.count()} $D"
QT[unscoped]="from sp in spans(\"mapp*\") where sp.tag(\"blocker\") == \"blocker-2\" select {c: count()} $D"
QT[onehost]="from sp in host(\"h2\").spans(\"vm-client\") select {c: count()} $D"
QT[stream]="from sp in cluster.spans(\"vm-client\") select {n: sp.name, d: sp.duration, h: sp.host, k: sp.kind} $D"
QT[windows]="from sp in cluster.spans group sp by sp.service into g select {s: g.key, c: g.count()} window 1s $D"
QT[post]="from sp in cluster.spans(\\\"mapper\\\") group sp by sp.name into g select { n: g.key, c: g.count() } $D"

"$FAY" query --cluster "$URL" --keep spanlayers \
	'from sp in cluster.spans group sp by sp.service into g select { svc: g.key, n: g.count() } window 1s' \
	>"$T_TMP/keep.out" 2>&1
ok "--keep registers a standing spans(...) query" grep -q 'standing query spanlayers: runs until' "$T_TMP/keep.out"
kept() { [ "$(grep -l 'spans group sp by sp.service into g select { svc' "$T_TMP"/h?.log | wc -l)" -eq 3 ]; }
ok "the standing query reached the three agents" wait_for 10 kept

stored() {
	curl -sf "$URL/api/v2/traces?limit=1000000&lookback=86400000" |
		python3 -c 'import json,sys; print(sum(map(len, json.load(sys.stdin))))'
}
# stored_ge N: the collector holds N spans or more now (wait_for runs it
# again each time; `test "$(stored)" -ge N` would test one reading)
stored_ge() { [ "$(stored)" -ge "$1" ]; }
ROUND=0
TOTAL=0
round() {	# NAME...
	local name x pids=() want
	ROUND=$((ROUND + 1))
	for name in "$@"; do
		RT[$name]=$ROUND
		if [ "$name" = post ]; then
			curl -sN -X POST -H 'Content-Type: application/json' \
				-d "{\"query\":\"${QT[post]}\"}" "$URL/api/query" >"$T_TMP/post.out" 2>/dev/null &
		else
			timeout 60 "$FAY" query --cluster "$URL" --json "${QT[$name]}" \
				>"$T_TMP/$name.out" 2>"$T_TMP/$name.err" &
		fi
		T_PIDS+=($!)
		pids+=($!)
	done
	attached() {
		for name in "$@"; do
			if [ "$name" = post ]; then
				grep -q '"attached":3' "$T_TMP/post.out" || return 1
				continue
			fi
			want=3
			[ "$name" = onehost ] && want=1
			[ "$(grep -c ': attached' "$T_TMP/$name.err")" -ge $want ] || return 1
		done
	}
	ok "round $ROUND: $* attached on the hosts" wait_for 20 attached "$@"
	sleep 0.5
	for h in $HOSTS; do
		FAY_SHM_DIR=$T_TMP/$h/shm "$BS" --requests ${N[$h]} --sample 1 --size 16k --seed 7 \
			>"$T_TMP/$h.bs" 2>&1 &
		T_PIDS+=($!)
		eval "BS_$h=$!"
	done
	for h in $HOSTS; do
		eval "wait \$BS_$h"
		grep -q "spans recorded" "$T_TMP/$h.bs" || fail "round $ROUND: blockstack on $h" "$(cat "$T_TMP/$h.bs")"
		TOTAL=$((TOTAL + $(sed -n 's/.* \([0-9][0-9]*\) spans recorded.*/\1/p' "$T_TMP/$h.bs")))
	done
	for x in "${!pids[@]}"; do
		wait "${pids[$x]}"
		eval "RC_${*:$((x + 1)):1}=$?"
	done
	ok "round $ROUND: the collector stored every span recorded so far ($TOTAL)" \
		wait_for 30 stored_ge "$TOTAL"
	curl -sf "$URL/api/v2/traces?limit=1000000&lookback=86400000" >"$T_TMP/traces.all.json"
	# this round's traces: those not seen in an earlier round
	python3 - "$T_TMP" "$ROUND" <<'PY'
import json, os, sys
d, r = sys.argv[1], int(sys.argv[2])
seen = set()
for k in range(1, r):
    seen |= {t[0]["traceId"] for t in json.load(open(os.path.join(d, "traces.%d.json" % k)))}
new = [t for t in json.load(open(os.path.join(d, "traces.all.json"))) if t[0]["traceId"] not in seen]
json.dump(new, open(os.path.join(d, "traces.%d.json" % r), "w"))
PY
}
round layers byname tags hosts
round unscoped onehost stream windows
round post

# check NAME WHAT PYTHON: rows (the query's JSON rows), spans (the stored
# Zipkin spans), n (requests per host) must satisfy PYTHON
check() {
	local name=$1 what=$2 rcv=RC_$1
	if python3 - "$T_TMP/$name.out" "$T_TMP/traces.${RT[$name]}.json" "$3" <<PY
import json, sys
rows = [r for r in (json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{"))
        if "hosts" not in r]
spans = [s for t in json.load(open(sys.argv[2])) for s in t]
n = {"h1": ${N[h1]}, "h2": ${N[h2]}, "h3": ${N[h3]}}
svc = lambda s: s.get("localEndpoint", {}).get("serviceName", "")
def by(keyf, pred=lambda s: True):
    out = {}
    for s in spans:
        if pred(s):
            k = keyf(s)
            out.setdefault(k, []).append(s.get("duration", 0))
    return out
def close(ns, us_list):
    want = sum(us_list) / len(us_list) * 1000
    return abs(ns - want) <= max(2000, want * 0.01)
ok = eval("(" + sys.argv[3] + ")")
if not ok:
    print("rows:", rows[:20], file=sys.stderr)
sys.exit(0 if ok else 1)
PY
	then pass "$what"; else fail "$what (rc=${!rcv:-?})" "$(head -c 600 "$T_TMP/$name.err")"; fi
}

check layers "per layer (service, name): counts equal the stored spans', average durations theirs" \
	'sorted((r["s"], r["n"], r["c"]) for r in rows) == sorted((k[0], k[1], len(v)) for k, v in by(lambda s: (svc(s), s["name"])).items())
	 and all(close(r["d"], by(lambda s: (svc(s), s["name"]))[(r["s"], r["n"])]) for r in rows)
	 and sum(r["c"] for r in rows) == len(spans)'
check layers "vm-client made one span per request, summed over the hosts (90)" \
	'[r["c"] for r in rows if r["s"] == "vm-client" and r["n"] in ("write", "read")] and sum(r["c"] for r in rows if r["s"] == "vm-client") == sum(n.values())'
check byname "group by sp.name: count() and avg(sp.duration) per name" \
	'sorted((r["n"], r["c"]) for r in rows) == sorted((k, len(v)) for k, v in by(lambda s: s["name"]).items())
	 and all(close(r["d"], by(lambda s: s["name"])[r["n"]]) for r in rows)'
check tags "where sp.tag(\"object\") != \"\": the spans with an object tag, with their kind, no errors" \
	'sorted((r["s"], r["n"], r["k"], r["c"]) for r in rows) == sorted((k[0], k[1], k[2], len(v)) for k, v in by(lambda s: (svc(s), s["name"], s.get("kind", "").lower()), lambda s: "object" in s.get("tags", {})).items())
	 and all(r["e"] == 0 for r in rows) and rows'
check hosts "vm-client client spans with tag size 16384, grouped by host: each host's requests" \
	'sorted((r["h"], r["c"]) for r in rows) == sorted(n.items())'
check unscoped "spans(...) with --cluster and no scope: the mapper's calls to blocker-2" \
	'rows == [{"c": sum(1 for s in spans if s.get("tags", {}).get("blocker") == "blocker-2")}] and rows[0]["c"] > 0'
check onehost "host(\"h2\").spans(\"vm-client\"): h2's requests only" 'rows == [{"c": n["h2"]}]'
check stream "a stream of vm-client spans: one row per request, each with its host, kind and duration" \
	'sorted((h, sum(1 for r in rows if r["h"] == h)) for h in n) == sorted(n.items()) and len(rows) == sum(n.values())
	 and all(r["k"] == "client" and r["d"] > 0 and r["n"] in ("read", "write") for r in rows)'
check windows "window 1s: the windows add up to the stored spans per service" \
	'(lambda w: sorted(w.items()) == sorted((k, len(v)) for k, v in by(svc).items()))(
	 __import__("functools").reduce(lambda acc, r: (acc.__setitem__(r["s"], acc.get(r["s"], 0) + r["c"]), acc)[1],
	 {(r["window_start_ns"], r["s"]): r for r in rows}.values(), {}))'
if python3 - "$T_TMP/post.out" "$T_TMP/traces.${RT[post]}.json" <<'PY'
import json, sys
rows = []
for l in open(sys.argv[1]):
    try:
        o = json.loads(l)
    except ValueError:
        continue
    if o.get("type") == "window" and o.get("final"):
        rows = o["rows"]
spans = [s for t in json.load(open(sys.argv[2])) for s in t
         if s.get("localEndpoint", {}).get("serviceName") == "mapper"]
want = {}
for s in spans:
    want[s["name"]] = want.get(s["name"], 0) + 1
got = {n: c for n, c in rows}
print("# got", got, "want", want)
sys.exit(0 if got == want and got else 1)
PY
then pass "POST /api/query with cluster.spans(\"mapper\"): the mapper's spans per name"
else fail "POST /api/query spans" "$(head -c 800 "$T_TMP/post.out")"; fi

# The standing query: its history adds up (the last version of each
# window), its latest window is on /metrics, and it can be dropped.
sleep 2
curl -s "$URL/api/queries/spanlayers/results?limit=1000" >"$T_TMP/keep.json"
if python3 - "$T_TMP/keep.json" "$T_TMP/traces.all.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
last = {}
for w in r["windows"]:
    last[w["start_ns"]] = w
got = {}
for w in last.values():
    for row in w["rows"]:
        got[row[0]] = got.get(row[0], 0) + row[1]
want = {}
for t in json.load(open(sys.argv[2])):
    for s in t:
        k = s.get("localEndpoint", {}).get("serviceName", "")
        want[k] = want.get(k, 0) + 1
print("# got", got, "want", want)
sys.exit(0 if got == want else 1)
PY
then pass "the standing query's windows add up to the stored spans per service"
else fail "standing spans(...) history" "$(head -c 600 "$T_TMP/keep.json")"; fi
ok "its latest window is exported on /metrics" bash -c "curl -s '$URL/metrics' | grep -q '^# TYPE fay_query_spanlayers gauge'"
"$FAY" query --cluster "$URL" --drop spanlayers >"$T_TMP/drop.out" 2>&1
ok "--drop stops it" test $? -eq 0

# The agents' own counts: spans fed to queries, BlkKin spans never ended.
sleep 1.5
for h in $HOSTS; do
	st=$T_TMP/$h/state/stats.json
	python3 -c 'import json,sys; q = json.load(open(sys.argv[1]))["span_queries"]; sys.exit(0 if q["spans_fed"] > 0 and q["blkin_given_up"] == 0 else 1)' "$st" &&
		pass "$h: spans fed to the queries, no BlkKin span given up" ||
		fail "$h: span_queries in stats.json" "$(cat "$st")"
done
[ -n "${SPANS_KEEP:-}" ] && cp -r "$T_TMP" "$SPANS_KEEP"
done_testing
