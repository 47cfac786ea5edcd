#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes pair every call with its own entry (#8), for real: a
# recursion 1..10 calls deep timed per depth-dependent argument (exact
# counts, each level's time at least what it slept, outer calls longer
# than inner ones); the depth limit (calls deeper than 16 probed levels
# are counted as not timed, the 16 outer levels still exact); a longjmp
# out of 5 probed levels (their exits f.unwound), after which every call
# pairs again; the kernel
# uprobe path on the same recursion, which pairs every call too (its entry
# records are keyed by thread and frame); and the vector registers of
# a function of eight double arguments kept by the probes, with programs
# that touch none (hist of the duration) and one that calls a helper out
# of line (comm).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"
. "$(dirname "$0")/query_lib.bash"
F="function(\"$W:fay_inline_rec\")"
BY="group f by { d: f.arg(0) } into g"

# run WHAT WANT_PY CMD...: fay run --query; the python check WANT_PY gets
# rows (a list of dicts) and err (fay's stderr) and exits 0 when right
run() {
	local what=$1 check=$2
	shift 2
	: >"$T_TMP/out"
	timeout 120 "$FAY" run -q --json --query "$Q" -- "$@" >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
	if [ $RC -eq 0 ] && python3 -c "
import json, sys
rows = [json.loads(l) for l in open('$T_TMP/out') if l.startswith('{')]
err = open('$T_TMP/err').read()
$check" 2>"$T_TMP/py"; then
		pass "$what"
	else
		fail "$what (rc=$RC)" "out: $(head -c 1500 "$T_TMP/out")" \
			"err: $(head -c 600 "$T_TMP/err")" "$(tail -c 600 "$T_TMP/py")"
	fi
}

# ---- recursion 1..10 deep, 200 us per level ---------------------------------
# (a call of arg d contains one of arg d - 1: the shortest of each arg is
# longer than the shortest of the arg below, whatever the load)
Q="from f in $F $BY select { d: g.d, n: g.count(), mn: g.min(f.duration), mx: g.max(f.duration) }"
run "recursion 1..10 deep: each depth's calls counted exactly (3 x (11 - d)), each at least its d x 200 us, outer calls longer than inner ones" "
by = {r['d']: r for r in rows}
assert sorted(by) == list(range(1, 11)), sorted(by)
for d, r in by.items():
    assert r['n'] == 3 * (11 - d), (d, r)
    assert r['mn'] >= d * 200000, (d, r)
    assert d == 1 or r['mn'] > by[d - 1]['mn'], (d, r, by[d - 1])
" "$W" rec 3 10 200

# ---- deeper than the limit ----------------------------------------------------
Q="from f in $F $BY select { d: g.d, n: g.count(), mn: g.min(f.duration) }"
run "recursion 1..20 deep: the 16 outer levels exact, the 20 calls below them counted as not timed" "
by = {r['d']: r['n'] for r in rows}
want = {v: 2 * (min(20, v + 15) - v + 1) for v in range(1, 21)}
assert by == want, (by, want)
assert 'warning: 20 calls not timed: nested deeper than 16 probed calls' in err, err
" "$W" rec 2 20 0

# ---- longjmp out of 5 levels, then normal calls ------------------------------
# (the 5 calls left have no return: each is an exit with f.unwound 1,
# found at the next round's entry; inline_unwind.sh checks those closely)
Q="from f in $F group f by { d: f.arg(0), u: f.unwound } into g select { d: g.d, u: g.u, n: g.count(), mn: g.min(f.duration) }"
run "longjmp out of 5 probed levels (no return: 4 unwound exits each), then a 10-deep recursion: every call of it paired with its own entry" "
by = {(r['d'], r['u']): r for r in rows}
want = [(d, 0) for d in range(1, 11)] + [(d, 1) for d in range(1, 6)]
assert sorted(by) == sorted(want), sorted(by)
for (d, u), r in by.items():
    assert r['n'] == 4 and (u or r['mn'] >= d * 100000), (d, u, r)
" "$W" jump 4 10 5 100

# ---- the kernel's uprobe path on the same recursion ---------------------------
timeout 60 "$FAY" query -q --json --probe-mode=uprobe -c "$W rec 2 3 0" \
	"from f in $F $BY select { d: g.d, n: g.count(), t: g.min(f.duration) }" >"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
grep '^{' "$T_TMP/out" | sed 's/,"t":[0-9]*//' | sort >"$T_TMP/rows"
same "$T_TMP/rows" '{"d":1,"n":6}
{"d":2,"n":4}
{"d":3,"n":2}' "uprobe mode: every call of each recursion is timed (the entry map is keyed by thread and frame)"

# ---- vector registers ------------------------------------------------------------
FP="function(\"$W:fay_inline_fp\")"
Q="from f in $FP select { n: count(), h: hist(f.duration) }"
run "eight double arguments and a double result through entry + exit probes (programs that touch no vector register): every result right" "
assert rows[0]['n'] == 100000, rows
" "$W" fp 100000
Q="from f in $FP group f by { c: f.comm } into g select { c: g.c, n: g.count(), t: g.min(f.duration) }"
run "the same with a helper called out of line (comm): every result right" "
assert rows == [dict(c='inline_work', n=100000, t=rows[0]['t'])], rows
" "$W" fp 100000

done_testing
