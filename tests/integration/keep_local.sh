#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Keep mode on this host (#22 item 4): `fay query 'from s in
# syscall("getppid") ... keep DUR [max N]'` keeps the events in a bounded
# buffer instead of printing them, and prints those of its last DUR when
# it ends, with their account.  query_work makes a known number of
# getppid() calls: every count is exact.
#  - all 50 events of a run kept and printed, none overwritten;
#  - 'max 20' with 50 events: the newest 20 printed, 30 overwritten;
#  - the time bound: 30 calls, 2.5 s pause, 10 calls with keep 1s: the
#    last 10 printed, the 30 older dropped, none overwritten;
#  - the grammar's errors: keep on an aggregate, keep without a duration,
#    max too large.
. "$(dirname "$0")/../lib/lib.sh"
need_root
W=$BUILD/tests/bin/query_work
[ -x "$FAY" ] || skip_all "fay is not built ($FAY)"
[ -x "$W" ] || skip_all "query_work is not built (make)"

# run NAME KEEP COMM CMD...: the query in keep mode on CMD (-c runs it
# through sh, which calls getppid() too: only COMM's calls are counted);
# out/err in $T_TMP
run() {
	local name=$1 keep=$2 comm=$3; shift 3
	timeout 60 "$FAY" query --json -c "$*" \
		"from s in syscall(\"getppid\") where s.comm == \"$comm\" select { pid: s.pid, tid: s.tid } $keep" \
		>"$T_TMP/$name.out" 2>"$T_TMP/$name.err"
}
lines() { wc -l <"$1"; }

run all 'keep 30s' query_work "$W" getppid 50
ok "keep 30s: the 50 events printed at the end" [ "$(lines "$T_TMP/all.out")" -eq 50 ] ||
	diag "$(cat "$T_TMP/all.out" "$T_TMP/all.err")"
ok "... its account: kept 50, 50 seen, 0 overwritten" \
	grep -q 'kept 50 events of the last 30000 ms (50 seen, 0 overwritten' "$T_TMP/all.err"

run max 'keep 30s max 20' query_work "$W" getppid 50
ok "keep 30s max 20 of 50 events: 20 printed" [ "$(lines "$T_TMP/max.out")" -eq 20 ] ||
	diag "$(cat "$T_TMP/max.out" "$T_TMP/max.err")"
ok "... 30 overwritten, at most 20 kept" \
	grep -q 'kept 20 events of the last 30000 ms (50 seen, 30 overwritten: at most 20 kept, 0 older dropped)' \
	"$T_TMP/max.err" || diag "$(cat "$T_TMP/max.err")"

# one process (-c traces it, not its children)
command -v python3 >/dev/null || skip_all "needs python3"
cat >"$T_TMP/pause.py" <<'PY'
import os, time
for _ in range(30): os.getppid()
time.sleep(2.5)
for _ in range(10): os.getppid()
PY
run time 'keep 1s' python3 python3 "$T_TMP/pause.py"
ok "keep 1s, 30 calls, a 2.5 s pause, 10 calls: the last 10 printed" \
	[ "$(lines "$T_TMP/time.out")" -eq 10 ] || diag "$(cat "$T_TMP/time.out" "$T_TMP/time.err")"
ok "... the 30 older dropped, none overwritten" \
	grep -q 'kept 10 events of the last 1000 ms (40 seen, 0 overwritten: at most [0-9]* kept, 30 older dropped)' \
	"$T_TMP/time.err" || diag "$(cat "$T_TMP/time.err")"

bad() {	# QUERY WANT: refused (2) with WANT in the message
	"$FAY" query "$1" >/dev/null 2>"$T_TMP/bad.err"
	[ $? -eq 2 ] && grep -q "$2" "$T_TMP/bad.err"
}
ok "keep on an aggregate: refused" bad \
	'from s in syscall("getppid") group s by s.pid into g select { n: g.count() } keep 3s' \
	'keep needs a select without aggregates'
ok "keep without a duration: refused" bad 'from s in syscall("getppid") select s.pid keep' \
	"expected a duration after 'keep'"
ok "keep ... max too large: refused" bad 'from s in syscall("getppid") select s.pid keep 1s max 20000000' \
	'at most 10000000 events'
ok "keep with limit: refused" bad 'from s in syscall("getppid") select s.pid limit 5 for 1s keep 1s' \
	'keep and limit do not go together'
ok "'keep' is still a name elsewhere" bash -c '"$0" query --emit=plan "from s in syscall(\"getppid\") let keep = s.pid select { keep: keep }" >/dev/null' "$FAY"
done_testing
