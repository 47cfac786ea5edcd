#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cluster pages of the web UI in Debian's chromium (playwright-core),
# against a real collector with two real agents (hosts alpha and beta)
# running real eBPF probes: standing queries listed, charted, kept from
# the form and dropped; the Hosts page's query connections with each
# host's attached probes; the live query page "on the cluster" with each
# window's completeness.  tests/ui/cluster.mjs; screenshots in
# $FAY_UI_IMG (default $BUILD/test-logs/ui-img).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../integration/collector_lib.bash"
. "$(dirname "$0")/lib.bash"
[ -x /usr/bin/chromium ] || skip_all "needs Debian's chromium (scripts/install-deps)"
W=$BUILD/tests/bin/query_work
[ -x "$W" ] || skip_all "query_work is not built (make)"
ui_npm

# getppid calls all along, so that every window has rows
( while :; do "$W" getppid 200 >/dev/null; sleep 0.1; done ) &
T_PIDS+=($!)

coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
for h in alpha beta; do
	mkdir -p "$T_TMP/$h"
	"$FAY" agent --collector 127.0.0.1:$WP --host "$h" --shm-dir "$T_TMP/$h" \
		--state-dir "$T_TMP/$h" >>"$T_TMP/$h.log" 2>&1 &
	T_PIDS+=($!)
done
peers() { [ "$(curl -s "$URL/api/cluster/peers" | grep -o '"host":' | wc -l)" -ge 2 ]; }
ok "two agents with query connections" wait_for 15 peers

Q='from s in cluster.syscall("getppid") group s by s.host into g select { host: g.key, calls: g.count(), p99: g.quantile(s.duration, 0.99) } window 1s'
ok "a standing query is kept" "$FAY" query --cluster "$URL" --keep ppid "$Q"
ok "its columns say which is a time (p99: unit ns) and which a count" bash -c \
	"curl -s $URL/api/queries | grep -q '{\"name\":\"p99\",\"type\":\"int\",\"key\":false,\"unit\":\"ns\"}' &&
	 curl -s $URL/api/queries | grep -q '{\"name\":\"calls\",\"type\":\"int\",\"key\":false}'"

IMG=${FAY_UI_IMG:-$BUILD/test-logs/ui-img}
URL=$URL IMG_DIR=$IMG node "$TOP/tests/ui/cluster.mjs" >"$T_TMP/tap" 2>&1
relay_tap "$T_TMP/tap"
ok "the query dropped in the browser is gone from the collector" \
	bash -c "! curl -s $URL/api/queries | grep -q '\"name\":\"ppid\"'"
ok "collector still up" coll_alive
diag "screenshots in $IMG"
done_testing
