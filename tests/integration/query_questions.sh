#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Questions bpftrace answers, asked of fay for real (root, BPF) on
# workloads whose truth is known (tests/integration/query_tools/
# query_work.c), and compared with bpftrace tracing the same run
# (issue #12):
#  1. text fields at offsets that are not a multiple of 8 (signal_generate's
#     comm at 20, block_bio_queue's rwbs at 28 and comm at 38) as filters,
#     keys and columns;
#  2. fields named like keywords (signal_generate's group, mm_page_alloc's
#     order);
#  3. a USDT probe whose two sites keep arg(0) in %rax and in %rcx;
#  4. str() of a user pointer in a tracepoint (sys_enter_openat's filename),
#     of a kernel pointer (rcu_utilization's s), and failed reads counted;
#  5. quantiles of one expression sharing one sketch (5 quantiles and 4
#     distincts fit in a key's 32 KiB), and the error naming each cost.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/query_lib.bash"
need_query_work
BT=$(command -v bpftrace || true)


# both FAY-QUERY BPFTRACE-PROGRAM WORKLOAD...: run the workload held at a
# file, trace it with fay -p PID and with bpftrace at the same time (@PID@
# in either program is its pid), release it once both are attached.  fay's
# JSON in $T_TMP/out, bpftrace's maps in $T_TMP/bt.
both() {
	local q=$1 bt=$2 go=$T_TMP/go.$RANDOM ready=$T_TMP/ready.$RANDOM fpid bpid
	shift 2
	: >"$T_TMP/err"
	: >"$T_TMP/bt"
	QW_READY=$ready QW_WAIT=$go "$W" "$@" & wpid=$!
	# traced once it is in main: before its exec the pid is the shell's,
	# and bpftrace -p PID finds no USDT probe there ("No probes to
	# attach": a workload exec'd 2 s late made the usdt case fail)
	wait_for 60 test -e "$ready"
	timeout 60 "$FAY" query --json -p $wpid "${q//@PID@/$wpid}" >"$T_TMP/out" 2>"$T_TMP/err" &
	fpid=$!
	if [ -n "$BT" ]; then
		: >"$T_TMP/bt"	# not by the job's redirection: the wait may read it first
		timeout 60 "$BT" -p $wpid -e "${bt//@PID@/$wpid}" >"$T_TMP/bt" 2>&1 &
		bpid=$!
		wait_for 20 grep -q Attaching "$T_TMP/bt"
	fi
	wait_for 20 grep -q attached "$T_TMP/err"
	sleep 0.2
	touch "$go"
	wait $wpid 2>/dev/null
	wait $fpid
	RC=$?
	[ -n "$BT" ] && wait $bpid
}
bt_val() { sed -n "s/^@$1: //p" "$T_TMP/bt"; }

# ---- 1, 2: signal_generate: comm (char[16] at offset 20) and 'group' -----------------
fq --json -c "$W signal 300 200" 'from t in tracepoint("signal:signal_generate") where t.comm == "query_work" && t.sig == 10 select { n: count(), group_sigs: sum(t.group) }'
same "$T_TMP/out" '{"n":500,"group_sigs":300}' "signal_generate: where t.comm == \"query_work\" (offset 20) and sum(t.group): 500 signals, 300 to the group"
fq --json -c "$W signal 70 30" 'from t in tracepoint("signal:signal_generate") where t.sig == 10 group t by { c: t.comm, g: t.group } into g select { comm: g.c, grp: g.g, n: g.count() }'
same "$T_TMP/out" $'{"comm":"query_work","grp":0,"n":30}\n{"comm":"query_work","grp":1,"n":70}' "signal_generate: grouped by comm and group"
fq --json -c "$W signal 3 0" 'from t in tracepoint("signal:signal_generate") where t.sig == 10 select { comm: t.comm, sig: t.sig, grp: t.group }'
row='{"comm":"query_work","sig":10,"grp":1}'
same "$T_TMP/out" "$row"$'\n'"$row"$'\n'"$row" "signal_generate: comm streamed as a column"
if [ -n "$BT" ]; then
	both 'from t in tracepoint("signal:signal_generate") where t.comm == "query_work" select { n: count(), g: sum(t.group) }' \
		'tracepoint:signal:signal_generate /pid == @PID@ && args->comm == "query_work"/ { @n = count(); @g = sum(args->group); }' \
		signal 400 100
	same "$T_TMP/out" "{\"n\":$(bt_val n),\"g\":$(bt_val g)}" "signal_generate: the same count and sum(group) as bpftrace ($(bt_val n), $(bt_val g))"
fi

# ---- 1: block_bio_queue: rwbs (char[10] at 28), comm (char[16] at 38) --------------
F=$(mktemp /var/tmp/fay-dwrite.XXXXXX)
if "$W" dwrite 1 "$F" 2>/dev/null; then
	q='from t in tracepoint("block:block_bio_queue") where t.comm == "query_work" group t by t.rwbs into g select { rwbs: g.key, n: g.count(), sectors: g.sum(t.nr_sector) }'
	fq --json -c "$W dwrite 64 $F" "$q"
	if [ $RC -eq 0 ] && python3 -c "
import json, sys
rows = [json.loads(l) for l in open('$T_TMP/out')]
ws = [r for r in rows if r['rwbs'] == 'WS']
assert ws and ws[0]['n'] == 64 and ws[0]['sectors'] == 64 * 8, rows
" 2>"$T_TMP/perr"; then
		pass "block_bio_queue: 64 O_DIRECT 4 KiB writes are 64 'WS' bios of 8 sectors, keyed by rwbs (offset 28), filtered by comm (offset 38)"
	else
		fail "block_bio_queue: 64 'WS' bios of 8 sectors" "$(cat "$T_TMP/out")" "$(cat "$T_TMP/perr" "$T_TMP/err" | head -c 600)"
	fi
	if [ -n "$BT" ]; then
		both 'from t in tracepoint("block:block_bio_queue") where t.comm == "query_work" && t.rwbs == "WS" select { n: count(), s: sum(t.nr_sector) }' \
			'tracepoint:block:block_bio_queue /args->comm == "query_work" && args->rwbs == "WS"/ { @n = count(); @s = sum(args->nr_sector); }' \
			dwrite 40 "$F"
		same "$T_TMP/out" "{\"n\":$(bt_val n),\"s\":$(bt_val s)}" "block_bio_queue: the same 'WS' bios and sectors as bpftrace ($(bt_val n), $(bt_val s))"
	fi
else
	diag "O_DIRECT writes are refused under /var/tmp here: block_bio_queue not checked"
fi
rm -f "$F"

# ---- 2: mm_page_alloc's 'order' ---------------------------------------------------------
if [ -n "$BT" ]; then
	both 'from t in tracepoint("kmem:mm_page_alloc") where t.order >= 0 select { n: count(), orders: sum(t.order), pages: sum(1 << t.order) }' \
		'tracepoint:kmem:mm_page_alloc /pid == @PID@/ { @n = count(); @o = sum(args->order); @p = sum(1 << args->order); }' \
		pages 2000
	same "$T_TMP/out" "{\"n\":$(bt_val n),\"orders\":$(bt_val o),\"pages\":$(bt_val p)}" "mm_page_alloc: t.order as bpftrace's args->order (count $(bt_val n), sum $(bt_val o), pages $(bt_val p))"
	ok "mm_page_alloc: the workload touched 2000 pages: at least 2000 allocated" test "$(bt_val p)" -ge 2000
fi

# ---- 3: one USDT probe, two sites, arg(0) in %rax at one and %rcx at the other -----
if readelf -n "$W" | grep -A2 'Name: multi' | grep -q '%rax' &&
   readelf -n "$W" | grep -A2 'Name: multi' | grep -q '%rcx'; then
	pass "query_work's fayq:multi sites keep arg0 in %rax and in %rcx"
else
	fail "query_work's fayq:multi sites keep arg0 in %rax and in %rcx" "$(readelf -n "$W" | grep -A2 'Name: multi')"
fi
fq --json -c "$W usdt2 500" "from u in usdt(\"$W:fayq:multi\") select { n: count(), s: sum(u.arg(0)), mx: max(u.arg(0)), mn: min(u.arg(0)) }"
same "$T_TMP/out" '{"n":1000,"s":249500,"mx":499,"mn":0}' "usdt: two sites with different argument places: 1000 hits, sum 2*(0+..+499), max 499, min 0"
fq --json -c "$W usdt2 300" "from u in usdt(\"$W:fayq:multi\") group u by u.arg(0) % 3 into g select { r: g.key, n: g.count() }"
same "$T_TMP/out" $'{"r":0,"n":200}\n{"r":1,"n":200}\n{"r":2,"n":200}' "usdt: arg(0) of both sites as a group key"
"$FAY" query -c "$W usdt2 1" "from u in usdt(\"$W:fayq:multi\") select { n: count() }" >/dev/null 2>"$T_TMP/err"
ok "usdt: the probe is described with its 2 argument layouts" grep -q '(2 sites, 2 argument layouts)' "$T_TMP/err"
if [ -n "$BT" ]; then
	both "from u in usdt(\"$W:fayq:multi\") select { n: count(), s: sum(u.arg(0)) }" \
		"usdt:$W:fayq:multi { @n = count(); @s = sum(arg0); }" usdt2 700
	same "$T_TMP/out" "{\"n\":$(bt_val n),\"s\":$(bt_val s)}" "usdt: the same count and sum of arg0 as bpftrace ($(bt_val n), $(bt_val s))"
fi

# ---- 4: str() of a user pointer in a tracepoint, of a kernel one, failures counted ----
P=/proc/self/fay-query-work-no-such-file
fq --json -c "$W open 250" 'from t in tracepoint("syscalls:sys_enter_openat") group t by str(t.filename) into g select { f: g.key, n: g.count() }'
if grep -qx "{\"f\":\"$P\",\"n\":250}" "$T_TMP/out" && [ $RC -eq 0 ]; then
	pass "sys_enter_openat: str(t.filename) reads the user's path: 250 opens of $P"
else
	fail "sys_enter_openat: str(t.filename) reads the user's path (rc=$RC)" "$(head -c 800 "$T_TMP/out")" "$(head -c 300 "$T_TMP/err")"
fi
if [ -n "$BT" ]; then
	both "from t in tracepoint(\"syscalls:sys_enter_openat\") where str(t.filename) == \"$P\" select { n: count() }" \
		"tracepoint:syscalls:sys_enter_openat /pid == @PID@ && str(args->filename) == \"$P\"/ { @n = count(); }" open 321
	same "$T_TMP/out" "{\"n\":$(bt_val n)}" "sys_enter_openat: where str(t.filename) == PATH counts as bpftrace does ($(bt_val n))"
fi
fq --json -c "$W open 40" 'from t in tracepoint("syscalls:sys_enter_openat") where t.flags == 0 && str(t.flags) == "" select { n: count() }'
if [ "$(cat "$T_TMP/out")" = '{"n":40}' ] && grep -q '^warning: 40 string reads failed' "$T_TMP/err"; then
	pass "str() of a bad address (flags 0): \"\", and the 40 failed reads are reported"
else
	fail "str() of a bad address: the failed reads are reported" "$(cat "$T_TMP/out")" "$(cat "$T_TMP/err")"
fi
fq --json 'from t in tracepoint("rcu:rcu_utilization") group t by str(t.s) into g select { s: g.key, n: g.count() } for 1s'
if [ $RC -eq 0 ] && grep -q '"s":"Start context switch"' "$T_TMP/out" && ! grep -q '"s":""' "$T_TMP/out" &&
   ! grep -q 'string reads failed' "$T_TMP/err"; then
	pass "rcu_utilization: str(t.s) of a kernel pointer (tried as kernel memory first) reads every name"
elif [ $RC -eq 1 ] && grep -q 'no tracepoint' "$T_TMP/err"; then
	diag "no rcu:rcu_utilization on this kernel: kernel pointers in tracepoints not checked"
else
	fail "rcu_utilization: str(t.s) reads kernel strings (rc=$RC)" "$(head -c 600 "$T_TMP/out")" "$(head -c 300 "$T_TMP/err")"
fi

# ---- 5: one sketch per expression ------------------------------------------------------
K=20000
q5="from c in function(\"$W:fay_work_fn\") select { p10: quantile(c.arg(0), 0.1), p50: quantile(c.arg(0), 0.5), p90: quantile(c.arg(0), 0.9), p99: quantile(c.arg(0), 0.99), p999: quantile(c.arg(0), 0.999), d0: distinct(c.arg(0)), d2: distinct(c.arg(0) / 2), d4: distinct(c.arg(0) / 4), d100: distinct(c.arg(0) % 100), n: count() }"
"$FAY" query --emit=plan --json "$q5" >"$T_TMP/plan" 2>"$T_TMP/err"
ok "5 quantiles of one expression and 4 distincts: one 7680-byte sketch + 4 x 1024 + 8 = 11784 bytes per key" \
	python3 -c "import json; p=json.load(open('$T_TMP/plan')); v=p['value_size']; assert v == 11784, v"
fq --json -c "$W calls $K" "$q5"
if [ $RC -eq 0 ] && python3 -c "
import json, math
d = json.loads(open('$T_TMP/out').read())
K = $K
for name, p in (('p10', .1), ('p50', .5), ('p90', .9), ('p99', .99), ('p999', .999)):
    truth = math.ceil(p * K) - 1          # arg0 is 0..K-1: the ceil(p*K)-th smallest
    assert abs(d[name] - truth) <= truth / 32 + 1, (name, d[name], truth)
for name, truth in (('d0', K), ('d2', K // 2), ('d4', K // 4), ('d100', 100)):
    assert abs(d[name] - truth) <= 3 * 0.0325 * truth + 1, (name, d[name], truth)
assert d['n'] == K
" 2>"$T_TMP/perr"; then
	pass "the shared sketch answers each p within 1/32 and the distincts within 3 standard errors ($(cat "$T_TMP/out"))"
else
	fail "the shared sketch's answers" "$(cat "$T_TMP/out")" "$(cat "$T_TMP/perr" "$T_TMP/err" | head -c 600)"
fi
"$FAY" query --emit=plan "from c in function(\"$W:fay_work_fn\") select { a: quantile(c.arg(0), 0.5), b: quantile(c.arg(1), 0.5), c: quantile(c.arg(2), 0.5), d: quantile(c.arg(3), 0.5), e: quantile(c.arg(4), 0.5) }" >/dev/null 2>"$T_TMP/err"
RC=$?
if [ $RC -eq 2 ] && grep -q 'the aggregates take 38400 bytes per key and CPU; a per-CPU map value holds at most 32768 (quantile(c.arg(0), 0.5) 7680, .*each quantile costs 7680 bytes, quantiles of one expression share one' "$T_TMP/err"; then
	pass "five quantiles of five expressions: the error gives the limit and each aggregate's cost"
else
	fail "the per-key limit error names the costs (rc=$RC)" "$(head -3 "$T_TMP/err")"
fi
done_testing
