#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stack keys (issue #27 item 3), for real (root, BPF): stack_work's known
# call tree (main -> A -> B -> C hot, A -> D cold) under profile(499)
# grouped by s.ustack: the folded shares match the work (9:1) within
# sampling error with frame pointers, and without them the stacks are cut
# to the sampled function (the kernel's walker follows frame pointers);
# at C's entry (a uprobe) the counts per stack are exact (K under
# main;A;B;C, ceil(K/3) under main;A;D;C) and equal bpftrace's @[ustack]
# = count() on the same run; without frame pointers on a process named
# with -p, the same exact counts (the walk by its unwind table); syscall("read") by s.kstack shows the
# system call's entry path; refusals; the default table and --format
# folded; a cluster of two agents merges stacks by their names.
. "$(dirname "$0")/../lib/lib.sh"
need_root
FP=$BUILD/tests/bin/stack_work_fp
NOFP=$BUILD/tests/bin/stack_work_nofp
QW=$BUILD/tests/bin/query_work
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$FP" ] && [ -x "$NOFP" ] && [ -x "$QW" ] || skip_all "stack_work/query_work are not built (make)"
. "$(dirname "$0")/query_lib.bash"

PROF='from s in profile(499) group s by s.ustack into g select { stack: g.key, n: g.count() }'

# shares FILE: the verdict on folded lines "frames N" of a spin run, in
# $T_TMP/cmp (python3 asserts; argv: mode fp|nofp)
shares() {
	python3 - "$1" "$2" >"$T_TMP/cmp" 2>&1 <<'PY'
import sys
rows = []
for l in open(sys.argv[1]):
    st, n = l.rstrip("\n").rsplit(" ", 1)
    rows.append((st.split(";"), int(n)))
tot = sum(n for _, n in rows)
assert tot >= 200, ("too few samples", tot)
def share(pred):
    return sum(n for f, n in rows if pred(f)) / tot
if sys.argv[2] == "fp":
    hot = share(lambda f: f[-4:] == ["main", "A", "B", "C"])
    cold = share(lambda f: f[-3:] == ["main", "A", "D"])
    # 9 units of work under C for 1 under D; the rest (the clock, the
    # loop) is a few percent
    assert hot + cold >= 0.9, (hot, cold, rows)
    assert abs(hot / (hot + cold) - 0.9) <= 0.05, (hot, cold, rows)
    print("%d samples: main;A;B;C %.3f, main;A;D %.3f" % (tot, hot, cold))
else:
    leaf_c = share(lambda f: f[-1] == "C")
    leaf_d = share(lambda f: f[-1] == "D")
    full = share(lambda f: "main" in f)
    # the sampled function is right, its callers are lost (the same work
    # compiled without frame pointers runs C's loop and D's at slightly
    # different speeds: 0.86 and 0.91 of C in two runs of 760 samples)
    assert leaf_c + leaf_d >= 0.9 and abs(leaf_c / (leaf_c + leaf_d) - 0.9) <= 0.08, rows
    assert full <= 0.05, (full, rows)
    print("%d samples: leaf C %.3f, leaf D %.3f, with main %.3f" % (tot, leaf_c, leaf_d, full))
PY
}

# ---- profile(499) by s.ustack: the shares of a known call tree --------------------
fq --format folded -c "$FP spin 1500" "$PROF"
if [ $RC -eq 0 ] && shares "$T_TMP/out" fp; then
	pass "profile(499) by s.ustack, frame pointers: hot main;A;B;C to cold main;A;D is 9:1 within 0.05 ($(cat "$T_TMP/cmp"))"
else
	fail "profile(499) by s.ustack, frame pointers (rc=$RC)" "$(head -c 1500 "$T_TMP/cmp")" "$(head -c 400 "$T_TMP/err")"
fi
fq --format folded -c "$NOFP spin 1500" "$PROF"
if [ $RC -eq 0 ] && shares "$T_TMP/out" nofp; then
	pass "profile(499) by s.ustack, no frame pointers: the sampled function is right (C:D 9:1), its callers are cut ($(cat "$T_TMP/cmp"))"
else
	fail "profile(499) by s.ustack, no frame pointers (rc=$RC)" "$(head -c 1500 "$T_TMP/cmp")" "$(head -c 400 "$T_TMP/err")"
fi

# ---- at a function's entry: exact counts per stack --------------------------------------
K=600
fq --format folded -c "$FP calls $K" "from f in function(\"$FP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }"
sed 's/^.*;main;/main;/' "$T_TMP/out" | sort >"$T_TMP/folded"
same "$T_TMP/folded" "main;A;B;C $K"$'\n'"main;A;D;C $(((K + 2) / 3))" \
	"function(C) by s.ustack: $K calls under main;A;B;C, $(((K + 2) / 3)) under main;A;D;C, exactly"
# the same without frame pointers, in uprobe mode on a process named with
# -p: the program walks by the process's unwind table (fay_unwind,
# codegen_ustack.c), so the counts are exact as above (the kernel's
# frame-pointer walk gives B;C and D;C, callers lost)
held "$NOFP" calls $K "from f in function(\"$NOFP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }" \
	--format folded --probe-mode=uprobe -p @PID@
sed 's/^.*;main;/main;/' "$T_TMP/out" | sort >"$T_TMP/folded"
same "$T_TMP/folded" "main;A;B;C $K"$'\n'"main;A;D;C $(((K + 2) / 3))" \
	"no frame pointers, uprobe on -p PID: the walk by the unwind table gives $K under main;A;B;C, $(((K + 2) / 3)) under main;A;D;C, exactly"
ok "... and the attach line says the stack is walked by the process's table" \
	grep -q "s.ustack walked by pid [0-9]*'s unwind table" "$T_TMP/err"
timeout 60 "$FAY" query --format folded --probe-mode=uprobe -c "$NOFP calls 30" \
	"from f in function(\"$NOFP:C\") where f.duration >= 0 group f by f.ustack into g select { stack: g.key, n: g.count() }" \
	>/dev/null 2>"$T_TMP/err"
ok "with exit probes the stack is walked by frame pointers, and the attach line says why" \
	grep -q "s.ustack by frame pointers: the query has exit probes" "$T_TMP/err"
# and on a command fay starts (-c): its table made anew at its exec and
# at its libraries' mmap(), while the exec watch holds it
fq --format folded --probe-mode=uprobe -c "$NOFP calls $K" "from f in function(\"$NOFP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }"
sed 's/^.*;main;/main;/' "$T_TMP/out" | sort >"$T_TMP/folded"
same "$T_TMP/folded" "main;A;B;C $K"$'\n'"main;A;D;C $(((K + 2) / 3))" \
	"no frame pointers, uprobe on -c CMD: the table made at its exec gives the exact counts too"
# Debian's python3 (no frame pointers) under a uprobe on one process: the
# program's walk gives the inline walker's stack, frame for frame
PY=/usr/bin/python3
if [ -x "$PY" ] && [ "$(readlink -f "$PY")" != "$PY" ]; then
	PYBIN=$(readlink -f "$PY")
	cat >"$T_TMP/work.py" <<'PYW'
import time
def g(x):
    return str(x)
t = time.time()
while time.time() - t < 20:
    g(12345)
PYW
	"$PY" "$T_TMP/work.py" & pyp=$!; T_PIDS+=($pyp)
	PYQ="from f in function(\"$PYBIN:PyObject_Str\") group f by f.ustack into g select { stack: g.key, n: g.count() } for 1s"
	fq --json --probe-mode=uprobe -p $pyp "$PYQ"
	cp "$T_TMP/out" "$T_TMP/py.uprobe"
	fq --json --probe-mode=inline -p $pyp "$PYQ"
	kill $pyp
	ok "python3 (no frame pointers), uprobe on -p: the top stack is the inline walker's, 10 frames or more" python3 -c "
import json, sys
def top(f):
    rows = [json.loads(l) for l in open(f)]
    return max(rows, key=lambda r: r['n'])['stack']
u, i = top('$T_TMP/py.uprobe'), top('$T_TMP/out')
assert u == i and len(u.split(';')) >= 10 and 'Py_BytesMain' in u, (u, i)
print(len(u.split(';')))
"
else
	diag "no Debian python3 at $PY: its check is not made"
fi
# (3000 calls: 0.3 s or more, so that the process is still there when
# the reader looks at the keys, every 50 ms)
fq -c "$FP calls 3000" "from f in function(\"$FP:C\") group f by f.ustack(2) into g select { n: g.count(), stack: g.key }"
same "$T_TMP/out" "   n"$'\n'"3000"$'\n'"  stack:"$'\n'"      C"$'\n'"      B"$'\n'$'\n'"1000"$'\n'"  stack:"$'\n'"      C"$'\n'"      D" \
	"s.ustack(2) keeps the two innermost frames; the table lists them under the row, innermost first"

W=$FP
BT=$(command -v bpftrace || true)
if [ -n "$BT" ]; then
	# (uprobe mode: -p would go inline, and bpftrace's uprobe on a
	# patched function breaks it: query_lib.bash's versus)
	VS_MODE=uprobe versus "from f in function(\"$FP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }" \
		"uprobe:$FP:C /pid == @PID@/ { @[ustack] = count(); }" 1 calls 900
	# bpftrace 0.17 prints the addresses of a process gone: named here
	# by the workload's maps and its symbols (nm), main inward
	python3 - "$T_TMP/out" "$T_TMP/bt" "$T_TMP/maps" "$FP" >"$T_TMP/cmp" 2>&1 <<'PY'
import json, re, subprocess, sys
out, bt_file, maps, binary = sys.argv[1:]
syms = []
for l in subprocess.run(["nm", "-n", binary], capture_output=True, text=True).stdout.split("\n"):
    p = l.split()
    if len(p) == 3 and p[1] in "tT":
        syms.append((int(p[0], 16), p[2]))
regions = []
for l in open(maps):
    p = l.split()
    lo, hi = (int(x, 16) for x in p[0].split("-"))
    if len(p) >= 6 and p[5] == binary:
        regions.append((lo, hi, int(p[2], 16)))
def name(a, inner):
    a = a if inner else a - 1
    for lo, hi, off in regions:
        if lo <= a < hi:
            o = a - lo + off	# PIE: file offset == vaddr in the text segment
            best = [n for v, n in syms if v <= o]
            return best[-1] if best else "?"
    return "?"
def main_inward(frames):	# innermost first -> "main;...;leaf"
    names = []
    for f in frames:
        names.append(f)
        if f == "main":
            break
    return ";".join(reversed(names))
fay = {}
for r in map(json.loads, open(out)):
    st = r["stack"].split(";")
    fay[main_inward(list(reversed(st)))] = fay.get(main_inward(list(reversed(st))), 0) + r["n"]
bt = {}
for m in re.finditer(r"@\[\n(.*?)\]: (\d+)", open(bt_file).read(), re.S):
    frames = [x.strip() for x in m.group(1).strip().split("\n")]
    named = [re.sub(r"\+\d+$", "", f) if not f.startswith("0x") else name(int(f, 16), i == 0)
             for i, f in enumerate(frames)]
    k = main_inward(named)
    bt[k] = bt.get(k, 0) + int(m.group(2))
assert fay == {"main;A;B;C": 900, "main;A;D;C": 300}, fay
assert fay == bt, ("fay", fay, "bpftrace", bt)
print(fay)
PY
	PRC=$?
	if [ $RC -eq 0 ] && [ $PRC -eq 0 ]; then
		pass "function(C) by s.ustack equals bpftrace's @[ustack] = count() on the same run ($(cat "$T_TMP/cmp"))"
	else
		fail "function(C) by s.ustack equals bpftrace's (rc=$RC)" "$(head -c 1500 "$T_TMP/cmp")" \
			"$(head -c 400 "$T_TMP/err")" "$(head -c 800 "$T_TMP/bt")"
	fi
else
	diag "no bpftrace: the comparison with it is not made"
fi

# ---- kernel stacks -----------------------------------------------------------------------
fq --json -c "$QW read 200 64" 'from s in syscall("read") where s.comm == "query_work" group s by s.kstack into g select { stack: g.key, n: g.count() }'
ok "syscall(\"read\") by s.kstack: the system call's entry path (entry_SYSCALL_64 ... do_syscall_64), 200 reads" python3 -c "
import json, sys
r = [json.loads(l) for l in open('$T_TMP/out')]
assert sum(x['n'] for x in r) >= 200, r
assert all('do_syscall_64' in x['stack'].split(';') and x['stack'].startswith('entry_SYSCALL_64') for x in r), r
"
fq --json -c "$FP calls 30" "from f in function(\"$FP:C\") group f by f.kstack into g select { stack: g.key, n: g.count() }"
same "$T_TMP/out" '{"stack":"[no kernel stack: EFAULT]","n":40}' "a kernel stack where there is none (a uprobe in user code) says so"

# ---- refusals --------------------------------------------------------------------------------
"$FAY" query 'from s in syscall("read") where s.ustack == "x" select { n: count() }' >/dev/null 2>"$T_TMP/err"
ok "a stack outside a group key is refused, with the form to use" grep -q 'a stack is a group key only' "$T_TMP/err"
"$FAY" query 'from s in profile(99) group s by s.ustack(500) into g select { n: g.count() }' >/dev/null 2>"$T_TMP/err"
ok "a depth beyond 127 is refused" grep -q 'a stack keeps 1 to 127 frames' "$T_TMP/err"
"$FAY" query --format folded 'from s in profile(99) group s by s.comm into g select { c: g.key, n: g.count() }' >/dev/null 2>"$T_TMP/err"
ok "--format folded without a stack column is refused" grep -q 'folded prints a stack and a number' "$T_TMP/err"
# (inline probes walk user stacks themselves: inline_stacks.sh)

# ---- a cluster: two agents, stacks merged by their names ----------------------------------
. "$(dirname "$0")/collector_lib.bash"
coll_start "$T_TMP/c.db"
ok "two agents open query connections" coll_agents h1 h2
timeout 60 "$FAY" query --cluster "$URL" --format folded \
	"from f in cluster.function(\"$FP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() } for 6s" \
	>"$T_TMP/co" 2>"$T_TMP/ce" & qpid=$!
n_att() { [ "$(hosts_attached "$T_TMP/ce")" -ge 2 ]; }
wait_for 30 n_att
QW_WAIT=$T_TMP/cgo "$FP" calls 3000 & T_PIDS+=($!)	# 0.3 s or more: see above
touch "$T_TMP/cgo"
wait $qpid
RC=$?
# both hosts share this kernel: each counts the run, 2 x (3000 + 1000)
sed 's/^.*;main;/main;/' "$T_TMP/co" | sort >"$T_TMP/co.f"
same "$T_TMP/co.f" "main;A;B;C 6000"$'\n'"main;A;D;C 2000" \
	"cluster: each host's stacks arrive as names and merge (2 hosts x 3000 and 1000)"
ok "cluster: 2 of 2 hosts answered" grep -q 'result: 2 of 2 hosts answered' "$T_TMP/ce"
done_testing
