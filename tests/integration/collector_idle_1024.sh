#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# 1,024 idle TCP connections to the agent port (#10: they held every slot
# forever, no timeout before the first frame, and real agents were
# refused).  With the collector's slots capped at 1,024, 1,024
# connections from 32 loopback addresses (32 each, under the per-address
# cap) that never say HELLO are each closed after the HELLO timeout (1 s
# here, the test point; 10 s in use) with the reason, counted in
# /metrics, and a real client connecting afterwards gets its batches
# acknowledged and stored.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 4096 ] || skip_all "needs an open-file hard limit of 4096"
ulimit -Sn "$(ulimit -Hn)"
export FAY_WIRE_TEST_TIMEOUTS=1000,3000
coll_start "$T_TMP/c.db" --max-conns 1024 || { fail "collector starts"; done_testing; exit; }
export WP
python3 - >"$T_TMP/idle" 2>&1 <<'PY'
import os, socket, time
wp = int(os.environ["WP"])
socks = []
for n in range(1024):
    s = socket.create_connection(("127.0.0.1", wp), source_address=("127.0.3.%d" % (1 + n % 32), 0))
    socks.append(s)
print("open", len(socks))
t0 = time.time(); closed = 0; said = 0
for s in socks:
    s.settimeout(max(0.1, 8 - (time.time() - t0)))
    got = b""
    try:
        while True:
            x = s.recv(4096)
            if not x:
                break
            got += x
    except (socket.timeout, ConnectionResetError):
        continue
    closed += 1
    said += b"no HELLO within 1 s" in got
print("closed", closed, "said", said, "in %.1f s" % (time.time() - t0))
PY
diag "$(cat "$T_TMP/idle")"
ok "1,024 idle connections were open at once" grep -q "^open 1024" "$T_TMP/idle"
ok "... each closed by the collector without a HELLO" grep -q "^closed 1024 " "$T_TMP/idle"
ok "... saying why" grep -q " said 1024 " "$T_TMP/idle"
ok "counted: fay_collector_wire_timeouts_total >= 1024" test "$(metric fay_collector_wire_timeouts_total)" -ge 1024
ok "a real client afterwards: both batches acknowledged" bash -c \
	"'$BUILD/tests/fay-wire-client' -a 127.0.0.1:$WP -n 2 -m 5 send | grep -c '^ack' | grep -qx 2"
ok "the collector is still up" coll_alive
done_testing
