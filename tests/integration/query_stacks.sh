#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stack keys (issue #27 item 3), for real (root, BPF): stack_work's known
# call tree (main -> A -> B -> C hot, A -> D cold) under profile(199)
# grouped by s.ustack: the folded shares match the work (9:1) within
# sampling error built with frame pointers and without (the sample walked
# by the command's unwind table), and agree; Debian's xz and python3
# (no frame pointers) sampled so reach _start, deeper than by frame
# pointers;
# at C's entry (a uprobe) the counts per stack are exact (K under
# main;A;B;C, ceil(K/3) under main;A;D;C) and equal bpftrace's @[ustack]
# = count() on the same run; without frame pointers on a process named
# with -p, the same exact counts (the walk by its unwind table); syscall("read") by s.kstack shows the
# system call's entry path; refusals; the default table and --format
# folded; a cluster of two agents merges stacks by their names; a -c
# shell's child (no frame pointers) walked by its own table, sampled and
# at C's entry.
. "$(dirname "$0")/../lib/lib.sh"
need_root
FP=$BUILD/tests/bin/stack_work_fp
NOFP=$BUILD/tests/bin/stack_work_nofp
QW=$BUILD/tests/bin/query_work
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$FP" ] && [ -x "$NOFP" ] && [ -x "$QW" ] || skip_all "stack_work/query_work are not built (make)"
. "$(dirname "$0")/query_lib.bash"

PROF='from s in profile(199) group s by s.ustack into g select { stack: g.key, n: g.count() }'

# shares FP NOFP: the verdict on two spin runs' folded lines "frames N"
# (built with and without frame pointers), in $T_TMP/cmp.  The work is 9
# units under main;A;B;C for 1 under main;A;D, so a sample is hot with
# p = 0.9; of N samples under main;A the hot share has a binomial
# standard error sqrt(p (1 - p) / N) (0.015 at N = 400, profile(199) for
# 2 s): each build's share is within 4 of them of 0.9 and the two within
# 4 of their difference's (sqrt(p (1 - p) (1/N1 + 1/N2))): a wrong walk
# is off by far more, a right one fails 1 time in 10^4.  (The loops of C
# and D compiled with and without frame pointers run at nearly the same
# speed: 0.877 to 0.93 in 6 runs, 05:38 UTC, load 3.)  And 95% of each
# build's samples reach main (the rest: the clock, the loop, the samples
# before the command's table is in the kernel).
shares() {
	python3 - "$1" "$2" >"$T_TMP/cmp" 2>&1 <<'PY'
import math, sys
P = 0.9
def load(path):
    rows = []
    for l in open(path):
        st, n = l.rstrip("\n").rsplit(" ", 1)
        rows.append((st.split(";"), int(n)))
    tot = sum(n for _, n in rows)
    hot = sum(n for f, n in rows if f[-4:] == ["main", "A", "B", "C"])
    cold = sum(n for f, n in rows if f[-3:] == ["main", "A", "D"])
    assert tot >= 200, ("too few samples", path, tot)
    assert hot + cold >= 0.95 * tot, ("stacks do not reach main", path, hot, cold, tot, rows[:8])
    return hot / (hot + cold), hot + cold, tot
out = []
for name, path in (("fp", sys.argv[1]), ("nofp", sys.argv[2])):
    h, n, tot = load(path)
    tol = 4 * math.sqrt(P * (1 - P) / n)
    assert abs(h - P) <= tol, (name, "hot share", h, "want", P, "+-", tol)
    out.append((name, h, n, tot, tol))
(_, h1, n1, _, _), (_, h2, n2, _, _) = out
tol = 4 * math.sqrt(P * (1 - P) * (1 / n1 + 1 / n2))
assert abs(h1 - h2) <= tol, ("fp and nofp differ", h1, h2, "+-", tol)
print("; ".join("%s: %d samples, %d under main, hot %.3f (0.9 +- %.3f)" % (a, t, n, h, e)
                for a, h, n, t, e in out) + "; |fp - nofp| %.3f <= %.3f" % (abs(h1 - h2), tol))
PY
}

# ---- profile(199) by s.ustack: the shares of a known call tree --------------------
# with frame pointers (the kernel's walk) and without (-c: the walk by
# the command's unwind table in the perf_event program)
fq --format folded -c "$FP spin 2000" "$PROF"
cp "$T_TMP/out" "$T_TMP/prof.fp"
RC1=$RC
timeout 60 "$FAY" query --format folded -c "$NOFP spin 2000" "$PROF" >"$T_TMP/prof.nofp" 2>"$T_TMP/err"
RC=$?	# (not quiet: the attach line)
if [ $RC1 -eq 0 ] && [ $RC -eq 0 ] && shares "$T_TMP/prof.fp" "$T_TMP/prof.nofp"; then
	pass "profile(199) by s.ustack with and without frame pointers: main;A;B;C to main;A;D is 9:1 in both within sampling error ($(cat "$T_TMP/cmp"))"
else
	fail "profile(199) by s.ustack with and without frame pointers (rc=$RC1, $RC)" "$(head -c 1500 "$T_TMP/cmp")" "$(head -c 400 "$T_TMP/err")"
fi
ok "... and the attach line says the samples walk by the command's table" \
	grep -q "s.ustack walked by pid [0-9]*'s unwind table (.*a sample in the kernel from the task's saved user registers)" "$T_TMP/err"
# real programs without frame pointers: Debian's xz (its code: user
# mode) and python3 reading /dev/zero (its samples mostly in the kernel:
# walked from the task's saved user registers) reach the program's
# _start through __libc_start_main in 9 samples of 10; by frame
# pointers (FAY_UNWIND=fp) they are cut a frame or two in
# depth FILE: "N SHARE DEPTH" of folded stacks: samples, the share through
# __libc_start_main (LEAF: of the samples whose innermost frame is LEAF),
# the mean number of frames
depth() {
	python3 - "$@" <<'PY'
import sys
rows = []
for l in open(sys.argv[1], errors="replace"):
    st, n = l.rstrip("\n").rsplit(" ", 1)
    rows.append((st.split(";"), int(n)))
if len(sys.argv) > 2:
    rows = [(f, n) for f, n in rows if f[-1] == sys.argv[2]]
tot = sum(n for _, n in rows) or 1
via = sum(n for f, n in rows if "__libc_start_main" in f[:3])
print(tot, "%.3f" % (via / tot), "%.1f" % (sum(n * len(f) for f, n in rows) / tot))
PY
}
XZ=$(command -v xz || true)
if [ -n "$XZ" ]; then
	head -c 3000000 /dev/urandom >"$T_TMP/r"
	fq --format folded -c "$XZ -T1 -3 -k -f $T_TMP/r" "$PROF"
	read -r n1 v1 d1 < <(depth "$T_TMP/out")
	rm -f "$T_TMP/r.xz"
	FAY_UNWIND=fp fq --format folded -c "$XZ -T1 -3 -k -f $T_TMP/r" "$PROF"
	read -r n2 v2 d2 < <(depth "$T_TMP/out")
	ok "xz (no frame pointers) under profile(199) -c: $v1 of $n1 samples reach _start, $d1 frames a sample; by frame pointers $v2, $d2 frames" \
		python3 -c "assert $n1 >= 100 and $v1 >= 0.9 and $d1 >= $d2 + 5 and $v2 <= 0.1"
else
	diag "no xz: its check is not made"
fi
cat >"$T_TMP/rd.py" <<'PYW'
import os, time
f = os.open("/dev/zero", os.O_RDONLY)
while time.process_time() < 2:	# (CPU time: as many samples on a loaded host)
    os.read(f, 1 << 20)
PYW
fq --format folded -c "python3 $T_TMP/rd.py" "$PROF"
read -r n1 v1 d1 < <(depth "$T_TMP/out")
read -r nr vr dr < <(depth "$T_TMP/out" __read)
FAY_UNWIND=fp fq --format folded -c "python3 $T_TMP/rd.py" "$PROF"
read -r n2 v2 d2 < <(depth "$T_TMP/out" __read)
ok "python3 read()ing under profile(199) -c: $nr of $n1 samples in __read (in the kernel), $vr of them reach _start, $dr frames; by frame pointers $v2, $d2 frames" \
	python3 -c "assert $n1 >= 100 and $nr >= 0.5 * $n1 and $vr >= 0.9 and $dr >= $d2 + 5 and $v2 <= 0.1"

# the command's descendants get their own tables (made at their execs
# and mmap()s while the exec watch holds them): a shell running the
# no-frame-pointer workload as its child ("; true": the shell forks)
fq --format folded -c "sh -c '$NOFP spin 1500; true'" "$PROF"
ok "profile(199) -c of a shell: its child's samples in C or D (no frame pointers) reach main by the child's table" python3 -c "
rows = [l.rstrip('\n').rsplit(' ', 1) for l in open('$T_TMP/out')]
work = [(s.split(';'), int(n)) for s, n in rows if s.split(';')[-1] in ('C', 'D')]
tot = sum(n for _, n in work)
main = sum(n for f, n in work if f[-4:] == ['main', 'A', 'B', 'C'] or f[-3:] == ['main', 'A', 'D'])
assert tot >= 150 and main >= 0.95 * tot, (tot, main, rows[:6])
"
# 12 children one after the other: more than the 8 tables the kernel's
# map holds at once (a child's is deleted once it exited); each lives
# 60 ms or more, so that the reader names its frames while it runs
fq --format folded --probe-mode=uprobe -c "sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do $NOFP calls 600; done'" \
	"from f in function(\"$NOFP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }"
sed 's/^.*;main;/main;/' "$T_TMP/out" | sort >"$T_TMP/folded"
same "$T_TMP/folded" "main;A;B;C 7200"$'\n'"main;A;D;C 2400" \
	"no frame pointers, uprobe on -c of a shell running 12 children in turn: each child's stacks walked by its own table give the exact counts"

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
ok "--format folded without a stack column is refused" grep -q 'print a stack and a number per row' "$T_TMP/err"
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
# the same merged stacks as a call tree, printed by the collector
# ("format": "tree"): ustack(4), main down to C
: >"$T_TMP/ce"
timeout 60 "$FAY" query --cluster "$URL" --format tree \
	"from f in cluster.function(\"$FP:C\") group f by f.ustack(4) into g select { stack: g.key, n: g.count() } for 6s" \
	>"$T_TMP/co" 2>"$T_TMP/ce" & qpid=$!
wait_for 30 n_att
rm -f "$T_TMP/cgo"
QW_WAIT=$T_TMP/cgo "$FP" calls 3000 & T_PIDS+=($!)
touch "$T_TMP/cgo"
wait $qpid
RC=$?
same "$T_TMP/co" "$(printf '%10s %7s  %s\n' n % stack
printf '%10d %6.1f%%  %s\n' 8000 100 main 8000 100 '└─ A' 6000 75 '   ├─ B' 6000 75 '   │  └─ C' \
	2000 25 '   └─ D' 2000 25 '      └─ C')" \
	"cluster, --format tree: the merged stacks of 2 hosts as one call tree"
done_testing
