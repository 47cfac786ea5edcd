#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes (issue #8) for real: the function(...) exact-answer
# questions of query_run.sh and query_questions.sh asked of the same
# workload in uprobe mode and in inline mode (the runtime preloaded by
# --probe-mode=inline -c, by fay run, or loaded with ptrace into a
# running process by auto mode): both answers must be the known truth,
# hence identical; approximate aggregates (quantiles, distinct) must be
# the same bytes in both modes and within their bounds; the
# mode line (auto picks inline only where the runtime is loaded; inline
# fails with the reason); fay run --help.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/query_lib.bash"
need_query_work
[ -r "$BUILD/libfay-probe.so" ] || { fail "libfay-probe.so at $BUILD"; done_testing; exit 1; }
K=1000

# both CMD QUERY WANT WHAT: the answer in uprobe mode and in inline mode
# (-c CMD) is WANT, exactly; the inline run says it ran inline.
both() {
	local cmd=$1 q=$2 want=$3 what=$4 up
	fq --json --probe-mode=uprobe -c "$cmd" "$q"
	same "$T_TMP/out" "$want" "uprobe: $what"
	up=$(cat "$T_TMP/out")
	timeout 60 "$FAY" query --json --probe-mode=inline -c "$cmd" "$q" >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
	if [ "$(cat "$T_TMP/out")" = "$want" ] && [ "$up" = "$want" ] && [ $RC -eq 0 ] &&
	   grep -q '^fay: pid [0-9]*: inline (' "$T_TMP/err" &&
	   grep -q 'probes\? attached: inline ' "$T_TMP/err"; then
		pass "inline: $what (the same answer)"
	else
		fail "inline: $what (rc=$RC)" "got:  $(head -c 1500 "$T_TMP/out")" "want: $want" \
			"$(head -c 600 "$T_TMP/err")"
	fi
}

F="function(\"$W:fay_work_fn\")"
both "$W calls $K" "from f in $F select { n: count(), s: sum(f.arg(0)), mn: min(f.arg(0)), mx: max(f.arg(0)), a: avg(f.arg(0)), b: sum(f.arg(1)) }" \
	'{"n":1000,"s":499500,"mn":0,"mx":999,"a":499,"b":7000}' "function: count, sum, min, max, avg of known arguments"

both "$W calls $K" "from f in $F select { h: hist(f.arg(0)) }" \
	'{"h":[{"lo":null,"hi":1,"count":1},{"lo":1,"hi":2,"count":1},{"lo":2,"hi":4,"count":2},{"lo":4,"hi":8,"count":4},{"lo":8,"hi":16,"count":8},{"lo":16,"hi":32,"count":16},{"lo":32,"hi":64,"count":32},{"lo":64,"hi":128,"count":64},{"lo":128,"hi":256,"count":128},{"lo":256,"hi":512,"count":256},{"lo":512,"hi":1024,"count":488}]}' \
	"function: hist bucket edges (power of two)"

both "$W calls $K" "from f in $F select { l: lhist(f.arg(0), 100, 900, 200) }" \
	'{"l":[{"lo":null,"hi":100,"count":100},{"lo":100,"hi":300,"count":200},{"lo":300,"hi":500,"count":200},{"lo":500,"hi":700,"count":200},{"lo":700,"hi":900,"count":200},{"lo":900,"hi":null,"count":100}]}' \
	"function: lhist buckets with under/overflow"

want=$(python3 -c '
import json
for m in range(3):
    for big in (0, 1):
        xs = [i for i in range(1000) if i % 3 == m and (i >= 500) == big]
        print(json.dumps(dict(m=m, big=big, n=len(xs), s=sum(xs)), separators=(",", ":")))')
both "$W calls $K" "from f in $F group f by { m: f.arg(0) % 3, big: f.arg(0) >= 500 } into g select { m: g.m, big: g.big, n: g.count(), s: g.sum(f.arg(0)) }" \
	"$want" "function: group by a tuple, rows in key order"

both "$W calls $K" "from f in $F where f.ret % 2 == 0 select { n: count(), r: sum(f.ret) }" \
	'{"n":500,"r":253500}' "function: ret (exit probe) in where and sum"

both "$W words 999" "from f in function(\"$W:fay_work_word\") group f by str(f.arg(0)) into g select { w: g.key, n: g.count() } order by n desc limit 2" \
	'{"w":"alpha","n":333}
{"w":"beta","n":333}' "function: group by str(arg), order by desc, limit"

both "$W words 30" "from f in function(\"$W:fay_work_word\") let w = str(f.arg(0)) where w != \"beta\" group f by { w: w, c: f.comm } into g select { w: g.w, c: g.c, n: g.count(), d: g.distinct(w) }" \
	'{"w":"alpha","c":"query_work","n":10,"d":1}
{"w":"gamma","c":"query_work","n":10,"d":1}' "function: a string let in where, a tuple key and distinct"

both "$W sleep 20 3000" "from f in function(\"$W:fay_work_sleep\") select { n: count(), ok: min(f.duration) >= 3000000 && max(f.duration) < 1000000000 }" \
	'{"n":20,"ok":1}' "function: durations via entry+exit pairing (20 sleeps of 3 ms)"

# durations are nanoseconds of CLOCK_MONOTONIC in both modes (inline:
# the TSC, calibrated and slewed to it): 20 sleeps of 3 ms; each mode's
# total lies between the 60 ms asked for and what the caller measured
# around the calls, its maximum at most the caller's largest call.  The
# inline clock is the TSC calibrated against CLOCK_MONOTONIC at load, so
# it may run a few ppm apart from the caller's clock (a 3 ms call once
# measured 16 ns longer than the caller saw it): 100 ppm plus 1 us slack.
IW=$BUILD/tests/bin/inline_work
for mode in uprobe inline; do
	fq --json --probe-mode=$mode -c "$IW sleep 20 3" \
		"from f in function(\"$IW:fay_inline_sleep\") select { n: count(), s: sum(f.duration), mx: max(f.duration) }"
	verdict=$(python3 - "$T_TMP/out" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().split("\n")
w = dict(zip(*[iter(next(l for l in lines if l.startswith("sum_ns")).split())] * 2))
q = json.loads(next(l for l in lines if l.startswith("{")))
slack = lambda ns: ns + ns // 10000 + 1000
ok = q["n"] == 20 and 60000000 <= q["s"] <= slack(int(w["sum_ns"])) and q["mx"] <= slack(int(w["max_ns"]))
print(("ok" if ok else "bad") + " probe %s ns, max %s; caller %s ns, max %s" %
      (q["s"], q["mx"], w["sum_ns"], w["max_ns"]))
PY
)
	[ $RC -eq 0 ] && [ "${verdict%% *}" = ok ] &&
		pass "$mode: durations in ns within the caller's clock ($verdict)" ||
		fail "$mode: durations in ns within the caller's clock (rc=$RC)" "$verdict" \
			"$(head -c 600 "$T_TMP/out")" "$(head -c 600 "$T_TMP/err")"
done

both "$W calls 5" "from f in $F select { a: f.arg(0), r: f.ret }" \
	'{"a":0,"r":7}
{"a":1,"r":8}
{"a":2,"r":9}
{"a":3,"r":10}
{"a":4,"r":11}' "function: a stream of rows (arg at entry, ret at exit)"

# windows: every call lands in one window or the next, none lost or twice
for mode in uprobe inline; do
	fq --json --probe-mode=$mode -c "$W calls 30000" "from f in $F select { n: count() } window 100ms"
	n=$(python3 -c "import json,sys; print(sum(json.loads(l)['n'] for l in open('$T_TMP/out')))" 2>/dev/null)
	[ "$n" = 30000 ] && [ $RC -eq 0 ] && pass "$mode: windows of 100ms add up to 30000 calls" ||
		fail "$mode: windowed counts add up (rc=$RC, sum $n)" "$(head -c 300 "$T_TMP/out")" "$(head -c 300 "$T_TMP/err")"
done

# ---- approximate aggregates, where on arguments, limits: byte for byte ------------
# alike CMD QUERY CHECK WHAT: the answers in uprobe and inline mode (-c
# CMD) are the same bytes (the sketches merge per CPU or per thread slot
# alike) and the python expression CHECK holds for them (r: the rows).
# A uprobe run that reports a drop (a per-CPU hash's value not allocated
# in time under memory pressure: "warning: N events dropped ...") is
# asked again, up to three times.
alike() {
	local cmd=$1 q=$2 check=$3 what=$4 urc
	for try in 1 2 3; do
		timeout 60 "$FAY" query --json --probe-mode=uprobe -c "$cmd" "$q" >"$T_TMP/up" 2>"$T_TMP/err"
		urc=$?
		grep -q '^warning: ' "$T_TMP/err" || break
		diag "uprobe run $try: $(grep '^warning: ' "$T_TMP/err" | head -1)"
	done
	timeout 60 "$FAY" query --json --probe-mode=inline -c "$cmd" "$q" >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
	if [ $urc -eq 0 ] && [ $RC -eq 0 ] && cmp -s "$T_TMP/up" "$T_TMP/out" &&
	   grep -q '^fay: pid [0-9]*: inline (' "$T_TMP/err" &&
	   python3 - "$T_TMP/out" "$check" 2>"$T_TMP/perr" <<'PY'
import json, math, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert eval(sys.argv[2]), r
PY
	then
		pass "uprobe = inline, byte for byte: $what ($(wc -l <"$T_TMP/out") rows, the first $(head -1 "$T_TMP/out" | head -c 160))"
	else
		fail "uprobe = inline: $what (rc $urc, $RC)" "uprobe: $(head -c 600 "$T_TMP/up")" \
			"inline: $(head -c 600 "$T_TMP/out")" "$(head -c 600 "$T_TMP/perr" "$T_TMP/err")"
	fi
}
alike "$W calls $K" "from f in $F select { p50: quantile(f.arg(0), 0.5), p99: quantile(f.arg(0), 0.99), d: distinct(f.arg(0)), d10: distinct(f.arg(0) % 10) }" \
	'abs(r[0]["p50"] - 499) <= 499 / 32 and abs(r[0]["p99"] - 989) <= 989 / 32 and abs(r[0]["d"] - 1000) <= 3 * 0.0325 * 1000 and r[0]["d10"] == 10' \
	"function: quantile within 3.125%, distinct within 3 standard errors"
alike "$W calls 20000" "from c in $F select { p10: quantile(c.arg(0), 0.1), p50: quantile(c.arg(0), 0.5), p90: quantile(c.arg(0), 0.9), p99: quantile(c.arg(0), 0.99), p999: quantile(c.arg(0), 0.999), d0: distinct(c.arg(0)), d2: distinct(c.arg(0) / 2), d100: distinct(c.arg(0) % 100), n: count() }" \
	'r[0]["n"] == 20000 and all(abs(r[0][k] - (math.ceil(p * 20000) - 1)) <= (math.ceil(p * 20000) - 1) / 32 + 1 for k, p in (("p10", .1), ("p50", .5), ("p90", .9), ("p99", .99), ("p999", .999))) and all(abs(r[0][k] - t) <= 3 * 0.0325 * t + 1 for k, t in (("d0", 20000), ("d2", 10000), ("d100", 100)))' \
	"function: five quantiles sharing one sketch and three distincts over 20,000 calls"
alike "$W calls $K" "from f in $F where f.arg(0) >= 100 && f.arg(0) < 900 group f by f.arg(0) % 4 into g select { k: g.key, n: g.count(), q: g.quantile(f.arg(0), 0.5), r: g.sum(f.ret), h: g.hist(f.arg(0)) }" \
	'[(x["k"], x["n"], x["r"]) for x in r] == [(k, 200, sum(i + 7 for i in range(100, 900) if i % 4 == k)) for k in range(4)] and all(abs(x["q"] - 499) <= 499 / 32 + 4 and sum(b["count"] for b in x["h"]) == 200 for x in r)' \
	"function: where on arguments, group by, per-key quantile, sum of ret, hist"
alike "$W calls $K" "from f in $F where f.arg(0) % 100 == 7 select { a: f.arg(0), r: f.ret, c: f.comm } limit 4" \
	'r == [{"a": a, "r": a + 7, "c": "query_work"} for a in (7, 107, 207, 307)]' \
	"function: a stream filtered on an argument, with limit"

# process(PID).function of a process fay did not start, -p: auto loads the
# runtime with ptrace (inline_auto.sh) and answers as uprobe mode does
# (QW_READY: -p PID reads /proc/PID/exe, the shell's until the fork has
# exec'd the workload, and auto needs glibc mapped to load the runtime)
for mode in uprobe auto; do
	go=$T_TMP/go.$RANDOM ready=$T_TMP/ready.$RANDOM
	: >"$T_TMP/err"
	QW_READY=$ready QW_WAIT=$go "$W" calls 400 & wpid=$!
	wait_for 60 test -e "$ready"
	( wait_for 60 grep -q attached "$T_TMP/err"; touch "$go" ) &
	timeout 60 "$FAY" query --json --probe-mode=$mode -p $wpid \
		"from f in process($wpid).function(\"fay_work_fn\") where f.arg(0) >= 100 select { n: count(), s: sum(f.arg(0)), r: sum(f.ret), pid: max(f.pid) }" \
		>"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
	wait $wpid
	same "$T_TMP/out" "{\"n\":300,\"s\":74850,\"r\":76950,\"pid\":$wpid}" \
		"$mode: process(PID).function of a running process, where on an argument, -p"
done
ok "auto: that process got the runtime loaded with ptrace and ran inline" \
	grep -q "^fay: pid $wpid: inline, runtime loaded with ptrace" "$T_TMP/err"

# ---- fay run ------------------------------------------------------------------
timeout 60 "$FAY" run --json --query "from f in $F group f by f.arg(0) % 3 into g select { k: g.key, n: g.count(), s: g.sum(f.arg(1)) }" -- "$W" calls 3000 >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
same "$T_TMP/out" '{"k":0,"n":1000,"s":7000}
{"k":1,"n":1000,"s":7000}
{"k":2,"n":1000,"s":7000}' "fay run --query: exact answer, the command's own arguments"

# fay run without a query; fay query -p finds the runtime (auto: inline)
go=$T_TMP/go.run
QW_WAIT=$go "$FAY" run -- "$W" calls 400 & wpid=$!
wait_for 60 test -S /run/fay/inline/$wpid.sock
ok "fay run: the runtime's socket /run/fay/inline/PID.sock, root only" \
	test "$(stat -c %a /run/fay/inline/$wpid.sock)" = 600 -a "$(stat -c %a /run/fay/inline)" = 700
: >"$T_TMP/err"
( wait_for 60 grep -q attached "$T_TMP/err"; touch "$go" ) &
timeout 60 "$FAY" query --json -p $wpid "from f in process($wpid).function(\"fay_work_fn\") select { n: count(), pid: max(f.pid) }" >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
wait $wpid; wrc=$?
same "$T_TMP/out" "{\"n\":400,\"pid\":$wpid}" "process(PID).function of a process started by fay run"
ok "auto picked inline and said so" grep -q "^fay: pid $wpid: inline (fay_work_fn: lea" "$T_TMP/err"
ok "the workload ran to its end (exit 0)" test $wrc -eq 0
ok "its socket is gone after exit" test ! -e /run/fay/inline/$wpid.sock

# auto without the runtime: a uprobe and the reason
fq --json -c "$W calls 10" "from f in $F select { n: count() }"
fay_note=$(timeout 60 "$FAY" query --json -c "$W calls 10" "from f in $F select { n: count() }" 2>&1 >/dev/null | head -1)
[ "$(cat "$T_TMP/out")" = '{"n":10}' ] && [[ "$fay_note" == "fay: pid "*": uprobe: the fay runtime is not loaded (auto, a command: a uprobe, which follows the command and every process it forks; --probe-mode=inline preloads the runtime and loads it into each descendant in another root at its entry point)" ]] &&
	pass "auto without the runtime: uprobe, with the reason ($fay_note)" ||
	fail "auto without the runtime" "$(cat "$T_TMP/out")" "$fay_note"

# inline without the runtime: loaded with ptrace (inline_attach.sh tests
# it); without a process: an error with the reason
QW_READY=$T_TMP/ready.never QW_WAIT=$T_TMP/never "$W" calls 1 & wpid=$!
wait_for 60 test -e "$T_TMP/ready.never"
timeout 60 "$FAY" query --probe-mode=inline -p $wpid "from f in $F select count() for 100ms" >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
kill $wpid; wait $wpid 2>/dev/null
[ $RC -eq 0 ] && grep -q "^fay: pid $wpid: inline, runtime loaded with ptrace in [0-9.]* ms (fay_work_fn" "$T_TMP/err" &&
	pass "--probe-mode=inline without the runtime loads it with ptrace" ||
	fail "--probe-mode=inline without the runtime (rc=$RC)" "$(cat "$T_TMP/err")"
timeout 60 "$FAY" query --probe-mode=inline "from f in $F select count() for 10ms" >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
[ $RC -eq 1 ] && grep -q "error: --probe-mode=inline: fay_work_fn in every process: uprobe (inline probes run in one process" "$T_TMP/err" &&
	pass "--probe-mode=inline in every process fails with the reason" ||
	fail "--probe-mode=inline in every process (rc=$RC)" "$(cat "$T_TMP/err")"
# auto in every process: the usual case, one short line, not the reason
timeout 60 "$FAY" query "from f in $F select count() for 10ms" >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
[ $RC -eq 0 ] && [ "$(grep -c 'every process' "$T_TMP/err")" = 1 ] &&
	grep -qx "fay: fay_work_fn: uprobe, every process" "$T_TMP/err" &&
	! grep -q 'inline probes run in one process' "$T_TMP/err" &&
	pass "auto in every process: one short note ($(grep "every process" "$T_TMP/err"))" ||
	fail "auto in every process (rc=$RC)" "$(cat "$T_TMP/err")"
timeout 60 "$FAY" query --probe-mode=sideways "from f in $F select count()" >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
[ $RC -eq 2 ] && grep -q "error: --probe-mode takes inline, uprobe or auto, not 'sideways'" "$T_TMP/err" &&
	pass "--probe-mode=sideways: a usage error" || fail "--probe-mode=sideways (rc=$RC)" "$(cat "$T_TMP/err")"

"$FAY" run --help >"$T_TMP/out"
ok "fay run --help: a man-style page" grep -q '^SYNOPSIS' "$T_TMP/out"
"$FAY" query --help >"$T_TMP/out"
ok "fay query --help documents --probe-mode" grep -q -- '--probe-mode=auto|inline|uprobe' "$T_TMP/out"
done_testing
