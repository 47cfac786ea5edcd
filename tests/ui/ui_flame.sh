#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Flame graphs in the web UI (issue #27 item 4) in Debian's chromium
# (playwright-core), against a real collector with two real agents (hosts
# alpha and beta) and real eBPF probes: a live profile query grouped by
# s.ustack on stack_work's known call tree (main;A;B;C hot, main;A;D
# cold), on the collector's host and on the cluster, drawn as a flame
# graph; zoom by a click, search a frame.  tests/ui/flame.mjs;
# screenshots in $FAY_UI_IMG (default $BUILD/test-logs/ui-img).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../integration/collector_lib.bash"
. "$(dirname "$0")/lib.bash"
[ -x /usr/bin/chromium ] || skip_all "needs Debian's chromium (scripts/install-deps)"
SW=$BUILD/tests/bin/stack_work_fp
[ -x "$SW" ] || skip_all "stack_work_fp is not built (make)"
ui_npm

coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
ok "two agents with query connections" coll_agents alpha beta

# the profiled program: 25 s of CPU at most (it is killed at the end)
cp "$SW" "$T_TMP/flamework"
nice -n 10 "$T_TMP/flamework" spin 25000 &
T_PIDS+=($!)

IMG=${FAY_UI_IMG:-$BUILD/test-logs/ui-img}
URL=$URL IMG_DIR=$IMG node "$TOP/tests/ui/flame.mjs" >"$T_TMP/tap" 2>&1
relay_tap "$T_TMP/tap"
ok "collector still up" coll_alive
diag "screenshots in $IMG"
done_testing
