#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The thresholds file cannot be turned into a write to another file (#10:
# it was written with open(O_CREAT|O_TRUNC) on the predictable name
# FILE.tmp, so a symlink planted there let an unauthenticated PUT
# /api/ui/thresholds overwrite any file the collector could write).  A
# link planted at the old temporary name and a link at FILE itself: after
# PUTs, the files they point to are unchanged, FILE is a regular file with
# the new rules, and no temporary file is left.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
D=$T_TMP/th
mkdir -p "$D"
printf 'precious\n' >"$D/victim"
printf 'also precious\n' >"$D/victim2"
printf '{"rules": [{"service": "osd", "span": "*", "p99_us": 1000}]}' >"$D/real.json"
ln -s "$D/real.json" "$D/th.json"		# the rules, through a link
ln -s "$D/victim" "$D/th.json.tmp"		# the old temporary name, planted
coll_start "$T_TMP/c.db" --thresholds "$D/th.json" || { fail "collector starts"; done_testing; exit; }
put() {
	curl -s -o "$T_TMP/body" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
		--data "{\"rules\":[{\"service\":\"osd\",\"span\":\"write\",\"p99_us\":$1}]}" \
		"$URL/api/ui/thresholds"
}
code=$(put 9000)
ok "PUT thresholds with a link planted at th.json.tmp: 200" test "$code" = 200
ok "... the file the planted link points to is unchanged" grep -qx precious "$D/victim"
ok "... the planted link is still a link to it (not followed, not replaced)" \
	test "$(readlink "$D/th.json.tmp")" = "$D/victim"
ok "... th.json now holds the new rules" grep -q '"p99_us": 9000' "$D/th.json"
ok "... as a regular file of its own: rename() replaced the link at th.json, not its target" \
	bash -c "[ -f '$D/th.json' ] && [ ! -L '$D/th.json' ] && grep -q '\"p99_us\": 1000' '$D/real.json'"
# a planted link at every name the old code could have used, again
rm -f "$D/th.json.tmp"; ln -s "$D/victim2" "$D/th.json.tmp"
code=$(put 7000)
ok "a second PUT: 200, the new link's target unchanged too" \
	bash -c "[ '$code' = 200 ] && grep -qx 'also precious' '$D/victim2' && grep -q '\"p99_us\": 7000' '$D/th.json'"
ok "no temporary file is left next to it" \
	test -z "$(find "$D" -name 'th.json.tmp.*' -print -quit)"
ok "GET thresholds serves the rules written" bash -c "curl -s '$URL/api/ui/thresholds' | grep -q '\"p99_us\":7000'"
ok "the collector is still up" coll_alive
done_testing
