#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A command fay starts whose traced program is a DESCENDANT, in another
# root and often another pid namespace (issue #25): `fay query -c
# 'unshare -f -p -m --mount-proc chroot ROOT prog'` (prog is the fork of
# unshare's child), `-c 'systemd-nspawn -D ROOT prog'` (nspawn forks its
# container) and `-c 'podman run IMAGE prog'` (the container's process is
# the runtime's child, whose parent conmon daemonized: not even a
# descendant of fay's child by parentage, only by fork).  -c means the
# command and every process it forks: the exec watch follows forks in
# the kernel, holds each descendant at its exec and probes the file its
# root has, on that process alone.  Exact counts of prog's calls from
# main()'s first instruction (ctr_work ... now), in uprobe and auto mode;
# main counts 0 (only fay's child, unshare or podman, is probed).  The
# host's commands keep their answer; nothing is left stopped.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"

trap 'ctr_podman_clean; t_cleanup' EXIT
R=$T_TMP/root
ctr_root "$R"
N=3000
Q='from f in function("libc:getppid") where f.comm == "ctr_work" select { n: count() }'


ctr_check uprobe "unshare -f -p -m --mount-proc=$R/proc chroot $R /bin/ctr_work /w $N now" $N \
	"-c 'unshare -f -p -m --mount-proc chroot ROOT prog' (a fork in a new pid namespace), uprobe"
grep -Eq "process [0-9]+, a descendant, started with /proc/[0-9]+/root/(usr/)?lib/x86_64-linux-gnu/libc.so.6" \
	"$T_TMP/c.err" && pass "the note names the descendant and its root's libc" ||
	fail "the note names the descendant and its root's libc" "$(cat "$T_TMP/c.err")"
ctr_check auto "unshare -f -p -m --mount-proc=$R/proc chroot $R /bin/ctr_work /w $N now" $N \
	"-c 'unshare -f -p -m --mount-proc chroot ROOT prog', auto"
# two generations of forks through a shell, each its own process
ctr_check uprobe "sh -c 'sh -c \"chroot $R /bin/ctr_work /w $N now; true\"; true'" $N \
	"-c \"sh -c 'sh -c \\\"chroot ROOT prog; true\\\"; true'\" (a grandchild), uprobe"

if command -v systemd-nspawn >/dev/null; then
	ctr_check uprobe "systemd-nspawn -q -D $R --register=no --keep-unit --as-pid2 /bin/ctr_work /w $N now" $N \
		"-c 'systemd-nspawn -D ROOT prog' (pivot_root, its own pid namespace), uprobe"
else
	diag "systemd-nspawn is not installed (package systemd-container): no nspawn case"
fi

# podman: an image imported from a root built here (no registry); the
# container's process is runc's child under conmon, which daemonized
RP=$T_TMP/podman-root
if ctr_podman_image "$RP"; then
	rm -f "$RP/w/done"
	ctr_check uprobe "podman ${CTR_PODMAN_OPTS[*]} run ${CTR_PODMAN_RUN[*]} -v $RP/w:/w $CTR_PODMAN_IMG /bin/ctr_work /w $N now" $N \
		"-c 'podman run IMAGE prog' (conmon daemonized; runc's child), uprobe"
	# its own calls are in the container: the answer's proof is ctr_work's done file
	[ "$(cat "$RP/w/done" 2>/dev/null)" != "" ] && pass "the podman container ran to its end" ||
		fail "the podman container ran to its end" "$(cat "$T_TMP/c.err")"
else
	diag "no podman case: $CTR_PODMAN_WHY"
fi

# the host's commands: a forked child with the host's libc, and fay's
# own child alone (the follow map changes neither)
D=$T_TMP/host
mkdir -p "$D"
ctr_check uprobe "sh -c '$CW $D 2000 now; true'" 2000 "a host child of the command (sh -c 'prog; true'), uprobe"
ctr_check uprobe "$CW $D 2000 now" 2000 "the host's command itself, uprobe"

# nothing left stopped: no ctr_work of ours is left
ctr_none_left "$R" "$T_TMP"
done_testing
