#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# FayQL golden tests: needs no root and no kernel.
#
#   tests/golden/query/NAME.q    with NAME.ast / NAME.plan (stdout, exit 0)
#                                or NAME.ast.err / NAME.plan.err (stderr, exit 2)
#   tests/golden/errors/NAME.q   with NAME.err: the exact diagnostic, exit 2
#
# Tracepoint formats come from tests/golden/tracefs (FAY_TRACEFS), so the
# results do not depend on the running kernel.  FAY_GOLDEN_UPDATE=1
# rewrites the expected files from the current output (review the diff!).
. "$(dirname "$0")/../lib/lib.sh"
cd "$TOP"
export FAY_TRACEFS=tests/golden/tracefs
UPDATE=${FAY_GOLDEN_UPDATE:-0}

[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }

# golden_one FILE EMIT: compare fay query --emit=EMIT -f FILE
golden_one() {
	local q=$1 emit=$2 base=${1%.q} out err rc
	out=$T_TMP/out err=$T_TMP/err
	"$FAY" query --emit="$emit" -f "$q" >"$out" 2>"$err"
	rc=$?
	if [ "$UPDATE" = 1 ]; then
		rm -f "$base.$emit" "$base.$emit.err"
		if [ $rc -eq 0 ]; then cp "$out" "$base.$emit"; else cp "$err" "$base.$emit.err"; fi
	fi
	if [ -f "$base.$emit" ]; then
		if [ $rc -eq 0 ] && diff -u "$base.$emit" "$out" >"$T_TMP/diff"; then
			pass "$q --emit=$emit"
		else
			fail "$q --emit=$emit (rc=$rc)" "$(head -c 3000 "$T_TMP/diff")" "$(head -5 "$err")"
		fi
	elif [ -f "$base.$emit.err" ]; then
		if [ $rc -eq 2 ] && diff -u "$base.$emit.err" "$err" >"$T_TMP/diff"; then
			pass "$q --emit=$emit fails as expected"
		else
			fail "$q --emit=$emit error (rc=$rc, want 2)" "$(head -c 3000 "$T_TMP/diff")"
		fi
	else
		fail "$q: no $base.$emit or $base.$emit.err"
	fi
	# the JSON form of whatever succeeded must parse
	if [ $rc -eq 0 ]; then
		if "$FAY" query --emit="$emit" --json -f "$q" | python3 -m json.tool >/dev/null 2>"$T_TMP/jerr"; then
			pass "$q --emit=$emit --json is valid JSON"
		else
			fail "$q --emit=$emit --json is valid JSON" "$(cat "$T_TMP/jerr")"
		fi
	fi
}

n_query=0
for q in tests/golden/query/*.q; do
	golden_one "$q" ast
	golden_one "$q" plan
	n_query=$((n_query + 1))
done

n_err=0
for q in tests/golden/errors/*.q; do
	base=${q%.q}
	"$FAY" query --emit=plan -f "$q" >"$T_TMP/out" 2>"$T_TMP/err"
	rc=$?
	[ "$UPDATE" = 1 ] && cp "$T_TMP/err" "$base.err"
	if [ $rc -eq 2 ] && [ ! -s "$T_TMP/out" ] && diff -u "$base.err" "$T_TMP/err" >"$T_TMP/diff"; then
		pass "error $q"
	else
		fail "error $q (rc=$rc, want 2)" "$(head -c 2000 "$T_TMP/diff")"
	fi
	n_err=$((n_err + 1))
done
ok "at least 30 bad queries ($n_err)" [ "$n_err" -ge 30 ]

# The same query given as an argument: source '<query>', same message.
"$FAY" query --emit=plan 'from s in syscall("read") select s.arg(9)' 2>"$T_TMP/err"
rc=$?
ok "argument query error exits 2" [ $rc -eq 2 ]
ok "argument query error names <query>:1:40" grep -q '^<query>:1:40: error: arg(9) is out of range' "$T_TMP/err"

# Other command-line behaviour.
"$FAY" query --help >"$T_TMP/help"
ok "--help exits 0" [ $? -eq 0 ]
for s in NAME SYNOPSIS DESCRIPTION OPTIONS EXAMPLES "EXIT STATUS" ENVIRONMENT FILES docs/QUERY.md; do
	ok "--help has $s" grep -q "$s" "$T_TMP/help"
done
# Running is tested in tests/integration/query_run.sh (root); here only
# that --emit=ir|bpf work without loading anything.
"$FAY" query --emit=bpf 'from s in syscall("read") select count()' >/dev/null 2>&1
ok "--emit=bpf exits 0" [ $? -eq 0 ]
"$FAY" query --emit=ir 'from s in syscall("read") select count()' >/dev/null 2>&1
ok "--emit=ir exits 0" [ $? -eq 0 ]
"$FAY" query --emit=nope 'x' 2>/dev/null
ok "bad --emit exits 2" [ $? -eq 2 ]
"$FAY" query 2>/dev/null
ok "no query exits 2" [ $? -eq 2 ]
"$FAY" query --emit=ast -f /nonexistent/q 2>/dev/null
ok "missing file exits 2" [ $? -eq 2 ]
echo 'from s in syscall("read") select count()' | "$FAY" query --emit=plan -f - >/dev/null
ok "-f - reads standard input" [ $? -eq 0 ]

# Never a crash: mutated golden queries (bytes dropped, swapped, inserted)
# must end with 0, 1 or 2, never a signal.
python3 - "$T_TMP/fuzz" tests/golden/query/*.q tests/golden/errors/*.q <<'PY'
import os, random, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
random.seed(1234)
srcs = [open(p, 'rb').read() for p in sys.argv[2:]]
alphabet = b'(){}.,:"\\=<>!&|+-*/%^~#0123456789xsmhu \n\t\x00\xff' + b'abcdefghijklmnopqrstuvwxyz_'
for i in range(150):
    b = bytearray(random.choice(srcs))
    for _ in range(random.randint(1, 6)):
        op = random.randint(0, 2)
        pos = random.randint(0, max(0, len(b) - 1))
        if op == 0 and b:
            del b[pos:pos + random.randint(1, 8)]
        elif op == 1:
            b[pos:pos] = bytes(random.choice(alphabet) for _ in range(random.randint(1, 4)))
        elif b:
            j = random.randint(0, len(b) - 1)
            b[pos], b[j] = b[j], b[pos]
    open(os.path.join(out, '%03d.q' % i), 'wb').write(bytes(b))
PY
# a sanitized fay reports memory errors with exit 99, never as 1 or 2
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=99
export UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}exitcode=99
crashes=0
for q in "$T_TMP"/fuzz/*.q; do
	for emit in ast plan; do
		"$FAY" query --emit=$emit -f "$q" >/dev/null 2>&1
		rc=$?
		if [ $rc -gt 2 ]; then
			crashes=$((crashes + 1))
			diag "exit $rc on $q (--emit=$emit): $(od -c "$q" | head -3)"
		fi
	done
done
ok "150 mutated queries: no crash" [ $crashes -eq 0 ]

diag "$n_query golden queries, $n_err bad queries"
done_testing
