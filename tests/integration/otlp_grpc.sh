#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# OTLP/gRPC (--otlp-grpc): OpenTelemetry's JS gRPC exporter (plain and
# gzip) round-trips every field as the Zipkin transformation says; raw
# unary calls with @grpc/grpc-js get partial_success, UNIMPLEMENTED for
# another method, INVALID_ARGUMENT with the reason, RESOURCE_EXHAUSTED
# past --max-body (also after inflating); a burst past the ingest queue
# gets UNAVAILABLE with a RetryInfo, sent == stored + rejected exactly,
# then acceptance; an --otlp-grpc address in use: exit 1.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/otlp_lib.bash"

GP=$(free_port)
FAY_STORE_SYNC=full coll_start "$T_TMP/fay.db" --otlp-grpc 127.0.0.1:$GP --max-body 1M --ingest-queue 60 ||
	{ fail "collector starts"; done_testing; exit; }
# (since the collector serves nothing before its start is done,
# coll_start's /health means every listener is open and this line logged:
# collector_ready_gate.sh; the poll stays from before, when /health could
# answer first)
ok "the start line names the gRPC listener" wait_for 30 grep -q "OTLP/gRPC on 127.0.0.1:$GP" "$T_TMP/collector.log"
for mode in grpc grpc-gzip; do
	otlp_node "OTLP/gRPC $mode exporter: every field round-trips as the Zipkin transformation says" \
		roundtrip "$mode" "http://127.0.0.1:$GP" "$URL"
done
otlp_node "gRPC statuses: partial_success, UNIMPLEMENTED, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, gzip" \
	grpc "127.0.0.1:$GP" "$URL"
otlp_node "gRPC burst past the queue: UNAVAILABLE + RetryInfo, sent == stored + rejected, then accepted" \
	grpcburst "127.0.0.1:$GP" "$URL" 300 50 32
diag "$(cat "$T_TMP/node.out")"
python3 - "$GP" <<'PY' >"$T_TMP/hostile" 2>&1
# Hostile HTTP/2: not HTTP/2, bad HPACK, DATA on a stream never opened,
# random frames after the preface.
import os, random, socket, sys
port = int(sys.argv[1])
pre = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
bodies = [b"garbage" * 100, pre + b"\x00\x00\x05\x01\x05\x00\x00\x00\x01" + b"\xff" * 5,
          pre + b"\x00\x00\x05\x00\x01\x00\x00\x00\x03" + b"\x00" * 5]
random.seed(7)
bodies += [pre + bytes(random.getrandbits(8) for _ in range(random.randint(1, 2000))) for _ in range(30)]
for b in bodies:
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(2)
    try:
        s.sendall(b); s.recv(65536)
    except OSError:
        pass
    s.close()
print("sent", len(bodies))
PY
ok "hostile HTTP/2 input: the collector runs on" bash -c "grep -q '^sent' '$T_TMP/hostile' && curl -sf $URL/health >/dev/null"
otlp_node "... and the gRPC exporter still works" roundtrip grpc "http://127.0.0.1:$GP" "$URL"
curl -s "$URL/metrics" >"$T_TMP/m"
ok "gRPC spans counted per sender" grep -q '^fay_otlp_sender_spans_accepted_total{sender="127.0.0.1"} [1-9]' "$T_TMP/m"

"$FAY" collector --listen 127.0.0.1:$(free_port) --http 127.0.0.1:$(free_port) --otlp-http off \
	--otlp-grpc 127.0.0.1:$GP --db "$T_TMP/b.db" >"$T_TMP/b.log" 2>&1
ok "an --otlp-grpc ADDR in use: exit 1 naming it" bash -c "[ $? = 1 ] && grep -q -- '--otlp-grpc 127.0.0.1:$GP' '$T_TMP/b.log'"
ok "collector still up" coll_alive
ok "it stops promptly with gRPC connections open" bash -c "kill $CPID; for i in \$(seq 50); do kill -0 $CPID 2>/dev/null || exit 0; sleep 0.1; done; exit 1"
done_testing
