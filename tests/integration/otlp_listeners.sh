#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The OTLP listeners of `fay collector`: --otlp-http ADDR serves POST
# /v1/traces alone (OpenTelemetry's protobuf exporter with only an
# endpoint set), the same handler as the Zipkin port's; other paths 404.
# A port in use: given explicitly, the collector exits 1 naming it; the
# default (127.0.0.1:4318) taken, it warns and runs without it; 'off'.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/otlp_lib.bash"

OP=$(free_port)
coll_start "$T_TMP/fay.db" --otlp-http 127.0.0.1:$OP || { fail "collector starts"; done_testing; exit; }
# (logged before /health answers since the collector's start gate,
# collector_ready_gate.sh; the poll stays from before)
ok "the start line names the OTLP/HTTP listener" wait_for 30 grep -q "OTLP/HTTP on http://127.0.0.1:$OP" "$T_TMP/collector.log"
otlp_node "OTLP/HTTP protobuf exporter on --otlp-http: every field round-trips" \
	roundtrip proto "http://127.0.0.1:$OP/v1/traces" "$URL"
otlp_node "OTLP/HTTP JSON exporter on --otlp-http (gzip)" \
	roundtrip json-gzip "http://127.0.0.1:$OP/v1/traces" "$URL"
ok "other paths on the OTLP listener: 404 naming it" bash -c \
	"curl -s -w '%{http_code}' http://127.0.0.1:$OP/api/v2/services | tr '\\n' ' ' | grep -q 'OTLP/HTTP listener.* 404'"
ok "GET /v1/traces on it: 405" bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$OP/v1/traces) = 405 ]"

# The explicit address is taken: exit 1, naming the option and address.
"$FAY" collector --listen 127.0.0.1:$(free_port) --http 127.0.0.1:$(free_port) \
	--otlp-http 127.0.0.1:$OP --db "$T_TMP/b.db" >"$T_TMP/b.log" 2>&1
ok "an --otlp-http ADDR in use: exit 1 naming it" bash -c "[ $? = 1 ] && grep -q -- '--otlp-http 127.0.0.1:$OP' '$T_TMP/b.log'"

# The default address taken (held here if free; else someone holds it),
# until this test ends (killed at exit: 30 s could run out before the
# collector below tried it, on a loaded machine).
python3 -c '
import socket, time, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", 4318)); s.listen(1)
except OSError:
    pass
print("held", flush=True); time.sleep(600)' >"$T_TMP/hold" &
T_PIDS+=($!)
wait_for 30 grep -q held "$T_TMP/hold"
P2=$(free_port)
"$FAY" collector --listen 127.0.0.1:$(free_port) --http 127.0.0.1:$P2 --db "$T_TMP/c.db" >"$T_TMP/c.log" 2>&1 &
C2=$!
T_PIDS+=($C2)
ok "the default OTLP port taken: the collector runs" wait_for 30 curl -sf "http://127.0.0.1:$P2/health"
# (logged before /health answers, as the start line)
ok "... and says so" wait_for 30 grep -q -- '--otlp-http 127.0.0.1:4318: the port is in use; running without it' "$T_TMP/c.log"
kill $C2
"$FAY" collector --listen 127.0.0.1:$(free_port) --http 127.0.0.1:$(free_port) --otlp-http off \
	--db "$T_TMP/d.db" >"$T_TMP/d.log" 2>&1 &
T_PIDS+=($!)
ok "--otlp-http off: none" wait_for 30 grep -q 'OTLP/HTTP on off' "$T_TMP/d.log"
ok "... and no warning about it" bash -c "! grep -q -- '--otlp-http.*in use' '$T_TMP/d.log'"
ok "collector still up" coll_alive
done_testing
