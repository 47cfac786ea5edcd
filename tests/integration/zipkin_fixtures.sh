#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Zipkin's own test data (tests/data/zipkin/, each file says where in
# openzipkin/zipkin it comes from) posted to a real collector and read back
# through the v2 routes, compared with what Zipkin's tests assert:
#  - dependency_linker.json: every case of Zipkin's DependencyLinkerTest,
#    each in a time window of its own, through /api/v2/dependencies.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
command -v python3 >/dev/null || skip_all "needs python3"
TOOLS=$(dirname "$0")/zipkin_tools
DATA=$TOP/tests/data/zipkin

ok "collector up" coll_start "$T_TMP/fay.db" --autocomplete-keys environment,http.path
python3 "$TOOLS/linker_cases.py" "$URL" "$DATA/dependency_linker.json" >"$T_TMP/linker.tap" 2>&1
relay() {  # relay TAPFILE: renumber its ok/not ok lines into ours
	while IFS= read -r l; do
		case "$l" in
		"ok "*) pass "${l#ok * - }" ;;
		"not ok "*) fail "${l#not ok * - }" ;;
		*) echo "$l" ;;
		esac
	done <"$1"
}
relay "$T_TMP/linker.tap"
ok "collector still up" coll_alive
done_testing
