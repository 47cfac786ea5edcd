#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Containers in queries (issue #25 item 4): s.cgroup (the cgroup v2 path)
# and s.container (the container that path names).  Two containers (each
# in its own pid and mount namespaces with its own root, unshare +
# chroot) are put into cgroups named as the runtimes name them:
# systemd-nspawn/machined's machine-web\x2dPID.scope ("web-PID") and podman's
# libpod-ID.scope (ID's first 12 digits); a third workload runs on the
# host.  Each calls getppid() a known number of times: a query grouped by
# container counts each exactly; `where s.container == "web-PID"` counts
# one, compiled to a cgroup id comparison in the probe; a process's own
# function() query (uprobe and inline) knows its container too; and
# function("libc:getppid") in every process (item 2) counts the
# containers' calls, on their own copies of libc.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"
command -v python3 >/dev/null || skip_all "python3 is not installed"
ctr_two_cgroups fay-test
trap 'kill_all; ctr_two_cgroups_rm; t_cleanup' EXIT
kill_all() { for d in "$RA" "$RB" "$H"; do [ -d "$d/w" ] && touch "$d/w/stop"; done; sleep 0.2; }

RA=$T_TMP/ra RB=$T_TMP/rb H=$T_TMP/h
ctr_root "$RA"
ctr_root "$RB"
mkdir -p "$H/w"
NA=300 NB=500 NH=200

# start the three, A and B moved into their cgroups; pids in PA PB PH
start3() {
	ctr_start "$RA" $NA || return 1
	PA=$CPID
	ctr_start "$RB" $NB || return 1
	PB=$CPID
	rm -f "$H"/w/{ready,go,done,stop}
	timeout 300 nice -n 10 "$CW" "$H/w" $NH >/dev/null 2>&1 & PH=$!
	T_PIDS+=($PH)
	wait_for 30 test -s "$H/w/ready" || return 1
	echo "$PA" >"$CG_A/cgroup.procs" && echo "$PB" >"$CG_B/cgroup.procs"
}
go3() { touch "$RA/w/go" "$RB/w/go" "$H/w/go"; }
done3() { wait_for 60 test -s "$RA/w/done" -a -s "$RB/w/done" -a -s "$H/w/done"; }
stop3() {
	touch "$RA/w/stop" "$RB/w/stop" "$H/w/stop"
	wait_for 30 bash -c "! kill -0 $PA 2>/dev/null && ! kill -0 $PB 2>/dev/null && ! kill -0 $PH 2>/dev/null"
}
# query ARGS...: run fay query --json ARGS while the three call; output
# in $T_TMP/q.out, errors in $T_TMP/q.err
query() {
	local qp
	start3 || { fail "the workloads started" "$(cat "$T_TMP/ctr.out")"; return 1; }
	: >"$T_TMP/q.err"
	timeout 60 "$FAY" query --json "$@" >"$T_TMP/q.out" 2>"$T_TMP/q.err" & qp=$!
	wait_for 60 bash -c "grep -q attached '$T_TMP/q.err' || ! kill -0 $qp"
	go3
	done3
	kill -INT $qp 2>/dev/null
	wait $qp
	stop3
}

query 'from s in syscall("getppid") where s.comm == "ctr_work" group s by s.container into g select { c: g.key, n: g.count() }'
want="{\"c\":\"\",\"n\":$NH}
{\"c\":\"${ID:0:12}\",\"n\":$NB}
{\"c\":\"$WEB\",\"n\":$NA}"
[ "$(sort "$T_TMP/q.out")" = "$(echo "$want" | sort)" ] &&
	pass "grouped by container: $WEB (machined's name) $NA, ${ID:0:12} (podman's id) $NB, the host ('') $NH" ||
	fail "grouped by container" "got: $(cat "$T_TMP/q.out")" "want: $want" "$(cat "$T_TMP/q.err")"

# item 2: function("libc:...") in every process probes the containers'
# own libc files too (two more files here: each root has its own copy)
query 'from f in function("libc:getppid") where f.comm == "ctr_work" group f by f.container into g select { c: g.key, n: g.count() }'
[ "$(sort "$T_TMP/q.out")" = "$(echo "$want" | sort)" ] &&
	pass "function(\"libc:getppid\") in every process, by container: $NA, $NB, $NH" ||
	fail "every process, by container" "got: $(cat "$T_TMP/q.out")" "want: $want" "$(cat "$T_TMP/q.err")"
nf=$(grep -o 'and [0-9]* other files\? of that name mapped on this host ([0-9]* files)' "$T_TMP/q.err" |
	grep -o '([0-9]* files)' | tr -dc 0-9)
ok "the attach line says how many files were probed (${nf:-none}: the host's libc and each root's copy)" \
	test "${nf:-0}" -ge 3

query 'from s in syscall("getppid") where s.comm == "ctr_work" group s by s.cgroup into g select { c: g.key, n: g.count() }'
python3 - "$T_TMP/q.out" "/fay-test-$$" "$ID" $NA $NB "$CG_A" "$BASE" <<'PY' && pass "grouped by cgroup: the paths (a long one cut to its end), counted exactly" || fail "grouped by cgroup" "$(cat "$T_TMP/q.out")"
import json, sys
rows = {r["c"]: r["n"] for r in map(json.loads, open(sys.argv[1]))}
base, id_, na, nb = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
assert rows.get(base + sys.argv[6][len(sys.argv[7]):]) == na, rows
full = base + "/libpod-" + id_ + ".scope"	# longer than a string slot (64):
assert rows.get("..." + full[-60:] if len(full) > 63 else full) == nb, rows	# its end
PY

query "from s in syscall(\"getppid\") where s.container == \"$WEB\" select { n: count() }"
ok "where s.container == \"$WEB\": $NA" test "$(cat "$T_TMP/q.out")" = "{\"n\":$NA}"
"$FAY" query --emit=ir "from s in syscall(\"getppid\") where s.container == \"$WEB\" select { n: count() }" >"$T_TMP/ir" 2>&1
grep -q get_current_cgroup_id "$T_TMP/ir" && ! grep -qi "$WEB" "$T_TMP/ir" &&
	pass "the filter runs in the probe: bpf_get_current_cgroup_id() against the cgroup's id (no string)" ||
	fail "the filter in the probe" "$(head -40 "$T_TMP/ir")"
# the BPF the kernel gets: the helper's result compared with the id of
# $WEB's cgroup (the inode of its directory), a jump past the count
"$FAY" query --emit=bpf "from s in syscall(\"getppid\") where s.container == \"$WEB\" select { n: count() }" >"$T_TMP/bpf" 2>&1
cgid=$(printf '0x%x' "$(stat -c %i "$CG_A")")
grep -q 'call bpf_get_current_cgroup_id' "$T_TMP/bpf" && grep -q "if r[0-9]* != $cgid goto" "$T_TMP/bpf" &&
	pass "the generated BPF compares bpf_get_current_cgroup_id() with $WEB's cgroup id ($cgid)" ||
	fail "the generated BPF" "want a compare with $cgid" "$(head -20 "$T_TMP/bpf")"
"$FAY" query 'from s in syscall("getppid") where s.container == "no-such-ctr" select { n: count() }' >/dev/null 2>"$T_TMP/e"
grep -q 'no container is named "no-such-ctr"' "$T_TMP/e" &&
	pass "a container no cgroup names is refused, saying how names are read" ||
	fail "unknown container" "$(cat "$T_TMP/e")"

# a process's own function() query: uprobe and inline know its container
for m in uprobe inline; do
	start3 || { fail "the workloads started"; break; }
	: >"$T_TMP/q.err"
	timeout 60 "$FAY" query --json --probe-mode=$m -p "$PA" \
		'from f in function("libc:getppid") group f by f.container into g select { c: g.key, n: g.count() }' \
		>"$T_TMP/q.out" 2>"$T_TMP/q.err" & qp=$!
	wait_for 60 bash -c "grep -q attached '$T_TMP/q.err' || ! kill -0 $qp"
	go3; done3
	kill -INT $qp 2>/dev/null; wait $qp
	stop3
	[ "$(cat "$T_TMP/q.out")" = "{\"c\":\"$WEB\",\"n\":$NA}" ] &&
		pass "$m: -p PID, function(\"libc:getppid\") by container: $WEB $NA" ||
		fail "$m: by container" "$(cat "$T_TMP/q.out" "$T_TMP/q.err")"
done
done_testing
