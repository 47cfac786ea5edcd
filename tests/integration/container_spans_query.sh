#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Spans out of containers in queries, crashes and losses (issue #25 items
# 3 and 4).  A real collector and agent; libfay programs (span_producer)
# in two containers, each in its own pid and mount namespaces and root
# (unshare + chroot, a private tmpfs on its /dev/shm, which the host's
# agent never sees at its own /dev/shm), in cgroups named as machined
# (machine-web\x2d1.scope: "web-1") and podman (libpod-ID.scope: ID's
# first 12 digits) name theirs, and one on the host:
#  - spans(...) cluster queries read sp.container and sp.cgroup: grouped
#    by container, the two containers and the host counted exactly, each
#    with its cgroup path; `where sp.container == "web-1"` counts one;
#  - a containerized program killed -9 with a span open: every span it
#    ended is stored once, the open one is counted lost (died mid-span),
#    its file removed, as for a host process;
#  - a containerized program with a small ring that overwrites before the
#    agent finds it: stored + counted ring overwrite == produced.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"
. "$(dirname "$0")/agent_tools/lib.sh"
ctr_span_needs
ctr_cgroup_base fay-spq b
CG_A=$BASE/machine.slice/'machine-web\x2d1.scope'
CG_B=$BASE/libpod-$ID.scope
CG_L=$BASE/l.scope
mkdir -p "$CG_A" "$CG_B" "$CG_L" || skip_all "cannot make cgroups under $CGR"
cg_cleanup() {
	local d p
	for d in "$CG_A" "$CG_B" "$CG_L"; do
		for p in $(cat "$d"/cgroup.procs 2>/dev/null); do kill "$p" 2>/dev/null; done
	done
	sleep 0.2
	for d in "$CG_A" "$CG_B" "$CG_L" "$BASE/machine.slice" "$BASE"; do
		[ -d "$d" ] && rmdir "$d" 2>/dev/null
	done
}
trap 'for r in "$RA" "$RB" "$RL"; do touch "$r/w/stop" 2>/dev/null; done; touch "$T_TMP/h.stop"; cg_cleanup; t_cleanup' EXIT

NA=1500 NB=2500 NH=700 NL=3000
RA=$T_TMP/ra RB=$T_TMP/rb RL=$T_TMP/rl
ctr_span_roots "$RA" "$RB" "$RL"
ok "collector up" ctr_collector
AGENT_CONTAINERS="--containers-in /fay-spq-$$" start_agent
peer() { curl -s "$URL/api/cluster/peers" | grep -q '"host":'; }
ok "the agent has a query connection" wait_for 30 peer

# CG ROOT ARGS...: span_producer ARGS in a container: ROOT, its own pid and
# mount namespaces, a tmpfs on its /dev/shm, in cgroup CG
in_ctr() {
	local cg=$1 r=$2
	shift 2
	bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" \
		timeout 300 nice -n 10 unshare -p -m -f --mount-proc="$r/proc" \
		sh -c 'mount -t tmpfs -o mode=1777,size=64m fayshm "$0/dev/shm" && exec chroot "$0" "$@"' \
		"$r" /bin/span_producer "$@" >>"$T_TMP/ctr.out" 2>&1 &
	T_PIDS+=($!)
}
# the host pid of the span_producer whose root is ROOT
host_pid() {
	local p
	for p in $(pgrep -x span_producer); do
		[ "/proc/$p/root/w" -ef "$1/w" ] && { echo "$p"; return 0; }
	done
	return 1
}

# the queries, attached before the programs start
Q1='from sp in cluster.spans group sp by {c: sp.container, g: sp.cgroup} into g select { c: g.c, cg: g.g, n: g.count() } for 20s'
Q2='from sp in cluster.spans where sp.container == "web-1" select { n: count() } for 20s'
timeout 90 "$FAY" query --cluster "$URL" --json "$Q1" >"$T_TMP/q1.out" 2>"$T_TMP/q1.err" & Q1P=$!
timeout 90 "$FAY" query --cluster "$URL" --json "$Q2" >"$T_TMP/q2.out" 2>"$T_TMP/q2.err" & Q2P=$!
T_PIDS+=($Q1P $Q2P)
attached() { grep -q ': attached' "$T_TMP/q1.err" && grep -q ': attached' "$T_TMP/q2.err"; }
ok "both spans(...) queries attached on the agent" wait_for 30 attached

# A: web-1, one span left open, then killed -9
in_ctr "$CG_A" "$RA" --count $NA --service ctr-a --ids /w/ids --ready /w/ready \
	--hold /w/never --open-span --rate 2000
# B: podman's cgroup name
in_ctr "$CG_B" "$RB" --count $NB --service ctr-b --ids /w/ids --ready /w/ready \
	--hold /w/stop --rate 2000
# the host's
produce_bg --count $NH --service host-p --ids "$T_TMP/ids.h" --ready "$T_TMP/h.ready" \
	--hold "$T_TMP/h.stop" --rate 2000
ok "the three programs made their spans" \
	wait_for 60 test -e "$RA/w/ready" -a -e "$RB/w/ready" -a -e "$T_TMP/h.ready"
PA=$(host_pid "$RA")
ok "A's host pid found ($PA)" test -n "$PA"

# spans of service S in the store, one id a line
ids_of() {
	curl -sf "$URL/api/v2/traces?serviceName=$1&limit=100000&lookback=86400000" |
		python3 -c '
import json, sys
for t in json.load(sys.stdin):
    for s in t:
        print(s["id"])'
}
count_is() { [ "$(ids_of "$1" | wc -l)" -eq "$2" ]; }
ok "A: its $NA ended spans stored (before the kill)" wait_for 60 count_is ctr-a $NA
kill -9 "$PA"
ok "A killed -9: the agent saw it gone" wait_for 30 agent_log_has "process $PA (ctr-a) gone"
ok "A: the open span counted lost, as for a host process" \
	wait_for 30 agent_log_has "process $PA (ctr-a): 1 spans lost: process died mid-span"
same_ids() { cmp -s <(ids_of "$1" | sort) <(sort -u "$2"); }
ok "A: each ended span stored exactly once" same_ids ctr-a "$RA/w/ids"
ok "B: $NB spans stored" wait_for 60 count_is ctr-b $NB
ok "host: $NH spans stored" wait_for 60 count_is host-p $NH

wait $Q1P; r1=$?
wait $Q2P; r2=$?
MYCG=$(sed -n 's/^0:://p' /proc/$PROD/cgroup 2>/dev/null)
[ -n "$MYCG" ] || MYCG=$(sed -n 's/^0:://p' /proc/self/cgroup)
python3 - "$T_TMP/q1.out" "/fay-spq-$$" "$ID" "$MYCG" $NA $NB $NH <<'PY' &&
import json, sys
out, base, id_, mycg = sys.argv[1:5]
na, nb, nh = map(int, sys.argv[5:8])
def cut(v):
    return v if len(v) < 64 else "..." + v[-60:]
rows = [json.loads(l) for l in open(out) if '"hosts":{' not in l]
got = {(r["c"], r["cg"]): r["n"] for r in rows}
want = {("web-1", cut(base + "/machine.slice/machine-web\\x2d1.scope")): na,
        (id_[:12], cut(base + "/libpod-" + id_ + ".scope")): nb,
        ("", cut(mycg)): nh}
if got != want:
    print("# got  %s\n# want %s" % (got, want))
    sys.exit(1)
PY
	pass "spans grouped by container and cgroup: web-1 $NA, ${ID:0:12} $NB, the host ('', its own cgroup) $NH (rc $r1)" ||
	fail "spans grouped by container" "$(cat "$T_TMP/q1.out" "$T_TMP/q1.err")"
[ "$(grep -v '"hosts":{' "$T_TMP/q2.out")" = "{\"n\":$NA}" ] &&
	pass "spans where sp.container == \"web-1\": $NA (rc $r2)" ||
	fail "spans where sp.container" "$(cat "$T_TMP/q2.out" "$T_TMP/q2.err")"
ok "A's file removed (no warning)" bash -c "! grep -q 'cannot remove .*fay-' '$T_TMP/agent.log'"

# L: a small ring, written flat out before the agent's root scan finds it
FAY_RINGS=1 FAY_RING_KB=64 in_ctr "$CG_L" "$RL" --count $NL --service ctr-l --ready /w/ready \
	--hold /w/stop --rate 0
ok "L made its spans" wait_for 60 test -e "$RL/w/ready"
PL=$(host_pid "$RL")
ok "L's host pid found ($PL)" test -n "$PL"
ok "L found by the agent" wait_for 30 agent_log_has "process $PL (ctr-l) seen"
touch "$RL/w/stop"
ok "L gone" wait_for 30 agent_log_has "process $PL (ctr-l) gone (exited)"
line=$(grep "process $PL (ctr-l) gone (exited)" "$T_TMP/agent.log")
shipped=$(echo "$line" | sed -n 's/.*: \([0-9]*\) spans shipped.*/\1/p')
lost=$(echo "$line" | sed -n 's/.*lost: \([0-9]*\) ring overwrite.*/\1/p')
diag "L: $shipped shipped, $lost counted lost (ring overwrite) of $NL"
ok "L: the overwritten spans are counted: shipped + ring overwrite == $NL" \
	test "$((shipped + lost))" -eq $NL -a "${lost:-0}" -gt 0
ok "L: what was shipped is stored" wait_for 60 count_is ctr-l "$shipped"
touch "$RB/w/stop" "$T_TMP/h.stop"
stop_agent
ok "agent exits 0" test $? -eq 0
[ $T_FAILED -eq 0 ] || show_logs 40
done_testing
