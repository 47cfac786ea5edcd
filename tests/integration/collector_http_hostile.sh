#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The collector's HTTP port against hostile clients (issue #10): request
# smuggling framings are refused with 400 before any body is read; Host
# (DNS rebinding) and Origin (CSRF) checks on a loopback listener; with
# --token every data route needs it, GETs too, and a body is never read
# without it; more than 1,024 descriptors (poll, not select) and 300
# slowloris connections still leave the port serving.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
ulimit -n 8192 2>/dev/null || true

# no cap per address: the 1,030 idle connections below come from one
coll_start "$T_TMP/db" --max-conns-per-peer 0
export HP WP

# raw REQUEST-BYTES (python literal): what the server answers in 3 s.
raw() {
	python3 - "$1" <<'PY'
import os, socket, sys
s = socket.create_connection(('127.0.0.1', int(os.environ['HP'])))
s.settimeout(3)
s.sendall(eval(sys.argv[1]))
out = b''
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    out += b'<TIMEOUT>'
sys.stdout.write(out.decode('latin-1'))
PY
}
H='Host: 127.0.0.1\r\nContent-Type: application/json\r\n'

r=$(raw "b'POST /api/v2/spans HTTP/1.1\r\n$H""Content-Length: 2\r\nContent-Length: 40\r\n\r\n[]GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'")
ok "two different Content-Length: 400" grep -q "^HTTP/1.1 400" <<<"$r"
ok "... naming the reason" grep -q "Content-Length given 2 times" <<<"$r"
ok "... and the smuggled request is not answered" test "$(grep -c '^HTTP/1.1' <<<"$r")" -eq 1
r=$(raw "b'POST /api/v2/spans HTTP/1.1\r\n$H""Transfer-Encoding : chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n'")
ok "'Transfer-Encoding : chunked': 400" grep -q "^HTTP/1.1 400.*" <<<"$r"
ok "... naming the header" grep -q "header name 'Transfer-Encoding ' has whitespace" <<<"$r"
r=$(raw "b'POST /api/v2/spans HTTP/1.1\r\n$H""Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n'")
ok "Content-Length with Transfer-Encoding: 400" grep -q "^HTTP/1.1 400" <<<"$r"
r=$(raw "b'POST /api/v2/spans HTTP/1.1\r\n$H""Transfer-Encoding: gzip, chunked\r\n\r\n'")
ok "a transfer coding other than chunked: 400" grep -q "^HTTP/1.1 400" <<<"$r"
# A chunk of 2^64-1 bytes: read only up to --max-body, then closed.
python3 - <<'PY' >"$T_TMP/huge"
import os, socket
s = socket.create_connection(('127.0.0.1', int(os.environ['HP'])))
s.settimeout(10)
s.sendall(b'POST /api/v2/spans HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n'
          b'Content-Type: application/json\r\n\r\nffffffffffffffff\r\n')
sent = 0
try:
    for _ in range(256):
        s.sendall(b'x' * (1 << 20))
        sent += 1
except OSError:
    pass
print(sent)
PY
ok "a 2^64-1 chunk: closed after twice --max-body, 16M (sent $(cat "$T_TMP/huge") of 256 MiB)" \
	test "$(cat "$T_TMP/huge")" -lt 96
ok "collector up" coll_alive

code() { curl -s -o "$T_TMP/body" -w '%{http_code}' "$@"; }
ok "Host naming another site (DNS rebinding): 403" \
	test "$(code -H 'Host: evil.example' "$URL/api/v2/services")" = 403
ok "Host localhost:PORT: 200" test "$(code -H "Host: localhost:$HP" "$URL/api/v2/services")" = 200
ok "POST from another origin (CSRF): 403" \
	test "$(code -H 'Origin: http://evil.example' -H 'Content-Type: application/json' --data '[]' "$URL/api/v2/spans")" = 403
ok "POST from the server's own origin: 202" \
	test "$(code -H "Origin: http://127.0.0.1:$HP" -H 'Content-Type: application/json' --data '[]' "$URL/api/v2/spans")" = 202

# More than FD_SETSIZE descriptors in the collector: 1,030 idle wire
# connections (select() dropped every HTTP request from here on).
python3 - "$WP" "$T_TMP/held" <<'PY' &
import os, socket, sys, time
socks = []
for i in range(1030):
    try:
        socks.append(socket.create_connection(('127.0.0.1', int(sys.argv[1]))))
    except OSError:
        break
open(sys.argv[2], 'w').write(str(len(socks)))
time.sleep(60)
PY
HOLDER=$!; T_PIDS+=($HOLDER)
wait_for 30 test -s "$T_TMP/held"
# connect() returns before the collector accept()s: its count is polled
# (1 s after the client's last connect was too soon for it: 1,024 seen)
nfd_gt() { [ "$(ls /proc/$CPID/fd | wc -l)" -gt "$1" ]; }
wait_for 30 nfd_gt 1024
nfd=$(ls /proc/$CPID/fd | wc -l)
ok "the collector holds more than 1,024 descriptors ($nfd)" test "$nfd" -gt 1024
ok "... and still answers HTTP" test "$(code -m 5 "$URL/health")" = 200
kill $HOLDER; wait $HOLDER 2>/dev/null

# Slowloris: 300 connections sending a header byte now and then.
python3 - <<'PY' &
import os, socket, time
socks = []
for i in range(300):
    s = socket.create_connection(('127.0.0.1', int(os.environ['HP'])))
    s.sendall(b'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ')
    socks.append(s)
for _ in range(30):
    time.sleep(1)
    for s in socks:
        try:
            s.sendall(b'a')
        except OSError:
            pass
PY
LORIS=$!; T_PIDS+=($LORIS)
sleep 2
ok "300 slowloris connections: a client is still served" test "$(code -m 5 "$URL/health")" = 200
kill $LORIS; wait $LORIS 2>/dev/null
coll_stop

# --token: every data route needs it, GETs too; /health and the UI do not.
echo s3cret-token >"$T_TMP/token"
coll_start "$T_TMP/db2" --token s3cret-token
ok "--token: GET /api/v2/services without it: 401" test "$(code "$URL/api/v2/services")" = 401
ok "--token: GET /metrics without it: 401" test "$(code "$URL/metrics")" = 401
ok "--token: a wrong token of the same length: 401" \
	test "$(code -H 'Authorization: Bearer s3cret-tokeX' "$URL/api/v2/services")" = 401
ok "--token: with it: 200" \
	test "$(code -H 'Authorization: Bearer s3cret-token' "$URL/api/v2/services")" = 200
ok "--token: /health needs none" test "$(code "$URL/health")" = 200
ok "--token: the UI page needs none" test "$(code "$URL/")" = 200
head -c 15000000 /dev/zero >"$T_TMP/big"
t0=$(date +%s%N)
c=$(code -H 'Content-Type: application/json' -H 'Expect:' --data-binary @"$T_TMP/big" "$URL/api/v2/spans")
t1=$(date +%s%N)
ok "--token: a 15 MB POST without it: 401 ($c), answered on its headers" test "$c" = 401
diag "15 MB POST without the token answered in $(( (t1 - t0) / 1000000 )) ms"
ok "collector up" coll_alive
coll_stop

[ $T_FAILED -eq 0 ] || tail -20 "$T_TMP/collector.log"
done_testing
