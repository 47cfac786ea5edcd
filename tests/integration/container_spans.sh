#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Spans out of containers with no set-up (issue #25 item 3).  libfay in a
# container writes its shm file into the container's own /dev/shm: a
# tmpfs of the container's mount namespace, that the host's agent never
# sees at its own /dev/shm.  Two containers, each in its own pid and
# mount namespaces with its own root and a libfay program (span_producer)
# in it: A with unshare + chroot and a private tmpfs on its /dev/shm,
# started after the agent (found by the agent's root scan), in a cgroup
# named as systemd-nspawn/machined name theirs (machine-web\x2d1.scope);
# B with systemd-nspawn (its own /dev/shm), started before the agent, in a
# cgroup named as podman's (libpod-ID.scope).  A host process writes into
# the agent's --shm-dir.  Every span of each is stored exactly once by the
# real collector, each container's with its container tag
# (container.name=web-1, container.id=ID, OpenTelemetry's keys), the
# host's with none; the files are removed once drained.  And a container
# whose /dev/shm is a symbolic link to a host directory holding a live
# libfay file: the link resolves inside the container's root, nothing of
# the host directory is read.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"
. "$(dirname "$0")/agent_tools/lib.sh"
ctr_span_needs
ctr_cgroup_base fay-spans
HAVE_NSPAWN=1
command -v systemd-nspawn >/dev/null || HAVE_NSPAWN=0

CG_A=$BASE/machine.slice/'machine-web\x2d1.scope'
CG_B=$BASE/libpod-$ID.scope
CG_C=$BASE/c.scope
mkdir -p "$CG_A" "$CG_B" "$CG_C" || skip_all "cannot make cgroups under $CGR"
cg_cleanup() {
	local d
	for d in "$CG_A" "$CG_B" "$CG_C"; do
		# what is left in them (nspawn's payload cgroup too) is ours
		for p in $(cat "$d"/cgroup.procs "$d"/*/cgroup.procs 2>/dev/null); do kill "$p" 2>/dev/null; done
	done
	sleep 0.2
	for d in "$CG_A"/* "$CG_B"/* "$CG_A" "$CG_B" "$CG_C" "$BASE/machine.slice" "$BASE"; do
		[ -d "$d" ] && rmdir "$d" 2>/dev/null
	done
}
trap 'for r in "$RA" "$RB" "$RC"; do touch "$r/w/stop" 2>/dev/null; done; cg_cleanup; t_cleanup' EXIT

NA=1500 NB=2500 NH=700
SP=$TOOLS/span_producer
RA=$T_TMP/ra RB=$T_TMP/rb RC=$T_TMP/rc
ctr_span_roots "$RA" "$RB" "$RC"

# the real collector
ok "collector up" ctr_collector

# producer args for a container: N spans, service S, ids into /w/ids,
# wait for /w/stop before exiting (so it is alive when found)
pargs() { echo "--count $1 --service $2 --ids /w/ids --ready /w/ready --hold /w/stop --rate 2000"; }

# B: systemd-nspawn, in podman's cgroup, before the agent
start_b() {
	bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$CG_B" \
		timeout 300 nice -n 10 systemd-nspawn -q -D "$RB" --register=no --keep-unit \
		--setenv=FAY_RINGS=$FAY_RINGS --setenv=FAY_RING_KB=$FAY_RING_KB \
		--as-pid2 /bin/span_producer $(pargs $NB ctr-b) >"$T_TMP/b.out" 2>&1 &
	T_PIDS+=($!)
}
if [ "$HAVE_NSPAWN" = 1 ]; then
	start_b
	ok "B (systemd-nspawn) made its spans before the agent started" wait_for 60 test -e "$RB/w/ready"
else
	diag "systemd-nspawn is not installed (package systemd-container): unshare only"
fi

# only this test's containers (others run beside it on the machine)
AGENT_CONTAINERS="--containers-in /fay-spans-$$" start_agent

# A: unshare + chroot, its own tmpfs on /dev/shm, in machined's cgroup,
# after the agent
bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$CG_A" \
	timeout 300 nice -n 10 unshare -p -m -f --mount-proc="$RA/proc" \
	sh -c 'mount -t tmpfs -o mode=1777,size=64m fayshm "$0/dev/shm" && exec chroot "$0" "$@"' \
	"$RA" /bin/span_producer $(pargs $NA ctr-a) >"$T_TMP/a.out" 2>&1 &
T_PIDS+=($!)
ok "A (unshare + chroot + tmpfs) made its spans" wait_for 60 test -e "$RA/w/ready"
ok "A's file is in its own tmpfs: not in the root directory under it" \
	bash -c "! ls '$RA'/dev/shm/fay-*.shm >/dev/null 2>&1"

# the host's process, in the agent's --shm-dir
produce --count $NH --service host-p --ids "$T_TMP/ids.h"

# C: /dev/shm is a link to a host directory where a host process keeps a
# live file; resolved in C's root the link leads to C's own (empty)
# directory of that name
HIDDEN=$T_TMP/hidden
mkdir -p "$HIDDEN" "$RC$HIDDEN"
FAY_SHM_DIR=$HIDDEN "$SP" --count 300 --service hidden --hold "$T_TMP/hidden.stop" &
T_PIDS+=($!)
rmdir "$RC/dev/shm"
ln -s "$HIDDEN" "$RC/dev/shm"
ok "a live libfay file in the host directory" wait_for 30 bash -c "ls '$HIDDEN'/fay-*.shm"
bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$CG_C" \
	timeout 300 nice -n 10 unshare -p -m -f --mount-proc="$RC/proc" chroot "$RC" /bin/ctr_work /w 0 \
	>"$T_TMP/c.out" 2>&1 &
T_PIDS+=($!)
ok "C runs" wait_for 30 test -s "$RC/w/ready"

# spans of service S in the store, as "span-id tags-json" lines
spans_of() {
	curl -sf "http://127.0.0.1:$HTTP/api/v2/traces?serviceName=$1&limit=100000&lookback=86400000" |
		python3 -c '
import json, sys
for t in json.load(sys.stdin):
    for s in t:
        print(s["id"], json.dumps({k: v for k, v in s.get("tags", {}).items() if k.startswith("container")}, sort_keys=True))'
}
count_of() { spans_of "$1" | wc -l; }
count_is() { [ "$(count_of "$1")" -eq "$2" ]; }
# the spans of S stored once each, every id of IDS, each with tags TAGS
exactly() {
	local s=$1 ids=$2 tags=$3
	spans_of "$s" >"$T_TMP/got.$s"
	awk '{print $1}' "$T_TMP/got.$s" | sort >"$T_TMP/gotids.$s"
	sort -u "$ids" >"$T_TMP/want.$s"
	cmp -s "$T_TMP/gotids.$s" "$T_TMP/want.$s" || {
		echo "# $s: want $(wc -l <"$T_TMP/want.$s") ids, stored $(wc -l <"$T_TMP/gotids.$s")"
		return 1
	}
	[ "$(cut -d' ' -f2- "$T_TMP/got.$s" | sort -u)" = "$tags" ] || {
		echo "# $s: tags $(cut -d' ' -f2- "$T_TMP/got.$s" | sort | uniq -c | head -3)"
		return 1
	}
}

ok "A: $NA spans stored" wait_for 60 count_is ctr-a $NA
ok "A: each exactly once, every one tagged container.name=web-1" \
	exactly ctr-a "$RA/w/ids" '{"container.name": "web-1"}'
if [ "$HAVE_NSPAWN" = 1 ]; then
	ok "B: $NB spans stored" wait_for 60 count_is ctr-b $NB
	ok "B: each exactly once, every one tagged container.id=$ID" \
		exactly ctr-b "$RB/w/ids" "{\"container.id\": \"$ID\"}"
fi
ok "host: $NH spans stored" wait_for 60 count_is host-p $NH
ok "host: each exactly once, no container tag" exactly host-p "$T_TMP/ids.h" '{}'
ok "the agent logged A's directory through its root" \
	agent_log_has "root/dev/shm: a container's shm directory, watched"
ok "and A's process by its host pid, its own pid and its container" \
	bash -c "grep -q 'process [0-9]* (ctr-a) seen: /proc/[0-9]*/root/dev/shm/fay-[0-9]*-.*container.name web-1, pid [0-9]* in its namespace' '$T_TMP/agent.log'"

# the files go once their processes end and their records are spooled
touch "$RA/w/stop" "$RB/w/stop"
ok "A's process gone, its file removed from its tmpfs" \
	wait_for 30 agent_log_has "(ctr-a) gone (exited)"
[ "$HAVE_NSPAWN" = 1 ] && ok "B's process gone, its file removed" \
	wait_for 30 bash -c "! ls '$RB'/dev/shm/fay-*.shm >/dev/null 2>&1 && grep -q '(ctr-b) gone' '$T_TMP/agent.log'"

ok "C's /dev/shm link followed inside C's root: its own directory watched" \
	wait_for 30 bash -c "grep -c \"root/dev/shm: a container's shm directory, watched\" '$T_TMP/agent.log' | grep -qx $((HAVE_NSPAWN ? 3 : 2))"
ok "C's /dev/shm link to a host directory: nothing of it read" \
	test "$(grep -c '(hidden)' "$T_TMP/agent.log")" -eq 0 -a "$(count_of hidden)" -eq 0
touch "$T_TMP/hidden.stop" "$RC/w/go" "$RC/w/stop"
ok "stats: container directories looked into" \
	bash -c "grep -q '\"containers\":{\"looked_into\":true' '$STATE/stats.json'"
stop_agent
ok "agent exits 0" test $? -eq 0
[ $T_FAILED -eq 0 ] || show_logs 40
done_testing
