#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Real programs under fay run (issue 19): xz, bzip2, sqlite3, openssl
# dgst and python3 with zlib, bz2 and lzma, each with a count() query on
# a function of the library doing its work, in auto, inline and uprobe
# mode.  The program's output file must be byte-identical to an unprobed
# run's, and every mode must count what the kernel's uprobe counts.  A
# site inline mode refuses must be refused with the reason, and auto
# mode must then count it exactly with a uprobe; a library python loads
# with dlopen later is armed when it is loaded, not refused.
. "$(dirname "$0")/../lib/lib.sh"
need_root
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
PY=/usr/bin/python3
for p in xz bzip2 sqlite3 openssl $PY; do
	command -v "$p" >/dev/null || skip_all "$p is not installed"
done
D=$T_TMP/d
mkdir -p "$D"
head -c 200000 /dev/urandom | base64 >"$D/in.txt"

# case NAME LIB:FN OUT CMD...: OUT is the file CMD writes
case_() {
	local name=$1 fn=$2 out=$3 m rc n a err
	shift 3
	local -A cnt=()
	rm -f "$out"
	if ! timeout 120 "$@" >/dev/null 2>"$T_TMP/ref.err" || [ ! -s "$out" ]; then
		fail "$name: runs unprobed" "$(cat "$T_TMP/ref.err")"
		return
	fi
	mv "$out" "$T_TMP/ref.out"
	for m in uprobe auto inline; do
		rm -f "$out"
		timeout 120 "$FAY" run --json --probe-mode=$m \
			--query "from f in function(\"$fn\") select { n: count() }" -- "$@" \
			>"$T_TMP/q.out" 2>"$T_TMP/q.err"
		rc=$?
		if [ $m = inline ] && [ $rc -ne 0 ] &&
		   err=$(grep -m1 "^error: --probe-mode=inline: pid [0-9]*: .*${fn#*:}" "$T_TMP/q.err"); then
			pass "$name, inline: refused with the reason (${err:0:160})"
			continue
		fi
		a=$(tail -1 "$T_TMP/q.out")
		n=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["n"])' "$a" 2>/dev/null)
		if [ $rc -ne 0 ] || [ -z "$n" ]; then
			fail "$name, $m: exit $rc, answer '$a'" "$(cat "$T_TMP/q.err")"
			continue
		fi
		cnt[$m]=$n
		if ! cmp -s "$out" "$T_TMP/ref.out"; then
			fail "$name, $m: the output differs from the unprobed run's"
		elif [ "$n" -le 0 ] || [ "$n" != "${cnt[uprobe]}" ]; then
			fail "$name, $m: count $n, the uprobe's ${cnt[uprobe]}" "$(cat "$T_TMP/q.err")"
		else
			pass "$name, $m: output identical, count $n$([ $m = uprobe ] || echo " = the uprobe's") ($(grep -m1 -o 'inline\|uprobe' "$T_TMP/q.err" | head -1))"
		fi
	done
}

case_ xz liblzma:lzma_code "$D/in.txt.xz" xz -k -f "$D/in.txt"
case_ bzip2 libbz2:BZ2_bzCompress "$D/in.txt.bz2" bzip2 -k -f "$D/in.txt"
case_ sqlite3 libsqlite3:sqlite3_step "$D/sq.out" sqlite3 :memory: -cmd ".output $D/sq.out" \
	"create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 from c where x < 500) insert into t select x, x * x from c; select count(*), sum(b) from t; select a from t where a % 97 = 0;"
case_ "openssl dgst" libcrypto:EVP_DigestUpdate "$D/dg" openssl dgst -sha256 -out "$D/dg" "$D/in.txt"
case_ "python3 zlib" libz:deflateInit2_ "$D/pz" $PY -c "
import zlib, sys
d = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'w').write(' '.join(str(zlib.crc32(zlib.compress(d[i:i+9000]))) for i in range(0, 300000, 3000)))" "$D/in.txt" "$D/pz"
case_ "python3 bz2 (dlopen)" libbz2:BZ2_bzCompress "$D/pb" $PY -c "
import bz2, sys
d = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(b''.join(bz2.compress(d[i:i+5000]) for i in range(0, 100000, 5000)))" "$D/in.txt" "$D/pb"
case_ "python3 lzma (dlopen)" liblzma:lzma_code "$D/pl" $PY -c "
import lzma, sys
d = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(b''.join(lzma.compress(d[i:i+5000]) for i in range(0, 100000, 5000)))" "$D/in.txt" "$D/pl"
done_testing
