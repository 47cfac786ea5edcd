#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ingest with a real third-party client: the official Zipkin JS tracer
# and its HTTP transport (npm) post to the collector; round trip through
# the query API (tests/ui/zipkin_js.mjs).
. "$(dirname "$0")/../lib/lib.sh"
for f in collector_lib.bash collector_lib.sh; do
	[ -f "$(dirname "$0")/../integration/$f" ] && { . "$(dirname "$0")/../integration/$f"; break; }
done
. "$(dirname "$0")/lib.bash"
ui_npm

coll_start "$T_TMP/fay.db" || { fail "collector starts"; done_testing; exit; }
URL=$URL node "$TOP/tests/ui/zipkin_js.mjs" >"$T_TMP/tap" 2>&1
relay_tap "$T_TMP/tap"
ok "collector still up" coll_alive
done_testing
