#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Wildcards on inline probes (issue #27): function("libc:pthread_mutex_*")
# on one process patches every function the pattern matches, s.name
# names each (the site's cookie, fay_cookie() in the VM), and the counts
# per function equal uprobe mode's and bpftrace's on the same workload:
# by -p on a process started normally (the runtime loaded with ptrace),
# and under fay run.  The mode line says how many functions matched and
# how many sites were patched (aliases share one).  A pattern with a
# function the patcher refuses: inline mode patches the rest and names
# it; auto mode runs the whole pattern as uprobes, saying why.  Too many
# functions: refused (inline) or uprobes (auto).  Real programs: xz over
# every liblzma:lzma_* function (107) and python3.11 over its PyDict_*
# functions, inline: their output unchanged, the counts uprobe mode's.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/query_lib.bash"
need_query_work
IW=$BUILD/tests/bin/inline_work
[ -x "$IW" ] || skip_all "inline_work is not built (make)"

# A private copy of glibc (LD_LIBRARY_PATH): a uprobe is on a file's
# inode in every process, and other tests on this machine put theirs on
# the system's libc (pthread_mutex_lock...): inline probes then refuse
# the function under another tracer's breakpoint.  The workloads load
# the copy; the queries name it by its path.
LIBD=$T_TMP/lib
mkdir -p "$LIBD"
cp "$(readlink -f "$(ldconfig -p | awk '/libc.so.6 .*x86-64/ { print $NF; exit }')")" "$LIBD/libc.so.6"
L=$LIBD/libc.so.6
Q="from f in function(\"$L:pthread_mutex_*\") group f by f.name into g select { name: g.key, n: g.count() }"
K=300

# byp MODE EXE ARGS...: EXE ARGS started normally, waiting (QW_WAIT) until
# `fay query --probe-mode=MODE -p PID "$QP"` (PIDX in it: PID) attached; the answer in
# $T_TMP/MODE.out, the notes in $T_TMP/MODE.err, its status in RC
byp() {
	local mode=$1 go=$T_TMP/go.$RANDOM ready=$T_TMP/ready.$RANDOM w q
	shift
	LD_LIBRARY_PATH=$LIBD QW_READY=$ready QW_WAIT=$go "$@" >"$T_TMP/$mode.wout" 2>&1 & w=$!
	wait_for 60 test -e "$ready"
	: >"$T_TMP/$mode.err"
	timeout 90 "$FAY" query --json --probe-mode="$mode" -p $w "${QP//PIDX/$w}" \
		>"$T_TMP/$mode.out" 2>"$T_TMP/$mode.err" & q=$!
	wait_for 60 attached_or_gone "$T_TMP/$mode.err" $q
	touch "$go"
	wait $w
	echo $? >"$T_TMP/$mode.wrc"
	wait $q
	RC=$?
}

# ---- -p PID: inline equals uprobe, and the workload's truth ---------------------------
QP=$Q
byp uprobe "$W" mutex $K
byp inline "$W" mutex $K
# (query_work locks and unlocks once more itself: K + 1, 3K/2 + 1)
ok "uprobe mode: the workload's $K locks, $((K * 3 / 2)) unlocks, $((K / 2)) trylocks" python3 -c "
import json
r = {x['name']: x['n'] for x in map(json.loads, open('$T_TMP/uprobe.out'))}
assert r == {'pthread_mutex_lock': $K + 1, 'pthread_mutex_unlock': $((K * 3 / 2)) + 1, 'pthread_mutex_trylock': $((K / 2))}, r"
same "$T_TMP/inline.out" "$(cat "$T_TMP/uprobe.out")" \
	"--probe-mode=inline -p PID: every function by s.name, the same counts as uprobe mode"
nmatch=$(grep -c '^function:' <("$FAY" probes "$L:pthread_mutex_*"))
ok "the mode line: inline, $nmatch functions matched, the sites patched and the aliases sharing one" \
	grep -qE "^fay: pid [0-9]+: inline, runtime loaded with ptrace in [0-9.]+ ms \($nmatch functions matched, [0-9]+ sites patched, [0-9]+ aliases" "$T_TMP/inline.err"
ok "the attach line names the pattern and the sites" \
	grep -qF "attached: inline $L:pthread_mutex_*, $nmatch functions matched" "$T_TMP/inline.err"
ok "the workload finished right under inline probes (exit 0)" test "$(cat "$T_TMP/inline.wrc")" = 0
byp auto "$W" mutex $K
same "$T_TMP/auto.out" "$(cat "$T_TMP/uprobe.out")" "auto mode on -p PID: inline, the same counts"
ok "... and it ran inline" grep -q ": inline, runtime loaded with ptrace" "$T_TMP/auto.err"

# s.name in a where (the id compared), and a stream of names
QP="from f in function(\"$L:pthread_mutex_*\") let n = f.name where f.arg(0) != 0 select { name: n }"
byp inline "$W" mutex 40
byp uprobe "$W" mutex 40
ok "streamed, inline: each event's function by name, the same events as uprobe mode's" python3 -c "
import json, collections
c = [collections.Counter(json.loads(l)['name'] for l in open('$T_TMP/' + m + '.out')) for m in ('inline', 'uprobe')]
assert c[0] == c[1] and c[0]['pthread_mutex_trylock'] == 20, c"

# ---- the same as bpftrace's counts ---------------------------------------------------
BT=$(command -v bpftrace || true)
if [ -n "$BT" ]; then
	go=$T_TMP/btgo ready=$T_TMP/btready
	LD_LIBRARY_PATH=$LIBD QW_READY=$ready QW_WAIT=$go "$W" mutex $K >/dev/null & bw=$!
	wait_for 60 test -e "$ready"
	# bpftrace 0.17 attaches a wildcard once per versioned alias (each
	# call counted twice): the three functions the workload calls
	: >"$T_TMP/bt"	# not by the job's redirection: the wait may read it first
	timeout 90 "$BT" -p $bw -e "uprobe:$L:pthread_mutex_lock,uprobe:$L:pthread_mutex_unlock,uprobe:$L:pthread_mutex_trylock /pid == $bw/ { @[probe] = count(); }" \
		>"$T_TMP/bt" 2>&1 & bp=$!
	wait_for 60 grep -q Attaching "$T_TMP/bt"
	sleep 1
	touch "$go"
	wait $bw
	wait $bp
	QP=$Q
	byp inline "$W" mutex $K
	ok "inline counts per function equal bpftrace's @[probe] (uprobe:libc:...)" python3 -c "
import json, re
fay = {x['name']: x['n'] for x in map(json.loads, open('$T_TMP/inline.out'))}
bt = {m.group(1): int(m.group(2)) for m in re.finditer(r'@\[uprobe:[^\]]*:(\w+)\]: (\d+)', open('$T_TMP/bt').read())}
assert bt and fay == bt, (fay, bt)"
else
	diag "no bpftrace: the comparison with it is not made"
fi

# ---- fay run: inline and uprobe on the program's own thread ---------------------------
# The runtime holds main() until the query armed (src/rt/README.md): its
# own lock and unlock on the main thread while it lets main() go are seen
# by a uprobe attached before, by the inline probes armed during: at most
# one call of each apart; the rest exact.
QR="from f in function(\"$L:pthread_mutex_*\") where f.tid == f.pid group f by f.name into g select { name: g.key, n: g.count() }"
LD_LIBRARY_PATH=$LIBD timeout 90 "$FAY" run --json --probe-mode=uprobe --query "$QR" -- "$W" mutex 100 >"$T_TMP/ru.out" 2>"$T_TMP/ru.err"
LD_LIBRARY_PATH=$LIBD timeout 90 "$FAY" run --json --probe-mode=inline --query "$QR" -- "$W" mutex 100 >"$T_TMP/ri.out" 2>"$T_TMP/ri.err"
RC=$?
grep '^{"name"' "$T_TMP/ru.out" >"$T_TMP/ru.rows"
grep '^{"name"' "$T_TMP/ri.out" >"$T_TMP/ri.rows"
ok "fay run --probe-mode=inline: the counts per function of uprobe mode, but the hold's ($(tr -d '\n' <"$T_TMP/ri.rows"))" \
	python3 -c "
import json
i, u = ({x['name']: x['n'] for x in map(json.loads, open('$T_TMP/' + f))} for f in ('ri.rows', 'ru.rows'))
assert $RC == 0 and i.keys() == u.keys() and i['pthread_mutex_trylock'] == u['pthread_mutex_trylock'] == 50, (i, u)
assert all(abs(i[k] - u[k]) <= 1 and i[k] >= 100 for k in ('pthread_mutex_lock', 'pthread_mutex_unlock')), (i, u)"
ok "... armed in libc at each load, the mode line counting the sites" \
	grep -q "functions matched, [0-9]* sites patched.*armed at each load" "$T_TMP/ri.err"

# ---- a function the patcher refuses -------------------------------------------------------
QP='from f in process(PIDX).function("fay_inline_*") group f by f.name into g select { name: g.key, n: g.count() }'
byp inline "$IW" calls 200
same "$T_TMP/inline.out" '{"name":"fay_inline_fn","n":200}' \
	"inline mode: the functions the patcher takes are patched and counted"
ok "... the refused one named with the patcher's reason" \
	grep -qE "6 functions matched, 5 sites patched; 1 refused, not traced: fay_inline_branchy: the instruction at \+[0-9]+ \(jne" "$T_TMP/inline.err"
byp auto "$IW" calls 200
same "$T_TMP/auto.out" '{"name":"fay_inline_fn","n":200}' "auto mode: the whole pattern as uprobes, the same count"
ok "... saying which function the patcher refuses" \
	grep -qE "the patcher refuses 1 of its functions \(a wildcard runs inline whole\): .*fay_inline_branchy" "$T_TMP/auto.err"

# ---- more functions than the runtime patches -----------------------------------------
LD_LIBRARY_PATH=$LIBD QW_WAIT=$T_TMP/never "$W" mutex 1 & bw=$!
T_PIDS+=($bw)
timeout 60 "$FAY" query --probe-mode=inline -p $bw "from f in function(\"$L:*\") select { n: count() } for 1s" \
	>/dev/null 2>"$T_TMP/big.err"
ok "inline mode: libc's * (thousands of functions) refused, saying the limit" \
	grep -qE ": \* matches [0-9]+ functions; inline probes patch at most 256 in one process" "$T_TMP/big.err"
kill $bw 2>/dev/null
wait $bw 2>/dev/null

# ---- real programs ----------------------------------------------------------------------
XZ=$(command -v xz || true)
if [ -n "$XZ" ]; then
	head -c 2000000 /dev/urandom | base64 >"$T_TMP/xin"
	"$XZ" -6 -T1 -c "$T_TMP/xin" >"$T_TMP/x.ref"
	for m in uprobe inline; do
		cp "$T_TMP/xin" "$T_TMP/x.$m"
		timeout 120 "$FAY" run --json --probe-mode=$m \
			--query 'from f in function("liblzma:lzma_*") group f by f.name into g select { name: g.key, n: g.count() }' \
			-- "$XZ" -6 -T1 -k -f "$T_TMP/x.$m" >"$T_TMP/xq.$m" 2>"$T_TMP/xe.$m"
		echo $? >"$T_TMP/xrc.$m"
	done
	ok "xz under 107-odd inline liblzma:lzma_* probes: exit 0, the same compressed bytes" \
		test "$(cat "$T_TMP/xrc.inline")" = 0 -a "$(sha256sum <"$T_TMP/x.inline.xz")" = "$(sha256sum <"$T_TMP/x.ref")"
	ok "... inline ($(grep -o '[0-9]* functions matched, [0-9]* sites patched' "$T_TMP/xe.inline")), counts per function equal uprobe mode's ($(grep -c . "$T_TMP/xq.inline") functions called)" \
		test -s "$T_TMP/xq.inline" -a "$(cat "$T_TMP/xq.inline")" = "$(cat "$T_TMP/xq.uprobe")" -a \
		"$(grep -c 'inline (.*functions matched' "$T_TMP/xe.inline")" = 1
else
	diag "no xz: its check is not made"
fi
PY=/usr/bin/python3.11
if [ -x "$PY" ]; then
	prog='import json, hashlib; d = {str(i): i * i for i in range(20000)}; print(hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest())'
	"$PY" -c "$prog" >"$T_TMP/py.ref"
	for m in uprobe inline; do
		timeout 120 "$FAY" run --json --probe-mode=$m \
			--query "from f in function(\"$PY:PyDict_*\") where f.tid == f.pid group f by f.name into g select { name: g.key, n: g.count() }" \
			-- "$PY" -c "$prog" >"$T_TMP/pq.$m" 2>"$T_TMP/pe.$m"
		echo $? >"$T_TMP/prc.$m"
	done
	ok "python3.11 under inline PyDict_* probes: exit 0, its own output" \
		test "$(cat "$T_TMP/prc.inline")" = 0 -a "$(grep -c "$(cat "$T_TMP/py.ref")" "$T_TMP/pq.inline")" = 1
	ok "... counts per function equal uprobe mode's" \
		test "$(grep -c '^{"name"' "$T_TMP/pq.inline")" -gt 5 -a \
		"$(grep '^{"name"' "$T_TMP/pq.inline")" = "$(grep '^{"name"' "$T_TMP/pq.uprobe")" -a \
		"$(grep -c 'inline (.*functions matched' "$T_TMP/pe.inline")" = 1
else
	diag "no $PY: its check is not made"
fi
done_testing
