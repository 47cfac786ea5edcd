#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Exceptional exits (issue 19 item 5): calls left by longjmp (a C
# program) and by a C++ exception thrown through them, at depths 1..7 of
# recursions 2..8 deep, landing in the middle of the recursion.  Every
# return pairs with its own entry: each depth's count of exits is the
# program's own count of returns and each time is at least what that call
# slept (a return paired with an inner call's entry would be shorter).
# In inline mode each call left without its return is an exit event of
# its own, f.unwound = 1 (the runtime finds its level gone at the
# thread's next probed call and runs the exit program for it there):
# per depth exactly as many as the program left, f.ret 0, each timed at
# least what it slept; the returns have f.unwound = 0 and their own
# f.ret; count() is every call, sum(f.unwound) the calls left, and
# `where f.unwound` selects only those.  The kernel uprobe path pairs by
# frame too (it sees no exit for a call left: f.unwound is refused there
# with the reason); the programs' output and exit status are those of
# unprobed runs.  A uretprobe on the C++ program (which would abort it)
# is refused; its functions are named demangled, and stacks show them so.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"
UW=$BUILD/tests/bin/unwind_work
UC=$BUILD/tests/bin/unwind_cxx
[ -x "$UW" ] && [ -x "$UC" ] || skip_all "unwind_work / unwind_cxx are not built (make)"
K=60 US=300

# probed WHAT MODE PROG FN QUERY: fay run --probe-mode=MODE --query QUERY
# (FN in it: "function(PROG:FN)") on PROG K US; its output checked
# against the unprobed run's (the JSON rows in $T_TMP/rows, PROG's own
# counts in $T_TMP/want); 1 when fay or the output failed (said)
probed() {
	local what=$1 mode=$2 prog=$3 fn=$4 f="function(\"$3:$4\")" q
	q=${5//FN/$f}
	timeout 60 "$prog" $K $US >"$T_TMP/want" || { fail "$what: $prog runs unprobed"; return 1; }
	timeout 120 nice -n 10 "$FAY" run --json --probe-mode="$mode" --query "$q" \
		-- "$prog" $K $US >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
	grep '^{' "$T_TMP/out" >"$T_TMP/rows"
	if [ $RC -ne 0 ] || ! grep -v '^{' "$T_TMP/out" | cmp -s - "$T_TMP/want" ||
	   { [ "$mode" != uprobe ] && ! grep -q 'inline (' "$T_TMP/err"; }; then
		fail "$what (rc=$RC)" "out: $(head -c 1500 "$T_TMP/out")" "err: $(head -c 800 "$T_TMP/err")"
		return 1
	fi
}

# verify PY: python over rows (the JSON rows), ret[d] / unw[d] (PROG's
# calls of arg d that returned / were left), left, entered; prints a
# summary or fails an assert
verify() {
	python3 -c "
import json
rows = [json.loads(l) for l in open('$T_TMP/rows')]
want = open('$T_TMP/want').read().splitlines()
num = lambda k: {int(l.split()[1]): int(l.split()[2]) for l in want if l.startswith(k + ' ')}
ret, unw = num('returned'), num('unwound')
one = lambda k: int([l for l in want if l.startswith(k + ' ')][0].split()[1])
left, entered = one('left'), one('entered')
US = $US * 1000
$1" >"$T_TMP/py" 2>&1
}

# check WHAT MODE PROG FN: per depth (f.arg(0)) and kind of exit
# (f.unwound), the count, the shortest time and the return values, each
# against PROG's own counts
check() {
	local what=$1 mode=$2 prog=$3 fn=$4
	probed "$what" "$mode" "$prog" "$fn" \
		"from f in FN group f by { d: f.arg(0), u: f.unwound } into g select { d: g.d, u: g.u, n: g.count(), mn: g.min(f.duration), r0: g.min(f.ret), r1: g.max(f.ret) }" || return
	if verify "
by = {(r['d'], r['u']): r for r in rows}
exp = {(d, 0): n for d, n in ret.items() if n}
exp.update({(d, 1): n for d, n in unw.items() if n})
assert sorted(by) == sorted(exp), ('rows', sorted(by), sorted(exp))
for (d, u), r in by.items():
    assert r['n'] == exp[(d, u)], ('count', d, u, r, exp[(d, u)])
    assert r['mn'] >= d * US, ('time', d, u, r)
    assert r['r0'] == r['r1'] == (0 if u else d), ('ret', d, u, r)
assert left and sum(unw.values()) == left
print(sum(ret.values()), left)"; then
		pass "$what: $(cut -d' ' -f1 "$T_TMP/py") returns and $(cut -d' ' -f2 "$T_TMP/py") unwound exits at depths 1..8, each depth's counts the program's, f.ret 0 for unwound, each timed at least its own sleeps"
	else
		fail "$what" "rows: $(head -c 1500 "$T_TMP/rows")" "$(tail -c 800 "$T_TMP/py")"
	fi
}

# totals WHAT PROG FN: count() is every call, sum(f.unwound) the calls
# left, hist(f.duration) holds them all; `where f.unwound` only those
totals() {
	local what=$1 prog=$2 fn=$3
	if probed "$what: count(), sum(f.unwound), hist(f.duration)" inline "$prog" "$fn" \
		"from f in FN select { n: count(), u: sum(f.unwound), d: hist(f.duration) }" &&
	   verify "
r, = rows
assert r['n'] == entered and r['u'] == left, (r, entered, left)
print(entered, left)"; then
		pass "$what: count() $(cut -d' ' -f1 "$T_TMP/py") = every call, sum(f.unwound) $(cut -d' ' -f2 "$T_TMP/py") = the calls left"
	else
		fail "$what: count() and sum(f.unwound)" "rows: $(head -c 800 "$T_TMP/rows")" "$(tail -c 800 "$T_TMP/py")"
	fi
	if probed "$what: where f.unwound" inline "$prog" "$fn" \
		"from f in FN where f.unwound group f by f.arg(0) into g select { d: g.key, n: g.count(), r: g.max(f.ret) }" &&
	   verify "
by = {r['d']: r for r in rows}
assert sorted(by) == sorted(d for d in unw if unw[d]), (sorted(by), unw)
for d, r in by.items():
    assert r['n'] == unw[d] and r['r'] == 0, ('unwound', d, r, unw[d])
print(sum(r['n'] for r in rows))"; then
		pass "$what: where f.unwound: $(cat "$T_TMP/py") rows' calls, exactly the calls left, per depth"
	else
		fail "$what: where f.unwound" "rows: $(head -c 800 "$T_TMP/rows")" "$(tail -c 800 "$T_TMP/py")"
	fi
}

for m in inline auto; do
	check "longjmp out of 1..7 probed levels, $m" $m "$UW" fay_unw
done
totals "longjmp, inline" "$UW" fay_unw
# uprobe mode: the returns pair by frame; the calls left have no exit
if probed "longjmp out of 1..7 probed levels, uprobe" uprobe "$UW" fay_unw \
	"from f in FN group f by { d: f.arg(0) } into g select { d: g.d, n: g.count(), mn: g.min(f.duration) }" &&
   verify "
by = {r['d']: r for r in rows}
assert sorted(by) == sorted(d for d in ret if ret[d]), (sorted(by), ret)
for d, r in by.items():
    assert r['n'] == ret[d] and r['mn'] >= d * US, ('count', d, r, ret[d])
print(sum(ret.values()))"; then
	pass "longjmp out of 1..7 probed levels, uprobe: $(cat "$T_TMP/py") returns paired at depths 1..8, each timed at least its own sleeps"
else
	fail "longjmp, uprobe" "rows: $(head -c 800 "$T_TMP/rows")" "$(tail -c 800 "$T_TMP/py")"
fi
timeout 60 "$FAY" run --probe-mode=uprobe --query \
	"from f in function(\"$UW:fay_unw\") select { u: sum(f.unwound) }" -- "$UW" 2 0 >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "f.unwound: only inline probes see a call left by longjmp or a C++ exception as an exit.*--probe-mode=inline" "$T_TMP/err"; then
	pass "f.unwound in uprobe mode: refused with the reason (inline only), no silent 0"
else
	fail "f.unwound in uprobe mode (rc=$rc)" "$(head -c 600 "$T_TMP/out")" "$(head -c 600 "$T_TMP/err")"
fi
timeout 60 "$FAY" query --emit=plan \
	"from s in syscall(\"read\") select { u: sum(s.unwound) }" >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "'unwound' marks the exit of a user function's call" "$T_TMP/err"; then
	pass "f.unwound on a syscall: refused with the reason"
else
	fail "f.unwound on a syscall (rc=$rc)" "$(head -c 600 "$T_TMP/err")"
fi
# (a kernel uretprobe breaks the unwinding of a C++ exception: inline
# only); the function named demangled, with and without its parameters,
# and mangled
check "a C++ exception thrown through 1..7 probed levels, inline" inline "$UC" "fay::unw::Level::call"
check "a C++ exception thrown through 1..7 probed levels, auto (the name with its parameters)" auto "$UC" \
	"fay::unw::Level::call(long, long, long)"
check "a C++ exception thrown through 1..7 probed levels, inline (the mangled name)" inline "$UC" _ZN3fay3unw5Level4callElll
totals "a C++ exception, inline" "$UC" "fay::unw::Level::call"

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
