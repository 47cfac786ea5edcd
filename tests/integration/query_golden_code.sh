#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay query --emit=ir and --emit=bpf against expected dumps: the code the
# engine generates and the bytecode after register allocation, without
# root and without loading anything.
#
#   tests/golden/engine/NAME.q   with NAME.ir and NAME.bpf
#
# Tracepoint formats come from tests/golden/tracefs (FAY_TRACEFS), so the
# dumps do not depend on the running kernel.  FAY_GOLDEN_UPDATE=1 rewrites
# the expected files from the current output (review the diff!).
. "$(dirname "$0")/../lib/lib.sh"
cd "$TOP"
export FAY_TRACEFS=tests/golden/tracefs
UPDATE=${FAY_GOLDEN_UPDATE:-0}
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }

# As an unprivileged user when we are root: --emit must not need root.
AS=()
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	AS=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	"${AS[@]}" test -x "$FAY" || AS=()
fi

n=0
for q in tests/golden/engine/*.q; do
	base=${q%.q}
	for emit in ir bpf; do
		"${AS[@]}" "$FAY" query --emit=$emit -f "$q" >"$T_TMP/out" 2>"$T_TMP/err"
		rc=$?
		[ "$UPDATE" = 1 ] && [ $rc -eq 0 ] && cp "$T_TMP/out" "$base.$emit"
		if [ $rc -eq 0 ] && diff -u "$base.$emit" "$T_TMP/out" >"$T_TMP/diff"; then
			pass "$q --emit=$emit${AS:+ (unprivileged)}"
		else
			fail "$q --emit=$emit (rc=$rc)" "$(head -c 3000 "$T_TMP/diff")" "$(head -5 "$T_TMP/err")"
		fi
	done
	n=$((n + 1))
done
ok "at least 5 golden queries ($n)" [ $n -ge 5 ]

# The query's own code carries its line:col (the select is on line 5).
"$FAY" query --emit=ir -f tests/golden/engine/openat_tuple.q >"$T_TMP/ir"
ok "--emit=ir tags instructions with @LINE:COL" grep -q '@5:' "$T_TMP/ir"
# The stages agree: a paired source (ret, duration) has two programs.
"$FAY" query --emit=ir -f tests/golden/engine/read_latency.q >"$T_TMP/ir"
ok "a paired source has an entry and an exit program" \
	[ "$(grep -c '^; .* program:' "$T_TMP/ir")" -eq 2 ]
# Kernel functions: --emit shows the code even where the kernel allows
# neither fentry nor kprobes (then for fentry/fexit, and it says so).
"${AS[@]}" "$FAY" query --emit=ir 'from f in kernel.function("vfs_read") select { n: count(), b: sum(f.ret) }' >"$T_TMP/ir" 2>"$T_TMP/err"
ok "--emit=ir of kernel.function works on this kernel${AS:+ (unprivileged)}" [ $? -eq 0 ]
ok "--emit=ir of kernel.function: entry and exit programs" [ "$(grep -c '^; .* program:' "$T_TMP/ir")" -eq 2 ]
# --emit needs a valid query: errors as usual.
"$FAY" query --emit=ir 'from s in syscall("read") select s.nope' >/dev/null 2>"$T_TMP/err"
ok "--emit=ir of a bad query exits 2" [ $? -eq 2 ]
ok "--emit=ir of a bad query says line:col" grep -q '^<query>:1:' "$T_TMP/err"
done_testing
