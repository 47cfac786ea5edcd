#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Out of descriptors, the collector's accept loops pause instead of
# spinning (#24: the OTLP/gRPC loop polled, failed accept4 with EMFILE and
# polled again at once, a CPU at 100%): under a hard open-file limit of
# 96, 150 held connections to the gRPC port and then to the agent port
# leave the collector nearly idle, say why in its log, and once they close
# both ports take connections again.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"
GP=$(free_port)
command -v prlimit >/dev/null || skip_all "needs prlimit (util-linux)"
coll_start "$T_TMP/c.db" --otlp-grpc 127.0.0.1:$GP || { fail "collector starts"; done_testing; exit; }
prlimit --pid "$CPID" --nofile=96:96
ok "the collector runs under a limit of 96 open files" \
	test "$(awk '/^Max open files/ { print $5 }' /proc/$CPID/limits)" = 96

ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' /proc/$CPID/stat; }

# hold.py PORT N GO: N connections to PORT held until the file GO exists
cat >"$T_TMP/hold.py" <<'PY'
import os, socket, sys, time
port, n, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = []
for _ in range(n):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    held.append(s)
print("held", len(held), flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
PY

# h2ok PORT: an HTTP/2 connection preface gets the server's SETTINGS
cat >"$T_TMP/h2.py" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
head = s.recv(9)
sys.exit(0 if len(head) == 9 and head[3] == 4 else 1)
PY

for port in grpc:$GP agent:$WP; do
	name=${port%%:*} p=${port#*:}
	rm -f "$T_TMP/go"
	python3 "$T_TMP/hold.py" "$p" 150 "$T_TMP/go" >"$T_TMP/hold.out" 2>&1 &
	HP_PID=$!; T_PIDS+=($HP_PID)
	ok "$name port: 150 connections held" wait_for 30 grep -q '^held 150' "$T_TMP/hold.out"
	ok "... the collector says it is out of descriptors" \
		wait_for 30 grep -q 'cannot accept a connection: Too many open files' "$T_TMP/collector.log"
	t0=$(ticks); sleep 3; t1=$(ticks)
	hz=$(getconf CLK_TCK)
	ok "... and does not spin: $((t1 - t0)) ticks of CPU in 3 s (< $((hz / 2)))" test $((t1 - t0)) -lt $((hz / 2))
	touch "$T_TMP/go"
	wait "$HP_PID" 2>/dev/null
done
ok "connections closed: /health answers" wait_for 30 curl -sf "$URL/health"
ok "... the gRPC port takes an HTTP/2 connection again" wait_for 30 python3 "$T_TMP/h2.py" "$GP"
ok "... the agent port takes a connection again" \
	wait_for 30 bash -c "python3 '$T_TMP/hold.py' $WP 1 /dev/null | grep -q '^held 1'"
ok "collector still up" coll_alive
done_testing
