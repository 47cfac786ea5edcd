#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes and every-process uprobes on the same function never
# corrupt a traced process (issue #19), on Debian's python3 calling
# glibc's getppid():
#  - a function under another tracer's uprobe (an every-process fay
#    query) is refused inline, naming the breakpoint, and auto mode takes
#    a uprobe on the process instead, counting exactly;
#  - while an inline query has rewritten getppid in a process, an
#    every-process uprobe query on it is refused, naming the process
#    (the kernel's int3 and its later restore of the file's byte would
#    turn the jump into `mov $DISP,%eax`: getppid() returned other
#    numbers before this), and it attaches once the inline query ended;
#  - python's own getppid() answers stay right through all of it.
. "$(dirname "$0")/../lib/lib.sh"

need_root
PY=/usr/bin/python3
[ -x $PY ] || skip "no $PY (Debian's python3)"

# py N: a python3 that waits for $T_TMP/go, calls os.getppid() N times
# (5 ms apart), prints how many answers differed from the first
py() {
	rm -f "$T_TMP/go" "$T_TMP/ready"
	timeout 120 $PY -c '
import os, sys, time
go, ready, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pp = os.getppid()
with open(ready + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(ready + ".tmp", ready)
while not os.path.exists(go):
    time.sleep(0.005)
bad = 0
for i in range(n):
    if os.getppid() != pp:
        bad += 1
    time.sleep(0.005)
print("bad", bad)' "$T_TMP/go" "$T_TMP/ready" "$1" >"$T_TMP/py.out" 2>&1 &
	T_PIDS+=($!)
	wait_for 30 test -e "$T_TMP/ready"
	PYPID=$(cat "$T_TMP/ready")	# python's own (timeout's is $!)
}

# finish OUT WHO WHERE: python runs its calls, query $q ends; its answer
# (in OUT) counted every call and python's answers were all right
finish() {
	touch "$T_TMP/go"
	wait_for 60 grep -q bad "$T_TMP/py.out"
	kill -INT $q 2>/dev/null
	wait $q
	ok "$2 counted every call: $(cat "$1")" test "$(cat "$1")" = '{"n":400}'
	ok "python3's getppid() answers right $3 ($(cat "$T_TMP/py.out"))" \
		test "$(cat "$T_TMP/py.out")" = "bad 0"
}

attached() { grep -q 'attached' "$1" || ! kill -0 "$2" 2>/dev/null; }

Q='from f in function("libc:getppid") select { n: count() }'

# 1. every-process uprobe first, then inline on one process
py 400
timeout 60 "$FAY" query --json "$Q for 60s" >"$T_TMP/all.out" 2>"$T_TMP/all.err" & all=$!
wait_for 30 attached "$T_TMP/all.err" $all
timeout 30 "$FAY" query --json --probe-mode=inline -p $PYPID "$Q for 1s" >"$T_TMP/i.out" 2>"$T_TMP/i.err"
rc=$?
[ $rc -ne 0 ] && grep -q "breakpoint another tracer put there" "$T_TMP/i.err" &&
	pass "inline on a function under another uprobe: refused, naming the breakpoint" ||
	fail "inline under a uprobe" "rc $rc" "$(cat "$T_TMP/i.err")"
timeout 60 "$FAY" query --json -p $PYPID "$Q" >"$T_TMP/a.out" 2>"$T_TMP/a.err" & q=$!
wait_for 30 attached "$T_TMP/a.err" $q
grep -q "pid $PYPID: uprobe" "$T_TMP/a.err" &&
	pass "auto mode takes a uprobe on the process, saying why" ||
	fail "auto mode's fallback" "$(cat "$T_TMP/a.err")"
finish "$T_TMP/a.out" "auto mode (uprobe)" "beside both uprobes"
kill -INT $all 2>/dev/null
wait $all

# 2. inline first, then every-process uprobe
py 400
: >"$T_TMP/i.err"	# not by the job's redirection: the wait may read it first
timeout 60 "$FAY" query --json --probe-mode=inline -p $PYPID "$Q" >"$T_TMP/i.out" 2>"$T_TMP/i.err" & q=$!
wait_for 30 attached "$T_TMP/i.err" $q
grep -q "inline" "$T_TMP/i.err" && kill -0 $q 2>/dev/null ||
	fail "the inline query attached" "$(cat "$T_TMP/i.err")"
timeout 30 "$FAY" query --json "$Q for 1s" >"$T_TMP/all.out" 2>"$T_TMP/all.err"
rc=$?
[ $rc -ne 0 ] && grep -q "process $PYPID has an inline probe" "$T_TMP/all.err" &&
	pass "an every-process uprobe beside an inline probe: refused, naming the process" ||
	fail "every-process uprobe beside inline" "rc $rc" "$(cat "$T_TMP/all.err")"
finish "$T_TMP/i.out" "the inline query" "beside the refused uprobe"
# the inline query ended: the function is the file's again
timeout 30 "$FAY" query --json "$Q for 1s" >"$T_TMP/all.out" 2>"$T_TMP/all.err"
ok "after the inline query ended, the every-process query attaches" test $? -eq 0

done_testing
