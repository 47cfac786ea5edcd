#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Hostile query shapes against the real binary and the real collector:
# a where clause that is a chain of 15,000 '+' terms (120 KB), lets that
# expand exponentially, 2,048 conjuncts.  Each must be refused with a
# line:col error (fay query exits 2; POST /api/query answers 400) and
# nothing may crash: the parser bounds the height of every expression
# tree, the planner bounds depth, size and conjuncts after inlining.
. "$(dirname "$0")/../lib/lib.sh"
for f in collector_lib.bash collector_lib.sh; do
	[ -f "$(dirname "$0")/$f" ] && { . "$(dirname "$0")/$f"; break; }
done
command -v python3 >/dev/null || skip_all "needs python3"
cd "$TOP"
export FAY_TRACEFS=tests/golden/tracefs

python3 - "$T_TMP" <<'EOF'
import sys
d = sys.argv[1]
def w(name, where, extra=''):
    open(f'{d}/{name}.fq', 'w').write(
        'from s in syscall("read")\n' + extra + 'where ' + where +
        '\nselect { n: count(), r: max(s.ret) } for 1s\n')
w('chain', 's.pid' + ' + s.tid' * 15000 + ' > 0')
w('unary', '-' * 15000 + 's.pid > 0')
w('parens', '(' * 15000 + 's.pid' + ')' * 15000 + ' > 0')
w('members', 's' + '.pid' * 15000 + ' > 0')
w('calls', 'str(' * 15000 + 's.pid' + ')' * 15000 + ' == "x"')
lets = 'let a0 = s.pid\n' + ''.join(
    f'let a{i} = a{i-1} * 3 + a{i-1}\n' for i in range(1, 60))
w('lets', 'a59 > 0', lets)
t = [f's.pid != {i}' for i in range(2048)]
while len(t) > 1:
    t = [f'({t[i]} && {t[i+1]})' for i in range(0, len(t), 2)]
w('conj', t[0])
# the largest accepted: 255 levels
w('deep_ok', 's.pid' + ' + 1' * 250 + ' > 0')
EOF
ok "the chain is over 90 KB" test "$(stat -c %s "$T_TMP/chain.fq")" -gt 90000

# refused NAME EMIT WANT: fay query exits 2 with WANT in a line:col error
refused() {
	local name=$1 emit=$2 want=$3 rc
	"$FAY" query --emit="$emit" -f "$T_TMP/$name.fq" >"$T_TMP/out" 2>"$T_TMP/err"
	rc=$?
	if [ $rc -eq 2 ] && head -1 "$T_TMP/err" | grep -Eq "^$T_TMP/$name.fq:[0-9]+:[0-9]+: error: .*$want"; then
		pass "$name --emit=$emit: exit 2, line:col error: $want"
	else
		fail "$name --emit=$emit: exit 2 with '$want' (rc=$rc)" "$(head -c 300 "$T_TMP/err")"
	fi
}
for emit in ast plan ir bpf; do
	refused chain "$emit" "nested too deeply \(more than 256 levels"
done
refused chain plan "nested too deeply"
refused unary plan "nested too deeply"
refused parens plan "nested too deeply"
refused members plan "nested too deeply"
refused calls plan "nested too deeply"
refused lets plan "query too large once its lets are expanded"
refused lets bpf "query too large once its lets are expanded"
refused conj plan "too many where conditions \(more than 1024"
"$FAY" query --emit=plan -f "$T_TMP/chain.fq" 2>"$T_TMP/err"
# 'where s.pid' (2 levels: s, .pid) then ' + s.tid' per term: the k-th '+'
# is at column 8k+5 and makes a tree k+2 levels tall: the 255th is refused
ok "the chain error points at the 255th '+' (2:2045)" grep -q "chain.fq:2:2045: error" "$T_TMP/err"
quiet() { "$@" >/dev/null; }
ok "250 terms still plan" quiet "$FAY" query --emit=plan -f "$T_TMP/deep_ok.fq"

# ---- the collector: 400 with the error, and it stays up ----
coll_start "$T_TMP/c.db"
for name in chain parens members lets conj; do
	code=$(curl -s -o "$T_TMP/body" -w '%{http_code}' -X POST --data-binary "@$T_TMP/$name.fq" "$URL/api/query")
	if [ "$code" = 400 ] && python3 -c "
import json; d=json.load(open('$T_TMP/body'))
assert d['line'] >= 1 and d['col'] >= 1 and ('too' in d['error']), d" 2>"$T_TMP/perr"; then
		pass "POST /api/query $name: 400 with a line:col error"
	else
		fail "POST /api/query $name: 400 (got $code)" "$(head -c 300 "$T_TMP/body")" "$(cat "$T_TMP/perr")"
	fi
	ok "the collector is still up after $name" coll_alive
done
code=$(curl -s -o "$T_TMP/body" -w '%{http_code}' -X POST --data-binary 'from s in syscall("read") where s.bogus select count()' "$URL/api/query")
ok "and still answers a plain bad query with 400" test "$code" = 400
coll_stop
done_testing
