#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent port's bounds against hostile local clients (#10): idle
# connections that never say HELLO are closed; a frame trickled a byte at a
# time is closed when its deadline passes, however steady the trickle;
# a frame before HELLO is at most 64 KiB (#20);
# frames announcing 16 MiB cannot make the collector hold more than
# --max-memory between them (the over-budget ones are told "busy" and
# closed, the collector's RSS stays bounded, a real agent's batches are
# still stored); --max-conns-per-peer caps one address; HTTP bodies past
# --max-memory get 503 + Retry-After.  Every refusal is counted in /metrics.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"

# Test point: 1 s to say HELLO, 3 s to finish a frame (10 s and 30 s in use).
export FAY_WIRE_TEST_TIMEOUTS=1000,3000
coll_start "$T_TMP/c.db" --max-memory 48M --max-conns-per-peer 40 || { fail "collector starts"; done_testing; exit; }
export WP

cat >"$T_TMP/w.py" <<'PY'
import json, socket, struct, sys, time, zlib
def frame(t, payload, seq=0):
    h = struct.pack("<IHHIIQ", 0x57594146, 1, t, len(payload), 0, seq)
    c = zlib.crc32(payload, zlib.crc32(h))
    return struct.pack("<IHHIIQ", 0x57594146, 1, t, len(payload), c, seq) + payload
def conn():
    return socket.create_connection(("127.0.0.1", int(__import__("os").environ["WP"])))
def hello(s, n):
    s.sendall(frame(1, json.dumps({"agent_id": "%032x" % (0xabc000 + n), "host": "hostile-%d" % n,
                                   "version": "test"}).encode()))
    s.settimeout(5)
    return s.recv(4096)
def closed_with(s, what, limit):
    # wait for the ERROR frame and the close; return (seconds, text)
    t0 = time.time(); got = b""
    s.settimeout(limit)
    try:
        while True:
            x = s.recv(65536)
            if not x: break
            got += x
    except (socket.timeout, ConnectionResetError):
        pass
    return time.time() - t0, got
PY

# 1. idle: no HELLO
python3 - "$T_TMP" >"$T_TMP/idle" 2>&1 <<'PY'
import sys; sys.path.insert(0, sys.argv[1]); from w import *
socks = [conn() for _ in range(20)]
res = [closed_with(s, "", 5) for s in socks]
print("closed", sum(1 for t, g in res if b"no HELLO within 1 s" in g and t < 3), "of", len(res))
PY
diag "$(cat "$T_TMP/idle")"
ok "20 idle connections are each closed after 1 s without HELLO, saying why" grep -q "^closed 20 of 20" "$T_TMP/idle"

# 1b. before HELLO (#20): a frame announcing 16 MiB is refused on its
# header, nothing of it held; a real HELLO after it on another connection
# still works, and the same 16 MiB frame is taken after one (case 3)
python3 - "$T_TMP" >"$T_TMP/prehello" 2>&1 <<'PY'
import sys; sys.path.insert(0, sys.argv[1]); from w import *
socks = [conn() for _ in range(8)]
for s in socks:
    s.sendall(struct.pack("<IHHIIQ", 0x57594146, 1, 3, 16 << 20, 0, 1) + b"x" * 4096)
res = [closed_with(s, "", 5) for s in socks]
print("refused", sum(1 for t, g in res if b"before HELLO (and its token) a frame is at most 65536 bytes" in g and t < 1), "of", len(res))
print(res[0][1][24:300])
s = conn(); print("hello after:", b"version" in hello(s, 2))
PY
while IFS= read -r l; do diag "$l"; done <"$T_TMP/prehello"
ok "8 frames of 16 MiB before HELLO: each refused on its header, at once, saying why" \
	grep -q "^refused 8 of 8" "$T_TMP/prehello"
ok "... and a HELLO is still taken" grep -q "^hello after: True" "$T_TMP/prehello"

# 2. a frame trickled a byte every 0.2 s after a real HELLO
python3 - "$T_TMP" >"$T_TMP/trickle" 2>&1 <<'PY'
import sys, time; sys.path.insert(0, sys.argv[1]); from w import *
s = conn(); print("hello:", hello(s, 1)[:40])
f = frame(3, b"x" * 100000, seq=1)
t0 = time.time(); i = 0
try:
    while time.time() - t0 < 8:
        s.send(f[i:i + 1]); i += 1; time.sleep(0.2)
except OSError:
    pass
t, g = closed_with(s, "", 2)
print("closed after %.1f s, %d bytes sent:" % (time.time() - t0, i), g[24:200])
PY
while IFS= read -r l; do diag "$l"; done <"$T_TMP/trickle"
ok "a trickled frame is closed at its 3 s deadline, saying why" \
	grep -q "closed after [345]\..*a frame begun is not complete after 3 s" "$T_TMP/trickle"

# 3. 30 connections announcing 16 MiB BATCHes, each sending 4 MiB of it
python3 - "$T_TMP" "$CPID" >"$T_TMP/mem" 2>&1 <<'PY'
import sys, threading, time; sys.path.insert(0, sys.argv[1]); from w import *
pid = sys.argv[2]
def rss():
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS:"): return int(l.split()[1]) // 1024
busy = [0]; lock = threading.Lock(); peak = [0]
def one(n):
    s = conn(); hello(s, 100 + n)
    h = frame(3, b"\0" * 0, seq=1)[:24]
    import struct, zlib
    hdr = struct.pack("<IHHIIQ", 0x57594146, 1, 3, 16 << 20, 0, 1)
    try:
        s.sendall(hdr)
        chunk = b"\1" * 65536
        for _ in range(64):
            s.sendall(chunk)
    except OSError:
        pass
    # until the collector closes it: at once with "busy", or at the frame's
    # 3 s deadline (a close of ours first, 3.5 s after the header as this
    # was, is no timeout: under load the deadline came later and the count
    # below fell short)
    t, g = closed_with(s, "", 30)
    if b"busy" in g:
        with lock: busy[0] += 1
    s.close()
ts = [threading.Thread(target=one, args=(n,)) for n in range(30)]
for t in ts: t.start()
for _ in range(20):
    peak[0] = max(peak[0], rss()); time.sleep(0.1)
for t in ts: t.join()
print("busy", busy[0], "peak_rss_mb", peak[0])
PY
diag "$(cat "$T_TMP/mem")"
read -r _ nbusy _ peak < "$T_TMP/mem"
ok "connections past --max-memory 48M are told busy and closed ($nbusy of 30)" test "${nbusy:-0}" -ge 15
ok "the collector's RSS stays bounded (${peak:-?} MiB, 30 x 16 MiB announced)" test "${peak:-9999}" -lt 150
ok "/metrics counts them: fay_collector_wire_busy_total" test "$(metric fay_collector_wire_busy_total)" = "$nbusy"
ok "every byte taken was given back (fay_collector_memory_bytes: only curl's own connection, 64 KiB)" \
	wait_for 10 metric_is fay_collector_memory_bytes 65536
ok "... after peaking at most the limit" test "$(metric fay_collector_memory_peak_bytes)" -le $((48 << 20))
ok "a real client's batch is still stored" bash -c \
	"'$BUILD/tests/fay-wire-client' -a 127.0.0.1:$WP -n 2 -m 5 send | grep -c '^ack' | grep -qx 2"

# 4. per address
python3 - "$T_TMP" >"$T_TMP/peer" 2>&1 <<'PY'
import sys; sys.path.insert(0, sys.argv[1]); from w import *
socks = [conn() for _ in range(40)]
for n, s in enumerate(socks): hello(s, 200 + n)
x = conn(); t, g = closed_with(x, "", 3)
print(g[24:200])
PY
diag "$(cat "$T_TMP/peer")"
ok "the 41st connection from one address is refused, naming --max-conns-per-peer" \
	grep -q "too many connections from 127.0.0.1: 40, the collector.*--max-conns-per-peer" "$T_TMP/peer"
ok "counted: fay_collector_wire_peer_refused_total 1" test "$(metric fay_collector_wire_peer_refused_total)" = 1
# 20 idle, 1 trickle, and the big frames that fit in the budget: begun,
# never finished, closed at their deadline
want=$((20 + 1 + 30 - ${nbusy:-0}))
ok "timeouts counted: fay_collector_wire_timeouts_total $want" \
	test "$(metric fay_collector_wire_timeouts_total)" = "$want"

# 5. HTTP bodies past --max-memory: 503 + Retry-After, then accepted again
python3 - "$HP" >"$T_TMP/http" 2>&1 <<'PY'
import socket, sys, threading, time
port = int(sys.argv[1]); codes = []
def slow():
    s = socket.create_connection(("127.0.0.1", port))
    body = b"[" + b" " * (15 << 20) + b"]"
    s.sendall(b"POST /api/v2/spans HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
    try:
        for i in range(0, len(body), 1 << 20):
            s.sendall(body[i:i + (1 << 20)]); time.sleep(0.05)
    except OSError:
        pass
    s.settimeout(10)
    r = b""
    try:
        while b"\r\n\r\n" not in r:
            x = s.recv(4096)
            if not x: break
            r += x
    except socket.timeout:
        pass
    codes.append((r.split(b" ")[1] if r else b"none", b"Retry-After: 1" in r))
ts = [threading.Thread(target=slow) for _ in range(6)]
for t in ts: t.start()
for t in ts: t.join()
print("codes", sorted(c.decode() for c, _ in codes), "retry_after", all(r for c, r in codes if c == b"503"))
PY
diag "$(cat "$T_TMP/http")"
ok "6 concurrent 15 MB bodies with --max-memory 48M: some 503 with Retry-After, the rest 202" \
	grep -qE "codes \['202', .*'503'.*\] retry_after True" "$T_TMP/http"
ok "counted: fay_collector_http_busy_total > 0" test "$(metric fay_collector_http_busy_total)" -gt 0
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data '[]' "$URL/api/v2/spans")
ok "after the burst a POST is accepted again (202)" test "$code" = 202
ok "the collector is still serving" coll_alive
done_testing
