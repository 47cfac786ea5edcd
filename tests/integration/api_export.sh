#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --export: a collector forwards what it stores to other backends, here
# three more real collectors, spoken to in Zipkin v2 JSON, OTLP/HTTP JSON
# and OTLP/HTTP protobuf; spans arrive there intact; a backend that is down is
# retried, then the spans are counted as failed and the collector runs on.
. "$(dirname "$0")/../lib/lib.sh"
for f in collector_lib.bash collector_lib.sh; do
	[ -f "$(dirname "$0")/$f" ] && { . "$(dirname "$0")/$f"; break; }
done
command -v python3 >/dev/null || skip_all "needs python3"

# two downstream collectors
ok "downstream Zipkin-side collector" coll_start "$T_TMP/z.db"
ZURL=$URL; ZPID=$CPID
ok "downstream OTLP-side collector" coll_start "$T_TMP/o.db"
OURL=$URL
ok "downstream OTLP-protobuf-side collector" coll_start "$T_TMP/p.db"
PURL=$URL
DEAD=$(free_port)
ok "the exporting collector starts" coll_start "$T_TMP/main.db" \
	--export zipkin=$ZURL/api/v2/spans --export otlp=$OURL/v1/traces \
	--export otlp-protobuf=$PURL/v1/traces \
	--export zipkin=http://127.0.0.1:$DEAD/api/v2/spans

NOW=$(( $(date +%s) * 1000000 ))
cat >"$T_TMP/spans.json" <<JSON
[{"traceId":"00000000000000000000000000000e01","id":"00000000000000a1","kind":"SERVER","name":"get","timestamp":$NOW,"duration":5000,
  "localEndpoint":{"serviceName":"web"},"tags":{"http.path":"/x","error":"boom"},"annotations":[{"timestamp":$((NOW+10)),"value":"ws"}]},
 {"traceId":"00000000000000000000000000000e01","id":"00000000000000a2","parentId":"00000000000000a1","kind":"CLIENT","name":"map","timestamp":$((NOW+100)),"duration":4000,
  "localEndpoint":{"serviceName":"web"},"remoteEndpoint":{"serviceName":"mapperd"}}]
JSON
ok "POST to the exporting collector" bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @'$T_TMP/spans.json' $URL/api/v2/spans) = 202 ]"
ok "the spans reach the Zipkin-side backend" wait_for 10 bash -c "curl -s $ZURL/api/v2/trace/00000000000000000000000000000e01 | grep -q '\"id\":\"00000000000000a2\"'"
ok "the spans reach the OTLP-side backend" wait_for 10 bash -c "curl -s $OURL/api/v2/trace/00000000000000000000000000000e01 | grep -q '\"id\":\"00000000000000a2\"'"
curl -s "$ZURL/api/v2/trace/00000000000000000000000000000e01" >"$T_TMP/z"
curl -s "$OURL/api/v2/trace/00000000000000000000000000000e01" >"$T_TMP/o"
ok "the spans reach the OTLP-protobuf-side backend" wait_for 10 bash -c "curl -s $PURL/api/v2/trace/00000000000000000000000000000e01 | grep -q '\"id\":\"00000000000000a2\"'"
curl -s "$PURL/api/v2/trace/00000000000000000000000000000e01" >"$T_TMP/p"
ok "OTLP protobuf export: the same spans as OTLP JSON export" python3 -c "
import json; o=sorted(json.load(open('$T_TMP/o')), key=lambda s: s['id']); p=sorted(json.load(open('$T_TMP/p')), key=lambda s: s['id'])
assert o == p and len(p) == 2, (o, p)"
ok "protobuf export counted as otlp-protobuf" wait_for 30 bash -c "curl -s $URL/metrics | grep -q 'fay_export_spans_sent_total{exporter=\"otlp-protobuf\",url=\"$PURL/v1/traces\"} 2'"
ok "Zipkin export: identical spans" python3 -c "
import json; a=json.load(open('$T_TMP/z')); b=json.load(open('$T_TMP/spans.json'))
key=lambda s: s['id']
a=sorted(a,key=key); b=sorted(b,key=key)
assert a[0]['tags'] == b[0]['tags'] and a[0]['annotations'] == b[0]['annotations'] and a[1]['parentId'] == 'a1'.rjust(16,'0'), a
assert a[0]['duration'] == 5000 and a[1]['remoteEndpoint']['serviceName'] == 'mapperd'"
ok "OTLP export: service, kind, times, tags, events, parent, error survive the trip" python3 -c "
import json; a={s['id']:s for s in json.load(open('$T_TMP/o'))}
r=a['00000000000000a1']; c=a['00000000000000a2']
assert r['localEndpoint']['serviceName']=='web' and r['kind']=='SERVER' and r['duration']==5000 and r['timestamp']==$NOW, r
assert r['tags']['http.path']=='/x' and r['tags']['error']=='boom' and [x['value'] for x in r['annotations']]==['ws'], r
assert c['parentId']=='00000000000000a1' and c['kind']=='CLIENT', c"
ok "sent spans are counted per exporter" wait_for 30 bash -c "curl -s $URL/metrics | grep -q 'fay_export_spans_sent_total{exporter=\"otlp\",url=\"$OURL/v1/traces\"} 2'"
ok "the dead backend is retried, then its spans are counted failed" wait_for 30 bash -c \
	"curl -s $URL/metrics | grep -q 'fay_export_spans_failed_total{exporter=\"zipkin\",url=\"http://127.0.0.1:$DEAD/api/v2/spans\"} 2'"
ok "retries counted" bash -c "curl -s $URL/metrics | grep -q 'fay_export_retries_total{exporter=\"zipkin\",url=\"http://127.0.0.1:$DEAD/api/v2/spans\"} 3'"
kill "$ZPID"; wait "$ZPID" 2>/dev/null
sed 's/0e01/0e02/' "$T_TMP/spans.json" >"$T_TMP/spans2.json"
curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary @"$T_TMP/spans2.json" "$URL/api/v2/spans"
ok "ingest goes on while a backend is down" bash -c "curl -s $URL/api/v2/trace/00000000000000000000000000000e02 | grep -q a2"
ok "collector still up" coll_alive

# more spans than a batch (500) at once: taken from the queue 500 at a
# time, every one sent once, none lost or repeated
python3 -c "
import json
print(json.dumps([{'traceId': '00000000000000000000000000000e03', 'id': '%016x' % (0x1000 + i),
                   'kind': 'SERVER', 'name': 'bulk', 'timestamp': $NOW + i, 'duration': 10,
                   'localEndpoint': {'serviceName': 'bulk'}} for i in range(1300)]))" >"$T_TMP/bulk.json"
ok "1,300 spans posted at once" bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @'$T_TMP/bulk.json' $URL/api/v2/spans) = 202 ]"
bulk_ids() { curl -s "$1/api/v2/trace/00000000000000000000000000000e03" |
	python3 -c 'import json, sys; ids = [s["id"] for s in json.load(sys.stdin)]; print(len(ids), len(set(ids)))'; }
bulk_all() { [ "$(bulk_ids "$1")" = "1300 1300" ]; }
for b in "$OURL" "$PURL"; do
	ok "all 1,300 reach $b, each once" wait_for 30 bulk_all "$b" || diag "spans, distinct: $(bulk_ids "$b")"
done
ok "counted: 2 + 2 + 1,300 sent per exporter" wait_for 30 bash -c \
	"curl -s $URL/metrics | grep -q 'fay_export_spans_sent_total{exporter=\"otlp\",url=\"$OURL/v1/traces\"} 1304' &&
	 curl -s $URL/metrics | grep -q 'fay_export_spans_sent_total{exporter=\"otlp-protobuf\",url=\"$PURL/v1/traces\"} 1304'"
ok "nothing left in the queues that work" bash -c \
	"curl -s $URL/metrics | grep -q 'fay_export_queue_spans{exporter=\"otlp\",url=\"$OURL/v1/traces\"} 0'"
done_testing
