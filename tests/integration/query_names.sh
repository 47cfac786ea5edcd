#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# s.name, the probe's name (issue #27), for real (root, BPF): syscall("*")
# grouped by the system call's name on a workload whose counts are known
# (query_work sysmix K: K getppid, K/2 getuid, ceil(K/3) dup), the same
# counts as bpftrace's tracepoint:syscalls:sys_enter_* { @[probe] =
# count(); } on the same run, where s.name == "..." as a filter (also at
# the entry of a paired query), streamed as a column, and across a
# cluster (two agents, merged by name at the collector); a wildcard
# function("libc:pthread_mutex_*") (s.name by its cookie) against the
# workload's counts and bpftrace's, through one uprobe.multi link (Linux
# 6.6: fay's descriptors show it) and a uprobe per function
# (FAY_NO_UPROBE_MULTI=1); function("libc:*"), 2500+ functions, through
# uprobe.multi.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/query_lib.bash"
need_query_work

K=300
getuid=$((K / 2))
dups=$(((K + 2) / 3))

# ---- the counts by name: the workload's truth ---------------------------------
fq --json -c "$W sysmix $K" 'from s in syscall("*") group s by s.name into g select { name: g.key, n: g.count() }'
for want in "getppid\",\"n\":$K" "getuid\",\"n\":$getuid" "dup\",\"n\":$dups"; do
	ok "syscall(\"*\") by s.name: {\"name\":\"$want}" grep -q "^{\"name\":\"$want}\$" "$T_TMP/out"
done
ok "no id is left unnamed" test -z "$(grep -E '"name":"(syscall_[0-9]+|)"' "$T_TMP/out")"

# ---- where s.name == ..., at the entry of a paired query ---------------------
fq --json -c "$W sysmix $K" 'from s in syscall("*") where s.name == "getuid" || s.name == "dup" group s by s.name into g select { name: g.key, n: g.count(), ok: g.min(s.ret) >= 0 && g.max(s.duration) > 0 }'
same "$T_TMP/out" "{\"name\":\"dup\",\"n\":$dups,\"ok\":1}"$'\n'"{\"name\":\"getuid\",\"n\":$getuid,\"ok\":1}" \
	"where s.name == \"getuid\" || s.name == \"dup\" with ret and duration (paired): only those, exactly"

# ---- streamed as a column, and a let of it -----------------------------------------
fq --json -c "$W sysmix 6" 'from s in syscall("*") let n = s.name where n == "getuid" select { call: n, r: s.ret >= 0 }'
row='{"call":"getuid","r":1}'
same "$T_TMP/out" "$row"$'\n'"$row"$'\n'"$row" "s.name through a let, streamed: 3 getuid rows"

# ---- a one-point source names its probe --------------------------------------------
fq --json -c "$W sysmix 10" 'from s in syscall("getppid") group s by s.name into g select { name: g.key, n: g.count() }'
same "$T_TMP/out" '{"name":"getppid","n":10}' "syscall(\"getppid\"): s.name is \"getppid\""

fq --json -c "$W calls 100" "from f in function(\"$W:fay_work_fn\") where f.name == \"fay_work_fn\" group f by f.name into g select { f: g.key, n: g.count() }"
same "$T_TMP/out" '{"f":"fay_work_fn","n":100}' "function(...): s.name is the function, in where and as the key"
fq --json -c "$W usdt2 7" "from u in usdt(\"$W:fayq:multi\") group u by u.name into g select { p: g.key, n: g.count() }"
same "$T_TMP/out" '{"p":"multi","n":14}' "usdt(...): s.name is the probe's name"

# ---- the same counts as bpftrace ------------------------------------------------------
BT=$(command -v bpftrace || true)
TFS=$(awk '$3 == "tracefs" { print $2; exit }' /proc/mounts)
if [ -n "$BT" ] && [ -n "$TFS" ]; then
	# the workload's wait for the file (access, clock_nanosleep) counts
	# from each tracer's own attach: those two are left out
	versus 'from s in syscall("*") group s by s.name into g select { name: g.key, n: g.count() }' \
		'tracepoint:syscalls:sys_enter_* /pid == @PID@/ { @[probe] = count(); }' \
		"$(find "$TFS/events/syscalls" -maxdepth 1 -name 'sys_enter_*' | wc -l)" sysmix 500
	compare_check 'syscall("*") by s.name (sys_enter_*)' 'access|clock_nanosleep' tracepoint:syscalls:sys_enter_ \
		getppid=500
else
	diag "no bpftrace (or no tracefs): the comparisons with it are not made"
fi

# ---- a wildcard function: one uprobe per function, s.name by its cookie ----------------
fq --json -c "$W mutex 100" 'from f in function("libc:pthread_mutex_*") group f by f.name into g select { name: g.key, n: g.count() }'
ok "function(\"libc:pthread_mutex_*\"): 50 trylocks, by name" grep -qx '{"name":"pthread_mutex_trylock","n":50}' "$T_TMP/out"
ok "function(\"libc:pthread_mutex_*\"): at least 100 locks and 150 unlocks" python3 -c "
import json
r = {x['name']: x['n'] for x in map(json.loads, open('$T_TMP/out'))}
assert r['pthread_mutex_lock'] >= 100 and r['pthread_mutex_unlock'] >= 150, r"
"$FAY" query -c "$W mutex 1" 'from f in function("libc:pthread_mutex_*") select { n: count() }' >/dev/null 2>"$T_TMP/err"
ok "the attach line says how many functions the pattern matched" \
	grep -qE 'uprobe(\.multi)? [^ ]*libc[^ ]*:pthread_mutex_\* \([0-9]+ functions\)' "$T_TMP/err"

# ---- uprobe.multi (Linux 6.6): one link for all the functions, else a uprobe each ------
fqv() {	# fq with fay's attach line and warnings
	timeout 60 "$FAY" query "$@" >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
}
kv=$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')
fq --json -c "$W mutex 100" 'from f in function("libc:pthread_mutex_*") group f by f.name into g select { name: g.key, n: g.count() }'
cp "$T_TMP/out" "$T_TMP/multi.out"
FAY_NO_UPROBE_MULTI=1 fqv --json -c "$W mutex 100" 'from f in function("libc:pthread_mutex_*") group f by f.name into g select { name: g.key, n: g.count() }'
ok "FAY_NO_UPROBE_MULTI=1: a uprobe per function, named so on the attach line" \
	grep -qE 'attached: uprobe [^ ]*libc[^ ]*:pthread_mutex_\* \([0-9]+ functions\)' "$T_TMP/err"
same "$T_TMP/out" "$(cat "$T_TMP/multi.out")" "a uprobe per function counts exactly as the uprobe.multi link (or as the default)"
if [ "$kv" -ge 6006 ]; then
	# fay's own descriptors while it runs: one bpf_link of type
	# uprobe_multi holding the 11 sites, no perf event
	QW_WAIT=$T_TMP/mgo "$W" mutex 30 & mw=$!
	# emptied here, not by the job's redirection: that runs in the job,
	# after the wait below may have read the previous query's "attached"
	: >"$T_TMP/err"
	timeout 60 "$FAY" query --json --probe-mode=uprobe -p $mw 'from f in function("libc:pthread_mutex_*") group f by f.name into g select { name: g.key, n: g.count() }' \
		>"$T_TMP/out" 2>"$T_TMP/err" & mt=$!
	wait_for 30 grep -q attached "$T_TMP/err"
	fp=$(pgrep -P $mt | head -1)
	links=$(for f in /proc/$fp/fd/*; do [ "$(readlink "$f")" = anon_inode:bpf_link ] && cat "/proc/$fp/fdinfo/${f##*/}"; done)
	nperf=$(find "/proc/$fp/fd" -lname 'anon_inode:*perf_event*' 2>/dev/null | wc -l)
	nsites=$(grep -c '^function:' <("$FAY" probes 'libc:pthread_mutex_*'))
	touch "$T_TMP/mgo"
	wait $mw
	wait $mt
	RC=$?
	diag "fay (pid $fp): $(grep -c '^link_type:.uprobe_multi' <<<"$links") uprobe_multi links, uprobe_cnt $(awk '/^uprobe_cnt:/ { print $2 }' <<<"$links" | tr '\n' ' '), $nperf perf events; $nsites sites; $(grep 'attached' "$T_TMP/err" | head -2)"
	ok "Linux $(uname -r): one uprobe.multi link with the $nsites sites, no perf event (the attach line: uprobe.multi)" \
		test "$(grep -c '^link_type:.uprobe_multi' <<<"$links")" = 1 -a \
		"$(awk '/^uprobe_cnt:/ { print $2 }' <<<"$links")" = "$nsites" -a "$nperf" = 0 -a \
		"$(grep -c 'attached: uprobe.multi ' "$T_TMP/err")" = 1
	ok "... and it counts the workload's 15 trylocks" grep -qx '{"name":"pthread_mutex_trylock","n":15}' "$T_TMP/out"
	# every function of libc (2500+, more than the 1024 uprobes fay puts
	# one by one): pthread_spin_lock begins with a lock prefix, which the
	# kernel refuses to run out of line; it is left out, the rest attach
	nlibc=$(grep -c '^function:' <("$FAY" probes 'libc:*'))
	fqv --json -c "$W mutex 100" 'from f in function("libc:*") group f by f.name into g select { name: g.key, n: g.count() }'
	ok "function(\"libc:*\"): the $nlibc functions through uprobe.multi" \
		grep -q "attached: uprobe.multi [^ ]*libc[^ ]*:\\* ($nlibc functions)" "$T_TMP/err"
	ok "... counting the workload's 50 trylocks exactly" grep -qx '{"name":"pthread_mutex_trylock","n":50}' "$T_TMP/out"
	ok "... the functions the kernel refuses (pthread_spin_lock) left out with a warning" \
		grep -qE ': [0-9]+ of its functions left out: the kernel refused a uprobe at their first instruction' "$T_TMP/err"
	FAY_NO_UPROBE_MULTI=1 fq 'from f in function("libc:*") select { n: count() }'
	ok "FAY_NO_UPROBE_MULTI=1: function(\"libc:*\") is refused past 1024 uprobes, saying why" \
		grep -q 'matches more than 1024 functions in .*: name fewer (a uprobe each: no uprobe.multi links' "$T_TMP/err"
else
	diag "Linux $(uname -r) has no uprobe.multi (6.6): its checks are not made"
fi
held "$W" calls 50 'from f in process(@PID@).function("fay_work_*") group f by f.name into g select { f: g.key, n: g.count() } for 5s' --json
same "$T_TMP/out" '{"f":"fay_work_fn","n":50}' "process(PID).function(\"fay_work_*\"): the one function called, by name"
"$FAY" query 'from f in function("libc:no_such_fn_*") select { n: count() }' >/dev/null 2>"$T_TMP/err"
ok "an empty match is refused with the reason" grep -q 'no function matches "no_such_fn_\*" in ' "$T_TMP/err"
"$FAY" query 'from f in function("libc:pthread_mutex_*") where f.name == "pthread_mutex_lock" select { n: count() }' >/dev/null 2>"$T_TMP/err"
ok "a wildcard's s.name compared with a literal is refused, with the reason" grep -q 'known once the probe attaches' "$T_TMP/err"
if [ -n "$BT" ]; then
	# bpftrace 0.17 attaches pthread_mutex_* once per versioned alias
	# (28 probes for 11 functions: each call counted twice), so it is
	# given the three functions the workload calls, by name
	VS_MODE=uprobe versus 'from f in function("libc:pthread_mutex_*") group f by f.name into g select { name: g.key, n: g.count() }' \
		'uprobe:libc:pthread_mutex_lock,uprobe:libc:pthread_mutex_unlock,uprobe:libc:pthread_mutex_trylock /pid == @PID@/ { @[probe] = count(); }' \
		3 mutex 300
	libc=$(readlink -f "$(ldconfig -p | awk '/libc.so.6 .*x86-64/ { print $NF; exit }')")
	compare_check 'function("libc:pthread_mutex_*") by s.name' 'pthread_mutex_(?!lock$|unlock$|trylock$).*' \
		"uprobe:$libc:" pthread_mutex_trylock=150
	# and the fallback, a uprobe per function
	FAY_NO_UPROBE_MULTI=1 VS_MODE=uprobe versus 'from f in function("libc:pthread_mutex_*") group f by f.name into g select { name: g.key, n: g.count() }' \
		'uprobe:libc:pthread_mutex_lock,uprobe:libc:pthread_mutex_unlock,uprobe:libc:pthread_mutex_trylock /pid == @PID@/ { @[probe] = count(); }' \
		3 mutex 300
	compare_check 'FAY_NO_UPROBE_MULTI=1 function("libc:pthread_mutex_*") by s.name' \
		'pthread_mutex_(?!lock$|unlock$|trylock$).*' "uprobe:$libc:" pthread_mutex_trylock=150
fi

# ---- a cluster: two agents, names merged at the collector ------------------------------
. "$(dirname "$0")/collector_lib.bash"
coll_start "$T_TMP/c.db"
ok "two agents open query connections" coll_agents h1 h2
cp "$W" "$T_TMP/qwnames"
timeout 60 "$FAY" query --cluster "$URL" --json \
	'from s in cluster.syscall("*") where s.comm == "qwnames" && (s.name == "getppid" || s.name == "getuid" || s.name == "dup") group s by s.name into g select { name: g.key, n: g.count() } for 8s' \
	>"$T_TMP/co" 2>"$T_TMP/ce" & qpid=$!
n_att() { [ "$(hosts_attached "$T_TMP/ce")" -ge 2 ]; }
wait_for 30 n_att
QW_WAIT=$T_TMP/cgo "$T_TMP/qwnames" sysmix 100 & T_PIDS+=($!)
QW_WAIT=$T_TMP/cgo "$T_TMP/qwnames" sysmix 200 & T_PIDS+=($!)
touch "$T_TMP/cgo"
wait $qpid
RC=$?
# both hosts share this kernel: each counts both workloads, 2 x (100 + 200)
want="{\"name\":\"dup\",\"n\":$((2 * (34 + 67)))}"$'\n'"{\"name\":\"getppid\",\"n\":600}"$'\n'"{\"name\":\"getuid\",\"n\":$((2 * (50 + 100)))}"
# the rows only: --cluster --json follows them with the result's completeness line
cq_rows "$T_TMP/co" >"$T_TMP/co.rows"
same "$T_TMP/co.rows" "$want" "cluster.syscall(\"*\") by s.name: the hosts' partials carry names and merge by name"
ok "cluster: 2 of 2 hosts answered" grep -q 'result: 2 of 2 hosts answered' "$T_TMP/ce"
done_testing
