#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# trace_id / span_name of function(...) events (issue #8): a libfay
# program (inline_spans, linked with libfay.so) calls one probed function
# from requests of two types ("read", "write"), from a child span
# ("inner"), outside any span and after its span was ended by another
# thread; `group by f.span_name` through fay run must give exactly the
# counts the program itself made, every "read" call a trace of its own;
# uprobe mode refuses the fields, naming them and what to use instead.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/query_lib.bash"
need_root
S=$BUILD/tests/bin/inline_spans
export FAY_SHM_DIR=$T_TMP	# libfay's shm file
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$S" ] || skip_all "inline_spans is not built (make)"
F="function(\"$S:fay_span_fn\")"

run_q() {	# run_q QUERY: fay run --query on inline_spans 300
	timeout 60 "$FAY" run -q --json --query "$1" -- "$S" 300 >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
}

run_q "from f in $F group f by f.span_name into g select { s: g.key, n: g.count() }"
want=$(python3 - "$T_TMP/out" <<'PY'
import json, sys
w = dict(zip(*[iter(next(l for l in open(sys.argv[1]) if l.startswith("read ")).split())] * 2))
rows = [{"s": "", "n": int(w["none"])}, {"s": "inner", "n": int(w["inner"])},
        {"s": "read", "n": int(w["read"])}, {"s": "write", "n": int(w["write"])}]
print("\n".join(json.dumps(r, separators=(",", ":")) for r in rows))
PY
)
same <(grep '^{' "$T_TMP/out") "$want" "group by f.span_name: exact per-type counts (the innermost span; none outside a span or after another thread ended it)"

run_q "from f in $F where f.span_name == \"read\" group f by f.trace_id into g select { t: g.key, n: g.count() }"
rows=$(grep -c '^{' "$T_TMP/out")
ones=$(grep -c '"n":1}$' "$T_TMP/out")
zero=$(grep -c '"t":0,' "$T_TMP/out")
[ $RC -eq 0 ] && [ "$rows" = 100 ] && [ "$ones" = 100 ] && [ "$zero" = 0 ] &&
	pass "trace_id in where and group by: 100 read requests, 100 traces of one call each" ||
	fail "trace_id of read requests (rc=$RC, rows $rows, ones $ones, zero ids $zero)" "$(head -c 400 "$T_TMP/out")" "$(head -c 400 "$T_TMP/err")"

run_q "from f in $F where f.span_name == \"\" select { n: count(), t: max(f.trace_id) }"
same <(grep '^{' "$T_TMP/out") '{"n":225,"t":0}' "outside a span: span_name \"\" and trace_id 0"

# uprobe mode: refused with the field and what to use
for fld in span_name trace_id; do
	fq --json --probe-mode=uprobe -c "$S 3" "from f in $F group f by f.$fld into g select { n: g.count() }"
	[ $RC -ne 0 ] && grep -q "the field '$fld' of a function(...) event is the libfay span current on the calling thread, which only inline probes read: use --probe-mode=inline on a process started with fay run" "$T_TMP/err" &&
		pass "uprobe mode refuses f.$fld with the reason" ||
		fail "uprobe mode refuses f.$fld (rc=$RC)" "$(head -c 400 "$T_TMP/err")"
done
fq --json -c "$S 3" "from f in $F select { n: count(), s: max(f.trace_id) }"
[ $RC -ne 0 ] && grep -q "the field 'trace_id' of a function(...) event" "$T_TMP/err" &&
	pass "auto without the runtime (so a uprobe): the same refusal" ||
	fail "auto without the runtime (rc=$RC)" "$(head -c 400 "$T_TMP/err")"
done_testing
