#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Samples tied to requests (issue #27 item 5) from a process's first
# milliseconds and across pid namespaces, for real (root, BPF,
# perf_event sampling, unshare):
#  - short-lived libfay processes (one ~100 ms request each, six in a
#    row) have their samples tied to their spans from their start: the
#    engine learns of a libfay file when it is renamed into place
#    (inotify), not at its next 250 ms look;
#  - two libfay processes, each pid 1 (tid 1) in a pid namespace of its
#    own, writing to one directory: each sample's trace id is one its own
#    process made (the map's key is the root namespace's pid, the cell the
#    thread's tid in its namespace, the process's start time checked).
. "$(dirname "$0")/../lib/lib.sh"
need_root
SP=$BUILD/tests/bin/span_profile
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$SP" ] || skip_all "span_profile is not built (make)"
command -v unshare >/dev/null || skip_all "needs unshare (util-linux)"
. "$(dirname "$0")/query_lib.bash"

# bg_query QUERY CMD: QUERY runs while CMD does (the processes CMD starts
# are not CMD's pid, so not -c): started, attached, CMD run, then
# stopped with SIGINT (it prints its answer); JSON in $T_TMP/out, RC.
bg_query() {
	timeout 90 "$FAY" query --json "$1" >"$T_TMP/out" 2>"$T_TMP/err" &
	local q=$!
	attached() { grep -q 'attached' "$T_TMP/err"; }
	wait_for 30 attached
	sh -c "$2"
	# fay itself, once (timeout would also signal its whole group: a
	# second SIGINT after fay restored its handlers kills it, rc 130)
	pkill -INT -P $q
	wait $q
	RC=$?
}
export FAY_SHM_DIR=$T_TMP/shm	# the programs' shm files, where the engine looks
export FAY_SAMPLE=1		# every request recorded
mkdir -p "$FAY_SHM_DIR"

# ---- the first milliseconds: six processes, each one ~100 ms request ----------
# span_profile 1 IDS 100: fay_init, then a "heavy" span spinning 100 units
# (~100 ms), a "light" one of 1, 1 unit outside.  Only the samples in
# spin() count (libfay's start-up, outside any span, is not spin), so
# 101 of every 102 should carry a span; a look every 250 ms would find
# such a process late or never (old engine: 0.54-0.7 here).
bg_query 'from s in profile(499) where s.comm == "span_profile" group s by { s: s.span_name, k: s.ustack } into g select { s: g.s, k: g.k, n: g.count() }' \
	"for i in 1 2 3 4 5 6; do $SP 1 $T_TMP/ids_s\$i 100; done"
if [ $RC -eq 0 ] && python3 - "$T_TMP/out" >"$T_TMP/cmp" 2>&1 <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
spin = [r for r in rows if "spin" in r["k"]]
tied = sum(r["n"] for r in spin if r["s"] in ("heavy", "light"))
total = sum(r["n"] for r in spin)
assert not [r for r in rows if r["s"] not in ("", "heavy", "light")], ("other span names", rows)
assert total >= 100, ("too few samples in spin()", total)
assert tied / total >= 0.85, ("share of spin()'s samples tied to a span", tied, total)
print("%d of %d samples in spin() carry a span: %.2f" % (tied, total, tied / total))
PY
then
	pass "processes sampled from their first span: samples tied from the start ($(cat "$T_TMP/cmp"))"
else
	fail "processes sampled from their first span (rc=$RC)" "$(head -c 1500 "$T_TMP/cmp")" "$(head -c 600 "$T_TMP/out")" "$(head -c 600 "$T_TMP/err")"
fi

# ---- two processes, pid 1 each, in their own pid namespaces ------------------------
cat >"$T_TMP/two.sh" <<EOF
unshare --pid --fork --mount-proc $SP 150 $T_TMP/ids_a &
unshare --pid --fork --mount-proc $SP 150 $T_TMP/ids_b &
wait
EOF
bg_query 'from s in profile(499) where s.trace_id != 0 group s by { pid: s.pid, vpid: s.vpid, t: s.trace_id } into g select { pid: g.pid, vpid: g.vpid, t: g.t, n: g.count() }' \
	"sh $T_TMP/two.sh"
if [ $RC -eq 0 ] && python3 - "$T_TMP/out" "$T_TMP/ids_a" "$T_TMP/ids_b" >"$T_TMP/cmp" 2>&1 <<'PY'
import json, sys
ids = [{int(l) for l in open(f) if l.strip()} for f in sys.argv[2:]]
assert all(len(s) == 300 for s in ids), ("the programs' ids", [len(s) for s in ids])
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by_pid = {}
for r in rows:
    assert r["vpid"] == 1, ("a sample not of a namespace's pid 1", r)
    by_pid.setdefault(r["pid"], set()).add(r["t"] % 2**64)
assert len(by_pid) == 2, ("processes with tied samples", sorted(by_pid))
owner = []
for pid, ts in by_pid.items():
    own = [i for i, s in enumerate(ids) if ts <= s]
    assert len(own) == 1, ("process %d: trace ids not all of one program" % pid, len(ts & ids[0]), len(ts & ids[1]), len(ts))
    assert len(ts) >= 10, ("process %d: traces sampled" % pid, len(ts))
    owner.append(own[0])
assert sorted(owner) == [0, 1], ("both processes' samples tied to one program", owner)
print(", ".join("pid %d: %d traces, all its own" % (p, len(t)) for p, t in sorted(by_pid.items())))
PY
then
	pass "two pid-1 processes in their own pid namespaces: each sample tied to its own process's trace ($(cat "$T_TMP/cmp"))"
else
	fail "two pid-1 processes in pid namespaces (rc=$RC)" "$(head -c 1500 "$T_TMP/cmp")" "$(head -c 600 "$T_TMP/out")" "$(head -c 600 "$T_TMP/err")"
fi
done_testing
