#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay collector, HTTP side: every route of the Zipkin v2 API, /health,
# /metrics, bad input (400 with the reason, 404, 405, 413, 415), a Zipkin
# JSON round trip field by field, gzip, the token, and a store file that
# is not a fay store.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"

DB=$T_TMP/fay.db
ok "--help is a manual" bash -c "'$FAY' collector --help | grep -q '^SYNOPSIS' && '$FAY' collector --help | grep -q '^EXIT STATUS'"
"$FAY" collector --bogus >/dev/null 2>&1; ok "unknown option: exit 2" [ $? -eq 2 ]

ok "collector starts on free ports" coll_start "$DB" --max-body 64k
ok "/health says UP" bash -c "curl -sf $URL/health | grep -q '\"status\":\"UP\"'"

# code METHOD PATH [curl args...]: prints "CODE BODY"
code() {
	local m=$1 p=$2; shift 2
	curl -s -o "$T_TMP/body" -w '%{http_code}' -X "$m" "$URL$p" "$@"
	printf ' '
	tr -d '\n' <"$T_TMP/body"
}
expect() {  # expect "what" "CODE" "substring" METHOD PATH [curl args]
	local what=$1 want=$2 sub=$3; shift 3
	local got
	got=$(code "$@")
	if [[ "$got" == "$want"* && "$got" == *"$sub"* ]]; then
		pass "$what"
	else
		fail "$what" "got: $got" "want: $want ...$sub..."
	fi
}

NOW_US=$(( $(date +%s) * 1000000 ))
T1=$NOW_US
cat >"$T_TMP/full.json" <<JSON
[{"traceId":"463ac35c9f6413ad48485a3953bb6124","id":"a2fb4a1d1a96d312","parentId":"0020000000000001",
  "kind":"SERVER","name":"Get /Users","timestamp":$T1,"duration":207000,
  "localEndpoint":{"serviceName":"Frontend","ipv4":"192.168.99.1","port":8080},
  "remoteEndpoint":{"serviceName":"browser","ipv6":"2001:db8::c001","port":55123},
  "annotations":[{"timestamp":$((T1 + 50)),"value":"wr"},{"timestamp":$((T1 + 10)),"value":"ws"}],
  "tags":{"http.path":"/api","clnt/finagle.version":"6.45.0","n":7},
  "debug":true,"shared":true,"unknownField":{"ignored":1}},
 {"traceId":"463ac35c9f6413ad48485a3953bb6124","id":"b000000000000002","parentId":"a2fb4a1d1a96d312",
  "kind":"CLIENT","name":"select","timestamp":$((T1 + 1000)),"duration":5000,
  "localEndpoint":{"serviceName":"frontend"},"remoteEndpoint":{"serviceName":"mysql"},
  "tags":{"error":"timeout"}}]
JSON
expect "POST a JSON array: 202" 202 "" POST /api/v2/spans -H 'Content-Type: application/json' --data-binary @"$T_TMP/full.json"

curl -s "$URL/api/v2/trace/463ac35c9f6413ad48485a3953bb6124" >"$T_TMP/trace.json"
python3 - "$T_TMP/trace.json" "$T1" <<'PY' && pass "round trip: every field as Zipkin writes it" || fail "round trip: every field as Zipkin writes it" "$(cat "$T_TMP/trace.json")"
import json, sys
got = json.load(open(sys.argv[1])); t1 = int(sys.argv[2])
want = [{"traceId":"463ac35c9f6413ad48485a3953bb6124","parentId":"0020000000000001",
  "id":"a2fb4a1d1a96d312","kind":"SERVER","name":"get /users","timestamp":t1,"duration":207000,
  "localEndpoint":{"serviceName":"frontend","ipv4":"192.168.99.1","port":8080},
  "remoteEndpoint":{"serviceName":"browser","ipv6":"2001:db8::c001","port":55123},
  "annotations":[{"timestamp":t1+10,"value":"ws"},{"timestamp":t1+50,"value":"wr"}],
  "tags":{"clnt/finagle.version":"6.45.0","http.path":"/api","n":"7"},
  "debug":True,"shared":True},
 {"traceId":"463ac35c9f6413ad48485a3953bb6124","parentId":"a2fb4a1d1a96d312",
  "id":"b000000000000002","kind":"CLIENT","name":"select","timestamp":t1+1000,"duration":5000,
  "localEndpoint":{"serviceName":"frontend"},"remoteEndpoint":{"serviceName":"mysql"},
  "tags":{"error":"timeout"}}]
got.sort(key=lambda s: s["id"])
if got != want:
    for g, w in zip(got, want):
        for k in sorted(set(g) | set(w)):
            if g.get(k) != w.get(k):
                print("# field", k, "got", g.get(k), "want", w.get(k))
    sys.exit(1)
# Zipkin's field order
keys = list(json.loads(open(sys.argv[1]).read(), object_pairs_hook=lambda p: p)[0])
order = ["traceId","parentId","id","kind","name","timestamp","duration","localEndpoint","remoteEndpoint","annotations","tags","debug","shared"]
names = [k for k, _ in keys]
sys.exit(0 if names == [k for k in order if k in names] else 1)
PY

expect "GET /api/v2/services" 200 '"frontend"' GET /api/v2/services
expect "GET /api/v2/spans?serviceName= (case-insensitive)" 200 '["get /users","select"]' GET "/api/v2/spans?serviceName=FrontEnd"
expect "GET /api/v2/remoteServices" 200 '["browser","mysql"]' GET "/api/v2/remoteServices?serviceName=frontend"
expect "/api/v2/spans without serviceName: 400" 400 "serviceName: required" GET /api/v2/spans
expect "/api/v2/remoteServices without serviceName: 400" 400 "serviceName: required" GET /api/v2/remoteServices

# more traces for the search
for i in 1 2 3; do
	ts=$((NOW_US - i * 1000000))
	echo "[{\"traceId\":\"00000000000000a$i\",\"id\":\"000000000000000$i\",\"name\":\"op$i\",\"timestamp\":$ts,\"duration\":$((i * 1000)),\"localEndpoint\":{\"serviceName\":\"search\"},\"tags\":{\"shard\":\"$i\"},\"annotations\":[{\"timestamp\":$ts,\"value\":\"retry$i\"}]}]" |
		gzip >"$T_TMP/s$i.gz"
	expect "POST gzip body $i: 202" 202 "" POST /api/v2/spans -H 'Content-Encoding: gzip' --data-binary @"$T_TMP/s$i.gz"
done
ids() { python3 -c 'import json,sys; print(" ".join(t[0]["traceId"] for t in json.load(sys.stdin)))'; }
q() { curl -s "$URL/api/v2/traces?$1" | ids; }
ok "traces?serviceName=search: newest first" [ "$(q serviceName=search)" = "00000000000000a1 00000000000000a2 00000000000000a3" ]
ok "traces limit=2" [ "$(q 'serviceName=search&limit=2')" = "00000000000000a1 00000000000000a2" ]
ok "traces spanName=op2" [ "$(q 'serviceName=search&spanName=op2')" = "00000000000000a2" ]
ok "traces minDuration=2000" [ "$(q 'serviceName=search&minDuration=2000')" = "00000000000000a2 00000000000000a3" ]
ok "traces minDuration+maxDuration" [ "$(q 'serviceName=search&minDuration=1500&maxDuration=2500')" = "00000000000000a2" ]
ok "traces annotationQuery tag" [ "$(q 'annotationQuery=shard%3D3')" = "00000000000000a3" ]
ok "traces annotationQuery annotation and tag" [ "$(q 'annotationQuery=retry1%20and%20shard%3D1')" = "00000000000000a1" ]
ok "traces annotationQuery no match" [ -z "$(q 'annotationQuery=shard%3D9')" ]
END_MS=$(( (NOW_US - 1500000) / 1000 ))
ok "traces endTs+lookback (ms)" [ "$(q "serviceName=search&endTs=$END_MS&lookback=1000")" = "00000000000000a2" ]
ok "traces with no serviceName: all four" [ "$(q '' | wc -w)" = 4 ]
expect "traces minDuration=abc: 400" 400 "minDuration: 'abc' is not a positive integer" GET "/api/v2/traces?minDuration=abc"
expect "traces maxDuration alone: 400" 400 "maxDuration is only valid with minDuration" GET "/api/v2/traces?maxDuration=5"
expect "traces max < min: 400" 400 "maxDuration < minDuration" GET "/api/v2/traces?minDuration=5&maxDuration=4"
expect "traces limit=0: 400" 400 "limit:" GET "/api/v2/traces?limit=0"
expect "traces endTs=-1: 400" 400 "endTs:" GET "/api/v2/traces?endTs=-1"
expect "traces bad annotationQuery: 400" 400 "annotationQuery" GET "/api/v2/traces?annotationQuery=%3Dx"

expect "trace/ID 64-bit (padded like Zipkin)" 200 '"traceId":"00000000000000a2"' GET /api/v2/trace/a2
expect "trace/ID unknown: 404" 404 "00000000000000ff not found" GET /api/v2/trace/ff
expect "trace/ID not hex: 400" 400 "must be lowercase hex" GET /api/v2/trace/XYZ
expect "trace/ID too long: 400" 400 "1 to 32" GET /api/v2/trace/0123456789abcdef0123456789abcdef0
expect "traceMany two ids" 200 '"00000000000000a1"' GET "/api/v2/traceMany?traceIds=00000000000000a1,00000000000000a3"
ok "traceMany returns both" [ "$(curl -s "$URL/api/v2/traceMany?traceIds=a1,a3,ee" | ids)" = "00000000000000a1 00000000000000a3" ]
expect "traceMany one id: 400" 400 "Use /api/v2/trace/" GET "/api/v2/traceMany?traceIds=a1"
expect "traceMany empty: 400" 400 "empty" GET "/api/v2/traceMany?traceIds="
expect "traceMany redundant: 400" 400 "redundant traceId" GET "/api/v2/traceMany?traceIds=a1,00000000000000a1"

DROP0=$(metric fay_collector_http_spans_dropped_total)
BAD=$(python3 -c 'import json; print(json.dumps([{"traceId":"%016x"%(i+1),"id":"%016x"%(i+1)} for i in range(3)] + [{"traceId":"ABC","id":"1"}]))')
expect "bad traceId in span 3: 400 naming span and field" 400 "span 3: traceId: must be 16 or 32 lowercase hex characters" POST /api/v2/spans --data "$BAD"
ok "refused body counted as 4 dropped spans" [ "$(metric fay_collector_http_spans_dropped_total)" = $((DROP0 + 4)) ]
ok "nothing of the refused body stored" bash -c "curl -s -o /dev/null -w '%{http_code}' $URL/api/v2/trace/0000000000000001 | grep -q 404"
expect "invalid JSON: 400 with line/column" 400 "body: invalid JSON at line 1" POST /api/v2/spans --data '[{"traceId":'
expect "not an array: 400" 400 "must be a JSON array" POST /api/v2/spans --data '{"traceId":"1"}'
expect "missing id: 400" 400 "span 0: id: missing" POST /api/v2/spans --data '[{"traceId":"0000000000000001"}]'
expect "bad kind: 400" 400 "span 0: kind: must be CLIENT, SERVER, PRODUCER or CONSUMER" POST /api/v2/spans --data '[{"traceId":"0000000000000001","id":"1","kind":"SIDEWAYS"}]'
expect "bad port: 400 (zipkin2 Endpoint.Builder throws)" 400 "span 0: localEndpoint.port: must be an integer up to 65535" POST /api/v2/spans --data '[{"traceId":"0000000000000001","id":"1","localEndpoint":{"port":70000}}]'
# Zipkin's reader drops a negative timestamp/duration or an IP that does
# not parse and keeps the span (Span.Builder.timestamp(), Endpoint.Builder.parseIp())
expect "negative timestamp and duration, bad ipv4: 202" 202 "" POST /api/v2/spans --data '[{"traceId":"00000000000000c1","id":"1","name":"kept","timestamp":-5,"duration":-1,"localEndpoint":{"serviceName":"lenient","ipv4":"1.2.3","port":-3},"remoteEndpoint":{"ipv6":"::1"}}]'
ok "... the span is kept without those fields (ipv6 ::1 stays ::1)" [ "$(curl -s "$URL/api/v2/trace/00000000000000c1")" = '[{"traceId":"00000000000000c1","id":"0000000000000001","name":"kept","localEndpoint":{"serviceName":"lenient"},"remoteEndpoint":{"ipv6":"::1"}}]' ]
expect "tag value object: 400" 400 "span 0: tags.k: must be a string" POST /api/v2/spans --data '[{"traceId":"0000000000000001","id":"1","tags":{"k":{}}}]'
expect "annotation without value: 400" 400 "span 0: annotations[0].value: missing" POST /api/v2/spans --data '[{"traceId":"0000000000000001","id":"1","annotations":[{"timestamp":1}]}]'
head -c 100000 /dev/zero | tr '\0' ' ' >"$T_TMP/big"
expect "body over --max-body: 413" 413 "larger than the 65536-byte limit" POST /api/v2/spans --data-binary @"$T_TMP/big"
python3 -c 'print("[" + ",".join(["{\"traceId\":\"%016x\",\"id\":\"0000000000000001\",\"name\":\"%s\"}" % (i + 1, "x" * 100) for i in range(2000)]) + "]")' | gzip >"$T_TMP/bomb.gz"
expect "gzip body over the limit once inflated: 413" 413 "after gzip decoding" POST /api/v2/spans -H 'Content-Encoding: gzip' --data-binary @"$T_TMP/bomb.gz"
echo 'not gzip' >"$T_TMP/notgz"
expect "corrupt gzip: 400" 400 "body: gzip:" POST /api/v2/spans -H 'Content-Encoding: gzip' --data-binary @"$T_TMP/notgz"
expect "thrift: 415" 415 "only JSON (application/json) or protobuf" POST /api/v2/spans -H 'Content-Type: application/x-thrift' --data-binary @"$T_TMP/notgz"
expect "empty array: 202" 202 "" POST /api/v2/spans --data '[]'
expect "unknown route: 404" 404 "no such route" GET /api/v9/nothing
expect "PUT on a route: 405" 405 "PUT is not allowed" PUT /api/v2/services

curl -s "$URL/metrics" >"$T_TMP/metrics"
for m in fay_collector_spans_received_total fay_collector_spans_stored_total \
	 fay_collector_spans_rejected_total fay_collector_spans_duplicate_total \
	 fay_collector_batches_total fay_collector_agents_connected; do
	ok "/metrics has $m" grep -q "^$m [0-9]" "$T_TMP/metrics"
done
ok "/metrics: 6 spans stored" [ "$(metric fay_collector_spans_stored_total)" = 6 ]
ok "collector still serving after all the bad input" coll_alive
coll_stop

# --token guards POST, and the GETs of data (collector_http_hostile.sh)
ok "collector with --token starts" coll_start "$DB" --token s3cret
expect "POST without the token: 401" 401 "Authorization: Bearer" POST /api/v2/spans --data '[]'
expect "POST with the token: 202" 202 "" POST /api/v2/spans -H 'Authorization: Bearer s3cret' --data '[]'
expect "GET without the token: 401" 401 "Authorization: Bearer" GET /api/v2/trace/a2
expect "data survived the restart" 200 '"traceId":"00000000000000a2"' GET /api/v2/trace/a2 \
	-H 'Authorization: Bearer s3cret'
coll_stop

# a file that is not a fay store
printf 'hello, I am a text file\n%.0s' {1..50} >"$T_TMP/text.db"
sum0=$(sha256sum <"$T_TMP/text.db")
"$FAY" collector --listen 127.0.0.1:0 --http 127.0.0.1:0 --db "$T_TMP/text.db" >"$T_TMP/bad.out" 2>&1
rc=$?
ok "not a database: exit 1" [ $rc -eq 1 ]
ok "not a database: the message names the file" grep -q "$T_TMP/text.db: not an SQLite database" "$T_TMP/bad.out"
ok "not a database: file untouched" [ "$(sha256sum <"$T_TMP/text.db")" = "$sum0" ]
"$FAY" collector --listen 127.0.0.1:0 --http 127.0.0.1:0 --db /nonexistent/dir/fay.db >"$T_TMP/bad.out" 2>&1
ok "missing directory: exit 1 naming the path" bash -c "[ $? -eq 1 ] && grep -q /nonexistent/dir/fay.db '$T_TMP/bad.out'"
done_testing
