#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The web UI in Debian's chromium (playwright-core), against a real
# collector with a real agent: tests/ui/browser.mjs.  Screenshots go to
# $FAY_UI_IMG (default $BUILD/test-logs/ui-img; scripts/ui-screenshots
# sets docs/img).
. "$(dirname "$0")/../lib/lib.sh"
for f in collector_lib.bash collector_lib.sh; do
	[ -f "$(dirname "$0")/../integration/$f" ] && { . "$(dirname "$0")/../integration/$f"; break; }
done
. "$(dirname "$0")/lib.bash"
[ -x /usr/bin/chromium ] || skip_all "needs Debian's chromium (scripts/install-deps)"
FAKEQ=$BUILD/tests/fay-ui-fakeq
[ -x "$FAKEQ" ] || skip_all "no $FAKEQ (make builds it)"
ui_npm

coll_start "$T_TMP/fay.db" --thresholds "$T_TMP/thresholds.json" || { fail "collector starts"; done_testing; exit; }
MAIN_URL=$URL
# The stand-in query engine's collector: its own store and ports.
FP=$(free_port); FW=$(free_port)
"$FAKEQ" collector --listen 127.0.0.1:$FW --http 127.0.0.1:$FP --db "$T_TMP/fq.db" \
	>>"$T_TMP/fakeq.log" 2>&1 &
T_PIDS+=($!)
wait_for 10 curl -sf "http://127.0.0.1:$FP/health" || fail "stand-in collector starts"

mkdir -p "$T_TMP/shm" "$T_TMP/agent"
"$FAY" agent --collector 127.0.0.1:$WP --shm-dir "$T_TMP/shm" --state-dir "$T_TMP/agent" \
	--stats-interval 1s --host ui-test-host >>"$T_TMP/agent.log" 2>&1 &
APID=$!
T_PIDS+=($APID)
wait_for 10 bash -c "curl -s $MAIN_URL/api/ui/hosts | grep -q ui-test-host" || fail "agent connects"

# One OTLP request of two spans, one invalid (a zero trace id): the Hosts
# page lists the sender with 1 span stored and 1 rejected.  Three days
# old, so the trace pages' searches (a day back) do not list it.
NS=$(( ($(date +%s) - 3 * 86400) * 1000000000 ))
curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary \
	"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0000000000000000000000000000a0a0\",\"spanId\":\"00000000000000a1\",\"name\":\"ok\",\"startTimeUnixNano\":\"$NS\",\"endTimeUnixNano\":\"$((NS + 1000))\"},{\"traceId\":\"00000000000000000000000000000000\",\"spanId\":\"00000000000000a2\",\"startTimeUnixNano\":\"$NS\",\"endTimeUnixNano\":\"$NS\"}]}]}]}" \
	"$MAIN_URL/v1/traces"

IMG=${FAY_UI_IMG:-$BUILD/test-logs/ui-img}
URL=$MAIN_URL FAKEQ_URL=http://127.0.0.1:$FP IMG_DIR=$IMG AGENT_PID=$APID \
	node "$TOP/tests/ui/browser.mjs" >"$T_TMP/tap" 2>&1
relay_tap "$T_TMP/tap"
ok "the thresholds file holds what the UI saved" grep -q '"p99_us"' "$T_TMP/thresholds.json"
ok "collector still up" coll_alive
diag "screenshots in $IMG"
done_testing
