#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Zipkin's own test data (tests/data/zipkin/, each file says where in
# openzipkin/zipkin it comes from) posted to a real collector and read back
# through the v2 routes, compared with what Zipkin's tests assert:
#  - dependency_linker.json: every case of Zipkin's DependencyLinkerTest,
#    each in a time window of its own, through /api/v2/dependencies, and
#    itdependencies.json: ITDependencies' traces, and its window cases
#    (whole traces, mixed 64/128-bit ids);
#  - test_objects.json (Zipkin's TestObjects.TRACE: 128-bit id, IPv6, an
#    error) and lens_*.json (zipkin-lens/testdata: skewed clocks, shared
#    spans, messaging, kafka, yelp) through trace, traceMany, traces,
#    services, spans, remoteServices, dependencies and autocomplete;
#  - cases of ITSpanStore (search and read-back) in an empty store.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"
TOOLS=$(dirname "$0")/zipkin_tools
DATA=$TOP/tests/data/zipkin

ok "collector up" coll_start "$T_TMP/fay.db" --autocomplete-keys environment,http.path --retention 0
python3 "$TOOLS/linker_cases.py" "$URL" "$DATA/dependency_linker.json" >"$T_TMP/linker.tap" 2>&1
tap_relay "$T_TMP/linker.tap"
python3 "$TOOLS/linker_cases.py" "$URL" "$DATA/itdependencies.json" 6 ITDependencies >"$T_TMP/itd.tap" 2>&1
tap_relay "$T_TMP/itd.tap"
python3 "$TOOLS/itdeps.py" "$URL" "$DATA/test_objects.json" >"$T_TMP/itdeps.tap" 2>&1
tap_relay "$T_TMP/itdeps.tap"
coll_stop
ok "a second collector, for the traces (a store of their own)" \
	coll_start "$T_TMP/fay2.db" --autocomplete-keys environment,http.path --retention 0
python3 "$TOOLS/routes.py" "$URL" "$DATA/test_objects.json" "$DATA"/lens_*.json >"$T_TMP/routes.tap" 2>&1
tap_relay "$T_TMP/routes.tap"
ok "autocompleteKeys: the configured keys" [ "$(curl -s "$URL/api/v2/autocompleteKeys")" = '["environment","http.path"]' ]
got=$(curl -s "$URL/api/v2/autocompleteValues?key=http.path")
ok "autocompleteValues?key=http.path: TestObjects' '/api' and lens messaging's '/' ($got)" [ "$got" = '["/","/api"]' ]
ok "autocompleteValues?key=clnt/finagle.version (not configured): []" [ "$(curl -s "$URL/api/v2/autocompleteValues?key=clnt/finagle.version")" = '[]' ]
coll_stop
ok "a third collector, empty, for ITSpanStore's searches" coll_start "$T_TMP/fay3.db" --retention 0
python3 "$TOOLS/itspanstore.py" "$URL" >"$T_TMP/itss.tap" 2>&1
tap_relay "$T_TMP/itss.tap"
ok "collector still up" coll_alive
done_testing
