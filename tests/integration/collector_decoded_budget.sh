#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A decoded request counts against --max-memory too, not only its body:
# the spans, strings and arrays a request decodes into (its arena,
# struct zarena with a budget) are taken chunk by chunk while it is
# decoded and held until its spans are committed.  A request of 2048
# spans (16 traces, 8 attributes and 2 events a span) decodes into ~6.5
# MiB, 3.7 times its OTLP/JSON body and 9 times its protobuf one (a
# size for which --max-memory's least, 1 MiB, is below the test's step
# below); before,
# none of it was charged, so connections could make the collector hold
# several times --max-memory.
#   - with the default budget each encoding is stored, and the peak
#     charged is more than the connection, the body's largest step
#     (old and new buffer, at most 2 x its length) and 64 KiB: the
#     decoded request is in it;
#   - with --max-memory just above the connection and that step, the
#     body fits, its decoding does not: 503 with Retry-After (busy, as a
#     body that does not fit), counted, nothing stored, every byte given
#     back, and a small request right after is stored.
# OTLP/HTTP JSON and protobuf, and Zipkin v2 JSON.  OTLP/gRPC decodes
# through the same otlp_ingest() (UNAVAILABLE in the same case).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"

CONN=$((64 << 10))
python3 "$(dirname "$0")/otlp_tools/bodies.py" 2048 "$T_TMP/big" 1 || { fail "bodies.py"; done_testing; exit; }
python3 "$(dirname "$0")/otlp_tools/bodies.py" 16 "$T_TMP/small" 2 || { fail "bodies.py"; done_testing; exit; }

# post KIND FILE: the HTTP status of one POST (KIND: json, pb, zipkin)
post() {
	local type=application/json url=http://127.0.0.1:$OP/v1/traces
	[ "$1" = pb ] && type=application/x-protobuf
	[ "$1" = zipkin ] && url=$URL/api/v2/spans
	curl -s -D "$T_TMP/h" -o "$T_TMP/resp" -w '%{http_code}' -H "Content-Type: $type" \
		--data-binary @"$2" "$url"
}

OP=$(free_port)
for kind in json pb zipkin; do
	ext=$kind
	[ "$kind" = zipkin ] && ext=zipkin.json
	len=$(stat -c %s "$T_TMP/big.$ext")
	step=$((CONN + 2 * len + (64 << 10)))

	coll_start "$T_TMP/$kind.db" --otlp-http 127.0.0.1:$OP ||
		{ fail "$kind: collector starts"; continue; }
	st=$(post $kind "$T_TMP/big.$ext")
	ok "$kind: 2048 spans ($len bytes) stored with the default budget" test "$st" = 200 -o "$st" = 202
	peak=$(metric fay_collector_memory_peak_bytes)
	ok "$kind: the peak charged, $peak, is over connection + 2 x body + 64 KiB ($step): the decoded request" \
		test "${peak:-0}" -gt $step
	ok "$kind: ... all of it given back" wait_for 20 metric_is fay_collector_memory_bytes $CONN
	coll_stop

	coll_start "$T_TMP/$kind-tight.db" --otlp-http 127.0.0.1:$OP --max-memory $step ||
		{ fail "$kind: collector starts with --max-memory $step"; continue; }
	ok "$kind: --max-memory $step: the body fits, its decoding does not: 503" \
		test "$(post $kind "$T_TMP/big.$ext")" = 503
	ok "$kind: ... with Retry-After" grep -qi '^Retry-After: 1' "$T_TMP/h"
	ok "$kind: ... saying so" grep -q 'decoded request does not fit in --max-memory' "$T_TMP/resp"
	ok "$kind: ... counted: fay_collector_http_busy_total" test "$(metric fay_collector_http_busy_total)" = 1
	ok "$kind: ... every byte given back" wait_for 20 metric_is fay_collector_memory_bytes $CONN
	ok "$kind: ... none of its spans stored" test "$(metric fay_collector_spans_stored_total)" = 0
	st=$(post $kind "$T_TMP/small.$ext")
	ok "$kind: a 16-span request right after: stored" test "$st" = 200 -o "$st" = 202
	ok "$kind: ... its 16 spans" wait_for 10 metric_is fay_collector_spans_stored_total 16
	ok "$kind: collector still up" coll_alive
	coll_stop
done
done_testing
