#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay collector, agent side: the wire protocol against the real binary
# with a test client (tests/integration/collector_client.c): HELLO/WELCOME,
# the token, ACK only after COMMIT (the client reads the store itself when
# each ACK arrives), a duplicate batch stored once, rejected spans, BlkKin
# partial records merged into Zipkin spans, STATS, and broken frames
# (ERROR + that connection closed, everyone else still served).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"

DB=$T_TMP/fay.db
ID=abcdef0123456789abcdef0123456789
ok "collector with --token starts" coll_start "$DB" --token tok
A=127.0.0.1:$WP
cl() { "$CLIENT" -a "$A" -t tok -i "$ID" "$@"; }
has() { grep -q -- "$1" <<<"$2"; }   # has PATTERN TEXT

out=$("$CLIENT" -a "$A" -i "$ID" hello 2>&1)
ok "HELLO without the token: ERROR naming it" has 'error.*missing token' "$out"
out=$("$CLIENT" -a "$A" -i "$ID" -t wrong hello 2>&1)
ok "HELLO with a wrong token: ERROR" has 'error.*wrong token' "$out"
ok "HELLO with the token: WELCOME last_seq=0" bash -c "[ \"\$('$CLIENT' -a $A -t tok -i $ID hello)\" = 'welcome last_seq=0' ]"

cl -n 20 -m 50 -W 4 -d "$DB" -w send >"$T_TMP/send.out" 2>&1
ok "20 batches x 50 spans: 20 ACKs" [ "$(grep -c '^ack .*"stored":50,"duplicate":false' "$T_TMP/send.out")" = 20 ]
ok "every ACK came after its COMMIT (spans readable at ACK time)" bash -c "! grep -q 'NOT COMMITTED' '$T_TMP/send.out'"
ok "WELCOME now says last_seq=20" [ "$(cl hello)" = "welcome last_seq=20" ]

cl -s 20 dup >"$T_TMP/dup.out"
ok "batch 20 again (twice): ACKed as duplicates" [ "$(grep -c '"duplicate":true' "$T_TMP/dup.out")" = 2 ]
cl -s 21 dup >"$T_TMP/dup.out"
ok "new batch 21 sent twice: first stored, second duplicate" bash -c "sed -n 1p '$T_TMP/dup.out' | grep -q '\"stored\":10,\"duplicate\":false' && sed -n 2p '$T_TMP/dup.out' | grep -q '\"stored\":0,\"duplicate\":true'"
cl -s 19 -n 3 -d "$DB" check >"$T_TMP/check.out"
ok "store: batches 19, 20, 21 hold 50, 50, 10 spans (each once)" [ "$(tr '\n' ' ' <"$T_TMP/check.out")" = "19 50 20 50 21 10 " ]

cl -s 30 badspan >"$T_TMP/bad.out"
ok "a batch with one corrupt span: ACK stored=2 rejected=1" grep -q '"stored":2,"duplicate":false,"rejected":1' "$T_TMP/bad.out"
ok "the corrupt span is named in the log" grep -q "span 1 rejected: span record: byte 16: span id is 0" "$T_TMP/collector.log"

cl -s 40 partial >/dev/null
TRACE=$(printf '%s%016x' "${ID:0:16}" 40)
curl -s -H "Authorization: Bearer tok" "$URL/api/v2/trace/$TRACE" >"$T_TMP/partial.json"
python3 - "$T_TMP/partial.json" <<'PY' && pass "BlkKin parts cs/sr/ss/cr merged: CLIENT 500 us + shared SERVER 300 us" || fail "BlkKin parts merged" "$(cat "$T_TMP/partial.json")"
import json, sys
t = sorted(json.load(open(sys.argv[1])), key=lambda s: s["kind"])
c, s = t
assert len(t) == 2 and c["kind"] == "CLIENT" and s["kind"] == "SERVER"
assert c["localEndpoint"]["serviceName"] == "frontend" and s["localEndpoint"]["serviceName"] == "backend"
assert c["duration"] == 500 and s["duration"] == 300 and s["timestamp"] - c["timestamp"] == 100
assert s.get("shared") is True and "shared" not in c
assert s["annotations"] == [{"timestamp": s["timestamp"] + 50, "value": "cache miss"}]
assert s["tags"] == {"rows": "42"} and c["id"] == s["id"] == "0000000000000010"
PY

ok "STATS accepted, connection reusable" bash -c "cl() { '$CLIENT' -a $A -t tok -i $ID \"\$@\"; }; cl stats | grep -q 'welcome last_seq=40'"
ok "STATS kept in the store" bash -c "sqlite3 '$DB' \"SELECT stats FROM agents WHERE agent_id='$ID'\" | grep -q '\"rings\":3'"

for kind in corrupt-crc corrupt-magic corrupt-len corrupt-batch batch-first; do
	out=$(cl -s 50 $kind 2>&1)
	ok "$kind: ERROR frame with a reason" has '^error {"error":"' "$out"
	ok "$kind: then the connection is closed" has '^closed$' "$(tail -1 <<<"$out")"
done
ok "crc error names the checksum" bash -c "cl() { '$CLIENT' -a $A -t tok -i $ID \"\$@\"; }; cl corrupt-crc | grep -q 'checksum'"
ok "collector still serves agents after broken frames" [ "$(cl hello)" = "welcome last_seq=40" ]
ok "collector still serves HTTP" coll_alive
ok "nothing of the broken batches stored" bash -c "cl() { '$CLIENT' -a $A -t tok -i $ID \"\$@\"; }; [ \"\$(cl -s 50 -d '$DB' check)\" = '50 0' ]"

# several agents at once
"$CLIENT" -a "$A" -t tok -i 00000000000000000000000000000000 -c 4 -n 10 -m 100 -q send >"$T_TMP/multi.out"
ok "4 agents in parallel: 4000 spans ACKed" grep -q '^rate .* (4000 spans' "$T_TMP/multi.out"

curl -s -H "Authorization: Bearer tok" "$URL/metrics" >"$T_TMP/metrics"
ok "/metrics: 1 rejected span" grep -q '^fay_collector_spans_rejected_total 1$' "$T_TMP/metrics"
ok "/metrics: duplicate spans counted (3 duplicate batches x 10)" grep -q '^fay_collector_spans_duplicate_total 30$' "$T_TMP/metrics"
ok "/metrics: 8 ERROR frames (2 token, 6 broken frames)" grep -q '^fay_collector_wire_errors_total 8$' "$T_TMP/metrics"
ok "/metrics: per-agent line" grep -q "^fay_agent_spans_stored_total{agent=\"$ID\",host=\"testhost\"}" "$T_TMP/metrics"
coll_stop
done_testing
