#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes on a library loaded later (issue 19 item 3): the runtime
# hooks the loader's r_brk and arms a site of a shared object when a
# dlopen() maps it, before its code runs, and forgets it when dlclose()
# unmaps it.  A C program that dlopen()s, calls and dlclose()s a library
# 30 times (fay run and -p PID, every mode), and python3 importing bz2,
# lzma and zlib (extension modules, dlopen()ed, the first two loading
# their library with them): every mode counts every call (the truth for
# the loop, the kernel uprobe's count for python), the program's exit
# status and output are those of an unprobed run.  A library copied to a
# name without ".so" is known for one by its ELF (shared_object()).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/inline_lib.bash"
LOOP=$BUILD/tests/bin/dlopen_loop
LIB=$(cd "$BUILD/tests/bin" && pwd)/libinline_lib.so
PY=/usr/bin/python3
[ -x "$LOOP" ] && [ -e "$LIB" ] || skip_all "dlopen_loop is not built (make)"
ROUNDS=30 CALLS=100
want=$("$LOOP" "$LIB" $ROUNDS $CALLS) || { fail "dlopen_loop runs unprobed"; done_testing; exit 1; }
FN="from f in function(\"$LIB:fay_lib_fn\") select { n: count() }"

# answer FILE: the n of the last JSON row of FILE
answer() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().split("\n")[-2])["n"])' "$1" 2>/dev/null; }

# ---- fay run: loaded, unloaded and loaded again 30 times ----------------------------
for m in uprobe inline auto; do
	timeout 120 nice -n 10 "$FAY" run --json --probe-mode=$m --query "$FN" -- \
		"$LOOP" "$LIB" $ROUNDS $CALLS >"$T_TMP/r.out" 2>"$T_TMP/r.err"
	rc=$?
	out=$(head -1 "$T_TMP/r.out")
	n=$(tail -1 "$T_TMP/r.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["n"])' 2>/dev/null)
	if [ $rc -ne 0 ] || [ "$out" != "$want" ]; then
		fail "fay run, $m: exit $rc, output '$out' (unprobed: '$want')" "$(cat "$T_TMP/r.err")"
	elif [ "$n" != $((ROUNDS * CALLS)) ]; then
		fail "fay run, $m: count '$n', the truth $((ROUNDS * CALLS))" "$(cat "$T_TMP/r.err")"
	elif [ $m != uprobe ] && ! grep -q "inline (fay_lib_fn: armed when .* is loaded (dlopen)" "$T_TMP/r.err"; then
		fail "fay run, $m: not inline" "$(cat "$T_TMP/r.err")"
	else
		pass "fay run, $m: $ROUNDS dlopen/dlclose rounds, $n calls counted of $((ROUNDS * CALLS)), output and exit status those of an unprobed run"
	fi
done

# ---- a library named without ".so" (a plugin): the ELF says it is one ------------------
PLUG=$T_TMP/fay_plugin.bin
cp "$LIB" "$PLUG"
for m in inline auto; do
	timeout 120 nice -n 10 "$FAY" run --json --probe-mode=$m \
		--query "from f in function(\"$PLUG:fay_lib_fn\") select { n: count() }" -- \
		"$LOOP" "$PLUG" $ROUNDS $CALLS >"$T_TMP/r.out" 2>"$T_TMP/r.err"
	rc=$?
	out=$(head -1 "$T_TMP/r.out")
	n=$(tail -1 "$T_TMP/r.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["n"])' 2>/dev/null)
	if [ $rc -ne 0 ] || [ "$out" != "$want" ]; then
		fail "a library named $(basename "$PLUG"), $m: exit $rc, output '$out' (unprobed: '$want')" "$(cat "$T_TMP/r.err")"
	elif [ "$n" != $((ROUNDS * CALLS)) ]; then
		fail "a library named $(basename "$PLUG"), $m: count '$n', the truth $((ROUNDS * CALLS))" "$(cat "$T_TMP/r.err")"
	elif ! grep -q "inline (fay_lib_fn: armed when .* is loaded (dlopen)" "$T_TMP/r.err"; then
		fail "a library named $(basename "$PLUG"), $m: not armed at its load" "$(cat "$T_TMP/r.err")"
	else
		pass "a library named $(basename "$PLUG") (no .so), $m: armed at each of $ROUNDS loads, $n calls of $((ROUNDS * CALLS))"
	fi
done

# ---- -p PID: a process fay did not start, the library not loaded yet -------------------
for m in uprobe inline auto; do
	go=$T_TMP/go.$m
	"$LOOP" "$LIB" $ROUNDS $CALLS "$go" >"$T_TMP/p.out" 2>&1 & wpid=$!
	go_query "$go" --json --probe-mode=$m -p $wpid \
		"from f in process($wpid).function(\"$LIB:fay_lib_fn\") select { n: count() }"
	rc=$WRC
	n=$(answer "$T_TMP/q.out")
	if [ $rc -ne 0 ] || [ "$(cat "$T_TMP/p.out")" != "$want" ]; then
		fail "-p, $m: exit $rc, output '$(cat "$T_TMP/p.out")'" "$(cat "$T_TMP/q.err")"
	elif [ "$n" != $((ROUNDS * CALLS)) ]; then
		fail "-p, $m: count '$n', the truth $((ROUNDS * CALLS))" "$(cat "$T_TMP/q.out" "$T_TMP/q.err")"
	elif [ $m = inline ] && ! grep -q "armed when .* is loaded (dlopen)" "$T_TMP/q.err"; then
		fail "-p, $m: not armed at the load" "$(cat "$T_TMP/q.err")"
	else
		pass "-p PID, $m: the library loaded after the query attached, $ROUNDS rounds: $n calls of $((ROUNDS * CALLS)), the process's output and exit status right"
	fi
done

# ---- python3: extension modules and their libraries, dlopen()ed at import ---------------
if [ -x $PY ]; then
	head -c 100000 /dev/urandom | base64 >"$T_TMP/in.txt"
	# pycase NAME LIB:FN MODULE: MODULE.compress() over 20 pieces
	pycase() {
		local name=$1 fn=$2 mod=$3 m rc n up=
		local prog="
import $mod, sys
d = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(b''.join($mod.compress(d[i:i+5000]) for i in range(0, 100000, 5000)))"
		if ! timeout 60 $PY -c "$prog" "$T_TMP/in.txt" "$T_TMP/ref.out"; then
			fail "python3 $name: runs unprobed"
			return
		fi
		for m in uprobe inline auto; do
			rm -f "$T_TMP/py.out"
			timeout 120 nice -n 10 "$FAY" run --json --probe-mode=$m \
				--query "from f in function(\"$fn\") select { n: count() }" -- \
				$PY -c "$prog" "$T_TMP/in.txt" "$T_TMP/py.out" >"$T_TMP/y.out" 2>"$T_TMP/y.err"
			rc=$?
			n=$(answer "$T_TMP/y.out")
			[ $m = uprobe ] && up=$n
			if [ $rc -ne 0 ] || ! cmp -s "$T_TMP/py.out" "$T_TMP/ref.out"; then
				fail "python3 $name, $m: exit $rc or output differs" "$(cat "$T_TMP/y.err")"
			elif [ -z "$n" ] || [ "$n" -le 0 ] || [ "$n" != "$up" ]; then
				fail "python3 $name, $m: count '$n', the uprobe's '$up'" "$(cat "$T_TMP/y.err")"
			elif [ $m != uprobe ] && ! grep -q "^fay: pid [0-9]*: inline (" "$T_TMP/y.err"; then
				fail "python3 $name, $m: not inline" "$(cat "$T_TMP/y.err")"
			else
				pass "python3 $name, $m: output identical, count $n$([ $m = uprobe ] || echo " = the uprobe's")"
			fi
		done
	}
	pycase "bz2 (libbz2 dlopen()ed with _bz2)" libbz2:BZ2_bzCompress bz2
	pycase "lzma (liblzma dlopen()ed with _lzma)" liblzma:lzma_code lzma
	pycase "zlib (the extension module dlopen()ed, libz mapped at start)" libz:deflate zlib
fi
done_testing
