#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cluster form of the one-host suite's exact answers: three real agents
# (h1 h2 h3), each host with its own copy of the workload binary (its own
# truth: the hosts share a kernel), K = 100, 200, 300 calls of
# fay_work_fn(i, 7) (returns i + 7) and USDT fayq:tick(i, 2i, "tick").
# Every aggregate, group keys, return values (paired probes), USDT
# arguments, streams with 'limit' and windows must equal what the
# workloads did, summed over the hosts.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/../lib/query_bg.bash"
W=$BUILD/tests/bin/query_work
[ -x "$W" ] || skip_all "query_work is not built (make)"

HOSTS="h1 h2 h3"
declare -A K=([h1]=100 [h2]=200 [h3]=300)
coll_start "$T_TMP/c.db"
for h in $HOSTS; do
	mkdir -p "$T_TMP/$h"
	cp "$W" "$T_TMP/$h/qw"
	( cd "$T_TMP/$h" && exec "$FAY" agent --collector 127.0.0.1:$WP --host $h \
		--shm-dir "$T_TMP/$h" --state-dir "$T_TMP/$h" ) >>"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
done
peers() { [ "$(curl -s "$URL/api/cluster/peers" | grep -o '"host":' | wc -l)" -ge 3 ]; }
ok "three agents with query connections" wait_for 15 peers

# cq MODE QUERY: run the workloads (MODE: calls or usdt) under a cluster
# query; --json output in $T_TMP/out.  The queries run 8 s (were 4): their
# time counts from the query's start, and the hosts' attach comes out of it
# (a USDT query had no host attached after 4 s at load 14)
cq() {
	local mode=$1 go=$T_TMP/go.$RANDOM
	shift
	for h in $HOSTS; do QW_WAIT=$go "$T_TMP/$h/qw" $mode ${K[$h]} & T_PIDS+=($!); done
	# every host attached (QUERY_BG_HOSTS: hosts, not lines)
	QUERY_BG_HOSTS=1 query_bg 3 "$T_TMP/out" "$T_TMP/err" timeout 60 "$FAY" query --cluster "$URL" --json "$@" &&
		touch "$go"
	wait $QBG
	RC=$?
}
# check WHAT PYTHON: the python expression (rows: the JSON lines; ends:
# the completeness lines that follow a window's, a result's or a stream's
# rows; ks: the K of each host) must hold
check() {
	if python3 - "$T_TMP/out" "$2" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in lines if "hosts" not in r]
ends = [r for r in lines if "hosts" in r]
ks = [100, 200, 300]
def hist(vals):
    b = {}
    for v in vals:
        i = 0 if v <= 0 else v.bit_length()
        b[i] = b.get(i, 0) + 1
    return b
allv = [i for k in ks for i in range(k)]
ok = eval("(" + sys.argv[2] + ")")
if not ok:
    print("rows:", rows[:12], file=sys.stderr)
sys.exit(0 if ok else 1)
PY
	then pass "$1"; else fail "$1 (rc=$RC)" "$(head -c 800 "$T_TMP/out")" "$(head -c 600 "$T_TMP/err")"; fi
}

F='cluster.function("./qw:fay_work_fn")'
cq calls "from c in $F select { n: count(), s: sum(c.arg(0)), lo: min(c.arg(0)), hi: max(c.arg(0)), a: avg(c.arg(0)), r: sum(c.ret) } for 8s"
check "count, sum, min, max, avg of arguments and sum of return values over three hosts" \
	'rows == [{"n": 600, "s": sum(allv), "lo": 0, "hi": 299, "a": sum(allv) // 600, "r": sum(allv) + 7 * 600}]'

cq calls "from c in $F select { h: hist(c.arg(0)), l: lhist(c.arg(0), 0, 300, 25) } for 8s"
check "hist and lhist buckets summed over hosts" '
len(rows) == 1 and
{(0 if b["lo"] is None else b["lo"].bit_length()): b["count"] for b in rows[0]["h"]} == hist(allv) and
all(b["count"] == sum(1 for v in allv if b["lo"] <= v < b["hi"]) for b in rows[0]["l"]) and
sum(b["count"] for b in rows[0]["l"]) == 600'

cq calls "from c in $F group c by c.arg(0) % 10 into g select { k: g.key, n: g.count(), s: g.sum(c.ret) } for 8s"
check "grouped by arg(0) % 10: every key's count and sum of returns" \
	'rows == [{"k": k, "n": sum(1 for v in allv if v % 10 == k), "s": sum(v + 7 for v in allv if v % 10 == k)} for k in range(10)]'

cq calls "from c in $F where c.duration > 0 group c by c.host into g select { host: g.key, n: g.count(), q: g.quantile(c.arg(0), 0.5), d: g.distinct(c.arg(0)) } for 8s"
check "per host: paired count with duration, quantile and distinct within their bounds" '
[r["host"] for r in rows] == ["h1", "h2", "h3"] and [r["n"] for r in rows] == ks and
all(abs(r["q"] - (k // 2 - 1)) <= max(1, 0.04 * k) and abs(r["d"] - k) <= 0.1 * k for r, k in zip(rows, ks))'

cq usdt "from u in cluster.usdt(\"./qw:fayq:tick\") group u by str(u.arg(2)) into g select { w: g.key, n: g.count(), s: g.sum(u.arg(1)) } for 8s"
check "USDT arguments and a string argument as key, over three hosts" \
	'rows == [{"w": "tick", "n": 600, "s": 2 * sum(allv)}]'

cq calls "from c in $F where c.arg(0) < 3 select { host: c.host, a: c.arg(0) } for 8s"
check "a stream: every host's rows, each exactly once" \
	'sorted((r["host"], r["a"]) for r in rows) == sorted((h, a) for h in ("h1", "h2", "h3") for a in range(3))'
check "... and its end says it heard every host" \
	'ends == [{"final": True, "provisional": False, "amended": False, "hosts": {"asked": 3, "answered": 3, "late": 0, "missing": [], "failed": []}, "dropped": {}}]'

# 'for 30s', not 8 s: the limit ends this query as soon as 20 rows are in,
# so 'for' only bounds it; and its time counts from the query's start, the
# hosts' attach out of it: under CI's load the three hosts attached after
# the 8 s had run out (once), the workloads ran after the end, and the
# stream ended with no row (exit 0, then without a word: now its end line
# says which hosts attached too late, tested below)
cq calls "from c in $F where c.arg(0) < 50 select { a: c.arg(0) } limit 20 for 30s"
check "a stream with limit 20: 20 rows in all" 'len(rows) == 20'
check "... and its end says 3 of 3 hosts answered (limit reached: the hosts still running are not missing)" \
	'len(ends) == 1 and ends[0]["hosts"]["answered"] == 3 and ends[0]["hosts"]["missing"] == [] and not ends[0]["provisional"]'

# A stream whose time ran out before any host attached (the race above,
# forced: 1 ms is shorter than any attach) is not an empty answer with
# exit 0: its end line lists every host missing, and standard error says
# each attached after the query's time ran out
cq calls "from c in $F where c.arg(0) < 50 select { a: c.arg(0) } limit 20 for 1ms"
check "a stream that ended before its hosts attached: no row, and its end lists all three missing (exit $RC)" \
	'rows == [] and len(ends) == 1 and ends[0]["provisional"] and ends[0]["hosts"]["answered"] == 0 and
	 sorted(ends[0]["hosts"]["missing"]) == ["h1", "h2", "h3"]'
ok "... standard error names each host that attached after the query's time ran out, and the result's 0 of 3" \
	bash -c '[ "$(grep -c "^fay: h[123]: attached after the query.s time ran out: it traced nothing" "$1")" = 3 ] &&
		grep -q "^fay: result (provisional): 0 of 3 hosts answered; missing: " "$1" && [ "$2" = 0 ]' _ "$T_TMP/err" "$RC" ||
	diag "$(cat "$T_TMP/err")"

# the same for an aggregate: its result was "3 of 3 hosts answered" over
# hosts that had traced nothing; now they are missing, and named
cq calls "from c in $F select { n: count() } for 1ms"
check "an aggregate whose time ran out before its hosts attached: provisional, 0 of 3 answered, all three missing" \
	'len(ends) == 1 and ends[0]["provisional"] and ends[0]["hosts"]["answered"] == 0 and
	 sorted(ends[0]["hosts"]["missing"]) == ["h1", "h2", "h3"]'
ok "... standard error names the three hosts that attached after its time ran out" \
	bash -c '[ "$(grep -c "^fay: h[123]: attached after the query.s time ran out: it traced nothing" "$1")" = 3 ]' _ "$T_TMP/err" ||
	diag "$(cat "$T_TMP/err")"

cq calls "from c in $F group c by c.host into g select { host: g.key, n: g.count() } window 1s for 9s"
check "windows: each host's counts add up to its K" \
	'all(sum(r["n"] for r in rows if r["host"] == h) == k for h, k in zip(("h1", "h2", "h3"), ks)) and all("window_start_ns" in r for r in rows)'

cq calls "from c in $F group c by c.host into g select { host: g.key, n: g.count() } order by n desc limit 2 for 8s"
check "order by and limit run at the root: the two busiest hosts" \
	'rows == [{"host": "h3", "n": 300}, {"host": "h2", "n": 200}]'
done_testing
