#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Each process of an inline query is itself (issue #25): one
# `fay query -c CMD` whose command starts two containers (each in its own
# pid and mount namespaces with its own root, unshare + chroot, each in a
# cgroup named as a runtime names it: machined's machine-web\x2dPID.scope,
# podman's libpod-ID.scope) and a workload on the host, all feeding one
# query's maps.  fay tells each process's runtime its pid as fay numbers
# it and its cgroup (INL_PID), so that in inline mode as in uprobe mode:
#   - a query grouped by container counts each exactly (main's build: every
#     process had the command's cgroup: one row);
#   - s.pid is each process's host pid, s.vpid its pid in its namespace
#     (1 in a container; main's build: the command's, constants);
#   - s.ustack is named with each process's own mappings (the two
#     containers' libc and program load at other addresses, ASLR): one
#     stack, every frame named (with the runtime's getpid(), a
#     container's 1, the host's pid 1's maps named them: [unknown]).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"
ctr_two_cgroups fay-test
RA=$T_TMP/ra RB=$T_TMP/rb H=$T_TMP/h
stop3() { for d in "$RA/w" "$RB/w" "$H"; do touch "$d/stop"; done; }
trap 'stop3; sleep 0.3; ctr_two_cgroups_rm; t_cleanup' EXIT
ctr_root "$RA"
ctr_root "$RB"
mkdir -p "$H"
NA=300 NB=500 NH=200

# each in its cgroup (written by its shell before it execs on), waiting
# for go; calls, then waits for stop
ctr_three "$T_TMP/three.sh" "/w $NA" "/w $NB" "$H $NH"
C="sh $T_TMP/three.sh"

# run MODE QUERY: fay query -c "$C" in MODE; the three let go once ready,
# stopped a second after they called (their maps read meanwhile); the
# answer in $T_TMP/$MODE.out, the workloads' host pids in $T_TMP/pids
run() {
	local m=$1 q=$2 p
	rm -f "$RA"/w/{ready,go,done,stop} "$RB"/w/{ready,go,done,stop} "$H"/{ready,go,done,stop}
	(
		wait_for 60 test -s "$RA/w/ready" -a -s "$RB/w/ready" -a -s "$H/ready"
		for p in $(pgrep -x ctr_work); do
			{ [ "/proc/$p/root" -ef "$RA" ] || [ "/proc/$p/root" -ef "$RB" ] ||
			  grep -qF "$H" "/proc/$p/cmdline"; } 2>/dev/null && echo "$p"
		done | sort -n >"$T_TMP/pids"
		touch "$RA/w/go" "$RB/w/go" "$H/go"
		wait_for 60 test -s "$RA/w/done" -a -s "$RB/w/done" -a -s "$H/done"
		sleep 1
		stop3
	) &
	timeout 120 nice -n 10 "$FAY" query --json --probe-mode="$m" -c "$C" "$q" \
		>"$T_TMP/$m.out" 2>"$T_TMP/$m.err"
	wait
}

# by container: two containers and the host
want="{\"c\":\"\",\"n\":$NH}
{\"c\":\"${ID:0:12}\",\"n\":$NB}
{\"c\":\"$WEB\",\"n\":$NA}"
Q='from f in function("libc:getppid") where f.comm == "ctr_work" group f by f.container into g select { c: g.key, n: g.count() }'
for m in uprobe inline; do
	run $m "$Q"
	got=$(sort "$T_TMP/$m.out")
	[ "$got" = "$(sort <<<"$want")" ] &&
		pass "$m: one -c command, grouped by container: $WEB $NA, ${ID:0:12} $NB, the host $NH" ||
		fail "$m: one -c command, grouped by container" "got: $got" "want: $want" "$(cat "$T_TMP/$m.err")"
done

# s.pid and s.vpid: each process's own
Q='from f in function("libc:getppid") where f.comm == "ctr_work" group f by { p: f.pid, v: f.vpid } into g select { p: g.p, v: g.v, n: g.count() }'
for m in uprobe inline; do
	run $m "$Q"
	# the pids the rows name, and the workloads' own
	got=$(grep -o '"p":[0-9]*' "$T_TMP/$m.out" | cut -d: -f2 | sort -n | tr '\n' ' ')
	ones=$(grep -c "\"v\":1," "$T_TMP/$m.out")
	host=$(grep -c "\"v\":$(grep -o '"p":[0-9]*,"v":[0-9]*' "$T_TMP/$m.out" | awk -F'[:,]' '$2 == $4 { print $4 }' | head -1),\"n\":$NH}" "$T_TMP/$m.out")
	[ "$got" = "$(tr '\n' ' ' <"$T_TMP/pids")" ] && [ "$ones" = 2 ] && [ "$host" = 1 ] &&
		pass "$m: s.pid is each process's host pid ($got), s.vpid 1 in each container and the pid on the host" ||
		fail "$m: s.pid and s.vpid of each process" "got: $(cat "$T_TMP/$m.out")" \
			"workloads: $(cat "$T_TMP/pids")" "$(cat "$T_TMP/$m.err")"
done

# s.ustack: each stack named with its own process's maps
Q='from f in function("libc:getppid") where f.comm == "ctr_work" group f by f.ustack into g select { stack: g.key, n: g.count() }'
for m in uprobe inline; do
	run $m "$Q"
	n=$(grep -c . "$T_TMP/$m.out")
	[ "$n" = 1 ] && grep -q "\"n\":$((NA + NB + NH))}" "$T_TMP/$m.out" &&
	  ! grep -q unknown "$T_TMP/$m.out" && grep -Eq '"stack":"([^"]*;)?getppid"' "$T_TMP/$m.out" &&
		pass "$m: s.ustack of the three processes (other load addresses): one stack, every frame named, n = $((NA + NB + NH))" ||
		fail "$m: s.ustack of the three processes" "got: $(cat "$T_TMP/$m.out")" "$(cat "$T_TMP/$m.err")"
done

ctr_none_left "$RA" "$H"
ctr_none_left "$RB" "$H"
done_testing
