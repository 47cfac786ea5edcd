#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes on real prologues that start with a branch (#19 item 2):
# libz's deflate (python3's zlib) and libcrypto's EVP_DigestUpdate
# (openssl dgst) both begin with a null check (test; je), which the
# patcher relocates into the trampoline.  Each program runs unprobed,
# under fay run in inline mode and in uprobe mode, with an entry + exit
# query: its output byte-identical in the three runs, the counts of the
# inline run equal to the kernel uprobe's, and the bytes hashed by
# EVP_DigestUpdate (the sum of its length argument) equal to the file's
# size.
. "$(dirname "$0")/../lib/lib.sh"
need_root
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
PY=/usr/bin/python3
OPENSSL=$(command -v openssl) || skip_all "no openssl"
[ -x $PY ] || skip_all "no $PY"
$PY -c 'import zlib' 2>/dev/null || skip_all "$PY has no zlib"

# 3 MB of text that compresses, the same in every run
$PY - "$T_TMP/data" <<'PY'
import random, sys
r = random.Random(19)
words = [''.join(r.choice('abcdefghij') for _ in range(r.randint(2, 9))) for _ in range(2000)]
with open(sys.argv[1], 'w') as f:
    n = 0
    while n < 3000000:
        w = r.choice(words) + (' ' if r.random() < 0.9 else '\n')
        f.write(w)
        n += len(w)
PY
SIZE=$(stat -c %s "$T_TMP/data")
cat >"$T_TMP/z.py" <<'PY'
import sys, zlib
data = open(sys.argv[1], 'rb').read()
c = zlib.compressobj(6)
with open(sys.argv[2], 'wb') as out:
    for i in range(0, len(data), 65536):
        out.write(c.compress(data[i:i + 65536]))
    out.write(c.flush())
PY

# probe MODE FN SELECT OUT CMD...: fay run --query on CMD (which writes
# OUT), answer in $T_TMP/MODE.json, fay's stderr in $T_TMP/MODE.err
probe() {
	local mode=$1 fn=$2 sel=$3 out=$4
	shift 4
	rm -f "$out"
	timeout 120 nice -n 10 "$FAY" run -q --json --probe-mode="$mode" \
		--query "from f in function(\"$fn\") select { $sel }" -- "$@" \
		>"$T_TMP/$mode.json" 2>"$T_TMP/$mode.err"
	echo $? >"$T_TMP/$mode.rc"
}

# check WHAT FN SELECT PYCHECK CMD... (CMD's output file is $T_TMP/out.MODE)
check() {
	local what=$1 fn=$2 sel=$3 pycheck=$4
	shift 4
	local cmd=("$@")
	timeout 120 "${cmd[@]//@OUT@/$T_TMP/out.none}" >/dev/null 2>"$T_TMP/none.err"
	for m in inline uprobe; do
		probe $m "$fn" "$sel" "$T_TMP/out.$m" "${cmd[@]//@OUT@/$T_TMP/out.$m}"
	done
	if [ "$(cat "$T_TMP/inline.rc")" = 0 ] && [ "$(cat "$T_TMP/uprobe.rc")" = 0 ] &&
		cmp -s "$T_TMP/out.none" "$T_TMP/out.inline" &&
		cmp -s "$T_TMP/out.none" "$T_TMP/out.uprobe" && [ -s "$T_TMP/out.none" ]; then
		pass "$what: output byte-identical unprobed, inline and uprobe"
	else
		fail "$what: output byte-identical unprobed, inline and uprobe" \
			"rc inline $(cat "$T_TMP/inline.rc") uprobe $(cat "$T_TMP/uprobe.rc")" \
			"inline: $(head -c 600 "$T_TMP/inline.err")" \
			"uprobe: $(head -c 600 "$T_TMP/uprobe.err")" \
			"$(ls -l "$T_TMP"/out.* 2>&1)"
	fi
	if $PY -c "
import json
def rows(m):
    return [json.loads(l) for l in open('$T_TMP/%s.json' % m) if l.startswith('{')]
inl, upr = rows('inline'), rows('uprobe')
assert len(inl) == 1 and len(upr) == 1, (inl, upr)
for x in inl + upr:	# every call timed (entry + exit)
    assert sum(b['count'] for b in x.pop('t')) == x['n'], x
assert inl == upr, (inl, upr)
r = inl[0]
$pycheck" 2>"$T_TMP/py"; then
		pass "$what: inline counts = uprobe counts ($(head -c 200 "$T_TMP/inline.json"))"
	else
		fail "$what: inline counts = uprobe counts" "inline: $(head -c 300 "$T_TMP/inline.json")" \
			"uprobe: $(head -c 300 "$T_TMP/uprobe.json")" "$(tail -c 600 "$T_TMP/py")"
	fi
}

# The prologues this test is about: the patcher must have a branch to move.
first_insns() {	# LIB FN: the first 3 instructions of FN in LIB
	local lib
	lib=$($PY -c "import ctypes.util,sys; print(ctypes.util.find_library(sys.argv[1]))" "$1")
	lib=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ { print $NF; exit }')
	gdb -batch -ex "x/3i '$2'" "$lib" 2>/dev/null
}
if command -v gdb >/dev/null; then
	for lf in z:deflate crypto:EVP_DigestUpdate; do
		ins=$(first_insns "${lf%%:*}" "${lf#*:}")
		case "$ins" in
		*j[a-z]*) pass "lib${lf%%:*}'s ${lf#*:} has a branch in its first instructions" ;;
		*) fail "lib${lf%%:*}'s ${lf#*:} has a branch in its first instructions" "$ins" ;;
		esac
	done
fi

check "python3 zlib: libz:deflate" "libz:deflate" "n: count(), t: hist(f.duration)" \
	"assert r['n'] > 40, r" $PY "$T_TMP/z.py" "$T_TMP/data" @OUT@
check "openssl dgst: libcrypto:EVP_DigestUpdate" "libcrypto:EVP_DigestUpdate" \
	"n: count(), bytes: sum(f.arg(2)), t: hist(f.duration)" \
	"assert r['n'] > 40 and r['bytes'] == $SIZE, (r, $SIZE)" \
	"$OPENSSL" dgst -sha256 -out @OUT@ "$T_TMP/data"

done_testing
