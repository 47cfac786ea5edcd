#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The OTLP receiver with real third-party clients: OpenTelemetry's JS SDK
# exports spans of every kind, with attributes of every type (arrays
# too), events, links and status, through its OTLP/HTTP protobuf and JSON
# exporters (plain and gzip) and its Zipkin exporter; each trace is read
# back from /api/v2/trace/ID and compared field by field with
# OpenTelemetry's Zipkin transformation (tests/otlp/otlp_client.js).
# Then partial_success (exact rejected_spans, the reason, the valid span
# kept), answers in the request's encoding, and per-sender counters.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/otlp_lib.bash"

coll_start "$T_TMP/fay.db" --max-body 1M || { fail "collector starts"; done_testing; exit; }

for mode in proto proto-gzip json json-gzip; do
	otlp_node "OTLP/HTTP $mode exporter: every field round-trips as the Zipkin transformation says" \
		roundtrip "$mode" "$URL/v1/traces" "$URL"
done
otlp_node "Zipkin exporter: every field round-trips as it sent them" \
	roundtrip zipkin "$URL/api/v2/spans" "$URL"
otlp_node "protobuf: partial_success with exact rejected_spans and the reason; the valid span kept" \
	partial "$URL/v1/traces" "$URL"

# Answers in the request's encoding.
code=$(curl -s -o "$T_TMP/r" -w '%{http_code} %{content_type}' -H 'Content-Type: application/x-protobuf' \
	--data-binary 'not protobuf' "$URL/v1/traces")
ok "undecodable protobuf: 400 in protobuf (google.rpc.Status)" bash -c \
	"[ '$code' = '400 application/x-protobuf' ] && grep -q 'body: field 13 at byte 0: wire type 6' '$T_TMP/r'"
printf '\x0a\x02\x0a' >"$T_TMP/trunc.pb"
ok "truncated protobuf: 400" bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/x-protobuf' --data-binary @'$T_TMP/trunc.pb' $URL/v1/traces) = 400 ]"
code=$(curl -s -o "$T_TMP/r" -w '%{http_code}' -H 'Content-Type: application/x-protobuf' --data-binary '' "$URL/v1/traces")
ok "an empty protobuf request: 200, empty response" bash -c "[ '$code' = 200 ] && [ ! -s '$T_TMP/r' ]"
python3 -c "import sys; sys.stdout.buffer.write(b'\x0a\x00' * 1 + b'\x00' * 3000000)" | gzip >"$T_TMP/bomb.gz"
code=$(curl -s -o "$T_TMP/r" -w '%{http_code}' -H 'Content-Type: application/x-protobuf' -H 'Content-Encoding: gzip' \
	--data-binary @"$T_TMP/bomb.gz" "$URL/v1/traces")
ok "gzip past --max-body after decompression: 413 (the compressed body is small)" bash -c \
	"[ '$code' = 413 ] && [ \$(stat -c %s '$T_TMP/bomb.gz') -lt 100000 ]"

curl -s "$URL/metrics" >"$T_TMP/m"
ok "per-sender counters in /metrics" grep -q '^fay_otlp_sender_spans_accepted_total{sender="127.0.0.1"} [1-9]' "$T_TMP/m"
ok "per-sender rejected spans: the 2 of the partial request" grep -q '^fay_otlp_sender_spans_rejected_total{sender="127.0.0.1"} 2$' "$T_TMP/m"
ok "senders on the Hosts page's API" bash -c "curl -s $URL/api/ui/hosts | grep -q '\"otlp_senders\":\[{\"sender\":\"127.0.0.1\"'"
ok "collector still up" coll_alive
done_testing
