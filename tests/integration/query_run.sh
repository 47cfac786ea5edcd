#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay query, running for real (root, BPF): exact answers on workloads whose
# truth is known by construction (tests/integration/query_tools/query_work.c),
# every source this host allows, every aggregate, --json exactly, windows,
# streams, time limits, signals, clean detach, the errors a user meets, and
# the same counts as bpftrace on the same workload.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/query_lib.bash"
need_query_work
K=1000

. "$(dirname "$0")/../lib/query_bg.bash"

# ---- system calls ------------------------------------------------------------
fq --json -c "$W getppid $K" 'from s in syscall("getppid") group s by s.comm into g select { comm: g.key, n: g.count() }'
same "$T_TMP/out" '{"comm":"query_work","n":1000}' "syscall: K getppid grouped by comm (-c)"
# -c is the command and its descendants (as for function sources): a
# shell's two children's calls count, each under its own comm (the
# syscall source had only the shell's own process: 2)
fq --json -c "sh -c '$W getppid $K; $W getppid $K; :'" 'from s in syscall("getppid") where s.comm == "query_work" select { n: count() }'
same "$T_TMP/out" "{\"n\":$((2 * K))}" "syscall: -c follows the command's descendants (2 x K by two children of sh)"

# fq_pid QUERY-WITH-@PID@ WORKLOAD...: start the workload held at a file,
# trace it with -p PID, release it once fay says it is attached.
fq_pid() {
	local q=$1 go=$T_TMP/go.$RANDOM
	shift
	QW_WAIT=$go "$W" "$@" & wpid=$!
	# the child is bash until it has exec'd the workload: -p PID reads
	# /proc/PID/exe
	execd() { [ "$(readlink /proc/$wpid/exe)" = "$(readlink -f "$W")" ]; }
	wait_for 10 execd
	query_bg 1 "$T_TMP/out" "$T_TMP/err" timeout 60 "$FAY" query --json -p $wpid "${q//@PID@/$wpid}"
	touch "$go"
	wait $QBG
	RC=$?
	wait $wpid 2>/dev/null
}
fq_pid 'from s in syscall("getppid") group s by s.pid into g select { pid: g.key, n: g.count() }' getppid 777
same "$T_TMP/out" "{\"pid\":$wpid,\"n\":777}" "syscall: K getppid grouped by pid (-p PID, stops when it exits)"

fq --json -c "$W read 300 4093" 'from s in syscall("read") where s.arg(2) == 4093 select { n: count(), bytes: sum(s.ret), mx: max(s.duration) > 0 }'
same "$T_TMP/out" '{"n":300,"bytes":1227900,"mx":1}' "syscall: entry+exit pairing (arg at entry, ret and duration at exit)"

fq --json -c "$W getppid 500" 'from s in syscall("*") where s.arg(0) >= 0 && s.comm == "query_work" group s by s.comm into g select { c: g.key, n: g.count() > 500 }'
same "$T_TMP/out" '{"c":"query_work","n":1}' "syscall(\"*\"): every system call of the workload (more than its 500 getppid)"

# ---- the host field: this host's name, a constant of the query --------------------
H=$(hostname)
fq --json -c "$W getppid 3" 'from s in syscall("getppid") select { h: s.host, c: s.comm }'
row="{\"h\":\"$H\",\"c\":\"query_work\"}"
same "$T_TMP/out" "$row"$'\n'"$row"$'\n'"$row" "host: a select column equals hostname ($H), 3 rows"
fq --json -c "$W getppid $K" 'from s in syscall("getppid") group s by s.host into g select { h: g.key, n: g.count() }'
same "$T_TMP/out" "{\"h\":\"$H\",\"n\":$K}" "host: a group key"
fq --json -c "$W getppid $K" 'from s in syscall("getppid") group s by { h: s.host, c: s.comm } into g select { h: g.h, c: g.c, n: g.count(), d: g.distinct(s.host) }'
same "$T_TMP/out" "{\"h\":\"$H\",\"c\":\"query_work\",\"n\":$K,\"d\":1}" "host: a tuple key and distinct"
fq --json -c "$W getppid $K" "from s in syscall(\"getppid\") where s.host == \"$H\" select { n: count() }"
same "$T_TMP/out" "{\"n\":$K}" "host: where s.host == \"$H\" counts every event"
fq --json -c "$W getppid $K" "from s in syscall(\"getppid\") where s.host != \"$H\" select { n: count() }"
same "$T_TMP/out" '{"n":0}' "host: where s.host != \"$H\" counts none"
fq --json -c "$W getppid $K" "from s in syscall(\"getppid\") where s.host != \"${H}x\" && s.host != \"${H:0:${#H}-1}\" select { n: count() }"
same "$T_TMP/out" "{\"n\":$K}" "host: longer and shorter names differ"
fq --json -c "$W read 20 4093" "from s in syscall(\"read\") let h = s.host where s.arg(2) == 4093 && h == \"$H\" group s by { h: h, r: s.ret } into g select { h: g.h, r: g.r, n: g.count() }"
same "$T_TMP/out" "{\"h\":\"$H\",\"r\":4093,\"n\":20}" "host: a string let at the exit of a paired source"

# ---- tracepoints ---------------------------------------------------------------
fq --json -c "$W read 250 4093" 'from t in tracepoint("syscalls:sys_enter_read") where t.count == 4093 group t by t.count into g select { count: g.key, n: g.count() }'
same "$T_TMP/out" '{"count":4093,"n":250}' "tracepoint: a field by name in where and group by"

fq --json -c "$W getppid 1" 'from e in tracepoint("sched:sched_process_exit") where e.pid == e.pid select { comm: e.comm }'
same "$T_TMP/out" '{"comm":"query_work"}' "tracepoint: a char[16] field streamed"

# ---- user functions --------------------------------------------------------------
F="function(\"$W:fay_work_fn\")"
fq --json -c "$W calls $K" "from f in $F select { n: count(), s: sum(f.arg(0)), mn: min(f.arg(0)), mx: max(f.arg(0)), a: avg(f.arg(0)), b: sum(f.arg(1)) }"
same "$T_TMP/out" '{"n":1000,"s":499500,"mn":0,"mx":999,"a":499,"b":7000}' "function: count, sum, min, max, avg of known arguments"

fq --json -c "$W calls $K" "from f in $F select { h: hist(f.arg(0)) }"
same "$T_TMP/out" '{"h":[{"lo":null,"hi":1,"count":1},{"lo":1,"hi":2,"count":1},{"lo":2,"hi":4,"count":2},{"lo":4,"hi":8,"count":4},{"lo":8,"hi":16,"count":8},{"lo":16,"hi":32,"count":16},{"lo":32,"hi":64,"count":32},{"lo":64,"hi":128,"count":64},{"lo":128,"hi":256,"count":128},{"lo":256,"hi":512,"count":256},{"lo":512,"hi":1024,"count":488}]}' "function: hist bucket edges (power of two)"

fq --json -c "$W calls $K" "from f in $F select { l: lhist(f.arg(0), 100, 900, 200) }"
same "$T_TMP/out" '{"l":[{"lo":null,"hi":100,"count":100},{"lo":100,"hi":300,"count":200},{"lo":300,"hi":500,"count":200},{"lo":500,"hi":700,"count":200},{"lo":700,"hi":900,"count":200},{"lo":900,"hi":null,"count":100}]}' "function: lhist buckets with under/overflow"

fq --json -c "$W calls $K" "from f in $F group f by { m: f.arg(0) % 3, big: f.arg(0) >= 500 } into g select { m: g.m, big: g.big, n: g.count(), s: g.sum(f.arg(0)) }"
want=$(python3 -c '
import json
rows = {}
for i in range(1000):
    k = (i % 3, int(i >= 500))
    n, s = rows.get(k, (0, 0))
    rows[k] = (n + 1, s + i)
for (m, b) in sorted(rows):
    print(json.dumps({"m": m, "big": b, "n": rows[(m, b)][0], "s": rows[(m, b)][1]}, separators=(",", ":")))')
same "$T_TMP/out" "$want" "function: group by a tuple, rows in key order"

fq --json -c "$W calls $K" "from f in $F where f.ret % 2 == 0 select { n: count(), r: sum(f.ret) }"
same "$T_TMP/out" '{"n":500,"r":253500}' "function: ret (uretprobe) in where and sum"

fq --json -c "$W sleep 20 3000" "from f in function(\"$W:fay_work_sleep\") select { n: count(), ok: min(f.duration) >= 3000000 && max(f.duration) < 1000000000, us: hist(f.duration / 1000) }"
python3 - "$T_TMP/out" <<'PY' && pass "function: durations via entry+exit pairing (20 sleeps of 3 ms)" || fail "function: durations via entry+exit pairing" "$(cat "$T_TMP/out" "$T_TMP/err")"
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["n"] == 20 and r["ok"] == 1, r
assert sum(b["count"] for b in r["us"]) == 20, r
assert all(b["lo"] >= 2048 for b in r["us"]), r
PY

fq --json -c "$W words 999" "from f in function(\"$W:fay_work_word\") group f by str(f.arg(0)) into g select { w: g.key, n: g.count() } order by n desc limit 2"
same "$T_TMP/out" '{"w":"alpha","n":333}
{"w":"beta","n":333}' "function: group by str(arg), order by desc, limit"

fq --json -c "$W words 30" "from f in function(\"$W:fay_work_word\") let w = str(f.arg(0)) where w != \"beta\" group f by { w: w, c: f.comm } into g select { w: g.w, c: g.c, n: g.count(), d: g.distinct(w) }"
same "$T_TMP/out" '{"w":"alpha","c":"query_work","n":10,"d":1}
{"w":"gamma","c":"query_work","n":10,"d":1}' "function: a string let in where, a tuple key and distinct"

fq_pid 'from f in process(@PID@).function("fay_work_fn") select { n: count(), pid: max(f.pid) }' calls 400
same "$T_TMP/out" "{\"n\":400,\"pid\":$wpid}" "process(PID).function(\"sym\"): that process's executable"

# ---- approximate aggregates, within their documented bounds --------------------------
fq --json -c "$W calls $K" "from f in $F select { p50: quantile(f.arg(0), 0.5), p99: quantile(f.arg(0), 0.99), d: distinct(f.arg(0)), d10: distinct(f.arg(0) % 10) }"
python3 - "$T_TMP/out" <<'PY' && pass "quantile within 3.125% and distinct within 3 standard errors (3.25%)" || fail "quantile/distinct bounds" "$(cat "$T_TMP/out" "$T_TMP/err")"
import json, sys
r = json.loads(open(sys.argv[1]).read())
# values 0..999: the rank-500 value is 499, the rank-990 value 989
assert abs(r["p50"] - 499) <= 499 / 32, r
assert abs(r["p99"] - 989) <= 989 / 32, r
assert abs(r["d"] - 1000) <= 3 * 0.0325 * 1000, r
assert r["d10"] == 10, r
PY

# ---- USDT ---------------------------------------------------------------------------
fq --json -c "$W usdt $K" "from u in usdt(\"$W:fayq:tick\") group u by str(u.arg(2)) into g select { s: g.key, n: g.count(), a: g.sum(u.arg(0)), b: g.sum(u.arg(1)) }"
same "$T_TMP/out" '{"s":"tick","n":1000,"a":499500,"b":999000}' "usdt: arguments and a string argument"

# ---- profile ----------------------------------------------------------------------------
fq --json -c "$W spin 2000" 'from p in profile(99) select { n: count() }'
python3 - "$T_TMP/out" "$T_TMP/err" <<'PY' && pass "profile(99): 99 samples per second of CPU time the process got" || fail "profile sample rate" "$(cat "$T_TMP/out" "$T_TMP/err")"
import json, re, sys
n = json.loads(open(sys.argv[1]).read())["n"]
cpu = int(re.search(r"cpu_ns (\d+)", open(sys.argv[2]).read()).group(1)) / 1e9
want = 99 * cpu    # samples land only while the process is on a CPU
assert want > 20 and abs(n - want) <= 0.25 * want + 3, (n, want)
PY

# ---- streaming, windows, time limits --------------------------------------------------
fq --json -c "$W calls $K" "from f in $F where f.arg(0) < 3 select { a: f.arg(0), c: f.comm, r: f.ret }"
same "$T_TMP/out" '{"a":0,"c":"query_work","r":7}
{"a":1,"c":"query_work","r":8}
{"a":2,"c":"query_work","r":9}' "stream: one JSON row per event"

fq --json -c "$W calls $K" "from f in $F select { a: f.arg(0) } limit 4"
same "$T_TMP/out" '{"a":0}
{"a":1}
{"a":2}
{"a":3}' "stream: limit N stops after N rows"

fq --buffer=perf -c "$W calls $K" "from f in $F where f.arg(0) < 2 select { a: f.arg(0), c: f.comm }"
same "$T_TMP/out" '         a  c
         0  query_work
         1  query_work' "stream through perf buffers: a table"

fq --json -c "$W sleep 25 100000" "from f in function(\"$W:fay_work_sleep\") select { n: count() } window 1s"
python3 - "$T_TMP/out" <<'PY' && pass "window 1s: rows per window with window_start_ns, no event lost or counted twice" || fail "window" "$(cat "$T_TMP/out" "$T_TMP/err")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) >= 2, rows
assert sum(r["n"] for r in rows) == 25, rows
assert all(list(r) == ["window_start_ns", "n"] for r in rows), rows
ts = [r["window_start_ns"] for r in rows]
assert ts == sorted(ts) and all(0.8e9 < b - a < 1.5e9 for a, b in zip(ts, ts[1:])), ts
PY

# a tight loop across many window ends: every call in exactly one window
# (paced over 450 ms: at a uprobe's fastest, 0.2 us, 30,000 calls would
# end inside one window)
fq --json -c "$W calls 30000 450" "from f in function(\"$W:fay_work_fn\") group f by f.arg(1) into g select { n: g.count() } window 100ms"
python3 - "$T_TMP/out" <<'PY' && pass "window 100ms over 30,000 calls in a tight loop: the windows add up exactly (epochs)" || fail "windows at full speed" "$(cat "$T_TMP/out" "$T_TMP/err")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) >= 3, rows
assert sum(r["n"] for r in rows) == 30000, (sum(r["n"] for r in rows), rows)
PY

start=$SECONDS
fq --json 'from s in syscall("getppid") select { n: count() >= 0 } for 1s'
same "$T_TMP/out" '{"n":1}' "for 1s: one result at the end"
ok "for 1s stops in time" [ $((SECONDS - start)) -le 4 ]
start=$SECONDS
fq --json 'from s in syscall("getppid") where s.time < now + 1s select { n: count() >= 0 }'
same "$T_TMP/out" '{"n":1}' "where x.time < now + 1s means for 1s"
ok "the time-limit form stops in time" [ $((SECONDS - start)) -le 4 ]

# ---- signals and clean detach -------------------------------------------------------
ids_of() {	# "prog:ID" and "map:ID" of every BPF object process $1 holds
	cat /proc/"$1"/fdinfo/* 2>/dev/null | sed -n 's/^prog_id:[[:space:]]*/prog:/p; s/^map_id:[[:space:]]*/map:/p' | sort -u | tr '\n' ' '
}
for sig in INT TERM; do
	query_bg 1 "$T_TMP/out" "$T_TMP/err" "$FAY" query --json 'from s in syscall("getppid") group s by s.comm into g select { c: g.key, n: g.count(), t: g.avg(s.duration) }'
	fpid=$QBG
	ids=$(ids_of $fpid)
	"$W" getppid 100 >/dev/null
	kill -$sig $fpid
	wait $fpid
	RC=$?
	ok "SIG$sig: exit status 0 and the result printed" grep -q '"c":"query_work","n":100,' "$T_TMP/out"
	ok "SIG$sig: exit status 0" [ $RC -eq 0 ]
	left=""
	for id in $ids; do
		for t in 1 2 3 4 5 6 7 8 9 10; do	# the kernel frees them after an RCU grace period
			bpftool "${id%%:*}" show id "${id#*:}" >/dev/null 2>&1 || break
			sleep 0.1
		done
		bpftool "${id%%:*}" show id "${id#*:}" >/dev/null 2>&1 && left="$left $id"
	done
	ok "SIG$sig: the query held programs and maps ($ids)" [ "$(echo "$ids" | grep -o prog: | wc -l)" -eq 2 ]
	ok "SIG$sig: every one of them is gone from the kernel${left:+ (left:$left)}" [ -z "$left" ]
done

# ---- errors a user meets -------------------------------------------------------------
# A query that fails right after -c forked the command (a USDT probe that
# is not there) must return: the held command used to catch fay's SIGTERM
# handler between fork and exec and wait on its pipe forever (11 of 20
# runs hung).
hung=0 others=""
for i in $(seq 20); do
	timeout 10 "$FAY" query -q -c "$W usdt 1" "from u in usdt(\"$W:fayq:no_such_probe\") select count()" >/dev/null 2>"$T_TMP/err"
	rc=$?
	[ $rc -eq 124 ] && hung=$((hung + 1))
	[ $rc -ne 124 ] && [ $rc -ne 1 ] && others="$others $rc"
done
ok "-c with a query that cannot start: 20 runs exit 1, none hangs (hung: $hung${others:+, other status:$others})" test "$hung$others" = 0
ok "... with the reason, and no word about the command that never ran" bash -c "grep -q 'no USDT probe' '$T_TMP/err' && ! grep -q 'the command exited' '$T_TMP/err'"
fq 'from f in kernel.function("vfs_read") select count()'
if grep -q "allows neither" "$T_TMP/err"; then
	ok "kernel.function on a kernel without fentry and kprobes: a plain error, exit 1" [ $RC -eq 1 ]
else
	pass "kernel.function works on this kernel (the plain error is for kernels without either)"
fi
fq 'from s in syscall("getppid") select count(' 
ok "a bad query exits 2" [ $RC -eq 2 ]
ok "a bad query says line:col" grep -q '^<query>:1:' "$T_TMP/err"
fq "from f in function(\"$W:no_such_fn\") select count()"
ok "a missing function: exit 1 and says so" bash -c '[ "$1" -eq 1 ] && grep -q "no function \"no_such_fn\"" "$2"' _ $RC "$T_TMP/err"
fq -p 999999999 'from s in syscall("getppid") select count()'
ok "-p of no process: exit 1" [ $RC -eq 1 ]
setpriv --reuid=65534 --regid=65534 --clear-groups "$FAY" query -q 'from s in syscall("getppid") select count()' >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
ok "without privileges: exit 1" [ $RC -eq 1 ]
ok "without privileges: a plain message" grep -q 'needs root, or CAP_BPF and CAP_PERFMON' "$T_TMP/err"
# A verifier rejection mapped to the query: a format file that puts a field
# beyond what the verifier lets a tracepoint program read.
mkdir -p "$T_TMP/tfs/events/syscalls/sys_enter_getppid"
TF=$(tracefs=/sys/kernel/tracing; [ -d $tracefs/events ] || tracefs=/sys/kernel/debug/tracing; echo $tracefs)
sed 's/^\tfield:int __syscall_nr;.*/&\n\tfield:long bogus;\toffset:9000;\tsize:8;\tsigned:1;/' \
	"$TF/events/syscalls/sys_enter_getppid/format" >"$T_TMP/tfs/events/syscalls/sys_enter_getppid/format"
fq --tracefs "$T_TMP/tfs" 'from t in tracepoint("syscalls:sys_enter_getppid")
where t.bogus > 0 select count()'
ok "verifier rejection: exit 1" [ $RC -eq 1 ]
ok "verifier rejection: reported at the query's line:col" grep -q '^<query>:2:9: error: the BPF verifier rejected the code for this' "$T_TMP/err"
ok "verifier rejection: the line and a caret" grep -q '^        ^$' "$T_TMP/err"

# ---- the same counts as bpftrace ----------------------------------------------------
if command -v bpftrace >/dev/null; then
	BT_ARGS=(-e "tracepoint:syscalls:sys_enter_getppid /comm == \"query_work\"/ { @c = count(); } uprobe:$W:fay_work_fn { @n = count(); @s = sum(arg0); @h = hist(arg0); }")
	timeout 60 bpftrace "${BT_ARGS[@]}" -c "$W calls 700" >"$T_TMP/bt" 2>&1
	fq --json -c "$W calls 700" "from f in $F select { n: count(), s: sum(f.arg(0)) }"
	bt_n=$(sed -n 's/^@n: //p' "$T_TMP/bt") bt_s=$(sed -n 's/^@s: //p' "$T_TMP/bt")
	same "$T_TMP/out" "{\"n\":$bt_n,\"s\":$bt_s}" "uprobe count and sum equal bpftrace's ($bt_n, $bt_s)"
	timeout 60 bpftrace -e 'tracepoint:syscalls:sys_enter_getppid /comm == "query_work"/ { @c = count(); }' -c "$W getppid 900" >"$T_TMP/bt" 2>&1
	fq --json -c "$W getppid 900" 'from s in syscall("getppid") where s.comm == "query_work" select { n: count() }'
	same "$T_TMP/out" "{\"n\":$(sed -n 's/^@c: //p' "$T_TMP/bt")}" "syscall count equals bpftrace's"
	timeout 60 bpftrace -e "uprobe:$W:fay_work_fn { @h = hist(arg0); }" -c "$W calls 1000" >"$T_TMP/bt" 2>&1
	fq -c "$W calls 1000" "from f in $F select { h: hist(f.arg(0)) }"
	bt_counts=$(grep '^\[' "$T_TMP/bt" | awk -F'|' '{print $1}' | awk '{print $NF}' | tr '\n' ' ')
	fay_counts=$(grep '^\[\|^(' "$T_TMP/out" | awk -F'|' '{print $1}' | awk '{print $NF}' | tr '\n' ' ')
	if [ -n "$bt_counts" ] && [ "$bt_counts" = "$fay_counts" ]; then
		pass "hist buckets equal bpftrace's ($fay_counts)"
	else
		fail "hist buckets equal bpftrace's" "bpftrace: $bt_counts" "fay:      $fay_counts"
	fi
else
	diag "bpftrace is not installed: no cross-check"
fi

done_testing
