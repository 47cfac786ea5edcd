#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cluster queries through a tree of collectors (fay collector --parent):
# the same workload answered through a flat collector and through a root
# with two intermediate collectors gives identical results; an
# intermediate collector killed mid-query makes its hosts' windows
# missing, not wrong.  Three real agents, each host with its own copy of
# the workload binary (see cluster_query.sh).
. "$(dirname "$0")/../lib/lib.sh"
need_root
W=$BUILD/tests/bin/query_work
[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"
[ -x "$W" ] || skip_all "query_work is not built (make)"
command -v curl >/dev/null || skip_all "needs curl"

declare -A K=([h1]=100 [h2]=200 [h3]=300) APID
HOSTS="h1 h2 h3"

# coll NAME [ARGS...]: a collector on free ports; sets ${NAME}_W, ${NAME}_H, ${NAME}_PID
coll() {
	local n=$1 w h
	shift
	w=$(free_port)
	h=$(free_port)
	"$FAY" collector --listen 127.0.0.1:$w --http 127.0.0.1:$h --db "$T_TMP/$n.db" "$@" \
		>>"$T_TMP/$n.log" 2>&1 &
	T_PIDS+=($!)
	printf -v "${n}_W" %s "$w"
	printf -v "${n}_H" %s "$h"
	printf -v "${n}_PID" %s "$!"
	wait_for 10 curl -sf "http://127.0.0.1:$h/health"
}
agent() {	# agent HOST WIREPORT
	local d=$T_TMP/$1
	mkdir -p "$d"
	[ -e "$d/qw" ] || cp "$W" "$d/qw"
	( cd "$d" && exec "$FAY" agent --collector 127.0.0.1:$2 --host "$1" \
		--shm-dir "$d" --state-dir "$d" ) >>"$T_TMP/$1.log" 2>&1 &
	APID[$1]=$!
	T_PIDS+=($!)
}
peers() {	# peers HTTPPORT N: N query connections there
	[ "$(curl -s "http://127.0.0.1:$1/api/cluster/peers" | grep -o '"host":' | wc -l)" -ge "$2" ]
}
# n_attached N ERR: N of the hosts h1..h3 attached, named directly ("fay:
# h1: attached: ...") or by an intermediate collector ("fay: c1: attached:
# h1: ...; h2: ..."); hosts, not lines: each time one more answers, fay
# query prints every attached member again (after 2 s without all answers,
# as under load, the lines added up before every host had attached)
n_attached() {
	[ "$(grep -oE '^fay: h[0-9]+: attached|^fay: [^:]*: attached: h[0-9]+: |; h[0-9]+: ' "$2" |
		grep -oE 'h[0-9]+' | sort -u | wc -l)" -ge "$1" ]
}
# run PORT OUT ERR NHOSTS QUERY: run it with the workloads
run() {
	local go=$T_TMP/go.$RANDOM
	for h in $HOSTS; do QW_WAIT=$go "$T_TMP/$h/qw" calls "${K[$h]}" & T_PIDS+=($!); done
	timeout 60 "$FAY" query --cluster "http://127.0.0.1:$1" --json "$5" >"$2" 2>"$3" &
	local q=$!
	wait_for 15 n_attached "$4" "$3" && touch "$go"
	wait $q
}

# 8 s: a query's time counts from its start, the attach comes out of it
Q='from c in cluster.function("./qw:fay_work_fn") group c by c.host into g
   select { host: g.key, n: g.count(), s: g.sum(c.arg(0)), lo: g.min(c.arg(0)),
            h: g.hist(c.arg(0)), l: g.lhist(c.arg(0), 0, 300, 50), p90: g.quantile(c.arg(0), 0.9),
            d: g.distinct(c.arg(0) % 37) } for 8s'
QT='from c in cluster.function("./qw:fay_work_fn") select { n: count(), s: sum(c.arg(0)),
            p50: quantile(c.arg(0), 0.5), d: distinct(c.arg(0)), h: hist(c.arg(0)) } for 8s'
# a stream: the records go up as they come; its end says who answered
QS='from c in cluster.function("./qw:fay_work_fn") where c.arg(0) < 3 select { host: c.host, a: c.arg(0) } for 8s'

# ---- flat: three agents under one collector ----------------------------------
coll F
for h in $HOSTS; do agent $h $F_W; done
ok "flat: three query connections" wait_for 15 peers $F_H 3
run $F_H "$T_TMP/flat1" "$T_TMP/flat1.err" 3 "$Q"
run $F_H "$T_TMP/flat2" "$T_TMP/flat2.err" 3 "$QT"
run $F_H "$T_TMP/flat3" "$T_TMP/flat3.err" 3 "$QS"
for h in $HOSTS; do kill "${APID[$h]}"; wait "${APID[$h]}" 2>/dev/null; done
grep -q '"host":"h3","n":300,"s":44850,"lo":0' "$T_TMP/flat1" && pass "flat: exact per-host answers" ||
	fail "flat answers" "$(cat "$T_TMP/flat1" "$T_TMP/flat1.err")"

# ---- a tree: root <- c1 (h1, h2), c2 (h3) --------------------------------------
coll R
coll C1 --parent 127.0.0.1:$R_W --host c1
coll C2 --parent 127.0.0.1:$R_W --host c2
agent h1 $C1_W
agent h2 $C1_W
agent h3 $C2_W
ok "tree: the root has its two children" wait_for 15 peers $R_H 2
ok "tree: c1 has h1 and h2, c2 has h3" wait_for 15 eval "peers $C1_H 2 && peers $C2_H 1"
run $R_H "$T_TMP/tree1" "$T_TMP/tree1.err" 3 "$Q"
run $R_H "$T_TMP/tree2" "$T_TMP/tree2.err" 3 "$QT"
run $R_H "$T_TMP/tree3" "$T_TMP/tree3.err" 3 "$QS"
# and one whose time ran out before any host attached: each child names
# its hosts missing (an ended child's unanswered hosts were not listed)
run $R_H "$T_TMP/tree4" "$T_TMP/tree4.err" 3 "${QS/for 8s/for 1ms}"
if [ -s "$T_TMP/tree1" ] && cmp -s "$T_TMP/flat1" "$T_TMP/tree1"; then
	pass "every aggregate grouped by host: two-level tree == flat, byte for byte"
else
	fail "grouped: tree vs flat" "flat: $(cat "$T_TMP/flat1")" "tree: $(cat "$T_TMP/tree1")" "$(cat "$T_TMP/tree1.err")"
fi
if [ -s "$T_TMP/tree2" ] && cmp -s "$T_TMP/flat2" "$T_TMP/tree2"; then
	pass "totals, merged quantile and distinct sketches: tree == flat ($(cat "$T_TMP/tree2" | head -c 120))"
else
	fail "totals: tree vs flat" "flat: $(cat "$T_TMP/flat2")" "tree: $(cat "$T_TMP/tree2")"
fi
grep -q 'result: 3 of 3 hosts answered' "$T_TMP/tree1.err" &&
	pass "the root counts the hosts under its children: 3 of 3 hosts answered" ||
	fail "hosts through the tree" "$(cat "$T_TMP/tree1.err")"

# a stream through the tree: the same records as flat (in another order),
# and its end line counts the hosts under the children (each child's final
# names its hosts, answered): 3 of 3, as flat
ok "a stream through the tree: the same rows as flat, and its end says 3 of 3 hosts answered (flat too)" \
	python3 - "$T_TMP/flat3" "$T_TMP/tree3" <<'PY' || diag "$(cat "$T_TMP/flat3" "$T_TMP/tree3" "$T_TMP/tree3.err")"
import json, sys
want = sorted((h, a) for h in ("h1", "h2", "h3") for a in range(3))
end = {"final": True, "provisional": False, "amended": False, "hosts": {"asked": 3, "answered": 3,
       "late": 0, "missing": [], "failed": []}, "dropped": {}}
for f in sys.argv[1:]:
    lines = [json.loads(l) for l in open(f) if l.strip()]
    rows = sorted((r["host"], r["a"]) for r in lines if "hosts" not in r)
    assert rows == want, (f, rows)
    assert [l for l in lines if "hosts" in l] == [end], (f, lines)
PY
grep -q '^fay: result: 3 of 3 hosts answered$' "$T_TMP/tree3.err" &&
	pass "... and standard error says it: result: 3 of 3 hosts answered" ||
	fail "stream through the tree: stderr" "$(cat "$T_TMP/tree3.err")"
ok "a stream through the tree whose time ran out before the hosts attached: 0 of 3 answered, h1 h2 h3 missing" \
	python3 - "$T_TMP/tree4" <<'PY' || diag "$(cat "$T_TMP/tree4" "$T_TMP/tree4.err")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 1 and lines[0]["provisional"], lines
h = lines[0]["hosts"]
assert h["asked"] == 3 and h["answered"] == 0 and sorted(h["missing"]) == ["h1", "h2", "h3"], lines
PY
# (each child's final stream PARTIAL had its end before its start: the
# root refused it as a violation and closed the child's link)
ok "... and the root closed no child's link (no PARTIAL refused)" \
	bash -c '! grep -E "query connection of c[12] .*closing it" "$1"' _ "$T_TMP/R.log"

# ---- an intermediate collector killed mid-query ----------------------------------
( while :; do "$W" getppid 20 >/dev/null; sleep 0.1; done ) &	# rows in every window
T_PIDS+=($!)
# 10 s (was 7): the kill waits for a complete window, and windows after it
# must follow before the end (the attach under load comes out of the time)
QW='from c in cluster.syscall("getppid") group c by c.host into g select { host: g.key, n: g.count() >= 0 } window 1s for 10s'
timeout 60 "$FAY" query --cluster "http://127.0.0.1:$R_H" --grace 300ms "$QW" >"$T_TMP/o3" 2>"$T_TMP/e3" &
q=$!
wait_for 30 n_attached 3 "$T_TMP/e3"
# c2 dies once a window has had every host (checked below), not after a
# fixed 2.5 s: under load the first windows after the attach can all be
# partial, and then no "3 of 3" came before the kill
wait_for 30 grep -q '3 of 3 hosts answered' "$T_TMP/e3"
kill -9 "$C2_PID"
wait "$C2_PID" 2>/dev/null
wait $q
RC=$?
grep -q '3 of 3 hosts answered' "$T_TMP/e3" && grep -q 'answered; missing: h3$' "$T_TMP/e3" &&
	pass "c2 killed: its host h3 is reported missing in the following windows" ||
	fail "c2 killed (rc=$RC)" "$(cat "$T_TMP/e3")"
# the last window with rows: the query's last window ends with it (for
# 10s from a start not on a second) and may be too short to hold a call
last_rows() {
	awk '/^window / { cur = "" } /^h[0-9]/ { cur = cur $1 " " } cur != "" { last = cur }
	     END { print last }' "$T_TMP/o3"
}
if last_rows | grep -q 'h3'; then
	fail "h3 rows after c2 died" "$(cat "$T_TMP/o3")"
elif last_rows | grep -q 'h1'; then
	pass "windows after c2 died carry h1 and h2 only, not stale h3 rows"
else
	fail "no rows in the last windows" "$(cat "$T_TMP/o3")"
fi
[ $RC -eq 0 ] && pass "the query went on to its end" || fail "rc=$RC"
done_testing
