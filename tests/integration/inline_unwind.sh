#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Exceptional exits (issue 19 item 5): calls left by longjmp (a C
# program) and by a C++ exception thrown through them, at depths 1..7 of
# recursions 2..8 deep, landing in the middle of the recursion.  Every
# return pairs with its own entry: each depth's count of exits is the
# program's own count of returns and each time is at least what that call
# slept (a return paired with an inner call's entry would be shorter); in
# inline mode the calls left without their return are counted (the
# runtime drops their levels: "left without returning") exactly as many
# as the program left; the kernel uprobe path pairs by frame too; the
# programs' output and exit status are those of unprobed runs.  A
# uretprobe on the C++ program (which would abort it) is refused; its
# functions are named demangled, and stacks show them so.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"
UW=$BUILD/tests/bin/unwind_work
UC=$BUILD/tests/bin/unwind_cxx
[ -x "$UW" ] && [ -x "$UC" ] || skip_all "unwind_work / unwind_cxx are not built (make)"
K=60 US=300

# check WHAT MODE PROG FN: fay run --probe-mode=MODE on PROG K US with
# durations per depth of FN; every row checked against PROG's own counts
check() {
	local what=$1 mode=$2 prog=$3 fn=$4 want
	want=$(timeout 60 "$prog" $K $US) || { fail "$what: $prog runs unprobed"; return; }
	timeout 120 nice -n 10 "$FAY" run --json --probe-mode="$mode" --query \
		"from f in function(\"$prog:$fn\") group f by { d: f.arg(0) } into g select { d: g.d, n: g.count(), mn: g.min(f.duration) }" \
		-- "$prog" $K $US >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
	if [ $RC -eq 0 ] && python3 -c "
import json, sys
lines = open('$T_TMP/out').read().splitlines()
rows = [json.loads(l) for l in lines if l.startswith('{')]
prog = [l for l in lines if not l.startswith('{')]
want = '''$want'''.splitlines()
assert prog == want, ('output', prog, want)
ret = {int(l.split()[1]): int(l.split()[2]) for l in want if l.startswith('returned ')}
left = int([l for l in want if l.startswith('left ')][0].split()[1])
by = {r['d']: r for r in rows}
assert sorted(by) == sorted(v for v in ret if ret[v]), (sorted(by), ret)
for d, r in by.items():
    assert r['n'] == ret[d], ('count', d, r, ret[d])
    assert r['mn'] >= d * $US * 1000, ('time', d, r)
err = open('$T_TMP/err').read()
if '$mode' != 'uprobe':
    assert 'inline (' in err, err
    assert 'warning: %d calls not timed: left without returning' % left in err, ('left', left, err)
print(sum(ret.values()), left)
" >"$T_TMP/py" 2>&1; then
		pass "$what: $(cut -d' ' -f1 "$T_TMP/py") returns paired at depths 1..8, each timed at least its own sleeps$([ "$mode" = uprobe ] || echo ", the $(cut -d' ' -f2 "$T_TMP/py") calls left counted as left")"
	else
		fail "$what (rc=$RC)" "out: $(head -c 1500 "$T_TMP/out")" \
			"err: $(head -c 800 "$T_TMP/err")" "$(tail -c 800 "$T_TMP/py")"
	fi
}

for m in inline auto uprobe; do
	check "longjmp out of 1..7 probed levels, $m" $m "$UW" fay_unw
done
# (a kernel uretprobe breaks the unwinding of a C++ exception: inline
# only); the function named demangled, with and without its parameters,
# and mangled
check "a C++ exception thrown through 1..7 probed levels, inline" inline "$UC" "fay::unw::Level::call"
check "a C++ exception thrown through 1..7 probed levels, auto (the name with its parameters)" auto "$UC" \
	"fay::unw::Level::call(long, long, long)"
check "a C++ exception thrown through 1..7 probed levels, inline (the mangled name)" inline "$UC" _ZN3fay3unw5Level4callElll

# ---- C++ names in uprobe mode (entries only: no uretprobe), and in stacks ----------
# Frames are named from the process's mappings, read the first time its
# stack is named: a result read only after the process exited has
# "[unknown]" frames (docs/QUERY.md).  So the program runs ~2 s (5 ms
# sleeps) and the answer comes every second, the first while it runs.
want=$(timeout 60 "$UC" $K 0) || fail "$UC runs unprobed"
ent=$(echo "$want" | sed -n 's/^entered //p')
timeout 120 nice -n 10 "$FAY" run --json --probe-mode=uprobe --query \
	"from f in function(\"$UC:fay::unw::Level::call\") group f by { s: f.ustack(1) } into g select { s: g.s, n: g.count() } window 1s" \
	-- "$UC" $K 5000 >"$T_TMP/out" 2>"$T_TMP/err"
rows=$(python3 -c '
import json, sys
n = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        n[r["s"]] = n.get(r["s"], 0) + r["n"]
print(json.dumps(n, separators=(",", ":")))' "$T_TMP/out")
if [ "$rows" = "{\"fay::unw::Level::call\":$ent}" ]; then
	pass "uprobe mode, the demangled name: $ent entries of $ent, the frame named fay::unw::Level::call in ustack"
else
	fail "uprobe mode, the demangled name (want $ent entries)" "$rows" "$(head -c 600 "$T_TMP/err")"
fi
# ---- an exit probe never breaks unwinding: no uretprobe on a C++ thrower --------------
for how in "run --probe-mode=uprobe" "query"; do
	if [ "$how" = query ]; then
		args=(query "from f in function(\"$UC:fay::unw::Level::call\") select { n: count(), t: max(f.duration) } for 1s")
	else
		args=(run --probe-mode=uprobe --query "from f in function(\"$UC:fay::unw::Level::call\") select { n: count(), t: max(f.duration) }" -- "$UC" $K 0)
	fi
	timeout 60 "$FAY" "${args[@]}" >"$T_TMP/out" 2>"$T_TMP/err"
	rc=$?
	if [ $rc -ne 0 ] && grep -q 'throws or catches C++ exceptions, and one unwinding through a call with a kernel uretprobe aborts the program' "$T_TMP/err" &&
	   ! grep -q terminate "$T_TMP/err" "$T_TMP/out"; then
		pass "fay $how: durations of a C++ function by uretprobe refused with the reason"
	else
		fail "fay $how: durations of a C++ function by uretprobe (rc=$rc)" "$(head -c 600 "$T_TMP/err")"
	fi
done

timeout 60 "$FAY" query --probe-mode=uprobe -c "$UC 1 0" \
	"from f in function(\"$UC:fay::unw::no_such\") select { n: count() }" >"$T_TMP/out" 2>"$T_TMP/err"
if [ $? -ne 0 ] && grep -q 'no function "fay::unw::no_such" in .*unwind_cxx' "$T_TMP/err"; then
	pass "a C++ name of no function: refused, named"
else
	fail "a C++ name of no function" "$(head -c 600 "$T_TMP/err")"
fi
done_testing
