#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The web UI with tokens (--token-file) in Debian's chromium
# (playwright-core): tests/ui/auth.mjs.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../integration/collector_lib.bash"
. "$(dirname "$0")/lib.bash"
[ -x /usr/bin/chromium ] || skip_all "needs Debian's chromium"
ui_npm

printf 'ui-read-5a1b read ui\nui-write-77c2 write ingest\n' >"$T_TMP/tokens"
chmod 600 "$T_TMP/tokens"
coll_start "$T_TMP/fay.db" --token-file "$T_TMP/tokens" || { fail "collector starts"; done_testing; exit; }
IMG=${FAY_UI_IMG:-$BUILD/test-logs/ui-img}
URL=$URL READ=ui-read-5a1b WRITE=ui-write-77c2 IMG_DIR=$IMG \
	node "$TOP/tests/ui/auth.mjs" >"$T_TMP/tap" 2>&1
relay_tap "$T_TMP/tap"
ok "collector still up" coll_alive
done_testing
