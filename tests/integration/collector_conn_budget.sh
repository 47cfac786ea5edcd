#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every port's per-connection memory counts against --max-memory (#10):
# a connection takes coll_conn_mem() (64 KiB, 128 KiB with TLS) from the
# budget when it is accepted and gives it back when it closes; an agent
# connection's frame buffer (64 KiB) is taken on its first frame.  With
# --max-memory 4M, idle agent connections that said HELLO fill it; the
# next ones on the agent port are told "busy" at once, HTTP, OTLP/HTTP and
# OTLP/gRPC connections are closed at accept; each is counted
# (fay_collector_conn_busy_total); once they close every byte is back and
# real clients are served again.  Then the same over TLS.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"

OP=$(free_port)
GP=$(free_port)
coll_start "$T_TMP/c.db" --max-memory 4M --otlp-http 127.0.0.1:$OP --otlp-grpc 127.0.0.1:$GP ||
	{ fail "collector starts"; done_testing; exit; }

# hold.py HTTP-PORT WIRE-PORT OTLP-PORT GRPC-PORT TLS(0|1): fill the budget
# with agent connections, then try every port; prints what happened
cat >"$T_TMP/hold.py" <<'PY'
import json, socket, ssl, struct, sys, time, zlib
hp, wp, op, gp, tls = (int(x) for x in sys.argv[1:6])
def frame(t, payload):
    h = struct.pack("<IHHIIQ", 0x57594146, 1, t, len(payload), 0, 0)
    c = zlib.crc32(payload, zlib.crc32(h))
    return struct.pack("<IHHIIQ", 0x57594146, 1, t, len(payload), c, 0) + payload
def conn(port, alpn=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if alpn:
            ctx.set_alpn_protocols([alpn])
        s = ctx.wrap_socket(s)
    return s
def read_all(s, limit):
    got = b""
    s.settimeout(limit)
    try:
        while True:
            x = s.recv(4096)
            if not x:
                return got, "closed"
            got += x
            if b"HELLO" in got or len(got) > 40 and b"busy" not in got:
                return got, "open"
    except socket.timeout:
        return got, "open"
    except OSError:
        return got, "closed"
held, busy = [], 0
for n in range(80):
    try:
        s = conn(wp)
        s.sendall(frame(1, json.dumps({"agent_id": "%032x" % (0xb0d000 + n + 1000 * tls),
                                       "host": "held-%d" % n, "version": "test"}).encode()))
        got, st = read_all(s, 5)
    except OSError as e:
        # over TLS the ERROR frame (plaintext) fails the handshake
        got, st = b"busy (TLS handshake: %s)" % str(e).encode() if tls else b"", "closed"
    if b"busy" in got:
        busy += 1
        if busy == 1:
            print("agent busy says:", got[24:200].decode(errors="replace"))
    elif st == "open":
        held.append(s)
    if busy >= 5:
        break
print("agent held", len(held), "busy", busy)
def refused(port, req, alpn=None):
    try:
        s = conn(port, alpn)
        s.sendall(req)
        got, st = read_all(s, 5)
        return st == "closed" and not got
    except OSError:
        return True
http = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
print("http refused", sum(refused(hp, http) for _ in range(3)), "of 3")
print("otlp-http refused", sum(refused(op, http) for _ in range(3)), "of 3")
print("grpc refused", sum(refused(gp, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0", "h2")
                          for _ in range(3)), "of 3")
for s in held:
    s.close()
PY

# check LABEL AGENT-KIB CONN-KIB TLS: one round over the collector now
# running, whose agent connections cost AGENT-KIB and others CONN-KIB
check() {
	local label=$1 per=$2 conn=$3 held nbusy
	python3 "$T_TMP/hold.py" "$HP" "$WP" "$OP" "$GP" "$4" >"$T_TMP/hold.$label" 2>&1
	while IFS= read -r l; do diag "$l"; done <"$T_TMP/hold.$label"
	read -r _ _ held _ nbusy < <(grep '^agent held' "$T_TMP/hold.$label")
	# 4 MiB / PER a connection (the HELLO frames' buffers included); a
	# connection or two of the test's own curl may still be closing
	ok "$label: idle agent connections fill --max-memory 4M (${held:-?} held, at most $((4096 / per)))" \
		test "${held:-0}" -le $((4096 / per)) -a "${held:-0}" -ge $((4096 / per - 3))
	if [ "$4" = 0 ]; then
		ok "$label: the next ones are told why at once: ERROR \"busy ... --max-memory\"" \
			grep -q "^agent busy says: .*\"busy: .*--max-memory" "$T_TMP/hold.$label"
	else
		ok "$label: the next ones are turned away at once" test "${nbusy:-0}" = 5
	fi
	ok "$label: HTTP connections are closed at accept meanwhile" grep -q "^http refused 3 of 3" "$T_TMP/hold.$label"
	ok "$label: OTLP/HTTP connections too" grep -q "^otlp-http refused 3 of 3" "$T_TMP/hold.$label"
	ok "$label: OTLP/gRPC connections too" grep -q "^grpc refused 3 of 3" "$T_TMP/hold.$label"
	ok "$label: every byte is given back once they close (only this curl's own connection, $conn KiB)" \
		wait_for 20 metric_is fay_collector_memory_bytes $((conn * 1024))
	ok "$label: the refusals are counted: fay_collector_conn_busy_total $((nbusy + 9))" \
		test "$(metric fay_collector_conn_busy_total)" = $((nbusy + 9))
	ok "$label: the budget never went past the limit" \
		test "$(metric fay_collector_memory_peak_bytes)" -le $((4 << 20))
}

# plaintext: 64 KiB a connection, 64 KiB more for an agent's frame buffer
check plain 128 64 0
ok "a real agent's batches are stored after" bash -c \
	"'$CLIENT' -a 127.0.0.1:$WP -n 2 -m 5 send | grep -c '^ack' | grep -qx 2"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data '[]' "$URL/api/v2/spans")
ok "an HTTP POST is accepted after (202)" test "$code" = 202
coll_stop

command -v openssl >/dev/null || { done_testing; exit; }
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T_TMP/k.pem" \
	-out "$T_TMP/c.pem" -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
chmod 600 "$T_TMP/k.pem"
coll_start "$T_TMP/t.db" --max-memory 4M --otlp-http 127.0.0.1:$OP --otlp-grpc 127.0.0.1:$GP \
	--tls-cert "$T_TMP/c.pem" --tls-key "$T_TMP/k.pem" || true
URL=https://127.0.0.1:$HP
metric() { curl -s --cacert "$T_TMP/c.pem" "$URL/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
ok "a TLS collector starts" wait_for 10 curl -sf --cacert "$T_TMP/c.pem" "$URL/health"
# TLS: 128 KiB a connection, 64 KiB more for an agent's frame buffer
check tls 192 128 1
ok "the collector is still serving" wait_for 10 curl -sf --cacert "$T_TMP/c.pem" "$URL/health"
done_testing
