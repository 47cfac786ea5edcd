#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Many distinct stacks, each named and counted exactly: stack keys are
# kept under the whole hash of their frames (src/engine/codegen_stack.c),
# never in a bucket of a stack map that another stack holds (the kernel's
# bpf_get_stackid() answered -EEXIST for the second stack of a bucket,
# hash % 8192: "[no user stack: EEXIST]", inline_stacks.sh #9 in CI on 6
# stacks; at 512 stacks it is near certain).  stack_work tree 9 enters C
# under 2^9 = 512 stacks of its own (main;T then L;T or R;T nine times),
# once each: at C's entry (a uprobe) by the command's unwind table, by
# the kernel's walk on one pid (FAY_UNWIND=fp), on every process; at
# getppid()'s system call (a tracepoint) with the user and the kernel
# stack in one key (the reader names each as its kind says); 2^14 stacks
# fill fay_stk (8192): the rest are "[no user stack: E2BIG]", counted; and the kernel stacks of profile(997) on every CPU
# under a file-system walk (hundreds of distinct ones): none refused.
. "$(dirname "$0")/../lib/lib.sh"
need_root
FP=$BUILD/tests/bin/stack_work_fp
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$FP" ] || skip_all "stack_work is not built (make)"
. "$(dirname "$0")/query_lib.bash"

D=9
UQ="from f in function(\"$FP:C\") group f by f.ustack into g select { stack: g.key, n: g.count() }"

# the 2^D stacks of C, from main inward, each "STACK 1", sorted
python3 - "$D" >"$T_TMP/want" <<'PY'
import itertools, sys
d = int(sys.argv[1])
for p in itertools.product("LR", repeat=d):
    print("main;T;" + "".join(x + ";T;" for x in p) + "C 1")
PY
sort -o "$T_TMP/want" "$T_TMP/want"

# exact WHAT: $T_TMP/out's folded lines from main inward equal the 2^D
# stacks of C, once each (and RC 0)
exact() {
	sed -E 's/^.*;main;/main;/' "$T_TMP/out" | sort >"$T_TMP/got"
	if [ "$RC" -eq 0 ] && cmp -s "$T_TMP/got" "$T_TMP/want"; then
		pass "$1: $(wc -l <"$T_TMP/got") stacks, each named and counted once"
	else
		fail "$1 (rc $RC): $(wc -l <"$T_TMP/got") lines, want $((1 << D))" \
			"not named: $(grep -v '^main;' "$T_TMP/got" | head -5 | tr '\n' '|')" \
			"diff: $(diff "$T_TMP/want" "$T_TMP/got" | head -8 | tr '\n' '|')" \
			"$(head -c 400 "$T_TMP/err")"
	fi
}

# ---- a uprobe of one process ------------------------------------------------------
fq --probe-mode=uprobe --format folded -c "$FP tree $D" "$UQ"
exact "uprobe -c, walked by the unwind table"
FAY_UNWIND=fp fq --probe-mode=uprobe --format folded -c "$FP tree $D" "$UQ"
exact "uprobe -c, FAY_UNWIND=fp: the kernel's walk (bpf_get_stack)"

# ---- fay_stk full: 2^14 stacks, 8192 kept, the rest said and counted ----------------
# (the update's E2BIG in the key, never another stack's name)
for how in table fp; do
	FAY_UNWIND=${how/table/} fq --probe-mode=uprobe --format folded -c "$FP tree 14" "$UQ"
	kept=$(grep -c ';main;T;.* 1$' "$T_TMP/out")
	other=$(grep -v ';main;T;.* 1$' "$T_TMP/out")
	if [ "$RC" -eq 0 ] && [ "$kept" -eq 8192 ] && [ "$other" = "[no user stack: E2BIG] 8192" ]; then
		pass "fay_stk full ($how): 8192 stacks kept once each, '$other'"
	else
		fail "fay_stk full ($how, rc $RC): $kept kept, want 8192; the rest: $(echo "$other" | head -3)" \
			"$(head -c 400 "$T_TMP/err")"
	fi
done

# ---- a uprobe of every process ----------------------------------------------------
: >"$T_TMP/err"
timeout 60 "$FAY" query --probe-mode=uprobe --format folded "$UQ for 4s" \
	>"$T_TMP/out" 2>"$T_TMP/err" & fpid=$!
wait_for 30 grep -q attached "$T_TMP/err"
sleep 0.3
"$FP" tree $D
wait $fpid
RC=$?
exact "uprobe of every process"

# ---- a tracepoint: the user and the kernel stack in one key ---------------------------
# (raw_syscalls:sys_enter, not syscall("getppid"): a syscalls:sys_enter_*
# tracepoint has no kernel stack on Linux 6.1, EFAULT, the guest's;
# getppid is system call 110 on x86-64)
fq --format json -c "$FP treesys $D" \
	"from s in tracepoint(\"raw_syscalls:sys_enter\") where s.id == 110 group s by {u: s.ustack, k: s.kstack} into g select { u: g.u, k: g.k, n: g.count() }"
python3 - "$T_TMP/out" "$D" >"$T_TMP/cmp" 2>&1 <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
d = int(sys.argv[2])
us = set()
for r in rows:
    u = "main;" + r["u"].split(";main;", 1)[-1]
    f = u.split(";")
    # main;T then (L|R);T d - 1 times, then L|R (T(0) calls getppid:
    # no frame of its own) and getppid
    assert f[:2] == ["main", "T"] and f[-1] == "getppid" and len(f) == 2 * d + 2, ("user", r)
    assert all(x in "LR" for x in f[2:-1:2]) and all(x == "T" for x in f[3:-1:2]), ("user", r)
    assert "do_syscall_64" in r["k"] and not r["k"].startswith("["), ("kernel", r)
    assert r["n"] == 1, ("count", r)
    us.add(u)
assert len(us) == len(rows) == 1 << d, (len(us), len(rows))
print("ok", len(rows), rows[0]["k"])
PY
if [ "$RC" -eq 0 ] && grep -q '^ok ' "$T_TMP/cmp"; then
	pass "raw_syscalls:sys_enter of getppid by {s.ustack, s.kstack}: $(cut -c1-200 "$T_TMP/cmp")"
else
	fail "raw_syscalls:sys_enter of getppid by {s.ustack, s.kstack} (rc $RC)" "$(tail -c 600 "$T_TMP/cmp")" \
		"$(head -c 400 "$T_TMP/err")"
fi

# ---- kernel stacks of every CPU ----------------------------------------------------
# a file-system walk, /proc and /sys read, and the rest of the machine:
# about 1100 distinct kernel stacks in 4 s here; a sample in user
# mode has none (EFAULT), nothing else may be refused
timeout 4 find / -xdev -type f -size +1k >/dev/null 2>&1 & wpid=$!
timeout 4 sh -c 'while :; do cat /proc/[0-9]*/stat /proc/[0-9]*/maps; ls -lR /sys/class; done' \
	>/dev/null 2>&1 & wpid2=$!
fq --format json "from s in profile(997) group s by s.kstack into g select { k: g.key, n: g.count() } for 4s"
kill "$wpid" "$wpid2" 2>/dev/null; wait "$wpid" "$wpid2" 2>/dev/null
named=$(grep -vc '"k":"\[' "$T_TMP/out")
refused=$(grep '"k":"\[' "$T_TMP/out" | grep -v '"k":"\[no kernel stack: EFAULT\]"')
if [ "$RC" -eq 0 ] && [ "$named" -ge 300 ] && [ -z "$refused" ]; then
	pass "profile(997) by s.kstack: $named distinct kernel stacks named, none refused"
else
	fail "profile(997) by s.kstack (rc $RC): $named named (want >= 300: a collision in 8192 buckets is then near certain), refused: ${refused:-none}" \
		"$(head -c 400 "$T_TMP/err")"
fi

done_testing
