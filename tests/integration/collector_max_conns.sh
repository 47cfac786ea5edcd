#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay collector --max-conns N: the agent port takes N connections at once;
# the next is refused with an ERROR frame naming the limit, the collector
# keeps serving, and a freed slot is taken again.  A bad value is refused
# at start.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"

out=$("$FAY" collector --max-conns 0 2>&1)
[ $? -eq 2 ] && grep -q "max-conns '0': expected a number" <<<"$out" &&
	pass "--max-conns 0 is refused with the reason" || fail "--max-conns 0" "$out"

coll_start "$T_TMP/c.db" --max-conns 2 || { fail "collector starts"; done_testing; exit; }
python3 - "$WP" >"$T_TMP/py" 2>&1 <<'PY'
import socket, sys, time
port = int(sys.argv[1])
def conn():
    return socket.create_connection(("127.0.0.1", port))
def reply(s, limit):
    s.settimeout(limit)
    try:
        return s.recv(4096)
    except socket.timeout:
        return b""
a, b = conn(), conn()
time.sleep(0.3)
c = conn()
# the refusal comes at once; the generous limit only matters under load
r = reply(c, 30)
print("third:", r)
print("refused" if b"too many connections: 2, the collector's --max-conns" in r else "not refused")
a.close()
# the collector frees a's slot once its thread sees the close: a fixed
# 0.5 s could be too short under load, so a refused try is made again
# (for up to 30 s); taken: no refusal within 1 s
t0 = time.time()
while True:
    d = conn()
    r = reply(d, 1.0)
    if r == b"" or time.time() - t0 > 30:
        break
    d.close()
    time.sleep(0.2)
print("after a slot freed:", r)
print("taken" if r == b"" else "refused again")
PY
while IFS= read -r l; do diag "$l"; done <"$T_TMP/py"
ok "the third connection is refused, naming the limit" grep -q '^refused$' "$T_TMP/py"
ok "a freed slot is taken again (the collector waits for its HELLO)" grep -q '^taken$' "$T_TMP/py"
ok "the collector is still serving" coll_alive
done_testing
