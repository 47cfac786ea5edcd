#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A collector in a 512 MiB memory cgroup, at its default settings, against
# hostile local clients without a token (#20): its default --max-memory
# follows the cgroup's limit (half: 256 MiB, logged); 24 connections
# announcing 16 MiB frames before HELLO are refused on their headers; 40
# agents each sending a 16 MiB BATCH after HELLO and 24 HTTP clients each
# posting a 16 MiB body at once are held to the budget (the rest told
# "busy" / 503).  It stays up, its peak RSS (VmHWM) under the limit, and
# the cgroup saw no OOM kill.  cgroup v1 (the memory controller's
# hierarchy) or v2 (memory in the parent's subtree_control).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"
LIMIT=$((512 << 20))

# a memory cgroup of our own, under the one this shell is in
v1=$(awk '$9 == "cgroup" && $NF ~ /(^|,)memory(,|$)/ { print $5; exit }' /proc/self/mountinfo)
v2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
CG=
if [ -n "$v1" ]; then
	CG=$v1$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)/fay-memtest-$$
	CG=${CG//\/\//\/}
	mkdir "$CG" 2>/dev/null && echo $LIMIT >"$CG/memory.limit_in_bytes" || CG=
fi
if [ -z "$CG" ] && [ -n "$v2" ]; then
	P=$v2$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
	if grep -qw memory "$P/cgroup.subtree_control" 2>/dev/null; then
		CG=$P/fay-memtest-$$
		mkdir "$CG" 2>/dev/null && echo $LIMIT >"$CG/memory.max" || CG=
	fi
fi
[ -n "$CG" ] || skip_all "no memory cgroup can be made here (v1 memory controller or v2 with memory delegated)"
trap 't_cleanup; sleep 0.5; rmdir "$CG" 2>/dev/null' EXIT
diag "cgroup $CG, limit 512 MiB"
oom_kills() { # the cgroup's OOM kills so far
	if [ -f "$CG/memory.oom_control" ]; then
		awk '$1 == "oom_kill" { print $2 }' "$CG/memory.oom_control"
	else
		awk '$1 == "oom_kill" { print $2 }' "$CG/memory.events"
	fi
}

WP=$(free_port); HP=$(free_port); URL=http://127.0.0.1:$HP
sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG" "$FAY" collector \
	--listen 127.0.0.1:$WP --http 127.0.0.1:$HP --otlp-http off --otlp-grpc off \
	--db "$T_TMP/c.db" >"$T_TMP/collector.log" 2>&1 &
CPID=$!; T_PIDS+=($CPID)
ok "the collector starts in the cgroup" wait_for 30 curl -sf "$URL/health"
ok "its default --max-memory is half the cgroup's limit" \
	grep -q -- "--max-memory 256 MiB: half of the 512 MiB this collector may use (cgroup v[12]" "$T_TMP/collector.log"
diag "$(grep -- --max-memory "$T_TMP/collector.log")"
export WP HP

timeout 120 python3 - "$CPID" >"$T_TMP/hostile" 2>&1 <<'PY'
import json, os, socket, struct, sys, threading, time, zlib
pid, WP, HP = sys.argv[1], int(os.environ["WP"]), int(os.environ["HP"])
BIG = 16 << 20
def hdr(t, n, seq=1):
    return struct.pack("<IHHIIQ", 0x57594146, 1, t, n, 0, seq)
def frame(t, payload, seq=0):
    c = zlib.crc32(payload, zlib.crc32(struct.pack("<IHHIIQ", 0x57594146, 1, t, len(payload), 0, seq)))
    return struct.pack("<IHHIIQ", 0x57594146, 1, t, len(payload), c, seq) + payload
chunk = b"\1" * 65536
res = {"prehello_refused": 0, "agent_busy": 0, "agent_sent": 0, "http_503": 0, "http_other": 0}
lock = threading.Lock()
def count(k):
    with lock:
        res[k] += 1
def recv_all(s, limit=10):
    s.settimeout(limit); got = b""
    try:
        while True:
            x = s.recv(65536)
            if not x: break
            got += x
    except (socket.timeout, OSError):
        pass
    return got
def prehello(n):
    s = socket.create_connection(("127.0.0.1", WP))
    try:
        s.sendall(hdr(3, BIG))
        for _ in range(16): s.sendall(chunk)
    except OSError:
        pass
    if b"before HELLO" in recv_all(s): count("prehello_refused")
    s.close()
def agent(n):
    s = socket.create_connection(("127.0.0.1", WP))
    s.sendall(frame(1, json.dumps({"agent_id": "%032x" % (0xbad000 + n), "host": "h%d" % n,
                                   "version": "test"}).encode()))
    s.settimeout(10); s.recv(4096)
    try:
        s.sendall(hdr(3, BIG))
        for _ in range(BIG // len(chunk)): s.sendall(chunk)
        count("agent_sent")
    except OSError:
        pass
    if b"busy" in recv_all(s, 5): count("agent_busy")
    s.close()
def http(n):
    s = socket.create_connection(("127.0.0.1", HP))
    try:
        s.sendall(("POST /api/v2/spans HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n" % BIG).encode())
        for _ in range(BIG // len(chunk)): s.sendall(chunk)
    except OSError:
        pass
    got = recv_all(s, 5)
    count("http_503" if b" 503 " in got[:20] else "http_other")
    s.close()
peak = [0]; done = [False]
def watch():
    while not done[0]:
        try:
            for l in open("/proc/%s/status" % pid):
                if l.startswith("VmRSS:"): peak[0] = max(peak[0], int(l.split()[1]) >> 10)
        except OSError:
            pass
        time.sleep(0.05)
w = threading.Thread(target=watch); w.start()
ts = [threading.Thread(target=prehello, args=(i,)) for i in range(24)]
for t in ts: t.start()
for t in ts: t.join()
ts = [threading.Thread(target=agent, args=(i,)) for i in range(40)] + \
     [threading.Thread(target=http, args=(i,)) for i in range(24)]
for t in ts: t.start()
for t in ts: t.join()
done[0] = True; w.join()
print("peak_rss_mib", peak[0])
for k, v in sorted(res.items()): print(k, v)
PY
while IFS= read -r l; do diag "$l"; done <"$T_TMP/hostile"
ok "24 frames of 16 MiB before HELLO: all refused" grep -qx "prehello_refused 24" "$T_TMP/hostile"
ok "some of the 40 agents' 16 MiB frames were told busy" \
	awk '$1 == "agent_busy" && $2 > 0 { f = 1 } END { exit !f }' "$T_TMP/hostile"
ok "the collector is still up" curl -sf -o /dev/null "$URL/health"
hwm=$(awk '/^VmHWM:/ { print $2 }' /proc/$CPID/status)
diag "VmHWM ${hwm} kB; fay_collector_memory_peak_bytes $(curl -s "$URL/metrics" | awk '$1 == "fay_collector_memory_peak_bytes" { print $2 }')"
ok "its peak RSS stayed under the 512 MiB limit" test "${hwm:-999999999}" -lt $((LIMIT >> 10))
ok "the cgroup saw no OOM kill" test "$(oom_kills)" = 0
ok "the collector's memory budget is given back" wait_for 30 bash -c \
	"curl -s $URL/metrics | awk '\$1 == \"fay_collector_memory_bytes\" && \$2 < 16777216 { f = 1 } END { exit !f }'"
done_testing
