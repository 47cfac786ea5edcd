#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The flight recorder's pages of the web UI (#22 item 3) in Debian's
# chromium (playwright-core), against a real collector and a real agent
# (host alpha, --flight) whose flight buffer holds the spans of a real
# workload run with FAY_RECORD=all and head sampling 1 in 1000: the
# Captures page captures a trace by id and lists the capture with its
# completeness, adds a capture rule from its form (and shows an error in
# one with its position), drops it; a trace page of a trace not stored
# offers "capture it", which stores it; the Hosts page captures the last
# N seconds.  Each capture is checked against the workload's own count of
# each trace's spans.  tests/ui/captures.mjs; screenshots in $FAY_UI_IMG
# (default $BUILD/test-logs/ui-img).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../integration/collector_lib.bash"
. "$(dirname "$0")/lib.bash"
[ -x /usr/bin/chromium ] || skip_all "needs Debian's chromium (scripts/install-deps)"
WL=$BUILD/tests/bin/flight_workload
[ -x "$WL" ] || skip_all "no $WL (make)"
ui_npm

coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
mkdir -p "$T_TMP/alpha/shm" "$T_TMP/alpha/state"
timeout 300 nice -n 10 "$FAY" agent --collector 127.0.0.1:$WP --host alpha --flight 16M \
	--shm-dir "$T_TMP/alpha/shm" --state-dir "$T_TMP/alpha/state" --stats-interval 200ms \
	--flush-interval 20ms >>"$T_TMP/alpha.log" 2>&1 &
T_PIDS+=($!)
peers() { curl -s "$URL/api/cluster/peers" | grep -q '"host":"alpha"'; }
ok "the agent has a query connection" wait_for 30 peers

FAY_SHM_DIR=$T_TMP/alpha/shm FAY_SAMPLE=1000 FAY_RECORD=all timeout 60 nice -n 10 \
	"$WL" --requests 20 --children 3 --pause-us 1000 --service shop >"$T_TMP/w.out" 2>"$T_TMP/w.err"
ok "the workload ran 20 requests" bash -c '[ "$(wc -l <"$1")" -eq 20 ]' _ "$T_TMP/w.out" ||
	diag "$(cat "$T_TMP/w.err")"
# two unsampled traces, and how many spans each has
mapfile -t U < <(awk '$2 == 0 { print $1, $3 }' "$T_TMP/w.out" | head -2)
T1=${U[0]% *} N1=${U[0]#* } T2=${U[1]% *} N2=${U[1]#* }
ALL=$(awk '$2 == 0 { n += $3 } END { print n + 0 }' "$T_TMP/w.out")
held() {
	python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["flight"]["added"] >= int(sys.argv[2]) else 1)' \
		"$T_TMP/alpha/state/stats.json" "$ALL" 2>/dev/null
}
ok "the agent holds the $ALL unsampled spans" wait_for 30 held
# spans TRACE: how many spans of TRACE are stored, marked captured by
# their trace id (the Hosts page's capture of the last minutes stores
# them again, marked "last ...ms")
spans() { captured_spans "$URL" "$1" "trace $1"; }
ok "neither trace is stored yet" bash -c '[ "$1" = 0 ] && [ "$2" = 0 ]' _ "$(spans "$T1")" "$(spans "$T2")"

IMG=${FAY_UI_IMG:-$BUILD/test-logs/ui-img}
URL=$URL IMG_DIR=$IMG T1=$T1 N1=$N1 T2=$T2 N2=$N2 ALL=$ALL node "$TOP/tests/ui/captures.mjs" >"$T_TMP/tap" 2>&1
relay_tap "$T_TMP/tap"
ok "the trace captured on the Captures page: its $N1 spans stored, marked" [ "$(spans "$T1")" = "$N1" ]
ok "the trace captured from its page: its $N2 spans stored, marked" [ "$(spans "$T2")" = "$N2" ]
ok "the rule dropped in the browser is gone from the collector" \
	bash -c "! curl -s $URL/api/captures/rules | grep -q '\"name\":\"ui_slow\"'"
ok "collector still up" coll_alive
diag "screenshots in $IMG"
done_testing
