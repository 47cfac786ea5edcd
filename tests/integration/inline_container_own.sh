#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Inline probes in every process of a command, in whatever root (issue
# #25): `fay query --probe-mode=inline -c CMD` where
#   - CMD starts one child in fay's own root and one in a chroot, the
#     first with its environment cleared (`env -i`: LD_PRELOAD lost) or
#     kept: each is held at its exec, gets the runtime at its entry point
#     (a host root's preloaded one is the same object) and a session of
#     its own: both counted;
#   - CMD itself execs into another root without forking (`chroot ROOT
#     prog`, `unshare -m --root=ROOT prog`, through `sh -c 'exec ...'`)
#     or with its environment cleared (`env -i prog`): its own process is
#     armed at its new image's entry point (main's build: the runtime it
#     preloaded cannot load there, fay waits 10 s for it and counts 0).
# Exact counts of ctr_work's calls from main()'s first instruction, the
# same as uprobe mode's in the same run; fay run --query too; fay killed
# (SIGKILL) at 6 moments of each kind: the program always runs to its
# end, nothing left stopped.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"

Q='from f in function("libc:getppid") where f.comm == "ctr_work" select { n: count() }'
N=2000
R=$T_TMP/root
H=$T_TMP/host
trap 't_cleanup' EXIT
ctr_root "$R"
mkdir -p "$H"

# both modes, the same command: n = want in each
both() {
	ctr_check uprobe "$1" "$2" "$3, uprobe"
	ctr_check inline "$1" "$2" "$3, inline"
}

# item 2: a child in fay's root (environment cleared, or kept) and one in
# a chroot
both "sh -c 'env -i $CW $H $N now & chroot $R /bin/ctr_work /w $N now & wait'" $((2 * N)) \
	"-c: a child in fay's root under env -i and one in a chroot"
c=$(grep -c "a descendant, inline with /lib/x86_64-linux-gnu/libc.so.6 " "$T_TMP/c.err")
k=$(grep -c "a descendant, inline with /proc/[0-9]*/root/" "$T_TMP/c.err")
# (env, ctr_work and chroot in fay's root; ctr_work in the chroot)
[ "$c" = 3 ] && [ "$k" = 1 ] && pass "each image armed at its entry point: 3 in fay's root, 1 in the chroot" ||
	fail "each image armed at its entry point: 3 in fay's root, 1 in the chroot" "$c, $k" "$(cat "$T_TMP/c.err")"
both "sh -c '$CW $H $N now & chroot $R /bin/ctr_work /w $N now & wait'" $((2 * N)) \
	"-c: a child in fay's root (its preload kept) and one in a chroot"

# item 3: the command itself execs into another root, or clears its
# environment, without forking
both "chroot $R /bin/ctr_work /w $N now" $N "-c 'chroot ROOT prog' (no fork)"
grep -Eq "process [0-9]+, a descendant, inline with /proc/[0-9]+/root/(usr/)?lib/x86_64-linux-gnu/libc.so.6 \(runtime loaded at its entry point in [0-9.]+ ms\): inline in 1 processes" \
	"$T_TMP/c.err" && pass "chroot: the command's own process armed in the root it entered" ||
	fail "chroot: the command's own process armed in the root it entered" "$(cat "$T_TMP/c.err")"
both "unshare -m --root=$R /bin/ctr_work /w $N now" $N "-c 'unshare -m --root=ROOT prog' (no fork)"
both "sh -c 'exec chroot $R /bin/ctr_work /w $N now'" $N "-c 'sh -c \"exec chroot ROOT prog\"' (no fork)"
both "env -i $CW $H $N now" $N "-c 'env -i prog' (its preload lost)"

# fay run --query, inline: the same through fay run's preload and hold
rm -f "$R/w/done"
a=$(timeout 120 nice -n 10 "$FAY" run --json --probe-mode=inline --query "$Q" -- chroot "$R" /bin/ctr_work /w $N now 2>"$T_TMP/c.err")
[ "$a" = "{\"n\":$N}" ] && pass "fay run --probe-mode=inline --query Q -- chroot ROOT prog: n = $N" ||
	fail "fay run --probe-mode=inline --query Q -- chroot ROOT prog: n = $N" "answer: $a" "$(cat "$T_TMP/c.err")"

# fay killed at 6 moments, each command: a program that started runs to
# its end, nothing left (stopped or running); a fay killed before it
# armed the command: its preloaded runtime holds main() up to 30 s
ours() {
	local p
	for p in $(pgrep -x ctr_work); do
		[ "/proc/$p/root" -ef "$R" ] || grep -qF "$H" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
	done
}
gone() { ! pgrep -f -- "$T_TMP" >/dev/null && [ -z "$(ours)" ]; }
for what in "chroot" "env -i and a chroot"; do
	case "$what" in
	chroot) K="sh -c 'touch $R/w/started; exec chroot $R /bin/ctr_work /w $N now'" ;;
	*) K="sh -c 'touch $R/w/started; env -i $CW $H $N now & chroot $R /bin/ctr_work /w $N now & wait'" ;;
	esac
	good=0
	for ms in 0 30 80 150 300 600; do
		rm -f "$R/w/done" "$R/w/started" "$H/done"
		nice -n 10 "$FAY" query --json --probe-mode=inline -c "$K" "$Q" >/dev/null 2>&1 &
		fp=$!
		sleep "$(printf '0.%03d' $ms)"
		kill -KILL $fp 2>/dev/null
		wait $fp 2>/dev/null
		if wait_for 70 gone && { [ ! -e "$R/w/started" ] || [ -s "$R/w/done" ]; } &&
		   { [ "$what" = chroot ] || [ ! -e "$R/w/started" ] || [ -s "$H/done" ]; }; then
			good=$((good + 1))
		else
			diag "$what: fay killed after $ms ms: $(ps -o pid,stat,args -C ctr_work,chroot,env | tail -4)"
			for p in $(ours); do kill -CONT "$p"; done
		fi
	done
	[ $good = 6 ] && pass "$what: fay SIGKILLed at 6 moments: each program that started ran to its end, none left" ||
		fail "$what: fay SIGKILLed at 6 moments: each program that started ran to its end, none left" "$good of 6"
done

ctr_none_left "$R" "$H"
done_testing
