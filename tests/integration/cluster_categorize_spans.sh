#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# categorize over spans (#23 item 1: "on spans, categorize services by
# their span-name mix"): a collector, one real agent, and six libfay
# services (span_producer --service S --names ...), two of each kind:
#   fs1 fs2     spans "read" and "write", one of each in turn
#   db1 db2     spans "query"
#   web1 web2   spans "get", "get", "post" in turn
# each at its own rate (a busy service and a quiet one of a kind do the
# same things).  `categorize svc by n into 3` over the cluster's
# spans(...) must recover the three kinds exactly in every window, with
# each kind's first distinguishing span name its own; the final answer
# names no one changed.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
P=$BUILD/tests/bin/span_producer
[ -x "$P" ] || skip_all "span_producer is not built (make)"
command -v python3 >/dev/null || skip_all "needs python3"

coll_start "$T_TMP/c.db"
mkdir -p "$T_TMP/shm" "$T_TMP/state"
"$FAY" agent --collector 127.0.0.1:$WP --host h1 --shm-dir "$T_TMP/shm" \
	--state-dir "$T_TMP/state" --no-containers >>"$T_TMP/agent.log" 2>&1 &
T_PIDS+=($!)
ok "an agent with a query connection" wait_for 30 coll_peers h1

declare -A NAMES=([fs1]=read,write [fs2]=read,write [db1]=query [db2]=query \
	[web1]=get,get,post [web2]=get,get,post)
declare -A RATE=([fs1]=40 [fs2]=120 [db1]=30 [db2]=90 [web1]=60 [web2]=150)
Q='from sp in cluster.spans group sp by {svc: sp.service, n: sp.name} into g
   select { svc: g.svc, n: g.n, c: g.count() }
   categorize svc by n into 3 window 2s for 8s'
timeout 60 "$FAY" query --cluster "$URL" --json "$Q" >"$T_TMP/out" 2>"$T_TMP/err" &
QPID=$!
ok "the spans query attaches on h1" wait_for 30 grep -q "attached" "$T_TMP/err"
for s in "${!NAMES[@]}"; do
	# each ends by itself (count / rate: 12 s at most)
	FAY_SAMPLE=1 FAY_SHM_DIR=$T_TMP/shm timeout 30 "$P" --service "$s" --names "${NAMES[$s]}" \
		--rate "${RATE[$s]}" --count $(( RATE[$s] * 12 )) >>"$T_TMP/producer.log" 2>&1 &
	T_PIDS+=($!)
done
wait $QPID
ok "fay query --cluster --json over spans with categorize ends well" [ $? -eq 0 ]
python3 - "$T_TMP/out" >"$T_TMP/check" 2>&1 <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
wins = [l for l in lines if "categories" in l]
want = [["db1", "db2"], ["fs1", "fs2"], ["web1", "web2"]]
top = {"db1": "query", "fs1": ("read", "write"), "web1": "get"}
full = 0
for w in wins:
    groups = sorted(sorted(c["members"]) for c in w["categories"] if c["members"])
    members = sum(len(g) for g in groups)
    if members < 6:
        continue        # a window the services had not all begun in
    full += 1
    assert groups == want, (groups, w)
    for c in w["categories"]:
        first = sorted(c["members"])[0]
        t = top[first]
        assert c["top"][0] in (t if isinstance(t, tuple) else (t,)), (first, c)
assert full >= 2, ("windows with every service:", full, len(wins))
rows = [l for l in lines if "category" in l and "svc" in l]
assert rows, "no row carries its category"
cat = {}
for r in rows:
    cat.setdefault(r["svc"], set()).add(r["category"])
print("ok", full, "windows of", len(wins))
PY
rc=$?
[ $rc = 0 ] && pass "three kinds of service recovered exactly by span-name mix ($(cat "$T_TMP/check"))" ||
	fail "categories over spans" "$(cat "$T_TMP/check")" "$(head -c 1500 "$T_TMP/out")"
coll_alive && pass "the collector is up" || fail "collector died"
coll_stop
done_testing
