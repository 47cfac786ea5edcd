#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Samples tied to requests (issue #27 item 5), for real (root, BPF,
# perf_event sampling): span_profile, a libfay program, burns CPU in two
# kinds of root spans, "heavy" (3 units) and "light" (1 unit), then 1
# unit outside any span.  profile(499) grouped by s.span_name must give
# both names in about that ratio; grouped by s.trace_id, only trace ids
# the program made; a process without libfay gives trace_id 0 and "";
# through a fay agent (the cluster), the agent's --shm-dir is where the
# engine looks.
. "$(dirname "$0")/../lib/lib.sh"
need_root
SP=$BUILD/tests/bin/span_profile
FP=$BUILD/tests/bin/stack_work_fp
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$SP" ] && [ -x "$FP" ] || skip_all "span_profile/stack_work are not built (make)"
. "$(dirname "$0")/query_lib.bash"
export FAY_SHM_DIR=$T_TMP/shm	# the program's shm file, where the engine looks
export FAY_SAMPLE=1		# every request recorded
mkdir -p "$FAY_SHM_DIR"

# ---- by span name: both kinds, heavy:light about 3:1 -------------------------------
fq --json -c "$SP 400 $T_TMP/ids1" 'from s in profile(499) where s.trace_id != 0 group s by s.span_name into g select { s: g.key, n: g.count() }'
if [ $RC -eq 0 ] && python3 - "$T_TMP/out" >"$T_TMP/cmp" 2>&1 <<'PY'
import json, sys
rows = {r["s"]: r["n"] for r in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith("{")))}
assert set(rows) == {"heavy", "light"}, rows
h, l = rows["heavy"], rows["light"]
assert h + l >= 150, ("too few samples in spans", rows)
# 3 units to 1: loose bounds (sampling error, the first samples before
# the engine found the process, a loaded machine: 3.16, 2.86, 2.69 and
# 2.38 in four runs at load 14-17)
assert 1.8 <= h / l <= 4.5, ("heavy:light", h / l, rows)
print("heavy %d, light %d: %.2f" % (h, l, h / l))
PY
then
	pass "profile(499) by s.span_name where s.trace_id != 0: heavy and light in about 3:1 ($(cat "$T_TMP/cmp"))"
else
	fail "profile(499) by s.span_name (rc=$RC)" "$(head -c 1500 "$T_TMP/cmp")" "$(head -c 600 "$T_TMP/out")" "$(head -c 600 "$T_TMP/err")"
fi

# ---- by trace id: only the program's own traces ------------------------------------
fq --json -c "$SP 300 $T_TMP/ids2" 'from s in profile(499) where s.span_name == "heavy" group s by s.trace_id into g select { t: g.key, n: g.count() }'
if [ $RC -eq 0 ] && python3 - "$T_TMP/out" "$T_TMP/ids2" >"$T_TMP/cmp" 2>&1 <<'PY'
import json, sys
ids = {int(l) for l in open(sys.argv[2]) if l.strip()}
assert len(ids) == 600 and 0 not in ids, ("the program's ids", len(ids))
got = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
keys = {r["t"] % 2**64 for r in got}
assert len(keys) >= 50, ("distinct traces sampled", len(keys))
bad = keys - ids
assert not bad, ("trace ids the program never made", sorted(bad)[:5])
print("%d traces sampled, %d samples, all the program's" % (len(keys), sum(r["n"] for r in got)))
PY
then
	pass "profile(499) by s.trace_id: every trace id is one the program made ($(cat "$T_TMP/cmp"))"
else
	fail "profile(499) by s.trace_id (rc=$RC)" "$(head -c 1500 "$T_TMP/cmp")" "$(head -c 600 "$T_TMP/out")" "$(head -c 600 "$T_TMP/err")"
fi

# ---- a process without libfay: no span ---------------------------------------------
fq --json -c "$FP spin 300" 'from s in profile(499) group s by s.span_name into g select { s: g.key, n: g.count(), t: g.max(s.trace_id) }'
if [ $RC -eq 0 ] && [ "$(grep -c '^{' "$T_TMP/out")" = 1 ] && grep -q '^{"s":"","n":[1-9][0-9]*,"t":0}$' "$T_TMP/out"; then
	pass "a process without libfay: every sample has span_name \"\" and trace_id 0"
else
	fail "a process without libfay (rc=$RC)" "$(head -c 600 "$T_TMP/out")" "$(head -c 600 "$T_TMP/err")"
fi

# ---- through fay agent: its --shm-dir, not $FAY_SHM_DIR --------------------------
. "$(dirname "$0")/collector_lib.bash"
coll_start "$T_TMP/c.db"
FAY_SHM_DIR=$T_TMP/nowhere coll_agents h1 ||
	fail "the agent connects" "$(tail -5 "$T_TMP/h1.log")"
timeout 60 "$FAY" query --cluster "$URL" --json \
	'from s in cluster.profile(499) where s.trace_id != 0 group s by s.span_name into g select { s: g.key, n: g.count() } for 4s' \
	>"$T_TMP/co" 2>"$T_TMP/ce" & qpid=$!
n_att() { [ "$(hosts_attached "$T_TMP/ce")" -ge 1 ]; }
wait_for 30 n_att
FAY_SHM_DIR=$T_TMP/h1 "$SP" 300 "$T_TMP/ids3" & T_PIDS+=($!)
wait $qpid
RC=$?
if [ $RC -eq 0 ] && python3 - "$T_TMP/co" >"$T_TMP/cmp" 2>&1 <<'PY'
import json, sys
rows = {r["s"]: r["n"] for r in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith("{")))
        if "s" in r}	# not the closing {"final": ...} line
assert set(rows) == {"heavy", "light"} and rows["heavy"] > rows["light"] > 0, rows
print("heavy %d, light %d" % (rows["heavy"], rows["light"]))
PY
then
	pass "cluster.profile(499) through fay agent --shm-dir: both span names ($(cat "$T_TMP/cmp"))"
else
	fail "cluster.profile(499) through fay agent (rc=$RC)" "$(head -c 1500 "$T_TMP/cmp")" "$(head -c 600 "$T_TMP/co")" "$(head -c 600 "$T_TMP/ce")"
fi
done_testing
