#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay query --json writes strings as JSON readers expect them: a process
# named in UTF-8 ("café-✓", through a symlink to the workload, so the
# uprobe on the workload fires and comm is the link's name) reads back as
# that name, not as "caf\u00c3\u00a9-..." (each byte as a code point, as
# before the one JSON string writer, common/json_str.c).
. "$(dirname "$0")/../lib/lib.sh"
need_root
W=$BUILD/tests/bin/query_work
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$W" ] || skip_all "query_work is not built (make)"
command -v python3 >/dev/null || skip_all "needs python3"

NAME=$(printf 'caf\xc3\xa9-\xe2\x9c\x93')
ln -s "$W" "$T_TMP/$NAME"
timeout 60 nice -n 10 "$FAY" query --json --probe-mode=uprobe -c "$T_TMP/$NAME calls 10" \
	"from f in function(\"$W:fay_work_fn\") group f by f.comm into g select { comm: g.key, n: g.count() }" \
	>"$T_TMP/out" 2>"$T_TMP/err"
RC=$?
[ $RC -eq 0 ] && [ "$(cat "$T_TMP/out")" = "{\"comm\":\"$NAME\",\"n\":10}" ] &&
	pass "a UTF-8 process name passes through: $(cat "$T_TMP/out")" ||
	fail "UTF-8 comm in --json (rc=$RC)" "got: $(cat "$T_TMP/out")" "$(head -c 600 "$T_TMP/err")"
python3 - "$T_TMP/out" "$NAME" <<'PY' && pass "a JSON reader reads the name back exactly" ||
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
want = sys.argv[2].encode("utf-8", "surrogateescape").decode("utf-8")
assert rows == [{"comm": want, "n": 10}], (rows, want)
PY
	fail "json.loads of the output" "$(cat "$T_TMP/out")"
done_testing
