#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Overload: a small ingest queue (--ingest-queue 60 spans: a second
# request of 50 waits for nothing but is refused), commits that fsync
# (FAY_STORE_SYNC=full, so a group commit takes a while) and 32
# concurrent OTLP/HTTP protobuf senders (300 requests of 50 spans, encoded
# by OpenTelemetry's JS serializer).  Some requests must be refused 429 /
# 503 with Retry-After, driven by the real queue; every refused span is
# absent from the store and every accepted one present (sent == stored +
# rejected, exactly); after the burst the refused requests are accepted;
# /metrics agrees.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/otlp_lib.bash"

FAY_STORE_SYNC=full coll_start "$T_TMP/fay.db" --ingest-queue 60 || { fail "collector starts"; done_testing; exit; }
otlp_node "burst past the queue: 429 + Retry-After, sent == stored + rejected, then accepted" \
	burst "$URL/v1/traces" "$URL" 300 50 32
diag "$(cat "$T_TMP/node.out")"
refused=$(python3 -c "import json; print(json.load(open('$T_TMP/node.out'))['refused'])" 2>/dev/null)
curl -s "$URL/metrics" >"$T_TMP/m"
ok "/metrics counts the refused spans" grep -q "^fay_collector_otlp_spans_rejected_total ${refused:-x}\$" "$T_TMP/m"
ok "/metrics counts the throttled requests" grep -q "^fay_collector_otlp_throttled_total $(( ${refused:-0} / 50 ))\$" "$T_TMP/m"
ok "the queue drained" grep -q '^fay_collector_ingest_queue_spans 0$' "$T_TMP/m"
ok "--ingest-queue 0 is a usage error" bash -c "'$FAY' collector --ingest-queue 0 >/dev/null 2>&1; [ \$? = 2 ]"
ok "collector still up" coll_alive
done_testing
