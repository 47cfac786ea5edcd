#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Zipkin's protobuf upload (POST /api/v2/spans, application/x-protobuf, a
# ListOfSpans of Zipkin's zipkin.proto) from a client fay did not write:
# a Go program over the official Zipkin Go library's generated protobuf
# types (Debian's golang-github-openzipkin-zipkin-go-dev, made from
# Zipkin's own zipkin.proto) posts Zipkin's TestObjects trace (128-bit id,
# IPv4 and IPv6 endpoints, annotations, tags, shared) and more; the spans
# read back through the JSON API equal what was sent, field by field, with
# Zipkin's normalisation (lower-cased names, a 128-bit id with a zero high
# half taken as 64-bit, ::1 kept as IPv6).  Bad bodies: 400 naming the span.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"
command -v go >/dev/null || skip_all "needs go (golang-go)"
GOSRC=/usr/share/gocode
[ -d "$GOSRC/src/github.com/openzipkin/zipkin-go/proto/v2" ] ||
	skip_all "needs golang-github-openzipkin-zipkin-go-dev (the Zipkin Go library)"
TOOLS=$(cd "$(dirname "$0")/zipkin_tools" && pwd)
DATA=$TOP/tests/data/zipkin

CL=$T_TMP/proto_client
ok "the Go Zipkin protobuf client builds" bash -c "cd '$T_TMP' && GO111MODULE=off GOPATH=$GOSRC \
	GOCACHE=\${GOCACHE:-$BUILD/go-cache} GOFLAGS= go build -o '$CL' '$TOOLS/proto_client.go' 2>'$T_TMP/go.log'" ||
	{ cat "$T_TMP/go.log"; done_testing; exit; }
ok "collector up" coll_start "$T_TMP/fay.db"

# TestObjects.TRACE, moved to today
python3 - "$DATA/test_objects.json" >"$T_TMP/trace.json" <<'PY'
import json, sys, time
d = json.load(open(sys.argv[1]))
shift = (int(time.time()) // 86400 * 86400 * 1000 - d["today_ms"]) * 1000
for s in d["trace"]:
    s["timestamp"] += shift
    for a in s.get("annotations", []):
        a["timestamp"] += shift
print(json.dumps(d["trace"]))
PY
ok "POST TestObjects.TRACE as protobuf: 202" [ "$("$CL" "$URL" <"$T_TMP/trace.json" | cut -d' ' -f1)" = 202 ]
# same: compare span sets (the API's order is by timestamp)
same() {  # same GOT WANT
	python3 - "$1" "$2" <<'PY'
import json, sys
key = lambda s: json.dumps(s, sort_keys=True)
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
g, w = sorted(map(key, got)), sorted(map(key, want))
if g != w:
    print("# got  %s\n# want %s" % ("\n#      ".join(g), "\n#      ".join(w)))
    sys.exit(1)
PY
}
curl -s "$URL/api/v2/trace/7180c278b62e8f6a216a2aea45d08fc9" >"$T_TMP/got.json"
ok "read back as JSON: every field as sent (128-bit id, IPv4 and IPv6 bytes, port, annotations, tags, shared)" \
	same "$T_TMP/got.json" "$T_TMP/trace.json"

NOW=$(( $(date +%s) * 1000000 ))
cat >"$T_TMP/more.json" <<JSON
[{"traceId":"00000000000000000000000000000abc","id":"00000000000000a1","kind":"PRODUCER","name":"Send /Orders",
  "timestamp":$NOW,"duration":1,"localEndpoint":{"serviceName":"Shop","ipv6":"::1","port":443},
  "remoteEndpoint":{"serviceName":"kafka","ipv6":"fe80::1"},"debug":true,"tags":{"k":""}}]
JSON
cat >"$T_TMP/more_want.json" <<JSON
[{"traceId":"0000000000000abc","id":"00000000000000a1","kind":"PRODUCER","name":"send /orders",
  "timestamp":$NOW,"duration":1,"localEndpoint":{"serviceName":"shop","ipv6":"::1","port":443},
  "remoteEndpoint":{"serviceName":"kafka","ipv6":"fe80::1"},"debug":true,"tags":{"k":""}}]
JSON
ok "POST a PRODUCER span with IPv6 ::1: 202" [ "$("$CL" "$URL" <"$T_TMP/more.json" | cut -d' ' -f1)" = 202 ]
curl -s "$URL/api/v2/trace/0000000000000abc" >"$T_TMP/got2.json"
ok "::1 stays ::1, names lower-cased, a zero high half makes a 64-bit id, duration 1 kept" \
	same "$T_TMP/got2.json" "$T_TMP/more_want.json"
ok "the protobuf spans are searchable" bash -c "curl -s '$URL/api/v2/traces?serviceName=shop' | grep -q '0000000000000abc'"
ok "and in the service names" [ "$(curl -s "$URL/api/v2/services")" = '["backend","frontend","shop"]' ]

printf '[{"traceId":"0000000000000001","id":"0000000000000001","localEndpoint":{"port":70000}}]' >"$T_TMP/port.json"
got=$("$CL" "$URL" <"$T_TMP/port.json")
ok "a port over 65535: 400 naming span and field ($got)" bash -c "[[ '$got' == '400 span 0: localEndpoint.port: must be an integer up to 65535' ]]"
printf '[{"traceId":"0000000000000001","id":"0000000000000001"},{"traceId":"0000000000000001"}]' >"$T_TMP/noid.json"
got=$("$CL" "$URL" <"$T_TMP/noid.json")
ok "a span without an id: 400 naming span 1 ($got)" bash -c "[[ '$got' == '400 span 1: id: must be 8 bytes' ]]"
printf '\x0a\xff\xff\xff\x0f\x01' >"$T_TMP/bad.pb"
ok "bytes that are no ListOfSpans: 400" bash -c "curl -s -w '%{http_code}' -H 'Content-Type: application/x-protobuf' --data-binary @'$T_TMP/bad.pb' '$URL/api/v2/spans' | tr -d '\n' | grep -q '^body: not a Zipkin protobuf ListOfSpans.*400$'"
"$CL" "$URL" <"$T_TMP/trace.json" >/dev/null
gzip -c <"$T_TMP/bad.pb" >"$T_TMP/bad.pb.gz"
ok "gzip applies to protobuf too (a gzip'ed bad body: 400 from the decoder)" bash -c "curl -s -H 'Content-Encoding: gzip' -H 'Content-Type: application/x-protobuf' --data-binary @'$T_TMP/bad.pb.gz' '$URL/api/v2/spans' | grep -q 'not a Zipkin protobuf'"
ok "collector still up" coll_alive
done_testing
