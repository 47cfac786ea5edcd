#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Probes on a containerized process resolve its own files (issue #25
# item 1): a workload in its own pid and mount namespaces with its own
# COPY of libc (another inode than the host's) calls getppid() exactly N
# times; -p PID and process(PID) queries count N in uprobe, auto and
# inline mode (inline: the runtime copied into its root and loaded with
# ptrace).  Before, fay attached to the host's libc and counted 0,
# silently.  s.pid is the host pid and s.vpid the pid in its namespace
# (item 5) in both modes.  Three runtimes: unshare + chroot (a root under
# fay's), systemd-nspawn (pivot_root: reached only through
# /proc/PID/root) and podman with runc (an image imported from a root
# built here; its files in podman's storage).  The
# host's own processes are the other tests'.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"

N=700
# MODE QUERY what
check() {
	local a
	a=$(ctr_count "$R" $N "$1" "$2")
	[ "$a" = "{\"n\":$N}" ] && pass "$CTR_RUNTIME: $3: n = $N" ||
		fail "$CTR_RUNTIME: $3: n = $N" "answer: $a" "$(cat "$T_TMP/q.err")"
}

battery() {
	export CTR_RUNTIME=$1
	R=$T_TMP/root.$1
	ctr_root "$R"
	# (podman's copy is in its storage, not in R: looked at once it runs)
	[ "$1" = podman ] ||
		ok "$1: the container's libc is another file than the host's" \
			test "$(stat -c %i "$R/usr/lib/x86_64-linux-gnu/libc.so.6")" != \
			"$(stat -L -c %i /lib/x86_64-linux-gnu/libc.so.6)"
	check -p:uprobe 'from f in function("libc:getppid") select { n: count() }' \
		"-p PID, function(\"libc:getppid\"), uprobe"
	# the file the note names ("uprobe PATH:getppid+0x..."): the container's
	# copy
	local up
	up=$(grep -o 'uprobe [^ ]*:getppid' "$T_TMP/q.err" | head -1 | sed 's/^uprobe //; s/:getppid$//')
	# (its own path when fay reaches it so, else through its root)
	[ "$up" = "$R/usr/lib/x86_64-linux-gnu/libc.so.6" ] ||
		[[ $up =~ ^/proc/[0-9]+/root/usr/lib/x86_64-linux-gnu/libc.so.6$ ]] &&
		pass "$1: the uprobe is on the container's libc ($up)" ||
		fail "$1: the container's libc named" "$(cat "$T_TMP/q.err")"
	check uprobe 'from f in process(__PID__).function("libc:getppid") select { n: count() }' \
		"process(PID).function(\"libc:getppid\"), uprobe"
	check auto 'from f in process(__PID__).function("libc:getppid") select { n: count() }' \
		"process(PID).function(\"libc:getppid\"), auto"
	check -p:inline 'from f in function("libc:getppid") select { n: count() }' \
		"-p PID, function(\"libc:getppid\"), inline (runtime copied into its root, loaded with ptrace)"
	grep -q "inline, runtime loaded with ptrace" "$T_TMP/q.err" &&
		pass "$1: inline: the note says the runtime was loaded" ||
		fail "$1: inline note" "$(cat "$T_TMP/q.err")"
	check inline 'from f in process(__PID__).function("libc:getppid") select { n: count() }' \
		"process(PID).function(\"libc:getppid\"), inline"

	# item 5: s.pid is the host pid, s.vpid its pid in its namespace,
	# alike in uprobe and inline mode
	local m a
	for m in uprobe inline; do
		a=$(ctr_count "$R" 10 "$m" 'from f in process(__PID__).function("libc:getppid") select { n: count(), pid: max(f.pid), vpid: max(f.vpid) }')
		read -r hp vp <"$T_TMP/cpid"
		[ "$a" = "{\"n\":10,\"pid\":$hp,\"vpid\":$vp}" ] && [ "$hp" != "$vp" ] &&
			pass "$1: $m: s.pid is the host pid ($hp), s.vpid its own ($vp)" ||
			fail "$1: $m: s.pid and s.vpid" "answer: $a, want pid $hp vpid $vp" "$(cat "$T_TMP/q.err")"
	done

	ctr_start "$R" 0 || { fail "$1: workload started" "$(cat "$T_TMP/ctr.out")"; return; }
	ok "$1: its pid inside its namespace ($CVPID) is not its host pid ($CPID)" \
		test "$CVPID" != "$CPID"
	[ "$1" = podman ] &&
		ok "podman: the container's libc is another file than the host's" \
			test "$(stat -L -c %i "/proc/$CPID/root/usr/lib/x86_64-linux-gnu/libc.so.6")" != \
			"$(stat -L -c %i /lib/x86_64-linux-gnu/libc.so.6)"
	# SPEC WANT WHAT: a 100 ms query on SPEC in it, its stderr has WANT
	one() {
		timeout 30 "$FAY" query --json -p "$CPID" \
			"from f in function(\"$2\") select { n: count() } for 100ms" \
			>"$T_TMP/e.out" 2>"$T_TMP/e.err"
		grep -q "$3" "$T_TMP/e.err" && pass "$1: $4" || fail "$1: $4" "$(cat "$T_TMP/e.err")"
	}
	one "$1" /usr/bin/python3:main "in the file system of pid $CPID" \
		"a file the host has but the container lacks is refused, naming its root"
	one "$1" /bin/ctr_work:main "/proc/$CPID/root/bin/ctr_work:main" \
		"a program by its path in the container resolves in its root"
	ctr_go "$R"; ctr_stop "$R"
	wait_for 30 bash -c "! kill -0 $CPID"
	# (podman's root is in its storage, gone with the container: not
	# looked at)
	[ "$1" = podman ] && return
	ls "$R"/run/fay/libfay-probe.* "$R"/tmp/libfay-probe.* >/dev/null 2>&1 &&
		fail "$1: the runtime's copies are removed once loaded" "$(ls "$R/run/fay" "$R/tmp")" ||
		pass "$1: the runtime's copies are removed once loaded"
}

battery unshare
if command -v systemd-nspawn >/dev/null; then
	battery nspawn
else
	diag "systemd-nspawn is not installed (package systemd-container): no nspawn case"
fi
# podman (runc), from an image imported from a root built here (no
# registry): its files in podman's storage, reached through /proc/PID/root
trap 'ctr_podman_clean; t_cleanup' EXIT
if ctr_podman_image "$T_TMP/podman-root"; then
	battery podman
else
	diag "no podman case: $CTR_PODMAN_WHY"
fi
done_testing
