#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A gzip body's decoded bytes count against --max-memory as they are
# inflated (a few KiB that inflate to MiBs: a "zip bomb"), on OTLP/HTTP
# and Zipkin's POST /api/v2/spans: the buffer grows inside the budget
# (mem_budget_realloc(): old and new charged while it copies), one that
# does not fit is answered 503 + Retry-After like a body that did not,
# and it is given back once the request is decoded.  --max-body's limit
# (413) is unchanged.  OTLP/gRPC with grpc-encoding gzip the same way
# (UNAVAILABLE with a RetryInfo).  Real collector, curl, Python's gzip and
# http.client, @grpc/grpc-js.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
. "$(dirname "$0")/otlp_lib.bash"

MIB=$((1 << 20))
CONN=$((64 << 10))
LIMIT=$((16 * MIB))
INFLATED=$((6 * MIB))
# valid OTLP JSON and Zipkin JSON (no spans) padded to 6 MiB: ~6 KiB gzipped
python3 - "$T_TMP" "$INFLATED" <<'PY'
import gzip, sys
d, n = sys.argv[1], int(sys.argv[2])
for name, head in (("otlp", b'{"resourceSpans":[]}'), ("zipkin", b"[]")):
    open("%s/%s.gz" % (d, name), "wb").write(gzip.compress(head + b" " * (n - len(head)), 9))
PY
diag "bodies: $(stat -c '%n %s' "$T_TMP"/*.gz | sed "s|$T_TMP/||" | tr '\n' ' ')inflating to $INFLATED bytes each"

# post PORT otlp|zipkin: the HTTP status of one POST of that body
post() {
	local path=/v1/traces
	[ "$2" = zipkin ] && path=/api/v2/spans
	curl -s -D "$T_TMP/h" -o "$T_TMP/b" -w '%{http_code}' -H 'Content-Type: application/json' \
		-H 'Content-Encoding: gzip' --data-binary @"$T_TMP/$2.gz" "http://127.0.0.1:$1$path"
}

OP=$(free_port)
coll_start "$T_TMP/c.db" --otlp-http 127.0.0.1:$OP --max-memory $LIMIT ||
	{ fail "collector starts"; done_testing; exit; }

# 1. one at a time: served, the decoded bytes charged, then given back
ok "OTLP/HTTP, one gzip body at a time: 200" test "$(post $OP otlp)" = 200
peak=$(metric fay_collector_memory_peak_bytes)
ok "its decoded $INFLATED bytes were charged: fay_collector_memory_peak_bytes $peak" \
	test "${peak:-0}" -gt $INFLATED -a "${peak:-0}" -le $LIMIT
ok "and given back (only curl's connections left, 64 KiB each)" \
	wait_for 20 metric_is fay_collector_memory_bytes $CONN
ok "Zipkin POST /api/v2/spans, one gzip body at a time: 202" test "$(post $HP zipkin)" = 202
ok "given back too" wait_for 20 metric_is fay_collector_memory_bytes $CONN

# 2. 24 at once (OTLP/HTTP and Zipkin): each answered 2xx or 503 +
# Retry-After, or closed at accept when even its connection did not fit
# (counted), the budget and the RSS within the limit; each retried after
# Retry-After until served
busy0=$(metric fay_collector_conn_busy_total)
python3 - "$T_TMP" "$CPID" "$OP" "$HP" >"$T_TMP/storm" 2>&1 <<'PY'
import http.client, random, sys, threading, time
d, pid, op, hp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
bodies = {k: open("%s/%s.gz" % (d, k), "rb").read() for k in ("otlp", "zipkin")}
def rss():
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) >> 10
lock, res, go, closed = threading.Lock(), [], threading.Event(), [0]
def one(n):
    kind = ("otlp", "zipkin")[n % 2]
    port, path = (op, "/v1/traces") if kind == "otlp" else (hp, "/api/v2/spans")
    go.wait()
    # as a client told Retry-After does: again after 1 s (and a jitter),
    # until served; the first answer is reported, then how many tries
    for i in range(60):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("POST", path, bodies[kind], {"Content-Type": "application/json",
                                                    "Content-Encoding": "gzip"})
            r = c.getresponse()
            body = r.read()
            c.close()
            out = "%d %s %s" % (r.status, r.getheader("Retry-After"), body[:120])
        except (ConnectionError, http.client.RemoteDisconnected) as e:
            out = "closed %s" % type(e).__name__
            with lock:
                closed[0] += 1
        if i == 0:
            first = out
        if not out.startswith("503") and not out.startswith("closed"):
            break
        time.sleep(1 + random.random())
    with lock:
        res.append(first)
        res.append("final %s after %d" % (out.split(" ")[0], i + 1))
ts = [threading.Thread(target=one, args=(n,)) for n in range(24)]
for t in ts:
    t.start()
base = rss()
peak = base
go.set()
while any(t.is_alive() for t in ts):
    peak = max(peak, rss())
    time.sleep(0.01)
for r in res:
    print(r if r.startswith("final") else "answer " + r)
print("rss", base, peak)
print("closed", closed[0])
PY
grep -v '^answer 503 1 b\|^final' "$T_TMP/storm" | while IFS= read -r l; do diag "$l"; done
n2xx=$(grep -c '^answer 20[02] ' "$T_TMP/storm")
n503=$(grep -c '^answer 503 1 .*busy: .*--max-memory' "$T_TMP/storm")
nclosed=$(grep -c '^answer closed' "$T_TMP/storm")
read -r _ base peak < <(grep '^rss' "$T_TMP/storm")
tries=$(awk '$1 == "final" { if ($4 > m) m = $4 } END { print m + 0 }' "$T_TMP/storm")
diag "24 at once: $n2xx served, $n503 busy (503), $nclosed closed at accept; RSS ${base:-?} -> ${peak:-?} MiB; at most $tries tries to be served"
ok "every one answered 2xx or 503 + Retry-After \"busy\", or closed at accept" \
	test $((n2xx + n503 + nclosed)) = 24
# (retries included)
read -r _ nclosed_all < <(grep '^closed' "$T_TMP/storm")
ok "the closed ones were refused at accept, counted: fay_collector_conn_busy_total +${nclosed_all:-?}" \
	test "$(metric fay_collector_conn_busy_total)" = $((busy0 + ${nclosed_all:-999}))
ok "each served in the end, retrying after Retry-After ($(grep -c '^final 20[02] ' "$T_TMP/storm") of 24)" \
	test "$(grep -c '^final 20[02] ' "$T_TMP/storm")" = 24
ok "the budget never went past the limit" \
	test "$(metric fay_collector_memory_peak_bytes)" -le $LIMIT
# slack: 24 threads' stacks and buffers, jansson's parse of the 6 MiB
ok "RSS within before + limit + 24 MiB: $peak <= $base + $((LIMIT / MIB)) + 24" \
	test "${peak:-9999}" -le $((${base:-0} + LIMIT / MIB + 24))
ok "every byte given back (only curl's connections left)" \
	wait_for 20 metric_is fay_collector_memory_bytes $CONN

# 3. the same bodies, one at a time after: all served
all=1
for i in 1 2 3 4 5 6; do
	[ "$(post $OP otlp)" = 200 ] || all=0
	[ "$(post $HP zipkin)" = 202 ] || all=0
done
ok "the same bodies one at a time after: all served" test $all = 1

# 4. --max-body still limits the decoded size: 413, and the budget is not
# what refuses it
coll_stop
coll_start "$T_TMP/d.db" --otlp-http 127.0.0.1:$OP --max-memory $LIMIT --max-body 1M ||
	fail "collector starts with --max-body 1M"
ok "OTLP/HTTP inflating past --max-body 1M: 413" test "$(post $OP otlp)" = 413
ok "Zipkin inflating past --max-body 1M: 413" test "$(post $HP zipkin)" = 413
ok "... not counted busy" test "$(metric fay_collector_http_busy_total)" = 0
coll_stop

# 5. a limit the decoded body alone cannot fit in: 503 + Retry-After,
# counted, nothing held after
coll_start "$T_TMP/e.db" --otlp-http 127.0.0.1:$OP --max-memory 4M ||
	fail "collector starts with --max-memory 4M"
ok "OTLP/HTTP inflating past --max-memory 4M: 503" test "$(post $OP otlp)" = 503
ok "... with Retry-After, saying busy" bash -c "grep -qi '^Retry-After: 1' '$T_TMP/h' && grep -q 'busy' '$T_TMP/b'"
ok "Zipkin inflating past --max-memory 4M: 503" test "$(post $HP zipkin)" = 503
ok "... with Retry-After" grep -qi '^Retry-After: 1' "$T_TMP/h"
ok "both counted: fay_collector_http_busy_total 2" test "$(metric fay_collector_http_busy_total)" = 2
ok "nothing held after" wait_for 20 metric_is fay_collector_memory_bytes $CONN
ok "the collector still serves" wait_for 10 curl -sf "$URL/health"
coll_stop

# 6. OTLP/gRPC, grpc-encoding gzip (@grpc/grpc-js): the same, UNAVAILABLE
# with a RetryInfo when it does not fit
GP=$(free_port)
coll_start "$T_TMP/g.db" --otlp-grpc 127.0.0.1:$GP --max-memory $LIMIT ||
	fail "collector starts with --otlp-grpc"
otlp_node "OTLP/gRPC, one gzip call inflating to 6 MiB at a time: OK" grpcbomb 127.0.0.1:$GP 6 1
peak=$(metric fay_collector_memory_peak_bytes)
ok "its decoded bytes were charged: fay_collector_memory_peak_bytes $peak" \
	test "${peak:-0}" -gt $INFLATED -a "${peak:-0}" -le $LIMIT
base=$(awk '/^VmRSS:/ { print int($2 / 1024) }' /proc/$CPID/status)
rss_peak=$base
: >"$T_TMP/node.out"
timeout 120 node "$OTLP_CLIENT" grpcbomb 127.0.0.1:$GP 6 24 >"$T_TMP/node.out" 2>"$T_TMP/node.err" &
NPID=$!
while kill -0 $NPID 2>/dev/null; do
	r=$(awk '/^VmRSS:/ { print int($2 / 1024) }' /proc/$CPID/status)
	[ "${r:-0}" -gt "$rss_peak" ] && rss_peak=$r
	sleep 0.01
done
wait $NPID
nrc=$?
while IFS= read -r l; do diag "$l"; done <"$T_TMP/node.out"
ok "24 gzip calls at once: each OK or UNAVAILABLE + RetryInfo, all OK retried" test $nrc = 0 ||
	while IFS= read -r l; do diag "$l"; done <"$T_TMP/node.err"
ok "the budget never went past the limit" \
	test "$(metric fay_collector_memory_peak_bytes)" -le $LIMIT
ok "RSS within before + limit + 24 MiB: $rss_peak <= $base + $((LIMIT / MIB)) + 24" \
	test "${rss_peak:-9999}" -le $((${base:-0} + LIMIT / MIB + 24))
ok "every byte given back" wait_for 20 metric_is fay_collector_memory_bytes $CONN
coll_stop
done_testing
