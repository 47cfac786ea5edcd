#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Zipkin's UI, Lens, against fay in chromium (tests/ui/lens.mjs): every
# API call it makes succeeds.  Lens is not in any package registry: build
# it from openzipkin/zipkin's zipkin-lens (npm ci && npm run build) and
# point LENS_DIR at its build/ directory; without one this test skips.
. "$(dirname "$0")/../lib/lib.sh"
for f in collector_lib.bash collector_lib.sh; do
	[ -f "$(dirname "$0")/../integration/$f" ] && { . "$(dirname "$0")/../integration/$f"; break; }
done
. "$(dirname "$0")/lib.bash"
[ -n "${LENS_DIR:-}" ] && [ -f "$LENS_DIR/index.html" ] ||
	skip_all "no Zipkin Lens build (set LENS_DIR to zipkin-lens/build)"
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || skip_all "needs chromium"
ui_npm

coll_start "$T_TMP/fay.db" --autocomplete-keys http.path || { fail "collector starts"; done_testing; exit; }
# Zipkin's TestObjects trace, moved to a minute ago
python3 - "$TOP/tests/data/zipkin/test_objects.json" >"$T_TMP/trace.json" <<'PY'
import json, sys, time
d = json.load(open(sys.argv[1]))
shift = int(time.time() * 1e6) - 60000000 - d["trace"][0]["timestamp"]
for s in d["trace"]:
    s["timestamp"] += shift
    for a in s.get("annotations", []):
        a["timestamp"] += shift
print(json.dumps(d["trace"]))
PY
URL=$URL LENS_DIR=$LENS_DIR IMG_DIR=${IMG_DIR:-$T_TMP/img} TRACE_JSON=$T_TMP/trace.json \
	node "$TOP/tests/ui/lens.mjs" >"$T_TMP/tap" 2>&1
relay_tap "$T_TMP/tap"
ok "collector still up" coll_alive
done_testing
