#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a fixed span workload (agent_tools/span_golden.c: remote parents,
# children, events, string and integer tags, strings at the edges, a
# truncated span, an unsampled request, a malformed traceparent, BlkKin
# records) leaves in the collector's SQLite store, through a real agent
# and collector, read back from /api/v2/traces: the same content as
# tests/golden/spans/span_golden.json (names, tags, events, fixed ids,
# parentage; random ids as labels, see agent_tools/span_canon.py), and
# timestamps and durations that make sense (within the run, annotations
# within their span, children within their parent).  The golden file was
# made with libfay as it was before the span path was cut down (issue
# 21); FAY_GOLDEN_UPDATE=1 rewrites it from this build.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/agent_tools/lib.sh"
command -v python3 >/dev/null || skip_all "needs python3"
"$FAY" collector --help >/dev/null 2>&1 || skip_all "fay collector not built"
[ -x "$TOOLS/span_golden" ] || skip_all "span_golden not built (make O=... agent-tests)"
GOLDEN=$TOP/tests/golden/spans/span_golden.json

DB=$T_TMP/fay.db
PORT=$(free_port)
HTTP=$(free_port)
"$FAY" collector --listen "127.0.0.1:$PORT" --http "127.0.0.1:$HTTP" --db "$DB" \
	--otlp-http off --otlp-grpc off 2>>"$T_TMP/coll.log" &
T_PIDS+=($!)
ok "collector up" wait_for 30 curl -sf "http://127.0.0.1:$HTTP/health"
start_agent

FAY_SHM_DIR=$SHM FAY_SAMPLE=1 "$TOOLS/span_golden" --blkin >"$T_TMP/run.out" 2>>"$T_TMP/run.err"
ok "the workload runs" test $? -eq 0
before=$(sed -n 's/^before //p' "$T_TMP/run.out")
after=$(sed -n 's/^after //p' "$T_TMP/run.out")

# 11 libfay spans (the unsampled request records none) + the BlkKin
# trace's 2 (its records merged per span id, maybe over several batches:
# the content is polled until it is whole).
traces() {
	curl -sf "http://127.0.0.1:$HTTP/api/v2/traces?limit=100&lookback=86400000" \
		>"$T_TMP/traces.json" &&
	[ "$(python3 -c 'import json,sys; print(sum(len(t) for t in json.load(sys.stdin)))' \
		<"$T_TMP/traces.json")" -ge "$1" ]
}
canon() {
	python3 "$(dirname "$0")/agent_tools/span_canon.py" "$before" "$after" \
		<"$T_TMP/traces.json" >"$T_TMP/canon.json" 2>"$T_TMP/canon.err"
}
same() { traces 13 && { canon; cmp -s "$GOLDEN" "$T_TMP/canon.json"; }; }
ok "all spans stored" wait_for 30 traces 13
if [ "${FAY_GOLDEN_UPDATE:-}" = 1 ]; then
	sleep 2     # only when writing the golden file: let every batch in
	traces 13
	canon
	mkdir -p "$(dirname "$GOLDEN")"
	cp "$T_TMP/canon.json" "$GOLDEN"
	diag "wrote $GOLDEN"
fi
ok "stored content identical to the golden file" wait_for 30 same ||
	diff -u "$GOLDEN" "$T_TMP/canon.json" | head -40 | sed 's/^/# /'
canon
rc=$?
ok "timestamps within the run, annotations within spans, children within parents" \
	test $rc -eq 0 || sed 's/^/# /' "$T_TMP/canon.err"
stop_agent

[ $T_FAILED -eq 0 ] || show_logs 40
done_testing
