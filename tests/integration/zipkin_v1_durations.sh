#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Zipkin's duration rule for BlkKin spans (common/zipkin_v1.h), on a real
# collector: partial records sent over the wire protocol, the merged
# spans read back through the Zipkin API (GET /api/v2/trace).  A span
# whose begin and end annotations are both known lasts at least 1 us
# (zipkin2.Span: "durations of less than one microsecond must be rounded
# up to 1"; 0 would read as "no duration"): a shared server half with sr
# and ss in the same nanosecond, a span of 400 ns inside one microsecond,
# a client span with cs = cr.  An end before its begin (a clock step) has
# no duration, as zipkin2's builder makes a negative one; a longer span
# keeps its microseconds.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"

ID=0123456789abcdef0123456789abcdef
ok "collector starts" coll_start "$T_TMP/fay.db" || { done_testing; exit; }
ok "BlkKin parts sent and ACKed" "$CLIENT" -a "127.0.0.1:$WP" -i "$ID" -s 7 partial-instant
TRACE=$(printf '%s%016x' "${ID:0:16}" 7)
got() { curl -sf "$URL/api/v2/trace/$TRACE" >"$T_TMP/trace.json" &&
	[ "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$T_TMP/trace.json")" = 6 ]; }
ok "the trace is readable: 6 spans" wait_for 30 got

# span ID KIND: "timestamp duration" of that span ("-" for an absent duration)
span() {
	python3 - "$T_TMP/trace.json" "$1" "$2" <<'PY'
import json, sys
for s in json.load(open(sys.argv[1])):
    if s["id"] == "%016x" % int(sys.argv[2], 16) and s.get("kind") == sys.argv[3]:
        print(s["timestamp"], s.get("duration", "-"), "shared" if s.get("shared") else "")
PY
}
t0=$(span 20 CLIENT | cut -d' ' -f1)
rel() { local s; s=$(span "$1" "$2"); set -- $s; echo "$(( $1 - t0 )) $2${3:+ $3}"; }
ok "cs..cr: the client span lasts 500 us" [ "$(rel 20 CLIENT)" = "0 500" ]
ok "sr = ss in one nanosecond: the shared server half lasts 1 us, not none" \
	[ "$(rel 20 SERVER)" = "100 1 shared" ]
ok "sr..ss 400 ns inside one microsecond: 1 us" [ "$(rel 21 SERVER)" = "1000 1" ]
ok "cs = cr: 1 us" [ "$(rel 22 CLIENT)" = "2000 1" ]
ok "cr 1 us before cs (a clock step): no duration" [ "$(rel 23 CLIENT)" = "3001 -" ]
ok "sr..ss 2.5 us from the start of a microsecond: 2 us" [ "$(rel 24 SERVER)" = "4000 2" ]
[ "$T_FAILED" = 0 ] || diag "$(cat "$T_TMP/trace.json")"
coll_stop
done_testing
