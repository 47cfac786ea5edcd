#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What one query, or one client, may take (#10): a query whose maps the
# kernel would allocate beyond --max-map-memory at creation (profile()'s
# preallocated per-CPU map of large aggregates) is refused with the sizes,
# before anything is loaded, by fay query and by POST /api/query; a
# client address may run 16 queries at once on a collector (the 17th:
# 429 with Retry-After and the reason), and a slot comes back when a query ends.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/collector_lib.bash"

BIG='from p in profile(99) group p by p.comm into g select { c: g.key, a: g.quantile(p.pid, 0.5), b: g.quantile(p.tid, 0.5), d: g.distinct(p.tid), h: g.hist(p.tid) } window 1s'
out=$("$FAY" query --emit=bpf "$BIG" 2>&1)
rc=$?
diag "$out"
ok "fay query refuses a query whose maps take over 256 MiB at creation (exit 1)" test $rc -eq 1
ok "... naming the map, its keys, value size and CPUs, and the way out" \
	grep -q "fay_vals holds [0-9]* keys of [0-9]* bytes per CPU on [0-9]* CPUs.*--max-map-memory" <<<"$out"
out=$("$FAY" query --max-map-memory 2G --emit=bpf "$BIG" 2>&1)
ok "--max-map-memory 2G lets it through" test $? -eq 0
out=$("$FAY" query --max-map-memory 10 --emit=bpf "$BIG" 2>&1)
ok "--max-map-memory 10: refused as a bad size" grep -q "max-map-memory '10': expected a size of at least 1M" <<<"$out"

coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
code=$(curl -s -o "$T_TMP/big" -w '%{http_code}' --data "$BIG" "$URL/api/query")
ok "POST /api/query refuses it too, with the sizes" grep -q "256 MiB" "$T_TMP/big"
diag "$(head -c 300 "$T_TMP/big") (HTTP $code)"

Q='from s in syscall("getppid") select { n: count() } for 8s'
for i in $(seq 16); do
	curl -sN --data "$Q" "$URL/api/query" >"$T_TMP/q$i" 2>&1 &
	T_PIDS+=($!)
done
running() { [ "$(curl -s "$URL/metrics" | awk '$1 == "fay_collector_queries_running" { print $2 }')" = "$1" ]; }
ok "16 queries from one client run" wait_for 20 running 16
curl -s -D "$T_TMP/h5" -o "$T_TMP/q5" --data "$Q" "$URL/api/query"
ok "the 17th is refused 429" grep -q "^HTTP/1.1 429" "$T_TMP/h5"
ok "... with Retry-After" grep -qi "^Retry-After: 5" "$T_TMP/h5"
ok "... and the reason" grep -q "16 queries from 127.0.0.1 are running, the most one client address may run at once" "$T_TMP/q5"
ok "counted: fay_collector_queries_busy_total 1" test "$(metric fay_collector_queries_busy_total)" = 1
ok "when they end, the slots come back" wait_for 15 running 0
code=$(curl -s -o "$T_TMP/q6" -w '%{http_code}' --data 'from s in syscall("getppid") select { n: count() } for 1s' "$URL/api/query")
ok "a new query runs (200)" test "$code" = 200
ok "the collector is still serving" coll_alive
done_testing
