#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cluster queries for real: a collector and three real `fay agent`
# processes (hosts h1 h2 h3), each host with its own copy of the workload
# binary in its own directory, so the function probe ./qw:fay_work_fn
# resolves to a different file on each host and every host has its own
# truth (agents on one machine share a kernel).  Answers must equal the
# per-host truths exactly; windows carry their completeness; failures
# (a host that cannot run the query, kill -9, SIGSTOP, a client that
# leaves, a collector restart, malformed frames, partial states of
# another format version) behave as docs/QUERY.md says.
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/collector_lib.bash"
W=$BUILD/tests/bin/query_work
[ -x "$W" ] || skip_all "query_work is not built (make)"

declare -A APID
HOSTS="h1 h2 h3"
declare -A K=([h1]=100 [h2]=200 [h3]=300)

agent_start() {
	local h=$1 d=$T_TMP/$1
	mkdir -p "$d"
	[ -e "$d/qw" ] || [ -e "$d/no-qw" ] || cp "$W" "$d/qw"
	( cd "$d" && exec "$FAY" agent --collector 127.0.0.1:$WP --host "$h" \
		--shm-dir "$d" --state-dir "$d" ) >>"$T_TMP/$h.log" 2>&1 &
	APID[$h]=$!
	T_PIDS+=($!)
}

# query connections the collector has (its log says so)
qconns() { grep -c "query connection from $1 " "$T_TMP/collector.log"; }
all_connected() {
	for h in $HOSTS; do
		[ "$(curl -s "$URL/api/cluster/peers" | grep -o "\"host\":\"$h\"" | wc -l)" -ge 1 ] || return 1
	done
}

# cq OUT ERR ARGS...: fay query --cluster in the background ($QPID)
cq() {
	local out=$1 err=$2
	shift 2
	timeout 60 "$FAY" query --cluster "$URL" "$@" >"$out" 2>"$err" &
	QPID=$!
}
# attached N ERR: wait until N hosts said attached: hosts, not lines (each
# time one more answers, fay query prints every attached host again; after
# 2 s without all answers, as under load, 2 of 3 attached made 3 lines)
n_attached() { [ "$(hosts_attached "$2")" -ge "$1" ]; }
attached() { wait_for 15 n_attached "$1" "$2"; }
# work GO: start each host's workload, held until GO exists
work() {
	for h in $HOSTS; do
		[ -x "$T_TMP/$h/qw" ] || continue
		QW_WAIT=$1 "$T_TMP/$h/qw" calls "${K[$h]}" &
		T_PIDS+=($!)
	done
}
sum_to() { echo $(($1 * ($1 - 1) / 2)); }

coll_start "$T_TMP/c.db"
for h in $HOSTS; do agent_start "$h"; done
ok "three agents open query connections" wait_for 15 all_connected
k=$(uname -r)
[ "$(curl -s "$URL/api/cluster/peers" | grep -o "\"kernel\":\"$k\",\"btf\":true" | wc -l)" -eq 3 ] &&
	pass "each host says what it has: kernel $k, BTF (GET /api/cluster/peers)" ||
	fail "peers' kernel and BTF" "$(curl -s "$URL/api/cluster/peers")"

# ---- exact answers ----------------------------------------------------------
# (the queries the workloads run under last 7-8 s: a query's time counts
# from its start and the hosts' attach comes out of it; at 3-4 s, under
# load, the hosts had not answered by the end)
Q='from c in cluster.function("./qw:fay_work_fn") group c by c.host into g
   select { host: g.key, n: g.count(), s: g.sum(c.arg(0)), hi: g.max(c.arg(0)) } for 8s'
cq "$T_TMP/o1" "$T_TMP/e1" --json "$Q"
work "$T_TMP/go1"
attached 3 "$T_TMP/e1" && touch "$T_TMP/go1"
wait $QPID
RC=$?
want=""
for h in $HOSTS; do
	want+="{\"host\":\"$h\",\"n\":${K[$h]},\"s\":$(sum_to ${K[$h]}),\"hi\":$((K[$h] - 1))}"$'\n'
done
if [ $RC -eq 0 ] && [ "$(cq_rows "$T_TMP/o1")" = "${want%$'\n'}" ]; then
	pass "grouped by host: every host's count, sum and max exactly (--json, the local format)"
else
	fail "grouped by host (rc=$RC)" "got: $(head -c 600 "$T_TMP/o1")" "want: $want" "$(head -c 800 "$T_TMP/e1")"
fi
grep -q 'result: 3 of 3 hosts answered' "$T_TMP/e1" && pass "completeness: 3 of 3 hosts answered" ||
	fail "completeness line" "$(cat "$T_TMP/e1")"
# --json carries it too, for scripts: one line after the result's rows
[ "$(tail -n 1 "$T_TMP/o1")" = '{"final":true,"provisional":false,"amended":false,"hosts":{"asked":3,"answered":3,"late":0,"missing":[],"failed":[]},"dropped":{}}' ] &&
	[ "$(grep -c '"hosts":' "$T_TMP/o1")" = 1 ] &&
	pass "--json: the result's completeness as a JSON line after its rows" ||
	fail "--json completeness line" "$(cat "$T_TMP/o1")"

Q='from c in cluster.function("./qw:fay_work_fn") select { n: count(), q: quantile(c.arg(0), 0.5), d: distinct(c.arg(0)) } for 8s'
cq "$T_TMP/o2" "$T_TMP/e2" "$Q"
work "$T_TMP/go2"
attached 3 "$T_TMP/e2" && touch "$T_TMP/go2"
wait $QPID
read -r n q d < <(tail -n 1 "$T_TMP/o2")
# values 0..99, 0..199, 0..299: 600 events, 300 distinct values; the
# 300th smallest (p50) is 99
if [ "$(head -n 1 "$T_TMP/o2" | tr -s ' ')" = " n q d" ] || head -n 1 "$T_TMP/o2" | grep -q '^ *n *q *d'; then
	[ "$n" = 600 ] && pass "no group: the total over hosts (600)" || fail "total" "$(cat "$T_TMP/o2")"
	# quantile and distinct merge sketches: within their stated error bounds
	[ "$q" -ge 95 ] && [ "$q" -le 103 ] && pass "quantile sketch merged across hosts: p50 $q (true 99, 3.125%)" ||
		fail "merged p50 $q" "$(cat "$T_TMP/o2")"
	[ "$d" -ge 280 ] && [ "$d" -le 320 ] && pass "distinct sketch merged across hosts: $d (true 300)" ||
		fail "merged distinct $d"
else
	fail "table header" "$(cat "$T_TMP/o2")" "$(cat "$T_TMP/e2")"
fi

# ---- windows ---------------------------------------------------------------
# 9 s (was 5), and the windows before the hosts attached are not counted:
# under load their attach took some of the 5 windows (as "0 of 3")
Q='from c in cluster.function("./qw:fay_work_fn") group c by c.host into g
   select { host: g.key, n: g.count() } window 1s for 9s'
cq "$T_TMP/o3" "$T_TMP/e3" --json "$Q"
work "$T_TMP/go3"
attached 3 "$T_TMP/e3" && touch "$T_TMP/go3"
wait $QPID
RC=$?
for h in $HOSTS; do
	got=$(grep "\"host\":\"$h\"" "$T_TMP/o3" | sed 's/.*"n":\([0-9]*\).*/\1/' | paste -sd+ | bc)
	[ "$got" = "${K[$h]}" ] && pass "windows: $h's counts add up to ${K[$h]}" ||
		fail "windows of $h: $got (rc=$RC)" "$(cat "$T_TMP/o3")"
done
grep -q '"window_start_ns":[0-9]*000000000,' "$T_TMP/o3" &&
	pass "windows start on wall-clock second boundaries on every host" ||
	fail "aligned windows" "$(head -3 "$T_TMP/o3")"
# --json: each window's rows, then its completeness naming the same window
python3 - "$T_TMP/o3" <<'PY' && pass "--json: every window's completeness follows its rows (same window_start_ns, 1 s long)" ||
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows, wins = [], 0
for l in lines:
    if "hosts" in l:
        assert set(l) == {"window_start_ns", "window_end_ns", "final", "provisional",
                          "amended", "hosts", "dropped"}, l
        assert l["window_end_ns"] - l["window_start_ns"] <= 1000000000, l
        assert all(r["window_start_ns"] == l["window_start_ns"] for r in rows), (rows, l)
        assert l["hosts"]["asked"] == 3, l
        rows, wins = [], wins + 1
    else:
        rows.append(l)
assert not rows and wins >= 5, (rows, wins)
assert lines[-1]["final"] is True, lines[-1]
PY
	fail "--json window completeness" "$(cat "$T_TMP/o3")"
# from the first complete window on: every window complete, 5 or more
read -r nw nall < <(awk '/^fay: window / { if (/: 3 of 3 hosts answered$/) { on = 1; c++ } if (on) a++ }
	END { print c + 0, a + 0 }' "$T_TMP/e3")
[ "$nw" -ge 5 ] && [ "$nw" = "$nall" ] && pass "every window complete: 3 of 3 hosts answered ($nw windows)" ||
	fail "complete windows: $nw of $nall" "$(cat "$T_TMP/e3")"

# ---- scope: one host ------------------------------------------------------
Q='from c in host("h2").function("./qw:fay_work_fn") group c by c.host into g
   select { host: g.key, n: g.count() } for 7s'
cq "$T_TMP/o4" "$T_TMP/e4" --json "$Q"
work "$T_TMP/go4"
attached 1 "$T_TMP/e4" && touch "$T_TMP/go4"
wait $QPID
[ "$(cq_rows "$T_TMP/o4")" = '{"host":"h2","n":200}' ] && ! grep -q 'h1\|h3' "$T_TMP/e4" &&
	pass 'host("h2"): only h2 is asked and answers' ||
	fail 'host("h2")' "$(cat "$T_TMP/o4")" "$(cat "$T_TMP/e4")"
timeout 20 "$FAY" query --cluster "$URL" 'from c in host("nosuch").syscall("read") select { n: count() } for 1s' \
	>"$T_TMP/o" 2>"$T_TMP/e"
[ $? -eq 1 ] && grep -q "host 'nosuch' has no agent connected to this collector (connected: .*h1" "$T_TMP/e" &&
	pass 'host("nosuch"): an error naming the connected hosts' || fail 'host("nosuch")' "$(cat "$T_TMP/e")"

# ---- hosts that cannot run it ------------------------------------------------
mv "$T_TMP/h3/qw" "$T_TMP/h3/no-qw"
Q='from c in cluster.function("./qw:fay_work_fn") group c by c.host into g select { host: g.key, n: g.count() } for 7s'
cq "$T_TMP/o5" "$T_TMP/e5" --json "$Q"
work "$T_TMP/go5"
attached 2 "$T_TMP/e5" && wait_for 30 grep -q '^fay: h3: failed' "$T_TMP/e5" && touch "$T_TMP/go5"
wait $QPID
RC=$?
[ $RC -eq 0 ] && [ "$(cq_rows "$T_TMP/o5")" = $'{"host":"h1","n":100}\n{"host":"h2","n":200}' ] &&
	pass "a function absent on h3: h1 and h2 answer exactly" || fail "absent on h3 (rc=$RC)" "$(cat "$T_TMP/o5")" "$(cat "$T_TMP/e5")"
grep -q '"hosts":{"asked":[23],"answered":2,"late":0,"missing":\[\],"failed":\["h3"\]}' "$T_TMP/o5" &&
	pass "--json: the completeness lists h3 failed" || fail "--json failed host" "$(cat "$T_TMP/o5")"
grep -q '^fay: h3: failed: .*qw' "$T_TMP/e5" && grep -q 'could not run it: h3' "$T_TMP/e5" &&
	pass "h3 is named with its reason" || fail "h3's reason" "$(cat "$T_TMP/e5")"
mv "$T_TMP/h3/no-qw" "$T_TMP/h3/qw"

timeout 20 "$FAY" query --cluster "$URL" 'from c in cluster.function("./nosuch:fn") select { n: count() } for 2s' \
	>"$T_TMP/o" 2>"$T_TMP/e"
RC=$?
[ $RC -eq 1 ] && grep -q 'error: no host can run this query: ' "$T_TMP/e" &&
	[ "$(grep '^error: ' "$T_TMP/e" | grep -o 'h[123]: [^;]*nosuch' | wc -l)" -eq 3 ] &&
	pass "no host can run it: an error with each host's reason" || fail "nobody can run it (rc=$RC)" "$(cat "$T_TMP/e")"

# ---- an agent killed mid-query, then restarted ---------------------------------
# each step waits for what it needs (a complete window; then h2 missing)
# instead of fixed pauses of 2 and 2.5 s, and the query runs 15 s, not 8:
# the restarted agent has to start, connect and attach before the last
# windows, and an agent 5 s slower to start (load) missed them
Q='from c in cluster.syscall("getppid") group c by c.host into g select { host: g.key, n: g.count() } window 1s for 15s'
cq "$T_TMP/o6" "$T_TMP/e6" "$Q"
attached 3 "$T_TMP/e6"
wait_for 30 grep -q ': 3 of 3 hosts answered$' "$T_TMP/e6"
kill -9 "${APID[h2]}"
wait "${APID[h2]}" 2>/dev/null
wait_for 30 grep -q 'hosts answered; missing: h2$' "$T_TMP/e6"
agent_start h2
wait $QPID
RC=$?
[ $RC -eq 0 ] && grep -q 'hosts answered; missing: h2$' "$T_TMP/e6" &&
	pass "kill -9 of h2: the following windows say h2 is missing, the query goes on" ||
	fail "h2 killed (rc=$RC)" "$(cat "$T_TMP/e6")"
tail -n 2 "$T_TMP/e6" | grep -q ': 3 of 3 hosts answered' &&
	pass "h2 restarted rejoins the running query (its last windows: 3 of 3)" ||
	fail "h2 rejoins" "$(cat "$T_TMP/e6")"

# ---- SIGSTOP: a stopped agent never holds the others' windows past the grace
wait_for 15 all_connected
Q='from c in cluster.syscall("getppid") group c by c.host into g select { host: g.key, n: g.count() } window 1s for 6s'
cq "$T_TMP/o7" "$T_TMP/e7" --grace 500ms "$Q"
attached 3 "$T_TMP/e7"
kill -STOP "${APID[h3]}"
start=$SECONDS
wait $QPID
RC=$?
kill -CONT "${APID[h3]}"
[ $RC -eq 0 ] && [ $((SECONDS - start)) -le 9 ] && grep -q '(provisional): 2 of 3 hosts answered; missing: h3' "$T_TMP/e7" &&
	pass "SIGSTOP of h3: windows come out after the grace period without it ($((SECONDS - start)) s)" ||
	fail "SIGSTOP (rc=$RC, $((SECONDS - start)) s)" "$(cat "$T_TMP/e7")"

# ---- a final that comes late: a provisional result without it, then amended --
# h3 is stopped 0.1 s before the earliest the deadline can be (the query
# is asked after t0), after its snapshot with its counts went out (when
# attaching took under 2.8 s), and continued once the provisional result
# is out: stopped about 1.5 s, within the 3.5 s after which a silent host
# is dropped.
wait_for 15 all_connected
Q='from c in cluster.function("./qw:fay_work_fn") group c by c.host into g select { host: g.key, n: g.count() } for 4s'
t0=$(date +%s%N)
cq "$T_TMP/olate" "$T_TMP/elate" --json --grace 1s "$Q"
work "$T_TMP/golate"
attached 3 "$T_TMP/elate" && touch "$T_TMP/golate"
sleep "$(python3 -c "import time; print(max(0, ($t0 + 3.9e9 - time.time_ns()) / 1e9))")"
kill -STOP "${APID[h3]}"
wait_for 10 grep -q 'result (provisional)' "$T_TMP/elate"
kill -CONT "${APID[h3]}"
wait $QPID
RC=$?
grep -q '^fay: result (provisional): 2 of 3 hosts answered; missing: h3$' "$T_TMP/elate" &&
	grep -q '^fay: result (amended): 3 of 3 hosts answered, 1 late$' "$T_TMP/elate" &&
	python3 - "$T_TMP/olate" <<'PY' && pass "h3's final late: the result is provisional without h3 (not its stale snapshot), then amended with it, exact" || fail "late final (rc=$RC)" "$(cat "$T_TMP/olate" "$T_TMP/elate")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want = {"h1": 100, "h2": 200, "h3": 300}
assert len(lines) == 7, lines
first, c1, second, c2 = lines[:2], lines[2], lines[3:6], lines[6]
assert first == [{"host": h, "n": want[h]} for h in ("h1", "h2")], lines
assert second == [{"host": h, "n": want[h]} for h in ("h1", "h2", "h3")], lines
# --json carries the completeness: provisional without h3, then amended
assert c1["provisional"] is True and c1["amended"] is False, c1
assert c1["hosts"]["answered"] == 2 and c1["hosts"]["missing"] == ["h3"], c1
assert c2["amended"] is True and c2["hosts"]["answered"] == 3, c2
assert c2["hosts"]["late"] == 1 and c2["hosts"]["missing"] == [], c2
PY

# ---- a client that leaves: every agent detaches within 2 s ------------------
wait_for 15 all_connected
for h in $HOSTS; do : >"$T_TMP/$h.log.mark"; wc -l <"$T_TMP/$h.log" >"$T_TMP/$h.log.mark"; done
curl -sN -X POST -H 'Content-Type: application/json' \
	-d '{"query":"from c in cluster.syscall(\"getppid\") select { n: count() } window 1s"}' \
	"$URL/api/query" >"$T_TMP/o8" 2>/dev/null &
cpid=$!
wait_for 10 grep -q '"attached":3' "$T_TMP/o8"
kill $cpid
wait $cpid 2>/dev/null
detached() {
	for h in $HOSTS; do
		tail -n +"$(($(cat "$T_TMP/$h.log.mark") + 1))" "$T_TMP/$h.log" | grep -q 'cancelled, probes detached' || return 1
	done
}
start=$(date +%s%N)
wait_for 5 detached
t=$((($(date +%s%N) - start) / 1000000))
detached && [ $t -le 2000 ] && pass "client gone: all three agents detached their probes ($t ms)" ||
	fail "detach after the client left ($t ms)" "$(tail -n 3 "$T_TMP"/h?.log)"

# ---- malformed and foreign frames on a query connection ----------------------
cat >"$T_TMP/peer.py" <<'EOF'
import json, socket, struct, sys, time, zlib
port, mode = int(sys.argv[1]), sys.argv[2]
def frame(t, payload, crc_ok=True):
    h = struct.pack('<IHHIIQ', 0x57594146, 1, t, len(payload), 0, 0)
    crc = zlib.crc32(payload, zlib.crc32(h)) & 0xffffffff
    if not crc_ok: crc ^= 1
    return struct.pack('<IHHIIQ', 0x57594146, 1, t, len(payload), crc, 0) + payload
def recv_frame(s):
    h = b''
    while len(h) < 24:
        c = s.recv(24 - len(h))
        if not c: return None, None
        h += c
    _, _, t, n, _, _ = struct.unpack('<IHHIIQ', h)
    p = b''
    while len(p) < n: p += s.recv(n - len(p))
    return t, p
def uvar(v):
    out = b''
    while True:
        b = v & 0x7f; v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v: return out
s = socket.create_connection(('127.0.0.1', port))
hello = json.dumps({"agent_id": "ab" * 16, "host": "odd", "version": "9", "role": "query"}).encode()
s.sendall(frame(1, hello))
t, p = recv_frame(s)
if mode == 'crc':
    s.sendall(frame(12, b'', crc_ok=False))
    t, p = recv_frame(s)
    print('got', t, p.decode(errors='replace') if p else '')
    sys.exit(0)
# mode 'version': answer the next QUERY with a count state of format version 2
deadline = time.time() + 20
s.settimeout(0.5)
while time.time() < deadline:
    try:
        t, p = recv_frame(s)
    except socket.timeout:
        s.sendall(frame(12, b''))     # BEAT: alive while no QUERY comes
        continue
    if t is None: break
    if t == 8:    # QUERY
        qid = struct.unpack('<I', p[:4])[0]
        s.sendall(frame(9, struct.pack('<IB', qid, 1) + uvar(4) + b'none'))
        now = time.time_ns() // 10**9 * 10**9
        body = bytes([0]) + uvar(0) + uvar(1) + bytes([0, 2]) + uvar(0)
        head = struct.pack('<IBQQ', qid, 1, now - 10**9, now) + uvar(0) + uvar(1) + uvar(3) + b'odd' + bytes([1])
        s.sendall(frame(10, head + body))
    s.sendall(frame(12, b''))
EOF
python3 "$T_TMP/peer.py" "$WP" crc >"$T_TMP/peer.out" 2>&1
grep -q 'got 7 {"error":"BEAT frame .*checksum' "$T_TMP/peer.out" && coll_alive &&
	pass "a frame with a bad crc: an ERROR frame names it, that connection closes, the collector stays up" ||
	fail "bad crc" "$(cat "$T_TMP/peer.out")"
python3 "$T_TMP/peer.py" "$WP" version >"$T_TMP/peer.out" 2>&1 &
ppid=$!
wait_for 10 grep -q 'query connection from odd' "$T_TMP/collector.log"
Q='from c in cluster.syscall("getppid") select { n: count() } window 1s for 3s'
cq "$T_TMP/o9" "$T_TMP/e9" "$Q"
wait $QPID
RC=$?
kill $ppid 2>/dev/null
[ $RC -eq 0 ] && grep -q '^fay: odd: failed: its partial results cannot be merged here: aggregate 1 (count()): count state format version 2; this build merges version 1' "$T_TMP/e9" &&
	grep -q 'could not run it: odd' "$T_TMP/e9" &&
	pass "a partial state of another format version is refused by name; the other hosts answer" ||
	fail "version mismatch (rc=$RC)" "$(cat "$T_TMP/e9")"

# ---- collector restart: agents come back by themselves -----------------------
coll_stop
"$FAY" collector --listen 127.0.0.1:$WP --http 127.0.0.1:$HP --db "$T_TMP/c.db" \
	>>"$T_TMP/collector.log" 2>&1 &
CPID=$!
T_PIDS+=($CPID)
wait_for 10 curl -sf "$URL/health"
ok "collector restarted: the three agents reconnect their query connections" wait_for 15 all_connected
Q='from c in cluster.function("./qw:fay_work_fn") group c by c.host into g select { host: g.key, n: g.count() } for 7s'
cq "$T_TMP/o10" "$T_TMP/e10" --json "$Q"
work "$T_TMP/go10"
attached 3 "$T_TMP/e10" && touch "$T_TMP/go10"
wait $QPID
[ "$(cq_rows "$T_TMP/o10")" = $'{"host":"h1","n":100}\n{"host":"h2","n":200}\n{"host":"h3","n":300}' ] &&
	pass "after the restart the same query answers exactly" || fail "after restart" "$(cat "$T_TMP/o10")" "$(cat "$T_TMP/e10")"

coll_alive && pass "the collector is up at the end" || fail "collector died" "$(tail -5 "$T_TMP/collector.log")"
done_testing
