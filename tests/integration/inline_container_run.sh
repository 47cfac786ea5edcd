#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes in a command's descendants in another root (issue #25):
# `fay query --probe-mode=inline -c CMD` and `fay run --probe-mode=inline
# --query Q -- CMD` where CMD starts a container: `unshare -f -p -m
# --mount-proc chroot ROOT prog`, `systemd-nspawn -D ROOT prog`, `podman
# run IMAGE prog`.  The runtime is preloaded into fay's child by a host
# path, which the container's process cannot open (and nspawn and podman
# clear the environment): the exec watch holds each descendant at its
# exec, fay loads the runtime at its entry point with ptrace and arms it
# with the query's maps, its threads writing a window of slots of their
# own, before its main() runs.  Exact counts of prog's calls from main()'s
# first instruction, the same as uprobe mode's in the same run (main's
# build counts 0 inline: ld.so cannot preload the runtime there); 50
# children started at once, each in the root, all counted; fay killed
# (SIGKILL) at 6 moments: the container's program always runs to its end,
# nothing left stopped.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"

Q='from f in function("libc:getppid") where f.comm == "ctr_work" select { n: count() }'
N=3000
R=$T_TMP/root
trap 'ctr_podman_clean; t_cleanup' EXIT
ctr_root "$R"

# the info line of a descendant armed inline in the container (the
# runtime's processes in fay's root are armed too: 2 or more at once)
said_inline() {
	grep -Eq "process [0-9]+, a descendant, inline with /proc/[0-9]+/root/(usr/)?lib/x86_64-linux-gnu/libc.so.6 \(runtime loaded at its entry point in [0-9.]+ ms\): inline in ([2-9]|[1-9][0-9]) processes" \
		"$T_TMP/c.err" && pass "$1: the note says inline in the container, and in 2 processes or more" ||
		fail "$1: the note says inline in the container, and in 2 processes or more" "$(cat "$T_TMP/c.err")"
}

U="unshare -f -p -m --mount-proc=$R/proc chroot $R /bin/ctr_work /w $N now"
ctr_check uprobe "$U" $N "-c 'unshare -f -p -m --mount-proc chroot ROOT prog', uprobe"
ctr_check inline "$U" $N "-c 'unshare -f -p -m --mount-proc chroot ROOT prog', inline"
said_inline "unshare, inline"

# fay run --query, inline: the same, through fay run's preload and hold
rm -f "$R/w/done"
a=$(timeout 120 nice -n 10 "$FAY" run --json --probe-mode=inline --query "$Q" -- $U 2>"$T_TMP/c.err")
[ "$a" = "{\"n\":$N}" ] && pass "fay run --probe-mode=inline --query Q -- unshare ... chroot ROOT prog: n = $N" ||
	fail "fay run --probe-mode=inline --query Q -- unshare ... chroot ROOT prog: n = $N" \
		"answer: $a" "$(cat "$T_TMP/c.err")"

if command -v systemd-nspawn >/dev/null; then
	S="systemd-nspawn -q -D $R --register=no --keep-unit --as-pid2 /bin/ctr_work /w $N now"
	ctr_check uprobe "$S" $N "-c 'systemd-nspawn -D ROOT prog' (its environment cleared), uprobe"
	ctr_check inline "$S" $N "-c 'systemd-nspawn -D ROOT prog' (its environment cleared), inline"
	said_inline "nspawn, inline"
else
	diag "systemd-nspawn is not installed (package systemd-container): no nspawn case"
fi

RP=$T_TMP/podman-root
if ctr_podman_image "$RP"; then
	P="podman ${CTR_PODMAN_OPTS[*]} run ${CTR_PODMAN_RUN[*]} -v $RP/w:/w $CTR_PODMAN_IMG /bin/ctr_work /w $N now"
	ctr_check uprobe "$P" $N "-c 'podman run IMAGE prog' (conmon daemonized; runc's child), uprobe"
	rm -f "$RP/w/done"
	ctr_check inline "$P" $N "-c 'podman run IMAGE prog' (conmon daemonized; runc's child), inline"
	said_inline "podman, inline"
	[ -s "$RP/w/done" ] && pass "the podman container ran to its end (inline)" ||
		fail "the podman container ran to its end (inline)" "$(cat "$T_TMP/c.err")"
else
	diag "no podman case: $CTR_PODMAN_WHY"
fi

# 50 children started at once, each chroot()ed into the root (a root of
# its own: another file system than fay's), each armed in its own
# window of slots: every call of every one counted, as uprobe counts
for i in $(seq 50); do mkdir -p "$R/w$i"; done
F="sh -c 'for i in \$(seq 50); do chroot $R /bin/ctr_work /w\$i 100 now & done; wait'"
ctr_check uprobe "$F" 5000 "50 children at once, each in the root, 100 calls each, uprobe"
ctr_check inline "$F" 5000 "50 children at once, each in the root, 100 calls each, inline"
k=$(grep -o "process [0-9]*, a descendant, inline with /proc/[0-9]*/root/" "$T_TMP/c.err" | sort -u | wc -l)
[ "$k" = 50 ] && pass "50 descendants armed inline in the root, each once" ||
	fail "50 descendants armed inline in the root, each once" "$k: $(grep -c inline "$T_TMP/c.err") lines"

# fay killed at 6 moments of an inline run: a program that started runs
# to its end every time (its done file), and nothing is left, stopped or
# running (a fay killed before it armed the command: the command's
# runtime holds its main() up to 30 s, then it runs on)
# this test's workloads: ctr_work processes whose root is $R
ours() {
	local p
	for p in $(pgrep -x ctr_work); do
		[ "/proc/$p/root" -ef "$R" ] && echo "$p"
	done
}
good=0
K="sh -c 'touch $R/w/started; exec $U'"
for ms in 0 30 80 150 300 600; do
	rm -f "$R/w/done" "$R/w/started"
	nice -n 10 "$FAY" query --json --probe-mode=inline -c "$K" "$Q" >/dev/null 2>&1 &
	fp=$!
	sleep "$(printf '0.%03d' $ms)"
	kill -KILL $fp 2>/dev/null
	wait $fp 2>/dev/null
	# (the shell, unshare and chroot name $R; ctr_work's root is $R)
	gone() { ! pgrep -f -- "$R" >/dev/null && [ -z "$(ours)" ]; }
	# (killed before it armed the command: the command's preloaded
	# runtime holds its main() up to 30 s, as fay run's does, then it
	# runs on)
	if wait_for 70 gone && { [ ! -e "$R/w/started" ] || [ -s "$R/w/done" ]; }; then
		good=$((good + 1))
	else
		diag "fay killed after $ms ms: $( [ -e "$R/w/started" ] && echo started) $( [ -s "$R/w/done" ] && echo done): $(ps -o pid,stat,args -C ctr_work,unshare,chroot | tail -4)"
		for p in $(ours); do kill -CONT "$p"; done
	fi
done
[ $good = 6 ] && pass "fay SIGKILLed at 6 moments: each program that started ran to its end, none left" ||
	fail "fay SIGKILLed at 6 moments: each program that started ran to its end, none left" "$good of 6"

ctr_none_left "$R" "$T_TMP"
done_testing
